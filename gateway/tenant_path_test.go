package gateway_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// recordingDecider allows everything and keeps the last input.
type recordingDecider struct{ in policy.Input }

func (r *recordingDecider) Decide(_ context.Context, in *policy.Input) (*policy.Decision, error) {
	r.in = *in
	return &policy.Decision{Allow: true}, nil
}

// tenantAuth records the tenant the adapter put in the request.
type tenantAuth struct{ fakeAuth }

func (a *tenantAuth) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	pr, f := a.fakeAuth.Authenticate(ctx, r)
	if pr != nil {
		pr.Tenant = r.Tenant
	}
	return pr, f
}

// TestTenantReachesPolicyInput: the tenant an adapter took from the path
// is the authenticator's to check and the policy's input.transport.tenant;
// an exact route has none.
func TestTenantReachesPolicyInput(t *testing.T) {
	d := &recordingDecider{}
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), gatewaytest.WithDecider(d), gatewaytest.WithAuth(&tenantAuth{}))
	r := authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...)
	r.Path, r.Tenant = "/t/acme/mcp", "acme"
	if _, v := p.HandleRequest(context.Background(), r); v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if tr := d.in.Transport; tr.Tenant != "acme" || tr.Path != "/t/acme/mcp" || d.in.Principal.Tenant != "acme" {
		t.Errorf("transport %+v principal %+v", tr, d.in.Principal)
	}
	r = authReq("POST", "good-bookings:read", callBody("2", "get_booking"), callHeaders("get_booking")...)
	if _, v := p.HandleRequest(context.Background(), r); v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if d.in.Transport.Tenant != "" {
		t.Errorf("exact route: tenant %q", d.in.Transport.Tenant)
	}
}

// TestMetadataLookup: the pipeline serves what the lookup answers, for
// paths it was never told about in advance (tenant routes), and nothing
// else.
func TestMetadataLookup(t *testing.T) {
	var asked []string
	lookup := func(path string) ([]byte, bool) {
		asked = append(asked, path)
		tenant, ok := strings.CutPrefix(path, "/.well-known/oauth-protected-resource/t/")
		if !ok || !strings.HasSuffix(tenant, "/mcp") {
			return nil, false
		}
		return []byte(`{"resource":"https://gw/t/` + strings.TrimSuffix(tenant, "/mcp") + `/mcp"}`), true
	}
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), gatewaytest.WithDecider(&recordingDecider{}), gatewaytest.WithAuth(&fakeAuth{}),
		gatewaytest.With(gateway.Options{ResourceMetadata: lookup}))
	if !p.AnswersPath("/.well-known/oauth-protected-resource/t/acme/mcp") || p.AnswersPath("/t/acme/mcp") {
		t.Error("AnswersPath")
	}
	_, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "GET",
		Path: "/.well-known/oauth-protected-resource/t/globex/mcp", Header: mcp.Header{}})
	if v.Local == nil || v.Local.Status != 200 || string(v.Local.Body) != `{"resource":"https://gw/t/globex/mcp"}` {
		t.Fatalf("%+v", v.Local)
	}
	if len(asked) == 0 {
		t.Error("lookup not asked")
	}
	// Without a lookup nothing is served.
	q := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), gatewaytest.WithDecider(&recordingDecider{}), gatewaytest.WithAuth(&fakeAuth{}))
	if q.AnswersPath("/.well-known/oauth-protected-resource/t/acme/mcp") {
		t.Error("AnswersPath without a lookup")
	}
}

func TestNotFound(t *testing.T) {
	l := gateway.NotFound()
	if l.Status != 404 || l.Header.Get("content-type") != "text/plain; charset=utf-8" || string(l.Body) != "404 page not found\n" {
		t.Errorf("%+v", l)
	}
}
