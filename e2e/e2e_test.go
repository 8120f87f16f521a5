// Package e2e runs the mcpgate binary as a user would: `mcpgate demo`, the
// official MCP Go SDK client through it, /metrics checked with promtool.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
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
	// Built the way the Dockerfile builds the image: static, no cgo,
	// without gRPC's x/net/trace (TestMethodDeadCode).
	build := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", bin, "github.com/mcpgate/mcpgate/cmd/mcpgate")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var readyLine = regexp.MustCompile(`^mcpgate ready proxy=(\S+) admin=(\S+) extproc=(\S+)$`)

// Lines `mcpgate demo` prints after its ready line.
var (
	demoTokenLine   = regexp.MustCompile(`^demo token: tenant=(\S+) subject=(\S+) token=(\S+)$`)
	demoAdminLine   = regexp.MustCompile(`^demo admin token: token=(\S+)$`)
	demoRightsLine  = regexp.MustCompile(`^demo rights file: path=(.+)$`)
	demoUpstreamURL = regexp.MustCompile(`^\s*demo upstream \(direct\):\s+(\S+)`)
)

// demoRun is a running `mcpgate demo` and what it printed.
type demoRun struct {
	Endpoint   string            // the MCP endpoint through mcpgate (proxy)
	Admin      string            // the admin listener's base URL
	ExtProc    string            // the ext_proc listener ("off" when not enabled)
	Upstream   string            // the demo upstream's MCP endpoint (direct)
	Tokens     map[string]string // subject (alice, gina) → gateway token
	Tenants    map[string]string // subject → tenant
	AdminToken string            // the platform-admin token
	RightsFile string            // the live rights file
	Banner     []string          // the lines printed up to the upstream's
}

// startDemo runs `mcpgate demo` on free ports (plus args) and reads its
// ready line and banner: the endpoints, the demo tokens, the admin token
// and the rights file. Every wait is bounded: a line that does not come
// fails the test after 30s instead of blocking it.
func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	return startDemoIn(t, "", args...)
}

// startDemoIn is startDemo with dir as the working directory ("" = the
// test's).
func startDemoIn(t *testing.T, dir string, args ...string) *demoRun {
	t.Helper()
	args = append([]string{"demo", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--upstream-listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcpgate demo stderr:\n%s", logs.String())
		}
	})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Error("mcpgate did not stop within 15s of SIGINT")
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	d := &demoRun{Tokens: map[string]string{}, Tenants: map[string]string{}}
	complete := func() bool {
		return d.Endpoint != "" && d.Upstream != "" && d.AdminToken != "" && d.RightsFile != "" && len(d.Tokens) == 2
	}
	// Whatever happens, the rest of the output is read (the process must
	// never block on a full pipe).
	defer func() {
		go func() {
			for range lines {
			}
		}()
	}()
	deadline := time.After(30 * time.Second)
	for !complete() {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("mcpgate demo stopped printing before its banner was complete: %+v", d)
			}
			d.Banner = append(d.Banner, line)
			if m := readyLine.FindStringSubmatch(line); m != nil {
				d.Endpoint, d.Admin, d.ExtProc = m[1]+"/mcp", m[2], m[3]
			} else if m := demoTokenLine.FindStringSubmatch(line); m != nil {
				d.Tokens[m[2]], d.Tenants[m[2]] = m[3], m[1]
			} else if m := demoAdminLine.FindStringSubmatch(line); m != nil {
				d.AdminToken = m[1]
			} else if m := demoRightsLine.FindStringSubmatch(line); m != nil {
				d.RightsFile = m[1]
			} else if m := demoUpstreamURL.FindStringSubmatch(line); m != nil {
				d.Upstream = m[1]
			}
		case <-deadline:
			t.Fatalf("mcpgate demo: banner incomplete after 30s: %+v", d)
		}
	}
	return d
}

// syncBuffer collects a process's output for the test log.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// connectSDK connects the official MCP Go SDK client to endpoint with a
// bearer token (none if token is ""), for a protocol revision ("" = the
// SDK's default).
func connectSDK(t *testing.T, endpoint, token, version string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "e2e", Version: "1"}, nil)
	tr := &sdk.StreamableClientTransport{Endpoint: endpoint, MaxRetries: -1}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearerTransport{token}}
	}
	var opts *sdk.ClientSessionOptions
	if version != "" {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: version}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, opts)
	if err != nil {
		t.Fatalf("connect %s (%s): %v", endpoint, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolNames(t *testing.T, cs *sdk.ClientSession) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

// TestDemoQuickstart: the README's first command works for a real client
// with the demo's printed tokens: alice (acme) sees and calls every tool,
// gina (globex) sees only the tools her rights allow, a call without a
// token is refused, and /metrics, /healthz and /readyz answer.
func TestDemoQuickstart(t *testing.T) {
	d := startDemo(t)
	if d.Tenants["alice"] != "acme" || d.Tenants["gina"] != "globex" {
		t.Fatalf("demo tokens: %+v", d.Tenants)
	}
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		cs := connectSDK(t, d.Endpoint, d.Tokens["alice"], version)
		// The demo's 9 tools and the gateway's confirm_action,
		// reject_action and list_recent_changes.
		if names := toolNames(t, cs); len(names) != 12 {
			t.Fatalf("%s: alice lists %d tools, want 12: %q", version, len(names), names)
		}
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: find_customers: %v %+v", version, err, res)
		}
		_ = cs.Close()

		gina := connectSDK(t, d.Endpoint, d.Tokens["gina"], version)
		want := []string{"create_booking", "find_customers", "get_booking", "list_recent_changes", "list_technicians", "update_booking"}
		if names := toolNames(t, gina); !slices.Equal(names, want) {
			t.Errorf("%s: gina lists %q, want %q", version, names, want)
		}
		_ = gina.Close()
	}
	// Without a token: 401 with the plain Bearer challenge. The demo takes
	// gateway tokens only (no OAuth issuer), so no protected resource
	// metadata is named or served: a client is not sent into an OAuth
	// flow no authorization server could complete.
	proxyBase := strings.TrimSuffix(d.Endpoint, "/mcp")
	a := send(t, "POST", d.Endpoint, bearer("", "tools/list", ""), listBody)
	if a.Status != 401 || a.WWWAuthenticate != `Bearer` || !strings.Contains(a.Body, `"missing_token"`) || !strings.Contains(a.Body, "MCP token") {
		t.Errorf("tools/list without a token: %+v", a)
	}
	if md := send(t, "GET", proxyBase+"/.well-known/oauth-protected-resource/mcp", nil, nil); md.Status != 404 {
		t.Errorf("protected resource metadata without an OAuth issuer: %+v", md)
	}
	// The demo upstream, reached directly, refuses a call without
	// mcpgate's assertion, whatever token comes with it.
	if a := send(t, "POST", d.Upstream, bearer(d.Tokens["alice"], "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`)); a.Status != 401 || !strings.Contains(a.Body, `"reason":"missing"`) {
		t.Errorf("the demo upstream directly: %+v", a)
	}
	// The printed rights file changes rights live: without customers:read
	// alice's next find_customers is a tool error.
	live := defaultLiveRights()
	live["acme"]["alice"] = livePerson{true, slices.DeleteFunc(slices.Clone(allDemoRights), func(r string) bool { return r == "customers:read" })}
	if err := os.WriteFile(d.RightsFile, []byte(live.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	if a := send(t, "POST", d.Endpoint, bearer(d.Tokens["alice"], "tools/call", "find_customers"), call("3", "find_customers", `{"query":"a"}`)); a.Status != 200 || !strings.Contains(a.Body, `"code":"missing_rights"`) {
		t.Errorf("find_customers after customers:read was removed in %s: %+v", d.RightsFile, a)
	}
	metrics := scrape(t, d.Admin)
	for _, series := range []string{
		`mcpgate_requests_total{decision="allow",mcp_method="tools/call",transport="proxy"}`,
		`mcpgate_requests_total{decision="allow",mcp_method="tools/list",transport="proxy"}`,
		`mcpgate_requests_total{decision="unauthenticated",mcp_method="tools/list",transport="proxy"}`,
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
		resp, err := http.Get(d.Admin + path)
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
	d := startDemo(t)
	cs := connectSDK(t, d.Endpoint, d.Tokens["alice"], "")
	if names := toolNames(t, cs); len(names) != 12 {
		t.Fatalf("alice lists %q", names)
	}
	if res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "a"}}); err != nil || res.IsError {
		t.Fatalf("find_customers: %v %+v", err, res)
	}
	_ = cs.Close()
	// Refusals too, so their series are in the exposition checked.
	_ = send(t, "POST", d.Endpoint, bearer("", "tools/list", ""), listBody)
	metrics := scrape(t, d.Admin)
	if !strings.Contains(metrics, `decision="allow",mcp_method="tools/list"`) || !strings.Contains(metrics, `decision="unauthenticated"`) {
		t.Fatalf("the exposition lacks the requests made:\n%s", metrics)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(metrics)
	out, err := cmd.CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
