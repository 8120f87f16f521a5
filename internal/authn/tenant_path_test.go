package authn

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// tenantPathFixture: an exact route (crm, /mcp) and a route with
// {tenant} (tenants, /t/{tenant}/mcp); gateway tokens on a real store,
// OAuth through the fake verifier, the X-Tenant header. The second issuer
// may serve globex's URL only.
func tenantPathFixture(t *testing.T) (*Authenticator, *fakeVerifier, *tokens.Service) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	live := rights.NewStatic(map[string]map[string]rights.Live{
		"acme":   {"alice": {Active: true, Rights: []string{"a:read", "b:write"}}},
		"globex": {"alice": {Active: true, Rights: []string{"a:read"}}},
	})
	ts, err := tokens.New(tokens.Options{Store: st, Rights: live, Auditor: store.NewAuditor(st, nil)})
	if err != nil {
		t.Fatal(err)
	}
	fv := &fakeVerifier{tokens: map[string]*auth.Claims{
		"multi":      {Issuer: "https://idp.example", Subject: "alice", Tenants: []string{"acme", "globex"}, Scopes: []string{"a:read", "b:write"}},
		"single":     {Issuer: "https://idp.example", Subject: "alice", Tenant: "acme", Scopes: []string{"a:read", "b:write"}},
		"tenantless": {Issuer: "https://idp.example", Subject: "alice", Scopes: []string{"a:read"}},
	}}
	a, err := New(Options{
		Verifier: fv, Tokens: ts, Rights: live, TenantHeader: "X-Tenant",
		Issuers: []auth.IssuerConfig{
			{Issuer: "https://idp.example"},
			{Issuer: "https://partner.example", Audiences: []string{"https://gw.example/t/globex/mcp"}},
		},
		ResourceBaseURL: "https://GW.example:443",
		Routes: []Route{
			{Upstream: "tenants", Path: "/t/{tenant}/mcp", Scopes: []string{"a:read"}},
			{Upstream: "crm", Path: "/mcp"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, fv, ts
}

// onPath is a request on the tenants route for tenant (the path's).
func onPath(tenant string, kv ...string) *gateway.Request {
	h := mcp.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &gateway.Request{Method: "POST", Path: "/t/" + tenant + "/mcp", Upstream: "tenants", Tenant: tenant, Header: h}
}

func TestTenantInPath(t *testing.T) {
	ctx := context.Background()
	a, fv, ts := tenantPathFixture(t)
	c, err := ts.Create(ctx, tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "test"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Rights: []string{"a:read"}})
	if err != nil {
		t.Fatal(err)
	}
	gw := "Bearer " + c.Secret

	t.Run("the token's own tenant in the path", func(t *testing.T) {
		p, f := a.Authenticate(ctx, onPath("acme", "authorization", gw))
		if f != nil || p.Tenant != "acme" {
			t.Fatalf("%+v %+v", p, f)
		}
		// The same tenant in the header too is fine.
		if p, f := a.Authenticate(ctx, onPath("acme", "authorization", gw, "x-tenant", "acme")); f != nil || p.Tenant != "acme" {
			t.Fatalf("%+v %+v", p, f)
		}
	})
	t.Run("another tenant in the path: 403 tenant_mismatch", func(t *testing.T) {
		_, f := a.Authenticate(ctx, onPath("globex", "authorization", gw))
		if f == nil || f.Status != 403 || f.Code != CodeTenantMismatch || !strings.Contains(f.Message, `"globex"`) || f.WWWAuthenticate != "" {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("path and header name different tenants: 403 tenant_mismatch", func(t *testing.T) {
		// Even when the credential serves both.
		for _, tok := range []string{gw, "Bearer multi"} {
			_, f := a.Authenticate(ctx, onPath("acme", "authorization", tok, "x-tenant", "globex"))
			if f == nil || f.Status != 403 || f.Code != CodeTenantMismatch || !strings.Contains(f.Message, "header") {
				t.Fatalf("%s: %+v", tok, f)
			}
		}
	})
	t.Run("a multi-tenant credential names its tenant by the path", func(t *testing.T) {
		p, f := a.Authenticate(ctx, onPath("globex", "authorization", "Bearer multi"))
		if f != nil || p.Tenant != "globex" || !slices.Equal(p.Rights, []string{"a:read"}) {
			t.Fatalf("%+v %+v", p, f)
		}
		q, f := a.Authenticate(ctx, onPath("acme", "authorization", "Bearer multi"))
		if f != nil || q.Tenant != "acme" || q.Connection == p.Connection || q.Connection != ConnectionID("https://idp.example", "alice", "", "acme") {
			t.Fatalf("%+v %+v", q, f)
		}
		// On the exact route it still has to name one.
		if _, f := a.Authenticate(ctx, req("crm", "", "authorization", "Bearer multi")); f == nil || f.Code != CodeTenantRequired {
			t.Fatalf("%+v", f)
		}
		if _, f := a.Authenticate(ctx, onPath("initech", "authorization", "Bearer multi")); f == nil || f.Code != CodeTenantMismatch {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("a credential without a tenant serves no tenant's path", func(t *testing.T) {
		if _, f := a.Authenticate(ctx, onPath("acme", "authorization", "Bearer tenantless")); f == nil || f.Status != 403 || f.Code != CodeTenantMismatch {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("OAuth audience: the resource URI with the path's tenant", func(t *testing.T) {
		fv.audiences = nil
		if _, f := a.Authenticate(ctx, onPath("acme", "authorization", "Bearer single")); f != nil {
			t.Fatal(f)
		}
		_, _ = a.Authenticate(ctx, onPath("globex", "authorization", "Bearer single"))
		if !slices.Equal(fv.audiences, []string{"https://gw.example/t/acme/mcp", "https://gw.example/t/globex/mcp"}) {
			t.Errorf("verified for %q", fv.audiences)
		}
	})
	t.Run("challenges point at the tenant's metadata", func(t *testing.T) {
		const md = `Bearer resource_metadata="https://gw.example/.well-known/oauth-protected-resource/t/acme/mcp"`
		_, f := a.Authenticate(ctx, onPath("acme"))
		if f == nil || f.Status != 401 || f.WWWAuthenticate != md {
			t.Fatalf("%+v", f)
		}
		_, f = a.Authenticate(ctx, onPath("acme", "authorization", "Bearer nope"))
		if f == nil || !strings.HasPrefix(f.WWWAuthenticate, md+`, error="invalid_token"`) || !strings.Contains(f.Fix, "https://gw.example/t/acme/mcp") {
			t.Fatalf("%+v", f)
		}
		f = a.InsufficientScope(onPath("acme"), []string{"b:write"})
		if f == nil || !strings.HasPrefix(f.WWWAuthenticate, md+`, error="insufficient_scope"`) {
			t.Fatalf("%+v", f)
		}
	})
	t.Run("a route with {tenant} and no tenant fails closed", func(t *testing.T) {
		for _, tenant := range []string{"", "a/b", "%61cme", ".."} {
			r := onPath(tenant, "authorization", gw)
			if _, f := a.Authenticate(ctx, r); f == nil || f.Status != 401 {
				t.Fatalf("%q: %+v", tenant, f)
			}
			if f := a.InsufficientScope(r, []string{"a:read"}); f != nil {
				t.Fatalf("%q: %+v", tenant, f)
			}
		}
	})
	if got := a.ResourceURI("tenants"); got != "https://gw.example/t/{tenant}/mcp" {
		t.Errorf("ResourceURI = %q", got)
	}
}

func TestTenantPathMetadata(t *testing.T) {
	a, _, _ := tenantPathFixture(t)
	type doc struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
		ScopesSupported      []string `json:"scopes_supported"`
		BearerMethods        []string `json:"bearer_methods_supported"`
	}
	for path, want := range map[string]doc{
		"/.well-known/oauth-protected-resource/t/acme/mcp":   {"https://gw.example/t/acme/mcp", []string{"https://idp.example"}, []string{"a:read"}, []string{"header"}},
		"/.well-known/oauth-protected-resource/t/globex/mcp": {"https://gw.example/t/globex/mcp", []string{"https://idp.example", "https://partner.example"}, []string{"a:read"}, []string{"header"}},
		"/.well-known/oauth-protected-resource/mcp":          {"https://gw.example/mcp", []string{"https://idp.example"}, nil, []string{"header"}},
		// The bare path: the first route without {tenant}.
		"/.well-known/oauth-protected-resource": {"https://gw.example/mcp", []string{"https://idp.example"}, nil, []string{"header"}},
	} {
		b, ok := a.ResourceMetadata(path)
		if !ok {
			t.Errorf("%s: none", path)
			continue
		}
		var got doc
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got.Resource != want.Resource || !slices.Equal(got.AuthorizationServers, want.AuthorizationServers) ||
			!slices.Equal(got.ScopesSupported, want.ScopesSupported) || !slices.Equal(got.BearerMethods, want.BearerMethods) {
			t.Errorf("%s: %s", path, b)
		}
	}
	for _, path := range []string{
		"/.well-known/oauth-protected-resource/t/%61cme/mcp",
		"/.well-known/oauth-protected-resource/t/{tenant}/mcp",
		"/.well-known/oauth-protected-resource/t//mcp",
		"/.well-known/oauth-protected-resource/t/acme/mcp/",
		"/.well-known/oauth-protected-resource/t/../mcp",
		"/.well-known/oauth-protected-resourcet/acme/mcp",
		"/t/acme/mcp",
		"/.well-known/oauth-protected-resource/" + strings.Repeat("a", 200),
	} {
		if b, ok := a.ResourceMetadata(path); ok {
			t.Errorf("%s: %s", path, b)
		}
	}
	// Only tenant routes: no bare document.
	b, err := New(Options{Tokens: &tokens.Service{}, ResourceBaseURL: "https://gw.example", Routes: []Route{{Upstream: "x", Path: "/t/{tenant}/mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.ResourceMetadata("/.well-known/oauth-protected-resource"); ok {
		t.Error("bare document without an exact route")
	}
}

func TestTenantPathRouteChecks(t *testing.T) {
	fv := &fakeVerifier{}
	for name, o := range map[string]Options{
		"no issuer serves any tenant": {Verifier: fv, ResourceBaseURL: "https://gw.example",
			Issuers: []auth.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"https://gw.example/mcp"}}},
			Routes:  []Route{{Upstream: "x", Path: "/t/{tenant}/mcp"}}},
		"bad route": {Verifier: fv, ResourceBaseURL: "https://gw.example", Issuers: []auth.IssuerConfig{{Issuer: "https://idp.example"}},
			Routes: []Route{{Upstream: "x", Path: "/t/x{tenant}/mcp"}}},
		"overlapping routes": {Verifier: fv, ResourceBaseURL: "https://gw.example", Issuers: []auth.IssuerConfig{{Issuer: "https://idp.example"}},
			Routes: []Route{{Upstream: "x", Path: "/t/{tenant}/mcp"}, {Upstream: "y", Path: "/{tenant}/t/mcp"}}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// An issuer restricted to one tenant's URI serves that route.
	if _, err := New(Options{Verifier: fv, ResourceBaseURL: "https://gw.example",
		Issuers: []auth.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"https://gw.example/t/acme/mcp"}}},
		Routes:  []Route{{Upstream: "x", Path: "/t/{tenant}/mcp"}}}); err != nil {
		t.Error(err)
	}
}
