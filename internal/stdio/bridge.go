package stdio

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// SecretHeader is the header field that carries the bridge's per-process
// secret; a request without it never reaches the child.
const SecretHeader = "mcpgate-stdio-secret"

// Path is the path of the bridge's MCP endpoint in URL. The bridge serves
// one child and answers on every path: under Envoy the request keeps the
// path of the route.
const Path = "/mcp"

// childVersion is the revision the bridge offers the child in initialize:
// the newest one with the initialize handshake. The child answers with the
// revision it speaks, which may be older.
const childVersion = mcp.Version20251125

// Restart backoff: the first restart waits minBackoff, each further one
// twice as long up to maxBackoff; a child that stayed ready for
// stableAfter resets it.
const (
	minBackoff  = 500 * time.Millisecond
	maxBackoff  = 30 * time.Second
	stableAfter = 30 * time.Second
)

// killWait bounds how long Close, out of time, waits for the child it
// killed to be reaped.
const killWait = time.Second

// callQueue bounds the messages (notifications, server requests) waiting
// for one HTTP exchange; beyond it notifications are dropped and server
// requests refused, so a slow client never blocks the child's output.
const callQueue = 64

// Options configure a Bridge.
type Options struct {
	// Upstream names the upstream in logs and metric labels.
	Upstream string
	// Argv, Dir: the child's program with arguments, and its working
	// directory ("" for mcpgate's).
	Argv []string
	Dir  string
	// Environ returns the child's environment; called at each start (so
	// secrets in files are read fresh).
	Environ func() ([]string, error)
	// Listen is the loopback address the bridge serves on ("127.0.0.1:0"
	// picks a port).
	Listen string
	// StartTimeout bounds the wait for the child's initialize answer;
	// StopGrace the wait after closing its standard input and again after
	// SIGTERM.
	StartTimeout, StopGrace time.Duration
	// MaxMessageBytes is the longest line (one JSON-RPC message) read from
	// the child and the largest request body relayed to it.
	MaxMessageBytes int
	// MaxSessions bounds the streamable-HTTP sessions of clients of
	// revisions before 2026-07-28 (0: DefaultMaxSessions); beyond it the
	// session idle the longest ends.
	MaxSessions int
	// Version is mcpgate's version, in the clientInfo of initialize.
	Version string
	Logger  *slog.Logger
	Metrics *Metrics
}

// Bridge runs one stdio MCP server (the child) and serves it as a
// streamable-HTTP MCP endpoint on loopback.
type Bridge struct {
	o      Options
	log    *slog.Logger
	m      upstreamMetrics
	secret string
	url    string
	srv    *http.Server
	nextID atomic.Int64

	mu        sync.Mutex
	cur       *child   // the running child, nil between runs
	proc      *process // the child's process from start to reaping, ready or not
	killed    bool     // Close ran out of time: every process is killed at once
	notReady  string   // why the bridge is not ready ("" when ready)
	listeners map[*listener]struct{}
	sessions  map[string]*session // by Mcp-Session-Id (session.go)

	// tried is closed when the first run of the child became ready or
	// failed (Tried).
	tried     chan struct{}
	triedOnce sync.Once

	stop chan struct{}
	done chan struct{}
}

// Start listens on o.Listen and starts the child; it does not wait for the
// child to be ready (Ready, WaitReady).
func Start(o Options) (*Bridge, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("stdio upstream: empty argv")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Environ == nil {
		o.Environ = func() ([]string, error) { return nil, nil }
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("stdio upstream %q: listen: %w", o.Upstream, err)
	}
	b := &Bridge{
		o: o, log: o.Logger.With(slog.String("upstream", o.Upstream)), m: o.Metrics.of(o.Upstream),
		secret: hex.EncodeToString(raw[:]), url: "http://" + ln.Addr().String() + Path,
		notReady: "the stdio server is starting", listeners: map[*listener]struct{}{},
		sessions: map[string]*session{},
		tried:    make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
	}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(b.log.Handler(), slog.LevelWarn)}
	go func() { _ = b.srv.Serve(ln) }()
	go b.supervise()
	return b, nil
}

// URL is the bridge's MCP endpoint, e.g. http://127.0.0.1:41234/mcp.
func (b *Bridge) URL() string { return b.url }

// Secret is the value of SecretHeader that requests must carry.
func (b *Bridge) Secret() string { return b.secret }

// Ready reports whether the child has answered initialize and is running;
// when not, why.
func (b *Bridge) Ready() (bool, string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.notReady == "", b.notReady
}

// WaitReady waits until the child is ready or ctx ends.
func (b *Bridge) WaitReady(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		ok, why := b.Ready()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stdio upstream %q not ready: %s", b.o.Upstream, why)
		case <-t.C:
		}
	}
}

// Tried is closed once the first run of the child has answered
// initialize or failed to (exited, timed out, could not start); Ready then
// tells which.
func (b *Bridge) Tried() <-chan struct{} { return b.tried }

func (b *Bridge) markTried() { b.triedOnce.Do(func() { close(b.tried) }) }

// Listeners is the number of open notification streams (GET streams and
// subscriptions/listen).
func (b *Bridge) Listeners() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.listeners)
}

// PID is the process id of the running child, 0 when none runs.
func (b *Bridge) PID() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cur == nil {
		return 0
	}
	return b.cur.p.pid()
}

// Close stops serving and stops the child (closing its standard input,
// then SIGTERM, then SIGKILL to its process group) and waits for it, or
// until ctx ends.
func (b *Bridge) Close(ctx context.Context) error {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	_ = b.srv.Close()
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
	}
	// The caller cannot wait for the stop grace (mcpgate is about to
	// exit): the child must not outlive it.
	b.mu.Lock()
	b.killed = true
	p := b.proc
	b.mu.Unlock()
	if p != nil {
		p.signalGroup(syscall.SIGKILL)
		select {
		case <-p.exited:
		case <-time.After(killWait):
		}
	}
	return ctx.Err()
}

// stopping reports whether Close has begun.
func (b *Bridge) stopping() bool {
	select {
	case <-b.stop:
		return true
	default:
		return false
	}
}

func (b *Bridge) setNotReady(why string) {
	b.mu.Lock()
	b.notReady = why
	b.mu.Unlock()
}

// supervise runs the child until Close: start, initialize, serve until it
// exits, restart with backoff.
func (b *Bridge) supervise() {
	defer close(b.done)
	backoff := minBackoff
	for run := 0; ; run++ {
		if run > 0 {
			b.m.restarts.Inc()
			select {
			case <-b.stop:
				return
			case <-time.After(backoff):
			}
		}
		readyFor := b.runOnce(run)
		if b.stopping() {
			return
		}
		if readyFor >= stableAfter {
			backoff = minBackoff
		} else if run > 0 {
			backoff = min(2*backoff, maxBackoff)
		}
	}
}

// runOnce starts the child, initializes it and serves it until it exits
// or the bridge stops; it returns how long the child was ready.
func (b *Bridge) runOnce(gen int) time.Duration {
	defer b.markTried()
	env, err := b.o.Environ()
	if env == nil {
		env = []string{} // never mcpgate's own environment (exec's default for nil)
	}
	if err != nil {
		b.setNotReady("the stdio server's environment cannot be built: " + err.Error())
		b.log.Error("stdio server not started", slog.Any("error", err))
		return 0
	}
	started := time.Now()
	p, err := startProcess(b.o.Argv, b.o.Dir, env, b.log, b.m.stderrDropped.Inc)
	if err != nil {
		b.setNotReady("the stdio server cannot be started: " + err.Error())
		b.log.Error("stdio server not started", slog.Any("argv", b.o.Argv), slog.Any("error", err))
		return 0
	}
	b.mu.Lock()
	b.proc = p
	if b.killed {
		p.signalGroup(syscall.SIGKILL)
	}
	b.mu.Unlock()
	b.m.children.Inc()
	b.log.Info("stdio server started", slog.Int("pid", p.pid()), slog.Int("run", gen))
	c := newChild(b, gen, p)
	go c.readLoop()
	go c.writeLoop()

	var readyAt time.Time
	if err := c.initialize(b.o.StartTimeout); err != nil {
		c.fail() // the run is over
		b.setNotReady(err.Error())
		if !b.stopping() {
			b.log.Error("stdio server not ready", slog.Any("error", err))
		}
	} else {
		readyAt = time.Now()
		b.m.readySeconds.Observe(readyAt.Sub(started).Seconds())
		b.mu.Lock()
		b.cur, b.notReady = c, ""
		b.mu.Unlock()
		b.log.Info("stdio server ready", slog.String("protocol_version", c.version), slog.Duration("after", readyAt.Sub(started)))
	}
	b.markTried()
	select {
	case <-p.exited:
	case <-c.failed:
	case <-b.stop:
	}
	stopping := b.stopping() // whichever of several ready cases select picked
	b.mu.Lock()
	if b.cur == c {
		b.cur = nil
	}
	if stopping {
		b.notReady = "mcpgate is shutting down"
	} else if b.notReady == "" {
		b.notReady = "the stdio server exited; restarting"
	}
	b.mu.Unlock()
	p.stop(b.o.StopGrace)
	b.mu.Lock()
	b.proc = nil
	b.mu.Unlock()
	// The group is gone; what the child wrote before it exited is read to
	// its end before the calls still waiting are failed. A process that
	// left the group (setsid) may hold the pipes open: after StopGrace they
	// are closed, which ends their readers.
	late, cancel := context.WithTimeout(context.Background(), b.o.StopGrace)
	for _, pipe := range []struct {
		read <-chan struct{}
		f    *os.File
	}{{c.readDone, p.stdout}, {p.drained, p.stderr}} {
		select {
		case <-pipe.read:
		case <-late.Done():
		}
		_ = pipe.f.Close()
		<-pipe.read
	}
	cancel()
	c.kill(p.exitReason())
	b.m.children.Dec()
	if !stopping {
		b.log.Error("stdio server exited; restarting with backoff", slog.Int("pid", p.pid()), slog.String("exit", p.exitReason()))
	} else {
		b.log.Info("stdio server stopped", slog.Int("pid", p.pid()), slog.String("exit", p.exitReason()))
	}
	if readyAt.IsZero() {
		return 0
	}
	return time.Since(readyAt)
}

// child is one run of the child process, with the calls in flight on it.
type child struct {
	b   *Bridge
	gen int
	p   *process
	in  chan []byte // lines for standard input
	// failed is closed when the bridge gives up on the run (initialize
	// timed out, standard input broke); dead when the run is over.
	failed, dead chan struct{}
	readDone     chan struct{}
	failOnce     sync.Once
	why          string // how the run ended, set before dead closes

	initResult chan []byte // the answer to the bridge's initialize
	init       []byte      // the child's initialize result
	version    string

	// Guarded by b.mu.
	calls      map[string]*call     // bridge id → call
	tokens     map[string]*call     // bridge progress token → call
	serverReqs map[string]serverReq // bridge id of a request of the child → its own id
	rounds     map[string]*round    // requestState of an input_required round → its call
}

type serverReq struct {
	id  []byte // the child's id, byte-exact
	gen int
}

func newChild(b *Bridge, gen int, p *process) *child {
	return &child{b: b, gen: gen, p: p, in: make(chan []byte, 16), failed: make(chan struct{}), dead: make(chan struct{}),
		readDone: make(chan struct{}), initResult: make(chan []byte, 1),
		calls: map[string]*call{}, tokens: map[string]*call{}, serverReqs: map[string]serverReq{}, rounds: map[string]*round{}}
}

func (c *child) fail() { c.failOnce.Do(func() { close(c.failed) }) }

// kill ends the run: every call still waiting learns that the child is
// gone.
func (c *child) kill(why string) {
	c.b.mu.Lock()
	c.why = why
	c.b.mu.Unlock()
	close(c.dead)
}

// initialize sends initialize and notifications/initialized and waits for
// the answer within timeout.
func (c *child) initialize(timeout time.Duration) error {
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{"elicitation":{},"sampling":{},"roots":{"listChanged":true}},"clientInfo":{"name":"mcpgate","version":%q}}}`,
		childVersion, c.b.o.Version)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case c.in <- []byte(req):
	case <-c.p.exited:
		return fmt.Errorf("the stdio server exited before answering initialize (%s)", c.p.exitReason())
	}
	select {
	case res := <-c.initResult:
		if res == nil {
			return errors.New("the stdio server refused initialize")
		}
		var v string
		_ = json.Unmarshal(value(res, "protocolVersion"), &v)
		if !mcp.IsSupportedVersion(v) || v >= mcp.Version20260728 {
			return fmt.Errorf("the stdio server answered initialize with protocol version %q, which mcpgate does not speak over stdio", v)
		}
		c.init, c.version = res, v
	case <-c.p.exited:
		return fmt.Errorf("the stdio server exited before answering initialize (%s)", c.p.exitReason())
	case <-c.failed:
		return errors.New("the stdio server's standard input closed before it answered initialize")
	case <-c.b.stop:
		return errors.New("mcpgate is shutting down")
	case <-t.C:
		return fmt.Errorf("the stdio server did not answer initialize within %s", timeout)
	}
	c.in <- []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return nil
}

// writeLoop writes queued lines to the child's standard input until the
// run ends.
func (c *child) writeLoop() {
	for {
		select {
		case line := <-c.in:
			buf := make([]byte, 0, len(line)+1)
			buf = append(append(buf, line...), '\n')
			if _, err := c.p.stdin.Write(buf); err != nil {
				c.b.log.Warn("stdio server's standard input closed", slog.Any("error", err))
				c.fail()
				return
			}
		case <-c.dead:
			return
		case <-c.failed:
			return
		}
	}
}

// send queues a line for the child; false when the run is over or ctx
// ended first.
func (c *child) send(ctx context.Context, line []byte) bool {
	select {
	case c.in <- oneLine(line):
		return true
	case <-c.failed:
	case <-c.p.exited:
	case <-ctx.Done():
	}
	return false
}

// sendWait bounds how long the bridge waits to queue a message of its
// own (a cancellation, an answer for the child) when the child does not
// read its standard input.
const sendWait = 5 * time.Second

// sendSoon queues a message of the bridge for the child, giving up after
// sendWait.
func (c *child) sendSoon(line []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), sendWait)
	defer cancel()
	if !c.send(ctx, line) {
		c.b.log.Warn("stdio server does not read its standard input; a message of mcpgate for it was dropped")
	}
}

// reply queues an answer of the bridge to a request of the child without
// waiting: the goroutine reading the child's output must never block on
// its input, or a child that writes without reading would stall both.
func (c *child) reply(line []byte) {
	select {
	case c.in <- line:
	default:
		c.b.log.Warn("stdio server does not read its standard input; an answer of mcpgate to it was dropped")
	}
}

// readLoop reads the child's messages, one per line, until EOF. A line
// longer than MaxMessageBytes is read to its end and dropped (overlong).
func (c *child) readLoop() {
	defer close(c.readDone)
	br := bufio.NewReaderSize(c.p.stdout, 64<<10)
	limit := c.b.o.MaxMessageBytes
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		more := errors.Is(err, bufio.ErrBufferFull) // the line goes on
		switch {
		case len(line)+len(chunk) > limit:
			c.overlong(append(line, chunk...))
			for more {
				_, err = br.ReadSlice('\n')
				more = errors.Is(err, bufio.ErrBufferFull)
			}
			line = nil
		case more:
			line = append(line, chunk...)
			continue
		default:
			line = append(line, chunk...)
			if msg := bytes.TrimSpace(line); len(msg) > 0 {
				c.dispatch(bytes.Clone(msg))
			}
			line = line[:0]
			if cap(line) > 1<<20 {
				line = nil
			}
		}
		if err != nil {
			return // EOF: the child and its group closed standard output
		}
	}
}

// overlong handles a line longer than the limit: when its start names the
// id of a call, that call gets a JSON-RPC error; the line is dropped.
func (c *child) overlong(prefix []byte) {
	c.b.log.Error("stdio server wrote a message longer than the limit; dropped", slog.Int("limit_bytes", c.b.o.MaxMessageBytes))
	id := value(prefix, "id")
	if id == nil {
		return
	}
	c.b.mu.Lock()
	cl := c.calls[string(id)]
	c.b.mu.Unlock()
	if cl != nil {
		cl.answer(mcp.ErrorResponse(id, &mcp.Error{Code: mcp.CodeInternalError,
			Message: fmt.Sprintf("The stdio server's answer is longer than mcpgate's limit of %d bytes.", c.b.o.MaxMessageBytes)}))
	}
}
