package admin_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

const (
	adminAudience = "https://gw.example.com/admin"
	mcpAudience   = "https://gw.example.com/mcp"
	secret        = "client-secret"

	staticPlatform = "static-platform-admin-token-0123456789"
	staticGlobex   = "static-globex-admin-token-0123456789"
)

// memRights is an in-memory rights source for tests: live rights by
// tenant and subject, and a switch that makes every lookup fail.
type memRights struct {
	mu   sync.Mutex
	live map[[2]string]rights.Live
	down bool
}

func (m *memRights) Lookup(_ context.Context, tenant, subject string) (rights.Live, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return rights.Live{}, errors.New("rights source down")
	}
	l := m.live[[2]string{tenant, subject}]
	l.Rights = slices.Clone(l.Rights)
	return l, nil
}

func (m *memRights) setDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// providerConfig registers one client_credentials client per kind of
// caller; each client's token carries the subject, tenant and roles of a
// person or an admin.
func providerConfig() *provider.Config {
	cfg := provider.DefaultConfig()
	cl := func(id, subject, tenant string, roles []string, claims map[string]any) provider.Client {
		return provider.Client{ID: id, Secret: secret, Subject: subject, Tenant: tenant, Roles: roles, Claims: claims}
	}
	cfg.Clients = append(cfg.Clients,
		cl("platform", "pat", "", []string{"viewer", admin.DefaultPlatformAdminRole}, nil),
		cl("acme-admin", "ada", "acme", []string{admin.DefaultTenantAdminRole}, nil),
		cl("alice", "alice", "acme", nil, nil),
		cl("carol", "carol", "acme", []string{"viewer"}, nil),
		cl("bob", "bob", "globex", nil, nil),
		cl("no-tenant", "nobody", "", []string{"viewer"}, nil),
		cl("two-tenants", "tt", "", nil, map[string]any{"tenant": []string{"acme", "globex"}}),
		cl("admin-two-tenants", "att", "", []string{admin.DefaultTenantAdminRole}, map[string]any{"tenant": []string{"acme", "globex"}}),
	)
	return cfg
}

type env struct {
	p      *oidctest.Provider
	srv    *httptest.Server
	svc    *tokens.Service
	st     *boltstore.Store
	rights *memRights
}

func hashOf(s string) [32]byte { return sha256.Sum256([]byte(s)) }

func newEnv(t *testing.T) *env {
	t.Helper()
	p := oidctest.Start(t, oidctest.WithConfig(providerConfig()))
	v, err := auth.NewVerifier(context.Background(), []auth.IssuerConfig{{Issuer: p.Issuer, TenantClaim: "tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{p: p}
	e.st, e.svc, e.rights = newService(t)
	api, err := admin.New(admin.Options{
		Tokens:   e.svc,
		Audit:    e.st,
		Auditor:  store.NewAuditor(e.st, nil),
		Verifier: v,
		Audience: adminAudience,
		StaticTokens: []admin.StaticToken{
			{Name: "bootstrap", SHA256: hashOf(staticPlatform), Role: tokens.RolePlatformAdmin},
			{Name: "globex-ops", SHA256: hashOf(staticGlobex), Role: tokens.RoleTenantAdmin, Tenant: "globex"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(api.Handler())
	t.Cleanup(e.srv.Close)
	return e
}

func newService(t *testing.T) (*boltstore.Store, *tokens.Service, *memRights) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "mcpgate.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	src := &memRights{live: map[[2]string]rights.Live{
		{"acme", "alice"}:  {Active: true, Rights: []string{"tickets:read", "tickets:write"}},
		{"acme", "carol"}:  {Active: true, Rights: []string{"tickets:read"}},
		{"acme", "dave"}:   {Active: false, Rights: []string{"tickets:read"}},
		{"globex", "bob"}:  {Active: true, Rights: []string{"crm:read"}},
		{"globex", "gina"}: {Active: true, Rights: []string{"crm:read", "crm:write"}},
	}}
	svc, err := tokens.New(tokens.Options{Store: st, Rights: src, Auditor: store.NewAuditor(st, nil)})
	if err != nil {
		t.Fatal(err)
	}
	return st, svc, src
}

// oidc mints an access token of a client for the admin audience.
func (e *env) oidc(t *testing.T, client string) string {
	t.Helper()
	return e.p.MustClientCredentials(t, client, secret, adminAudience)
}

type answer struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (a answer) errCode() string {
	m, _ := a.body["error"].(map[string]any)
	s, _ := m["code"].(string)
	return s
}

func (a answer) errField(name string) string {
	m, _ := a.body["error"].(map[string]any)
	s, _ := m[name].(string)
	return s
}

type req struct {
	method, path, token string
	body                string
	contentType         string // default application/json when body is set
	header              http.Header
}

func (e *env) do(t *testing.T, r req) answer {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, e.srv.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range r.header {
		hr.Header[k] = vs
	}
	if r.token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.token)
	}
	if r.body != "" {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		if ct != "-" {
			hr.Header.Set("Content-Type", ct)
		}
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &a.body); err != nil {
		t.Fatalf("%s %s: body is not a JSON object: %q", r.method, r.path, raw)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("%s %s: Cache-Control %q, want no-store", r.method, r.path, cc)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", r.method, r.path, ct)
	}
	if a.status >= 400 && (a.errCode() == "" || a.errField("message") == "" || a.errField("fix") == "") {
		t.Errorf("%s %s: error answer without code, message or fix: %s", r.method, r.path, raw)
	}
	return a
}

func want(t *testing.T, a answer, status int, code string) {
	t.Helper()
	if a.status != status || (code != "" && a.errCode() != code) {
		t.Fatalf("status %d code %q, want %d %q: %s", a.status, a.errCode(), status, code, a.raw)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t)
	mcp, err := e.svc.Create(context.Background(), tokens.Actor{Role: tokens.RolePerson, Tenant: "acme", Subject: "alice"}, tokens.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const challenge = `Bearer realm="mcpgate-admin"`
	const invalid = `Bearer realm="mcpgate-admin", error="invalid_token"`

	cases := []struct {
		name      string
		r         req
		status    int
		code      string
		challenge string
	}{
		{"no token", req{method: "GET", path: "/v1/whoami"}, 401, "missing_token", challenge},
		{"no token, unknown path", req{method: "GET", path: "/v1/nothing-here"}, 401, "missing_token", challenge},
		{"no token, tokens", req{method: "GET", path: "/v1/tokens"}, 401, "missing_token", challenge},
		{"basic auth", req{method: "GET", path: "/v1/whoami", header: http.Header{"Authorization": {"Basic YWxpY2U6eA=="}}}, 401, "missing_token", challenge},
		{"two tokens", req{method: "GET", path: "/v1/whoami", header: http.Header{"Authorization": {"Bearer a b"}}}, 401, "invalid_token", invalid},
		{"two headers", req{method: "GET", path: "/v1/whoami", header: http.Header{"Authorization": {"Bearer " + staticPlatform, "Bearer " + staticPlatform}}}, 401, "invalid_token", invalid},
		{"token in the query string", req{method: "GET", path: "/v1/whoami?access_token=" + staticPlatform}, 401, "missing_token", challenge},
		{"MCP token", req{method: "GET", path: "/v1/whoami", token: mcp.Secret}, 401, "mcp_token_not_accepted", invalid},
		{"unknown opaque token", req{method: "GET", path: "/v1/whoami", token: "not-a-known-token"}, 401, "invalid_token", invalid},
		{"OIDC token for the MCP endpoint", req{method: "GET", path: "/v1/whoami",
			token: e.p.MustClientCredentials(t, "platform", secret, mcpAudience)}, 401, "invalid_token", invalid},
		{"expired OIDC token", req{method: "GET", path: "/v1/whoami",
			token: e.p.MustClientCredentials(t, provider.ClientExpired, provider.TestSecret, adminAudience)}, 401, "invalid_token", invalid},
		{"OIDC token without tenant or admin role", req{method: "GET", path: "/v1/whoami", token: e.oidc(t, "no-tenant")}, 403, "no_role", ""},
		{"OIDC person of two tenants", req{method: "GET", path: "/v1/whoami", token: e.oidc(t, "two-tenants")}, 403, "no_role", ""},
		{"OIDC tenant admin of two tenants", req{method: "GET", path: "/v1/whoami", token: e.oidc(t, "admin-two-tenants")}, 403, "no_role", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(t, tc.r)
			want(t, a, tc.status, tc.code)
			if got := a.header.Get("WWW-Authenticate"); got != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
		})
	}
	t.Run("MCP token message", func(t *testing.T) {
		a := e.do(t, req{method: "GET", path: "/v1/tokens", token: mcp.Secret})
		if msg := a.errField("message"); !strings.Contains(msg, "only at the MCP endpoint") {
			t.Errorf("message %q", msg)
		}
		if strings.Contains(string(a.raw), mcp.Secret) {
			t.Error("the answer repeats the token")
		}
	})
	t.Run("wrong audience message names the admin audience", func(t *testing.T) {
		a := e.do(t, req{method: "GET", path: "/v1/whoami", token: e.p.MustClientCredentials(t, "platform", secret, mcpAudience)})
		if msg := a.errField("message"); !strings.Contains(msg, adminAudience) {
			t.Errorf("message %q", msg)
		}
	})

	whoami := []struct {
		name  string
		token string
		want  admin.WhoAmI
	}{
		{"OIDC platform admin", e.oidc(t, "platform"), admin.WhoAmI{Role: "platform_admin", Subject: "pat", Name: "platform"}},
		{"OIDC tenant admin", e.oidc(t, "acme-admin"), admin.WhoAmI{Role: "tenant_admin", Tenant: "acme", Subject: "ada", Name: "acme-admin"}},
		{"OIDC person", e.oidc(t, "alice"), admin.WhoAmI{Role: "person", Tenant: "acme", Subject: "alice", Name: "alice"}},
		{"OIDC person with an unrelated role", e.oidc(t, "carol"), admin.WhoAmI{Role: "person", Tenant: "acme", Subject: "carol", Name: "carol"}},
		{"static platform admin", staticPlatform, admin.WhoAmI{Role: "platform_admin", Name: "bootstrap"}},
		{"static tenant admin", staticGlobex, admin.WhoAmI{Role: "tenant_admin", Tenant: "globex", Name: "globex-ops"}},
	}
	for _, tc := range whoami {
		t.Run("whoami/"+tc.name, func(t *testing.T) {
			a := e.do(t, req{method: "GET", path: "/v1/whoami", token: tc.token})
			want(t, a, 200, "")
			var got admin.WhoAmI
			if err := json.Unmarshal(a.raw, &got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("whoami = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestIdentityProviderDown(t *testing.T) {
	p := oidctest.Start(t, oidctest.WithConfig(providerConfig()))
	var mu sync.Mutex
	offset := time.Duration(0)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(offset)
	}
	v, err := auth.NewVerifier(context.Background(), []auth.IssuerConfig{{Issuer: p.Issuer, TenantClaim: "tenant"}}, auth.WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	st, svc, _ := newService(t)
	api, err := admin.New(admin.Options{Tokens: svc, Audit: st, Verifier: v, Audience: adminAudience})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	e := &env{p: p, srv: srv}

	cached := e.oidc(t, "alice")
	want(t, e.do(t, req{method: "GET", path: "/v1/whoami", token: cached}), 200, "")
	// New keys the verifier has not seen, then the provider goes away.
	p.Rotate(t, false)
	fresh := e.oidc(t, "alice")
	p.Stop()
	mu.Lock()
	offset = time.Minute // past the least interval between JWKS fetches
	mu.Unlock()

	a := e.do(t, req{method: "GET", path: "/v1/whoami", token: fresh})
	want(t, a, 503, "auth_unavailable")
	if a.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	// A token verified before still works.
	want(t, e.do(t, req{method: "GET", path: "/v1/whoami", token: cached}), 200, "")
}

func TestTokensAPI(t *testing.T) {
	e := newEnv(t)
	alice, carol, bob := e.oidc(t, "alice"), e.oidc(t, "carol"), e.oidc(t, "bob")
	acmeAdmin, platform := e.oidc(t, "acme-admin"), e.oidc(t, "platform")

	create := func(t *testing.T, token, body string) (answer, admin.Token) {
		t.Helper()
		a := e.do(t, req{method: "POST", path: "/v1/tokens", token: token, body: body})
		var tok admin.Token
		if a.status == 201 {
			if err := json.Unmarshal(a.raw, &tok); err != nil {
				t.Fatal(err)
			}
		}
		return a, tok
	}

	// A person creates their own token; the secret is in this answer only.
	a, mine := create(t, alice, `{"name": "laptop", "rights": ["tickets:read"], "expires_in": "1h"}`)
	want(t, a, 201, "")
	if !strings.HasPrefix(mine.Secret, tokens.Prefix) || mine.Tenant != "acme" || mine.Creator != "alice" ||
		mine.Name != "laptop" || !slices.Equal(mine.Rights, []string{"tickets:read"}) || !mine.Active || mine.RevokedAt != nil {
		t.Errorf("created = %+v", mine)
	}
	if mine.ExpiresAt == nil || mine.ExpiresAt.Sub(mine.CreatedAt) != time.Hour {
		t.Errorf("created %s expires %v, want 1h later", mine.CreatedAt, mine.ExpiresAt)
	}
	for _, k := range []string{"hash", "Hash"} {
		if _, ok := a.body[k]; ok {
			t.Errorf("create answer has %q", k)
		}
	}
	if got, err := e.svc.Verify(context.Background(), mine.Secret); err != nil || got.ID != mine.ID {
		t.Fatalf("the secret does not verify: %v", err)
	}

	_, all := create(t, alice, `{}`)
	if !slices.Equal(all.Rights, []string{"tickets:read", "tickets:write"}) || all.ExpiresAt.Sub(all.CreatedAt) != 30*24*time.Hour {
		t.Errorf("defaults: %+v", all)
	}
	a, forCarol := create(t, acmeAdmin, `{"subject": "carol", "name": "carol's bot"}`)
	want(t, a, 201, "")
	if forCarol.Creator != "carol" || forCarol.Tenant != "acme" {
		t.Errorf("tenant admin created %+v", forCarol)
	}
	a, forBob := create(t, staticPlatform, `{"tenant": "globex", "subject": "bob"}`)
	want(t, a, 201, "")
	a, forGina := create(t, staticGlobex, `{"subject": "gina", "rights": ["crm:write"]}`)
	want(t, a, 201, "")
	if forGina.Tenant != "globex" {
		t.Errorf("static tenant admin created %+v", forGina)
	}

	refusals := []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"person for another subject", alice, `{"subject": "carol"}`, 403, "not_your_token"},
		{"person for another tenant", alice, `{"tenant": "globex"}`, 403, "not_your_token"},
		{"tenant admin for another tenant", acmeAdmin, `{"tenant": "globex", "subject": "bob"}`, 403, "other_tenant"},
		{"static tenant admin without subject", staticGlobex, `{}`, 400, "subject_required"},
		{"platform admin without tenant", platform, `{"subject": "bob"}`, 400, "tenant_and_subject_required"},
		{"inactive person", acmeAdmin, `{"subject": "dave"}`, 403, "inactive"},
		{"unknown person", platform, `{"tenant": "acme", "subject": "zed"}`, 403, "inactive"},
		{"expiry too long", alice, `{"expires_in": "2161h"}`, 400, "expiry_too_long"},
		{"negative expiry", alice, `{"expires_in": "-1h"}`, 400, "invalid_expiry"},
		{"zero expiry", alice, `{"expires_in": "0s"}`, 400, "invalid_expiry"},
		{"expiry not a duration", alice, `{"expires_in": "30 days"}`, 400, "invalid_expiry"},
		{"empty right", alice, `{"rights": [""]}`, 400, "invalid_rights"},
		{"name with a newline", alice, `{"name": "a\nb"}`, 400, "invalid_name"},
	}
	for _, tc := range refusals {
		t.Run("create/"+tc.name, func(t *testing.T) {
			a, _ := create(t, tc.token, tc.body)
			want(t, a, tc.status, tc.code)
			if strings.Contains(string(a.raw), tokens.Prefix) {
				t.Error("a refusal carries a token")
			}
		})
	}
	t.Run("create/rights cap", func(t *testing.T) {
		a, _ := create(t, alice, `{"rights": ["tickets:read", "tickets:admin", "billing:read"]}`)
		want(t, a, 403, "rights_not_held")
		msg := a.errField("message")
		if !strings.Contains(msg, "tickets:admin") || !strings.Contains(msg, "billing:read") || strings.Contains(msg, `"tickets:read"`) {
			t.Errorf("message %q does not name exactly the missing rights", msg)
		}
		m := a.body["error"].(map[string]any)
		if got, _ := json.Marshal(m["missing"]); string(got) != `["tickets:admin","billing:read"]` {
			t.Errorf("missing = %s", got)
		}
	})
	t.Run("create/rights source down", func(t *testing.T) {
		e.rights.setDown(true)
		defer e.rights.setDown(false)
		a, _ := create(t, alice, `{}`)
		want(t, a, 503, "rights_unavailable")
		if a.header.Get("Retry-After") == "" {
			t.Error("503 without Retry-After")
		}
	})

	ids := func(a answer) []string {
		var l admin.TokenList
		if err := json.Unmarshal(a.raw, &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tok := range l.Tokens {
			if tok.Secret != "" {
				t.Errorf("listed token %s carries its secret", tok.ID)
			}
			out = append(out, tok.ID)
		}
		return out
	}
	lists := []struct {
		name, token, query string
		want               []string
		status             int
		code               string
	}{
		{"platform admin, all", platform, "", []string{mine.ID, all.ID, forCarol.ID, forBob.ID, forGina.ID}, 200, ""},
		{"platform admin, one tenant", staticPlatform, "?tenant=globex", []string{forBob.ID, forGina.ID}, 200, ""},
		{"platform admin, one creator", platform, "?tenant=acme&creator=carol", []string{forCarol.ID}, 200, ""},
		{"tenant admin, own tenant", acmeAdmin, "", []string{mine.ID, all.ID, forCarol.ID}, 200, ""},
		{"static tenant admin, own tenant", staticGlobex, "?creator=bob", []string{forBob.ID}, 200, ""},
		{"tenant admin, another tenant", acmeAdmin, "?tenant=globex", nil, 403, "other_tenant"},
		{"person, own", alice, "", []string{mine.ID, all.ID}, 200, ""},
		{"person without tokens", bob, "", []string{forBob.ID}, 200, ""},
		{"person, another creator", alice, "?creator=carol", nil, 403, "not_your_token"},
		{"unknown parameter", platform, "?owner=alice", nil, 400, "unknown_parameter"},
		{"repeated parameter", platform, "?tenant=acme&tenant=globex", nil, 400, "duplicate_parameter"},
		{"malformed query", platform, "?tenant=%zz", nil, 400, "invalid_query"},
	}
	for _, tc := range lists {
		t.Run("list/"+tc.name, func(t *testing.T) {
			a := e.do(t, req{method: "GET", path: "/v1/tokens" + tc.query, token: tc.token})
			want(t, a, tc.status, tc.code)
			if tc.status != 200 {
				return
			}
			if got := ids(a); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %q, want %q", got, tc.want)
			}
			if strings.Contains(string(a.raw), mine.Secret) || strings.Contains(string(a.raw), "hash") {
				t.Error("the list shows a secret or a hash")
			}
		})
	}
	t.Run("list/empty is an empty array", func(t *testing.T) {
		a := e.do(t, req{method: "GET", path: "/v1/tokens?creator=nobody", token: staticGlobex})
		if !strings.Contains(string(a.raw), `"tokens":[]`) {
			t.Errorf("body %s", a.raw)
		}
	})

	revokes := []struct {
		name, token, id string
		status          int
		code            string
	}{
		{"person, another's token", carol, mine.ID, 404, "token_not_found"},
		{"person, another tenant's token", alice, forBob.ID, 404, "token_not_found"},
		{"tenant admin, another tenant's token", acmeAdmin, forBob.ID, 404, "token_not_found"},
		{"static tenant admin, another tenant's token", staticGlobex, forCarol.ID, 404, "token_not_found"},
		{"unknown id", platform, "tok_0123456789abcdef0123456789abcdef", 404, "token_not_found"},
		{"malformed id", platform, "nope", 404, "token_not_found"},
		{"person, own token", alice, mine.ID, 200, ""},
		{"tenant admin, token of its tenant", acmeAdmin, forCarol.ID, 200, ""},
		{"static platform admin, any token", staticPlatform, forBob.ID, 200, ""},
	}
	for _, tc := range revokes {
		t.Run("revoke/"+tc.name, func(t *testing.T) {
			a := e.do(t, req{method: "DELETE", path: "/v1/tokens/" + tc.id, token: tc.token})
			want(t, a, tc.status, tc.code)
			if tc.status != 200 {
				return
			}
			var tok admin.Token
			if err := json.Unmarshal(a.raw, &tok); err != nil {
				t.Fatal(err)
			}
			if tok.ID != tc.id || tok.RevokedAt == nil || tok.Active || tok.Secret != "" {
				t.Errorf("revoked = %+v", tok)
			}
		})
	}
	t.Run("revoked secret no longer verifies", func(t *testing.T) {
		_, err := e.svc.Verify(context.Background(), mine.Secret)
		if !errors.Is(err, tokens.ErrRevoked) {
			t.Errorf("Verify = %v, want revoked", err)
		}
	})

	routing := []struct {
		name   string
		method string
		path   string
		status int
		code   string
		allow  string
	}{
		{"unknown path", "GET", "/v1/nothing", 404, "not_found", ""},
		{"nested token path", "DELETE", "/v1/tokens/a/b", 404, "not_found", ""},
		{"empty token id", "DELETE", "/v1/tokens/", 404, "token_not_found", ""},
		{"PUT tokens", "PUT", "/v1/tokens", 405, "method_not_allowed", "GET, POST"},
		{"GET one token", "GET", "/v1/tokens/" + all.ID, 405, "method_not_allowed", "DELETE"},
		{"POST whoami", "POST", "/v1/whoami", 405, "method_not_allowed", "GET"},
		{"DELETE audit", "DELETE", "/v1/audit", 405, "method_not_allowed", "GET"},
	}
	for _, tc := range routing {
		t.Run("routing/"+tc.name, func(t *testing.T) {
			a := e.do(t, req{method: tc.method, path: tc.path, token: platform})
			want(t, a, tc.status, tc.code)
			if got := a.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow %q, want %q", got, tc.allow)
			}
		})
	}
}

func TestStrictJSON(t *testing.T) {
	e := newEnv(t)
	alice := e.oidc(t, "alice")
	cases := []struct {
		name, body, contentType string
		status                  int
		code                    string
	}{
		{"unknown member", `{"name": "x", "scope": "all"}`, "", 400, "unknown_field"},
		{"member in another case", `{"Name": "x"}`, "", 400, "unknown_field"},
		{"duplicate member", `{"name": "x", "name": "y"}`, "", 400, "duplicate_field"},
		{"rights not an array", `{"rights": "tickets:read"}`, "", 400, "wrong_type"},
		{"right not a string", `{"rights": ["tickets:read", 7]}`, "", 400, "wrong_type"},
		{"name not a string", `{"name": 5}`, "", 400, "wrong_type"},
		{"expires_in a number", `{"expires_in": 3600}`, "", 400, "wrong_type"},
		{"array body", `[]`, "", 400, "invalid_json"},
		{"null body", `null`, "", 400, "invalid_json"},
		{"string body", `"x"`, "", 400, "invalid_json"},
		{"trailing data", `{} {}`, "", 400, "invalid_json"},
		{"truncated", `{"name": "x"`, "", 400, "invalid_json"},
		{"invalid UTF-8", "{\"name\": \"\xff\"}", "", 400, "invalid_json"},
		{"too large", `{"name": "` + strings.Repeat("a", admin.MaxBodyBytes) + `"}`, "", 413, "body_too_large"},
		{"text/plain", `{}`, "text/plain", 415, "unsupported_media_type"},
		{"form", `name=x`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"no content type", `{}`, "-", 415, "unsupported_media_type"},
		{"latin-1 charset", `{}`, "application/json; charset=iso-8859-1", 415, "unsupported_media_type"},
		{"json with utf-8 charset", `{"name": "ok"}`, "Application/JSON; charset=UTF-8", 201, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := e.do(t, req{method: "POST", path: "/v1/tokens", token: alice, body: tc.body, contentType: tc.contentType})
			want(t, a, tc.status, tc.code)
		})
	}
	t.Run("unknown member names the allowed ones", func(t *testing.T) {
		a := e.do(t, req{method: "POST", path: "/v1/tokens", token: alice, body: `{"scope": "all"}`})
		if msg, fix := a.errField("message"), a.errField("fix"); !strings.Contains(msg, `"scope"`) ||
			!strings.Contains(fix, "expires_in") || !strings.Contains(fix, "rights") {
			t.Errorf("message %q fix %q", msg, fix)
		}
	})
	t.Run("wrong type names the member", func(t *testing.T) {
		a := e.do(t, req{method: "POST", path: "/v1/tokens", token: alice, body: `{"rights": ["a", 7]}`})
		if msg := a.errField("message"); !strings.Contains(msg, "rights[1]") || !strings.Contains(msg, "a string") {
			t.Errorf("message %q", msg)
		}
	})
	t.Run("empty body", func(t *testing.T) {
		hr, _ := http.NewRequest("POST", e.srv.URL+"/v1/tokens", http.NoBody)
		hr.Header.Set("Authorization", "Bearer "+alice)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
	})
	t.Run("too large without Content-Length", func(t *testing.T) {
		body := io.MultiReader(strings.NewReader(`{"name": "`), bytes.NewReader(bytes.Repeat([]byte("a"), 2*admin.MaxBodyBytes)), strings.NewReader(`"}`))
		hr, _ := http.NewRequest("POST", e.srv.URL+"/v1/tokens", body)
		hr.ContentLength = -1 // chunked
		hr.Header.Set("Authorization", "Bearer "+alice)
		hr.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("status %d, want 413", resp.StatusCode)
		}
	})
}

func TestAuditAPI(t *testing.T) {
	e := newEnv(t)
	alice, bob := e.oidc(t, "alice"), e.oidc(t, "bob")
	acmeAdmin, platform := e.oidc(t, "acme-admin"), e.oidc(t, "platform")

	// Changes and refusals through the API, by several callers.
	a := e.do(t, req{method: "POST", path: "/v1/tokens", token: alice, body: `{"name": "a"}`})
	want(t, a, 201, "")
	aliceTok, _ := a.body["id"].(string)
	aliceSecret, _ := a.body["token"].(string)
	want(t, e.do(t, req{method: "POST", path: "/v1/tokens", token: bob, body: `{}`}), 201, "")
	want(t, e.do(t, req{method: "POST", path: "/v1/tokens", token: alice, body: `{"rights": ["root"]}`}), 403, "rights_not_held")
	want(t, e.do(t, req{method: "DELETE", path: "/v1/tokens/" + aliceTok, token: bob}), 404, "token_not_found")
	want(t, e.do(t, req{method: "DELETE", path: "/v1/tokens/" + aliceTok, token: staticPlatform}), 200, "")

	records := func(a answer) []admin.AuditRecord {
		t.Helper()
		var l admin.AuditList
		if err := json.Unmarshal(a.raw, &l); err != nil {
			t.Fatal(err)
		}
		return l.Records
	}
	t.Run("platform admin reads all", func(t *testing.T) {
		a := e.do(t, req{method: "GET", path: "/v1/audit", token: platform})
		want(t, a, 200, "")
		recs := records(a)
		type row struct{ tenant, subject, action, outcome, tokenID, reason string }
		var got []row
		for _, r := range recs {
			if r.Channel != store.ChannelAdmin || r.ID == "" || r.Time.IsZero() {
				t.Errorf("record %+v", r)
			}
			got = append(got, row{r.Tenant, r.Subject, r.Action, r.Outcome, r.PublicIDs["token_id"], r.PublicIDs["reason"]})
		}
		slices.Reverse(got) // oldest first
		wantRows := []row{
			{"acme", "alice", "tokens.create", "ok", aliceTok, ""},
			{"globex", "bob", "tokens.create", "ok", got[1].tokenID, ""},
			{"acme", "alice", "tokens.create", "denied", "", "rights_not_held"},
			{"globex", "bob", "tokens.revoke", "denied", aliceTok, "token_not_found"},
			{"acme", "bootstrap", "tokens.revoke", "ok", aliceTok, ""},
		}
		if !slices.Equal(got, wantRows) {
			t.Errorf("records (oldest first):\n got %+v\nwant %+v", got, wantRows)
		}
		if strings.Contains(string(a.raw), aliceSecret) {
			t.Error("the audit log holds a secret")
		}
	})
	t.Run("tenant admin reads its tenant", func(t *testing.T) {
		a := e.do(t, req{method: "GET", path: "/v1/audit", token: acmeAdmin})
		want(t, a, 200, "")
		recs := records(a)
		if len(recs) != 3 {
			t.Errorf("%d records, want 3", len(recs))
		}
		for _, r := range recs {
			if r.Tenant != "acme" {
				t.Errorf("tenant admin of acme sees %+v", r)
			}
		}
		a = e.do(t, req{method: "GET", path: "/v1/audit?tenant=acme&limit=2", token: acmeAdmin})
		want(t, a, 200, "")
		if n := len(records(a)); n != 2 {
			t.Errorf("limit=2: %d records", n)
		}
		a = e.do(t, req{method: "GET", path: "/v1/audit", token: staticGlobex})
		want(t, a, 200, "")
		for _, r := range records(a) {
			if r.Tenant != "globex" {
				t.Errorf("static admin of globex sees %+v", r)
			}
		}
	})
	t.Run("time window", func(t *testing.T) {
		future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		a := e.do(t, req{method: "GET", path: "/v1/audit?since=" + future, token: platform})
		want(t, a, 200, "")
		if n := len(records(a)); n != 0 {
			t.Errorf("since the future: %d records", n)
		}
		a = e.do(t, req{method: "GET", path: "/v1/audit?until=" + future + "&tenant=globex", token: platform})
		want(t, a, 200, "")
		if n := len(records(a)); n != 2 {
			t.Errorf("globex until the future: %d records, want 2", n)
		}
	})
	refusals := []struct {
		name, token, query string
		status             int
		code               string
	}{
		{"person", alice, "", 403, "forbidden"},
		{"tenant admin, another tenant", acmeAdmin, "?tenant=globex", 403, "other_tenant"},
		{"bad since", platform, "?since=yesterday", 400, "invalid_time"},
		{"since after until", platform, "?since=2026-05-02T00:00:00Z&until=2026-05-01T00:00:00Z", 400, "invalid_time"},
		{"limit zero", platform, "?limit=0", 400, "invalid_limit"},
		{"limit too large", platform, "?limit=1001", 400, "invalid_limit"},
		{"limit not a number", platform, "?limit=ten", 400, "invalid_limit"},
		{"unknown parameter", platform, "?action=tokens.create", 400, "unknown_parameter"},
	}
	for _, tc := range refusals {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			want(t, e.do(t, req{method: "GET", path: "/v1/audit" + tc.query, token: tc.token}), tc.status, tc.code)
		})
	}
	t.Run("refused reads are audited", func(t *testing.T) {
		recs, err := e.st.QueryAudit(context.Background(), store.AuditQuery{Tenant: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		var denied []string
		for _, r := range recs {
			if r.Action == "audit.query" && r.Outcome == "denied" {
				denied = append(denied, r.Subject+":"+r.PublicIDs["reason"])
			}
		}
		slices.Sort(denied)
		if !slices.Equal(denied, []string{"ada:other_tenant", "alice:forbidden"}) {
			t.Errorf("denied audit reads = %q", denied)
		}
	})
}

func TestNewOptions(t *testing.T) {
	st, svc, _ := newService(t)
	var nilVerifier *auth.Verifier
	ok := admin.Options{Tokens: svc, Audit: st}
	if _, err := admin.New(ok); err != nil {
		t.Fatalf("static-only API: %v", err)
	}
	withNil := ok
	withNil.Verifier = nilVerifier
	if _, err := admin.New(withNil); err != nil {
		t.Errorf("a nil *auth.Verifier must mean OIDC off: %v", err)
	}
	t.Run("tokens off", func(t *testing.T) {
		api, err := admin.New(admin.Options{Audit: st, StaticTokens: []admin.StaticToken{
			{Name: "b", SHA256: hashOf(staticPlatform), Role: tokens.RolePlatformAdmin}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.Handler())
		defer srv.Close()
		e := &env{srv: srv}
		want(t, e.do(t, req{method: "GET", path: "/v1/tokens", token: staticPlatform}), 404, "tokens_disabled")
		want(t, e.do(t, req{method: "DELETE", path: "/v1/tokens/tok_x", token: staticPlatform}), 404, "tokens_disabled")
		want(t, e.do(t, req{method: "GET", path: "/v1/tokens"}), 401, "missing_token")
		want(t, e.do(t, req{method: "GET", path: "/v1/whoami", token: staticPlatform}), 200, "")
		want(t, e.do(t, req{method: "GET", path: "/v1/audit", token: staticPlatform}), 200, "")
	})
	h := hashOf("x")
	bad := []struct {
		name string
		mod  func(*admin.Options)
		want string
	}{
		{"no audit", func(o *admin.Options) { o.Audit = nil }, "audit store"},
		{"verifier without audience", func(o *admin.Options) { o.Verifier = stubVerifier{} }, "audience"},
		{"same role twice", func(o *admin.Options) { o.PlatformAdminRole, o.TenantAdminRole = "admin", "admin" }, "both"},
		{"static without name", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{SHA256: h, Role: tokens.RolePlatformAdmin}}
		}, "name"},
		{"static without hash", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{Name: "a", Role: tokens.RolePlatformAdmin}}
		}, "hash"},
		{"static twice", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{Name: "a", SHA256: h, Role: tokens.RolePlatformAdmin}, {Name: "a", SHA256: h, Role: tokens.RolePlatformAdmin}}
		}, "twice"},
		{"static person", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{Name: "a", SHA256: h, Role: tokens.RolePerson, Tenant: "acme"}}
		}, "role"},
		{"static tenant admin without tenant", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{Name: "a", SHA256: h, Role: tokens.RoleTenantAdmin}}
		}, "tenant"},
		{"static platform admin with tenant", func(o *admin.Options) {
			o.StaticTokens = []admin.StaticToken{{Name: "a", SHA256: h, Role: tokens.RolePlatformAdmin, Tenant: "acme"}}
		}, "no tenant"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			o := ok
			tc.mod(&o)
			_, err := admin.New(o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// stubVerifier only fills the Verifier slot of options that New refuses
// before any token is verified.
type stubVerifier struct{}

func (stubVerifier) Verify(context.Context, string, string) (*auth.Claims, error) {
	return nil, errors.New("not used")
}
