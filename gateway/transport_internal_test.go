package gateway

import (
	"strings"
	"testing"
)

// TestFieldRulesLowerCase: headerFaults indexes the header map by these
// names directly, so they must be lower case as Header keys are.
func TestFieldRulesLowerCase(t *testing.T) {
	for _, f := range fieldRules {
		if f.name != strings.ToLower(f.name) {
			t.Errorf("field rule %q is not lower case", f.name)
		}
	}
}
