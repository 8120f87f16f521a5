package proxy_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
)

// sseUpstream is a hand-written upstream, used where no real MCP server can
// be made to produce the stream a test needs on demand (an event held back
// until the client saw the previous one; a single 20 MiB event). It answers
// every POST with text/event-stream.
type sseUpstream struct {
	events  []string      // data of each event, sent in order
	release chan struct{} // if set, the last event waits for it
}

func (u *sseUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	f := w.(http.Flusher)
	for i, data := range u.events {
		if i == len(u.events)-1 && u.release != nil {
			select {
			case <-u.release:
			case <-time.After(10 * time.Second):
				return
			}
		}
		fmt.Fprintf(w, "id: %d\nevent: message\ndata: %s\n\n", i, data)
		f.Flush()
	}
}

const listReq = `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta + `}}`

// TestSSEEventByEvent: events are relayed as they come, never buffered: the
// upstream holds its last event back until the client has read the first.
func TestSSEEventByEvent(t *testing.T) {
	up := &sseUpstream{
		events: []string{
			`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}`,
			`{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"find_customers","inputSchema":{"type":"object"}},{"name":"undeclared_tool","inputSchema":{"type":"object"}}]}}`,
		},
		release: make(chan struct{}),
	}
	e := startWith(t, up, nil, nil)
	req, _ := http.NewRequest("POST", e.url, strings.NewReader(listReq))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Errorf("X-Accel-Buffering %q", resp.Header.Get("X-Accel-Buffering"))
	}
	br := bufio.NewReader(resp.Body)
	first := readEvent(t, br)
	if !strings.Contains(first, "notifications/progress") || !strings.HasPrefix(first, "id: 0\nevent: message\n") {
		t.Fatalf("first event %q", first)
	}
	close(up.release) // only now may the upstream send the answer
	second := readEvent(t, br)
	if !strings.Contains(second, `"find_customers"`) {
		t.Errorf("declared tool missing: %q", second)
	}
	if strings.Contains(second, "undeclared_tool") {
		t.Errorf("undeclared tool relayed: %q", second)
	}
	if !strings.HasPrefix(second, "id: 1\nevent: message\n") {
		t.Errorf("rewritten event lost its id/event fields: %q", second)
	}
}

func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var ev strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading event: %v (so far %q)", err, ev.String())
		}
		if line == "\n" {
			return ev.String()
		}
		ev.WriteString(line)
	}
}

// TestSSEHugeEvent: a single 20 MiB event is relayed intact.
func TestSSEHugeEvent(t *testing.T) {
	desc := strings.Repeat("x", 20<<20)
	up := &sseUpstream{events: []string{`{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"find_customers","description":"` + desc + `","inputSchema":{"type":"object"}}]}}`}}
	e := startWith(t, up, nil, func(c *config.Config) { c.Limits.MaxSSEEventBytes = 32 << 20 })
	resp, body := post(t, e.url, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, []byte(listReq))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := "id: 0\nevent: message\ndata: " + up.events[0] + "\n\n"
	if !bytes.Equal(body, []byte(want)) {
		t.Fatalf("relayed %d bytes, want the %d bytes of the event unchanged", len(body), len(want))
	}
}

// TestSSEOverLimitWithheld: an event beyond max_sse_event_bytes is never
// relayed unchecked.
func TestSSEOverLimitWithheld(t *testing.T) {
	up := &sseUpstream{events: []string{`{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"undeclared_tool","description":"` + strings.Repeat("x", 2<<20) + `"}]}}`}}
	e := startWith(t, up, nil, func(c *config.Config) { c.Limits.MaxSSEEventBytes = 1 << 20 })
	req, _ := http.NewRequest("POST", e.url, strings.NewReader(listReq))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if bytes.Contains(body, []byte("undeclared_tool")) {
		t.Fatal("an over-limit event reached the client unchecked")
	}
	if !bytes.Contains(body, []byte(`"id":4,"error":{"code":-32603`)) {
		t.Fatalf("want a JSON-RPC error event for the request, got %q", body)
	}
}

// TestJSONListFiltered: an application/json tools/list answer is filtered
// too, and Content-Length matches the new body.
func TestJSONListFiltered(t *testing.T) {
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"undeclared_tool"},{"name":"get_booking","inputSchema":{"type":"object"}}],"nextCursor":"c2"}}`)
	})
	e := startWith(t, up, nil, nil)
	resp, body := post(t, e.url, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, []byte(listReq))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	want := `{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"get_booking","inputSchema":{"type":"object"}}],"nextCursor":"c2"}}`
	if string(body) != want {
		t.Errorf("body\n%s\nwant\n%s", body, want)
	}
	if resp.ContentLength != int64(len(body)) {
		t.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(body))
	}
}

// TestSSEShapingNotBypassed: an answer hidden behind an empty first data
// line or leading spaces is still shaped, and an unfinished event at the
// end of the stream is never relayed.
func TestSSEShapingNotBypassed(t *testing.T) {
	answer := `{"jsonrpc":"2.0","id":4,"result":{"tools":[{"name":"undeclared_tool"},{"name":"get_booking"}]}}`
	for name, stream := range map[string]string{
		"empty first data line": "data:\ndata: " + answer + "\n\n",
		"leading spaces":        "data:    " + answer + "\n\n",
		"unfinished last event": "data: " + answer,
	} {
		t.Run(name, func(t *testing.T) {
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, stream)
			})
			e := startWith(t, up, nil, nil)
			_, body := post(t, e.url, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, []byte(listReq))
			if bytes.Contains(body, []byte("undeclared_tool")) {
				t.Fatalf("unshaped answer relayed: %q", body)
			}
		})
	}
}

// TestListFilteredWhateverTheIDOrStatus: an upstream that rewrites the id
// (1.0 → 1) or answers with another status still gets its list filtered.
func TestListFilteredWhateverTheIDOrStatus(t *testing.T) {
	for _, status := range []int{200, 201, 500} {
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"undeclared_tool"},{"name":"get_booking"}]}}`)
		})
		e := startWith(t, up, nil, nil)
		_, body := post(t, e.url, map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"},
			[]byte(`{"jsonrpc":"2.0","id":1.0,"method":"tools/list","params":{`+meta+`}}`))
		if bytes.Contains(body, []byte("undeclared_tool")) || !bytes.Contains(body, []byte("get_booking")) {
			t.Errorf("status %d: %s", status, body)
		}
	}
}
