package auth_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// TestAuthorizationCodeFlow runs what an MCP client does: the authorization
// code flow with PKCE and an RFC 8707 resource, step by step with an
// http.Client, then presents the access token to the verifier.
func TestAuthorizationCodeFlow(t *testing.T) {
	p := oidctest.Start(t)
	v := verifierFor(t, p, nil)
	ctx := context.Background()

	// 1. Authorization request; the provider logs the test user in and
	//    approves without a page, then redirects to the client with a code.
	verifier, challenge := oidctest.NewPKCE()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {provider.ClientPublic},
		"redirect_uri":          {provider.RedirectURI},
		"scope":                 {"openid tools:read"},
		"state":                 {"st-123"},
		"code_challenge":        {challenge},
		"code_challenge_method": {"S256"},
		"resource":              {route},
	}
	var hops []string
	browser := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		hops = append(hops, req.URL.Path)
		if strings.HasPrefix(req.URL.String(), provider.RedirectURI) {
			return http.ErrUseLastResponse // the client's redirect URI: stop here
		}
		return nil
	}}
	resp, err := browser.Get(p.AuthorizationEndpoint() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: status %d after %v", resp.StatusCode, hops)
	}
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if back.Query().Get("state") != "st-123" || back.Query().Get("code") == "" {
		t.Fatalf("redirect to the client: %s", back)
	}
	if !slices.Equal(hops, []string{"/login", "/authorize/callback", "/callback"}) {
		t.Errorf("redirect hops = %v", hops)
	}

	// 2. Token request with the PKCE verifier.
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {back.Query().Get("code")},
		"redirect_uri":  {provider.RedirectURI},
		"code_verifier": {verifier},
		"client_id":     {provider.ClientPublic},
	}
	resp, err = http.PostForm(p.TokenEndpoint(), form)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token: %d %s", resp.StatusCode, body)
	}
	var tr oidctest.TokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatal(err)
	}
	if tr.TokenType != "Bearer" || tr.IDToken == "" || tr.ExpiresIn <= 0 {
		t.Errorf("token response = %+v", tr)
	}

	// 3. The gateway verifies the access token for the route.
	c, err := v.Verify(ctx, tr.AccessToken, route)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if c.Subject != provider.UserAlice || c.Tenant != provider.TenantAlice || c.ClientID != provider.ClientPublic ||
		!slices.Equal(c.Scopes, []string{"openid", "tools:read"}) {
		t.Errorf("claims = %+v", c)
	}
	if roles, _ := payloadOf(t, tr.AccessToken)["roles"].([]any); len(roles) != 1 || roles[0] != "admin" {
		t.Errorf("roles claim = %v", roles)
	}

	// 4. The code is single use.
	resp, err = http.PostForm(p.TokenEndpoint(), form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("code reuse: status %d, want 400", resp.StatusCode)
	}

	// Another configured user, picked with login_hint, and another route.
	tr2, err := p.RunCodeFlow(ctx, oidctest.CodeFlow{
		ClientID: provider.ClientAgent, ClientSecret: provider.ClientAgentSecret,
		RedirectURI: provider.RedirectURI, Scopes: []string{"tools:read"},
		Resources: []string{route, otherRoute}, TokenResources: []string{otherRoute},
		LoginHint: provider.UserBob,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err = v.Verify(ctx, tr2.AccessToken, otherRoute)
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != provider.UserBob || c.Tenant != provider.TenantBob || c.ClientID != provider.ClientAgent {
		t.Errorf("claims = %+v", c)
	}
	_, err = v.Verify(ctx, tr2.AccessToken, route) // down-scoped at the token endpoint
	wantReason(t, err, auth.ReasonWrongAudience, auth.ErrInvalidToken)
}
