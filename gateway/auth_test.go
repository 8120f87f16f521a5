package gateway_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// fakeAuth accepts "Bearer good-<scope>,<scope>" tokens and refuses the rest;
// it counts its calls (the pipeline may call it from several goroutines,
// e.g. list_changed rechecks).
type fakeAuth struct {
	calls atomic.Int64
}

func (f *fakeAuth) Authenticate(_ context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	f.calls.Add(1)
	h := r.Header.Get("authorization")
	switch {
	case h == "":
		return nil, &gateway.AuthFailure{Status: 401, WWWAuthenticate: `Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource/mcp"`, Code: gateway.AuthMissingToken, Message: "No token.", Fix: "Send one."}
	case h == "Bearer other":
		return &policy.Principal{Authenticated: true, Subject: "mallory", Tenant: "globex", CredentialKind: policy.CredentialGatewayToken,
			CredentialID: "tok_y", Connection: "tok_y"}, nil
	case h == "Bearer down":
		return nil, &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable, Message: "Cannot check."}
	case strings.HasPrefix(h, "Bearer acme-"):
		// Another connection of tenant acme (limits per credential vs
		// per tenant).
		c := strings.TrimPrefix(h, "Bearer acme-")
		return &policy.Principal{Authenticated: true, Subject: "svc-" + c, Tenant: "acme", CredentialKind: policy.CredentialGatewayToken,
			CredentialID: c, Connection: c}, nil
	case strings.HasPrefix(h, "Bearer good-"):
		var scopes []string
		if s := strings.TrimPrefix(h, "Bearer good-"); s != "" {
			// Scopes joined with "+": a Bearer token holds no comma.
			scopes = strings.Split(s, "+")
		}
		return &policy.Principal{Authenticated: true, Subject: "svc", Tenant: "acme", Rights: scopes, CredentialKind: policy.CredentialOAuth,
			Issuer: "https://idp", ClientID: "c", Connection: "oauth_x"}, nil
	}
	return nil, &gateway.AuthFailure{Status: 401, WWWAuthenticate: `Bearer resource_metadata="m", error="invalid_token"`, Code: gateway.AuthInvalidToken, Message: "Bad token."}
}

func (f *fakeAuth) InsufficientScope(_ *gateway.Request, scopes []string) *gateway.AuthFailure {
	return &gateway.AuthFailure{Status: 403, WWWAuthenticate: `Bearer error="insufficient_scope", scope="` + strings.Join(scopes, " ") + `"`, Code: gateway.AuthInsufficientScope}
}

var prm = []byte(`{"resource":"https://gw/mcp"}`)

func authReq(method, token, body string, kv ...string) *gateway.Request {
	h := mcp.Header{"content-type": {"application/json"}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	if token != "" {
		h.Set("authorization", "Bearer "+token)
	}
	return &gateway.Request{Transport: gateway.TransportProxy, Method: method, Path: "/mcp", Upstream: "demo", Header: h, Body: []byte(body)}
}

func callBody(id, tool string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` + meta2026 + `}}`
}

func TestAuthentication(t *testing.T) {
	fa := &fakeAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), gatewaytest.WithAuth(fa),
		gatewaytest.With(gateway.Options{ResourceMetadata: gateway.StaticMetadata(map[string][]byte{"/.well-known/oauth-protected-resource/mcp": prm})}))
	ctx := context.Background()
	call := func(tool string) []string {
		return []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool}
	}

	t.Run("missing token: 401 with the challenge and a JSON-RPC error for the id", func(t *testing.T) {
		x, v := p.HandleRequest(ctx, authReq("POST", "", callBody("7", "get_booking"), call("get_booking")...))
		l := v.Local
		if l == nil || l.Status != 401 || l.Header.Get("www-authenticate") != `Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource/mcp"` {
			t.Fatalf("%+v", l)
		}
		var r struct {
			ID    json.RawMessage
			Error struct {
				Code int
				Data struct {
					Error struct{ Code, Cause, Fix string }
				}
			}
		}
		if err := json.Unmarshal(l.Body, &r); err != nil || string(r.ID) != "7" || r.Error.Code != -32030 || r.Error.Data.Error.Code != "missing_token" || r.Error.Data.Error.Fix != "Send one." {
			t.Errorf("body %s (%v)", l.Body, err)
		}
		if x.Outcome() != gateway.OutcomeUnauthenticated || x.Decision() != nil {
			t.Errorf("outcome %q, decision %v: the policy must not run", x.Outcome(), x.Decision())
		}
	})
	t.Run("503 when the token cannot be checked, no challenge", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("POST", "down", callBody("8", "get_booking"), call("get_booking")...))
		if v.Local == nil || v.Local.Status != 503 || v.Local.Header.Get("www-authenticate") != "" || !strings.Contains(string(v.Local.Body), `"auth_unavailable"`) {
			t.Fatalf("%+v", v.Local)
		}
	})
	t.Run("protocol gates run before authentication", func(t *testing.T) {
		before := fa.calls.Load()
		for _, r := range []*gateway.Request{
			authReq("POST", "", `{"jsonrpc":`),                                                  // 400 parse
			authReq("POST", "", callBody("1", "get_booking"), call("create_booking")...),        // 400 header mismatch
			authReq("POST", "", `{"jsonrpc":"2.0","id":1,"method":"x/y"}`),                      // 404
			authReq("POST", "", callBody("1", "get_booking"), "origin", "https://evil.example"), // 403 origin
			authReq("OPTIONS", "", "", "origin", "http://localhost:3000"),                       // preflight
		} {
			_, v := p.HandleRequest(ctx, r)
			if v.Local == nil || v.Local.Status == 401 {
				t.Errorf("%s %s: %+v", r.Method, r.Body, v.Local)
			}
		}
		if n := fa.calls.Load(); n != before {
			t.Errorf("authenticator called %d times", n-before)
		}
	})
	t.Run("notification: 401 without a body", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("POST", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,`+meta2026+`}}`,
			"mcp-protocol-version", "2026-07-28", "mcp-method", "notifications/cancelled"))
		if v.Local == nil || v.Local.Status != 401 || v.Local.Body != nil || v.Local.Header.Get("www-authenticate") == "" {
			t.Fatalf("%+v", v.Local)
		}
	})
	t.Run("GET and client responses are authenticated too", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("GET", "", ""))
		if v.Local == nil || v.Local.Status != 401 || !strings.Contains(string(v.Local.Body), `"id":null`) {
			t.Fatalf("GET: %+v", v.Local)
		}
		_, v = p.HandleRequest(ctx, authReq("POST", "", `{"jsonrpc":"2.0","id":"s1","result":{}}`, "mcp-protocol-version", "2025-11-25"))
		if v.Local == nil || v.Local.Status != 401 || !strings.Contains(string(v.Local.Body), `"id":null`) {
			t.Fatalf("response: %+v", v.Local)
		}
		_, v = p.HandleRequest(ctx, authReq("GET", "good-", ""))
		if v.Local != nil || !slices.Contains(v.RemoveHeader, "authorization") {
			t.Fatalf("GET with a token: %+v", v)
		}
	})
	t.Run("allowed call: the principal reaches the policy, credentials are stripped", func(t *testing.T) {
		r := authReq("POST", "good-bookings:read", callBody("9", "get_booking"), call("get_booking")...)
		r.Header.Set("cookie", "a=b")
		x, v := p.HandleRequest(ctx, r)
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		for _, h := range []string{"authorization", "cookie"} {
			if !slices.Contains(v.RemoveHeader, h) {
				t.Errorf("%s not removed: %q", h, v.RemoveHeader)
			}
		}
		if x.Outcome() != gateway.OutcomeAllow || !x.Decision().Allow {
			t.Errorf("outcome %q", x.Outcome())
		}
	})
	t.Run("token scopes short: 403 insufficient_scope naming the tool's rights", func(t *testing.T) {
		x, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", callBody("10", "create_booking"), call("create_booking")...))
		l := v.Local
		if l == nil || l.Status != 403 || l.Header.Get("www-authenticate") != `Bearer error="insufficient_scope", scope="bookings:write"` {
			t.Fatalf("%+v", l)
		}
		body := string(l.Body)
		for _, s := range []string{`"id":10`, `"code":-32030`, `"code":"insufficient_scope"`, `"rights":["bookings:write"]`, `"decision_id":"` + x.Decision().ID + `"`} {
			if !strings.Contains(body, s) {
				t.Errorf("body lacks %s: %s", s, body)
			}
		}
		if x.Outcome() != gateway.OutcomeDeny {
			t.Errorf("outcome %q", x.Outcome())
		}
	})
	t.Run("refused for more than scopes: a tool error, as before", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("POST", "good-", callBody("11", "drop_tables"), call("drop_tables")...))
		if v.Local == nil || v.Local.Status != 200 {
			t.Fatalf("%+v", v.Local)
		}
		checkToolError(t, v.Local.Body, "tool_not_declared")
	})
	t.Run("protected resource metadata: served without a credential", func(t *testing.T) {
		if !p.AnswersPath("/.well-known/oauth-protected-resource/mcp") || p.AnswersPath("/mcp") {
			t.Error("AnswersPath")
		}
		r := &gateway.Request{Transport: gateway.TransportExtProc, Method: "GET", Path: "/.well-known/oauth-protected-resource/mcp",
			Header: mcp.Header{"origin": {"http://localhost:6274"}}}
		x, v := p.HandleRequest(ctx, r)
		if v.Local == nil || v.Local.Status != 200 || string(v.Local.Body) != string(prm) || v.Local.Header.Get("content-type") != "application/json" ||
			v.Local.Header.Get("access-control-allow-origin") != "http://localhost:6274" {
			t.Fatalf("%+v", v.Local)
		}
		if x.Outcome() != gateway.OutcomeLocal {
			t.Errorf("outcome %q", x.Outcome())
		}
		r.Method = "POST"
		if _, v := p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 405 {
			t.Errorf("POST: %+v", v.Local)
		}
		r.Method = "OPTIONS"
		if _, v := p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 204 {
			t.Errorf("OPTIONS: %+v", v.Local)
		}
		r.Method, r.Header = "GET", mcp.Header{"origin": {"https://evil.example"}}
		if _, v := p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 403 {
			t.Errorf("foreign origin: %+v", v.Local)
		}
	})
}

// Without an Authenticator nothing changes: credentials pass through, no
// metadata is served, the principal is anonymous.
func TestAnonymousUnchanged(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls))
	r := authReq("POST", "whatever", callBody("1", "get_booking"), "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking")
	r.Header.Set("cookie", "a=b")
	_, v := p.HandleRequest(context.Background(), r)
	if v.Local != nil || slices.Contains(v.RemoveHeader, "authorization") || slices.Contains(v.RemoveHeader, "cookie") {
		t.Errorf("%+v", v)
	}
	if p.AnswersPath("/.well-known/oauth-protected-resource/mcp") {
		t.Error("metadata served without authentication")
	}
}
