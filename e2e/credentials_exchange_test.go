package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/policy"
)

// exSeen is one request an exchange upstream got: the user the client
// named in the tool's arguments and the request's header.
type exSeen struct {
	user string
	hdr  http.Header
}

// exUpstream is an MCP server that accepts only a Bearer token of its
// own audience (checked by introspection at the provider). It records
// every request with the "user" argument of its tools/call.
type exUpstream struct {
	name string
	p    *oidctest.Provider
	aud  string
	mu   sync.Mutex
	seen []exSeen
}

func (u *exUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Arguments struct {
				User string `json:"user"`
			} `json:"arguments"`
		} `json:"params"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	u.mu.Lock()
	u.seen = append(u.seen, exSeen{user: req.Params.Arguments.User, hdr: r.Header.Clone()})
	u.mu.Unlock()
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	w.Header().Set("Content-Type", "application/json")
	if !ok || !introspect(u.p, tok, u.aud) {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"upstream says: bad credential"}}`, req.ID)
		return
	}
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok from %s"}]}}`, req.ID, u.name)
}

func (u *exUpstream) requests() []exSeen {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]exSeen(nil), u.seen...)
}

// TestUpstreamCredentialsExchange fronts a server that demands a per-user
// token of its own audience, through the standalone proxy and through
// Envoy (the driver) + ext_proc. The gateway verifies the callers' OAuth
// access tokens from the e2e OpenID provider and trades each, by RFC 8693
// token exchange at that provider, for a token whose subject is the caller
// and whose audience is the upstream: the client's token never arrives,
// two users never share a token, a user's second call reuses the cached
// one, and a refused exchange (a wrong client secret) is an error naming
// the upstream while that upstream receives nothing.
func TestUpstreamCredentialsExchange(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	ex := &exUpstream{name: "ex", p: p}
	exSrv := httptest.NewServer(ex)
	t.Cleanup(exSrv.Close)
	ex.aud = exSrv.URL + "/mcp"
	bad := &exUpstream{name: "exbad", p: p}
	badSrv := httptest.NewServer(bad)
	t.Cleanup(badSrv.Close)
	bad.aud = badSrv.URL + "/mcp"
	t.Setenv("MCPGATE_E2E_EXCHANGE_SECRET", provider.ClientExchangerSecret)
	t.Setenv("MCPGATE_E2E_EXCHANGE_WRONG", "not-the-secret")

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Catalog.Disabled = true // hand-written upstreams the catalog does not list
	cfg.Auth = &config.Auth{
		ResourceBaseURL: authBase,
		Issuers:         []config.Issuer{{Issuer: p.Issuer, TenantClaim: "tenant"}},
	}
	lookup := map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead, Rights: []string{"lookup:read"}}}
	exchange := func(aud, secretEnv string) *config.Credential {
		return &config.Credential{Kind: config.CredentialTokenExchange, TokenURL: p.TokenEndpoint(),
			ClientID: provider.ClientExchanger, ClientSecretEnv: secretEnv, Audience: aud, Resource: aud,
			Subject: config.SubjectAccessToken}
	}
	cfg.Upstreams = []config.Upstream{
		{Name: "ex", URL: ex.aud, Route: "/ex/mcp", Tools: lookup, Credential: exchange(ex.aud, "MCPGATE_E2E_EXCHANGE_SECRET")},
		{Name: "exbad", URL: bad.aud, Route: "/exbad/mcp", Tools: lookup, Credential: exchange(bad.aud, "MCPGATE_E2E_EXCHANGE_WRONG")},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	paths := map[string]map[string]string{"proxy": {}, "envoy": {}}
	for name, target := range map[string]string{"ex": exSrv.URL, "exbad": badSrv.URL} {
		srv, _ := startEnvoy(t, a.ExtProcAddr, target, name, 2*time.Second)
		paths["proxy"][name] = "http://" + a.ProxyAddr + "/" + name + "/mcp"
		paths["envoy"][name] = srv.URL + "/" + name + "/mcp"
	}

	// Real user access tokens (authorization code flow) for each route.
	userToken := func(user, route string) string {
		res := authBase + "/" + route + "/mcp"
		tr, err := p.RunCodeFlow(ctx, oidctest.CodeFlow{ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI, LoginHint: user,
			Scopes: []string{"openid", "lookup:read"}, Resources: []string{res}, TokenResources: []string{res}})
		if err != nil {
			t.Fatalf("code flow for %s: %v", user, err)
		}
		return tr.AccessToken
	}
	users := []string{provider.UserAlice, provider.UserBob}
	tokens := map[string]map[string]string{}
	for _, u := range users {
		tokens[u] = map[string]string{"ex": userToken(u, "ex"), "exbad": userToken(u, "exbad")}
	}
	clientCall := func(t *testing.T, via, upstream, user string) (int, string) {
		t.Helper()
		hdr := bearer(tokens[user][upstream], "tools/call", "lookup")
		hdr.Set("Cookie", "client_session=c1")
		resp, b := credSend(t, paths[via][upstream], hdr, call("1", "lookup", `{"user":"`+user+`"}`))
		return resp.StatusCode, b
	}
	// subject returns the sub and aud of an exchanged token.
	subject := func(t *testing.T, tok string) (string, []any) {
		t.Helper()
		in, err := p.Introspect(ctx, provider.ClientGateway, provider.ClientGatewaySecret, tok)
		if err != nil {
			t.Fatal(err)
		}
		if in["active"] != true {
			t.Fatalf("exchanged token not active: %v", in)
		}
		sub, _ := in["sub"].(string)
		aud, _ := in["aud"].([]any)
		return sub, aud
	}
	exchanges := func() int64 { return p.Stats(t).TokenExchanges }

	for _, via := range []string{"proxy", "envoy"} {
		t.Run(via, func(t *testing.T) {
			before := len(ex.requests())
			got := map[string]string{} // user → exchanged token
			for _, u := range users {
				if st, b := clientCall(t, via, "ex", u); st != 200 || !strings.Contains(b, "ok from ex") || strings.Contains(b, `"isError":true`) {
					t.Fatalf("%s as %s: %d %s", via, u, st, b)
				}
				reqs := ex.requests()
				last := reqs[len(reqs)-1]
				tok, ok := strings.CutPrefix(last.hdr.Get("Authorization"), "Bearer ")
				if !ok || last.user != u || len(last.hdr.Values("Authorization")) != 1 {
					t.Fatalf("upstream got Authorization %q for %q", last.hdr.Values("Authorization"), last.user)
				}
				if tok == tokens[u]["ex"] || last.hdr.Get("Cookie") != "" {
					t.Fatalf("the client's token or cookie reached the upstream")
				}
				sub, aud := subject(t, tok)
				if sub != u || len(aud) == 0 || aud[0] != ex.aud {
					t.Fatalf("exchanged token of %s: sub %q aud %v, want sub %q aud %q", u, sub, aud, u, ex.aud)
				}
				got[u] = tok
			}
			if got[provider.UserAlice] == got[provider.UserBob] {
				t.Fatal("alice and bob share an exchanged token")
			}

			// Cached: the same user's calls exchange no more and carry
			// their own token, also when the users' calls run at once (one
			// call per user at a time: the quickstart's in-flight limit
			// per credential).
			n := exchanges()
			for range 4 {
				var wg sync.WaitGroup
				for _, u := range users {
					wg.Go(func() {
						if st, b := clientCall(t, via, "ex", u); st != 200 || !strings.Contains(b, "ok from ex") {
							t.Errorf("%s as %s: %d %s", via, u, st, b)
						}
					})
				}
				wg.Wait()
			}
			if d := exchanges() - n; d != 0 {
				t.Errorf("%d exchanges for users with cached tokens", d)
			}
			reqs := ex.requests()[before:]
			if len(reqs) != 2+8 {
				t.Fatalf("upstream got %d requests, want 10", len(reqs))
			}
			for _, r := range reqs {
				if r.hdr.Get("Authorization") != "Bearer "+got[r.user] || r.hdr.Get("Cookie") != "" {
					t.Fatalf("a call of %s carried %q, not its own exchanged token", r.user, r.hdr.Get("Authorization"))
				}
			}

			// A refused exchange: an error naming the upstream, never a
			// forward without (or with a broader) credential.
			st, b := clientCall(t, via, "exbad", provider.UserAlice)
			if st != 200 || !strings.Contains(b, `"isError":true`) || !strings.Contains(b, "credential_refused") || !strings.Contains(b, `\"exbad\"`) {
				t.Fatalf("refused exchange: %d %s", st, b)
			}
			if strings.Contains(b, "not-the-secret") || strings.Contains(b, tokens[provider.UserAlice]["exbad"]) {
				t.Fatalf("the refusal leaks the secret or the token: %s", b)
			}
			if r := bad.requests(); len(r) != 0 {
				t.Fatalf("the upstream of a refused exchange got %d requests", len(r))
			}
		})
	}
}
