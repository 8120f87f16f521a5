package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

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

const cliPlatformToken = "cli-test-platform-admin-token"

// adminServer runs the real admin API (bbolt store, token service,
// static admin tokens only) on an httptest server. A person's own token
// through an OIDC login is tested against a real OpenID provider in the
// e2e module (TestTokensCLIPersonOIDC).
func adminServer(t *testing.T) (*httptest.Server, *tokens.Service) {
	t.Helper()
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
		Tokens: svc, Audit: st,
		StaticTokens: []admin.StaticToken{{Name: "bootstrap", SHA256: sha256.Sum256([]byte(cliPlatformToken)), Role: tokens.RolePlatformAdmin}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return srv, svc
}

var secretLine = regexp.MustCompile(`(?m)^token: (mcpg_[A-Za-z0-9_-]{43})$`)

func TestTokensCLI(t *testing.T) {
	srv, svc := adminServer(t)
	t.Setenv(envAdminURL, "")
	t.Setenv(envAdminToken, "")
	ctx := context.Background()
	common := []string{"--admin", srv.URL, "--token", cliPlatformToken}
	tokensCmd := func(args ...string) (string, string, error) {
		return runCmd(append([]string{"tokens"}, args...)...)
	}

	// A platform admin creates a token for a person.
	out, _, err := tokensCmd(append([]string{"create", "--tenant", "acme", "--subject", "carol", "--name", "ci bot",
		"--rights", "tickets:read", "--expires-in", "24h"}, common...)...)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	m := secretLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no token line in:\n%s", out)
	}
	secret := m[1]
	created, err := svc.Verify(ctx, secret)
	if err != nil {
		t.Fatalf("the printed token does not verify: %v", err)
	}
	for _, want := range []string{"id: " + created.ID, "tenant: acme", "creator: carol", "name: ci bot",
		"rights: tickets:read", "only time the token is shown"} {
		if !strings.Contains(out, want) {
			t.Errorf("create output lacks %q:\n%s", want, out)
		}
	}

	// A second token in the tenant, for alice. (A person creating their own
	// token with their OIDC login is TestTokensCLIPersonOIDC in the e2e
	// module, against a real OpenID provider.)
	if _, _, err := tokensCmd(append([]string{"create", "--tenant", "acme", "--subject", "alice",
		"--rights", "tickets:read,tickets:write"}, common...)...); err != nil {
		t.Fatalf("create for alice: %v", err)
	}

	// The list is a table with a header, without secrets.
	out, _, err = tokensCmd(append([]string{"list", "--tenant", "acme"}, common...)...)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+TENANT\s+CREATOR\s+NAME\s+RIGHTS\s+EXPIRES\s+STATUS$`).MatchString(lines[0]) {
		t.Fatalf("list output:\n%s", out)
	}
	if !strings.HasPrefix(lines[1], created.ID) || !strings.Contains(lines[1], "ci bot") || !strings.HasSuffix(lines[1], "active") {
		t.Errorf("row: %q", lines[1])
	}
	// Columns are aligned: every row's CREATOR starts where the header's does.
	col := strings.Index(lines[0], "CREATOR")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("row not aligned with the header:\n%s\n%s", lines[0], l)
		}
	}
	if strings.Contains(out, secret) {
		t.Error("list shows a secret")
	}

	// --json prints the API's answer.
	out, _, err = tokensCmd(append([]string{"list", "--json", "--creator", "carol"}, common...)...)
	if err != nil {
		t.Fatal(err)
	}
	var l admin.TokenList
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Tokens) != 1 || l.Tokens[0].ID != created.ID {
		t.Errorf("list --json: %v\n%s", err, out)
	}

	// Revoke, with the flags after the id.
	out, _, err = tokensCmd(append([]string{"revoke", created.ID}, common...)...)
	if err != nil {
		t.Fatalf("revoke: %v", err)
	}
	if !strings.HasPrefix(out, "revoked "+created.ID+" (tenant acme, creator carol) at ") {
		t.Errorf("revoke output: %q", out)
	}
	if _, err := svc.Verify(ctx, secret); !errors.Is(err, tokens.ErrRevoked) {
		t.Errorf("after revoke, Verify = %v", err)
	}
	out, _, err = tokensCmd(append([]string{"list", "--creator", "carol"}, common...)...)
	if err != nil || !strings.Contains(out, "revoked") {
		t.Errorf("list after revoke: %v\n%s", err, out)
	}

	// Refusals: the API's message and fix, non-zero exit.
	refusals := []struct {
		name string
		args []string
		want []string
	}{
		{"bad admin token", []string{"list", "--admin", srv.URL, "--token", "wrong"},
			[]string{"invalid_token", "fix:"}},
		{"MCP token at the admin API", []string{"list", "--admin", srv.URL, "--token", secret},
			[]string{"only at the MCP endpoint", "fix:"}},
		{"rights not held", append([]string{"create", "--tenant", "acme", "--subject", "carol", "--rights", "tickets:read,tickets:delete"}, common...),
			[]string{`"tickets:delete"`, "403 rights_not_held", "fix:"}},
		{"lifetime not a duration", append([]string{"create", "--tenant", "acme", "--subject", "carol", "--expires-in", "soon"}, common...),
			[]string{"invalid_expiry", "fix:"}},
		{"unknown id", append([]string{"revoke", "tok_0123456789abcdef0123456789abcdef"}, common...),
			[]string{"404 token_not_found"}},
		{"admin API unreachable", []string{"list", "--admin", "http://127.0.0.1:1", "--token", cliPlatformToken},
			[]string{"cannot reach the admin API", "fix:"}},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := tokensCmd(tc.args...)
			if err == nil || errors.Is(err, errUsage) || exitCode(err) == 0 {
				t.Fatalf("err = %v, want a non-zero exit with the API's message", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
			if out != "" {
				t.Errorf("stdout on error: %q", out)
			}
		})
	}

	usage := []struct {
		name string
		args []string
		want string
	}{
		{"no verb", nil, "Usage:"},
		{"unknown verb", []string{"rotate"}, "unknown tokens command"},
		{"no token", []string{"list", "--admin", srv.URL}, "no admin token"},
		{"bad admin URL", []string{"list", "--admin", "gw:9090", "--token", "x"}, "--admin"},
		{"revoke without id", append([]string{"revoke"}, common...), "usage: mcpgate tokens revoke ID"},
		{"revoke with two ids", append([]string{"revoke", "a", "b"}, common...), "usage: mcpgate tokens revoke ID"},
		{"create with an argument", append([]string{"create", "extra"}, common...), "unexpected arguments"},
		{"unknown flag", []string{"list", "--owner", "x"}, "flag provided but not defined"},
	}
	for _, tc := range usage {
		t.Run("usage/"+tc.name, func(t *testing.T) {
			_, errOut, err := tokensCmd(tc.args...)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(errOut, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, errOut)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		out, _, err := tokensCmd("help")
		if err != nil || !strings.Contains(out, "mcpgate tokens create") {
			t.Errorf("help: %v %q", err, out)
		}
		out, _, _ = runCmd("help")
		if !strings.Contains(out, "mcpgate tokens revoke ID") {
			t.Errorf("top-level usage lacks the tokens verbs:\n%s", out)
		}
	})
}
