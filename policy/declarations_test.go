package policy

import (
	"strings"
	"testing"
)

func TestValidateDeclarations(t *testing.T) {
	if errs := ValidateDeclarations("crm", testDeclarations["crm"]); errs != nil {
		t.Errorf("valid declarations refused: %v", errs)
	}
	if errs := ValidateDeclarations("crm", nil); errs != nil {
		t.Errorf("no declarations refused: %v", errs)
	}
	tests := []struct {
		name string
		decl ToolDeclaration
		want []string // one error per entry, each containing the text
	}{
		{name: "effect missing", decl: ToolDeclaration{}, want: []string{"/effect"}},
		{name: "effect unknown", decl: ToolDeclaration{Effect: "readonly"}, want: []string{"/effect"}},
		{name: "empty right", decl: ToolDeclaration{Effect: EffectRead, Rights: []string{""}}, want: []string{"/rights/0"}},
		{name: "duplicate right", decl: ToolDeclaration{Effect: EffectRead, Rights: []string{"a", "a"}}, want: []string{"/rights"}},
		{name: "bad paths", decl: ToolDeclaration{Effect: EffectRead, UntrustedText: []string{"notes", "items[*].comment", "a..b"}, ResultFields: []string{"[0].title", "x[", ".y", "$.z"}},
			want: []string{"/result_fields/1", "/result_fields/2", "/result_fields/3", "/untrusted_text/2"}},
		{name: "everything at once", decl: ToolDeclaration{Effect: "x", Rights: []string{""}, UntrustedText: []string{"a b"}}, want: []string{"/effect", "/rights/0", "/untrusted_text/0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateDeclarations("crm", map[string]ToolDeclaration{"tool_a": tt.decl})
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors %v, want %d", len(errs), errs, len(tt.want))
			}
			for i, err := range errs {
				if !strings.HasPrefix(err.Error(), `upstream "crm": tool "tool_a": `) || !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("error %d: %v, want it to name %s", i, err, tt.want[i])
				}
			}
		})
	}

	errs := ValidateDeclarations("crm", map[string]ToolDeclaration{"": {Effect: EffectRead}, "b": {Effect: "?"}})
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "tool name is empty") || !strings.Contains(errs[1].Error(), `tool "b"`) {
		t.Errorf("got %v", errs)
	}
}
