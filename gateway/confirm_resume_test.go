package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// TestConfirmationKeepsUpstreamRoundState: a notify call that carries the
// upstream's own multi-round state (MCP 2026-07-28: the requestState of
// the upstream's InputRequiredResult and the client's inputResponses) is
// previewed with a confirm_token (the client cannot be asked through
// elicitation); confirm_action then sends the original call with that
// state, byte for byte, not without it, and the confirm_summary the
// person approves names the client's answers. A call without such state
// is confirmed without the members.
func TestConfirmationKeepsUpstreamRoundState(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, writeOpts(writeCatalog())...)
	args := `{"text":"to the list"}`
	pick := `{"action":"accept","content":{"list":"vip"}}`
	upstream := `"requestState":"upstream-round-1","inputResponses":{"pick_list":` + pick + `},`
	_, v := p.HandleRequest(ctx, elicitCall("good-", "1", "email_customer", args, upstream, `{}`))
	token, summary := previewOf(t, v)
	// The client's answers go upstream too, so the person approves them:
	// the summary names them (canonical JSON), the opaque state it does not.
	if !strings.Contains(summary, `answering the server's questions with {"pick_list":{"action":"accept","content":{"list":"vip"}}}`) || strings.Contains(summary, "upstream-round-1") {
		t.Fatalf("summary %q", summary)
	}

	x, v := p.HandleRequest(ctx, toolCall("2", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("confirmed call not forwarded: %s", v.Local.Body)
	}
	var sent struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Name           string                     `json:"name"`
			Arguments      json.RawMessage            `json:"arguments"`
			RequestState   *string                    `json:"requestState"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
		} `json:"params"`
	}
	if err := json.Unmarshal(v.Body, &sent); err != nil {
		t.Fatalf("%s: %v", v.Body, err)
	}
	if sent.Params.Name != "email_customer" || string(sent.ID) != "2" || sent.Params.RequestState == nil ||
		*sent.Params.RequestState != "upstream-round-1" || len(sent.Params.InputResponses) != 1 || string(sent.Params.InputResponses["pick_list"]) != pick {
		t.Fatalf("forwarded without the upstream's round state: %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"sent"}]}}`)

	// Without round state, the confirmed call has none either.
	_, v = p.HandleRequest(ctx, toolCall("3", "email_customer", `{"text":"plain"}`))
	token, summary = previewOf(t, v)
	if strings.Contains(summary, "answering") {
		t.Fatalf("summary of a call without answers: %q", summary)
	}
	_, v = p.HandleRequest(ctx, toolCall("4", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("confirmed call not forwarded: %s", v.Local.Body)
	}
	var plain struct {
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(v.Body, &plain); err != nil || plain.Params["name"] == nil {
		t.Fatalf("%s: %v", v.Body, err)
	}
	for _, k := range []string{"requestState", "inputResponses"} {
		if _, ok := plain.Params[k]; ok {
			t.Errorf("a call without round state was confirmed with %s: %s", k, v.Body)
		}
	}
}
