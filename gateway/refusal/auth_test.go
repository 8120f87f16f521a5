package refusal

import (
	"encoding/json"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

func TestAuthError(t *testing.T) {
	body := AuthError([]byte(`"a-1"`), []policy.Reason{{Code: "insufficient_scope", Cause: "Tool \"t\" needs the scopes \"x\"", Fix: "Ask for them", Rights: []string{"x"}}}, "d1")
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int     `json:"code"`
			Message string  `json:"message"`
			Data    Details `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	d := r.Error.Data.Error
	if r.JSONRPC != "2.0" || string(r.ID) != `"a-1"` || r.Error.Code != CodeUnauthorized || r.Error.Message != `Tool "t" needs the scopes "x". Ask for them.` ||
		d.Code != "insufficient_scope" || d.DecisionID != "d1" || len(d.Rights) != 1 || d.Rights[0] != "x" {
		t.Errorf("%s", body)
	}
	// A tool error carries the missing rights too.
	var tr struct {
		Result struct {
			StructuredContent Details `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(ToolError([]byte("1"), []policy.Reason{{Code: "missing_rights", Cause: "c", Rights: []string{"a", "b"}}}, ""), &tr); err != nil {
		t.Fatal(err)
	}
	if got := tr.Result.StructuredContent.Error.Rights; len(got) != 2 {
		t.Errorf("rights %q", got)
	}
}
