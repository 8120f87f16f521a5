package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/policy"
)

// TestToolExposure: a demo tool exposed under another name and text, through
// the proxy and the Envoy driver. tools/list shows the exposed name and text
// only; a call by the exposed name reaches the upstream under the tool's own
// name (body and Mcp-Name); a call by the own name is refused like an
// undeclared tool and never forwarded; a silent write under the exposed name
// is replay-protected; a notify tool's confirmation summary names both names.
func TestToolExposure(t *testing.T) {
	e := startContractEnv(t)
	const (
		booking = "book_visit"
		tell    = "tell_customer"
		title   = "Book a technician visit"
		desc    = "Books one visit of a technician at a customer."
	)
	g := e.startGateway(t, "expose", func(c *config.Config) {
		tools := c.Upstreams[0].Tools
		d := tools[demo.ToolCreateBooking]
		d.Expose = &policy.ToolExposure{Name: booking, Title: title, Description: desc}
		tools[demo.ToolCreateBooking] = d
		n := tools[demo.ToolSendBookingConfirmation]
		n.Expose = &policy.ToolExposure{Name: tell}
		tools[demo.ToolSendBookingConfirmation] = n
	})
	for i, v := range g.vias("demo") {
		token := []string{g.token, g.token2}[i] // one connection per adapter
		t.Run(v.name, func(t *testing.T) {
			e.demo.Reset()
			a, _ := exchange(t, "POST", v.url, bearer(token, "tools/list", ""), listBody)
			var list struct {
				Result struct {
					Tools []struct {
						Name, Title, Description string
					} `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal(rpcMessage(a), &list); err != nil {
				t.Fatalf("tools/list: %v: %.500s", err, a.Body)
			}
			names := map[string]bool{}
			for _, tl := range list.Result.Tools {
				names[tl.Name] = true
				if tl.Name == booking && (tl.Title != title || tl.Description != desc) {
					t.Errorf("%s listed with title %q, description %q", booking, tl.Title, tl.Description)
				}
			}
			if !names[booking] || !names[tell] || names[demo.ToolCreateBooking] || names[demo.ToolSendBookingConfirmation] {
				t.Errorf("tools/list names %v: want the exposed names, not the tools' own", names)
			}

			// By its own name: refused like an undeclared tool, not forwarded.
			mark := e.demoUp.count()
			own := wrCall(t, v.url, token, "1", demo.ToolCreateBooking, `{"customer_id":"C-101"}`)
			own.refusal(t, policy.CodeToolNotDeclared)
			if n := e.demoUp.count() - mark; n != 0 {
				t.Errorf("a call by the own name reached the upstream (%d requests)", n)
			}

			// By the exposed name: the upstream receives its own name.
			args := `{"customer_id":"C-101","technician_id":"T-11","start":"2026-08-10T09:00:00+01:00","notes":"expose ` + v.name + `"}`
			mark = e.demoUp.count()
			first := wrCall(t, v.url, token, "2", booking, args).result(t)
			if first.IsError {
				t.Fatalf("call by the exposed name failed: %+v", first)
			}
			seen := e.demoUp.since(mark)
			if len(seen) != 1 || !strings.Contains(seen[0].Request, `"name":"`+demo.ToolCreateBooking+`"`) || strings.Contains(seen[0].Request, booking) || seen[0].McpName != demo.ToolCreateBooking {
				t.Errorf("the upstream received %+v; want its own tool name in the body and Mcp-Name", seen)
			}
			// The same write again: replayed (keyed on the tool's own name).
			second := wrCall(t, v.url, token, "3", booking, args)
			if r := second.result(t); string(r.Meta["io.mcpgate/replayed"]) != "true" {
				t.Errorf("the repeated write was not replayed: %.500s", second.Body)
			}
			if n := e.demo.Calls(demo.ToolCreateBooking); n != 1 {
				t.Errorf("create_booking ran %d times, want 1", n)
			}

			// A notify tool under its exposed name: the summary names it and
			// the upstream tool; confirmed, the upstream gets its own name.
			pa := wrCall(t, v.url, token, "4", tell, `{"booking_id":"B-1001"}`)
			var p struct {
				Status         string `json:"status"`
				ConfirmSummary string `json:"confirm_summary"`
			}
			structured(t, pa.result(t), &p)
			if p.Status != "confirmation_required" || !strings.Contains(p.ConfirmSummary, tell) || !strings.Contains(p.ConfirmSummary, "upstream tool "+demo.ToolSendBookingConfirmation) {
				t.Errorf("preview %q: want the exposed and the upstream tool's name in the summary", p.ConfirmSummary)
			}
			ok := ctAnswer{idAnswer: confirmPreview(t, v.url, token, pa.idAnswer)}
			ok.Msg = rpcMessage(ok.idAnswer)
			if r := ok.result(t); r.IsError {
				t.Fatalf("confirmed call failed: %.500s", ok.Body)
			}
			if n := e.demo.Calls(demo.ToolSendBookingConfirmation); n != 1 {
				t.Errorf("send_booking_confirmation ran %d times, want 1", n)
			}
		})
	}
}

// TestNarrowedInputSchema: a demo tool with expose.input_schema, through
// the proxy and the Envoy driver. tools/list shows the narrowed schema; a
// call the upstream's schema accepts but the narrowed one does not is
// refused (invalid_arguments, naming the argument) and never forwarded; a
// call inside the narrowed schema passes.
func TestNarrowedInputSchema(t *testing.T) {
	e := startContractEnv(t)
	const narrowed = `{"type": "object", "properties": {"query": {"type": "string", "maxLength": 5}}}`
	g := e.startGateway(t, "narrow", func(c *config.Config) {
		tools := c.Upstreams[0].Tools
		d := tools[demo.ToolFindCustomers]
		d.Expose = &policy.ToolExposure{InputSchema: narrowed}
		tools[demo.ToolFindCustomers] = d
	})
	for i, v := range g.vias("demo") {
		token := []string{g.token, g.token2}[i] // one connection per adapter
		t.Run(v.name, func(t *testing.T) {
			a, _ := exchange(t, "POST", v.url, bearer(token, "tools/list", ""), listBody)
			var list struct {
				Result struct {
					Tools []struct {
						Name        string          `json:"name"`
						InputSchema json.RawMessage `json:"inputSchema"`
					} `json:"tools"`
				} `json:"result"`
			}
			if err := json.Unmarshal(rpcMessage(a), &list); err != nil {
				t.Fatalf("tools/list: %v: %.500s", err, a.Body)
			}
			want := `{"type":"object","properties":{"query":{"type":"string","maxLength":5}},"additionalProperties":false}`
			found := false
			for _, tl := range list.Result.Tools {
				if tl.Name == demo.ToolFindCustomers {
					found = true
					if !jsonEqual(tl.InputSchema, []byte(want)) {
						t.Errorf("listed inputSchema %s, want %s", tl.InputSchema, want)
					}
				}
			}
			if !found {
				t.Fatalf("%s not listed: %.1000s", demo.ToolFindCustomers, a.Body)
			}

			// Valid for the upstream, outside the narrowed bounds.
			mark := e.demoUp.count()
			d, _ := wrCall(t, v.url, token, "1", demo.ToolFindCustomers, `{"query":"longer than five"}`).refusal(t, "invalid_arguments")
			if !strings.Contains(d.Error.Cause, `"query"`) {
				t.Errorf("the refusal does not name the argument: %+v", d.Error)
			}
			if n := e.demoUp.count() - mark; n != 0 {
				t.Errorf("a call outside the narrowed schema reached the upstream (%d requests)", n)
			}

			// Inside the narrowed schema: forwarded.
			mark = e.demoUp.count()
			if r := wrCall(t, v.url, token, "2", demo.ToolFindCustomers, `{"query":"grace"}`).result(t); r.IsError {
				t.Fatalf("call inside the narrowed schema failed: %+v", r)
			}
			if n := e.demoUp.count() - mark; n != 1 {
				t.Errorf("the upstream received %d requests, want 1", n)
			}
		})
	}
}
