package oidctest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

const resource = "https://mcp.example.com/mcp"

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

func wantOAuthError(t *testing.T, err error, code string) {
	t.Helper()
	var oe *oidctest.OAuthError
	if !errors.As(err, &oe) || oe.Code != code {
		t.Fatalf("error = %v, want OAuth error %q", err, code)
	}
}

func TestDiscovery(t *testing.T) {
	p := oidctest.Start(t)
	var oidcDoc, asDoc map[string]any
	getJSON(t, p.Issuer+provider.PathDiscovery, &oidcDoc)
	getJSON(t, p.Issuer+provider.PathASMetadata, &asDoc)
	for name, doc := range map[string]map[string]any{"openid-configuration": oidcDoc, "oauth-authorization-server": asDoc} {
		for key, want := range map[string]any{
			"issuer":                 p.Issuer,
			"jwks_uri":               p.JWKSURI(),
			"token_endpoint":         p.TokenEndpoint(),
			"authorization_endpoint": p.AuthorizationEndpoint(),
			"introspection_endpoint": p.IntrospectionEndpoint(),
		} {
			if doc[key] != want {
				t.Errorf("%s: %s = %v, want %v", name, key, doc[key], want)
			}
		}
		if got := doc["code_challenge_methods_supported"]; !equalJSON(got, []string{"S256"}) {
			t.Errorf("%s: code_challenge_methods_supported = %v", name, got)
		}
		if got := doc["grant_types_supported"]; !equalJSON(got, []string{"authorization_code", "client_credentials", provider.GrantTokenExchange}) {
			t.Errorf("%s: grant_types_supported = %v", name, got)
		}
	}
	// go-oidc, as the gateway uses it, accepts the document.
	op, err := oidc.NewProvider(context.Background(), p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	if op.Endpoint().TokenURL != p.TokenEndpoint() {
		t.Errorf("token URL = %s", op.Endpoint().TokenURL)
	}
	if s := p.Stats(t); s.DiscoveryRequests != 3 {
		t.Errorf("discovery requests = %d, want 3", s.DiscoveryRequests)
	}
}

func equalJSON(got any, want []string) bool {
	list, ok := got.([]any)
	if !ok || len(list) != len(want) {
		return false
	}
	for i := range list {
		if list[i] != want[i] {
			return false
		}
	}
	return true
}

func TestJWKSAndRotation(t *testing.T) {
	p := oidctest.Start(t)
	keys := func() []jose.JSONWebKey {
		var set jose.JSONWebKeySet
		getJSON(t, p.JWKSURI(), &set)
		return set.Keys
	}
	algs := func(ks []jose.JSONWebKey) []string {
		var out []string
		for _, k := range ks {
			if !k.IsPublic() || k.Use != "sig" || k.KeyID == "" {
				t.Errorf("key %s: public=%t use=%q", k.KeyID, k.IsPublic(), k.Use)
			}
			out = append(out, k.Algorithm)
		}
		slices.Sort(out)
		return out
	}
	first := keys()
	if got, want := algs(first), []string{"ES256", "EdDSA", "PS256", "RS256"}; !slices.Equal(got, want) {
		t.Fatalf("algorithms = %v, want %v", got, want)
	}

	res := p.Rotate(t, false)
	if res.Generation != 2 || len(res.Active) != 4 || len(res.Published) != 8 {
		t.Fatalf("rotate = %+v", res)
	}
	if got := keys(); len(got) != 8 {
		t.Fatalf("after rotation with grace: %d keys, want 8", len(got))
	}
	res = p.Rotate(t, true)
	if res.Generation != 3 || len(res.Published) != 4 || !slices.Equal(res.Active, res.Published) {
		t.Fatalf("rotate retire = %+v", res)
	}
	now := keys()
	for _, k := range now {
		for _, old := range first {
			if k.KeyID == old.KeyID {
				t.Errorf("retired key %s still published", k.KeyID)
			}
		}
	}
	if s := p.Stats(t); s.KeyGeneration != 3 || s.JWKSRequests != 3 {
		t.Errorf("stats = %+v", s)
	}
}

// TestClientCredentials checks an access token against RFC 9068.
func TestClientCredentials(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	tr, err := p.ClientCredentials(ctx, provider.ClientGateway, provider.ClientGatewaySecret, []string{"tools:read", "tools:write"}, resource)
	if err != nil {
		t.Fatal(err)
	}
	if tr.TokenType != "Bearer" || tr.ExpiresIn < 290 || tr.ExpiresIn > 300 || tr.Scope != "tools:read tools:write" {
		t.Errorf("token response = %+v", tr)
	}
	jws, err := jose.ParseSignedCompact(tr.AccessToken, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	h := jws.Signatures[0].Header
	if h.ExtraHeaders["typ"] != "at+jwt" {
		t.Errorf("typ = %v, want at+jwt", h.ExtraHeaders["typ"])
	}
	var set jose.JSONWebKeySet
	getJSON(t, p.JWKSURI(), &set)
	keys := set.Key(h.KeyID)
	if len(keys) != 1 {
		t.Fatalf("kid %q not in the JWKS", h.KeyID)
	}
	payload, err := jws.Verify(keys[0])
	if err != nil {
		t.Fatalf("signature: %v", err)
	}
	var c map[string]any
	if err := json.Unmarshal(payload, &c); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"iss": p.Issuer, "sub": provider.ClientGateway, "client_id": provider.ClientGateway,
		"scope": "tools:read tools:write", "tenant": provider.TenantService,
	} {
		if c[k] != want {
			t.Errorf("%s = %v, want %v", k, c[k], want)
		}
	}
	if !equalJSON(c["aud"], []string{resource}) {
		t.Errorf("aud = %v", c["aud"])
	}
	exp, iat, nbf := c["exp"].(float64), c["iat"].(float64), c["nbf"].(float64)
	if exp-iat != 300 || nbf != iat || c["jti"] == "" {
		t.Errorf("exp=%v iat=%v nbf=%v jti=%v", exp, iat, nbf, c["jti"])
	}

	t.Run("wrong secret", func(t *testing.T) {
		_, err := p.ClientCredentials(ctx, provider.ClientGateway, "nope", nil, resource)
		wantOAuthError(t, err, "invalid_client")
	})
	t.Run("public client", func(t *testing.T) {
		_, err := p.ClientCredentials(ctx, provider.ClientPublic, "", nil, resource)
		if err == nil {
			t.Fatal("public client got a client_credentials token")
		}
	})
	t.Run("resource with a fragment", func(t *testing.T) {
		_, err := p.ClientCredentials(ctx, provider.ClientGateway, provider.ClientGatewaySecret, nil, resource+"#x")
		wantOAuthError(t, err, "invalid_target")
	})
	t.Run("two resources", func(t *testing.T) {
		tr, err := p.ClientCredentials(ctx, provider.ClientGateway, provider.ClientGatewaySecret, nil, resource, "https://other.example.com/mcp")
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		parts := strings.Split(tr.AccessToken, ".")
		b, _ := jose.ParseSignedCompact(tr.AccessToken, []jose.SignatureAlgorithm{jose.RS256})
		_ = json.Unmarshal(b.UnsafePayloadWithoutVerification(), &c)
		if len(parts) != 3 || !equalJSON(c["aud"], []string{resource, "https://other.example.com/mcp"}) {
			t.Errorf("aud = %v", c["aud"])
		}
	})
}

func unsafeClaims(t *testing.T, token string) map[string]any {
	t.Helper()
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTokenExchange(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	const upstream = "https://upstream.example.com/mcp"
	userToken := func(user string) string {
		tr, err := p.RunCodeFlow(ctx, oidctest.CodeFlow{
			ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI, LoginHint: user,
			Scopes: []string{"tools:read", "tools:write"}, Resources: []string{resource},
		})
		if err != nil {
			t.Fatal(err)
		}
		return tr.AccessToken
	}
	alice, bob := userToken(provider.UserAlice), userToken(provider.UserBob)

	for _, user := range []string{provider.UserAlice, provider.UserBob} {
		subject := map[string]string{provider.UserAlice: alice, provider.UserBob: bob}[user]
		tr, err := p.TokenExchange(ctx, provider.ClientExchanger, provider.ClientExchangerSecret, oidctest.TokenExchangeRequest{
			SubjectToken: subject, Audiences: []string{"upstream-a"}, Resources: []string{upstream}, Scopes: []string{"tools:read"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if tr.TokenType != "Bearer" || tr.IssuedTokenType != "urn:ietf:params:oauth:token-type:access_token" ||
			tr.ExpiresIn < 290 || tr.Scope != "tools:read" {
			t.Errorf("%s: response = %+v", user, tr)
		}
		c := unsafeClaims(t, tr.AccessToken)
		tenant := map[string]string{provider.UserAlice: provider.TenantAlice, provider.UserBob: provider.TenantBob}[user]
		if c["sub"] != user || c["tenant"] != tenant || c["client_id"] != provider.ClientExchanger ||
			!equalJSON(c["aud"], []string{"upstream-a", upstream}) {
			t.Errorf("%s: claims = %v", user, c)
		}
		if act, _ := c["act"].(map[string]any); act["sub"] != provider.ClientExchanger {
			t.Errorf("%s: act = %v", user, c["act"])
		}
		// The exchanged token is itself an active token of the provider.
		in, err := p.Introspect(ctx, provider.ClientGateway, provider.ClientGatewaySecret, tr.AccessToken)
		if err != nil || in["active"] != true || in["sub"] != user {
			t.Errorf("%s: introspection = %v, %v", user, in, err)
		}
	}

	expired := p.MustClientCredentials(t, provider.ClientExpired, provider.TestSecret, "")
	refusals := []struct {
		name, client, secret string
		req                  oidctest.TokenExchangeRequest
		code                 string
	}{
		{"client without the grant", provider.ClientGateway, provider.ClientGatewaySecret,
			oidctest.TokenExchangeRequest{SubjectToken: alice, Audiences: []string{"a"}}, "unauthorized_client"},
		{"wrong secret", provider.ClientExchanger, "nope",
			oidctest.TokenExchangeRequest{SubjectToken: alice, Audiences: []string{"a"}}, "invalid_client"},
		{"unknown subject token", provider.ClientExchanger, provider.ClientExchangerSecret,
			oidctest.TokenExchangeRequest{SubjectToken: "not-a-token", Audiences: []string{"a"}}, "invalid_grant"},
		{"expired subject token", provider.ClientExchanger, provider.ClientExchangerSecret,
			oidctest.TokenExchangeRequest{SubjectToken: expired, Audiences: []string{"a"}}, "invalid_grant"},
		{"scope beyond the subject token", provider.ClientExchanger, provider.ClientExchangerSecret,
			oidctest.TokenExchangeRequest{SubjectToken: alice, Scopes: []string{"tools:admin"}}, "invalid_scope"},
		{"resource with a fragment", provider.ClientExchanger, provider.ClientExchangerSecret,
			oidctest.TokenExchangeRequest{SubjectToken: alice, Resources: []string{upstream + "#x"}}, "invalid_target"},
		{"refresh token type", provider.ClientExchanger, provider.ClientExchangerSecret,
			oidctest.TokenExchangeRequest{SubjectToken: alice, SubjectTokenType: "urn:ietf:params:oauth:token-type:refresh_token"}, "invalid_request"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			_, err := p.TokenExchange(ctx, tc.client, tc.secret, tc.req)
			wantOAuthError(t, err, tc.code)
		})
	}
	// The client without the grant and the wrong secret are refused
	// before the grant runs.
	if s := p.Stats(t); s.TokenExchanges != int64(2+len(refusals)-2) {
		t.Errorf("token_exchanges = %d, want %d", s.TokenExchanges, 2+len(refusals)-2)
	}
}

func TestConfiguredClients(t *testing.T) {
	cfg := &provider.Config{
		Clients: []provider.Client{
			{ID: "limited", Secret: "s", Scopes: []string{"tools:read"}, Resources: []string{resource}, Tenant: "t1",
				Claims: map[string]any{"plan": "gold"}},
		},
	}
	p := oidctest.Start(t, oidctest.WithConfig(cfg), oidctest.WithArgs("-token-lifetime", "90s"))
	ctx := context.Background()
	tr, err := p.ClientCredentials(ctx, "limited", "s", []string{"tools:read"}, resource)
	if err != nil {
		t.Fatal(err)
	}
	if tr.ExpiresIn < 85 || tr.ExpiresIn > 90 {
		t.Errorf("expires_in = %d, want 90", tr.ExpiresIn)
	}
	jws, _ := jose.ParseSignedCompact(tr.AccessToken, []jose.SignatureAlgorithm{jose.RS256})
	var c map[string]any
	_ = json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c)
	if c["plan"] != "gold" || c["tenant"] != "t1" {
		t.Errorf("claims = %v", c)
	}
	_, err = p.ClientCredentials(ctx, "limited", "s", []string{"tools:admin"}, resource)
	wantOAuthError(t, err, "invalid_scope")
	_, err = p.ClientCredentials(ctx, "limited", "s", nil, "https://elsewhere.example.com/mcp")
	wantOAuthError(t, err, "invalid_target")
}

func TestCodeFlow(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	flow := oidctest.CodeFlow{
		ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI,
		Scopes: []string{"openid", "email", "tools:read"}, Resources: []string{resource},
	}
	tr, err := p.RunCodeFlow(ctx, flow)
	if err != nil {
		t.Fatal(err)
	}
	// The ID token verifies with go-oidc for the client.
	op, err := oidc.NewProvider(ctx, p.Issuer)
	if err != nil {
		t.Fatal(err)
	}
	idt, err := op.Verifier(&oidc.Config{ClientID: provider.ClientPublic}).Verify(ctx, tr.IDToken)
	if err != nil {
		t.Fatalf("ID token: %v", err)
	}
	var info struct {
		Email string `json:"email"`
	}
	_ = idt.Claims(&info)
	if idt.Subject != provider.UserAlice || info.Email != "alice@acme.example" {
		t.Errorf("ID token sub=%s email=%s", idt.Subject, info.Email)
	}
	// userinfo answers for the access token.
	req, _ := http.NewRequest(http.MethodGet, p.Issuer+"/userinfo", nil)
	req.Header.Set("Authorization", "Bearer "+tr.AccessToken)
	var ui map[string]any
	if err := doJSON(req, &ui); err != nil || ui["sub"] != provider.UserAlice {
		t.Errorf("userinfo = %v, %v", ui, err)
	}

	t.Run("wrong verifier", func(t *testing.T) {
		f := flow
		f.CodeVerifier = strings.Repeat("x", 43)
		_, err := p.RunCodeFlow(ctx, f)
		wantOAuthError(t, err, "invalid_grant")
	})
	t.Run("no PKCE", func(t *testing.T) {
		q := url.Values{
			"response_type": {"code"}, "client_id": {provider.ClientPublic},
			"redirect_uri": {provider.RedirectURI}, "scope": {"openid"}, "state": {"s"},
		}
		loc := authorizeRedirect(t, p, q)
		if loc.Query().Get("error") != "invalid_request" || loc.Query().Get("code") != "" {
			t.Errorf("redirect = %s", loc)
		}
	})
	t.Run("plain PKCE", func(t *testing.T) {
		q := url.Values{
			"response_type": {"code"}, "client_id": {provider.ClientPublic},
			"redirect_uri": {provider.RedirectURI}, "scope": {"openid"}, "state": {"s"},
			"code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"plain"},
		}
		loc := authorizeRedirect(t, p, q)
		if loc.Query().Get("error") != "invalid_request" {
			t.Errorf("redirect = %s", loc)
		}
	})
	t.Run("resource not authorized at the token endpoint", func(t *testing.T) {
		f := flow
		f.TokenResources = []string{"https://other.example.com/mcp"}
		_, err := p.RunCodeFlow(ctx, f)
		wantOAuthError(t, err, "invalid_target")
	})
	t.Run("unregistered redirect URI", func(t *testing.T) {
		f := flow
		f.RedirectURI = "https://evil.example.com/callback"
		_, err := p.RunCodeFlow(ctx, f)
		var oe *oidctest.OAuthError
		if !errors.As(err, &oe) || oe.Status == http.StatusFound {
			t.Errorf("error = %v, want a refusal without redirect", err)
		}
	})
	t.Run("unknown login_hint", func(t *testing.T) {
		f := flow
		f.LoginHint = "nobody"
		if _, err := p.RunCodeFlow(ctx, f); err == nil {
			t.Error("unknown user approved")
		}
	})
	t.Run("confidential client with the wrong secret", func(t *testing.T) {
		f := oidctest.CodeFlow{ClientID: provider.ClientAgent, ClientSecret: "wrong", RedirectURI: provider.RedirectURI, Scopes: []string{"openid"}}
		_, err := p.RunCodeFlow(ctx, f)
		wantOAuthError(t, err, "invalid_client")
	})
}

// authorizeRedirect sends an authorization request and returns where the
// provider sends the browser back to the client.
func authorizeRedirect(t *testing.T, p *oidctest.Provider, q url.Values) *url.URL {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(p.AuthorizationEndpoint() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc.String(), provider.RedirectURI) {
		t.Fatalf("authorize: %s, Location %q", resp.Status, resp.Header.Get("Location"))
	}
	return loc
}

func doJSON(req *http.Request, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func TestIntrospectionAndRevocation(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()
	opaque, err := p.ClientCredentials(ctx, provider.ClientOpaque, provider.ClientOpaqueSecret, []string{"tools:read"}, resource)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(opaque.AccessToken, ".") != 0 {
		t.Fatalf("opaque token looks like a JWT: %s", opaque.AccessToken)
	}
	jwt, err := p.ClientCredentials(ctx, provider.ClientGateway, provider.ClientGatewaySecret, nil, resource)
	if err != nil {
		t.Fatal(err)
	}
	expired, err := p.ClientCredentials(ctx, provider.ClientExpired, provider.TestSecret, nil, resource)
	if err != nil {
		t.Fatal(err)
	}
	introspect := func(tok string) map[string]any {
		t.Helper()
		res, err := p.Introspect(ctx, provider.ClientGateway, provider.ClientGatewaySecret, tok)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := introspect(opaque.AccessToken)
	if res["active"] != true || res["sub"] != provider.ClientOpaque || res["scope"] != "tools:read" ||
		res["tenant"] != provider.TenantService || res["iss"] != p.Issuer || !equalJSON(res["aud"], []string{resource}) {
		t.Errorf("opaque: %v", res)
	}
	if res := introspect(jwt.AccessToken); res["active"] != true || res["client_id"] != provider.ClientGateway {
		t.Errorf("jwt: %v", res)
	}
	for name, tok := range map[string]string{"expired": expired.AccessToken, "unknown": "nope", "empty-ish": "x.y.z"} {
		if res := introspect(tok); res["active"] != false || len(res) != 1 {
			t.Errorf("%s: %v, want only active=false", name, res)
		}
	}
	// Revocation by another client is ignored; by the owner, it sticks.
	if err := p.Revoke(ctx, provider.ClientGateway, provider.ClientGatewaySecret, opaque.AccessToken); err != nil {
		t.Fatal(err)
	}
	if res := introspect(opaque.AccessToken); res["active"] != true {
		t.Errorf("revoked by another client: %v", res)
	}
	if err := p.Revoke(ctx, provider.ClientOpaque, provider.ClientOpaqueSecret, opaque.AccessToken); err != nil {
		t.Fatal(err)
	}
	if res := introspect(opaque.AccessToken); res["active"] != false {
		t.Errorf("revoked: %v", res)
	}
	if _, err := p.Introspect(ctx, provider.ClientGateway, "wrong", jwt.AccessToken); err == nil {
		t.Error("introspection with a wrong secret answered")
	}
	if s := p.Stats(t); s.IntrospectionRequests != 8 || s.TokensIssued != 3 {
		t.Errorf("stats = %+v", s)
	}
}

func TestStop(t *testing.T) {
	p := oidctest.Start(t)
	p.Stop()
	p.Stop()
	c := &http.Client{Timeout: time.Second}
	if _, err := c.Get(p.JWKSURI()); err == nil {
		t.Error("provider still answers after Stop")
	}
}
