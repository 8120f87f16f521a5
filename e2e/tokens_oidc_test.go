package e2e

import (
	"context"
	"crypto/sha256"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// cliRights is an in-memory rights source for the CLI tests.
type cliRights map[[2]string]rights.Live

func (m cliRights) Lookup(_ context.Context, tenant, subject string) (rights.Live, error) {
	l := m[[2]string{tenant, subject}]
	l.Rights = slices.Clone(l.Rights)
	return l, nil
}

// TestTokensCLIPersonOIDC: a person creates their own token with the
// `mcpgate tokens` CLI, logged in with an access token from a real OpenID
// provider and the admin URL and token from the environment. They see
// only their own tokens and cannot create one for someone else.
func TestTokensCLIPersonOIDC(t *testing.T) {
	const (
		platformToken = "cli-test-platform-admin-token"
		audience      = "https://gw.example.com/admin"
	)
	cfg := provider.DefaultConfig()
	cfg.Clients = append(cfg.Clients, provider.Client{ID: "alice-cli", Secret: "s", Subject: "alice", Tenant: "acme"})
	p := oidctest.Start(t, oidctest.WithConfig(cfg))
	v, err := auth.NewVerifier(context.Background(), []auth.IssuerConfig{{Issuer: p.Issuer, TenantClaim: "tenant"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "mcpgate.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	src := cliRights{
		{"acme", "alice"}: {Active: true, Rights: []string{"tickets:read", "tickets:write"}},
		{"acme", "carol"}: {Active: true, Rights: []string{"tickets:read"}},
	}
	svc, err := tokens.New(tokens.Options{Store: st, Rights: src, Auditor: store.NewAuditor(st, nil)})
	if err != nil {
		t.Fatal(err)
	}
	api, err := admin.New(admin.Options{
		Tokens: svc, Audit: st, Verifier: v, Audience: audience,
		StaticTokens: []admin.StaticToken{{Name: "bootstrap", SHA256: sha256.Sum256([]byte(platformToken)), Role: tokens.RolePlatformAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	// Someone else's token in the tenant, created by the platform admin.
	out, errOut, err := runCLI(t, nil, "tokens", "create", "--tenant", "acme", "--subject", "carol", "--name", "ci bot",
		"--rights", "tickets:read", "--admin", srv.URL, "--token", platformToken)
	m := cliID.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("create for carol: %v\n%s%s", err, out, errOut)
	}
	carolID := m[1]

	env := []string{"MCPGATE_ADMIN_URL=" + srv.URL, "MCPGATE_ADMIN_TOKEN=" + p.MustClientCredentials(t, "alice-cli", "s", audience)}
	out, errOut, err = runCLI(t, env, "tokens", "create")
	if err != nil {
		t.Fatalf("person create: %v\n%s", err, errOut)
	}
	if cliToken.FindStringSubmatch(out) == nil || !strings.Contains(out, "creator: alice") ||
		!strings.Contains(out, "rights: tickets:read,tickets:write") {
		t.Errorf("person create output:\n%s", out)
	}
	out, errOut, err = runCLI(t, env, "tokens", "list")
	if err != nil {
		t.Fatalf("person list: %v\n%s", err, errOut)
	}
	if strings.Contains(out, carolID) || strings.Count(out, "\n") != 2 {
		t.Errorf("a person sees others' tokens or not exactly their one:\n%s", out)
	}
	out, errOut, err = runCLI(t, env, "tokens", "create", "--subject", "carol")
	if err == nil || !strings.Contains(errOut, "only for themselves") || !strings.Contains(errOut, "fix:") || out != "" {
		t.Errorf("person creating for another: %v\nstdout: %q\nstderr: %s", err, out, errOut)
	}
}
