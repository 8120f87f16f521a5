package authn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// fakeVerifier maps raw tokens to claims or errors and records audiences.
type fakeVerifier struct {
	tokens    map[string]*auth.Claims
	errs      map[string]error
	audiences []string
}

func (f *fakeVerifier) Verify(_ context.Context, raw, audience string) (*auth.Claims, error) {
	f.audiences = append(f.audiences, audience)
	if err, ok := f.errs[raw]; ok {
		return nil, err
	}
	if c, ok := f.tokens[raw]; ok {
		return c, nil
	}
	return nil, &auth.Error{Reason: auth.ReasonBadSignature}
}

func newTest(t *testing.T) (*Authenticator, *fakeVerifier) {
	t.Helper()
	fv := &fakeVerifier{
		tokens: map[string]*auth.Claims{"good": {Issuer: "https://idp.example", Subject: "alice", Tenant: "acme", ClientID: "agent", Scopes: []string{"a:read", "b:write"}}},
		errs:   map[string]error{"down": &auth.Error{Reason: auth.ReasonUnavailable}, "odd": errors.New("boom")},
	}
	a, err := New(Options{
		Verifier: fv,
		Issuers: []auth.IssuerConfig{
			{Issuer: "https://idp.example"},
			{Issuer: "https://other.example", Audiences: []string{"https://gw.example/t/mcp"}},
		},
		ResourceBaseURL: "https://GW.example:443/",
		Routes:          []Route{{Upstream: "crm", Path: "/mcp", Scopes: []string{"a:read"}}, {Upstream: "tickets", Path: "/t/mcp"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a, fv
}

func req(upstream, query string, kv ...string) *gateway.Request {
	h := mcp.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &gateway.Request{Method: "POST", Path: "/mcp", RawQuery: query, Upstream: upstream, Header: h}
}

func TestAuthenticate(t *testing.T) {
	a, fv := newTest(t)
	ctx := context.Background()
	p, f := a.Authenticate(ctx, req("crm", "", "authorization", "Bearer good"))
	if f != nil {
		t.Fatalf("refused: %+v", f)
	}
	want := policy.Principal{Authenticated: true, Tenant: "acme", Subject: "alice", Rights: []string{"a:read", "b:write"},
		TokenRights: []string{"a:read", "b:write"}, CredentialKind: "oauth", Issuer: "https://idp.example", ClientID: "agent", Connection: ConnectionID("https://idp.example", "alice", "agent", "acme")}
	if got, _ := json.Marshal(p); string(got) != mustJSON(t, want) {
		t.Errorf("principal %s", got)
	}
	if fv.audiences[0] != "https://gw.example/mcp" {
		t.Errorf("verified for %q, want the route's canonical resource URI", fv.audiences[0])
	}
	_, _ = a.Authenticate(ctx, req("tickets", "", "authorization", "Bearer good"))
	if fv.audiences[1] != "https://gw.example/t/mcp" {
		t.Errorf("verified for %q", fv.audiences[1])
	}

	const md = `resource_metadata="https://gw.example/.well-known/oauth-protected-resource/mcp"`
	tests := []struct {
		name   string
		r      *gateway.Request
		status int
		code   string
		www    string
	}{
		{"no header", req("crm", ""), 401, gateway.AuthMissingToken, `Bearer ` + md},
		{"cookie only", req("crm", "", "cookie", "access_token=good"), 401, gateway.AuthMissingToken, `Bearer ` + md},
		{"basic", req("crm", "", "authorization", "Basic eDp5"), 401, gateway.AuthMissingToken, `Bearer ` + md},
		{"two headers", req("crm", "", "authorization", "Bearer good", "authorization", "Bearer good"), 401, gateway.AuthInvalidToken, `Bearer ` + md + `, error="invalid_token", error_description="token is malformed"`},
		{"bad token", req("crm", "", "authorization", "Bearer bad"), 401, gateway.AuthInvalidToken, `Bearer ` + md + `, error="invalid_token", error_description="token signature is invalid"`},
		{"query token", req("crm", "access_token=good", "authorization", "Bearer good"), 401, gateway.AuthInvalidRequest, `Bearer ` + md + `, error="invalid_request", error_description="access tokens are accepted in the Authorization header only"`},
		{"query token escaped", req("crm", "a=1;Access%5FToken=x"), 401, gateway.AuthInvalidRequest, ""},
		{"provider down", req("crm", "", "authorization", "Bearer down"), 503, gateway.AuthUnavailable, ""},
		{"unexpected error fails closed", req("crm", "", "authorization", "Bearer odd"), 503, gateway.AuthUnavailable, ""},
		{"unknown upstream", req("nope", "", "authorization", "Bearer good"), 401, gateway.AuthInvalidToken, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, f := a.Authenticate(ctx, tt.r)
			if p != nil || f == nil {
				t.Fatalf("accepted: %+v", p)
			}
			if f.Status != tt.status || f.Code != tt.code || f.Message == "" {
				t.Errorf("%+v", f)
			}
			if tt.www != "" && f.WWWAuthenticate != tt.www {
				t.Errorf("WWW-Authenticate\n got %s\nwant %s", f.WWWAuthenticate, tt.www)
			}
			if tt.status == 503 && f.WWWAuthenticate != "" {
				t.Errorf("503 with a challenge: %s", f.WWWAuthenticate)
			}
			if strings.Contains(f.Message+f.Fix+f.WWWAuthenticate, "good") {
				t.Errorf("token material in the answer: %+v", f)
			}
		})
	}
	f = a.InsufficientScope(req("crm", ""), []string{"a:read", "c:admin"})
	if f.Status != 403 || f.WWWAuthenticate != `Bearer `+md+`, error="insufficient_scope", scope="a:read c:admin", error_description="token scope does not cover this request"` {
		t.Errorf("%+v", f)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMetadata(t *testing.T) {
	a, _ := newTest(t)
	want := map[string]string{
		"/.well-known/oauth-protected-resource/mcp":   `{"resource":"https://gw.example/mcp","authorization_servers":["https://idp.example"],"scopes_supported":["a:read"],"bearer_methods_supported":["header"]}`,
		"/.well-known/oauth-protected-resource":       `{"resource":"https://gw.example/mcp","authorization_servers":["https://idp.example"],"scopes_supported":["a:read"],"bearer_methods_supported":["header"]}`,
		"/.well-known/oauth-protected-resource/t/mcp": `{"resource":"https://gw.example/t/mcp","authorization_servers":["https://idp.example","https://other.example"],"bearer_methods_supported":["header"]}`,
	}
	for path, doc := range want {
		if got, ok := a.ResourceMetadata(path); !ok || string(got) != doc {
			t.Errorf("%s:\n got %s\nwant %s", path, got, doc)
		}
	}
	for _, path := range []string{"/mcp", "/.well-known/oauth-protected-resource/", "/.well-known/oauth-protected-resource/x", "/.well-known/oauth-protected-resource/mcp/"} {
		if doc, ok := a.ResourceMetadata(path); ok {
			t.Errorf("%s: %s", path, doc)
		}
	}
	// A route no issuer may serve is a configuration mistake.
	_, err := New(Options{Verifier: &fakeVerifier{}, ResourceBaseURL: "https://gw.example",
		Issuers: []auth.IssuerConfig{{Issuer: "https://idp.example", Audiences: []string{"https://gw.example/x"}}},
		Routes:  []Route{{Upstream: "crm", Path: "/mcp"}}})
	if err == nil || !strings.Contains(err.Error(), "no issuer") {
		t.Errorf("err = %v", err)
	}
}

func TestConnectionID(t *testing.T) {
	a := ConnectionID("https://idp", "alice", "agent", "acme")
	if a != ConnectionID("https://idp", "alice", "agent", "acme") || !strings.HasPrefix(a, "oauth_") || len(a) != len("oauth_")+32 {
		t.Errorf("%q", a)
	}
	for _, other := range []string{
		ConnectionID("https://idp", "alice", "agent", "globex"),
		ConnectionID("https://idp", "alice", "agent2", "acme"),
		ConnectionID("https://idp2", "alice", "agent", "acme"),
		ConnectionID("https://idp", "aliceagent", "", "acme"), // no ambiguity by concatenation
	} {
		if other == a {
			t.Errorf("collision: %q", other)
		}
	}
}

func TestQueryHasToken(t *testing.T) {
	for q, want := range map[string]bool{
		"": false, "a=1": false, "access_token=x": true, "a=1&access_token": true, "ACCESS_TOKEN=x": true,
		"a=1;access%5ftoken=x": true, "x=access_token": false, "access_tokens=1": false, "%zz=1&access_token=2": true,
	} {
		if got := queryHasToken(q); got != want {
			t.Errorf("%q: %v", q, got)
		}
	}
}
