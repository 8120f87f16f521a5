package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/policy"
)

// synthetic is a hand-written upstream for answers no real MCP server here
// produces on demand: progress events before the result, a large list. It
// chooses by the request id.
func synthetic(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	switch string(req.ID) {
	case "100": // SSE: two progress notifications, then the filtered list
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := 1; i <= 2; i++ {
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":%d}}\n\n", i)
			f.Flush()
			time.Sleep(5 * time.Millisecond)
		}
		fmt.Fprint(w, "id: 9\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":100,\"result\":{\"tools\":[{\"name\":\"lookup\"},{\"name\":\"shadow_tool\"}]}}\n\n")
	case "101": // a large JSON list: 900 KiB of description (within Envoy's buffer)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":101,"result":{"tools":[{"name":"shadow_tool"},{"name":"lookup","description":"%s"}]}}`, strings.Repeat("d", 900<<10))
	default: // anything else: a plain JSON result
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, req.ID)
	}
}

// differentialEnv runs one gateway with both listeners, and a driver that
// plays Envoy in front of its ext_proc listener for each upstream.
type differentialEnv struct {
	proxy   string                         // proxy base URL
	drivers map[string]*httptest.Server    // upstream name → Envoy stand-in
	stats   map[string]*envoydriver.Driver // for the protocol counters
}

// differentialUpstream is an extra upstream a differential test adds
// beside "demo" and "synthetic": served at /<name>/mcp by both paths.
type differentialUpstream struct {
	name    string
	handler http.Handler
	tools   map[string]policy.ToolDeclaration
	// undeclared is its undeclared_tools ("" for the default, refuse);
	// "confirm" gives the gateway a store.
	undeclared string
	// command makes it a stdio upstream (handler unused): mcpgate starts
	// it, and Envoy's cluster is its bridge's fixed loopback port.
	command *config.Command
}

func startDifferential(t *testing.T, extra ...differentialUpstream) *differentialEnv {
	t.Helper()
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	t.Cleanup(up.Close)
	syn := httptest.NewServer(http.HandlerFunc(synthetic))
	t.Cleanup(syn.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Limits.MaxBodyBytes = 1 << 20
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	delete(cfg.Upstreams[0].Tools, "cancel_booking") // undeclared: hidden and refused
	cfg.Upstreams = append(cfg.Upstreams, config.Upstream{Name: "synthetic", URL: syn.URL + "/mcp", Route: "/synthetic/mcp",
		Tools: map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}}})
	targets := map[string]string{"demo": up.URL, "synthetic": syn.URL}
	for _, x := range extra {
		if x.command != nil {
			addr := freeLoopback(t)
			x.command.Listen = addr
			cfg.Upstreams = append(cfg.Upstreams, config.Upstream{Name: x.name, Command: x.command, Route: "/" + x.name + "/mcp", Tools: x.tools, UndeclaredTools: x.undeclared})
			targets[x.name] = "http://" + addr
			if x.undeclared == policy.UndeclaredConfirm && cfg.Store == nil {
				cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
			}
			continue
		}
		srv := httptest.NewServer(x.handler)
		t.Cleanup(srv.Close)
		cfg.Upstreams = append(cfg.Upstreams, config.Upstream{Name: x.name, URL: srv.URL + "/mcp", Route: "/" + x.name + "/mcp", Tools: x.tools, UndeclaredTools: x.undeclared})
		targets[x.name] = srv.URL
		if x.undeclared == policy.UndeclaredConfirm && cfg.Store == nil {
			cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
		}
	}
	// These cases compare the relay of forwarded answers (SSE progress
	// before a filtered list, a large list): tools/list is forwarded only
	// with the catalog off, and the synthetic upstream is no MCP server
	// the catalog could list. The catalog path has its own tests.
	cfg.Catalog.Disabled = true
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	e := &differentialEnv{proxy: "http://" + a.ProxyAddr, drivers: map[string]*httptest.Server{}, stats: map[string]*envoydriver.Driver{}}
	for name, target := range targets {
		srv, d := startEnvoy(t, a.ExtProcAddr, target, name, 500*time.Millisecond)
		e.drivers[name] = srv
		e.stats[name] = d
	}
	return e
}

// seen is what a client sees of one answer.
type seen struct {
	Status      int
	ContentType string
	Body        string
}

// decisionID matches a decision id, also JSON-escaped inside a text block.
var decisionID = regexp.MustCompile(`decision_id(\\?)":(\\?)"[0-9a-f]+`)

func do(t *testing.T, method, url string, hdr map[string]string, body []byte) seen {
	t.Helper()
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	return doHeader(t, method, url, h, body)
}

// doHeader is do with a header that may repeat a field (set after the
// defaults, so it replaces them).
func doHeader(t *testing.T, method, url string, hdr http.Header, body []byte) seen {
	t.Helper()
	resp, b := roundTrip(t, method, url, hdr, body)
	return seen{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: maskDecisionID(b)}
}

// roundTrip sends one request with the fields an MCP client sends
// (Content-Type with a body or on a POST, Accept), then hdr's fields
// (which replace them), and returns the response with its whole body.
func roundTrip(t *testing.T, method, url string, hdr http.Header, body []byte) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader = bytes.NewReader(body)
	if len(body) > 1<<20 {
		// Chunked: refused after reading the limit, so the small rest is
		// drained and no early close races the client's write (a TCP reset
		// would hide the 413 from the client, through either path).
		rd = io.MultiReader(rd)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil || method == "POST" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// maskDecisionID replaces decision ids (random per answer) so that two
// answers compare equal.
func maskDecisionID(b []byte) string {
	return decisionID.ReplaceAllString(string(b), `decision_id$1":$2"…`)
}

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func v26(method, name string) map[string]string {
	h := map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
	if name != "" {
		h["Mcp-Name"] = name
	}
	return h
}

func call(id, tool, args string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + meta26 + `}}`)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// TestDifferential runs one table of scenarios through the standalone
// proxy and through Envoy (the driver) + ext_proc: the client must see the
// same status, content type and body.
func TestDifferential(t *testing.T) {
	e := startDifferential(t)
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
	tests := []struct {
		name     string
		upstream string
		hdr      map[string]string
		body     []byte
		status   int // expected, as a sanity anchor for both paths
	}{
		{"allowed tools/call (SSE answer)", "demo", v26("tools/call", "list_technicians"), call("1", "list_technicians", "{}"), 200},
		{"tools/list filtered (SSE)", "demo", v26("tools/list", ""), list, 200},
		{"undeclared tool refused", "demo", v26("tools/call", "cancel_booking"), call("2", "cancel_booking", `{"booking_id":"B-1001"}`), 200},
		{"progress before the result, filtered", "synthetic", v26("tools/list", ""), []byte(`{"jsonrpc":"2.0","id":100,"method":"tools/list","params":{` + meta26 + `}}`), 200},
		{"large JSON list filtered", "synthetic", v26("tools/list", ""), []byte(`{"jsonrpc":"2.0","id":101,"method":"tools/list","params":{` + meta26 + `}}`), 200},
		{"notification forwarded", "demo", v26("notifications/cancelled", ""), []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta26 + `}}`), 202},
		{"gzip request body", "demo", map[string]string{"Content-Encoding": "gzip", "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}, gzipped(call("3", "list_technicians", "{}")), 200},
		{"duplicate keys", "demo", v26("tools/call", "list_technicians"), []byte(`{"jsonrpc":"2.0","id":4,"id":5,"method":"tools/call","params":{"name":"list_technicians",` + meta26 + `}}`), 400},
		{"header mismatch", "demo", v26("tools/call", "find_customers"), call("6", "cancel_booking", "{}"), 400},
		{"batch", "demo", v26("tools/call", "list_technicians"), []byte(`[` + string(call("7", "list_technicians", "{}")) + `]`), 400},
		{"malformed JSON", "demo", v26("tools/call", "list_technicians"), []byte(`{"jsonrpc":`), 400},
		{"invalid UTF-8", "demo", v26("tools/call", "list_technicians"), call("8", "list_technicians", "{\"q\":\"\xff\"}"), 400},
		{"deep nesting", "demo", v26("tools/call", "get_booking"), call("9", "get_booking", `{"x":`+strings.Repeat("[", 80)+strings.Repeat("]", 80)+`}`), 400},
		{"oversize body", "demo", v26("tools/call", "list_technicians"), call("10", "list_technicians", `{"q":"`+strings.Repeat("a", (1<<20)+100)+`"}`), 413},
		{"wrong content type", "demo", map[string]string{"Content-Type": "text/plain"}, call("11", "list_technicians", "{}"), 415},
		{"unknown protocol version", "demo", map[string]string{"MCP-Protocol-Version": "2099-01-01"}, []byte(`{"jsonrpc":"2.0","id":12,"method":"ping"}`), 400},
		{"unknown method", "demo", v26("x/y", ""), []byte(`{"jsonrpc":"2.0","id":13,"method":"x/y","params":{` + meta26 + `}}`), 404},
		{"foreign origin", "demo", map[string]string{"Origin": "https://evil.example"}, call("14", "list_technicians", "{}"), 403},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct, viaEnvoy := e.both(t, tt.upstream, toHeader(tt.hdr), tt.body)
			if direct.Status != tt.status {
				t.Errorf("proxy: status %d, want %d (%.300s)", direct.Status, tt.status, direct.Body)
			}
			if strings.Contains(direct.Body, "shadow_tool") || strings.Contains(viaEnvoy.Body, "shadow_tool") {
				t.Error("an undeclared tool was listed")
			}
		})
	}
	e.checkStreams(t)
}

func toHeader(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

// both sends one request through the standalone proxy and through Envoy
// (the driver) + ext_proc to an upstream's route, fails the test when the
// client would see a different status, content type or body, and returns
// what each path answered.
func (e *differentialEnv) both(t *testing.T, upstream string, hdr http.Header, body []byte) (direct, viaEnvoy seen) {
	t.Helper()
	path := "/mcp"
	if upstream != "demo" {
		path = "/" + upstream + "/mcp"
	}
	direct = doHeader(t, "POST", e.proxy+path, hdr, body)
	viaEnvoy = doHeader(t, "POST", e.drivers[upstream].URL+path, hdr, body)
	if direct.Status != viaEnvoy.Status || direct.ContentType != viaEnvoy.ContentType || direct.Body != viaEnvoy.Body {
		t.Errorf("proxy and ext_proc differ:\nproxy:   %d %q %.400s\next_proc: %d %q %.400s", direct.Status, direct.ContentType, direct.Body, viaEnvoy.Status, viaEnvoy.ContentType, viaEnvoy.Body)
	}
	return direct, viaEnvoy
}

// checkStreams fails the test unless every request really crossed the
// ext_proc stream, by Envoy's rules.
func (e *differentialEnv) checkStreams(t *testing.T) {
	t.Helper()
	for name, d := range e.stats {
		st := d.Stats()
		if st.StreamsStarted == 0 || st.SpuriousMessages != 0 || st.MessageTimeouts != 0 || st.StreamsFailed != 0 || st.StreamsClosedByServer != 0 {
			t.Errorf("%s: driver stats %+v", name, st)
		}
	}
}

// TestSDKClientThroughEnvoy: the official Go SDK client → Envoy (driver) →
// mcpgate ext_proc → the demo upstream, for both revisions.
func TestSDKClientThroughEnvoy(t *testing.T) {
	e := startDifferential(t)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			c := sdk.NewClient(&sdk.Implementation{Name: "envoy-e2e", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.drivers["demo"].URL + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != 8 {
				t.Errorf("listed %d tools, want the 8 declared", len(tools.Tools))
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}})
			if err != nil || res.IsError {
				t.Fatalf("find_customers: %v %+v", err, res)
			}
			res, err = cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_booking", Arguments: map[string]any{"booking_id": "B-1001"}})
			if err != nil || !res.IsError {
				t.Fatalf("cancel_booking must be a tool error: %v %+v", err, res)
			}
		})
	}
}
