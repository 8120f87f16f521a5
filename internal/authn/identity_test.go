package authn

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// downSource is a rights source that cannot answer (a product endpoint
// that is down); rights.HTTPSource against a closed port behaves alike.
type downSource struct{}

func (downSource) Lookup(context.Context, string, string) (rights.Live, error) {
	return rights.Live{}, rights.ErrUnavailable
}

type identityFixture struct {
	a      *Authenticator
	live   *rights.Static
	tokens *tokens.Service
	st     store.Store
	fv     *fakeVerifier
}

// newIdentityFixture builds an Authenticator with the real token service on
// a real bbolt store, a static rights source and the tenant header.
func newIdentityFixture(t testing.TB, src rights.Source) *identityFixture {
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
	if src == nil {
		src = live
	}
	fv := &fakeVerifier{tokens: map[string]*auth.Claims{
		"multi":  {Issuer: "https://idp.example", Subject: "alice", Tenants: []string{"acme", "globex"}, Scopes: []string{"a:read", "b:write", "c:admin"}},
		"single": {Issuer: "https://idp.example", Subject: "alice", Tenant: "acme", Tenants: []string{"acme"}, Scopes: []string{"a:read", "b:write", "c:admin"}},
	}}
	a, err := New(Options{
		Verifier: fv, Tokens: ts, Rights: src, TenantHeader: "X-Tenant",
		Issuers:         []auth.IssuerConfig{{Issuer: "https://idp.example"}},
		ResourceBaseURL: "https://gw.example",
		Routes:          []Route{{Upstream: "crm", Path: "/mcp"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &identityFixture{a: a, live: live, tokens: ts, st: st, fv: fv}
}

func (f *identityFixture) mint(t testing.TB, tenant, subject string, r ...string) tokens.Created {
	t.Helper()
	c, err := f.tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "test"},
		tokens.CreateRequest{Tenant: tenant, Subject: subject, Rights: r})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGatewayToken(t *testing.T) {
	ctx := context.Background()
	f := newIdentityFixture(t, nil)
	c := f.mint(t, "acme", "alice", "a:read", "b:write")
	p, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret))
	if fail != nil {
		t.Fatalf("refused: %+v", fail)
	}
	if p.CredentialKind != policy.CredentialGatewayToken || p.Connection != c.Token.ID || p.CredentialID != c.Token.ID ||
		p.Tenant != "acme" || p.Subject != "alice" || !slices.Equal(p.Rights, []string{"a:read", "b:write"}) {
		t.Fatalf("principal %+v", p)
	}
	if len(f.fv.audiences) != 0 {
		t.Error("a gateway token went to the OAuth verifier")
	}

	t.Run("a right removed between two calls is gone on the next call", func(t *testing.T) {
		f.live.Set("acme", "alice", rights.Live{Active: true, Rights: []string{"a:read"}})
		defer f.live.Set("acme", "alice", rights.Live{Active: true, Rights: []string{"a:read", "b:write"}})
		p, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret))
		if fail != nil {
			t.Fatal(fail)
		}
		if !slices.Equal(p.Rights, []string{"a:read"}) || !slices.Equal(p.TokenRights, []string{"a:read", "b:write"}) || !slices.Equal(p.LiveRights, []string{"a:read"}) {
			t.Fatalf("rights %v token %v live %v", p.Rights, p.TokenRights, p.LiveRights)
		}
	})
	t.Run("a deactivated creator fails the token with 401", func(t *testing.T) {
		f.live.Set("acme", "alice", rights.Live{Active: false, Rights: []string{"a:read"}})
		defer f.live.Set("acme", "alice", rights.Live{Active: true, Rights: []string{"a:read", "b:write"}})
		_, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret))
		if fail == nil || fail.Status != 401 || fail.Code != CodeInactive || !strings.Contains(fail.WWWAuthenticate, `error="invalid_token"`) {
			t.Fatalf("%+v", fail)
		}
	})
	t.Run("a removed creator fails the token with 401", func(t *testing.T) {
		f.live.Delete("acme", "alice")
		defer f.live.Set("acme", "alice", rights.Live{Active: true, Rights: []string{"a:read", "b:write"}})
		if _, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret)); fail == nil || fail.Status != 401 {
			t.Fatalf("%+v", fail)
		}
	})
	t.Run("the tenant header must name the token's tenant", func(t *testing.T) {
		if _, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret, "x-tenant", "acme")); fail != nil {
			t.Fatalf("own tenant refused: %+v", fail)
		}
		_, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret, "x-tenant", "globex"))
		if fail == nil || fail.Status != 403 || fail.Code != CodeTenantMismatch {
			t.Fatalf("%+v", fail)
		}
	})
	t.Run("the tenant header repeated or empty is 400", func(t *testing.T) {
		for _, kv := range [][]string{{"x-tenant", "acme", "x-tenant", "globex"}, {"x-tenant", "acme", "x-tenant", "acme"}, {"x-tenant", ""}, {"x-tenant", "  "}} {
			_, fail := f.a.Authenticate(ctx, req("crm", "", append([]string{"authorization", "Bearer " + c.Secret}, kv...)...))
			if fail == nil || fail.Status != 400 || fail.Code != CodeTenantHeaderInvalid {
				t.Errorf("%v: %+v", kv, fail)
			}
		}
	})
	t.Run("a revoked token fails on the next call", func(t *testing.T) {
		c2 := f.mint(t, "acme", "alice", "a:read")
		if _, err := f.tokens.Revoke(ctx, tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "test"}, c2.Token.ID); err != nil {
			t.Fatal(err)
		}
		_, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c2.Secret))
		if fail == nil || fail.Status != 401 || fail.Code != gateway.AuthInvalidToken || !strings.Contains(fail.Message, "revoked") {
			t.Fatalf("%+v", fail)
		}
	})
	t.Run("unknown and garbled gateway tokens are 401", func(t *testing.T) {
		for _, raw := range []string{tokens.Prefix + strings.Repeat("A", 43), tokens.Prefix + "short", c.Secret + "x"} {
			if _, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+raw)); fail == nil || fail.Status != 401 {
				t.Fatalf("%q: %+v", raw, fail)
			}
		}
	})
	t.Run("the store down is 503", func(t *testing.T) {
		g := newIdentityFixture(t, nil)
		c := g.mint(t, "acme", "alice")
		g.st.Close()
		_, fail := g.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer "+c.Secret))
		if fail == nil || fail.Status != 503 {
			t.Fatalf("%+v", fail)
		}
	})
}

func TestRightsSourceDownFailsClosed(t *testing.T) {
	f := newIdentityFixture(t, downSource{})
	_, fail := f.a.Authenticate(context.Background(), req("crm", "", "authorization", "Bearer single"))
	if fail == nil || fail.Status != 503 || fail.Code != CodeRightsUnavailable || fail.Message == "" {
		t.Fatalf("%+v", fail)
	}
}

func TestOAuthTenantBindingAndLiveRights(t *testing.T) {
	ctx := context.Background()
	f := newIdentityFixture(t, nil)
	t.Run("single-tenant token: effective = scopes ∩ live", func(t *testing.T) {
		p, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer single"))
		if fail != nil {
			t.Fatal(fail)
		}
		if p.Tenant != "acme" || !slices.Equal(p.Rights, []string{"a:read", "b:write"}) || !slices.Equal(p.TokenRights, []string{"a:read", "b:write", "c:admin"}) {
			t.Fatalf("%+v", p)
		}
		if p.Connection != ConnectionID("https://idp.example", "alice", "", "acme") {
			t.Errorf("connection %s", p.Connection)
		}
	})
	t.Run("multi-tenant token without a tenant named: 403 tenant_required", func(t *testing.T) {
		_, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer multi"))
		if fail == nil || fail.Status != 403 || fail.Code != CodeTenantRequired {
			t.Fatalf("%+v", fail)
		}
	})
	t.Run("multi-tenant token names one of its tenants", func(t *testing.T) {
		p, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer multi", "x-tenant", "acme"))
		if fail != nil || p.Tenant != "acme" {
			t.Fatalf("%+v %+v", p, fail)
		}
		q, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer multi", "x-tenant", "globex"))
		if fail != nil || q.Tenant != "globex" || q.Connection == p.Connection || !slices.Equal(q.Rights, []string{"a:read"}) {
			t.Fatalf("%+v %+v", q, fail)
		}
	})
	t.Run("a tenant the token does not serve: 403 tenant_mismatch", func(t *testing.T) {
		_, fail := f.a.Authenticate(ctx, req("crm", "", "authorization", "Bearer single", "x-tenant", "globex"))
		if fail == nil || fail.Status != 403 || fail.Code != CodeTenantMismatch {
			t.Fatalf("%+v", fail)
		}
	})
}

func TestGatewayTokensOnly(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := tokens.New(tokens.Options{Store: st, Rights: rights.NewStatic(nil), Auditor: store.NewAuditor(st, nil), Now: func() time.Time { return time.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Tokens: ts, ResourceBaseURL: "https://gw.example", Routes: []Route{{Upstream: "crm", Path: "/mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	_, fail := a.Authenticate(context.Background(), req("crm", "", "authorization", "Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig"))
	if fail == nil || fail.Status != 401 || fail.Code != gateway.AuthInvalidToken || !strings.Contains(fail.Fix, "MCP token") {
		t.Fatalf("%+v", fail)
	}
	_, fail = a.Authenticate(context.Background(), req("crm", ""))
	if fail == nil || fail.Status != 401 || strings.Contains(fail.Message+fail.Fix, "OAuth") || !strings.Contains(fail.Message, "MCP token") {
		t.Fatalf("a server taking only MCP tokens must not ask for OAuth: %+v", fail)
	}
	// Nothing sends a client into an OAuth flow: the challenge names no
	// resource metadata and none is served (no authorization server).
	if fail.WWWAuthenticate != "Bearer" || strings.Contains(fail.WWWAuthenticate, "resource_metadata") {
		t.Errorf("challenge = %q", fail.WWWAuthenticate)
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		if b, ok := a.ResourceMetadata(path); ok {
			t.Errorf("%s served without an OAuth issuer: %s", path, b)
		}
	}
	if _, err := New(Options{ResourceBaseURL: "https://gw.example", Routes: []Route{{Upstream: "crm", Path: "/mcp"}}}); err == nil {
		t.Error("no credential kind accepted")
	}
}

// BenchmarkAuthenticateGatewayToken: a gateway token looked up by hash in
// the bbolt store, the live rights from a static source, the principal
// built — mcpgate's authentication cost per call for gateway tokens.
func BenchmarkAuthenticateGatewayToken(b *testing.B) {
	f := newIdentityFixture(b, nil)
	c := f.mint(b, "acme", "alice", "a:read", "b:write")
	r := req("crm", "", "authorization", "Bearer "+c.Secret)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, fail := f.a.Authenticate(ctx, r); fail != nil {
			b.Fatal(fail)
		}
	}
}
