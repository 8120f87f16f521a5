// Package e2e runs the mcpgate binary as a user would: `mcpgate demo`, the
// official MCP Go SDK client through it, /metrics checked with promtool.
package e2e

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

var bin string

func TestMain(m *testing.M) {
	// Tests start many servers on ephemeral ports; a kept-alive connection
	// from one test could meet another test's server on a reused port.
	http.DefaultTransport.(*http.Transport).DisableKeepAlives = true
	dir, err := os.MkdirTemp("", "mcpgate-e2e")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "mcpgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/mcpgate/mcpgate/cmd/mcpgate").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var readyLine = regexp.MustCompile(`^mcpgate ready proxy=(\S+) admin=(\S+) extproc=(\S+)$`)

// startDemo runs `mcpgate demo` on free ports and waits for its ready line.
func startDemo(t *testing.T) (endpoint, admin string) {
	t.Helper()
	cmd := exec.Command(bin, "demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream-listen", "127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("mcpgate did not stop within 15s of SIGINT")
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatal("mcpgate demo exited before its ready line")
			}
			if m := readyLine.FindStringSubmatch(line); m != nil {
				go func() {
					for range lines {
					}
				}()
				return m[1] + "/mcp", m[2]
			}
		case <-deadline:
			t.Fatal("no ready line within 30s")
		}
	}
}

// TestDemoQuickstart: the README's first command works for a real client.
func TestDemoQuickstart(t *testing.T) {
	endpoint, admin := startDemo(t)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint}, &sdk.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("%s: connect: %v", version, err)
		}
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil || len(tools.Tools) != 9 {
			t.Fatalf("%s: tools/list: %v (%d tools)", version, err, len(tools.Tools))
		}
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: find_customers: %v %+v", version, err, res)
		}
		_ = cs.Close()
	}
	metrics := scrape(t, admin)
	for _, series := range []string{
		`mcpgate_requests_total{decision="allow",mcp_method="tools/call",transport="proxy"}`,
		`mcpgate_requests_total{decision="allow",mcp_method="tools/list",transport="proxy"}`,
		`mcpgate_request_duration_seconds_bucket{mcp_method="tools/call",transport="proxy",le=`,
		`mcpgate_policy_evaluation_duration_seconds_count `,
		`mcpgate_upstream_request_duration_seconds_count{upstream="demo"}`,
		`mcpgate_policy_reloads_total`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(admin + path)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: %v %v", path, err, resp)
		}
		if resp != nil {
			resp.Body.Close()
		}
	}
}

func scrape(t *testing.T, admin string) string {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMetricsPromtool: `promtool check metrics` finds nothing to complain
// about in mcpgate's exposition. promtool comes from Debian's prometheus
// package (.ci/run installs it); MCPGATE_PROMTOOL names it, and when that
// variable is set but empty the test fails instead of skipping.
func TestMetricsPromtool(t *testing.T) {
	promtool, set := os.LookupEnv("MCPGATE_PROMTOOL")
	if !set {
		var err error
		if promtool, err = exec.LookPath("promtool"); err != nil {
			t.Skip("promtool not installed (apt-get install prometheus)")
		}
	}
	if promtool == "" {
		t.Fatal("MCPGATE_PROMTOOL is set but empty: promtool is required")
	}
	endpoint, admin := startDemo(t)
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = cs.ListTools(context.Background(), nil)
	_ = cs.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(scrape(t, admin))
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
