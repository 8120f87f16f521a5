package e2e

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// runCLI runs the mcpgate binary with args (and extra environment
// variables) and returns its stdout, stderr and error; bounded to 30s.
func runCLI(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

var (
	cliToken = regexp.MustCompile(`(?m)^token: (mcpg_\S+)$`)
	cliID    = regexp.MustCompile(`(?m)^id: (tok_[0-9a-f]{32})$`)
)

// TestDemoTokensCLI: `mcpgate tokens create|list|revoke` against a running
// `mcpgate demo` with the admin token it printed. The minted token works
// at the MCP endpoint (within its rights) and not at the admin API; the
// admin token does not work at the MCP endpoint; a revoked token is 401
// from its next call.
func TestDemoTokensCLI(t *testing.T) {
	d := startDemo(t)
	admin := []string{"--admin", d.Admin, "--token", d.AdminToken}

	out, errOut, err := runCLI(t, nil, append([]string{"tokens", "create", "--tenant", "acme", "--subject", "alice", "--name", "cli", "--rights", "customers:read"}, admin...)...)
	if err != nil {
		t.Fatalf("tokens create: %v\n%s%s", err, out, errOut)
	}
	tm, im := cliToken.FindStringSubmatch(out), cliID.FindStringSubmatch(out)
	if tm == nil || im == nil || !strings.Contains(out, "rights: customers:read\n") {
		t.Fatalf("tokens create printed:\n%s", out)
	}
	minted, id := tm[1], im[1]

	// list, with the admin URL and token from the environment.
	env := []string{"MCPGATE_ADMIN_URL=" + d.Admin, "MCPGATE_ADMIN_TOKEN=" + d.AdminToken}
	out, errOut, err = runCLI(t, env, "tokens", "list", "--tenant", "acme")
	if err != nil || !regexp.MustCompile(id+`\s+acme\s+alice\s+cli\s+customers:read\s+\S+\s+active`).MatchString(out) || strings.Contains(out, minted) {
		t.Fatalf("tokens list: %v\n%s%s", err, out, errOut)
	}

	// The minted token at the MCP endpoint: its rights only.
	a := send(t, "POST", d.Endpoint, bearer(minted, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`))
	if a.Status != 200 || !strings.Contains(a.Body, "C-101") || strings.Contains(a.Body, toolError) {
		t.Errorf("minted token, find_customers: %+v", a)
	}
	a = send(t, "POST", d.Endpoint, bearer(minted, "tools/call", "get_booking"), call("2", "get_booking", `{"booking_id":"B-1001"}`))
	if a.Status != 200 || !strings.Contains(a.Body, toolError) || !strings.Contains(a.Body, `"code":"missing_rights"`) {
		t.Errorf("minted token, get_booking (a right it lacks): %+v", a)
	}
	// ... and not at the admin API, by HTTP or through the CLI.
	req, _ := http.NewRequest("GET", d.Admin+"/v1/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+minted)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("minted token at the admin API: %d", resp.StatusCode)
	}
	if out, errOut, err := runCLI(t, nil, "tokens", "list", "--admin", d.Admin, "--token", minted); err == nil || !strings.Contains(errOut, "mcp_token_not_accepted") {
		t.Errorf("tokens list with an MCP token: %v\n%s%s", err, out, errOut)
	}
	// The demo's own tokens are MCP tokens too.
	if out, errOut, err := runCLI(t, nil, "tokens", "list", "--admin", d.Admin, "--token", d.Tokens["alice"]); err == nil || !strings.Contains(errOut, "(401 ") {
		t.Errorf("tokens list with alice's demo token: %v\n%s%s", err, out, errOut)
	}
	// The admin token at the MCP endpoint.
	if a := send(t, "POST", d.Endpoint, bearer(d.AdminToken, "tools/list", ""), listBody); a.Status != 401 || !strings.Contains(a.Body, `"code":"invalid_token"`) {
		t.Errorf("admin token at the MCP endpoint: %+v", a)
	}

	// revoke (flags after the id), then the token is refused.
	out, errOut, err = runCLI(t, nil, append([]string{"tokens", "revoke", id}, admin...)...)
	if err != nil || !strings.HasPrefix(out, "revoked "+id+" (tenant acme, creator alice) at ") {
		t.Fatalf("tokens revoke: %v\n%s%s", err, out, errOut)
	}
	a = send(t, "POST", d.Endpoint, bearer(minted, "tools/call", "find_customers"), call("3", "find_customers", `{"query":"a"}`))
	if a.Status != 401 || !strings.Contains(a.WWWAuthenticate, `error_description="the MCP token was revoked"`) {
		t.Errorf("revoked token: %+v", a)
	}
	out, errOut, err = runCLI(t, env, "tokens", "list", "--creator", "alice")
	if err != nil || !regexp.MustCompile(id+`\s.*\srevoked\n`).MatchString(out) {
		t.Errorf("tokens list after revoke: %v\n%s%s", err, out, errOut)
	}
	// The demo's tokens were not touched.
	if a := send(t, "POST", d.Endpoint, bearer(d.Tokens["alice"], "tools/call", "find_customers"), call("4", "find_customers", `{"query":"a"}`)); a.Status != 200 {
		t.Errorf("alice's demo token after the revoke: %+v", a)
	}
}
