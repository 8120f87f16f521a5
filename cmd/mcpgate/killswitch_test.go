package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/killswitch"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

const cliAcmeAdminToken = "cli-test-acme-admin-token"

// switchServer runs the real admin API with the kill switch (a watcher
// over a bbolt store) and two static tokens: a platform admin and acme's
// tenant admin.
func switchServer(t *testing.T) (*httptest.Server, *killswitch.Watcher) {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "mcpgate.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	api, err := admin.New(admin.Options{Audit: st, Auditor: store.NewAuditor(st, nil), StaticTokens: []admin.StaticToken{
		{Name: "bootstrap", SHA256: sha256.Sum256([]byte(cliPlatformToken)), Role: tokens.RolePlatformAdmin},
		{Name: "acme-ops", SHA256: sha256.Sum256([]byte(cliAcmeAdminToken)), Role: tokens.RoleTenantAdmin, Tenant: "acme"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	api.SetKillSwitch(w)
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, w
}

func TestKillSwitchCLI(t *testing.T) {
	srv, w := switchServer(t)
	t.Setenv(envAdminURL, "")
	t.Setenv(envAdminToken, "")
	ctx := context.Background()
	cli := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, args, &out, &errOut)
		return out.String(), errOut.String(), err
	}
	platform := []string{"--admin", srv.URL, "--token", cliPlatformToken}

	// on needs a reason: refused before any call.
	if _, errOut, err := cli(append([]string{"killswitch", "on"}, platform...)...); !errors.Is(err, errUsage) || !strings.Contains(errOut, "needs --reason") {
		t.Errorf("on without --reason: %v %q", err, errOut)
	}
	out, errOut, err := cli(append([]string{"killswitch", "on", "--reason", "incident 42"}, platform...)...)
	if err != nil || !strings.HasPrefix(out, "kill switch ON: MCP requests of every tenant are refused (503)") ||
		!strings.Contains(out, "set by bootstrap at ") || !strings.Contains(out, "reason: incident 42\n") {
		t.Fatalf("on: %v\n%s%s", err, out, errOut)
	}
	if on, _ := w.Global(); !on {
		t.Fatal("the global switch is not on")
	}

	// The tenant admin: own tenant yes, global and other tenants no; the
	// API's refusal is printed with its fix and exits non-zero.
	acme := []string{"--admin", srv.URL, "--token", cliAcmeAdminToken}
	if out, errOut, err := cli(append([]string{"killswitch", "on", "--tenant", "acme", "--reason", "bad deploy"}, acme...)...); err != nil ||
		!strings.HasPrefix(out, "kill switch ON: MCP requests of tenant acme are refused") {
		t.Errorf("tenant admin on: %v\n%s%s", err, out, errOut)
	}
	_, _, err = cli(append([]string{"killswitch", "off"}, acme...)...)
	if err == nil || !strings.Contains(err.Error(), "(403 global_switch_forbidden)") || !strings.Contains(err.Error(), "fix: ") {
		t.Errorf("tenant admin, global off: %v", err)
	}
	if _, _, err := cli(append([]string{"killswitch", "on", "--tenant", "globex", "--reason", "x"}, acme...)...); err == nil || !strings.Contains(err.Error(), "other_tenant") {
		t.Errorf("tenant admin, other tenant: %v", err)
	}

	// status, with the URL and token from the environment.
	t.Setenv(envAdminURL, srv.URL)
	t.Setenv(envAdminToken, cliPlatformToken)
	out, errOut, err = cli("killswitch", "status")
	if err != nil || !regexp.MustCompile(`(?m)^global\s+ON\s+\S+Z\s+bootstrap\s+incident 42$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^tenant acme\s+ON\s+\S+Z\s+acme-ops\s+bad deploy$`).MatchString(out) {
		t.Errorf("status:\n%s%s%v", out, errOut, err)
	}
	out, _, err = cli("killswitch", "status", "--json")
	if err != nil || !strings.HasPrefix(out, `{"switches":[{"tenant":"","on":true,"reason":"incident 42"`) {
		t.Errorf("status --json: %v %s", err, out)
	}

	// off: no reason needed.
	out, errOut, err = cli("killswitch", "off")
	if err != nil || !strings.HasPrefix(out, "kill switch OFF: MCP requests of every tenant go through again") {
		t.Errorf("off: %v\n%s%s", err, out, errOut)
	}
	if on, _ := w.Global(); on {
		t.Error("the global switch is still on")
	}
	out, _, _ = cli("killswitch", "status")
	if !regexp.MustCompile(`(?m)^global\s+off\s`).MatchString(out) {
		t.Errorf("status after off:\n%s", out)
	}

	// Usage errors.
	for _, args := range [][]string{{"killswitch"}, {"killswitch", "pause"}, {"killswitch", "status", "extra"}} {
		if _, _, err := cli(args...); !errors.Is(err, errUsage) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	if out, _, err := cli("killswitch", "help"); err != nil || !strings.Contains(out, "mcpgate killswitch on [--tenant T] --reason R") {
		t.Errorf("help: %v %s", err, out)
	}
}
