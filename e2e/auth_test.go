package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/policy"
)

// The gateway's public origin in these tests: resource URIs are built from
// it, never from the Host the test client sends (127.0.0.1:port).
const (
	authBase          = "https://mcp.example.com"
	demoResource      = authBase + "/mcp"
	syntheticResource = authBase + "/synthetic/mcp"
	demoMetadata      = authBase + "/.well-known/oauth-protected-resource/mcp"
)

// recorder wraps an upstream handler and records the credential headers of
// every request that reaches it.
type recorder struct {
	next http.Handler
	// skip, when set, leaves requests out of seen (mcpgate's own catalog
	// listings, which are not clients' calls).
	skip func(*http.Request) bool
	mu   sync.Mutex
	seen []http.Header
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if rc.skip == nil || !rc.skip(r) {
		rc.mu.Lock()
		rc.seen = append(rc.seen, r.Header.Clone())
		rc.mu.Unlock()
	}
	rc.next.ServeHTTP(w, r)
}

// credentialsSeen returns every Authorization and Cookie value upstreams
// received, and how many requests they got.
func (rc *recorder) credentialsSeen() ([]string, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for _, h := range rc.seen {
		out = append(out, h.Values("Authorization")...)
		out = append(out, h.Values("Cookie")...)
	}
	return out, len(rc.seen)
}

// authEnv is a gateway with authentication against a real OpenID provider,
// with both listeners, and an Envoy stand-in per upstream.
type authEnv struct {
	p       *oidctest.Provider
	proxy   string
	drivers map[string]string // upstream → driver base URL
	rec     *recorder
}

// via returns the base URLs a client reaches the gateway at: the standalone
// proxy and Envoy (the driver) + ext_proc.
func (e *authEnv) via(upstream string) map[string]string {
	return map[string]string{"proxy": e.proxy, "extproc": e.drivers[upstream]}
}

func startAuthEnv(t *testing.T, minJWKSRefresh time.Duration) *authEnv {
	t.Helper()
	p := oidctest.Start(t)
	rec := &recorder{next: demo.New(demo.Options{}).Handler()}
	up := httptest.NewServer(rec)
	t.Cleanup(up.Close)
	syn := httptest.NewServer(&recorder{next: http.HandlerFunc(synthetic)})
	t.Cleanup(syn.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	cfg.Upstreams = append(cfg.Upstreams, config.Upstream{Name: "synthetic", URL: syn.URL + "/mcp", Route: "/synthetic/mcp",
		Tools: map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead, Rights: []string{"lookup:read"}}}})
	cfg.Auth = &config.Auth{
		ResourceBaseURL: authBase,
		Issuers:         []config.Issuer{{Issuer: p.Issuer, TenantClaim: "tenant", MinJWKSRefresh: optDuration(minJWKSRefresh)}},
	}
	// The synthetic upstream is no MCP server the catalog could list, and
	// these cases check authentication around forwarded answers: catalog
	// off (its path is tested with its own e2e tests).
	cfg.Catalog.Disabled = true
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	e := &authEnv{p: p, proxy: "http://" + a.ProxyAddr, drivers: map[string]string{}, rec: rec}
	for name, target := range map[string]string{"demo": up.URL, "synthetic": syn.URL} {
		srv, _ := startEnvoy(t, a.ExtProcAddr, target, name, 2*time.Second)
		e.drivers[name] = srv.URL
	}
	return e
}

// answer is what a client sees of one answer, decision ids blanked.
type answer struct {
	Status          int
	ContentType     string
	WWWAuthenticate string
	Body            string
}

func send(t *testing.T, method, u string, hdr http.Header, body []byte) answer {
	t.Helper()
	resp, b := roundTrip(t, method, u, hdr, body)
	return answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
		WWWAuthenticate: resp.Header.Get("Www-Authenticate"), Body: maskDecisionID(b)}
}

// bearer returns MCP 2026-07-28 headers for a method, with a token.
func bearer(token, method, name string) http.Header {
	h := http.Header{}
	for k, v := range v26(method, name) {
		h.Set(k, v)
	}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

var listBody = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)

// jwtPart is one base64url JWT segment of a JSON value.
func jwtPart(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// attackClaims are claims a valid token of the provider would carry.
func attackClaims(p *oidctest.Provider) map[string]any {
	now := time.Now().Unix()
	return map[string]any{"iss": p.Issuer, "sub": "mallory", "aud": demoResource, "exp": now + 300, "iat": now, "nbf": now,
		"client_id": provider.ClientGateway, "scope": "customers:read bookings:read", "tenant": "acme"}
}

// hs256WithPublicKey is the algorithm-confusion attack: an HS256 token whose
// HMAC key is the provider's published RSA public key.
func hs256WithPublicKey(t *testing.T, p *oidctest.Provider) string {
	t.Helper()
	resp, err := http.Get(p.JWKSURI())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	var key jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Algorithm == "RS256" {
			key = k
		}
	}
	der, err := x509.MarshalPKIXPublicKey(key.Key)
	if err != nil {
		t.Fatal(err)
	}
	secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	signing := jwtPart(t, map[string]any{"alg": "HS256", "typ": "at+jwt", "kid": key.KeyID}) + "." + jwtPart(t, attackClaims(p))
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(signing))
	return signing + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// TestAuthDifferential runs every authentication case through the
// standalone proxy and through Envoy (the driver) + ext_proc against a real
// OpenID provider: both must give the client the same status, challenge and
// body, and the expected ones.
func TestAuthDifferential(t *testing.T) {
	e := startAuthEnv(t, 0)
	p := e.p
	other := oidctest.Start(t) // a second provider nobody trusts

	good := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read", "technicians:read")
	noScopes := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource)
	forSynthetic := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, syntheticResource, "customers:read", "lookup:read")
	expired := p.MustClientCredentials(t, provider.ClientExpired, provider.TestSecret, demoResource, "customers:read")
	future := p.MustClientCredentials(t, provider.ClientFuture, provider.TestSecret, demoResource, "customers:read")
	plainJWT := p.MustClientCredentials(t, provider.ClientPlainJWT, provider.TestSecret, demoResource, "customers:read")
	foreign := other.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read")
	algNone := jwtPart(t, map[string]any{"alg": "none", "typ": "at+jwt"}) + "." + jwtPart(t, attackClaims(p)) + "."
	confused := hs256WithPublicKey(t, p)
	codeFlow, err := p.RunCodeFlow(context.Background(), oidctest.CodeFlow{ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI,
		Scopes: []string{"openid", "customers:read"}, Resources: []string{demoResource}, TokenResources: []string{demoResource}})
	if err != nil {
		t.Fatalf("code flow: %v", err)
	}

	missing := `Bearer resource_metadata="` + demoMetadata + `"`
	invalid := func(desc string) string {
		return missing + `, error="invalid_token", error_description="` + desc + `"`
	}
	withCookie := bearer(good, "tools/call", "find_customers")
	withCookie.Set("Cookie", "session=abc; access_token="+good)
	cookieOnly := bearer("", "tools/call", "find_customers")
	cookieOnly.Set("Cookie", "access_token="+good)
	twoTokens := bearer(good, "tools/list", "")
	twoTokens.Add("Authorization", "Bearer "+good)
	basic := bearer("", "tools/list", "")
	basic.Set("Authorization", "Basic Z2F0ZXdheTpnYXRld2F5LXNlY3JldA==")
	notification := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta26 + `}}`)

	tests := []struct {
		name     string
		method   string
		upstream string
		query    string
		hdr      http.Header
		body     []byte
		status   int
		www      string // exact WWW-Authenticate; "-" for none
		contains []string
		absent   []string
	}{
		{name: "valid token: tools/list shows only the tools its scopes cover", hdr: bearer(good, "tools/list", ""), body: listBody, status: 200, www: "-",
			contains: []string{`"find_customers"`, `"list_technicians"`}, absent: []string{`"get_booking"`, `"create_booking"`, `"cancel_booking"`}},
		{name: "valid token: tools/call", hdr: bearer(good, "tools/call", "find_customers"), body: call("2", "find_customers", `{"query":"a"}`), status: 200, www: "-",
			contains: []string{`C-101`}, absent: []string{`"isError":true`}},
		{name: "valid token with a cookie: the call works", hdr: withCookie, body: call("3", "find_customers", `{"query":"a"}`), status: 200, www: "-", absent: []string{`"isError":true`}},
		{name: "authorization code flow token", hdr: bearer(codeFlow.AccessToken, "tools/list", ""), body: listBody, status: 200, www: "-",
			contains: []string{`"find_customers"`}, absent: []string{`"list_technicians"`}},
		{name: "token without scopes: empty list", hdr: bearer(noScopes, "tools/list", ""), body: listBody, status: 200, www: "-", contains: []string{`"tools":[]`}},
		{name: "insufficient scope: 403 with the scopes the tool needs", hdr: bearer(good, "tools/call", "get_booking"), body: call("4", "get_booking", `{"booking_id":"B-1001"}`), status: 403,
			www:      missing + `, error="insufficient_scope", scope="bookings:read", error_description="token scope does not cover this request"`,
			contains: []string{`"code":-32030`, `"code":"insufficient_scope"`, `"rights":["bookings:read"]`, `"id":4`}},
		{name: "missing token", hdr: bearer("", "tools/list", ""), body: listBody, status: 401, www: missing,
			contains: []string{`"code":-32030`, `"code":"missing_token"`, `"id":1`, demoResource}},
		{name: "another scheme (Basic)", hdr: basic, body: listBody, status: 401, www: missing, contains: []string{`"missing_token"`}},
		{name: "garbled token", hdr: bearer("not-a-jwt", "tools/list", ""), body: listBody, status: 401, www: invalid("token is malformed"), contains: []string{`"invalid_token"`}},
		{name: "garbled JWT", hdr: bearer("abc.def.ghi", "tools/list", ""), body: listBody, status: 401, www: invalid("token is malformed")},
		{name: "JWT without an issuer", hdr: bearer("eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCJ9.e30.c2ln", "tools/list", ""), body: listBody, status: 401, www: invalid("token issuer is not trusted")},
		{name: "two Authorization headers: the transport gate refuses them", hdr: twoTokens, body: listBody, status: 400, www: "-", contains: []string{`"id":1`, `-32600`, `Authorization header may appear only once`}},
		{name: "expired token", hdr: bearer(expired, "tools/list", ""), body: listBody, status: 401, www: invalid("token expired")},
		{name: "not yet valid token", hdr: bearer(future, "tools/list", ""), body: listBody, status: 401, www: invalid("token is not yet valid")},
		{name: "plain JWT typ (an ID token shape)", hdr: bearer(plainJWT, "tools/list", ""), body: listBody, status: 401, www: invalid("token type is not an access token")},
		{name: "wrong issuer (another provider)", hdr: bearer(foreign, "tools/list", ""), body: listBody, status: 401, www: invalid("token issuer is not trusted")},
		{name: "wrong audience (another route's token)", hdr: bearer(forSynthetic, "tools/list", ""), body: listBody, status: 401, www: invalid("token audience does not match this resource")},
		{name: "right audience at its own route", upstream: "synthetic", hdr: bearer(forSynthetic, "tools/list", ""), body: []byte(`{"jsonrpc":"2.0","id":100,"method":"tools/list","params":{` + meta26 + `}}`), status: 200, www: "-",
			contains: []string{`"lookup"`}},
		{name: "alg none", hdr: bearer(algNone, "tools/list", ""), body: listBody, status: 401, www: invalid("token signing algorithm is not allowed")},
		{name: "HS256 signed with the RSA public key", hdr: bearer(confused, "tools/list", ""), body: listBody, status: 401, www: invalid("token signing algorithm is not allowed")},
		{name: "token in the query string only", query: "?access_token=" + good, hdr: bearer("", "tools/list", ""), body: listBody, status: 401,
			www: `Bearer resource_metadata="` + demoMetadata + `", error="invalid_request", error_description="access tokens are accepted in the Authorization header only"`, contains: []string{`"invalid_request"`}},
		{name: "token in the query string and the header", query: "?x=1&access%5Ftoken=" + good, hdr: bearer(good, "tools/list", ""), body: listBody, status: 401,
			www: `Bearer resource_metadata="` + demoMetadata + `", error="invalid_request", error_description="access tokens are accepted in the Authorization header only"`},
		{name: "cookie only", hdr: cookieOnly, body: call("5", "find_customers", `{"query":"a"}`), status: 401, www: missing, contains: []string{`"missing_token"`}},
		{name: "notification without token: no body", hdr: bearer("", "notifications/cancelled", ""), body: notification, status: 401, www: missing},
		{name: "GET stream without token", method: "GET", hdr: http.Header{"Mcp-Session-Id": {"s"}}, status: 401, www: missing, contains: []string{`"id":null`}},
		{name: "the transport gate runs first", hdr: bearer("", "tools/call", "find_customers"), body: call("6", "get_booking", "{}"), status: 400, www: "-", contains: []string{`-32020`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, upstream := tt.method, tt.upstream
			if method == "" {
				method = "POST"
			}
			if upstream == "" {
				upstream = "demo"
			}
			path := "/mcp"
			if upstream == "synthetic" {
				path = "/synthetic/mcp"
			}
			got := map[string]answer{}
			for via, base := range e.via(upstream) {
				a := send(t, method, base+path+tt.query, tt.hdr, tt.body)
				got[via] = a
				if a.Status != tt.status {
					t.Errorf("%s: status %d, want %d (%.400s)", via, a.Status, tt.status, a.Body)
				}
				switch {
				case tt.www == "-" && a.WWWAuthenticate != "":
					t.Errorf("%s: WWW-Authenticate %q, want none", via, a.WWWAuthenticate)
				case tt.www != "-" && a.WWWAuthenticate != tt.www:
					t.Errorf("%s: WWW-Authenticate\n got %q\nwant %q", via, a.WWWAuthenticate, tt.www)
				}
				for _, s := range tt.contains {
					if !strings.Contains(a.Body, s) {
						t.Errorf("%s: body lacks %s: %.600s", via, s, a.Body)
					}
				}
				for _, s := range tt.absent {
					if strings.Contains(a.Body, s) {
						t.Errorf("%s: body has %s: %.600s", via, s, a.Body)
					}
				}
				if tt.status == 401 && method == "POST" && strings.Contains(string(tt.body), `"id"`) && a.ContentType != "application/json" {
					t.Errorf("%s: content type %q", via, a.ContentType)
				}
				if strings.HasPrefix(string(tt.body), `{"jsonrpc":"2.0","method":"notifications/`) && tt.status >= 400 && a.Body != "" {
					t.Errorf("%s: a refused notification got a body: %q", via, a.Body)
				}
			}
			if got["proxy"] != got["extproc"] {
				t.Errorf("proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", got["proxy"], got["extproc"])
			}
		})
	}

	// Credential separation: no request that reached the upstream carried
	// the client's Authorization header or cookies.
	creds, n := e.rec.credentialsSeen()
	if n == 0 {
		t.Fatal("the upstream saw no request")
	}
	if len(creds) > 0 {
		t.Errorf("the upstream received client credentials: %q", creds)
	}
}

// TestProtectedResourceMetadata: the RFC 9728 documents at each route's
// well-known path and at the bare one (first route), unauthenticated, the
// same through both adapters.
func TestProtectedResourceMetadata(t *testing.T) {
	e := startAuthEnv(t, 0)
	for path, resource := range map[string]string{
		"/.well-known/oauth-protected-resource/mcp":           demoResource,
		"/.well-known/oauth-protected-resource":               demoResource,
		"/.well-known/oauth-protected-resource/synthetic/mcp": syntheticResource,
	} {
		t.Run(path, func(t *testing.T) {
			got := map[string]answer{}
			for via, base := range e.via("demo") {
				a := send(t, "GET", base+path, http.Header{"Origin": {"http://localhost:6274"}}, nil)
				got[via] = a
				if a.Status != 200 || a.ContentType != "application/json" || a.WWWAuthenticate != "" {
					t.Fatalf("%s: %+v", via, a)
				}
				var md struct {
					Resource               string   `json:"resource"`
					AuthorizationServers   []string `json:"authorization_servers"`
					ScopesSupported        []string `json:"scopes_supported"`
					BearerMethodsSupported []string `json:"bearer_methods_supported"`
				}
				if err := json.Unmarshal([]byte(a.Body), &md); err != nil {
					t.Fatalf("%s: %v: %s", via, err, a.Body)
				}
				if md.Resource != resource || !slices.Equal(md.AuthorizationServers, []string{e.p.Issuer}) || !slices.Equal(md.BearerMethodsSupported, []string{"header"}) {
					t.Errorf("%s: %+v", via, md)
				}
				if resource == demoResource && !slices.Contains(md.ScopesSupported, "customers:read") {
					t.Errorf("%s: scopes_supported %q lack the demo's rights", via, md.ScopesSupported)
				}
			}
			if got["proxy"] != got["extproc"] {
				t.Errorf("proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", got["proxy"], got["extproc"])
			}
		})
	}
	for via, base := range e.via("demo") {
		if a := send(t, "POST", base+"/.well-known/oauth-protected-resource/mcp", nil, []byte(`{}`)); a.Status != 405 {
			t.Errorf("%s: POST to the metadata: %+v", via, a)
		}
		if a := send(t, "GET", base+"/.well-known/oauth-protected-resource/other", nil, nil); a.Status == 200 {
			t.Errorf("%s: metadata for a route that does not exist: %+v", via, a)
		}
	}
	// A client that follows the challenge: 401 → resource_metadata → the
	// document names the resource it called and its issuer.
	a := send(t, "POST", e.proxy+"/mcp", bearer("", "tools/list", ""), listBody)
	mdURL := strings.TrimSuffix(strings.TrimPrefix(a.WWWAuthenticate, `Bearer resource_metadata="`), `"`)
	local := strings.Replace(mdURL, authBase, e.proxy, 1)
	if md := send(t, "GET", local, nil, nil); md.Status != 200 || !strings.Contains(md.Body, `"resource":"`+demoResource+`"`) {
		t.Errorf("metadata at the challenge's URL %s: %+v", mdURL, md)
	}
}

// TestMetadataWithoutAuth: with no auth section the well-known paths are
// not served (404) and credentials pass through as before.
func TestMetadataWithoutAuth(t *testing.T) {
	e := startDifferential(t)
	a := send(t, "GET", e.proxy+"/.well-known/oauth-protected-resource/mcp", nil, nil)
	if a.Status != 404 {
		t.Errorf("metadata without auth: %+v", a)
	}
}

// bearerTransport adds a bearer token to every request, as an MCP client
// that obtained one would.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestSDKClientWithToken: the official Go SDK client with an Authorization
// header, through the proxy and through Envoy, for both revisions.
func TestSDKClientWithToken(t *testing.T) {
	e := startAuthEnv(t, 0)
	token := e.p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read", "technicians:read")
	for via, base := range e.via("demo") {
		for _, version := range []string{"2026-07-28", "2025-11-25"} {
			t.Run(via+" "+version, func(t *testing.T) {
				c := sdk.NewClient(&sdk.Implementation{Name: "auth-e2e", Version: "1"}, nil)
				tr := &sdk.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearerTransport{token}}}
				cs, err := c.Connect(context.Background(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				tools, err := cs.ListTools(context.Background(), nil)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, tool := range tools.Tools {
					names = append(names, tool.Name)
				}
				slices.Sort(names)
				if !slices.Equal(names, []string{"find_customers", "list_technicians"}) {
					t.Errorf("listed %q", names)
				}
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}})
				if err != nil || res.IsError {
					t.Fatalf("find_customers: %v %+v", err, res)
				}
				if _, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_booking", Arguments: map[string]any{"booking_id": "B-1001"}}); err == nil {
					t.Error("get_booking without its scope succeeded")
				}
			})
		}
	}
	// Without the header the SDK client cannot connect.
	c := sdk.NewClient(&sdk.Implementation{Name: "auth-e2e", Version: "1"}, nil)
	if cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.proxy + "/mcp", MaxRetries: -1}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"}); err == nil {
		cs.Close()
		t.Error("connected without a token")
	}
	if creds, _ := e.rec.credentialsSeen(); len(creds) > 0 {
		t.Errorf("the upstream received client credentials: %q", creds)
	}
}

// TestProviderDownFailsClosed: a token the gateway has not verified yet,
// signed by a key it has not fetched, while the provider is down: 503
// through both adapters, never an unchecked pass; a token verified before
// keeps working from the cache.
func TestProviderDownFailsClosed(t *testing.T) {
	e := startAuthEnv(t, time.Millisecond)
	cached := e.p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read")
	for via, base := range e.via("demo") {
		if a := send(t, "POST", base+"/mcp", bearer(cached, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`)); a.Status != 200 {
			t.Fatalf("%s: before the outage: %+v", via, a)
		}
	}
	e.p.Rotate(t, true) // new keys the gateway has not seen
	fresh := e.p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read")
	e.p.Stop()
	got := map[string]answer{}
	for _, via := range []string{"proxy", "extproc"} {
		time.Sleep(5 * time.Millisecond) // past min_jwks_refresh: each call tries the provider
		a := send(t, "POST", e.via("demo")[via]+"/mcp", bearer(fresh, "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`))
		got[via] = a
		if a.Status != 503 || a.WWWAuthenticate != "" || !strings.Contains(a.Body, `"auth_unavailable"`) || !strings.Contains(a.Body, `"id":2`) {
			t.Errorf("%s: provider down: %+v", via, a)
		}
		if c := send(t, "POST", e.via("demo")[via]+"/mcp", bearer(cached, "tools/call", "find_customers"), call("3", "find_customers", `{"query":"a"}`)); c.Status != 200 {
			t.Errorf("%s: cached token with the provider down: %+v", via, c)
		}
	}
	if got["proxy"] != got["extproc"] {
		t.Errorf("proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", got["proxy"], got["extproc"])
	}
}

// optDuration is d as a configuration duration; 0 leaves it unset (the
// default applies).
func optDuration(d time.Duration) config.Duration {
	if d == 0 {
		return config.Duration{}
	}
	return config.DurationOf(d)
}
