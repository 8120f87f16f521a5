package config_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/config/internal/refgen"
	"github.com/mcpgate/mcpgate/internal/golden"
)

const referencePath = "../docs/reference/configuration.md"

// TestConfigurationReference checks that docs/reference/configuration.md
// is what the doc comments of the config types generate.
func TestConfigurationReference(t *testing.T) {
	got, err := refgen.Generate("..")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, referencePath, got, "go generate ./config")
}
