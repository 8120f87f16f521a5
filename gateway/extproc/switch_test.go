package extproc_test

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
)

// TestUpstreamSwitchingProtocolsThroughEnvoy: Envoy's HTTP/1 codec hands a
// 101 answering a request that asked for no upgrade to the filter chain
// like any response: ext_proc gets its headers and mcpgate answers a
// JSON-RPC error for the request's id in its place, none of the
// upstream's bytes.
func TestUpstreamSwitchingProtocolsThroughEnvoy(t *testing.T) {
	closed := make(chan error, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nUPSTREAM-1")
		_ = brw.Flush()
		time.Sleep(10 * time.Millisecond)
		_, _ = conn.Write([]byte("UPSTREAM-2"))
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, bufio.NewReader(conn))
		closed <- err
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	d, err := envoydriver.New(envoydriver.Config{Target: serveTarget(t, server(t)), Upstream: u,
		RouteMetadata: map[string]map[string]any{"mcpgate": {"upstream": "crm"}}, RequestAttributes: []string{"xds.route_metadata"},
		AllowModeOverride: true, MessageTimeout: extproc.DefaultMaxMessageBudget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	front := httptest.NewServer(d)
	t.Cleanup(front.Close)
	for _, id := range []string{"7", `"c-8"`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`
		req, err := http.NewRequest("POST", front.URL+"/crm/mcp", bytes.NewReader([]byte(body)))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
			"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "get_booking"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		want := `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,`
		if resp.StatusCode != 502 || !bytes.HasPrefix(got, []byte(want)) || bytes.Contains(got, []byte("UPSTREAM")) {
			t.Errorf("id %s: %d %s", id, resp.StatusCode, got)
		}
		select {
		case err := <-closed:
			if err != nil {
				t.Errorf("id %s: the upstream's connection was not closed: %v", id, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("id %s: the upstream was not reached", id)
		}
	}
}
