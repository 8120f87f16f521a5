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
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/poll"
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

// TestMemberLister: a member's prompts are listed once and reused; when
// the member goes down its last listing is served while it is not too
// old, then its items are left out (an error) until it lists again.
func TestMemberLister(t *testing.T) {
	s := sdk.NewServer(&sdk.Implementation{Name: "m", Version: "1"}, nil)
	s.AddPrompt(&sdk.Prompt{Name: "greet"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) { return nil, nil })
	var requests atomic.Int32
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { requests.Add(1); h.ServeHTTP(w, r) }))
	defer up.Close()
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "m", URL: up.URL + "/mcp"}},
		Servers:   []config.Server{{Name: "s", Route: "/mcp", Members: []config.Member{{Upstream: "m", Prefix: "m"}}}},
	}
	l := newMemberLister(cfg, []catalog.Upstream{{Name: "m", URL: up.URL + "/mcp"}}, slog.New(slog.DiscardHandler))
	l.ttl, l.retry, l.stale, l.wait = time.Hour, 0, time.Hour, 10*time.Second
	ctx := context.Background()
	items, err := l.Items(ctx, "m", "prompts")
	if err != nil || len(items) != 1 {
		t.Fatalf("Items = %s, %v", items, err)
	}
	n := requests.Load()
	if items, err := l.Items(ctx, "m", "prompts"); err != nil || len(items) != 1 || requests.Load() != n {
		t.Errorf("a fresh listing was not reused: %s %v (%d requests, then %d)", items, err, n, requests.Load())
	}
	up.Close()
	l.ttl = 0 // stale: listed again in the background, the last one served
	if items, err := l.Items(ctx, "m", "prompts"); err != nil || len(items) != 1 {
		t.Errorf("the last good listing while the member is down: %s, %v", items, err)
	}
	l.stale = 0 // too old: left out
	poll.Until(t, 10*time.Second, "the down member's items left out", func() bool {
		_, err := l.Items(ctx, "m", "prompts")
		return err != nil
	})
}

// fakeMemberCatalog lists the members in listed; failing ones failed
// their latest listing.
type fakeMemberCatalog struct {
	gateway.ToolCatalog
	listed, failing map[string]bool
}

func (c fakeMemberCatalog) Tools(upstream string) ([]gateway.CatalogTool, bool) {
	return nil, c.listed[upstream]
}

func (c fakeMemberCatalog) Failing(upstream string) bool { return c.failing[upstream] }

// A member is missing from /readyz and the gauge when it was never listed
// or when its latest listing failed (its last tools stay listed).
func TestMembersMissing(t *testing.T) {
	cfg := &config.Config{Servers: []config.Server{{Name: "s", Route: "/mcp", Members: []config.Member{
		{Upstream: "up", Prefix: "up"}, {Upstream: "never", Prefix: "never"}, {Upstream: "died", Prefix: "died"}}}}}
	cat := fakeMemberCatalog{listed: map[string]bool{"up": true, "died": true}, failing: map[string]bool{"died": true}}
	got := missingText(membersMissing(cfg, cat))
	if want := "federation members not available (down or not listed yet): server s: never, died"; got != want {
		t.Fatalf("readyz text %q, want %q", got, want)
	}
}
