package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/internal/rig"
	"github.com/mcpgate/mcpgate/policy"
)

// bodyCheck wraps an upstream: it reads each request body in full, fails
// the test when Content-Length (field or header) disagrees with it,
// records the tools/call argument "service" it carries, and hands the body
// on.
type bodyCheck struct {
	t    *testing.T
	next http.Handler
	mu   sync.Mutex
	seen map[string]int // service argument → calls that carried it
}

func (u *bodyCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		u.t.Errorf("upstream: reading the body: %v", err)
		http.Error(w, "bad body", 400)
		return
	}
	// A client's chunked body is forwarded chunked (the outgoing request
	// keeps its Transfer-Encoding); any other comes with its length.
	if r.ContentLength != int64(len(body)) && (r.ContentLength != -1 || len(r.TransferEncoding) != 1 || r.TransferEncoding[0] != "chunked") {
		u.t.Errorf("upstream: ContentLength %d (%v) for %d bytes", r.ContentLength, r.TransferEncoding, len(body))
	}
	if v := r.Header.Get("Content-Length"); v != "" && v != strconv.Itoa(len(body)) {
		u.t.Errorf("upstream: Content-Length header %s for %d bytes", v, len(body))
	}
	var m struct {
		Params struct {
			Arguments struct {
				Service string `json:"service"`
			} `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &m) == nil && m.Params.Arguments.Service != "" {
		u.mu.Lock()
		u.seen[m.Params.Arguments.Service]++
		u.mu.Unlock()
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	u.next.ServeHTTP(w, r)
}

// TestConcurrentCallsRelayedExactly: concurrent tools/call through the
// standalone proxy to the load bench's upstream (the Go SDK answering
// application/json, so the adapter reads each answer in full and the
// pipeline shapes it), with arguments from a few bytes to well beyond the
// adapter's first read buffer, sent with a Content-Length or chunked.
// Every call reaches the upstream once with its own body and a
// Content-Length that matches it, and every client gets the answer to its
// own call, with a Content-Length that matches the relayed body: the
// per-request state, the sized reads and the reused header names never
// mix two calls up or cut one short.
func TestConcurrentCallsRelayedExactly(t *testing.T) {
	check := &bodyCheck{t: t, next: rig.NewUpstream(), seen: map[string]int{}}
	e := startWith(t, check, nil, func(cfg *config.Config) {
		cfg.Upstreams[0].Tools = map[string]policy.ToolDeclaration{rig.ToolGetStatus: {
			Effect: "read", Rights: []string{"technicians:read"},
			ResultFields: []string{"service", "state", "checked_at"},
		}}
		big := config.Bucket{Rate: 1_000_000, Per: config.DurationOf(time.Second), Burst: 1_000_000}
		cfg.RateLimits.Buckets = map[string]config.Bucket{config.BucketReads: big}
	})
	const clients, calls = 8, 12
	sizes := []int{1, 40, 500, 4000, 4100, 9000, 30000}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range calls {
				size := sizes[(c+i)%len(sizes)]
				service := fmt.Sprintf("c%d-i%d-", c, i) + strings.Repeat(string(rune('a'+c)), size)
				args, _ := json.Marshal(map[string]string{"service": service})
				body := callBody(strconv.Itoa(c*1000+i), rig.ToolGetStatus, string(args))
				var src io.Reader = bytes.NewReader(body)
				if i%2 == 1 {
					src = io.MultiReader(src) // length unknown: sent chunked
				}
				req, _ := http.NewRequest("POST", e.url, src)
				for k, v := range h2026("tools/call", rig.ToolGetStatus) {
					req.Header.Set(k, v)
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					t.Errorf("call %d/%d: %d %v %.300s", c, i, resp.StatusCode, err, got)
					continue
				}
				if resp.ContentLength >= 0 && resp.ContentLength != int64(len(got)) {
					t.Errorf("call %d/%d: Content-Length %d for %d bytes", c, i, resp.ContentLength, len(got))
				}
				var ans struct {
					ID     json.RawMessage `json:"id"`
					Result struct {
						IsError           bool `json:"isError"`
						StructuredContent struct {
							Service string `json:"service"`
							Region  string `json:"region"`
						} `json:"structuredContent"`
					} `json:"result"`
				}
				if err := json.Unmarshal(got, &ans); err != nil {
					t.Errorf("call %d/%d: %v in %.300s", c, i, err, got)
					continue
				}
				if string(ans.ID) != strconv.Itoa(c*1000+i) || ans.Result.IsError || ans.Result.StructuredContent.Service != service {
					t.Errorf("call %d/%d: the answer is not this call's: %.300s", c, i, got)
				}
				if ans.Result.StructuredContent.Region != "" {
					t.Errorf("call %d/%d: a field outside result_fields was relayed: %.300s", c, i, got)
				}
			}
		})
	}
	wg.Wait()
	check.mu.Lock()
	defer check.mu.Unlock()
	if len(check.seen) != clients*calls {
		t.Errorf("the upstream saw %d distinct calls, want %d", len(check.seen), clients*calls)
	}
	for s, n := range check.seen {
		if n != 1 {
			t.Errorf("the upstream saw %.20s… %d times", s, n)
		}
	}
}

// TestResponseInspectionLimit: a JSON answer the pipeline inspects is
// relayed up to MaxResponseBytes and refused with a 502 and a JSON-RPC
// error for the request one byte beyond, whether the upstream announced
// its length or sent it chunked. The application fixes the limit at 64 MiB
// (too slow to filter under -race), so this test builds the adapter with a
// small one over a pipeline whose policy allows everything: the limit is
// the adapter's alone; the policy plays no part in it. (The pipeline adds
// resultType to a 2026-07-28 answer: the relayed body is compared by its
// content, and its Content-Length with its length.)
func TestResponseInspectionLimit(t *testing.T) {
	const limit = 10000
	head, tail := `{"jsonrpc":"2.0","id":1,"result":{"tools":[],"nextCursor":"`, `"}}`
	answer := func(size int) string {
		return head + strings.Repeat("x", size-len(head)-len(tail)) + tail
	}
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		size, _ := strconv.Atoi(r.Header.Get("X-Size"))
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("X-Chunked") == "1" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush() // headers out: no Content-Length
		}
		_, _ = io.WriteString(w, answer(size))
	})
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(&seenAuth{}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: limit, Routes: []proxy.Route{
		{Path: "/mcp", Upstream: "default", URL: mustURL(t, us.URL+"/mcp")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	for _, chunked := range []string{"0", "1"} {
		for _, size := range []int{100, 4096, 4097, limit - 1, limit, limit + 1, 3 * limit} {
			hdr := h2026("tools/list", "")
			hdr["X-Chunked"], hdr["X-Size"] = chunked, strconv.Itoa(size)
			resp, body := post(t, gw.URL+"/mcp", hdr, listBody)
			if size <= limit {
				var got struct {
					Result struct {
						NextCursor string `json:"nextCursor"`
					} `json:"result"`
				}
				_ = json.Unmarshal(body, &got)
				pad := size - len(head) - len(tail)
				if resp.StatusCode != 200 || got.Result.NextCursor != strings.Repeat("x", pad) || resp.ContentLength != int64(len(body)) {
					t.Errorf("chunked=%s size %d: %d, %d bytes (Content-Length %d), want the whole answer: %.200s", chunked, size, resp.StatusCode, len(body), resp.ContentLength, body)
				}
				continue
			}
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("chunked=%s size %d: status %d, want 502", chunked, size, resp.StatusCode)
				continue
			}
			if id, code, _ := rpcError(t, body); string(id) != "1" || code != -32603 {
				t.Errorf("chunked=%s size %d: error %d for id %s", chunked, size, code, id)
			}
		}
	}
}

// countingConn counts the Write calls on a connection.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestRequestWrittenInOneWrite: the adapter hands the transport a body
// net/http knows to be in memory, so a forwarded request's head and body
// leave in one write on the upstream connection (another body type makes
// net/http flush the head on its own first: two writes, two packets per
// call). The connection is real (net/http's transport to a real server);
// the wrapper only counts.
func TestRequestWrittenInOneWrite(t *testing.T) {
	us := httptest.NewServer(&pathRecorder{})
	t.Cleanup(us.Close)
	var writes atomic.Int64
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: &writes}, nil
	}
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(&seenAuth{}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Transport: tr, Routes: []proxy.Route{
		{Path: "/mcp", Upstream: "default", URL: mustURL(t, us.URL+"/mcp")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	for i := range 3 {
		before := writes.Load()
		resp, body := post(t, gw.URL+"/mcp", h2026("tools/list", ""), listBody)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		if n := writes.Load() - before; n != 1 {
			t.Errorf("call %d: the request took %d writes, want 1", i, n)
		}
	}
}

// TestUpstreamSwitchingProtocols: Streamable HTTP never upgrades, and
// mcpgate forwards no Upgrade field, so an upstream answering 101
// Switching Protocols (with or without Connection: Upgrade, with bytes
// after it) gets the client a JSON-RPC error for its request, none of the
// upstream's bytes, and the upstream's connection closed (not held open by
// the relay); nothing of the exchanges is left running.
func TestUpstreamSwitchingProtocols(t *testing.T) {
	for _, sw := range []struct{ name, head string }{
		{"websocket", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"},
		{"an event stream", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: mcp\r\nConnection: Upgrade\r\nContent-Type: text/event-stream\r\n\r\n"},
		{"no Upgrade, a JSON body", "HTTP/1.1 101 Switching Protocols\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"},
	} {
		closed := make(chan error, 1)
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, brw, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			_, _ = brw.WriteString(sw.head + "UPSTREAM-1\r\n")
			_ = brw.Flush()
			time.Sleep(10 * time.Millisecond) // then more, as a switched protocol would
			_, _ = conn.Write([]byte("event: message\ndata: UPSTREAM-2\n\n"))
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.Copy(io.Discard, brw) // nil at EOF: mcpgate closed it
			closed <- err
		})
		e := startWith(t, up, nil, nil)
		tr := &http.Transport{}
		c := &http.Client{Transport: tr}
		before := runtime.NumGoroutine()
		for _, tt := range []struct {
			name, method, id string
			hdr              map[string]string
			body             []byte
		}{
			{"a call", "POST", "7", h2026("tools/call", "list_technicians"), callBody("7", "list_technicians", "{}")},
			{"a string id", "POST", `"c-8"`, h2026("tools/call", "list_technicians"), callBody(`"c-8"`, "list_technicians", "{}")},
			{"a call accepting only an event stream", "POST", "9", map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians", "Accept": "text/event-stream"}, callBody("9", "list_technicians", "{}")},
			{"a notification", "POST", "null", map[string]string{"MCP-Protocol-Version": "2025-11-25"}, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)},
			{"a GET stream", "GET", "null", map[string]string{"MCP-Protocol-Version": "2025-11-25", "Accept": "text/event-stream", "Content-Type": ""}, nil},
		} {
			req, err := http.NewRequest(tt.method, e.url, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.hdr {
				if v == "" {
					req.Header.Del(k)
				} else {
					req.Header.Set(k, v)
				}
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			what := sw.name + ", " + tt.name
			if resp.StatusCode != 502 || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s: status %d, %s: %s", what, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			if id, code, _ := rpcError(t, body); string(id) != tt.id || code != -32603 {
				t.Errorf("%s: id %s code %d", what, id, code)
			}
			if bytes.Contains(body, []byte("UPSTREAM")) {
				t.Errorf("%s: the upstream's bytes were relayed: %s", what, body)
			}
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("%s: the upstream's connection was not closed: %v", what, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the upstream was not reached", what)
			}
		}
		tr.CloseIdleConnections()
		for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("%s: %d goroutines before the calls, %d after", sw.name, before, runtime.NumGoroutine())
				break
			}
		}
	}
}

// TestUpgradeNotForwarded: httputil.ReverseProxy adds a client's Upgrade
// field (and Connection: Upgrade) back after removing the hop-by-hop
// fields; mcpgate never asks an upstream to switch protocols, so neither
// reaches it.
func TestUpgradeNotForwarded(t *testing.T) {
	seen := make(chan http.Header, 1)
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`)
	})
	e := startWith(t, up, nil, nil)
	hdr := h2026("tools/call", "list_technicians")
	hdr["Connection"], hdr["Upgrade"] = "Upgrade", "websocket"
	resp, body := post(t, e.url, hdr, callBody("7", "list_technicians", "{}"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	h := <-seen
	if h.Get("Upgrade") != "" || h.Get("Connection") != "" {
		t.Errorf("the upstream got Upgrade %q, Connection %q", h.Get("Upgrade"), h.Get("Connection"))
	}
}
