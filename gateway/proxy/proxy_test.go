package proxy_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/catalog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// env is a running gateway in front of a real upstream.
type env struct {
	url      string       // the gateway's MCP endpoint
	admin    string       // the admin listener's base URL
	upstream *demo.Server // nil when the upstream is not the demo
	hits     *atomic.Int64
	app      *app.App
}

// counting counts every request that reaches the upstream.
func counting(h http.Handler, n *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != catalog.UserAgent { // not mcpgate's own listing of the tools
			n.Add(1)
		}
		h.ServeHTTP(w, r)
	})
}

// start runs the demo upstream (the real MCP Go SDK server) and the gateway
// with the quickstart configuration, edited by edit.
func start(t *testing.T, edit func(*config.Config)) *env {
	t.Helper()
	up := demo.New(demo.Options{})
	return startWith(t, up.Handler(), up, edit)
}

func startWith(t *testing.T, upstream http.Handler, d *demo.Server, edit func(*config.Config)) *env {
	t.Helper()
	e := &env{upstream: d, hits: new(atomic.Int64)}
	us := httptest.NewServer(counting(upstream, e.hits))
	t.Cleanup(us.Close)
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams[0].URL = us.URL + "/mcp"
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	if d == nil {
		// A hand-written upstream (answers no real MCP server gives on
		// demand) is no server the catalog could list: these tests check
		// the relay of forwarded answers, catalog off.
		cfg.Catalog.Disabled = true
	}
	if edit != nil {
		edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startAppWith(t, cfg, testLogger(t))
	e.app = a
	e.url = "http://" + a.ProxyAddr + "/mcp"
	e.admin = "http://" + a.AdminAddr
	return e
}

func connect(t *testing.T, endpoint, version string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "mcpgate-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s: %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestSDKClientThroughGateway: the official Go SDK client lists and calls
// tools of the demo upstream through mcpgate, for 2026-07-28 and
// 2025-11-25, and the gateway is invisible to every allowed call.
func TestSDKClientThroughGateway(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			e := start(t, nil)
			cs := connect(t, e.url, version)
			if got := cs.InitializeResult().ProtocolVersion; got != version {
				t.Fatalf("negotiated %q, want %q", got, version)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			names := map[string]bool{}
			for _, tool := range tools.Tools {
				names[tool.Name] = true
			}
			for _, want := range []string{"find_customers", "get_booking", "list_technicians", "create_booking", "update_booking", "send_booking_confirmation", "page_technician", "mute_booking_alerts", "cancel_booking"} {
				if !names[want] {
					t.Errorf("tools/list lacks declared tool %q (got %v)", want, names)
				}
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "list_technicians", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				t.Fatalf("list_technicians: isError: %+v", res.Content)
			}
			if got := e.upstream.Calls("list_technicians"); got != 1 {
				t.Errorf("upstream ran list_technicians %d times, want 1", got)
			}
		})
	}
}

// post sends one raw HTTP request to the gateway.
func post(t *testing.T, url string, hdr map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

func h2026(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

func callBody(id, tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta + `}}`)
}

// rpcError decodes a JSON-RPC error response.
func rpcError(t *testing.T, body []byte) (id json.RawMessage, code int, data json.RawMessage) {
	t.Helper()
	var r struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int             `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Error == nil {
		t.Fatalf("not a JSON-RPC error response: %s (%v)", body, err)
	}
	return r.ID, r.Error.Code, r.Error.Data
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// TestBadInput: each bad input gets the status and JSON-RPC error the spec
// gives, nothing reaches the upstream, and the gateway keeps serving.
func TestBadInput(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Limits.MaxBodyBytes = 64 << 10; c.Limits.MaxJSONDepth = 32 })
	good := callBody("1", "list_technicians", "{}")
	future := []byte(strings.ReplaceAll(string(callBody("3", "list_technicians", "{}")), "2026-07-28", "2099-01-01"))
	deep := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_booking","arguments":{"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `},` + meta + `}}`)
	tests := []struct {
		name   string
		hdr    map[string]string
		body   []byte
		status int
		code   int    // JSON-RPC error code; 0: no body expected
		id     string // expected id in the error
		noBody bool
	}{
		{name: "duplicate key at top level", hdr: h2026("tools/call", "list_technicians"), body: []byte(`{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"list_technicians","arguments":{},` + meta + `}}`), status: 400, code: -32700, id: "null"},
		{name: "duplicate key nested after unescaping", hdr: h2026("tools/call", "list_technicians"), body: callBody("1", "list_technicians", `{"tenant":"acme","tenan\u0074":"globex"}`), status: 400, code: -32700, id: "null"},
		{name: "Mcp-Name differs from body", hdr: h2026("tools/call", "find_customers"), body: callBody("7", "cancel_booking", `{"booking_id":"b1"}`), status: 400, code: -32020, id: "7"},
		{name: "Mcp-Method differs from body", hdr: h2026("tools/list", ""), body: callBody("8", "cancel_booking", `{"booking_id":"b1"}`), status: 400, code: -32020, id: "8"},
		{name: "Mcp-Method missing", hdr: map[string]string{"MCP-Protocol-Version": "2026-07-28"}, body: callBody("9", "list_technicians", "{}"), status: 400, code: -32020, id: "9"},
		{name: "protocol version header differs from _meta", hdr: map[string]string{"MCP-Protocol-Version": "2025-11-25", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, body: good, status: 400, code: -32020, id: "1"},
		{name: "batch", hdr: h2026("tools/call", "list_technicians"), body: []byte(`[` + string(good) + `]`), status: 400, code: -32600, id: "null"},
		{name: "empty batch", hdr: nil, body: []byte(`[]`), status: 400, code: -32600, id: "null"},
		{name: "malformed JSON", hdr: h2026("tools/call", "list_technicians"), body: []byte(`{"jsonrpc":"2.0","id":1,"method":`), status: 400, code: -32700, id: "null"},
		{name: "invalid UTF-8", hdr: h2026("tools/call", "list_technicians"), body: callBody("1", "list_technicians", "{\"q\":\"\xff\xfe\"}"), status: 400, code: -32700, id: "null"},
		{name: "deep nesting", hdr: h2026("tools/call", "get_booking"), body: deep, status: 400, code: -32700, id: "null"},
		{name: "oversize body", hdr: h2026("tools/call", "list_technicians"), body: callBody("1", "list_technicians", `{"q":"`+strings.Repeat("a", 70<<10)+`"}`), status: 413, code: -32600, id: "null"},
		{name: "gzip bomb beyond the limit", hdr: map[string]string{"Content-Encoding": "gzip", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, body: gz(callBody("1", "list_technicians", `{"q":"`+strings.Repeat("a", 1<<20)+`"}`)), status: 413, code: -32600, id: "null"},
		{name: "unsupported content encoding", hdr: map[string]string{"Content-Encoding": "br"}, body: good, status: 415, code: -32600, id: "null"},
		{name: "wrong content type", hdr: map[string]string{"Content-Type": "text/plain"}, body: good, status: 415, code: -32600, id: "null"},
		{name: "unknown protocol version", hdr: map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, body: future, status: 400, code: -32022, id: "3"},
		{name: "protocol version header and _meta disagree", hdr: map[string]string{"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, body: callBody("3", "list_technicians", "{}"), status: 400, code: -32020, id: "3"},
		{name: "2026-07-28 request without _meta", hdr: h2026("tools/call", "list_technicians"), body: []byte(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"list_technicians","arguments":{}}}`), status: 400, code: -32602, id: "11"},
		{name: "initialize removed in 2026-07-28", hdr: h2026("initialize", ""), body: []byte(`{"jsonrpc":"2.0","id":12,"method":"initialize","params":{` + meta + `}}`), status: 404, code: -32601, id: "12"},
		{name: "unknown method", hdr: h2026("frobnicate/now", ""), body: []byte(`{"jsonrpc":"2.0","id":"x","method":"frobnicate/now","params":{` + meta + `}}`), status: 404, code: -32601, id: `"x"`},
		{name: "unknown notification", hdr: h2026("notifications/frobnicated", ""), body: []byte(`{"jsonrpc":"2.0","method":"notifications/frobnicated","params":{` + meta + `}}`), status: 404, noBody: true},
		{name: "id beyond 2^53 kept byte-exact", hdr: h2026("tools/call", "find_customers"), body: callBody("123456789012345678901234567890", "cancel_booking", `{}`), status: 400, code: -32020, id: "123456789012345678901234567890"},
		{name: "foreign origin", hdr: map[string]string{"Origin": "https://evil.example"}, body: good, status: 403, code: -32600, id: "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.hits.Load()
			resp, body := post(t, e.url, tt.hdr, tt.body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %s", resp.StatusCode, tt.status, body)
			}
			if n := e.hits.Load() - before; n != 0 {
				t.Errorf("%d request(s) reached the upstream", n)
			}
			if tt.noBody {
				if len(body) != 0 {
					t.Errorf("want no body, got %s", body)
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			id, code, _ := rpcError(t, body)
			if code != tt.code {
				t.Errorf("code %d, want %d; body %s", code, tt.code, body)
			}
			if string(id) != tt.id {
				t.Errorf("id %s, want %s", id, tt.id)
			}
			// The gateway keeps serving.
			resp, body = post(t, e.url, h2026("tools/call", "list_technicians"), good)
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"result"`)) {
				t.Fatalf("follow-up call: %d %s", resp.StatusCode, body)
			}
		})
	}
}

// TestUnsupportedVersionListsSupported: -32022 carries the supported list.
func TestUnsupportedVersionListsSupported(t *testing.T) {
	e := start(t, nil)
	_, body := post(t, e.url, map[string]string{"MCP-Protocol-Version": "2099-01-01"}, []byte(strings.ReplaceAll(string(callBody("3", "list_technicians", "{}")), "2026-07-28", "2099-01-01")))
	_, _, data := rpcError(t, body)
	var d struct {
		Supported []string `json:"supported"`
		Requested string   `json:"requested"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	if d.Requested != "2099-01-01" || len(d.Supported) == 0 || d.Supported[0] != "2026-07-28" {
		t.Errorf("data = %s", data)
	}
}

// TestAcceptedVariants: inputs that look odd but are valid are forwarded.
func TestAcceptedVariants(t *testing.T) {
	e := start(t, nil)
	good := callBody("1", "list_technicians", "{}")
	tests := []struct {
		name string
		hdr  map[string]string
		body []byte
	}{
		{"content type with parameters and case", map[string]string{"Content-Type": "Application/JSON; charset=UTF-8", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, good},
		{"gzip body decoded before inspection", map[string]string{"Content-Encoding": "gzip", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, gz(good)},
		{"base64 Mcp-Name", map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "=?base64?bGlzdF90ZWNobmljaWFucw==?="}, good},
		{"loopback origin", map[string]string{"Origin": "http://localhost:6274", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.upstream.Calls("list_technicians")
			resp, body := post(t, e.url, tt.hdr, tt.body)
			if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"result"`)) || bytes.Contains(body, []byte(`"isError":true`)) {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			if got := e.upstream.Calls("list_technicians") - before; got != 1 {
				t.Errorf("upstream ran the tool %d times, want 1", got)
			}
		})
	}
}

// testLogger writes the gateway's logs to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// startAppWith starts the gateway for a test or benchmark and stops it at
// cleanup.
func startAppWith(tb testing.TB, cfg *config.Config, log *slog.Logger) *app.App {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cancel()
		sctx, c2 := context.WithTimeout(context.Background(), 5*time.Second)
		defer c2()
		_ = a.Shutdown(sctx)
	})
	return a
}

func startApp(tb testing.TB, cfg *config.Config) string {
	return startAppWith(tb, cfg, slog.New(slog.DiscardHandler)).ProxyAddr
}
