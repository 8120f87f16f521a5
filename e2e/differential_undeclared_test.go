package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/policy"
)

// TestDifferentialUndeclaredConfirm: an upstream with undeclared_tools:
// confirm (the one-line mode's rule) behind the standalone proxy and
// behind Envoy + ext_proc. Both list its undeclared tools with
// confirm_action, answer a call of one with a preview (nothing upstream),
// and run it exactly once on confirm_action. The demo upstream beside it
// keeps refusing its undeclared tool, saying what to declare.
func TestDifferentialUndeclaredConfirm(t *testing.T) {
	up := demo.New(demo.Options{})
	e := startDifferential(t, differentialUpstream{name: "oneline", handler: up.Handler(), undeclared: policy.UndeclaredConfirm,
		tools: map[string]policy.ToolDeclaration{demo.ToolFindCustomers: {Effect: policy.EffectRead}}})

	listBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
	list, _ := e.both(t, "oneline", toHeader(v26("tools/list", "")), listBody)
	for _, want := range []string{`"name":"find_customers"`, `"name":"cancel_booking"`, `"name":"page_technician"`, `"name":"confirm_action"`, `"name":"reject_action"`} {
		if !strings.Contains(list.Body, want) {
			t.Errorf("tools/list lacks %s: %.600s", want, list.Body)
		}
	}

	// The demo upstream (undeclared_tools unset) refuses its undeclared
	// cancel_booking, naming the declaration to add, through both paths.
	refused, _ := e.both(t, "demo", toHeader(v26("tools/call", demo.ToolCancelBooking)), call("2", demo.ToolCancelBooking, `{"booking_id":"B-1001"}`))
	for _, want := range []string{"tool_not_declared", `under the upstream \\\"demo\\\"`, "undeclared_tools: confirm"} {
		if !strings.Contains(refused.Body, want) {
			t.Errorf("refusal lacks %s: %.900s", want, refused.Body)
		}
	}

	paths := map[string]string{"proxy": e.proxy + "/oneline/mcp", "ext_proc": e.drivers["oneline"].URL + "/oneline/mcp"}
	for _, via := range []string{"proxy", "ext_proc"} {
		before := up.Calls(demo.ToolCancelBooking)
		a := do(t, "POST", paths[via], v26("tools/call", demo.ToolCancelBooking), call("3", demo.ToolCancelBooking, `{"booking_id":"B-1001"}`))
		var m struct {
			Result struct {
				StructuredContent struct {
					Status         string `json:"status"`
					Effect         string `json:"effect"`
					Approval       string `json:"approval"`
					ConfirmToken   string `json:"confirm_token"`
					ConfirmSummary string `json:"confirm_summary"`
				} `json:"structuredContent"`
			} `json:"result"`
		}
		if err := json.Unmarshal([]byte(a.Body), &m); err != nil {
			t.Fatalf("%s: preview %d %.600s", via, a.Status, a.Body)
		}
		p := m.Result.StructuredContent
		if a.Status != 200 || p.Status != "confirmation_required" || p.Effect != "delete" || p.Approval != "client" ||
			!strings.Contains(p.ConfirmSummary, "not declared: what it does is unknown") {
			t.Fatalf("%s: preview %+v", via, p)
		}
		if n := up.Calls(demo.ToolCancelBooking); n != before {
			t.Fatalf("%s: cancel_booking ran before confirmation", via)
		}
		args, _ := json.Marshal(map[string]string{"confirm_token": p.ConfirmToken, "confirm_summary": p.ConfirmSummary})
		c := do(t, "POST", paths[via], v26("tools/call", "confirm_action"), call("4", "confirm_action", string(args)))
		if c.Status != 200 || strings.Contains(c.Body, `"isError":true`) {
			t.Fatalf("%s: confirm_action %d %.600s", via, c.Status, c.Body)
		}
		if n := up.Calls(demo.ToolCancelBooking); n != before+1 {
			t.Errorf("%s: cancel_booking ran %d times on confirmation, want 1", via, n-before)
		}
		// The same token again runs nothing.
		do(t, "POST", paths[via], v26("tools/call", "confirm_action"), call("5", "confirm_action", string(args)))
		if n := up.Calls(demo.ToolCancelBooking); n != before+1 {
			t.Errorf("%s: a repeated confirm_action ran the tool again", via)
		}
	}
	if st := e.stats["oneline"].Stats(); st.StreamsStarted == 0 || st.SpuriousMessages != 0 || st.StreamsFailed != 0 {
		t.Errorf("oneline driver stats %+v", st)
	}
}
