package authn

import (
	"context"
	"reflect"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

// AuthenticateInto gives the principal Authenticate gives, written over
// whatever pr held (nothing of a stale principal survives), for MCP
// tokens and OAuth tokens alike, and a failure as Authenticate's.
func TestAuthenticateIntoAgreesWithAuthenticate(t *testing.T) {
	ctx := context.Background()
	f := newIdentityFixture(t, nil)
	c := f.mint(t, "acme", "alice", "a:read", "b:write")
	stale := policy.Principal{Authenticated: true, Tenant: "stale", Subject: "stale", Rights: []string{"stale"}, TokenRights: []string{"stale"},
		LiveRights: []string{"stale"}, CredentialKind: "stale", CredentialID: "stale", Connection: "stale", Issuer: "stale", ClientID: "stale", Toolset: "stale"}
	for _, h := range [][]string{
		{"authorization", "Bearer " + c.Secret},
		{"authorization", "Bearer single"},
		{"authorization", "Bearer multi", "x-tenant", "acme"},
		{"authorization", "Bearer multi"},       // 403 tenant_required
		{"authorization", "Bearer mcp_unknown"}, // refused
		{},                                      // no credential
	} {
		want, wantFail := f.a.Authenticate(ctx, req("crm", "", h...))
		pr := stale
		fail := f.a.AuthenticateInto(ctx, req("crm", "", h...), &pr)
		if !reflect.DeepEqual(fail, wantFail) {
			t.Fatalf("%v: failure %+v, Authenticate's %+v", h, fail, wantFail)
		}
		if fail == nil && !reflect.DeepEqual(pr, *want) {
			t.Fatalf("%v:\nAuthenticateInto %+v\nAuthenticate     %+v", h, pr, *want)
		}
	}
}

// BenchmarkAuthenticateIntoGatewayToken is BenchmarkAuthenticateGatewayToken
// into the caller's principal, as the pipeline calls it.
func BenchmarkAuthenticateIntoGatewayToken(b *testing.B) {
	f := newIdentityFixture(b, nil)
	c := f.mint(b, "acme", "alice", "a:read", "b:write")
	r := req("crm", "", "authorization", "Bearer "+c.Secret)
	ctx := context.Background()
	var pr policy.Principal
	b.ReportAllocs()
	for b.Loop() {
		if fail := f.a.AuthenticateInto(ctx, r, &pr); fail != nil {
			b.Fatal(fail)
		}
	}
}
