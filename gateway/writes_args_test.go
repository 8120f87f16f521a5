package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// toolCallWith is toolCall with further params members (each
// `"name":value,`).
func toolCallWith(id, tool, args, extra string) *gateway.Request {
	return authReq("POST", "good-", `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`,`+extra+meta2026+`}}`,
		"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool)
}

// forwardedArguments are the arguments of a forwarded tools/call body.
func forwardedArguments(t *testing.T, body []byte) string {
	t.Helper()
	var m struct {
		Params struct {
			Arguments jsontext.Value `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("forwarded body %s: %v", body, err)
	}
	return string(m.Params.Arguments)
}

// The confirm_summary shows the arguments that go out — after coercion,
// numbers exactly as written — and confirm_action forwards those.
func TestConfirmSummaryShowsForwardedArguments(t *testing.T) {
	ctx := context.Background()
	cat := writeCatalog()
	cat.tools[2].InputSchema = jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"integer"},"x":{"type":"number"},"z":{"type":"number"}}}`)
	p := gatewaytest.New(t, writeOpts(cat)...)
	_, v := p.HandleRequest(ctx, toolCall("1", "email_customer", `{"z":-0, "x":"1E2","text":"hi","n":"9007199254740993"}`))
	token, summary := previewOf(t, v)
	const want = `{"n":9007199254740993,"text":"hi","x":1E2,"z":-0}`
	if !strings.HasSuffix(summary, " with "+want) {
		t.Errorf("summary %q, want it to end with the coerced arguments %s", summary, want)
	}
	_, v = p.HandleRequest(ctx, toolCall("2", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("confirmed call not forwarded: %s", v.Local.Body)
	}
	got := forwardedArguments(t, v.Body)
	for _, lit := range []string{`"n":9007199254740993`, `"x":1E2`, `"z":-0`, `"text":"hi"`} {
		if !strings.Contains(got, lit) {
			t.Errorf("forwarded arguments %s lack %s", got, lit)
		}
	}

	// Arguments the check would rewrite at confirmation are not the
	// approved ones: refused. (Here another replica, on the same store,
	// reads the tool's schema otherwise under the same hash.)
	var shared *gateway.WriteSafety
	cat1 := writeCatalog()
	cat1.tools[2].InputSchema = jsontext.Value(`{"type":"object","properties":{"n":{"type":"string"}}}`)
	p1 := gatewaytest.New(t, writeOpts(cat1, gatewaytest.WithWrites(func(w *gateway.WriteSafety) { shared = w }))...)
	_, v = p1.HandleRequest(ctx, toolCall("3", "email_customer", `{"n":"5"}`))
	token, summary = previewOf(t, v)
	cat2 := writeCatalog()
	cat2.tools[2].InputSchema = jsontext.Value(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
	p2 := gatewaytest.New(t, writeOpts(cat2, gatewaytest.WithWrites(func(w *gateway.WriteSafety) { *w = *shared }))...)
	_, v = p2.HandleRequest(ctx, toolCall("4", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "arguments_changed" {
		t.Errorf("confirmation with rewritten arguments: %s", v.Local.Body)
	}
}

// A silent write's fingerprint covers its arguments only: a repeat with a
// made-up requestState, inputResponses or another _meta is the same write;
// numbers that differ only beyond float64 are different writes.
func TestReplayFingerprintCoversArgumentsOnly(t *testing.T) {
	ctx := context.Background()
	cat := writeCatalog()
	cat.tools[0].InputSchema = jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"number"}}}`)
	p := gatewaytest.New(t, writeOpts(cat)...)
	x, v := p.HandleRequest(ctx, toolCall("1", "save_note", `{"text":"a"}`))
	if v.Local != nil {
		t.Fatalf("first call not forwarded: %s", v.Local.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"saved"}]}}`)
	for i, extra := range []string{
		`"requestState":"made-up",`,
		`"requestState":"other","inputResponses":{"q":{"action":"accept"}},`,
		`"inputResponses":{},`,
	} {
		_, v = p.HandleRequest(ctx, toolCallWith(`"r`+string(rune('0'+i))+`"`, "save_note", `{"text":"a"}`, extra))
		if a := decodeAnswer(t, v); string(a.Result.Meta[gateway.ReplayedMetaKey]) != "true" {
			t.Errorf("repeat with %s ran again: %s", extra, v.Local.Body)
		}
	}
	x, v = p.HandleRequest(ctx, toolCall("2", "save_note", `{"text":"a","n":9007199254740993}`))
	if v.Local != nil {
		t.Fatalf("forwarded? %s", v.Local.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[]}}`)
	if _, v = p.HandleRequest(ctx, toolCall("3", "save_note", `{"text":"a","n":9007199254740992}`)); v.Local != nil {
		t.Errorf("a write differing beyond 2^53 was answered from the window: %s", v.Local.Body)
	}
}
