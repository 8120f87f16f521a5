package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/rig"
)

// Soak and fault scenarios against `mcpgate serve` with
// the full default policy on a Redis store, the bench upstream (the Go
// SDK) and a real redis-server, all on loopback or Unix sockets. Every
// loop is bounded in calls and time; the whole test stays well under 90 s.
// MCPGATE_SOAK=1 runs each load phase ten times longer.

// soakCalls is the number of calls of each load phase.
func soakCalls() int {
	if os.Getenv("MCPGATE_SOAK") == "1" {
		return 4000
	}
	return 400
}

// aofRedis is a redis-server with an append-only file fsynced on every
// write, so that it can be stopped and started again with its data (the
// store/redistest servers keep nothing across a restart).
type aofRedis struct {
	bin, dir, socket string
	cmd              *exec.Cmd
	done             chan struct{}
}

func startAOFRedis(t *testing.T) *aofRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("MCPGATE_REQUIRE_REDIS") == "1" {
			t.Fatalf("redis-server not found and MCPGATE_REQUIRE_REDIS=1: %v", err)
		}
		t.Skipf("redis-server not installed: %v", err)
	}
	dir, err := os.MkdirTemp("", "mcpgate-faults-redis-")
	if err != nil {
		t.Fatal(err)
	}
	r := &aofRedis{bin: bin, dir: dir, socket: filepath.Join(dir, "redis.sock")}
	t.Cleanup(func() { r.stop(t); _ = os.RemoveAll(dir) })
	r.start(t)
	return r
}

func (r *aofRedis) start(t *testing.T) {
	t.Helper()
	r.cmd = exec.Command(r.bin, "--port", "0", "--unixsocket", r.socket, "--unixsocketperm", "700", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--maxmemory-policy", "noeviction", "--loglevel", "warning")
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(r.cmd, r.done)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("unix", r.socket)
		if err == nil {
			_, _ = c.Write([]byte("PING\r\n"))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not answer within 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *aofRedis) stop(t *testing.T) {
	if r.cmd == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// faultRig is the running set-up of TestSoakAndFaults.
type faultRig struct {
	up     *rig.Upstream
	g      *rig.Gateway
	redis  *aofRedis
	policy string // the policy directory
	url    string // the MCP endpoint through the proxy
}

func startFaultRig(t *testing.T) *faultRig {
	t.Helper()
	r := &faultRig{up: rig.NewUpstream(), redis: startAOFRedis(t)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r.up, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	dir := t.TempDir()
	r.policy = filepath.Join(dir, "policy")
	if err := os.Mkdir(r.policy, 0o755); err != nil {
		t.Fatal(err)
	}
	writePolicy(t, r.policy, 0)
	g, err := rig.StartGateway(context.Background(), rig.GatewayOptions{
		Binary: bin, Dir: dir, UpstreamURL: "http://" + ln.Addr().String() + "/mcp", People: 8,
		RedisURL: "unix://" + r.redis.socket, UpstreamTimeout: "1s", MaxSSEEventBytes: 1 << 20, PolicyDir: r.policy,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.g = g
	r.url = g.Proxy + "/mcp"
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("mcpgate serve stderr:\n%s", g.Logs())
		}
	})
	return r
}

// writePolicy writes rego/examples/transparent and gate.rego, which adds
// a refusal of every slow_status call with sleep_ms 1 to the transparent policy's _deny
// set, into dir; version changes gate.rego's text so each reload compiles
// something new. Files are rewritten in place (truncated, then written),
// as an editor would. (The default policy decides tools/call on a path
// that a second file cannot extend; the reload mechanics are the same.)
func writePolicy(t *testing.T, dir string, version int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "rego", "examples", "transparent", "transparent.rego"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "transparent.rego"), string(b))
	writeFile(t, filepath.Join(dir, "gate.rego"), fmt.Sprintf(`package mcpgate

# Version %d. Without this file slow_status would be allowed: a request
# decided by transparent.rego alone was decided by a half-loaded policy.
_deny contains {"code": "gate_closed", "cause": "slow_status is closed (policy version %d).", "fix": "Use get_status."} if {
	input.message.method == "tools/call"
	input.message.name == "slow_status"
	input.message.arguments.sleep_ms == 1
}
`, version, version))
}

// goroutines reads go_goroutines from the gateway's /metrics.
func (r *faultRig) goroutines(t *testing.T) float64 {
	t.Helper()
	v, err := r.g.Metric("go_goroutines")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// settle waits (bounded, polling) until the gateway's goroutines are back
// within tolerance of base, and fails the test if they never are.
func (r *faultRig) settle(t *testing.T, base float64, what string) {
	t.Helper()
	const tolerance = 8
	deadline := time.Now().Add(15 * time.Second)
	var now float64
	for time.Now().Before(deadline) {
		if now = r.goroutines(t); now <= base+tolerance {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("%s: goroutines %v, %v before (tolerance %d)", what, now, base, tolerance)
}

// do sends one tools/call and returns the status and the whole body.
func (r *faultRig) do(ctx context.Context, token string, id int, tool, args string) (int, string, error) {
	resp, err := http.DefaultClient.Do(rig.NewCall(ctx, r.url, token, id, tool, args))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// load runs calls get_status calls from 8 clients and returns the
// failures seen.
func (r *faultRig) load(t *testing.T, calls int) rig.LoadResult {
	t.Helper()
	return rig.Load(context.Background(), rig.LoadOptions{URL: r.url, Tokens: r.g.Tokens, Concurrency: 8, Calls: calls, Timeout: 20 * time.Second})
}

// TestSoakAndFaults: each fault gives the client a clear error, the
// gateway's goroutines return to where they were, memory stays bounded,
// every write the upstream ran has its audit record, and no request is
// decided by a half-loaded policy.
func TestSoakAndFaults(t *testing.T) {
	r := startFaultRig(t)
	warm := r.load(t, 100)
	if warm.Failed > 0 {
		t.Fatalf("warm-up: %d failed: %s", warm.Failed, warm.FirstFail)
	}
	base := r.goroutines(t)
	mem0, err := rig.ReadMemory(r.g.Pid())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("soak", func(t *testing.T) {
		res := r.load(t, soakCalls())
		if res.Failed > 0 {
			t.Errorf("%d of %d calls failed: %s", res.Failed, res.Calls, res.FirstFail)
		}
		r.settle(t, base, "after the soak")
	})

	t.Run("upstream timeout", func(t *testing.T) {
		// upstreams[].timeout is 1s; the upstream answers after 5s.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		status, body, err := r.do(ctx, r.g.Tokens[0], 1, rig.ToolSlowStatus, `{"sleep_ms":5000}`)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("timeout answer: %d %s", status, body)
		if status == http.StatusOK && rig.IsResult([]byte(body)) {
			t.Fatalf("a call past the upstream timeout succeeded: %s", body)
		}
		r.settle(t, base, "after an upstream timeout")
	})

	t.Run("upstream reset mid-SSE", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		status, body, err := r.do(ctx, r.g.Tokens[0], 2, rig.ToolResetStream, `{"events":0,"event_bytes":0,"final_bytes":0}`)
		if rig.IsResult([]byte(body)) {
			t.Fatalf("a reset stream ended as a result: %s", body)
		}
		// The proxy relays the events that arrived, then one JSON-RPC
		// error event for the request id saying the stream broke, then a
		// clean end.
		if err != nil || !strings.Contains(body, `"error":{`) || !strings.Contains(body, "stream broke before its answer") {
			t.Fatalf("a reset stream: HTTP %d, read error %v: %s", status, err, body)
		}
		t.Logf("reset answer: HTTP %d, read error %v, %d bytes relayed", status, err, len(body))
		r.settle(t, base, "after an upstream reset")
	})

	t.Run("slow client", func(t *testing.T) {
		// A client reads 64 KiB of a ~50 MB stream, stalls 2s, then leaves.
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := http.DefaultClient.Do(rig.NewCall(ctx, r.url, r.g.Tokens[1], 3, rig.ToolStreamReport, `{"events":3000,"event_bytes":16384,"final_bytes":10}`))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if _, err := io.ReadFull(resp.Body, make([]byte, 64<<10)); err != nil {
			t.Errorf("first 64 KiB: %v", err)
		}
		time.Sleep(2 * time.Second)
		cancel()
		resp.Body.Close()
		// Others are served meanwhile and after.
		if res := r.load(t, 100); res.Failed > 0 {
			t.Errorf("calls beside a slow client: %d failed: %s", res.Failed, res.FirstFail)
		}
		r.settle(t, base, "after a slow client left")
	})

	t.Run("policy reloads under load", func(t *testing.T) {
		var allowedSlow, refusedOther, slowCalls atomic.Int64
		var firstBad atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					tool, args := rig.ToolGetStatus, `{"service":"db"}`
					if i%2 == 1 {
						tool, args = rig.ToolSlowStatus, `{"sleep_ms":1}`
					}
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					status, body, err := r.do(ctx, r.g.Tokens[2+c], 1000+i, tool, args)
					cancel()
					ok := err == nil && status == 200 && rig.IsResult([]byte(body))
					switch {
					case tool == rig.ToolSlowStatus:
						slowCalls.Add(1)
						if ok || !strings.Contains(body, "gate_closed") {
							allowedSlow.Add(1)
							firstBad.CompareAndSwap(nil, fmt.Sprintf("slow_status: %d %v %.300s", status, err, body))
						}
					case !ok:
						refusedOther.Add(1)
						firstBad.CompareAndSwap(nil, fmt.Sprintf("get_status: %d %v %.300s", status, err, body))
					}
				}
			})
		}
		reloads := 0
		deadline := time.Now().Add(8 * time.Second)
		for v := 1; v <= 40 && time.Now().Before(deadline); v++ {
			writePolicy(t, r.policy, v)
			if err := r.g.Reload(); err != nil {
				t.Fatal(err)
			}
			reloads++
			time.Sleep(100 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		ok, _ := r.g.Metric(`mcpgate_policy_reloads_total{result="success"}`)
		bad, _ := r.g.Metric(`mcpgate_policy_reloads_total{result="failure"}`)
		t.Logf("%d SIGHUPs, %v successful and %v failed reloads, %d slow_status calls", reloads, ok, bad, slowCalls.Load())
		if ok < 1 || slowCalls.Load() == 0 {
			t.Fatalf("nothing was reloaded or called: %v reloads, %d calls", ok, slowCalls.Load())
		}
		if n := allowedSlow.Load(); n > 0 {
			t.Errorf("%d slow_status calls not refused by gate.rego (half-loaded policy?): %v", n, firstBad.Load())
		}
		if n := refusedOther.Load(); n > 0 {
			t.Errorf("%d get_status calls failed during reloads: %v", n, firstBad.Load())
		}
		r.settle(t, base, "after policy reloads")
	})

	t.Run("redis restart under writes", func(t *testing.T) {
		notes0 := r.up.Notes()
		var ok, failed atomic.Int64
		var firstErr atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var id atomic.Int64
		for c := range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					n := id.Add(1)
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					status, body, err := r.do(ctx, r.g.Tokens[c], int(n), rig.ToolRecordNote, fmt.Sprintf(`{"note":"note %d"}`, n))
					cancel()
					if err == nil && status == 200 && rig.IsResult([]byte(body)) {
						ok.Add(1)
						continue
					}
					failed.Add(1)
					if err != nil || !strings.Contains(body, "error") && !strings.Contains(body, "Error") {
						firstErr.CompareAndSwap(nil, fmt.Sprintf("unclear failure: %d %v %.300s", status, err, body))
					}
					firstErr.CompareAndSwap(nil, fmt.Sprintf("%d %.300s", status, body))
					time.Sleep(20 * time.Millisecond)
				}
			})
		}
		time.Sleep(time.Second)
		r.redis.stop(t)
		time.Sleep(time.Second)
		r.redis.start(t)
		// Writes must succeed again once Redis is back.
		okAtRestart := ok.Load()
		deadline := time.Now().Add(15 * time.Second)
		for ok.Load() < okAtRestart+20 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		t.Logf("writes: %d ok, %d refused (first: %v); upstream ran %d", ok.Load(), failed.Load(), firstErr.Load(), r.up.Notes()-notes0)
		if ok.Load() < okAtRestart+20 {
			t.Errorf("writes did not recover within 15s of Redis coming back")
		}
		if s, _ := firstErr.Load().(string); strings.HasPrefix(s, "unclear") {
			t.Errorf("a write failed without a clear error: %s", s)
		}
		// Every write the upstream ran has its audit record (the audit log
		// holds every record, stored or not).
		ran := r.up.Notes()
		deadline = time.Now().Add(10 * time.Second)
		for {
			_, byOutcome := r.g.AuditRecords()
			got := 0
			for k, v := range byOutcome {
				if strings.Contains(k, rig.ToolRecordNote) && !strings.Contains(k, "denied") {
					got += v
				}
			}
			if int64(got) >= ran {
				t.Logf("audit records: %v", byOutcome)
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the upstream ran %d writes, the audit log holds %d records of them: %v", ran, got, byOutcome)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		r.settle(t, base, "after the Redis restart")
	})

	mem1, err := rig.ReadMemory(r.g.Pid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gateway RSS %s → %s (peak %s)", rig.MiB(mem0.RSS), rig.MiB(mem1.RSS), rig.MiB(mem1.PeakRSS))
	if mem1.RSS > mem0.RSS+64<<20 {
		t.Errorf("gateway RSS grew from %s to %s", rig.MiB(mem0.RSS), rig.MiB(mem1.RSS))
	}
}
