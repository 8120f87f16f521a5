package proxy_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// benchCall posts one 2026-07-28 tools/call (list_technicians, an SSE answer
// from the demo upstream) and drains the answer.
func benchCall(b *testing.B, c *http.Client, url string) {
	body := callBody("1", "list_technicians", "{}")
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "list_technicians")
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkDirectToolsCall is the baseline: client → demo upstream.
func BenchmarkDirectToolsCall(b *testing.B) {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	defer up.Close()
	benchCall(b, up.Client(), up.URL+"/mcp")
}

// BenchmarkProxiedToolsCall: client → mcpgate (default policy) → demo
// upstream, over loopback. Compare with BenchmarkDirectToolsCall.
func BenchmarkProxiedToolsCall(b *testing.B) {
	benchCall(b, http.DefaultClient, startBench(b))
}

func startBench(b *testing.B) string {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	b.Cleanup(up.Close)
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	a := startApp(b, cfg)
	return "http://" + a + "/mcp"
}
