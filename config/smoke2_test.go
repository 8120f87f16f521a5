package config

import (
	"fmt"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

func TestSmoke2(t *testing.T) {
	for _, d := range []policy.ToolDeclaration{
		{Effect: "reed"},
		{},
		{Effect: "read", Rights: []string{"a", "a", ""}},
		{Effect: "read", UntrustedText: []string{"a..b", "[*]"}, ResultFields: []string{"x y"}},
	} {
		for _, e := range policy.ValidateDeclarations("u", map[string]policy.ToolDeclaration{"t": d}) {
			fmt.Printf("%q\n", e.Error())
		}
	}
}
