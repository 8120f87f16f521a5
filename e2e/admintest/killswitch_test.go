package admin_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/killswitch"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store"
)

// newSwitchEnv is newEnv with the kill switch on: a real watcher over the
// same bbolt store, the same OIDC provider and static tokens.
func newSwitchEnv(t *testing.T) (*env, *killswitch.Watcher) {
	t.Helper()
	p := oidctest.Start(t, oidctest.WithConfig(providerConfig()))
	v, err := auth.NewVerifier(context.Background(), []auth.IssuerConfig{{Issuer: p.Issuer, TenantClaim: "tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{p: p}
	e.st, e.svc, e.rights = newService(t)
	api, err := admin.New(admin.Options{
		Tokens: e.svc, Audit: e.st, Auditor: store.NewAuditor(e.st, nil), Verifier: v, Audience: adminAudience,
		StaticTokens: []admin.StaticToken{
			{Name: "bootstrap", SHA256: hashOf(staticPlatform), Role: tokens.RolePlatformAdmin},
			{Name: "globex-ops", SHA256: hashOf(staticGlobex), Role: tokens.RoleTenantAdmin, Tenant: "globex"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: e.st})
	if err != nil {
		t.Fatal(err)
	}
	api.SetKillSwitch(w)
	e.srv = httptest.NewServer(api.Handler())
	t.Cleanup(e.srv.Close)
	return e, w
}

func switches(t *testing.T, a answer) []map[string]any {
	t.Helper()
	list, _ := a.body["switches"].([]any)
	var out []map[string]any
	for _, s := range list {
		out = append(out, s.(map[string]any))
	}
	return out
}

func TestKillSwitchAPI(t *testing.T) {
	e, w := newSwitchEnv(t)
	acmeAdmin, alice := e.oidc(t, "acme-admin"), e.oidc(t, "alice")
	put := func(token, body string) answer {
		return e.do(t, req{method: "PUT", path: "/v1/killswitch", token: token, body: body})
	}

	// Nothing set: the global switch in its default state.
	a := e.do(t, req{method: "GET", path: "/v1/killswitch", token: staticPlatform})
	want(t, a, 200, "")
	if got := switches(t, a); len(got) != 1 || got[0]["tenant"] != "" || got[0]["on"] != false || got[0]["set_by"] != nil {
		t.Fatalf("fresh: %s", a.raw)
	}

	// Refusals: authorization, then the body's rules.
	for _, c := range []struct {
		name, token, body string
		status            int
		code              string
	}{
		{"tenant admin, global", acmeAdmin, `{"on":true,"reason":"x"}`, 403, "global_switch_forbidden"},
		{"tenant admin, global (explicit)", acmeAdmin, `{"tenant":"","on":true,"reason":"x"}`, 403, "global_switch_forbidden"},
		{"tenant admin, other tenant", acmeAdmin, `{"tenant":"globex","on":true,"reason":"x"}`, 403, "other_tenant"},
		{"static tenant admin, other tenant", staticGlobex, `{"tenant":"acme","on":true,"reason":"x"}`, 403, "other_tenant"},
		{"person, own tenant", alice, `{"tenant":"acme","on":true,"reason":"x"}`, 403, "forbidden"},
		{"person, global", alice, `{"on":false}`, 403, "forbidden"},
		{"missing reason", staticPlatform, `{"on":true}`, 400, "reason_required"},
		{"blank reason", acmeAdmin, `{"tenant":"acme","on":true,"reason":"  "}`, 400, "reason_required"},
		{"missing on", staticPlatform, `{"reason":"x"}`, 400, "on_required"},
		{"reason with a newline", staticPlatform, `{"on":true,"reason":"a\nb"}`, 400, "invalid_reason"},
		{"reason too long", staticPlatform, `{"on":true,"reason":"` + strings.Repeat("x", store.MaxSwitchReasonLen+1) + `"}`, 400, "invalid_reason"},
		{"unknown member", staticPlatform, `{"on":true,"reason":"x","scope":"all"}`, 400, "unknown_field"},
		{"duplicate member", staticPlatform, `{"on":true,"on":false,"reason":"x"}`, 400, "duplicate_field"},
		{"on as a string", staticPlatform, `{"on":"yes","reason":"x"}`, 400, "wrong_type"},
	} {
		t.Run(c.name, func(t *testing.T) { want(t, put(c.token, c.body), c.status, c.code) })
	}
	want(t, e.do(t, req{method: "POST", path: "/v1/killswitch", token: staticPlatform, body: `{}`}), 405, "method_not_allowed")
	want(t, e.do(t, req{method: "GET", path: "/v1/killswitch?tenant=acme", token: staticPlatform}), 400, "unknown_parameter")
	if on, _ := w.Global(); on {
		t.Fatal("a refused PUT turned the global switch on")
	}

	// A tenant admin stops their tenant; applied at once on this replica.
	a = put(acmeAdmin, `{"tenant":"acme","on":true,"reason":" acme's bad deploy "}`)
	want(t, a, 200, "")
	if a.body["tenant"] != "acme" || a.body["on"] != true || a.body["reason"] != "acme's bad deploy" || a.body["set_by"] != "ada" || a.body["at"] == nil {
		t.Errorf("tenant admin PUT: %s", a.raw)
	}
	if on, s := w.Tenant("acme"); !on || s.Reason != "acme's bad deploy" {
		t.Errorf("acme not on after the PUT: %+v", s)
	}
	// The platform admin stops everything (static token: set_by is its name).
	a = put(staticPlatform, `{"tenant":"","on":true,"reason":"incident 42"}`)
	want(t, a, 200, "")
	if a.body["set_by"] != "bootstrap" {
		t.Errorf("platform PUT: %s", a.raw)
	}
	want(t, put(staticGlobex, `{"tenant":"globex","on":false}`), 200, "")

	// What each caller sees.
	for _, c := range []struct {
		name, token string
		want        []string // tenant:on
	}{
		{"platform admin", staticPlatform, []string{":true", "acme:true", "globex:false"}},
		{"acme admin", acmeAdmin, []string{":true", "acme:true"}},
		{"person of acme", alice, []string{":true", "acme:true"}},
		{"globex admin", staticGlobex, []string{":true", "globex:false"}},
		{"person of globex (never set: default)", e.oidc(t, "bob"), []string{":true", "globex:false"}},
	} {
		a := e.do(t, req{method: "GET", path: "/v1/killswitch", token: c.token})
		want(t, a, 200, "")
		var got []string
		for _, s := range switches(t, a) {
			got = append(got, s["tenant"].(string)+":"+map[bool]string{true: "true", false: "false"}[s["on"].(bool)])
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s sees %v, want %v", c.name, got, c.want)
		}
	}

	// Off again (no reason needed).
	want(t, put(staticPlatform, `{"on":false}`), 200, "")
	if on, _ := w.Global(); on {
		t.Error("global still on")
	}

	// Every PUT is audited, refused ones included; the audit never holds
	// the reason text.
	recs, err := e.st.QueryAudit(t.Context(), store.AuditQuery{Limit: store.MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, r := range recs {
		if !strings.HasPrefix(r.Action, "killswitch.") {
			continue
		}
		if r.Channel != store.ChannelAdmin {
			t.Errorf("record %s: channel %q", r.ID, r.Channel)
		}
		count[r.Action+"/"+r.Outcome+"/"+r.Tenant]++
		for _, v := range r.PublicIDs {
			if strings.Contains(v, "deploy") || strings.Contains(v, "incident") {
				t.Errorf("record %s holds the reason: %v", r.ID, r.PublicIDs)
			}
		}
	}
	for k, n := range map[string]int{
		"killswitch.on/ok/acme":       1,
		"killswitch.on/ok/":           1,
		"killswitch.off/ok/globex":    1,
		"killswitch.off/ok/":          1,
		"killswitch.on/denied/":       2, // tenant admin, global (twice)
		"killswitch.on/denied/globex": 1,
		"killswitch.on/denied/acme":   2, // static globex admin, person
		"killswitch.off/denied/":      1, // person
		"killswitch.on/invalid/":      3, // missing reason, newline, too long
		"killswitch.on/invalid/acme":  1, // blank reason
		"killswitch.off/invalid/":     1, // "on" missing (bodies that do not decode are not audited)
	} {
		if count[k] != n {
			t.Errorf("audit %s: %d records, want %d (all: %v)", k, count[k], n, count)
		}
	}
}

// TestKillSwitchDisabled: without a state store the endpoints say so.
func TestKillSwitchDisabled(t *testing.T) {
	e := newEnv(t)
	a := e.do(t, req{method: "GET", path: "/v1/killswitch", token: staticPlatform})
	want(t, a, 404, "killswitch_disabled")
}
