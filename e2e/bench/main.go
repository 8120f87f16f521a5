// Command bench measures mcpgate's load, cost and streaming figures in one
// run on this machine, against a real MCP upstream (the Go
// SDK's stateless streamable-HTTP server, tool get_status with a ~150-byte
// result):
//
//   - direct: the load generator calls the upstream itself;
//   - floor: through a bare Go reverse proxy (net/http/httputil) that reads
//     each request body in full and parses it as a JSON-RPC message
//     (encoding/json) before forwarding, run as its own process;
//   - proxy: through `mcpgate serve` (its own process) with the full default
//     policy — gateway tokens, the catalog with a pinned manifest, a live
//     rights file, signed identity assertions, rate buckets, audit;
//   - extproc: through the same mcpgate process's ext_proc gRPC listener,
//     with internal/envoydriver playing Envoy (BUFFERED bodies, as
//     config/envoy/ configures it);
//   - extproc-floor: the same driver in front of the least ext_proc server
//     go-control-plane and grpc-go allow (every message answered "continue";
//     extprocfloor.go), run as its own process;
//   - proxy-distinct, extproc-distinct: proxy and extproc with new
//     arguments on every call (real agents rarely repeat a call), so the
//     gateway's decision memo answers only when the policy reads none of
//     the arguments' values.
//
// Every figure is also printed as a ratio to its floor of the same run:
// proxy modes to the floor, extproc modes to the extproc-floor, the
// gateway's memory to the memory floor (memfloor.go).
//
// Each runs at fixed concurrencies (one call in flight per client, one
// kept-alive connection and one gateway token each). CPU per call is the
// gateway's (or the floor's) process CPU time (/proc/<pid>/stat utime +
// stime) over the run divided by the calls; memory is VmRSS / VmHWM from
// /proc/<pid>/status. Added latency is a percentile minus the direct
// run's same percentile.
//
// Then a long SSE answer (default 100 MB in 16 KiB progress events)
// streams through the proxy while the gateway's RSS is sampled, and a
// single result event larger than limits.max_sse_event_bytes must come
// back as a JSON-RPC error.
//
// Usage (from e2e/, the e2e module; Linux only):
//
//	go run ./bench                      # ~1–2 minutes on 2 cores
//	go run ./bench -c 8 -n 5000 -sse-bytes 0 -runs 3
//	                                    # three runs, their ratios summarised
//	go run ./bench -n 300000 -c 8 -modes floor,proxy   # the 300k-call run
//	go run ./bench -c 8 -modes floor,proxy,proxy-distinct -sse-bytes 0 -profile /tmp/prof
//	                                    # CPU and allocation profiles of the gateway
//
// Everything listens on 127.0.0.1 and stops by itself.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/internal/rig"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	calls       int
	warmup      int
	conc        []int
	modes       []string
	binary      string
	sseBytes    int64
	sseEvent    int
	sseCap      int
	staleness   string
	floorTarget string
	distinct    bool
	libFloor    bool
	profile     string // directory for the gateway's profiles ("": none)
	rounds      int    // turns the modes take (measure)
	runs        int    // whole runs, each with fresh processes (summarise)
}

// allModes are the modes -modes accepts, in the order they run.
var allModes = []string{"direct", "floor", "proxy", "proxy-distinct", "extproc-floor", "extproc", "extproc-distinct"}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var o options
	conc := fs.String("c", "1,8,32", "concurrency levels, comma-separated")
	modes := fs.String("modes", strings.Join(allModes, ","), "what to measure: "+strings.Join(allModes, ", ")+" (direct always runs: added latency is measured against it)")
	fs.IntVar(&o.calls, "n", 3000, "calls per mode and concurrency level")
	fs.IntVar(&o.runs, "runs", 1, "whole runs, each with fresh processes; with more than one, the ratios to the floors end in a summary: median (min–max)")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds each mode's calls are split into, the modes taking turns, so that the machine's changes of speed weigh on every mode alike (-profile: 1)")
	fs.IntVar(&o.warmup, "warmup", 300, "calls before each measured run (not counted)")
	fs.StringVar(&o.binary, "mcpgate", "", "mcpgate binary (default: built from this module)")
	fs.Int64Var(&o.sseBytes, "sse-bytes", 100_000_000, "bytes of the streamed SSE answer (0: skip the SSE part)")
	fs.IntVar(&o.sseEvent, "sse-event", 16<<10, "bytes of text in each progress event of the stream")
	fs.IntVar(&o.sseCap, "sse-cap", 4<<20, "limits.max_sse_event_bytes of the gateway under test")
	fs.StringVar(&o.staleness, "rights-staleness", "0s", "rights.max_staleness (0s as in the quickstart: the rights file is consulted on every call)")
	fs.BoolVar(&o.libFloor, "libfloor", true, "measure the memory floor: e2e/bench/libfloor, the prescribed libraries started without mcpgate's code")
	fs.BoolVar(&o.distinct, "distinct-args", false, "give every call of every mode its own arguments (the -distinct modes do so by themselves)")
	fs.StringVar(&o.profile, "profile", "", "write CPU and allocation profiles of the gateway during each measured run of a gateway mode into this directory (the binary is built with e2e/bench/pprofhook; not with -mcpgate)")
	fs.StringVar(&o.floorTarget, "floor-upstream", "", "internal: run as the floor proxy in front of this upstream origin")
	extFloor := fs.Bool("extproc-floor", false, "internal: run as the ext_proc floor server")
	floorProfile := fs.String("floor-profile", "", "internal: as a floor, write a CPU profile into this file between SIGUSR1 and SIGUSR2")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *floorProfile != "" {
		profileOnSignal(*floorProfile) // profile.go
	}
	if o.floorTarget != "" {
		return serveFloor(o.floorTarget, stdout)
	}
	if *extFloor {
		return serveExtProcFloor(stdout)
	}
	for _, s := range strings.Split(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("-c: %q is not a positive number", s)
		}
		o.conc = append(o.conc, n)
	}
	o.modes = strings.Split(*modes, ",")
	for _, m := range o.modes {
		if !slices.Contains(allModes, m) {
			return fmt.Errorf("-modes: unknown mode %q", m)
		}
	}
	if !slices.Contains(o.modes, "direct") {
		o.modes = append([]string{"direct"}, o.modes...)
	}
	if runtime.GOOS != "linux" {
		return errors.New("the bench reads /proc: Linux only")
	}
	if o.profile != "" && o.binary != "" {
		return errors.New("-profile builds its own binary: drop -mcpgate")
	}
	if o.rounds < 1 || o.rounds > o.calls {
		return fmt.Errorf("-rounds: %d is not between 1 and -n (%d)", o.rounds, o.calls)
	}
	if o.runs < 1 || (o.runs > 1 && o.profile != "") {
		return fmt.Errorf("-runs: %d is not a positive number, or is more than one with -profile", o.runs)
	}
	if o.profile != "" {
		o.rounds = 1 // one profile per mode, of one stretch of its load
	}
	dir, err := os.MkdirTemp("", "mcpgate-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	libfloor, err := build(ctx, &o, dir, stdout)
	if err != nil {
		return err
	}
	var runs []result
	for i := range o.runs {
		if o.runs > 1 {
			fmt.Fprintf(stdout, "\n== run %d of %d\n", i+1, o.runs)
		}
		r, err := bench(ctx, o, dir, libfloor, stdout)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	if o.runs > 1 {
		summarise(stdout, runs)
	}
	return nil
}

// serveFloor is the floor: net/http/httputil.ReverseProxy to target, with
// the request body read in full (golang/go#40747: a handler that forwards
// a body it has not finished reading lets the HTTP/1 server break the
// connection now and then) and parsed as a JSON-RPC message, the least a
// proxy that decides on MCP calls does, before forwarding. It prints its
// address and stops when its standard input closes.
func serveFloor(target string, stdout io.Writer) error {
	u, err := url.Parse(target)
	if err != nil {
		return err
	}
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(u) },
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, DisableCompression: true},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		var msg jsonrpcMessage
		if err == nil {
			err = json.Unmarshal(body, &msg)
		}
		if err != nil || msg.Method == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		rp.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); _ = srv.Close() }()
	fmt.Fprintf(stdout, "floor ready http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// jsonrpcMessage is what the floor parses of each request body.
type jsonrpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// startFloor runs this program again as the floor proxy.
func startFloor(upstream string, prof *profiler) (pid int, url string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", nil, err
	}
	return startChild(self, append([]string{"-floor-upstream", upstream}, prof.floorArgs("floor")...), "floor ready ")
}

// startChild runs binary with args, waits for its first line — prefix and
// an address — and returns its pid, the address and how to stop it
// (closing its standard input, which it watches).
func startChild(binary string, args []string, prefix string) (pid int, addr string, stop func(), err error) {
	cmd := exec.Command(binary, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 0, "", nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, "", nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return 0, "", nil, err
	}
	stop = func() { _ = stdin.Close(); _ = cmd.Wait() }
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), prefix)
	if err != nil || !ok {
		stop()
		return 0, "", nil, fmt.Errorf("%s: first line %q: %v", filepath.Base(binary), line, err)
	}
	return cmd.Process.Pid, addr, stop, nil
}

type row struct {
	mode  string
	floor string // the mode this row's ratios divide by ("": none)
	conc  int
	res   rig.LoadResult
	cpu   time.Duration // per call; 0: not measured
	mem   rig.Memory
}

// build builds mcpgate into dir unless o.binary names one (setting it),
// and libfloor when o.libFloor, whose path it returns ("": none).
func build(ctx context.Context, o *options, dir string, stdout io.Writer) (libfloor string, err error) {
	if o.binary == "" {
		o.binary = filepath.Join(dir, "mcpgate")
		fmt.Fprintln(stdout, "building mcpgate …")
		// Built the way the Dockerfile builds the image: static, no cgo,
		// without gRPC's x/net/trace.
		build := []string{"build", "-trimpath", "-tags", "grpcnotrace", "-o", o.binary}
		if o.profile != "" {
			flags, err := profileBuild(ctx, dir) // profile.go
			if err != nil {
				return "", err
			}
			build = append(build, flags...)
		}
		cmd := exec.CommandContext(ctx, "go", append(build, "github.com/mcpgate/mcpgate/cmd/mcpgate")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
	}
	if o.libFloor {
		libfloor = filepath.Join(dir, "libfloor")
		// With mcpgate's build flags: the same libraries, built the same way.
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", libfloor, "github.com/mcpgate/mcpgate/e2e/bench/libfloor")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build libfloor: %v\n%s", err, out)
		}
	}
	return libfloor, nil
}

// result is what one run measured: its rows and, with the memory floor,
// the gateway's and the floor's memory after it.
type result struct {
	rows      []row
	gw, floor rig.Memory
}

// bench is one run: the upstream, the floors and the gateway started
// afresh (the gateway's files in a directory of their own under dir),
// every mode measured, then the memory floor and the SSE stream.
func bench(ctx context.Context, o options, dir, libfloor string, stdout io.Writer) (result, error) {
	var res result
	dir, err := os.MkdirTemp(dir, "run-")
	if err != nil {
		return res, err
	}
	// The upstream, in this process.
	up := rig.NewUpstream()
	upLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	upSrv := &http.Server{Handler: up, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = upSrv.Serve(upLn) }()
	defer upSrv.Close()
	upOrigin := "http://" + upLn.Addr().String()
	upURL := upOrigin + "/mcp"

	var prof *profiler
	if o.profile != "" {
		if prof, err = newProfiler(o.profile); err != nil { // profile.go
			return res, err
		}
	}
	floorPid, floorURL, stopFloor, err := startFloor(upOrigin, prof)
	if err != nil {
		return res, err
	}
	defer stopFloor()

	people := slices.Max(o.conc)
	g, err := rig.StartGateway(ctx, rig.GatewayOptions{Binary: o.binary, Dir: dir, UpstreamURL: upURL, People: people,
		MaxSSEEventBytes: o.sseCap, RightsStaleness: o.staleness, Stderr: os.Stderr})
	if err != nil {
		return res, err
	}
	defer g.Stop()
	startMem, _ := rig.ReadMemory(g.Pid())

	envURL, stopEnvoy, err := startDriver(g.ExtProc, upURL)
	if err != nil {
		return res, err
	}
	defer stopEnvoy()
	var floorEnvURL string
	var extFloorPid int
	if slices.Contains(o.modes, "extproc-floor") {
		pid, addr, stop, err := startExtProcFloor(prof)
		if err != nil {
			return res, err
		}
		defer stop()
		u, stopDriver, err := startDriver(addr, upURL)
		if err != nil {
			return res, err
		}
		defer stopDriver()
		floorEnvURL, extFloorPid = u, pid
	}

	targets := map[string]target{
		"direct":           {url: upURL},
		"floor":            {url: floorURL + "/mcp", pid: floorPid},
		"proxy":            {url: g.Proxy + "/mcp", pid: g.Pid(), tokens: g.Tokens, floor: "floor"},
		"proxy-distinct":   {url: g.Proxy + "/mcp", pid: g.Pid(), tokens: g.Tokens, floor: "floor", distinct: true},
		"extproc-floor":    {url: floorEnvURL + "/mcp", pid: extFloorPid},
		"extproc":          {url: envURL + "/mcp", pid: g.Pid(), tokens: g.Tokens, floor: "extproc-floor"},
		"extproc-distinct": {url: envURL + "/mcp", pid: g.Pid(), tokens: g.Tokens, floor: "extproc-floor", distinct: true},
	}
	fmt.Fprintf(stdout, "machine: %d CPUs (GOMAXPROCS %d), %s; %d calls per run after %d warm-up calls; distinct arguments per call: %v\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), o.calls, o.warmup, o.distinct)
	fmt.Fprintf(stdout, "gateway RSS after start: %s\n\n", rig.MiB(startMem.RSS))
	if res.rows, err = measure(ctx, stdout, o, targets, prof); err != nil {
		return res, err
	}
	if libfloor != "" {
		// Before the SSE part, so the gateway's line is its memory after
		// the same kind of load.
		if res.gw, res.floor, err = memoryFloor(ctx, stdout, libfloor, g, slices.Max(o.conc)); err != nil {
			return res, err
		}
	}
	if o.sseBytes > 0 {
		return res, sse(ctx, stdout, g, up, o)
	}
	return res, nil
}

// startDriver runs internal/envoydriver in front of the ext_proc server at
// target, as config/envoy/ configures Envoy (BUFFERED bodies), and
// returns its base URL.
func startDriver(target, upURL string) (string, func(), error) {
	driver, err := envoydriver.New(envoydriver.Config{
		Target:   target,
		Upstream: mustURL(upURL),
		Mode: &extprocfilterv3.ProcessingMode{
			RequestHeaderMode: extprocfilterv3.ProcessingMode_SEND, RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			RequestTrailerMode: extprocfilterv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    time.Second, // loaded 2-core machine: Envoy's 200 ms default would time out under contention
		MaxMessageTimeout: 5 * time.Second,
		BufferLimit:       5 << 20,
		RequestAttributes: []string{"xds.route_metadata"},
		RouteMetadata:     map[string]map[string]any{"mcpgate": {"upstream": "bench"}},
	})
	if err != nil {
		return "", nil, err
	}
	envLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		driver.Close()
		return "", nil, err
	}
	envSrv := &http.Server{Handler: driver, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = envSrv.Serve(envLn) }()
	return "http://" + envLn.Addr().String(), func() { _ = envSrv.Close(); driver.Close() }, nil
}

// target is one thing the load runs against: its URL, the process whose
// CPU and memory count (0: none), the tokens its clients send, the mode
// its figures are divided by (""; none), and whether every call carries
// new arguments.
type target = struct {
	url      string
	pid      int
	tokens   []string
	floor    string
	distinct bool
}

// measure runs the load against every mode at every concurrency and
// reports. Each mode's calls are split into o.rounds rounds, the modes
// taking turns within a round (in reverse order every other round), so a
// change in the machine's speed during the run weighs on a mode and its
// floor alike; a mode's figures are the sums over its rounds.
func measure(ctx context.Context, stdout io.Writer, o options, targets map[string]target, prof *profiler) ([]row, error) {
	var rows []row
	var failed []string
	for _, c := range o.conc {
		var modes []string
		for _, m := range allModes {
			if slices.Contains(o.modes, m) {
				modes = append(modes, m)
			}
		}
		acc := make(map[string]*row, len(modes))
		for _, m := range modes {
			t := targets[m]
			acc[m] = &row{mode: m, conc: c, floor: t.floor}
			lo := rig.LoadOptions{URL: t.url, Tokens: t.tokens, Concurrency: c, DistinctArgs: o.distinct || t.distinct, Calls: o.warmup}
			if w := rig.Load(ctx, lo); w.Failed > 0 {
				fmt.Fprintf(stdout, "%s c=%d warm-up: %d failed (%s)\n", m, c, w.Failed, w.FirstFail)
				failed = append(failed, fmt.Sprintf("%s c=%d warm-up: %d of %d calls", m, c, w.Failed, o.warmup))
			}
		}
		for round := range o.rounds {
			calls := o.calls / o.rounds
			if round < o.calls%o.rounds {
				calls++
			}
			order := slices.Clone(modes)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, m := range order {
				t, r := targets[m], acc[m]
				lo := rig.LoadOptions{URL: t.url, Tokens: t.tokens, Concurrency: c, DistinctArgs: o.distinct || t.distinct,
					Calls: calls, FirstID: o.warmup + r.res.Calls}
				res, cpu, err := segment(ctx, lo, t, prof, m, c)
				if err != nil {
					return nil, err
				}
				r.res.Add(res)
				r.cpu += cpu
				if t.pid != 0 {
					r.mem, _ = rig.ReadMemory(t.pid)
				}
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
			}
		}
		for _, m := range modes {
			r := acc[m]
			r.cpu /= time.Duration(max(r.res.Calls, 1))
			rows = append(rows, *r)
			res := r.res
			fmt.Fprintf(stdout, "%-16s c=%-3d %8.0f calls/s  p50 %-9s p99 %-9s failed %d\n", m, c, res.Throughput(),
				res.Percentile(50).Round(time.Microsecond), res.Percentile(99).Round(time.Microsecond), res.Failed)
			if res.Failed > 0 {
				fmt.Fprintf(stdout, "         first failure: %s\n", res.FirstFail)
				failed = append(failed, fmt.Sprintf("%s c=%d: %d of %d calls", m, c, res.Failed, res.Calls))
			}
		}
	}
	report(stdout, rows)
	if prof != nil {
		prof.report(stdout)
	}
	if len(failed) > 0 {
		// A failed call costs a mode less than an answered one: its
		// figures are not comparable with its floor's.
		return nil, fmt.Errorf("calls failed (the figures above are not comparable): %s", strings.Join(failed, "; "))
	}
	return rows, nil
}

// segment runs one round of a mode's load and returns what it measured
// and the CPU time t's process spent meanwhile (0 without a process),
// with the mode's profiles (-profile: one round) around it.
func segment(ctx context.Context, lo rig.LoadOptions, t target, prof *profiler, m string, c int) (rig.LoadResult, time.Duration, error) {
	var cpu0 time.Duration
	if t.pid != 0 {
		cpu0, _ = rig.CPUTime(t.pid)
	}
	gateway, floor := prof != nil && t.tokens != nil, prof != nil && t.tokens == nil && t.pid != 0
	switch {
	case gateway:
		if err := prof.start(m, c); err != nil {
			return rig.LoadResult{}, 0, err
		}
	case floor:
		if err := prof.startFloor(t.pid); err != nil {
			return rig.LoadResult{}, 0, err
		}
	}
	res := rig.Load(ctx, lo)
	switch {
	case gateway:
		if err := prof.stop(m, c); err != nil {
			return res, 0, err
		}
	case floor:
		if err := prof.stopFloor(t.pid, m, c); err != nil {
			return res, 0, err
		}
	}
	if t.pid == 0 {
		return res, 0, nil
	}
	cpu1, _ := rig.CPUTime(t.pid)
	return res, cpu1 - cpu0, nil
}

func find(rows []row, mode string, c int) (row, bool) {
	for _, r := range rows {
		if r.mode == mode && r.conc == c {
			return r, true
		}
	}
	return row{}, false
}

// floored pairs each row that has a floor with its floor's row (same
// concurrency), both with their CPU measured.
func floored(rows []row) [][2]row {
	var pairs [][2]row
	for _, r := range rows {
		if f, ok := find(rows, r.floor, r.conc); ok && f.cpu != 0 && r.cpu != 0 {
			pairs = append(pairs, [2]row{r, f})
		}
	}
	return pairs
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }

func report(w io.Writer, rows []row) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tclients\tcalls\tfailed\tcalls/s\tp50\tp99\tadded p50\tadded p99\tCPU/call\tRSS\tpeak RSS\t")
	for _, r := range rows {
		d, _ := find(rows, "direct", r.conc)
		added50, added99, cpu, rss, peak := "-", "-", "-", "-", "-"
		if r.mode != "direct" {
			added50 = us(r.res.Percentile(50) - d.res.Percentile(50))
			added99 = us(r.res.Percentile(99) - d.res.Percentile(99))
		}
		if r.cpu > 0 {
			cpu = us(r.cpu)
			rss, peak = rig.MiB(r.mem.RSS), rig.MiB(r.mem.PeakRSS)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.mode, r.conc, r.res.Calls, r.res.Failed,
			r.res.Throughput(), us(r.res.Percentile(50)), us(r.res.Percentile(99)), added50, added99, cpu, rss, peak)
	}
	_ = tw.Flush()
	var lines []string
	ratio := func(a, b time.Duration) string { return fmt.Sprintf("%.2f×", float64(a)/float64(b)) }
	for _, rf := range floored(rows) {
		r, f := rf[0], rf[1]
		lines = append(lines, fmt.Sprintf("%s\t%d\t%s\t%s\t%.2f×\t%s\t%s\t%s\t", r.mode, r.conc, r.floor, ratio(r.cpu, f.cpu),
			r.res.Throughput()/f.res.Throughput(), ratio(r.res.Percentile(50), f.res.Percentile(50)),
			ratio(r.res.Percentile(99), f.res.Percentile(99)), us(r.cpu-f.cpu)))
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nratios to the floor of the same run (proxy modes: floor; extproc modes: extproc-floor; CPU per call and latency: lower is better; calls/s: higher is better):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tclients\tfloor\tCPU/call\tcalls/s\tp50\tp99\tCPU/call − floor's\t")
	for _, l := range lines {
		fmt.Fprintln(tw, l)
	}
	_ = tw.Flush()
}

// sse streams o.sseBytes through the proxy as progress events while
// sampling the gateway's RSS, then sends one result event over the cap.
func sse(ctx context.Context, w io.Writer, g *rig.Gateway, up *rig.Upstream, o options) error {
	events := int(o.sseBytes / int64(o.sseEvent+120))
	fmt.Fprintf(w, "\nSSE: %d progress events of %d bytes (%s) through the proxy, RSS sampled every 20 ms\n",
		events, o.sseEvent, rig.MiB(o.sseBytes))
	up.StreamBytes.Store(0)
	samples, got, body, elapsed, err := streamOnce(ctx, g, fmt.Sprintf(`{"events":%d,"event_bytes":%d,"final_bytes":1000}`, events, o.sseEvent))
	if err != nil {
		return err
	}
	if len(samples) < 10 {
		fmt.Fprintf(w, "  (the stream took %s: too short to sample; use a larger -sse-bytes)\n", elapsed)
		samples = append(samples, samples[len(samples)-1])
	}
	q := func(f float64) int64 { return samples[min(int(f*float64(len(samples))), len(samples)-1)] }
	lo, hi := slices.Min(samples[len(samples)/10:]), slices.Max(samples[len(samples)/10:])
	ok := rig.IsResult(body)
	if os.Getenv("BENCH_DEBUG") != "" {
		fmt.Fprintf(w, "tail: %s\n", tail(body))
	}
	fmt.Fprintf(w, "  upstream sent %s, client received %s (progress messages are wrapped as untrusted text and cut to 2000 bytes) in %s (%.0f MB/s upstream side), final result received: %v\n",
		rig.MiB(up.StreamBytes.Load()), rig.MiB(got), elapsed.Round(time.Millisecond), float64(up.StreamBytes.Load())/elapsed.Seconds()/1e6, ok)
	fmt.Fprintf(w, "  gateway RSS at 10%% / 50%% / 100%% of the stream: %s / %s / %s; after the first 10%%: min %s, max %s (spread %s)\n",
		rig.MiB(q(0.1)), rig.MiB(q(0.5)), rig.MiB(samples[len(samples)-1]), rig.MiB(lo), rig.MiB(hi), rig.MiB(hi-lo))

	over := o.sseCap + 1<<20
	fmt.Fprintf(w, "SSE: one result event of %s (limits.max_sse_event_bytes %s)\n", rig.MiB(int64(over)), rig.MiB(int64(o.sseCap)))
	samples, got, body, _, err = streamOnce(ctx, g, fmt.Sprintf(`{"events":0,"event_bytes":0,"final_bytes":%d}`, over))
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "  client received %d bytes: %s\n", got, strings.TrimSpace(string(tail(body))))
	fmt.Fprintf(w, "  gateway RSS max during it: %s\n", rig.MiB(slices.Max(samples)))
	return nil
}

// tail returns at most the last 2 KiB of b.
func tail(b []byte) []byte { return b[max(0, len(b)-2048):] }

// streamOnce calls stream_report through the proxy with args, reads the
// whole answer (keeping the last 64 KiB) and samples the gateway's RSS.
func streamOnce(ctx context.Context, g *rig.Gateway, args string) (samples []int64, n int64, last []byte, elapsed time.Duration, err error) {
	var mu sync.Mutex
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if m, err := rig.ReadMemory(g.Pid()); err == nil {
				mu.Lock()
				samples = append(samples, m.RSS)
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	resp, err := http.DefaultClient.Do(rig.NewCall(cctx, g.Proxy+"/mcp", g.Tokens[0], 1, rig.ToolStreamReport, args))
	if err != nil {
		close(done)
		wg.Wait()
		return nil, 0, nil, 0, err
	}
	buf := make([]byte, 64<<10)
	ring := make([]byte, 0, 128<<10)
	for {
		k, rerr := resp.Body.Read(buf)
		n += int64(k)
		ring = append(ring, buf[:k]...)
		if len(ring) > 64<<10 {
			ring = append(ring[:0], ring[len(ring)-(64<<10):]...)
		}
		if rerr != nil {
			if rerr != io.EOF {
				err = rerr
			}
			break
		}
	}
	resp.Body.Close()
	elapsed = time.Since(start)
	close(done)
	wg.Wait()
	if resp.StatusCode != http.StatusOK {
		err = errors.Join(err, fmt.Errorf("stream_report: HTTP %d", resp.StatusCode))
	}
	return samples, n, ring, elapsed, err
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

// summarise prints, for several runs, each ratio to the floor of the same
// run and the gateway's peak RSS over the memory floor's as median
// (min–max) over the runs.
func summarise(w io.Writer, runs []result) {
	type key struct {
		mode  string
		conc  int
		floor string
	}
	var keys []key
	cpu, p50, tput := map[key][]float64{}, map[key][]float64{}, map[key][]float64{}
	var mem []float64
	for _, r := range runs {
		for _, rf := range floored(r.rows) {
			row, f := rf[0], rf[1]
			k := key{row.mode, row.conc, row.floor}
			if _, seen := cpu[k]; !seen {
				keys = append(keys, k)
			}
			cpu[k] = append(cpu[k], float64(row.cpu)/float64(f.cpu))
			p50[k] = append(p50[k], float64(row.res.Percentile(50))/float64(f.res.Percentile(50)))
			tput[k] = append(tput[k], row.res.Throughput()/f.res.Throughput())
		}
		if r.floor.PeakRSS > 0 {
			mem = append(mem, float64(r.gw.PeakRSS-r.floor.PeakRSS)/(1<<20))
		}
	}
	spread := func(v []float64, format string) string {
		s := slices.Clone(v)
		slices.Sort(s)
		n := len(s)
		median := (s[(n-1)/2] + s[n/2]) / 2
		return fmt.Sprintf(format+" ("+format+"–"+format+")", median, s[0], s[n-1])
	}
	fmt.Fprintf(w, "\nsummary of %d runs, median (min–max) — ratios to the floor of the same run:\n", len(runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tclients\tfloor\tCPU/call\tcalls/s\tp50\t")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t\n", k.mode, k.conc, k.floor,
			spread(cpu[k], "%.2f×"), spread(tput[k], "%.2f×"), spread(p50[k], "%.2f×"))
	}
	_ = tw.Flush()
	if len(mem) > 0 {
		fmt.Fprintf(w, "gateway's peak RSS over the memory floor's, MiB: %s\n", spread(mem, "%.1f"))
	}
}
