package proxy_test

import (
	"time"

	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/rig"
	"github.com/mcpgate/mcpgate/policy"
)

// benchCall posts one 2026-07-28 tools/call of tool with args and drains
// the answer.
func benchCall(b *testing.B, c *http.Client, url, tool, args string) {
	body := callBody("1", tool, args)
	sink := &answerSink{}
	b.ReportAllocs()
	for b.Loop() {
		sink.reset()
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(sink, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
		// A refusal is a 200 tool result with isError: the benchmark must
		// measure allowed calls only.
		if sink.refused || n == 0 {
			b.Fatalf("call refused or empty: %s", sink.head)
		}
	}
}

// BenchmarkDirectToolsCall is the baseline: client → demo upstream.
func BenchmarkDirectToolsCall(b *testing.B) {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	defer up.Close()
	benchCall(b, up.Client(), up.URL+"/mcp", "list_technicians", "{}")
}

// BenchmarkProxiedToolsCall: client → mcpgate (default policy) → demo
// upstream, over loopback. Compare with BenchmarkDirectToolsCall. The
// rate buckets are kept (every call still takes from them) but sized like
// internal/rig's so that no call is refused: with the quickstart's
// (reads: burst 60 at 10/s) all but the first few hundred calls would be
// rate-limit refusals and the benchmark would measure those, not allowed
// calls. benchCall fails on a refusal.
func BenchmarkProxiedToolsCall(b *testing.B) {
	benchCall(b, http.DefaultClient, startBench(b, demo.New(demo.Options{}).Handler(), nil), "list_technicians", "{}")
}

// BenchmarkDirectToolsCallJSON is the baseline of the JSON answer path:
// client → the load bench's upstream (internal/rig: the Go SDK's
// stateless handler answering application/json), get_status.
func BenchmarkDirectToolsCallJSON(b *testing.B) {
	up := httptest.NewServer(rig.NewUpstream())
	defer up.Close()
	benchCall(b, up.Client(), up.URL+"/mcp", rig.ToolGetStatus, `{"service":"db"}`)
}

// BenchmarkProxiedToolsCallJSON: the same call through mcpgate (default
// policy, get_status declared as a read with a result allowlist, as in
// e2e/bench): the path the load bench measures, where the adapter
// buffers the JSON answer and hands it to the pipeline.
func BenchmarkProxiedToolsCallJSON(b *testing.B) {
	url := startBench(b, rig.NewUpstream(), func(cfg *config.Config) {
		cfg.Upstreams[0].Tools = map[string]policy.ToolDeclaration{rig.ToolGetStatus: {
			Effect: "read", Rights: []string{"technicians:read"},
			ResultFields: []string{"service", "state", "checked_at"},
		}}
	})
	benchCall(b, http.DefaultClient, url, rig.ToolGetStatus, `{"service":"db"}`)
}

// staticStatus answers every POST with get_status's result as the bench
// upstream writes it, at no cost of its own: with it, the time and
// allocations of BenchmarkProxiedToolsCallStatic beyond
// BenchmarkDirectToolsCallStatic are mcpgate's (plus one more loopback
// hop), not the Go SDK's, which dominate the other pairs. A hand-written
// upstream for that reason only; the answer is the SDK's, byte for byte.
var staticStatus = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	_, _ = w.Write(staticStatusAnswer)
})

var staticStatusAnswer = []byte(`{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpgate-bench-upstream","version":"1"}},"content":[{"type":"text","text":"{\"checked_at\":\"2026-01-02T03:04:05Z\",\"region\":\"eu-west\",\"service\":\"db\",\"state\":\"ok\"}"}],"structuredContent":{"checked_at":"2026-01-02T03:04:05Z","region":"eu-west","service":"db","state":"ok"},"resultType":"complete"}}`)

// BenchmarkDirectToolsCallStatic: client → a static upstream (get_status's
// answer, no MCP server behind it).
func BenchmarkDirectToolsCallStatic(b *testing.B) {
	up := httptest.NewServer(staticStatus)
	defer up.Close()
	benchCall(b, up.Client(), up.URL+"/mcp", rig.ToolGetStatus, `{"service":"db"}`)
}

// BenchmarkProxiedToolsCallStatic: the same through mcpgate, get_status
// declared as in BenchmarkProxiedToolsCallJSON (catalog off: a static
// upstream lists no tools). The difference to the direct call is the
// gateway's work per allowed call.
func BenchmarkProxiedToolsCallStatic(b *testing.B) {
	url := startBench(b, staticStatus, func(cfg *config.Config) {
		cfg.Catalog.Disabled = true
		cfg.Upstreams[0].Tools = map[string]policy.ToolDeclaration{rig.ToolGetStatus: {
			Effect: "read", Rights: []string{"technicians:read"},
			ResultFields: []string{"service", "state", "checked_at"},
		}}
	})
	benchCall(b, http.DefaultClient, url, rig.ToolGetStatus, `{"service":"db"}`)
}

// startBench runs upstream and mcpgate (quickstart configuration, edited
// by edit) and returns mcpgate's MCP endpoint.
func startBench(b *testing.B, upstream http.Handler, edit func(*config.Config)) string {
	up := httptest.NewServer(upstream)
	b.Cleanup(up.Close)
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	big := config.Bucket{Rate: 1_000_000, Per: config.DurationOf(time.Second), Burst: 1_000_000}
	cfg.RateLimits.Buckets = map[string]config.Bucket{config.BucketReads: big, config.BucketWrites: big}
	if edit != nil {
		edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	a := startApp(b, cfg)
	return "http://" + a + "/mcp"
}

// answerSink discards an answer, remembering whether it carried
// "isError":true (a tool refusal) and its first bytes for the message.
type answerSink struct {
	refused bool
	head    []byte
	tail    []byte // the last bytes of the previous write: a match may straddle two
}

var isErrorTrue = []byte(`"isError":true`)

func (s *answerSink) reset() { s.refused, s.head, s.tail = false, s.head[:0], s.tail[:0] }

func (s *answerSink) Write(p []byte) (int, error) {
	if len(s.head) < 512 {
		s.head = append(s.head, p[:min(len(p), 512-len(s.head))]...)
	}
	joined := append(s.tail, p[:min(len(p), len(isErrorTrue))]...)
	if bytes.Contains(joined, isErrorTrue) || bytes.Contains(p, isErrorTrue) {
		s.refused = true
	}
	s.tail = append(s.tail[:0], p[max(0, len(p)-len(isErrorTrue)):]...)
	return len(p), nil
}
