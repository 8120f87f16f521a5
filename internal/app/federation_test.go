package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// sessionServer is a minimal stateful MCP endpoint: initialize issues a
// session id, notifications/initialized must carry it, DELETE ends it.
type sessionServer struct {
	inits, deletes atomic.Int32
	mu             sync.Mutex
	live           map[string]bool
	assertions     []string
}

func (s *sessionServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == "DELETE" {
		s.deletes.Add(1)
		delete(s.live, r.Header.Get("Mcp-Session-Id"))
		return
	}
	body, _ := io.ReadAll(r.Body)
	var m struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	switch m.Method {
	case "initialize":
		n := s.inits.Add(1)
		id := fmt.Sprintf("s%d", n)
		s.live[id] = true
		s.assertions = append(s.assertions, r.Header.Get("Mcpgate-Assertion"))
		w.Header().Set("Mcp-Session-Id", id)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}`)
	case "notifications/initialized":
		if !s.live[r.Header.Get("Mcp-Session-Id")] {
			w.WriteHeader(404)
			return
		}
		w.WriteHeader(202)
	default:
		w.WriteHeader(400)
	}
}

// TestMemberSessions: one session per client session and member, opened
// once under parallel first uses (with the forwarded request's header
// fields), opened again after a Reset, ended with DELETE on Close.
func TestMemberSessions(t *testing.T) {
	srv := &sessionServer{live: map[string]bool{}}
	up := httptest.NewServer(srv)
	defer up.Close()
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "m", URL: up.URL + "/mcp"}},
		Servers:   []config.Server{{Name: "s", Route: "/mcp", Members: []config.Member{{Upstream: "m", Prefix: "m"}}}},
	}
	ms := newMemberSessions(cfg, slog.New(slog.DiscardHandler))
	ctx := context.Background()
	hdr := mcp.Header{"mcpgate-assertion": {"caller-assertion"}}
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, agreed, err := ms.Session(ctx, "client-1", "m", "2025-11-25", hdr)
			if err != nil || agreed != "2025-06-18" {
				t.Errorf("Session: %q %q %v", id, agreed, err)
			}
			ids[i] = id
		}()
	}
	wg.Wait()
	if n := srv.inits.Load(); n != 1 {
		t.Fatalf("%d initialize requests for one client session, want 1", n)
	}
	for _, id := range ids {
		if id != "s1" {
			t.Errorf("session ids %q", ids)
			break
		}
	}
	if srv.assertions[0] != "caller-assertion" {
		t.Errorf("initialize carried assertion %q", srv.assertions[0])
	}
	if id, _, _ := ms.Session(ctx, "client-2", "m", "2025-11-25", hdr); id != "s2" {
		t.Errorf("another client session got %q, want its own s2", id)
	}
	ms.Reset("client-1", "m", "s1")
	if id, _, _ := ms.Session(ctx, "client-1", "m", "2025-11-25", hdr); id != "s3" {
		t.Errorf("after Reset: %q, want a new session s3", id)
	}
	ms.Close(ctx, "client-1")
	if n := srv.deletes.Load(); n != 1 {
		t.Errorf("%d DELETE requests after Close, want 1", n)
	}
	if _, _, err := ms.Session(ctx, "client-1", "nope", "2025-11-25", hdr); err == nil {
		t.Error("a session with an upstream that is no member")
	}
}
