package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// listenStream is an open subscriptions/listen stream: every JSON-RPC
// message it carries, in order.
type listenStream struct {
	msgs   chan listenMsg
	cancel context.CancelFunc
}

type listenMsg struct {
	Method string `json:"method"`
	Params struct {
		Notifications map[string]any `json:"notifications"`
		Meta          map[string]any `json:"_meta"`
	} `json:"params"`
}

// openListen opens a subscriptions/listen stream (id "sub-1") asking for
// tools and prompts list changes.
func openListen(t *testing.T, base, token string) *listenStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"jsonrpc":"2.0","id":"sub-1","method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true,"promptsListChanged":true},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("listen: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &listenStream{msgs: make(chan listenMsg, 64), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			d, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m listenMsg
			if json.Unmarshal([]byte(d), &m) == nil {
				s.msgs <- m
			}
		}
		close(s.msgs)
	}()
	t.Cleanup(cancel)
	return s
}

// next waits for the stream's next message (a deadline, not a timing
// assertion: a correct gateway delivers at once).
func (s *listenStream) next(t *testing.T, what string) listenMsg {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		if !ok {
			t.Fatalf("%s: the stream ended", what)
		}
		return m
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: nothing arrived", what)
	}
	return listenMsg{}
}

// expect waits for messages of the methods, in this order, and fails on
// anything else.
func (s *listenStream) expect(t *testing.T, where string, methods ...string) {
	t.Helper()
	for _, want := range methods {
		m := s.next(t, where+": "+want)
		if m.Method != want {
			t.Fatalf("%s: got %s, want %s", where, m.Method, want)
		}
		if id := m.Params.Meta["io.modelcontextprotocol/subscriptionId"]; id != "sub-1" {
			t.Errorf("%s: %s carries subscriptionId %v, want sub-1", where, m.Method, id)
		}
		if m.Method == "notifications/subscriptions/acknowledged" && m.Params.Notifications["toolsListChanged"] != true {
			t.Errorf("%s: acknowledgement without toolsListChanged: %v", where, m.Params.Notifications)
		}
	}
}

// TestListChangedAfterRepin: SIGHUP (App.Reload) with a manifest that now
// pins get_archive announces notifications/tools/list_changed on open
// subscriptions/listen streams: at once through the proxy; through Envoy
// with the upstream's next chunk on the stream (here its
// prompts/list_changed) — ext_proc can only answer Envoy's messages.
func TestListChangedAfterRepin(t *testing.T) {
	e := startH2Env(t, false)
	token := e.mint(t, "")
	if _, got := listNames(t, e.proxy, token); strings.Contains(got, "get_archive") {
		t.Fatalf("get_archive listed before it was pinned: %s", got)
	}
	viaProxy, viaEnvoy := openListen(t, e.proxy, token), openListen(t, e.envoy, token)
	viaProxy.expect(t, "proxy", "notifications/subscriptions/acknowledged")
	viaEnvoy.expect(t, "extproc", "notifications/subscriptions/acknowledged")

	e.pin(t) // approve get_archive too
	if err := e.app.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	viaProxy.expect(t, "proxy", "notifications/tools/list_changed")
	e.up.addPrompt()
	viaProxy.expect(t, "proxy", "notifications/prompts/list_changed")
	viaEnvoy.expect(t, "extproc", "notifications/prompts/list_changed", "notifications/tools/list_changed")
	for _, v := range e.vias() {
		if _, got := listNames(t, v.base, token); !strings.Contains(got, "get_archive") {
			t.Errorf("%s: get_archive not listed after the re-pin: %s", v.name, got)
		}
	}
	// Nothing changed since: the next upstream chunk carries no
	// announcement.
	e.up.addPrompt()
	viaProxy.expect(t, "proxy", "notifications/prompts/list_changed")
	viaEnvoy.expect(t, "extproc", "notifications/prompts/list_changed")
}

// TestListChangedAfterRightsChange: the person loses a right in the rights
// file; the periodic check (catalog.list_changed_check, 100ms here)
// re-authenticates each stream's request and announces the change.
func TestListChangedAfterRightsChange(t *testing.T) {
	e := startH2Env(t, false)
	token := e.mint(t, "")
	viaProxy, viaEnvoy := openListen(t, e.proxy, token), openListen(t, e.envoy, token)
	viaProxy.expect(t, "proxy", "notifications/subscriptions/acknowledged")
	viaEnvoy.expect(t, "extproc", "notifications/subscriptions/acknowledged")

	e.writeRights(t, "reports:read") // notes:read is gone
	viaProxy.expect(t, "proxy", "notifications/tools/list_changed")
	e.up.addPrompt()
	viaProxy.expect(t, "proxy", "notifications/prompts/list_changed")
	viaEnvoy.expect(t, "extproc", "notifications/prompts/list_changed", "notifications/tools/list_changed")
	for _, v := range e.vias() {
		if _, got := listNames(t, v.base, token); got != "get_report" {
			t.Errorf("%s: listed %s after the rights change, want get_report", v.name, got)
		}
	}
}
