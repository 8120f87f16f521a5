package proxy_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
)

// TestFederatedRoute: a virtual server's route forwards each call to the
// member the pipeline names, at that member's URL ({tenant} filled in
// from the server's route) with the member's timeout; the members have no
// path of their own (404 there is the table's, not theirs).
func TestFederatedRoute(t *testing.T) {
	up := &pathRecorder{}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)
	auth := &seenAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(auth), gatewaytest.With(gateway.Options{
		Servers: []gateway.Server{{Name: "work", Members: []gateway.Member{{Upstream: "crm", Prefix: "crm"}, {Upstream: "files", Prefix: "files"}}}},
	}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Routes: []proxy.Route{
		{Path: "/t/{tenant}/mcp", Upstream: "work"},
		{Upstream: "crm", URL: mustURL(t, us.URL+"/tenants/{tenant}/crm"), Timeout: time.Minute},
		{Upstream: "files", URL: mustURL(t, us.URL+"/files/mcp")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	for name, want := range map[string]string{"crm_find": "/tenants/acme/crm", "files_read": "/files/mcp"} {
		resp, body := post(t, gw.URL+"/t/acme/mcp", h2026("tools/call", name), callBody("1", name, `{}`))
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
			continue
		}
		if got := up.take(); len(got) != 1 || got[0] != want {
			t.Errorf("%s: member called at %q, want %q", name, got, want)
		}
		if got := auth.last(); got != "work|acme|/t/acme/mcp" {
			t.Errorf("%s: authenticated for %q, want the server's route", name, got)
		}
	}
	for _, path := range []string{"/tenants/acme/crm", "/files/mcp"} {
		if resp, _ := post(t, gw.URL+path, h2026("tools/call", "find"), callBody("1", "find", `{}`)); resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404 (a member has no route of its own)", path, resp.StatusCode)
		}
	}
}
