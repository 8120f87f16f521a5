package stdio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/internal/stdio"
	"github.com/mcpgate/mcpgate/internal/stdio/stdiotest"
)

type rig struct {
	b   *stdio.Bridge
	reg *prometheus.Registry
	// sid is the session of post, opened by its first call.
	sidOnce sync.Once
	sid     string
}

func start(t *testing.T, args ...string) *rig {
	t.Helper()
	return startWith(t, func(*stdio.Options) {}, args...)
}

// startWith is start with options changed by with.
func startWith(t *testing.T, with func(*stdio.Options), args ...string) *rig {
	t.Helper()
	reg := prometheus.NewRegistry()
	o := stdio.Options{
		Upstream: "s", Argv: append([]string{stdiotest.Server(t)}, args...), Listen: "127.0.0.1:0",
		StartTimeout: 10 * time.Second, StopGrace: 200 * time.Millisecond, MaxMessageBytes: 4 << 20,
		Metrics: stdio.NewMetrics(reg),
		Environ: func() ([]string, error) { return []string{"PATH=" + os.Getenv("PATH")}, nil },
	}
	with(&o)
	b, err := stdio.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Close(ctx); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return &rig{b: b, reg: reg}
}

func (r *rig) ready(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.b.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
}

// post sends one JSON-RPC message with the bridge's secret, on the rig's
// session (opened by the first post; none when initialize fails).
func (r *rig) post(t *testing.T, body string) (*http.Response, string) {
	t.Helper()
	r.sidOnce.Do(func() {
		resp, _ := r.send(t, "POST", "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
		if resp != nil {
			r.sid = resp.Header.Get("Mcp-Session-Id")
		}
	})
	return r.send(t, "POST", r.sid, body)
}

// do sends an HTTP request with the bridge's secret and session sid (""
// for none); the answer's body is the caller's to read and close.
func (r *rig) do(method, sid, body string) (*http.Response, error) {
	req, _ := http.NewRequest(method, r.b.URL(), strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(stdio.SecretHeader, r.b.Secret())
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
	}
	return http.DefaultClient.Do(req)
}

// send is do, reading the whole answer.
func (r *rig) send(t *testing.T, method, sid, body string) (*http.Response, string) {
	t.Helper()
	resp, err := r.do(method, sid, body)
	if err != nil {
		return nil, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

type secretTransport struct{ secret string }

func (s secretTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(stdio.SecretHeader, s.secret)
	return http.DefaultTransport.RoundTrip(r)
}

// client connects an SDK client to the bridge.
func (r *rig) client(t *testing.T, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: r.b.URL(),
		HTTPClient: &http.Client{Transport: secretTransport{r.b.Secret()}}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func text(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("no content: %+v", res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

func TestBridgeServesEveryRevision(t *testing.T) {
	r := start(t)
	r.ready(t)
	for _, v := range []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"} {
		t.Run(v, func(t *testing.T) {
			cs := r.client(t, nil, v)
			if got := cs.InitializeResult().ServerInfo.Name; got != "mcpgate-stdio-testserver" {
				t.Errorf("server name %q", got)
			}
			tools, err := cs.ListTools(context.Background(), nil)
			if err != nil || len(tools.Tools) != 8 {
				t.Fatalf("tools/list: %v %d", err, len(tools.Tools))
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi " + v}})
			if err != nil || text(t, res) != `{"text":"hi `+v+`"}` {
				t.Fatalf("echo: %v %+v", err, res)
			}
		})
	}
}

func TestBridgeRejectsRequestsWithoutSecret(t *testing.T) {
	r := start(t)
	r.ready(t)
	resp, err := http.Post(r.b.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d, want 403", resp.StatusCode)
	}
}

func TestBridgeRestoresEqualIDsOfParallelClients(t *testing.T) {
	r := start(t)
	r.ready(t)
	const n = 8
	var wg sync.WaitGroup
	got := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Every client uses the same id, spelled the same way.
			_, got[i] = r.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":  "same" ,"method":"tools/call","params":{"name":"echo","arguments":{"text":"c%d","sleep_ms":%d}}}`, i, 50*(n-i)))
		}()
	}
	wg.Wait()
	for i, body := range got {
		if !strings.HasPrefix(body, `{"jsonrpc":"2.0","id":"same",`) && !strings.Contains(body, `"id":"same"`) {
			t.Errorf("client %d: id not restored: %s", i, body)
		}
		if !strings.Contains(body, fmt.Sprintf(`\"text\":\"c%d\"`, i)) {
			t.Errorf("client %d got another's answer: %s", i, body)
		}
	}
}

func TestBridgeRelaysProgressAndElicitation(t *testing.T) {
	r := start(t)
	r.ready(t)
	var mu sync.Mutex
	var progress []float64
	cs := r.client(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Progress)
			mu.Unlock()
		},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
	}, "2025-11-25")
	params := &mcp.CallToolParams{Name: "progress", Arguments: map[string]any{}}
	params.SetProgressToken(7)
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || text(t, res) != `{"text":"done"}` {
		t.Fatalf("progress: %v %+v", err, res)
	}
	// The SDK client runs notification handlers on their own.
	poll.Until(t, 10*time.Second, "3 progress notifications", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 3
	})
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
	if err != nil || text(t, res) != `{"text":"accept: Ada"}` {
		t.Fatalf("ask: %v %+v %s", err, res, text(t, res))
	}
}

// TestBridgeTurnsElicitationIntoRounds: a 2026-07-28 client answers no
// requests of the server on its exchange; the child's elicitation becomes
// an input_required result, and the retry with the inputResponses
// finishes the call.
func TestBridgeTurnsElicitationIntoRounds(t *testing.T) {
	r := start(t)
	r.ready(t)
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`
	resp, body := r.post(t, `{"jsonrpc":"2.0","id":"first","method":"tools/call","params":{"name":"ask","arguments":{},`+meta+`}}`)
	if resp == nil || resp.StatusCode != 200 || !strings.Contains(body, `"resultType":"input_required"`) || !strings.Contains(body, `"method":"elicitation/create"`) || !strings.Contains(body, `"id":"first"`) {
		t.Fatalf("first round: %v %s", resp, body)
	}
	var res struct {
		Result struct {
			InputRequests map[string]json.RawMessage `json:"inputRequests"`
			RequestState  string                     `json:"requestState"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || len(res.Result.InputRequests) != 1 || res.Result.RequestState == "" {
		t.Fatalf("round: %v %s", err, body)
	}
	var key string
	for k := range res.Result.InputRequests {
		key = k
	}
	// A requestState the bridge did not issue is refused.
	resp, body = r.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask","arguments":{},"requestState":"mcpgate-stdio-forged",`+meta+`}}`)
	if resp == nil || resp.StatusCode != 400 || !strings.Contains(body, "requestState") {
		t.Fatalf("forged state: %v %s", resp, body)
	}
	resp, body = r.post(t, `{"jsonrpc":"2.0","id":"retry","method":"tools/call","params":{"name":"ask","arguments":{},"inputResponses":{"`+key+`":{"action":"accept","content":{"name":"Ada"}}},"requestState":"`+res.Result.RequestState+`",`+meta+`}}`)
	if resp == nil || resp.StatusCode != 200 || !strings.Contains(body, `accept: Ada`) || !strings.Contains(body, `"id":"retry"`) || !strings.Contains(body, `"resultType":"complete"`) {
		t.Fatalf("retry: %v %s", resp, body)
	}
	// Without the elicitation capability the child learns that the
	// client cannot answer.
	_, body = r.post(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"ask","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`)
	if !strings.Contains(body, "elicitation failed") || !strings.Contains(body, "did not declare the elicitation capability") {
		t.Fatalf("no capability: %s", body)
	}
	// A 2026-07-28 request without client capabilities is refused.
	resp, _ = r.post(t, `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	if resp == nil || resp.StatusCode != 400 {
		t.Fatalf("no capabilities: %v", resp)
	}
}

func TestBridgeRelaysA2MiBLine(t *testing.T) {
	r := start(t)
	r.ready(t)
	resp, body := r.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{}}}`)
	if resp == nil || resp.StatusCode != 200 || len(body) < 2<<20 || !strings.Contains(body, strings.Repeat("a", 2<<20)) {
		t.Fatalf("big: %d bytes", len(body))
	}
}

func TestBridgeFailsCallsInFlightWhenTheChildCrashes(t *testing.T) {
	r := start(t)
	r.ready(t)
	first := r.b.PID()
	resp, body := r.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	if resp != nil {
		t.Fatalf("a crashed call got an answer: %d %s", resp.StatusCode, body)
	}
	poll.Until(t, 10*time.Second, "restart", func() bool { ok, _ := r.b.Ready(); return ok && r.b.PID() != first })
	if n := metric(t, r, "mcpgate_stdio_restarts_total"); n < 1 {
		t.Errorf("restarts %v", n)
	}
	_, body = r.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"again"}}}`)
	if !strings.Contains(body, "again") {
		t.Fatalf("after restart: %s", body)
	}
	gone(t, []int{first})
}

func metric(t *testing.T, r *rig, name string) float64 {
	t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

func TestBridgeNotReadyWhenTheChildExitsBeforeInitialize(t *testing.T) {
	r := start(t, "-exit-before-init")
	poll.Until(t, 10*time.Second, "a restart", func() bool { return metric(t, r, "mcpgate_stdio_restarts_total") >= 1 })
	ok, why := r.b.Ready()
	if ok || !strings.Contains(why, "exited before answering initialize") {
		t.Fatalf("ready %v: %s", ok, why)
	}
	resp, body := r.send(t, "POST", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	if resp == nil || resp.StatusCode != 503 || !strings.Contains(body, "not available") || !strings.Contains(body, `"id":1`) {
		t.Fatalf("call while not ready: %v %s", resp, body)
	}
}

func TestBridgeGivesUpOnAChildThatNeverInitializes(t *testing.T) {
	reg := prometheus.NewRegistry()
	b, err := stdio.Start(stdio.Options{Upstream: "s", Argv: []string{stdiotest.Server(t), "-hang-init"}, Listen: "127.0.0.1:0",
		StartTimeout: 100 * time.Millisecond, StopGrace: 100 * time.Millisecond, MaxMessageBytes: 1 << 20, Metrics: stdio.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{b: b, reg: reg}
	poll.Until(t, 10*time.Second, "a restart", func() bool { return metric(t, r, "mcpgate_stdio_restarts_total") >= 1 })
	if ok, why := b.Ready(); ok || !strings.Contains(why, "did not answer initialize within 100ms") {
		t.Fatalf("ready %v: %s", ok, why)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestBridgeDrainsAStderrFlood(t *testing.T) {
	r := start(t, "-stderr-flood", "20000")
	r.ready(t)
	poll.Until(t, 10*time.Second, "dropped lines", func() bool { return metric(t, r, "mcpgate_stdio_stderr_lines_dropped_total") > 0 })
	for i := range 20 {
		_, body := r.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"still %d"}}}`, i, i))
		if !strings.Contains(body, fmt.Sprintf("still %d", i)) {
			t.Fatalf("call %d: %s", i, body)
		}
	}
}

func TestBridgeStopsAChildThatIgnoresEOFAndItsGrandchildren(t *testing.T) {
	r := start(t, "-ignore-eof", "-grandchild")
	r.ready(t)
	pid := r.b.PID()
	group := stdiotest.ProcessGroup(pid)
	if len(group) < 2 {
		t.Fatalf("process group %d: %v, want the child and its sleep", pid, group)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, group)
}

func TestBridgeLeavesNoProcessesAfterRepeatedCrashes(t *testing.T) {
	r := start(t, "-grandchild")
	var seen []int
	for i := range 3 {
		r.ready(t)
		pid := r.b.PID()
		seen = append(seen, stdiotest.ProcessGroup(pid)...)
		r.post(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"crash","arguments":{}}}`, i))
		poll.Until(t, 10*time.Second, "restart", func() bool { return r.b.PID() != pid })
	}
	r.ready(t)
	seen = append(seen, stdiotest.ProcessGroup(r.b.PID())...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	gone(t, seen)
	if n := metric(t, r, "mcpgate_stdio_children"); n != 0 {
		t.Errorf("children gauge %v after close", n)
	}
}

// gone waits until none of pids exists any more: the bridge reaps the
// child, and init the grandchildren it killed.
func gone(t *testing.T, pids []int) {
	t.Helper()
	for _, p := range pids {
		poll.Until(t, 10*time.Second, fmt.Sprintf("process %d gone", p), func() bool { return !alive(p) })
	}
}

// alive reports whether pid exists, a zombie included (/proc).
func alive(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}

// TestBridgeRelaysListChanged: a tools/list_changed of the child reaches
// an older revision's GET stream and a 2026-07-28 subscriptions/listen
// stream that asked for it.
func TestBridgeRelaysListChanged(t *testing.T) {
	r := start(t)
	r.ready(t)
	var mu sync.Mutex
	seen := map[string]int{}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		r.client(t, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			mu.Lock()
			seen[v]++
			mu.Unlock()
		}}, v)
	}
	// The streams are open once the bridge has both listeners; then the
	// child announces a new tool.
	poll.Until(t, 10*time.Second, "two notification streams", func() bool { return r.b.Listeners() == 2 })
	_, body := r.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add_tool","arguments":{"text":"added_tool"}}}`)
	if !strings.Contains(body, `\"text\":\"ok\"`) {
		t.Fatalf("add_tool: %s", body)
	}
	poll.Until(t, 10*time.Second, "list_changed on both streams", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["2026-07-28"] > 0 && seen["2025-11-25"] > 0
	})
}

// TestBridgeRefusesALineOverTheLimit: an answer longer than
// MaxMessageBytes fails its call with a JSON-RPC error, and the child
// goes on serving.
func TestBridgeRefusesALineOverTheLimit(t *testing.T) {
	b, err := stdio.Start(stdio.Options{Upstream: "s", Argv: []string{stdiotest.Server(t)}, Listen: "127.0.0.1:0",
		StartTimeout: 10 * time.Second, StopGrace: 200 * time.Millisecond, MaxMessageBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	r := &rig{b: b}
	r.ready(t)
	resp, body := r.post(t, `{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"big","arguments":{}}}`)
	if resp == nil || !strings.Contains(body, `"id":"big"`) || !strings.Contains(body, "longer than mcpgate's limit of 1048576 bytes") {
		t.Fatalf("big: %v %.300s", resp, body)
	}
	_, body = r.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"after"}}}`)
	if !strings.Contains(body, "after") {
		t.Fatalf("after: %s", body)
	}
}

// TestBridgeRestartsAChildWhoseEscapedGrandchildHoldsStderr: a process
// that left the child's process group (setsid) and keeps its standard
// error open neither keeps the bridge from restarting the child nor from
// stopping.
func TestBridgeRestartsAChildWhoseEscapedGrandchildHoldsStderr(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "escaped.pid")
	escapedPID := func() int {
		raw, _ := os.ReadFile(pidFile)
		pid, _ := strconv.Atoi(string(raw))
		return pid
	}
	r := start(t, "-escaped-grandchild", pidFile)
	r.ready(t)
	escaped := escapedPID()
	if escaped == 0 {
		t.Fatal("no escaped grandchild")
	}
	// Each run of the child starts one; none is the bridge's to end.
	t.Cleanup(func() {
		_ = syscall.Kill(escaped, syscall.SIGKILL)
		if p := escapedPID(); p != 0 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	first := r.b.PID()
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		r.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash","arguments":{}}}`)
	}()
	poll.Until(t, 10*time.Second, "restart", func() bool { ok, _ := r.b.Ready(); return ok && r.b.PID() != first })
	poll.Until(t, 10*time.Second, "the crashed call ends", func() bool {
		select {
		case <-answered:
			return true
		default:
			return false
		}
	})
	if !alive(escaped) {
		t.Fatal("the escaped grandchild is gone: the test proves nothing")
	}
}

// TestBridgeKillsTheChildWhenCloseRunsOutOfTime: when the caller cannot
// wait for the child's stop grace (mcpgate is about to exit), the child
// and its process group are killed rather than left behind.
func TestBridgeKillsTheChildWhenCloseRunsOutOfTime(t *testing.T) {
	b, err := stdio.Start(stdio.Options{Upstream: "s", Argv: []string{stdiotest.Server(t), "-ignore-eof", "-grandchild"}, Listen: "127.0.0.1:0",
		StartTimeout: 10 * time.Second, StopGrace: time.Minute, MaxMessageBytes: 1 << 20,
		Environ: func() ([]string, error) { return []string{"PATH=" + os.Getenv("PATH")}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{b: b}
	r.ready(t)
	group := stdiotest.ProcessGroup(b.PID())
	if len(group) < 2 {
		t.Fatalf("process group: %v, want the child and its sleep", group)
	}
	t.Cleanup(func() {
		for _, p := range group {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close: %v, want the deadline", err)
	}
	gone(t, group)
}

// logBuffer is a log destination the bridge's goroutines and the test share.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBridgeClosedDuringInitializeSaysItStops: closing the bridge while
// the child has not answered initialize yet stops it, with no error and
// no restart announced. (The run's end used to be picked at random among
// ready channels; a few rounds make a wrong pick show.)
func TestBridgeClosedDuringInitializeSaysItStops(t *testing.T) {
	for i := range 6 {
		var logs logBuffer
		b, err := stdio.Start(stdio.Options{Upstream: "s", Argv: []string{stdiotest.Server(t), "-hang-init"}, Listen: "127.0.0.1:0",
			StartTimeout: time.Minute, StopGrace: 100 * time.Millisecond, MaxMessageBytes: 1 << 20,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, 10*time.Second, "the child started", func() bool { return strings.Contains(logs.String(), "stdio server started") })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = b.Close(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if s := logs.String(); strings.Contains(s, "restarting") || strings.Contains(s, "level=ERROR") || !strings.Contains(s, "stdio server stopped") {
			t.Fatalf("round %d:\n%s", i, s)
		}
	}
}
