package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

const meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func newPipeline(t *testing.T, dirs ...string) *gateway.Pipeline {
	t.Helper()
	eng, err := policy.New(context.Background(), policy.Options{Dirs: dirs, Declarations: benchDecls})
	if err != nil {
		t.Fatal(err)
	}
	return gateway.New(eng, gateway.Options{Declarations: benchDecls, MaxBodyBytes: 1 << 16, MaxJSONDepth: 16, MaxSSEEventBytes: 1 << 20})
}

// TestRefusalContract walks every refusal path of the request side and
// checks the answer against the error contract: tool errors for tools/call
// refused by policy (HTTP 200), JSON-RPC errors with the spec's codes and
// statuses otherwise, no body for notifications, nothing forwarded.
func TestRefusalContract(t *testing.T) {
	p := newPipeline(t)
	h := func(kv ...string) mcp.Header {
		hdr := mcp.Header{"content-type": {"application/json"}}
		for i := 0; i+1 < len(kv); i += 2 {
			hdr.Set(kv[i], kv[i+1])
		}
		return hdr
	}
	v26 := func(method, name string) mcp.Header {
		if name == "" {
			return h("mcp-protocol-version", "2026-07-28", "mcp-method", method)
		}
		return h("mcp-protocol-version", "2026-07-28", "mcp-method", method, "mcp-name", name)
	}
	tests := []struct {
		name    string
		method  string
		hdr     mcp.Header
		body    string
		status  int
		rpcCode int    // JSON-RPC error code; 0 with toolErr or no body
		toolErr string // reason code of a tool error
		outcome string
	}{
		{name: "undeclared tool", method: "POST", hdr: v26("tools/call", "drop_tables"), body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables","arguments":{},` + meta2026 + `}}`, status: 200, toolErr: "tool_not_declared", outcome: gateway.OutcomeDeny},
		{name: "initialize of an older revision passes (control)", method: "POST", hdr: h(), body: `{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, status: 0},
		{name: "unknown method", method: "POST", hdr: v26("x/y", ""), body: `{"jsonrpc":"2.0","id":3,"method":"x/y","params":{` + meta2026 + `}}`, status: 404, rpcCode: -32601, outcome: gateway.OutcomeInvalid},
		{name: "unknown notification", method: "POST", hdr: v26("notifications/x", ""), body: `{"jsonrpc":"2.0","method":"notifications/x","params":{` + meta2026 + `}}`, status: 404, outcome: gateway.OutcomeInvalid},
		{name: "header mismatch", method: "POST", hdr: v26("tools/call", "get_booking"), body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"create_booking","arguments":{},` + meta2026 + `}}`, status: 400, rpcCode: -32020, outcome: gateway.OutcomeInvalid},
		{name: "unsupported version", method: "POST", hdr: h("mcp-protocol-version", "1999-01-01"), body: `{"jsonrpc":"2.0","id":5,"method":"ping"}`, status: 400, rpcCode: -32022, outcome: gateway.OutcomeInvalid},
		{name: "client response under 2026-07-28", method: "POST", hdr: h("mcp-protocol-version", "2026-07-28"), body: `{"jsonrpc":"2.0","id":6,"result":{}}`, status: 400, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "batch", method: "POST", hdr: h(), body: `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`, status: 400, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "duplicate key", method: "POST", hdr: h(), body: `{"jsonrpc":"2.0","id":8,"method":"ping","method":"ping"}`, status: 400, rpcCode: -32700, outcome: gateway.OutcomeInvalid},
		{name: "too deep", method: "POST", hdr: h(), body: `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"a":` + strings.Repeat("[", 20) + strings.Repeat("]", 20) + `}}`, status: 400, rpcCode: -32700, outcome: gateway.OutcomeInvalid},
		{name: "too large", method: "POST", hdr: h(), body: `{"jsonrpc":"2.0","id":10,"method":"ping","params":{"a":"` + strings.Repeat("x", 1<<16) + `"}}`, status: 413, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "content type", method: "POST", hdr: mcp.Header{"content-type": {"text/json"}}, body: `{}`, status: 415, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "content encoding", method: "POST", hdr: h("content-encoding", "zstd"), body: `{}`, status: 415, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "bad gzip", method: "POST", hdr: h("content-encoding", "gzip"), body: `not gzip`, status: 400, rpcCode: -32700, outcome: gateway.OutcomeInvalid},
		{name: "foreign origin", method: "POST", hdr: h("origin", "https://evil.example"), body: `{}`, status: 403, rpcCode: -32600, outcome: gateway.OutcomeInvalid},
		{name: "HTTP method", method: "PUT", hdr: h(), body: `{}`, status: 405, outcome: gateway.OutcomeInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: tt.method, Path: "/mcp", Upstream: "demo", Header: tt.hdr, Body: []byte(tt.body)})
			if tt.status == 0 {
				if v.Local != nil {
					t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
				}
				return
			}
			if v.Local == nil {
				t.Fatal("forwarded; want a local answer")
			}
			if v.Local.Status != tt.status {
				t.Errorf("status %d, want %d (%s)", v.Local.Status, tt.status, v.Local.Body)
			}
			if x.Outcome() != tt.outcome {
				t.Errorf("outcome %q, want %q", x.Outcome(), tt.outcome)
			}
			switch {
			case tt.toolErr != "":
				checkToolError(t, v.Local.Body, tt.toolErr)
			case tt.rpcCode != 0:
				var r struct {
					JSONRPC string          `json:"jsonrpc"`
					ID      json.RawMessage `json:"id"`
					Error   struct {
						Code    int    `json:"code"`
						Message string `json:"message"`
					} `json:"error"`
				}
				if err := json.Unmarshal(v.Local.Body, &r); err != nil {
					t.Fatalf("body is not JSON: %s", v.Local.Body)
				}
				if r.JSONRPC != "2.0" || r.Error.Code != tt.rpcCode || r.Error.Message == "" || r.ID == nil {
					t.Errorf("error %+v, want code %d (%s)", r, tt.rpcCode, v.Local.Body)
				}
				if v.Local.Header.Get("content-type") != "application/json" {
					t.Errorf("content-type %q", v.Local.Header.Get("content-type"))
				}
			default:
				if v.Local.Body != nil {
					t.Errorf("want no body, got %s", v.Local.Body)
				}
			}
		})
	}
}

func checkToolError(t *testing.T, body []byte, code string) {
	t.Helper()
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("not a JSON-RPC result: %s", body)
	}
	if !r.Result.IsError || len(r.Result.Content) != 1 || r.Result.Content[0].Type != "text" {
		t.Fatalf("not a tool error: %s", body)
	}
	text := r.Result.Content[0].Text
	lines := strings.Split(text, "\n")
	if !strings.HasPrefix(lines[0], "Error: ") || !strings.Contains(lines[0], "Fix: ") {
		t.Errorf("first line %q", lines[0])
	}
	if lines[len(lines)-1] != string(r.Result.StructuredContent) {
		t.Errorf("last line %s != structuredContent %s", lines[len(lines)-1], r.Result.StructuredContent)
	}
	if !strings.Contains(string(r.Result.StructuredContent), `"code":"`+code+`"`) {
		t.Errorf("structuredContent %s lacks code %s", r.Result.StructuredContent, code)
	}
}

// TestHiddenToolSameRuleBothPhases: a tool the list hides is refused on
// call, and vice versa, under the default policy.
func TestHiddenToolSameRuleBothPhases(t *testing.T) {
	p := newPipeline(t)
	listReq := &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/list"}},
		Body:   []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`)}
	x, v := p.HandleRequest(context.Background(), listReq)
	if v.Local != nil {
		t.Fatalf("tools/list refused: %s", v.Local.Body)
	}
	mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}})
	if err != nil || mode != gateway.BufferJSON {
		t.Fatalf("mode %v err %v", mode, err)
	}
	out, changed, err := x.ResponseBody(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_booking"},{"name":"secret_tool"},{"name":"create_booking"}]}}`))
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	if want := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"get_booking"},{"name":"create_booking"}]}}`; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	for tool, allowed := range map[string]bool{"get_booking": true, "secret_tool": false, "create_booking": true} {
		_, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
			Header: mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {tool}},
			Body:   []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` + meta2026 + `}}`)})
		if (v.Local == nil) != allowed {
			t.Errorf("%s: allowed=%v, want %v", tool, v.Local == nil, allowed)
		}
	}
	// Nothing to change: the body is relayed as is, not re-encoded.
	x, _ = p.HandleRequest(context.Background(), listReq)
	_, _ = x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}})
	same := []byte(`{"jsonrpc":"2.0", "id":1, "result":{"tools":[{"name":"get_booking"}]}}`)
	out, changed, err = x.ResponseBody(context.Background(), same)
	if err != nil || changed || string(out) != string(same) {
		t.Errorf("unchanged list re-encoded: %s %v %v", out, changed, err)
	}
}

func TestOriginAndContentTypeDetails(t *testing.T) {
	p := newPipeline(t)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for _, tt := range []struct {
		name   string
		hdr    mcp.Header
		status int // 0: forwarded
	}{
		{"loopback origin with port", mcp.Header{"content-type": {"application/json"}, "origin": {"http://localhost:6274"}}, 0},
		{"loopback origin with a bad port", mcp.Header{"content-type": {"application/json"}, "origin": {"http://localhost:abc/xyz"}}, 403},
		{"loopback origin with a path", mcp.Header{"content-type": {"application/json"}, "origin": {"http://127.0.0.1/x"}}, 403},
		{"charset utf-8", mcp.Header{"content-type": {"application/json; charset=UTF-8"}}, 0},
		{"charset latin-1", mcp.Header{"content-type": {"application/json; charset=latin-1"}}, 415},
	} {
		_, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Header: tt.hdr, Body: body})
		got := 0
		if v.Local != nil {
			got = v.Local.Status
		}
		if got != tt.status {
			t.Errorf("%s: status %d, want %d", tt.name, got, tt.status)
		}
	}
}

// TestTenantArgumentsFound: the gateway tells the policy which top-level
// arguments would choose a tenant (any case; configured names too; nested
// keys are data, not arguments), and the default policy refuses the call.
func TestTenantArgumentsFound(t *testing.T) {
	eng, err := policy.New(context.Background(), policy.Options{Declarations: benchDecls})
	if err != nil {
		t.Fatal(err)
	}
	p := gateway.New(eng, gateway.Options{Declarations: benchDecls, MaxBodyBytes: 1 << 16, MaxJSONDepth: 16, TenantArguments: []string{"Account"}})
	for args, refused := range map[string]bool{
		`{"booking_id":"B-1"}`:                      false,
		`{"booking_id":"B-1","Tenant_ID":"globex"}`: true,
		`{"ORG_ID":"x"}`:                            true,
		`{"account":"x"}`:                           true,
		`{"filter":{"tenant":"x"}}`:                 false,
		// Unicode case folding, as Go's encoding/json applies it: U+017F
		// (long s) and U+212A (Kelvin sign).
		`{"work\u017fpace_id":"globex"}`:     true,
		"{\"work\u017fpace_id\":\"globex\"}": true,
		`{"ACCOUNT":"x","\u212aey":"y"}`:     true,
		`{"tenant\u0131d":"x"}`:              false, // dotless i does not fold to i
	} {
		_, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
			Header: mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"get_booking"}},
			Body:   []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":` + args + `,` + meta2026 + `}}`)})
		if (v.Local != nil) != refused {
			t.Errorf("%s: refused=%v, want %v", args, v.Local != nil, refused)
		}
		if refused && v.Local != nil {
			checkToolError(t, v.Local.Body, "tenant_argument")
		}
	}
}
