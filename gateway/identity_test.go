package gateway_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// recordingAsserter signs nothing: it returns a value naming what it was
// asked, so the test sees the principal, upstream and client it got. The
// real signer (package assertion) is tested on its own and end to end.
type recordingAsserter struct {
	err error
}

func (a *recordingAsserter) Assert(p *policy.Principal, upstream, client string) (string, error) {
	if a.err != nil {
		return "", a.err
	}
	return p.Connection + "|" + p.Tenant + "|" + upstream + "|" + client, nil
}

// identityOpts are the identity tests' pipeline: benchDecls, fakeAuth,
// then the fields o sets.
func identityOpts(o gateway.Options) []gatewaytest.Option {
	return []gatewaytest.Option{gatewaytest.WithDecls(benchDecls), gatewaytest.WithAuth(&fakeAuth{}), gatewaytest.With(o)}
}

var callHeaders = func(tool string) []string {
	return []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool}
}

const clientMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"agent-x","version":"1"}}`

func TestAssertionForwarded(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}, StripHeaders: []string{"x-tenant"}})...)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + clientMeta + `}}`
	_, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", body,
		append(callHeaders("get_booking"), gateway.AssertionHeader, "forged", "x-tenant", "acme")...))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if got := v.SetHeader.Get(gateway.AssertionHeader); got != "oauth_x|acme|demo|agent-x" {
		t.Errorf("assertion = %q", got)
	}
	for _, h := range []string{gateway.AssertionHeader, "authorization", "cookie", "x-tenant"} {
		if !slices.Contains(v.RemoveHeader, h) {
			t.Errorf("%s not removed: %v", h, v.RemoveHeader)
		}
	}
}

func TestClientAssertionStrippedWithoutAuth(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls))
	_, v := p.HandleRequest(context.Background(), authReq("POST", "", callBody("1", "get_booking"),
		append(callHeaders("get_booking"), gateway.AssertionHeader, "forged")...))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if !slices.Contains(v.RemoveHeader, gateway.AssertionHeader) || v.SetHeader.Get(gateway.AssertionHeader) != "" {
		t.Errorf("client assertion not stripped: remove %v set %v", v.RemoveHeader, v.SetHeader)
	}
}

func TestAssertionFailureIs503(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{err: errors.New("no key")}})...)
	x, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
	if v.Local == nil || v.Local.Status != 503 || v.Local.Header.Get("retry-after") == "" {
		t.Fatalf("%+v", v.Local)
	}
	if x.Outcome() != gateway.OutcomeError {
		t.Errorf("outcome %s", x.Outcome())
	}
}

func TestAuthUnavailableHasRetryAfter(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	_, v := p.HandleRequest(context.Background(), authReq("POST", "down", callBody("1", "get_booking"), callHeaders("get_booking")...))
	if v.Local == nil || v.Local.Status != 503 || v.Local.Header.Get("retry-after") != gateway.RetryAfterSeconds {
		t.Fatalf("%+v", v.Local)
	}
}

func TestJWKSServed(t *testing.T) {
	doc := []byte(`{"keys":[]}`)
	p := gatewaytest.New(t, identityOpts(gateway.Options{JWKS: func() []byte { return doc }})...)
	if !p.AnswersPath(gateway.JWKSPath) {
		t.Fatal("AnswersPath false")
	}
	r := &gateway.Request{Transport: gateway.TransportProxy, Method: "GET", Path: gateway.JWKSPath, Header: mcp.Header{}}
	_, v := p.HandleRequest(context.Background(), r)
	if v.Local == nil || v.Local.Status != 200 || string(v.Local.Body) != string(doc) || v.Local.Header.Get("content-type") != "application/jwk-set+json" {
		t.Fatalf("%+v", v.Local)
	}
	r.Method = "POST"
	if _, v := p.HandleRequest(context.Background(), r); v.Local == nil || v.Local.Status != 405 {
		t.Fatalf("POST: %+v", v.Local)
	}
	if gatewaytest.New(t, identityOpts(gateway.Options{})...).AnswersPath(gateway.JWKSPath) {
		t.Error("served without keys")
	}
}

func TestSessionBinding(t *testing.T) {
	ctx := context.Background()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := gatewaytest.New(t, identityOpts(gateway.Options{Sessions: st})...)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	x, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", initialize))
	if v.Local != nil {
		t.Fatalf("initialize refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if _, err := x.ResponseHeaders(200, mcp.Header{"mcp-session-id": {"S-1"}, "content-type": {"application/json"}}); err != nil {
		t.Fatal(err)
	}
	x.Finish()
	b, err := st.Session(ctx, "S-1")
	if err != nil || b.Connection != "oauth_x" || b.Tenant != "acme" || b.Subject != "svc" {
		t.Fatalf("binding %+v %v", b, err)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	older := []string{"mcp-protocol-version", "2025-11-25", "mcp-session-id", "S-1"}

	t.Run("same principal goes on", func(t *testing.T) {
		if _, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", list, older...)); v.Local != nil {
			t.Fatalf("%d %s", v.Local.Status, v.Local.Body)
		}
	})
	t.Run("another principal gets 404", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("POST", "other", list, older...))
		if v.Local == nil || v.Local.Status != 404 {
			t.Fatalf("%+v", v.Local)
		}
	})
	t.Run("another principal's GET stream gets 404", func(t *testing.T) {
		r := authReq("GET", "other", "", older...)
		r.Body = nil
		if _, v := p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 404 {
			t.Fatalf("%+v", v.Local)
		}
	})
	t.Run("unknown session gets 404", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", list, "mcp-protocol-version", "2025-11-25", "mcp-session-id", "S-unknown"))
		if v.Local == nil || v.Local.Status != 404 {
			t.Fatalf("%+v", v.Local)
		}
	})
	t.Run("DELETE by its principal unbinds", func(t *testing.T) {
		r := authReq("DELETE", "good-bookings:read", "", older...)
		r.Body = nil
		x, v := p.HandleRequest(ctx, r)
		if v.Local != nil {
			t.Fatalf("%d %s", v.Local.Status, v.Local.Body)
		}
		if _, err := x.ResponseHeaders(204, mcp.Header{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Session(ctx, "S-1"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("still bound: %v", err)
		}
	})
	t.Run("a session already bound to another principal is not rebound", func(t *testing.T) {
		if err := st.BindSession(ctx, "S-2", store.SessionBinding{Connection: "tok_y", Tenant: "globex", Subject: "mallory"}, 3600e9); err != nil {
			t.Fatal(err)
		}
		x, v := p.HandleRequest(ctx, authReq("POST", "good-bookings:read", initialize))
		if v.Local != nil {
			t.Fatal(v.Local.Status)
		}
		if _, err := x.ResponseHeaders(200, mcp.Header{"mcp-session-id": {"S-2"}, "content-type": {"application/json"}}); !errors.Is(err, gateway.ErrUpstreamResponse) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestAuditOfToolCalls(t *testing.T) {
	ctx := context.Background()
	var log gatewaytest.Audits
	p := gatewaytest.New(t, identityOpts(gateway.Options{Audit: log.Record})...)
	body := func(tool string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"notes":"secret argument"},` + clientMeta + `}}`
	}
	// A read: not audited. A write: audited as allowed. A refused write
	// (no right): audited as denied.
	p.HandleRequest(ctx, authReq("POST", "good-bookings:read", body("get_booking"), callHeaders("get_booking")...))
	p.HandleRequest(ctx, authReq("POST", "good-bookings:write", body("create_booking"), callHeaders("create_booking")...))
	p.HandleRequest(ctx, authReq("POST", "other", body("create_booking"), callHeaders("create_booking")...))
	recs := log.Records()
	if len(recs) != 2 {
		t.Fatalf("records: %+v", recs)
	}
	ok, denied := recs[0], recs[1]
	if ok.Outcome != gateway.AuditAllowed || ok.Action != "create_booking" || ok.Connection != "oauth_x" || ok.Client != "agent-x" ||
		ok.Channel != store.ChannelMCP || ok.DecisionID == "" || ok.PublicIDs["effect"] != policy.EffectSilentWrite {
		t.Errorf("allowed record %+v", ok)
	}
	if denied.Outcome != gateway.AuditDenied || denied.Connection != "tok_y" || denied.Tenant != "globex" || denied.PublicIDs["reason"] != "missing_rights" {
		t.Errorf("denied record %+v", denied)
	}
	for _, r := range recs {
		for k, v := range r.PublicIDs {
			if v == "secret argument" {
				t.Errorf("argument leaked into %s", k)
			}
		}
	}
}

// TestFilteredListIsPrivate: a tools/list answered for an authenticated
// caller depends on the caller's rights, so under 2026-07-28 it is marked
// cacheScope "private" whatever the upstream said (a shared cache must not
// hand one person's list to another).
func TestFilteredListIsPrivate(t *testing.T) {
	ctx := context.Background()
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + clientMeta + `}}`
	hdr := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"}
	answer := func(p *gateway.Pipeline, token, result string) string {
		t.Helper()
		x, v := p.HandleRequest(ctx, authReq("POST", token, list, hdr...))
		if v.Local != nil {
			t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
		}
		if _, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil {
			t.Fatal(err)
		}
		out, _, err := x.ResponseBody(ctx, []byte(`{"jsonrpc":"2.0","id":1,"result":`+result+`}`))
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	p := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	tools := `[{"name":"get_booking","inputSchema":{"type":"object"}}]`
	for _, tt := range []struct{ result, want string }{
		{`{"tools":` + tools + `,"cacheScope":"public","ttlMs":60000}`, `{"tools":` + tools + `,"cacheScope":"private","ttlMs":60000}`},
		{`{"tools":` + tools + `}`, `{"tools":` + tools + `,"cacheScope":"private"}`},
	} {
		got := answer(p, "good-bookings:read", tt.result)
		if got != `{"jsonrpc":"2.0","id":1,"result":`+tt.want+`}` {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
	// Without authentication the list is everyone's: left as it is.
	anon := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls))
	in := `{"tools":` + tools + `,"cacheScope":"public"}`
	if got := answer(anon, "", in); got != `{"jsonrpc":"2.0","id":1,"result":`+in+`}` {
		t.Errorf("anonymous list changed: %s", got)
	}
}

func TestUnderscoreAliasesStripped(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}, StripHeaders: []string{"x-tenant"}})...)
	_, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"),
		append(callHeaders("get_booking"), "mcpgate_assertion", "forged", "x_tenant", "globex", "x_other", "kept", "cookie_", "c")...))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	for _, h := range []string{"mcpgate_assertion", "x_tenant"} {
		if !slices.Contains(v.RemoveHeader, h) {
			t.Errorf("%s not removed: %v", h, v.RemoveHeader)
		}
	}
	for _, h := range []string{"x_other", "cookie_"} {
		if slices.Contains(v.RemoveHeader, h) {
			t.Errorf("%s removed: %v", h, v.RemoveHeader)
		}
	}
}

func TestTenantInQueryRefused(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{TenantArguments: []string{"account"}})...)
	for q, refused := range map[string]bool{
		"tenant=globex":              true,
		"a=1&Tenant_Id=globex":       true,
		"x=1;org%5Fid=1":             true,
		"work%C5%BFpace_id=1":        true, // U+017F long s
		"ACCOUNT=1":                  true,
		"api-version=2&tenantish=no": false,
		"":                           false,
		// Spellings server frameworks read as the same parameter.
		"tenant[]=globex":        true,
		"tenant[x]=globex":       true,
		"tenant%5B%5D=globex":    true,
		"tenant.id=globex":       true, // qs: tenant.id; PHP: tenant_id
		"org.id=1":               true, // PHP: org_id
		"org+id=1":               true, // PHP: org_id
		"%74enant=globex":        true,
		"%2574enant=globex":      true, // encoded twice
		"tenant%00=globex":       true,
		"tenant%00x=globex":      true,
		"TENANT=globex":          true,
		"%20tenant%09=globex":    true,
		"ten%zzant=1":            false, // a malformed escape stays as it is
		"tenants=1&tenantx[]=1":  false,
		"pretenant=1&x.tenant=1": false,
	} {
		r := authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...)
		r.RawQuery = q
		_, v := p.HandleRequest(context.Background(), r)
		if got := v.Local != nil && v.Local.Status == 400; got != refused {
			t.Errorf("%q: refused=%v, want %v (%+v)", q, got, refused, v.Local)
		}
	}
}

// TestUpstreamRefusingTheAssertion: an upstream's 401 to a request that
// carried mcpgate's assertion is the gateway's configuration problem, not
// the client's credential: the exchange fails (the adapters answer 502).
func TestUpstreamRefusingTheAssertion(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}})...)
	x, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
	if v.Local != nil {
		t.Fatal(v.Local.Status)
	}
	if _, err := x.ResponseHeaders(401, mcp.Header{"content-type": {"application/json"}}); !errors.Is(err, gateway.ErrUpstreamResponse) {
		t.Fatalf("err = %v", err)
	}
	// Without an assertion an upstream's 401 is its own business.
	q := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	x, _ = q.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
	if _, err := x.ResponseHeaders(401, mcp.Header{"content-type": {"application/json"}}); err != nil {
		t.Fatalf("err = %v", err)
	}
}

// TestAuditOnlyForwardedCallsAsAllowed: a write the policy allows but the
// gateway then cannot forward (no assertion could be signed: 503) is not
// recorded as allowed.
func TestAuditOnlyForwardedCallsAsAllowed(t *testing.T) {
	var log gatewaytest.Audits
	p := gatewaytest.New(t, identityOpts(gateway.Options{Audit: log.Record, Asserter: &recordingAsserter{err: errors.New("no key")}})...)
	_, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:write", callBody("1", "create_booking"), callHeaders("create_booking")...))
	if v.Local == nil || v.Local.Status != 503 {
		t.Fatalf("%+v", v.Local)
	}
	if recs := log.Records(); len(recs) != 0 {
		t.Errorf("recorded %+v", recs)
	}
}
