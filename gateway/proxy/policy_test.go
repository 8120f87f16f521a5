package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
)

// withoutCancel removes the declaration of cancel_booking: the undeclared
// default must hide it from tools/list and refuse it on tools/call.
func withoutCancel(c *config.Config) { delete(c.Upstreams[0].Tools, "cancel_booking") }

// TestUndeclaredToolHiddenAndRefused walks the error contract for a refused
// tools/call with the real SDK client: the result is a tool error (not a
// broken connection), its text starts "Error:", names cause, fix and the
// next tool, and ends with one line of JSON equal to structuredContent.
func TestUndeclaredToolHiddenAndRefused(t *testing.T) {
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			e := start(t, withoutCancel)
			cs := connect(t, e.url, version)
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, tool := range tools.Tools {
				if tool.Name == "cancel_booking" {
					t.Fatal("undeclared tool cancel_booking is listed")
				}
			}
			if len(tools.Tools) != 8 {
				t.Errorf("listed %d tools, want the 8 declared ones", len(tools.Tools))
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_booking", Arguments: map[string]any{"booking_id": "B-1001"}})
			if err != nil {
				t.Fatalf("a policy refusal must be a tool result, got error %v", err)
			}
			if !res.IsError {
				t.Fatal("isError is false")
			}
			if n := e.upstream.Calls("cancel_booking"); n != 0 {
				t.Fatalf("upstream ran cancel_booking %d times", n)
			}
			text := res.Content[0].(*sdk.TextContent).Text
			checkToolErrorText(t, text, res.StructuredContent, "tool_not_declared")
		})
	}
}

// checkToolErrorText asserts the error contract's text shape.
func checkToolErrorText(t *testing.T, text string, structured any, code string) {
	t.Helper()
	if !strings.HasPrefix(text, "Error: ") {
		t.Errorf("text does not start with Error: %q", text)
	}
	lines := strings.Split(text, "\n")
	last := lines[len(lines)-1]
	var details struct {
		Error struct {
			Code, Cause, Fix, NextTool, DecisionID string
		} `json:"error"`
	}
	dec := json.NewDecoder(strings.NewReader(last))
	dec.DisallowUnknownFields()
	if err := json.Unmarshal([]byte(last), &details); err != nil {
		t.Fatalf("last line is not JSON: %q: %v", last, err)
	}
	if details.Error.Code != code || details.Error.Cause == "" || details.Error.Fix == "" {
		t.Errorf("details %+v, want code %s with cause and fix", details, code)
	}
	if !strings.Contains(lines[0], details.Error.Cause) || !strings.Contains(lines[0], "Fix: ") {
		t.Errorf("first line does not name cause and fix: %q", lines[0])
	}
	sc, _ := json.Marshal(structured)
	var a, b any
	_ = json.Unmarshal(sc, &a)
	_ = json.Unmarshal([]byte(last), &b)
	as, _ := json.Marshal(a)
	bs, _ := json.Marshal(b)
	if !bytes.Equal(as, bs) {
		t.Errorf("structuredContent %s != text JSON %s", as, bs)
	}
}

// TestRefusalIDsByteExact: the refusal answers for the same id, byte for
// byte, and as HTTP 200.
func TestRefusalIDsByteExact(t *testing.T) {
	e := start(t, withoutCancel)
	for _, id := range []string{`0`, `-7`, `9007199254740993`, `1.50`, `"a\u0062"`} {
		resp, body := post(t, e.url, h2026("tools/call", "cancel_booking"), callBody(id, "cancel_booking", `{"booking_id":"B-1001"}`))
		if resp.StatusCode != 200 {
			t.Fatalf("id %s: status %d", id, resp.StatusCode)
		}
		if !bytes.Contains(body, []byte(`"id":`+id+`,`)) {
			t.Errorf("id %s not echoed byte-exact: %s", id, body)
		}
		if !bytes.Contains(body, []byte(`"isError":true`)) {
			t.Errorf("not a tool error: %s", body)
		}
	}
	if e.hits.Load() != 0 {
		t.Errorf("%d requests reached the upstream", e.hits.Load())
	}
}

// TestCORSPreflight: allowed origins get the MCP headers; others 403.
func TestCORSPreflight(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Transport.AllowedOrigins = []string{"https://app.example.com"} })
	req, _ := http.NewRequest("OPTIONS", e.url, nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type, mcp-method, mcp-param-region")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	allow := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
	for _, h := range []string{"mcp-method", "mcp-name", "mcp-protocol-version", "authorization", "mcp-param-region"} {
		if !strings.Contains(allow, h) {
			t.Errorf("Access-Control-Allow-Headers %q lacks %s", allow, h)
		}
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "https://app.example.com" {
		t.Errorf("Allow-Origin %q", got)
	}
	if !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Errorf("Expose-Headers %q", resp.Header.Get("Access-Control-Expose-Headers"))
	}
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("foreign origin preflight: %d", resp.StatusCode)
	}
	if e.hits.Load() != 0 {
		t.Errorf("preflight reached the upstream")
	}
}

// TestSlowBody: a client that stops sending its body gets 408 after the read
// timeout, nothing reaches the upstream, and the gateway keeps serving.
func TestSlowBody(t *testing.T) {
	e := start(t, func(c *config.Config) { c.Limits.ReadTimeout = config.DurationOf(300 * time.Millisecond) })
	conn, err := net.Dial("tcp", strings.TrimPrefix(strings.TrimSuffix(e.url, "/mcp"), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":"))
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, _ := conn.Read(buf)
	if !bytes.HasPrefix(buf[:n], []byte("HTTP/1.1 408")) {
		t.Fatalf("got %q, want a 408", buf[:n])
	}
	if e.hits.Load() != 0 {
		t.Errorf("slow body reached the upstream")
	}
	resp, body := post(t, e.url, h2026("tools/call", "list_technicians"), callBody("1", "list_technicians", "{}"))
	if resp.StatusCode != 200 || !bytes.Contains(body, []byte(`"result"`)) {
		t.Fatalf("follow-up: %d %s", resp.StatusCode, body)
	}
}

// TestUpstreamTimeout: an upstream that does not answer within
// upstreams[].timeout gets the client a 502 with a JSON-RPC error for its id.
func TestUpstreamTimeout(t *testing.T) {
	hang := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(1 * time.Second):
		}
	})
	e := startWith(t, hang, nil, func(c *config.Config) { c.Upstreams[0].Timeout = config.DurationOf(200 * time.Millisecond) })
	resp, body := post(t, e.url, h2026("tools/call", "list_technicians"), callBody("42", "list_technicians", "{}"))
	if resp.StatusCode != 502 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if id, code, _ := rpcError(t, body); string(id) != "42" || code != -32603 {
		t.Errorf("id %s code %d", id, code)
	}
}

// TestTransportGateHeaders: headers a proxy could be tricked with are
// refused before anything reaches the upstream.
func TestTransportGateHeaders(t *testing.T) {
	e := start(t, nil)
	good := callBody("1", "list_technicians", "{}")
	for _, tt := range []struct {
		name   string
		mutate func(*http.Request)
		status int
	}{
		{"Connection nominates Mcp-Method", func(r *http.Request) { r.Header.Set("Connection", "close, Mcp-Method") }, 400},
		{"Connection nominates MCP-Protocol-Version", func(r *http.Request) { r.Header.Set("Connection", "keep-alive, MCP-Protocol-Version") }, 400},
		{"two Origin headers", func(r *http.Request) { r.Header["Origin"] = []string{"http://localhost", "http://evil.example"} }, 400},
		{"two Content-Type headers", func(r *http.Request) { r.Header["Content-Type"] = []string{"application/json", "text/plain"} }, 400},
		{"foreign Host on a loopback listener (DNS rebinding)", func(r *http.Request) { r.Host = "evil.example.com" }, 403},
		{"GET with a body naming a tool", func(r *http.Request) { r.Method = "GET" }, 400},
		{"DELETE with Mcp-Method", func(r *http.Request) { r.Method = "DELETE"; r.Body = http.NoBody; r.ContentLength = 0 }, 400},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.url, bytes.NewReader(good))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", "list_technicians")
			tt.mutate(req)
			before := e.hits.Load()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if e.hits.Load() != before {
				t.Error("the request reached the upstream")
			}
		})
	}
}

// TestTenantArgumentRefused: the naive demo upstream takes the tenant from
// an argument; through mcpgate such a call is a tool error naming the
// argument, and the upstream runs nothing.
func TestTenantArgumentRefused(t *testing.T) {
	e := start(t, nil)
	cs := connect(t, e.url, "2026-07-28")
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a", "tenant": "globex"}})
	if err != nil || !res.IsError {
		t.Fatalf("want a tool error, got %v %+v", err, res)
	}
	checkToolErrorText(t, res.Content[0].(*sdk.TextContent).Text, res.StructuredContent, "tenant_argument")
	if n := e.upstream.Calls("find_customers"); n != 0 {
		t.Errorf("upstream ran find_customers %d times", n)
	}
}
