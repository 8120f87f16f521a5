package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/internal/stdio/stdiotest"
	"github.com/mcpgate/mcpgate/policy"
)

// Stdio upstreams: a stdio MCP server mcpgate starts, served to the
// pipeline (the standalone proxy and Envoy) by its bridge on loopback.

// freeLoopback returns a loopback address with a port free now.
func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// stdioTools are the declarations of the test server's tools.
var stdioTools = map[string]policy.ToolDeclaration{
	"echo":     {Effect: policy.EffectRead},
	"big":      {Effect: policy.EffectRead},
	"progress": {Effect: policy.EffectRead},
	"ask":      {Effect: policy.EffectRead},
	"pid":      {Effect: policy.EffectRead},
	"record":   {Effect: policy.EffectSilentWrite},
}

func startStdioDifferential(t *testing.T, args ...string) *differentialEnv {
	t.Helper()
	records := filepath.Join(t.TempDir(), "records")
	argv := append([]string{stdiotest.Server(t), "-records", records}, args...)
	return startDifferential(t, differentialUpstream{name: "kids", tools: stdioTools, undeclared: policy.UndeclaredConfirm,
		command: &config.Command{Argv: argv, StartTimeout: config.DurationOf(10 * time.Second), StopGrace: config.DurationOf(200 * time.Millisecond)}})
}

// TestStdioUpstreamBothModes: the same calls to a stdio upstream through
// the standalone proxy and through Envoy (the driver) + ext_proc give the
// same answers, for every revision's clients.
func TestStdioUpstreamBothModes(t *testing.T) {
	e := startStdioDifferential(t)
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
	direct, _ := e.both(t, "kids", toHeader(v26("tools/list", "")), list)
	if direct.Status != 200 || !strings.Contains(direct.Body, `"name":"echo"`) {
		t.Errorf("tools/list: %d %.600s", direct.Status, direct.Body)
	}
	direct, _ = e.both(t, "kids", toHeader(v26("tools/call", "echo")), call(`"a"`, "echo", `{"text":"hello"}`))
	if !strings.Contains(direct.Body, `"id":"a"`) || !strings.Contains(direct.Body, `hello`) {
		t.Errorf("echo: %.600s", direct.Body)
	}
	// An undeclared tool of a stdio upstream is guarded like any other
	// (the previews differ in their confirm tokens).
	for _, base := range []string{e.proxy, e.drivers["kids"].URL} {
		s := doHeader(t, "POST", base+"/kids/mcp", toHeader(v26("tools/call", "crash")), call("3", "crash", `{}`))
		if s.Status != 200 || !strings.Contains(s.Body, "confirm_action") {
			t.Errorf("undeclared crash: %d %.600s", s.Status, s.Body)
		}
	}
	for _, version := range []string{"2026-07-28", "2025-11-25", "2025-06-18"} {
		for via, endpoint := range map[string]string{"proxy": e.proxy + "/kids/mcp", "envoy": e.drivers["kids"].URL + "/kids/mcp"} {
			t.Run(version+"/"+via, func(t *testing.T) {
				c := sdk.NewClient(&sdk.Implementation{Name: "stdio-e2e", Version: "1"}, nil)
				cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint}, &sdk.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if got := cs.InitializeResult().ServerInfo; got == nil || got.Name != "mcpgate-stdio-testserver" {
					t.Errorf("server info %+v", got)
				}
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": via}})
				if err != nil || res.IsError {
					t.Fatalf("echo: %v %+v", err, res)
				}
			})
		}
	}
	if st := e.stats["kids"].Stats(); st.StreamsStarted == 0 || st.SpuriousMessages != 0 || st.MessageTimeouts != 0 || st.StreamsFailed != 0 {
		t.Errorf("driver stats %+v", st)
	}
}

// TestStdioUpstreamSessions: through the standalone proxy and through
// Envoy + ext_proc, the bridge's Mcp-Session-Id reaches the client, a
// request of an older revision needs it (400 without), DELETE ends it
// (then 404), and a 2026-07-28 request needs none.
func TestStdioUpstreamSessions(t *testing.T) {
	e := startStdioDifferential(t)
	old := func(sid string) http.Header {
		h := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
		if sid != "" {
			h.Set("Mcp-Session-Id", sid)
		}
		return h
	}
	list := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	for via, endpoint := range map[string]string{"proxy": e.proxy + "/kids/mcp", "envoy": e.drivers["kids"].URL + "/kids/mcp"} {
		t.Run(via, func(t *testing.T) {
			resp, body := roundTrip(t, "POST", endpoint, old(""), []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
			sid := resp.Header.Get("Mcp-Session-Id")
			if resp.StatusCode != 200 || sid == "" {
				t.Fatalf("initialize: %d session %q %.300s", resp.StatusCode, sid, body)
			}
			for _, step := range []struct {
				name, method, sid string
				body              []byte
				status            int
			}{
				{"initialized", "POST", sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), 202},
				{"on the session", "POST", sid, list, 200},
				{"without a session", "POST", "", list, 400},
				{"unknown session", "POST", "no-such-session", list, 404},
				{"DELETE", "DELETE", sid, nil, 204},
				{"after DELETE", "POST", sid, list, 404},
			} {
				if resp, body := roundTrip(t, step.method, endpoint, old(step.sid), step.body); resp.StatusCode != step.status {
					t.Fatalf("%s: %d %.300s, want %d", step.name, resp.StatusCode, body, step.status)
				}
			}
			modern := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
			if resp, body := roundTrip(t, "POST", endpoint, toHeader(v26("tools/list", "")), modern); resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"echo"`) {
				t.Fatalf("2026-07-28 tools/list: %d %.300s", resp.StatusCode, body)
			}
		})
	}
}

// TestStdioUpstreamParallelClientsEqualIDs: clients that use the same id
// at the same time each get their own answer under their own id.
func TestStdioUpstreamParallelClientsEqualIDs(t *testing.T) {
	e := startStdioDifferential(t)
	const n = 6
	var wg sync.WaitGroup
	got := make([]seen, 2*n)
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base := e.proxy
			if i%2 == 1 {
				base = e.drivers["kids"].URL
			}
			got[i] = doHeader(t, "POST", base+"/kids/mcp", toHeader(v26("tools/call", "echo")),
				call("7", "echo", fmt.Sprintf(`{"text":"client-%d","sleep_ms":%d}`, i, 20*(2*n-i))))
		}()
	}
	wg.Wait()
	for i, s := range got {
		if s.Status != 200 || !strings.Contains(s.Body, `"id":7`) || !strings.Contains(s.Body, fmt.Sprintf("client-%d", i)) {
			t.Errorf("client %d: %d %.400s", i, s.Status, s.Body)
		}
	}
}

// TestStdioUpstreamCrashMidWrite: a child that dies during a silent write
// fails the call (never a hang) in both modes, is restarted, and a repeat
// of the write is not run again: its outcome is unknown.
func TestStdioUpstreamCrashMidWrite(t *testing.T) {
	records := filepath.Join(t.TempDir(), "records")
	e := startDifferential(t, differentialUpstream{name: "kids", tools: stdioTools, undeclared: policy.UndeclaredConfirm,
		command: &config.Command{Argv: []string{stdiotest.Server(t), "-records", records}, StartTimeout: config.DurationOf(10 * time.Second), StopGrace: config.DurationOf(200 * time.Millisecond)}})
	for i, base := range []string{e.proxy, e.drivers["kids"].URL} {
		args := `{"note":"crash-` + []string{"proxy", "envoy"}[i] + `"}`
		first := doHeader(t, "POST", base+"/kids/mcp", toHeader(v26("tools/call", "record")), call("1", "record", args))
		if first.Status == 200 && !strings.Contains(first.Body, "error") {
			t.Fatalf("a crashed write answered: %d %.600s", first.Status, first.Body)
		}
		// The other upstreams keep serving meanwhile.
		if s := doHeader(t, "POST", e.proxy+"/mcp", toHeader(v26("tools/call", "list_technicians")), call("9", "list_technicians", "{}")); s.Status != 200 || strings.Contains(s.Body, `"error"`) {
			t.Errorf("demo upstream while the stdio child restarts: %d %.300s", s.Status, s.Body)
		}
		// The child comes back (each try differs: the loop brake stops
		// repeats of a failing call).
		try := 0
		poll.Until(t, 20*time.Second, "the restarted child answers", func() bool {
			try++
			s := doHeader(t, "POST", base+"/kids/mcp", toHeader(v26("tools/call", "echo")), call("2", "echo", fmt.Sprintf(`{"text":"back %d"}`, try)))
			return s.Status == 200 && strings.Contains(s.Body, fmt.Sprintf("back %d", try))
		})
		retry := doHeader(t, "POST", base+"/kids/mcp", toHeader(v26("tools/call", "record")), call("3", "record", args))
		if !strings.Contains(retry.Body, "outcome_unknown") {
			t.Errorf("repeat of a write whose child crashed: %d %.600s", retry.Status, retry.Body)
		}
	}
	b, _ := os.ReadFile(records)
	if n := strings.Count(string(b), "crash-"); n != 2 {
		t.Errorf("the write ran %d times, want once per mode:\n%s", n, b)
	}
}

// TestStdioUpstreamElicitation: the child's elicitation/create reaches the
// client through the pipeline and the client's answer gets back to it; a
// 2026-07-28 client gets it as an input_required round.
func TestStdioUpstreamElicitation(t *testing.T) {
	e := startStdioDifferential(t)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		for via, endpoint := range map[string]string{"proxy": e.proxy + "/kids/mcp", "envoy": e.drivers["kids"].URL + "/kids/mcp"} {
			t.Run(version+"/"+via, func(t *testing.T) {
				elicitThrough(t, endpoint, version)
			})
		}
	}
}

// elicitThrough calls the test server's ask tool at endpoint with an SDK
// client of revision version that accepts the elicitation.
func elicitThrough(t *testing.T, endpoint, version string) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-e2e", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	})
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: endpoint}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "accept: Ada") {
		t.Fatalf("ask: %v %+v", err, res)
	}
}

// stdioApp starts the gateway (proxy and admin listeners) with one stdio
// upstream running the test server with args; the catalog is off.
func stdioApp(t *testing.T, startTimeout time.Duration, args ...string) (proxy, admin string, stop func()) {
	t.Helper()
	return stdioAppWith(t, func(c *config.Config) { c.Catalog.Disabled = true }, startTimeout, args...)
}

func stdioAppWith(t *testing.T, mutate func(*config.Config), startTimeout time.Duration, args ...string) (proxy, admin string, stop func()) {
	t.Helper()
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "kids", Tools: stdioTools,
		Command: &config.Command{Argv: append([]string{stdiotest.Server(t)}, args...), StartTimeout: config.DurationOf(startTimeout), StopGrace: config.DurationOf(200 * time.Millisecond)}}}}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	mutate(cfg)
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	return "http://" + a.ProxyAddr, "http://" + a.AdminAddr, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.Shutdown(ctx)
	}
}

// TestStdioUpstreamExitBeforeInitialize: a child that exits before it
// answers initialize leaves the gateway up but not ready, and callers get
// a JSON-RPC error at once, the same through the proxy and through Envoy.
func TestStdioUpstreamExitBeforeInitialize(t *testing.T) {
	e := startStdioDifferential(t, "-exit-before-init")
	direct, _ := e.both(t, "kids", toHeader(v26("tools/call", "echo")), call("1", "echo", `{"text":"x"}`))
	if !strings.Contains(direct.Body, `"id":1`) || !strings.Contains(direct.Body, "not available") {
		t.Errorf("call through both modes: %d %.600s", direct.Status, direct.Body)
	}

	proxy, admin, _ := stdioApp(t, 2*time.Second, "-exit-before-init")
	r := do(t, "GET", admin+"/readyz", nil, nil)
	if r.Status != 503 || !strings.Contains(r.Body, `stdio upstream "kids"`) {
		t.Errorf("readyz: %d %s", r.Status, r.Body)
	}
	s := doHeader(t, "POST", proxy+"/mcp", toHeader(v26("tools/call", "echo")), call("1", "echo", `{"text":"x"}`))
	if !strings.Contains(s.Body, `"id":1`) || !strings.Contains(s.Body, "not available") {
		t.Errorf("call: %d %.600s", s.Status, s.Body)
	}
}

// TestStdioUpstreamFaultyChildren: a stderr flood does not stop the
// child, a 2 MiB line passes with the default limits, and a child that ignores the end of its input (and SIGTERM) is
// still stopped at shutdown, with its grandchildren; no process is left.
func TestStdioUpstreamFaultyChildren(t *testing.T) {
	proxy, admin, stop := stdioApp(t, 10*time.Second, "-stderr-flood", "5000", "-ignore-eof", "-grandchild")
	if r := do(t, "GET", admin+"/readyz", nil, nil); r.Status != 200 {
		t.Fatalf("readyz: %d %s", r.Status, r.Body)
	}
	var pid int
	for i := range 10 {
		s := doHeader(t, "POST", proxy+"/mcp", toHeader(v26("tools/call", "pid")), call(strconv.Itoa(i), "pid", `{}`))
		if s.Status != 200 || !strings.Contains(s.Body, `text`) {
			t.Fatalf("call %d: %d %.600s", i, s.Status, s.Body)
		}
		_, after, _ := strings.Cut(s.Body, `\"text\":\"`)
		pid, _ = strconv.Atoi(strings.SplitN(after, `\"`, 2)[0])
	}
	if pid == 0 {
		t.Fatal("no pid")
	}
	// A 2 MiB line, with the default limits.
	if s := doHeader(t, "POST", proxy+"/mcp", toHeader(v26("tools/call", "big")), call("20", "big", `{}`)); s.Status != 200 || !strings.Contains(s.Body, strings.Repeat("a", 2<<20)) {
		t.Errorf("big: %d, %d bytes: %.300s", s.Status, len(s.Body), s.Body)
	}
	group := stdiotest.ProcessGroup(pid)
	if len(group) < 2 {
		t.Fatalf("process group %d: %v", pid, group)
	}
	if m := do(t, "GET", admin+"/metrics", nil, nil); !strings.Contains(m.Body, `mcpgate_stdio_stderr_lines_dropped_total{upstream="kids"}`) ||
		!strings.Contains(m.Body, `mcpgate_stdio_children{upstream="kids"} 1`) {
		t.Errorf("metrics: %s", grepLines(m.Body, "mcpgate_stdio"))
	}
	stop()
	for _, p := range group {
		poll.Until(t, 10*time.Second, fmt.Sprintf("process %d gone", p), func() bool {
			_, err := os.Stat("/proc/" + strconv.Itoa(p))
			return err != nil
		})
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// serverEverything returns the installed server-everything's program;
// the test skips without it, or fails where it must run.
func serverEverything(t *testing.T) string {
	t.Helper()
	entry, _ := filepath.Abs("stdio/node_modules/.bin/mcp-server-everything")
	_, nodeErr := exec.LookPath("node")
	if _, err := os.Stat(entry); err != nil || nodeErr != nil {
		if os.Getenv(envRequireNPMServer) == "1" || os.Getenv("CI") != "" {
			t.Fatalf("server-everything is not installed (cd e2e/stdio && npm ci): %v %v", err, nodeErr)
		}
		t.Skip("server-everything not installed (cd e2e/stdio && npm ci)")
	}
	return entry
}

// TestStdioUpstreamServerEverythingBothModes: the published npm server as
// a configured stdio upstream, through the proxy and through Envoy.
func TestStdioUpstreamServerEverythingBothModes(t *testing.T) {
	entry := serverEverything(t)
	e := startDifferential(t, differentialUpstream{name: "everything",
		tools:   map[string]policy.ToolDeclaration{"echo": {Effect: policy.EffectRead}, "get-sum": {Effect: policy.EffectRead}},
		command: &config.Command{Argv: []string{entry, "stdio"}, StartTimeout: config.DurationOf(60 * time.Second), StopGrace: config.DurationOf(time.Second)}})
	direct, _ := e.both(t, "everything", toHeader(v26("tools/call", "echo")), call(`"e1"`, "echo", `{"message":"hello from both modes"}`))
	if direct.Status != 200 || !strings.Contains(direct.Body, "hello from both modes") || !strings.Contains(direct.Body, `"id":"e1"`) {
		t.Errorf("echo: %d %.600s", direct.Status, direct.Body)
	}
	direct, _ = e.both(t, "everything", toHeader(v26("tools/call", "get-sum")), call("2", "get-sum", `{"a":2,"b":3}`))
	if direct.Status != 200 || !strings.Contains(direct.Body, "5") {
		t.Errorf("get-sum: %d %.600s", direct.Status, direct.Body)
	}
}

// envRequireNPMServer makes the published npm server's test fail rather
// than skip where it is not installed (scripts/test.sh sets it; so does
// CI).
const envRequireNPMServer = "MCPGATE_REQUIRE_NPM_STDIO"

// TestStdioUpstreamServerEverything: the published npm stdio server
// @modelcontextprotocol/server-everything (installed in e2e/stdio by npm
// ci) behind `mcpgate serve --upstream-command`, the one-line start.
func TestStdioUpstreamServerEverything(t *testing.T) {
	entry := serverEverything(t)
	addr, admin := freeLoopback(t), freeLoopback(t)
	cmd := exec.Command(bin, "serve", "--listen", addr, "--admin", admin, "--read-tools", "echo,get-sum",
		"--upstream-command", entry+" stdio")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("mcpgate output:\n%s", out.String())
		}
	})
	poll.Until(t, 60*time.Second, "mcpgate ready", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			c := sdk.NewClient(&sdk.Implementation{Name: "stdio-e2e", Version: "1"}, nil)
			cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, &sdk.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil || len(tools.Tools) < 5 {
				t.Fatalf("tools/list: %v %+v", err, tools)
			}
			res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi " + version}})
			if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.Content[0].(*sdk.TextContent).Text), "hi "+version) {
				t.Fatalf("echo: %v %+v", err, res)
			}
		})
	}
}

// TestStdioUpstreamInitAndPin: `mcpgate init --upstream-command` lists a
// stdio server's tools and drafts it as upstreams[].command; the draft
// validates, and `mcpgate manifest pin` lists the server the same way.
func TestStdioUpstreamInitAndPin(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "mcpgate.yaml")
	server := stdiotest.Server(t)
	log := runBin(t, "init", "--upstream-command", server+" -records "+filepath.Join(dir, "records"), "--name", "kids", "--out", out)
	if !strings.Contains(log, "8 tools of "+server) {
		t.Errorf("init: %s", log)
	}
	draft, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(draft), "command:") || !strings.Contains(string(draft), `argv: ["`+server+`", "-records"`) || strings.Contains(string(draft), "url:") {
		t.Fatalf("draft:\n%s", draft)
	}
	runBin(t, "validate", "--config", out)
	if pin := runBin(t, "manifest", "pin", "--config", out); !strings.Contains(pin, "unchanged") {
		t.Errorf("manifest pin: %s", pin)
	}
	if processesOf(server) > 0 {
		t.Errorf("a stdio server started by init or pin is still running")
	}
}

// processesOf counts running processes whose command line starts
// with path (/proc).
func processesOf(path string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(cmdline, []byte(path+"\x00")) {
			n++
		}
	}
	return n
}

// TestStdioUpstreamCatalog: with the catalog on, mcpgate lists the stdio
// server itself (its bridge's secret travels as the discovery
// credential): tools/list comes from the catalog, and a call is checked
// against the listed input schema.
func TestStdioUpstreamCatalog(t *testing.T) {
	proxy, admin, _ := stdioAppWith(t, func(c *config.Config) { c.Catalog.Unpinned = config.CatalogUnpinnedAllow }, 10*time.Second)
	if r := do(t, "GET", admin+"/metrics", nil, nil); !strings.Contains(r.Body, `mcpgate_catalog_tools{upstream="kids"} 8`) {
		t.Errorf("catalog: %s", grepLines(r.Body, "mcpgate_catalog_tools"))
	}
	list := doHeader(t, "POST", proxy+"/mcp", toHeader(v26("tools/list", "")), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta26+`}}`))
	if list.Status != 200 || !strings.Contains(list.Body, `"name":"echo"`) {
		t.Errorf("tools/list: %d %.600s", list.Status, list.Body)
	}
	bad := doHeader(t, "POST", proxy+"/mcp", toHeader(v26("tools/call", "echo")), call("2", "echo", `{"text":"x","extra":1}`))
	if !strings.Contains(bad.Body, "extra") || !strings.Contains(bad.Body, `"isError":true`) {
		t.Errorf("unknown argument: %d %.600s", bad.Status, bad.Body)
	}
}

// TestStdioUpstreamReadyzNamesTheStartingUpstream: while mcpgate waits
// for a child's first initialize answer (up to start_timeout), /readyz
// already names the upstream and why it is not ready.
func TestStdioUpstreamReadyzNamesTheStartingUpstream(t *testing.T) {
	admin := freeLoopback(t)
	cfg := &config.Config{Upstreams: []config.Upstream{{Name: "kids", Tools: stdioTools,
		Command: &config.Command{Argv: []string{stdiotest.Server(t), "-hang-init"}, StartTimeout: config.DurationOf(time.Minute), StopGrace: config.DurationOf(200 * time.Millisecond)}}}}
	cfg.Catalog.Disabled = true
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = admin
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *app.App, 1)
	go func() {
		a, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Error(err)
		}
		started <- a
	}()
	defer func() {
		cancel()
		if a := <-started; a != nil {
			sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
			defer c()
			_ = a.Shutdown(sctx)
		}
	}()
	poll.Until(t, 10*time.Second, "readyz names the starting upstream", func() bool {
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 503 && strings.Contains(string(b), `stdio upstream "kids": the stdio server is starting`)
	})
}
