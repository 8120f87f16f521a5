package proxy_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/policy"
)

// seenAuth accepts every request and records the upstream, tenant and path
// the adapter gave the pipeline.
type seenAuth struct {
	mu   sync.Mutex
	seen []string
}

func (a *seenAuth) Authenticate(_ context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Upstream+"|"+r.Tenant+"|"+r.Path)
	a.mu.Unlock()
	return &policy.Principal{Authenticated: true, Subject: "alice", Tenant: r.Tenant}, nil
}

func (a *seenAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

func (a *seenAuth) last() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[len(a.seen)-1]
}

// pathRecorder answers every JSON-RPC request with an empty result and
// records the path it was called on.
type pathRecorder struct {
	mu    sync.Mutex
	paths []string
}

func (u *pathRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.paths = append(u.paths, r.URL.EscapedPath())
	u.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}`))
}

func (u *pathRecorder) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	p := u.paths
	u.paths = nil
	return p
}

var listBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestTenantRoutes: the proxy matches routes with {tenant} on the path as
// sent (exact routes first), hands the tenant to the pipeline, forwards to
// the upstream URL as configured or with {tenant} filled in, and answers
// 404 for paths on no route, percent-encoded ones included.
func TestTenantRoutes(t *testing.T) {
	up := &pathRecorder{}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	auth := &seenAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(auth), gatewaytest.With(gateway.Options{
		ResourceMetadata: func(path string) ([]byte, bool) {
			return []byte(`{}`), path == "/.well-known/oauth-protected-resource/t/acme/mcp"
		}}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Routes: []proxy.Route{
		{Path: "/mcp", Upstream: "default", URL: mustURL(t, us.URL+"/mcp")},
		{Path: "/t/{tenant}/mcp", Upstream: "crm", URL: mustURL(t, us.URL+"/crm/mcp")},
		{Path: "/t/admin/mcp", Upstream: "admin", URL: mustURL(t, us.URL+"/admin/mcp")},
		{Path: "/tickets/{tenant}", Upstream: "tickets", URL: mustURL(t, us.URL+"/tenants/{tenant}/mcp?x=1")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)

	for path, want := range map[string][2]string{ // path → what the pipeline saw, where the upstream was called
		"/mcp":            {"default||/mcp", "/mcp"},
		"/t/acme/mcp":     {"crm|acme|/t/acme/mcp", "/crm/mcp"},
		"/t/globex/mcp":   {"crm|globex|/t/globex/mcp", "/crm/mcp"},
		"/t/admin/mcp":    {"admin||/t/admin/mcp", "/admin/mcp"},
		"/tickets/Acme.1": {"tickets|Acme.1|/tickets/Acme.1", "/tenants/Acme.1/mcp"},
	} {
		resp, body := post(t, gw.URL+path, h2026("tools/list", ""), listBody)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
			continue
		}
		if got := auth.last(); got != want[0] {
			t.Errorf("%s: pipeline saw %q, want %q", path, got, want[0])
		}
		if got := up.take(); len(got) != 1 || got[0] != want[1] {
			t.Errorf("%s: upstream called at %q, want %q", path, got, want[1])
		}
	}

	before := auth.last()
	for _, path := range []string{"/t/%61cme/mcp", "/m%63p", "/t/ac%2Fme/mcp", "/t//mcp", "/t/acme/mcp/", "/t/a/b/mcp", "/t/../mcp", "/tickets/", "/t/{tenant}/mcp"} {
		resp, body := post(t, gw.URL+path, h2026("tools/list", ""), listBody)
		if resp.StatusCode != 404 || string(body) != "404 page not found\n" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%s: %d %q", path, resp.StatusCode, body)
		}
	}
	if got := up.take(); len(got) != 0 {
		t.Errorf("upstream called for unknown paths: %q", got)
	}
	if auth.last() != before {
		t.Errorf("pipeline ran for an unknown path: %q", auth.last())
	}

	// The metadata of a tenant's route, from the pipeline's lookup.
	resp, err := http.Get(gw.URL + "/.well-known/oauth-protected-resource/t/acme/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("metadata: %d", resp.StatusCode)
	}
	resp, err = http.Get(gw.URL + "/.well-known/oauth-protected-resource/t/%61cme/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("metadata at an encoded path: %d", resp.StatusCode)
	}
}

func TestTenantRouteConfigErrors(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}))
	for name, rs := range map[string][]proxy.Route{
		"{tenant} in the URL of an exact route": {{Path: "/mcp", Upstream: "a", URL: mustURL(t, "http://up/{tenant}/mcp")}},
		"{tenant} in the query":                 {{Path: "/t/{tenant}", Upstream: "a", URL: mustURL(t, "http://up/mcp?t={tenant}")}},
		"overlapping patterns": {{Path: "/t/{tenant}/mcp", Upstream: "a", URL: mustURL(t, "http://up/mcp")},
			{Path: "/{tenant}/x/mcp", Upstream: "b", URL: mustURL(t, "http://up/mcp")}},
		"bad pattern": {{Path: "/t/x{tenant}", Upstream: "a", URL: mustURL(t, "http://up/mcp")}},
	} {
		if _, err := proxy.New(proxy.Options{Pipeline: p, Routes: rs}); err == nil || !strings.Contains(err.Error(), "proxy:") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
