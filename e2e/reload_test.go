package e2e

import (
	"bufio"
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/poll"
)

const denyAll = `package mcpgate

decision := {"allow": false, "reasons": [{"code": "maintenance", "cause": "Tools are paused for maintenance.", "fix": "Try again later."}]}
`

// TestSIGHUPReload: SIGHUP swaps the policy; a policy that does not compile
// keeps the previous one in force and is counted as a failed reload.
func TestSIGHUPReload(t *testing.T) {
	up := httptest.NewServer(demo.New(demo.Options{}).Handler())
	defer up.Close()
	dir, pol, _ := transparentPolicyDir(t)
	cfg := filepath.Join(dir, "mcpgate.yaml")
	writeFile(t, cfg, "listeners:\n  proxy: {address: 127.0.0.1:0}\n  admin: {address: 127.0.0.1:0}\nupstreams:\n  - name: demo\n    url: "+up.URL+"\npolicy:\n  dirs: [policy]\n  watch: false\n")

	cmd := exec.Command(bin, "serve", "--config", cfg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mcpgate serve stderr:\n%s", logs.String())
		}
	}()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody reads after the ready line
			}
		}
	}()
	var m []string
	select {
	case line, ok := <-lines:
		if m = readyLine.FindStringSubmatch(line); !ok || m == nil {
			t.Fatalf("unexpected first line %q (open %t)", line, ok)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no ready line within 30s")
	}
	endpoint, admin := m[1]+"/mcp", m[2]

	call := func() string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_technicians","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		req, _ := http.NewRequest("POST", endpoint, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("MCP-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", "list_technicians")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return b.String()
	}
	hup := func() {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	if got := call(); !strings.Contains(got, "technicians") || strings.Contains(got, `"isError":true`) {
		t.Fatalf("transparent policy refused: %s", got)
	}
	writeFile(t, filepath.Join(pol, "policy.rego"), denyAll)
	hup()
	poll.Until(t, 10*time.Second, "deny-all policy in force after SIGHUP", func() bool { return strings.Contains(call(), "maintenance") })
	writeFile(t, filepath.Join(pol, "policy.rego"), "package mcpgate\n\ndecision := {\n")
	hup()
	poll.Until(t, 10*time.Second, "failed reload counted", func() bool {
		return strings.Contains(scrape(t, admin), `mcpgate_policy_reloads_total{result="failure"} 1`)
	})
	if got := call(); !strings.Contains(got, "maintenance") {
		t.Fatalf("after a broken reload the previous policy must stay: %s", got)
	}
}

// transparentPolicyDir is a temporary directory holding policy/policy.rego,
// the transparent example policy (rego/examples/transparent), for a
// configuration with policy.dirs: [policy]; src is that policy's text.
func transparentPolicyDir(t *testing.T) (dir, pol, src string) {
	t.Helper()
	dir = t.TempDir()
	pol = filepath.Join(dir, "policy")
	if err := os.Mkdir(pol, 0o755); err != nil {
		t.Fatal(err)
	}
	transparent, err := os.ReadFile("../rego/examples/transparent/transparent.rego")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(pol, "policy.rego"), string(transparent))
	return dir, pol, string(transparent)
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
