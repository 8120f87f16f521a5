package refusal

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

func TestToolError(t *testing.T) {
	reasons := []policy.Reason{
		{Code: "missing_rights", Cause: "You lack bookings:write", Fix: "Ask an administrator for bookings:write", NextTool: "get_booking"},
		{Code: "tool_hidden", Cause: "hidden"},
	}
	body := ToolError([]byte(`"r-1"`), reasons, "d1")
	var r struct {
		ID     string `json:"id"`
		Result struct {
			Content           []struct{ Type, Text string }
			StructuredContent Details `json:"structuredContent"`
			IsError           bool    `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	text := r.Result.Content[0].Text
	first, last, _ := strings.Cut(text, "\n")
	if first != "Error: You lack bookings:write. Fix: Ask an administrator for bookings:write. Next: call get_booking." {
		t.Errorf("first line %q", first)
	}
	var d Details
	if err := json.Unmarshal([]byte(last), &d); err != nil || d.Error.Code != "missing_rights" || d.Error.DecisionID != "d1" || len(d.Error.More) != 1 || d.Error.More[0] != "tool_hidden" {
		t.Errorf("details %q: %+v %v", last, d, err)
	}
	sc, _ := json.Marshal(r.Result.StructuredContent)
	if r.ID != "r-1" || !r.Result.IsError || string(sc) != last {
		t.Errorf("structuredContent %s differs from the text's JSON %s", sc, last)
	}
}

func TestToolErrorWithoutReasons(t *testing.T) {
	body := string(ToolError([]byte("1"), nil, ""))
	if !strings.Contains(body, `"code":"denied"`) || !strings.Contains(body, `Error: The gateway's policy refused this request.`) {
		t.Errorf("fallback refusal: %s", body)
	}
}

func TestRPCErrorCodes(t *testing.T) {
	for code, want := range map[string]int{
		"method_not_allowed": -32601,
		"tool_not_declared":  -32602,
		"prompt_hidden":      -32602,
		"resource_hidden":    -32002,
		"anything_else":      -32600,
	} {
		var r struct {
			ID    int `json:"id"`
			Error struct {
				Code    int     `json:"code"`
				Message string  `json:"message"`
				Data    Details `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(RPCError([]byte("7"), []policy.Reason{{Code: code, Cause: "c", Fix: "f"}}, "d"), &r); err != nil {
			t.Fatal(err)
		}
		if r.ID != 7 || r.Error.Code != want || r.Error.Message != "c. f." || r.Error.Data.Error.Code != code {
			t.Errorf("%s: %+v", code, r)
		}
	}
}
