package stdio_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/internal/stdio"
)

const initialize = `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`

// open initializes a session and returns its id.
func (r *rig) open(t *testing.T) string {
	t.Helper()
	resp, body := r.send(t, "POST", "", initialize)
	if resp == nil || resp.StatusCode != 200 || !strings.Contains(body, `"id":"init"`) {
		t.Fatalf("initialize: %v %s", resp, body)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" {
		t.Fatal("initialize answered without Mcp-Session-Id")
	}
	return sid
}

// stream opens a GET notification stream on session sid; the answer's
// body stays open.
func (r *rig) stream(t *testing.T, sid string) *http.Response {
	t.Helper()
	resp, err := r.do("GET", sid, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	return resp
}

// TestBridgeSessionRules: the answer to initialize opens a session with
// a fresh visible-ASCII id; every later message of an older revision
// needs it (400 without, 404 for an unknown or ended one); DELETE ends
// it; 2026-07-28 requests have no session.
func TestBridgeSessionRules(t *testing.T) {
	r := start(t)
	r.ready(t)
	sid, other := r.open(t), r.open(t)
	if sid == other {
		t.Fatalf("two sessions share the id %q", sid)
	}
	for _, id := range []string{sid, other} {
		if len(id) < 16 || strings.IndexFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) >= 0 {
			t.Fatalf("session id %q: want at least 16 visible ASCII characters", id)
		}
	}
	const list = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	const answer = `{"jsonrpc":"2.0","id":"99","result":{}}`
	const modern = `{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	check := func(t *testing.T, method, sid, body string, status int, want string) {
		t.Helper()
		resp, got := r.send(t, method, sid, body)
		if resp == nil || resp.StatusCode != status || !strings.Contains(got, want) {
			t.Fatalf("%s %q %.60s: got %v %.300s, want %d with %q", method, sid, body, resp, got, status, want)
		}
	}
	for _, tc := range []struct {
		name, method, sid, body string
		status                  int
		want                    string
	}{
		{"request on the session", "POST", sid, list, 200, `"id":7,"result"`},
		{"initialized on the session", "POST", sid, initialized, 202, ""},
		{"request without a session", "POST", "", list, 400, `"id":7,"error"`},
		{"notification without a session", "POST", "", initialized, 400, "Mcp-Session-Id is required"},
		{"answer without a session", "POST", "", answer, 400, "Mcp-Session-Id is required"},
		{"GET without a session", "GET", "", "", 400, "Mcp-Session-Id is required"},
		{"DELETE without a session", "DELETE", "", "", 400, "Mcp-Session-Id is required"},
		{"request on an unknown session", "POST", "no-such-session", list, 404, "Session not found"},
		{"notification on an unknown session", "POST", "no-such-session", initialized, 404, "Session not found"},
		{"GET on an unknown session", "GET", "no-such-session", "", 404, "Session not found"},
		{"DELETE of an unknown session", "DELETE", "no-such-session", "", 404, "Session not found"},
		{"2026-07-28 request, no session", "POST", "", modern, 200, `"id":8,"result"`},
		{"PUT", "PUT", sid, "", 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.method, tc.sid, tc.body, tc.status, tc.want) })
	}
	t.Run("DELETE ends the session", func(t *testing.T) {
		check(t, "DELETE", sid, "", 204, "")
		check(t, "POST", sid, list, 404, `"id":7,"error"`)
		check(t, "POST", sid, initialized, 404, "")
		check(t, "GET", sid, "", 404, "")
		check(t, "DELETE", sid, "", 404, "")
		check(t, "POST", other, list, 200, `"id":7,"result"`)
	})
	if n := r.b.Sessions(); n != 1 {
		t.Fatalf("%d sessions open, want 1", n)
	}
}

// TestBridgeSessionEndEndsItsExchanges: DELETE ends the session's GET
// stream and the SSE stream of a call of it in flight (one waiting for
// the client's answer to an elicitation), and other sessions' calls go
// on.
func TestBridgeSessionEndEndsItsExchanges(t *testing.T) {
	r := start(t)
	r.ready(t)
	sid, other := r.open(t), r.open(t)
	stream := r.stream(t, sid)
	poll.Until(t, 10*time.Second, "the GET stream", func() bool { return r.b.Listeners() == 1 })
	call, err := r.do("POST", sid, `{"jsonrpc":"2.0","id":"ask","method":"tools/call","params":{"name":"ask","arguments":{}}}`)
	if err != nil {
		t.Fatal(err)
	}
	defer call.Body.Close()
	// The elicitation arrives on the call's stream: the call is in flight.
	first, err := bufio.NewReader(call.Body).ReadString('\n')
	if err != nil || call.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("call stream: %v %q %q", err, call.Header.Get("Content-Type"), first)
	}
	if resp, _ := r.send(t, "DELETE", sid, ""); resp == nil || resp.StatusCode != 204 {
		t.Fatalf("DELETE: %v", resp)
	}
	for name, body := range map[string]io.Reader{"GET stream": stream.Body, "call stream": call.Body} {
		rest, err := io.ReadAll(body)
		if err != nil || strings.Contains(string(rest), `"id":"ask"`) {
			t.Fatalf("%s after DELETE: %v %s", name, err, rest)
		}
	}
	if resp, body := r.send(t, "POST", other, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"on"}}}`); resp == nil || !strings.Contains(body, "on") {
		t.Fatalf("other session: %v %s", resp, body)
	}
}

func metricOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Gauge != nil {
				return m.Gauge.GetValue()
			}
			return m.Counter.GetValue()
		}
	}
	return 0
}

// TestBridgeEvictsTheOldestIdleSession: beyond MaxSessions the session
// idle the longest ends, not an older one in use.
func TestBridgeEvictsTheOldestIdleSession(t *testing.T) {
	r := startWith(t, func(o *stdio.Options) { o.MaxSessions = 2 })
	r.ready(t)
	b, reg := r.b, r.reg
	busy := r.open(t)
	r.stream(t, busy) // in use while its GET stream is open
	poll.Until(t, 10*time.Second, "the GET stream", func() bool { return b.Listeners() == 1 })
	idle := r.open(t)
	newest := r.open(t)
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	for sid, status := range map[string]int{busy: 200, idle: 404, newest: 200} {
		if resp, body := r.send(t, "POST", sid, list); resp == nil || resp.StatusCode != status {
			t.Errorf("session %s: %v %.200s, want %d", sid, resp, body, status)
		}
	}
	if n := metricOf(t, reg, "mcpgate_stdio_sessions_evicted_total"); n != 1 {
		t.Errorf("evicted %v, want 1", n)
	}
}

// TestBridgeSessionsOfSDKClients: Go SDK clients of older revisions open
// a session each, call on it concurrently, and end it (DELETE) on Close.
func TestBridgeSessionsOfSDKClients(t *testing.T) {
	r := start(t)
	r.ready(t)
	var sessions []*mcp.ClientSession
	for _, v := range []string{"2025-11-25", "2025-06-18", "2025-03-26"} {
		sessions = append(sessions, r.client(t, nil, v))
	}
	if n := r.b.Sessions(); n != 3 {
		t.Fatalf("%d sessions, want 3", n)
	}
	var wg sync.WaitGroup
	for _, cs := range sessions {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": cs.ID()}})
				if err != nil || !strings.Contains(text(t, res), cs.ID()) {
					t.Errorf("echo on %s: %v %+v", cs.ID(), err, res)
				}
			}()
		}
	}
	wg.Wait()
	for _, cs := range sessions {
		if err := cs.Close(); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, 10*time.Second, "every session ended", func() bool { return r.b.Sessions() == 0 })
}
