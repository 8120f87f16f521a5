// Package proxy is mcpgate's standalone adapter: a net/http reverse proxy
// that hands every request to the transport-neutral pipeline and forwards
// what it allows to the configured upstream, relaying SSE event by event.
package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/clip"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Route maps a path on the proxy listener to one upstream.
//
// A federated route (gateway.Server) is a Route whose Upstream is the
// server's name and whose URL is nil: each request goes to the member the
// pipeline names (Verdict.Upstream), at that member's Route. A member
// without a route of its own has a Route with an empty Path.
type Route struct {
	// Path is the route (see package routes): an exact request path, e.g.
	// "/mcp", or a pattern with one {tenant} segment, e.g.
	// "/t/{tenant}/mcp", whose tenant the request names. Empty: the
	// upstream is reached only as a member of a federated route.
	Path     string
	Upstream string // upstream name (policy input, metrics label)
	// URL is the upstream MCP endpoint. On a route with {tenant}, a
	// {tenant} in its path is replaced by the tenant the request names
	// (e.g. http://crm.internal/tenants/{tenant}/mcp); otherwise every
	// tenant's requests go to the URL as it is, and the upstream learns
	// the tenant from the identity assertion.
	URL *url.URL
	// Timeout bounds the wait for the upstream's response headers (502
	// when it runs out); a response that has started, e.g. an SSE stream,
	// is not cut. 0 means no bound.
	Timeout time.Duration
}

// Options configure a Proxy.
type Options struct {
	Pipeline     *gateway.Pipeline
	Routes       []Route
	MaxBodyBytes int64         // request body limit while reading (413)
	ReadTimeout  time.Duration // bound on reading one request body (408); 0 = none
	// MaxResponseBytes bounds a buffered application/json response the
	// pipeline inspects (502 above it).
	MaxResponseBytes int64
	Transport        http.RoundTripper // default: a clone of http.DefaultTransport
	// AllowedHosts are the Host names (without port) the listener
	// answers; another Host gets 403 (DNS rebinding). Empty: any.
	AllowedHosts []string
	Metrics      *gateway.Metrics
	Logger       *slog.Logger
}

// Proxy is the standalone MCP proxy handler.
type Proxy struct {
	o      Options
	table  *routes.Table
	routes map[string]*route // by upstream name
	hosts  map[string]bool
	log    *slog.Logger
}

type route struct {
	Route
	rp *httputil.ReverseProxy
	// tenantURL: URL's path holds {tenant}, replaced per request.
	tenantURL bool
}

type ctxKey struct{}

// state travels from ServeHTTP to the ReverseProxy hooks. It is itself the
// context of the request handed to the ReverseProxy: the client request's
// context (or, for a call with a deadline, the deadline's context made
// from it: startDeadline), whose Value answers ctxKey{} with the state.
// One allocation thus carries the state, the pipeline's Request and the
// context value (context.WithValue would be a second, the Request a
// third). Done, Err, Deadline and every other key are the embedded
// context's, so cancellation and context.Cause behave exactly as with
// context.WithValue.
type state struct {
	context.Context
	req     gateway.Request
	out     bytes.Reader // the first outgoing body (GetBody makes others)
	x       *gateway.Exchange
	v       gateway.Verdict
	body    []byte
	sent    time.Time
	routeID string
	target  *url.URL // the upstream URL of this request
	// A call with a deadline (Verdict.Deadline): Context is deadline, a
	// child of the client's context (of a detached one for a write whose
	// outcome is recorded) that ends with gateway.ErrDeadline; cancel
	// releases it.
	cancel   context.CancelFunc
	deadline context.Context
}

// Value returns the state for ctxKey{}, else the client context's value.
func (st *state) Value(key any) any {
	if _, ok := key.(ctxKey); ok {
		return st
	}
	return st.Context.Value(key)
}

// startDeadline makes the state's context end d from now, with cause
// gateway.ErrDeadline. Detached, the client's going away does not end it.
func (st *state) startDeadline(d time.Duration, detach bool) {
	parent := st.Context
	if detach {
		parent = context.WithoutCancel(parent)
	}
	st.deadline, st.cancel = context.WithTimeoutCause(parent, d, gateway.ErrDeadline)
	st.Context = st.deadline
}

// finish releases the deadline, ends the exchange (metrics, slot) and
// gives it back for reuse (gateway.Exchange.Release): it runs when the
// relay's body is closed, after which nothing reads st.x or the verdict.
func (st *state) finish() {
	st.done()
	if x := st.x; x != nil {
		st.x = nil
		x.End(nil)
		x.Release()
	}
}

// done releases the deadline timer of the exchange, if any.
func (st *state) done() {
	if st.cancel != nil {
		st.cancel()
	}
}

var _ http.Handler = (*Proxy)(nil)

// New returns the proxy handler. It fails on routes the routes package
// refuses (bad pattern, duplicate, overlapping patterns) and on an
// upstream URL with {tenant} outside its path or on a route without one.
func New(o Options) (*Proxy, error) {
	p := &Proxy{o: o, routes: map[string]*route{}, hosts: map[string]bool{}, log: o.Logger}
	var rs []routes.Route
	for _, r := range o.Routes {
		if r.Path != "" {
			rs = append(rs, routes.Route{Path: r.Path, Upstream: r.Upstream})
		}
	}
	table, err := routes.New(rs)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p.table = table
	for _, h := range o.AllowedHosts {
		p.hosts[strings.ToLower(h)] = true
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	tr := o.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		// Compression stays under our control: the pipeline asks for
		// identity and never parses compressed bytes.
		t.DisableCompression = true
		t.MaxIdleConnsPerHost = 64
		tr = t
	}
	for _, r := range o.Routes {
		if r.URL == nil {
			p.routes[r.Upstream] = &route{Route: r} // federated: its members forward
			continue
		}
		rt := &route{Route: r, tenantURL: strings.Contains(r.URL.Path, routes.Param)}
		if pat, _ := table.Pattern(r.Upstream); rt.tenantURL && !pat.HasTenant() && r.Path != "" {
			return nil, fmt.Errorf("proxy: upstream %q: its URL has %s but its route %q does not", r.Upstream, routes.Param, r.Path)
		}
		if strings.Contains(r.URL.Host, routes.Param) || strings.Contains(r.URL.RawQuery, routes.Param) {
			return nil, fmt.Errorf("proxy: upstream %q: %s may appear only in the path of its URL", r.Upstream, routes.Param)
		}
		rtr := tr
		if t, ok := tr.(*http.Transport); ok && r.Timeout > 0 {
			t = t.Clone()
			t.ResponseHeaderTimeout = r.Timeout
			rtr = t
		}
		rt.rp = &httputil.ReverseProxy{
			Rewrite:        p.rewrite,
			Transport:      rtr,
			ModifyResponse: p.modifyResponse,
			ErrorHandler:   p.errorHandler,
			ErrorLog:       slog.NewLogLogger(p.log.Handler(), slog.LevelWarn),
			BufferPool:     copyBuffers,
		}
		p.routes[r.Upstream] = rt
	}
	return p, nil
}

// copyBuffers are the 32 KiB buffers ReverseProxy copies response bodies
// through. Without a pool it allocates (and clears) one per request, the
// largest allocation of a small JSON answer's relay.
var copyBuffers httputil.BufferPool = &bufferPool{}

// bufferPool pools the buffers as array pointers: converting a slice to
// one allocates nothing (a *[]byte would be allocated on every Put).
type bufferPool struct{ p sync.Pool }

type copyBuffer [32 << 10]byte

func (b *bufferPool) Get() []byte {
	if buf, ok := b.p.Get().(*copyBuffer); ok {
		return buf[:]
	}
	return new(copyBuffer)[:]
}

func (b *bufferPool) Put(buf []byte) {
	if len(buf) == len(copyBuffer{}) {
		b.p.Put((*copyBuffer)(buf))
	}
}

// ServeHTTP reads the request within its limits, runs the pipeline and
// either answers locally or forwards.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	if !gateway.HostAllowed(p.hosts, r.Host) {
		// The body is never read: close the connection rather than wait
		// for it.
		w.Header().Set("Connection", "close")
		writeLocal(w, gateway.Refused(403, "Host "+strconv.Quote(clip.Value(r.Host))+" is not allowed"), nil)
		p.o.Metrics.ObserveRefused(gateway.TransportProxy, time.Since(start))
		return
	}
	// The path as the client sent it, never decoded: routes and tenants
	// are matched on it exactly as the ext_proc adapter matches Envoy's
	// :path (see package routes).
	path := r.URL.EscapedPath()
	upstream, tenant, ok := p.table.Match(path)
	rt := p.routes[upstream]
	if !ok && !p.o.Pipeline.AnswersPath(path) {
		writeLocal(w, gateway.NotFound(), nil)
		return
	}
	body, local := p.readBody(w, r)
	if local != nil {
		// Refused while reading (413, 408) before the pipeline ran.
		writeLocal(w, local, nil)
		p.o.Metrics.ObserveRefused(gateway.TransportProxy, time.Since(start))
		return
	}
	st := &state{Context: r.Context(), body: body, req: gateway.Request{
		Transport: gateway.TransportProxy,
		Method:    r.Method,
		Path:      path,
		RawQuery:  r.URL.RawQuery,
		Header:    fromHTTP(r.Header),
		Body:      body,
	}}
	if rt != nil {
		st.req.Upstream, st.req.Tenant = rt.Upstream, tenant
	}
	x, v := p.o.Pipeline.HandleRequest(r.Context(), &st.req)
	if v.Local != nil {
		writeLocal(w, v.Local, nil)
		return
	}
	if rt != nil && v.Upstream != "" {
		// A federated route: the member the pipeline resolved.
		rt = p.routes[v.Upstream]
	}
	if rt == nil || rt.rp == nil {
		// A path the pipeline answers itself never goes upstream (nor
		// does a federated request the pipeline named no member for).
		x.End(nil)
		writeLocal(w, gateway.NotFound(), nil)
		return
	}
	st.x, st.v, st.routeID, st.target = x, v, rt.Upstream, rt.URL
	if rt.tenantURL {
		u := *rt.URL
		u.Path = strings.ReplaceAll(u.Path, routes.Param, tenant)
		u.RawPath = strings.ReplaceAll(u.RawPath, routes.Param, tenant)
		st.target = &u
	}
	if v.Deadline > 0 {
		// Set here rather than in rewrite: the request handed to the
		// ReverseProxy then carries it, and rewrite needs no copy of the
		// outgoing request to change its context.
		st.startDeadline(v.Deadline, v.Detach)
	}
	defer st.done() // also after a relay that ended in a panic
	rt.rp.ServeHTTP(w, r.WithContext(st))
}

// readBody reads the whole body, enforcing the size limit while reading
// (413) and the read timeout (408).
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *gateway.Local) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	limit := p.o.MaxBodyBytes
	if limit > 0 && r.ContentLength > limit {
		return nil, gateway.TooLarge(limit)
	}
	rc := http.NewResponseController(w)
	if p.o.ReadTimeout > 0 {
		_ = rc.SetReadDeadline(time.Now().Add(p.o.ReadTimeout))
	}
	src := io.Reader(r.Body)
	if limit > 0 {
		src = http.MaxBytesReader(w, r.Body, limit)
	}
	body, err := readAll(src, r.ContentLength, 0)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, gateway.TooLarge(limit)
		}
		var ne interface{ Timeout() bool }
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, &gateway.Local{Status: http.StatusRequestTimeout}
		}
		return nil, &gateway.Local{Status: http.StatusBadRequest}
	}
	if p.o.ReadTimeout > 0 {
		// Cleared only once the body is in: long-lived streams must not be
		// cut by it, and a failed read keeps it so the server does not
		// wait for the rest of an abandoned body before answering.
		_ = rc.SetReadDeadline(time.Time{})
	}
	return body, nil
}

// readAll reads r to its end, or until max bytes are in when max > 0 (the
// caller tells "exactly max" from "more": it asks for one byte over its
// limit). The buffer is sized once from hint, the Content-Length (< 0:
// unknown), with one spare byte so the read that meets EOF needs no
// growth; io.ReadAll and bytes.Buffer.ReadFrom would start at 512 bytes
// and grow (ReadFrom reallocates even a well-sized buffer: it wants 512
// free bytes before every read). A hint above readAllTrust is not
// trusted for the first allocation: a client that announces a large body
// and sends nothing holds no more than that until its read deadline; a
// larger body grows the buffer as it arrives.
func readAll(r io.Reader, hint, max int64) ([]byte, error) {
	n := int64(4096)
	if hint >= 0 && hint < readAllTrust {
		n = hint + 1
	}
	if max > 0 && n > max {
		n = max
	}
	buf := make([]byte, 0, n)
	for {
		if len(buf) == cap(buf) {
			if max > 0 && int64(len(buf)) >= max {
				return buf, nil
			}
			buf = append(buf, 0)[:len(buf)] // grows the capacity
			if max > 0 && int64(cap(buf)) > max {
				buf = buf[:len(buf):max]
			}
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// readAllTrust bounds the first allocation readAll makes from a
// Content-Length (64 KiB: MCP requests and most answers are smaller).
const readAllTrust = 64 << 10

// rewrite builds the outgoing request: target URL, the verdict's header
// mutations and body. httputil.ReverseProxy strips hop-by-hop headers.
func (p *Proxy) rewrite(pr *httputil.ProxyRequest) {
	st := pr.In.Context().Value(ctxKey{}).(*state)
	// The upstream's URL as it is configured: ProxyRequest.SetURL would
	// join the client's path and query to it (two allocations) only for
	// them to be replaced. MCP endpoints take no query parameters: the
	// client's query is read by the gates (gateway.Request.RawQuery) and
	// never forwarded; the query of the upstream's URL is kept. Host is
	// cleared, as SetURL does: the upstream gets URL.Host.
	target, u := st.target, pr.Out.URL
	u.Scheme, u.Host = target.Scheme, target.Host
	u.Path, u.RawPath = target.Path, target.RawPath
	u.RawQuery, u.ForceQuery = target.RawQuery, target.ForceQuery
	pr.Out.Host = ""
	// ReverseProxy sets a client's Upgrade (and Connection: Upgrade) again
	// after removing the hop-by-hop fields. Streamable HTTP never switches
	// protocols: the upstream is not asked to (an answer 101 is withheld).
	delete(pr.Out.Header, "Upgrade")
	delete(pr.Out.Header, "Connection")
	setXForwarded(pr)
	body := st.body
	if st.v.BodyChanged {
		body = st.v.Body
	}
	for _, k := range st.v.RemoveHeader {
		delete(pr.Out.Header, canonical(k))
	}
	for k, vals := range st.v.SetHeader {
		pr.Out.Header[canonical(k)] = vals
	}
	if body != nil {
		// io.NopCloser over a *bytes.Reader is one of the bodies net/http
		// knows to be in memory: it writes the head and the body in one
		// write (a body of another type gets the head flushed on its own
		// first: two writes, two packets).
		st.out.Reset(body)
		pr.Out.Body = io.NopCloser(&st.out)
		pr.Out.ContentLength = int64(len(body))
		// The field names the length on the wire (net/http writes
		// ContentLength, never this header); the header is kept equal to it
		// for any RoundTripper that reads it, and set only when it differs
		// (the client's own, for an unchanged body).
		var num [20]byte
		cl := strconv.AppendInt(num[:0], int64(len(body)), 10)
		if v := pr.Out.Header["Content-Length"]; len(v) != 1 || v[0] != string(cl) {
			pr.Out.Header.Set("Content-Length", string(cl))
		}
		pr.Out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	if st.v.Detach {
		// A write whose outcome is recorded: the client going away must
		// not cancel it upstream (finishBody reads its answer to the end).
		// Its own deadline, if any, still bounds it (startDeadline made
		// that context detached already). Go's transport must never send
		// it twice on its own (a POST with GetBody and an Idempotency-Key
		// header counts as replayable there).
		if st.deadline == nil {
			pr.Out = pr.Out.WithContext(context.WithoutCancel(pr.Out.Context()))
		}
		pr.Out.GetBody = nil
	}
	st.sent = time.Now()
}

// setXForwarded sets X-Forwarded-For, X-Forwarded-Host and
// X-Forwarded-Proto to what httputil.ProxyRequest.SetXForwarded sets, with
// one allocation for the three values rather than one each. The
// ReverseProxy removed the client's own before Rewrite, so
// X-Forwarded-For is the client's address alone.
func setXForwarded(pr *httputil.ProxyRequest) {
	h := pr.Out.Header
	vals := make([]string, 3)
	if ip, _, err := net.SplitHostPort(pr.In.RemoteAddr); err == nil {
		vals[0] = ip
		h["X-Forwarded-For"] = vals[0:1:1]
	} else {
		delete(h, "X-Forwarded-For")
	}
	vals[1] = pr.In.Host
	h["X-Forwarded-Host"] = vals[1:2:2]
	vals[2] = "http"
	if pr.In.TLS != nil {
		vals[2] = "https"
	}
	h["X-Forwarded-Proto"] = vals[2:3:3]
}

// canonical is http.CanonicalHeaderKey of a (lower-case) field name of a
// verdict or a local answer. Those names are few, fixed by the code and
// the configuration: canonicalNames keeps up to maxCanonicalNames of
// them, so that they are not converted (and allocated) on every request.
func canonical(k string) string {
	if c, ok := (*canonicalNames.Load())[k]; ok {
		return c
	}
	c := http.CanonicalHeaderKey(k)
	canonicalMu.Lock()
	defer canonicalMu.Unlock()
	if old := *canonicalNames.Load(); len(old) < maxCanonicalNames {
		m := make(map[string]string, len(old)+1)
		maps.Copy(m, old)
		m[k] = c
		canonicalNames.Store(&m)
	}
	return c
}

const maxCanonicalNames = 64

var (
	canonicalMu    sync.Mutex
	canonicalNames atomic.Pointer[map[string]string]
)

func init() { canonicalNames.Store(&map[string]string{}) }

// modifyResponse hands the upstream response to the pipeline: passed
// through, buffered and shaped (JSON), or rewritten event by event (SSE).
func (p *Proxy) modifyResponse(resp *http.Response) error {
	st := resp.Request.Context().Value(ctxKey{}).(*state)
	p.o.Metrics.ObserveUpstream(st.routeID, time.Since(st.sent))
	for k, vals := range st.v.ResponseExtra {
		resp.Header[canonical(k)] = vals
	}
	for _, k := range st.v.ResponseRemove {
		delete(resp.Header, canonical(k))
	}
	// One conversion for both calls: neither changes the fields it reads,
	// nor keeps the map, which therefore stays on the stack (a constant
	// size hint of at most 8; more fields grow it onto the heap).
	h := make(mcp.Header, 8)
	for k, v := range resp.Header {
		h[lower(k)] = v
	}
	if resp.ContentLength == 0 && h["content-length"] == nil {
		h["content-length"] = noBody // no body follows (ResponseHeaders)
	}
	mode, err := st.x.ResponseHeaders(resp.StatusCode, h)
	if err != nil {
		return err
	}
	switch mode {
	case gateway.BufferJSON:
		limit := p.o.MaxResponseBytes
		data, err := readAll(resp.Body, resp.ContentLength, limit+1)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if int64(len(data)) > limit {
			return errors.Join(gateway.ErrUpstreamResponse, errors.New("response exceeds the inspection limit"))
		}
		out, changed, err := st.x.ResponseBody(resp.Request.Context(), data)
		if err != nil {
			return err
		}
		if changed {
			// Shaped or decoded: relayed uncompressed.
			data = out
			resp.ContentLength = int64(len(out))
			resp.Header.Set("Content-Length", strconv.Itoa(len(out)))
			resp.Header.Del("Content-Encoding")
		}
		b := &bufferedBody{st: st}
		b.Reset(data)
		resp.Body = b
	case gateway.StreamSSE:
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Header.Set("X-Accel-Buffering", "no")
		er := newEventReader(resp.Request.Context(), resp.Body, st.x)
		er.watchSwitches() // killswitch.go
		resp.Body = &finishBody{ReadCloser: er, detach: st.v.Detach, st: st}
	default:
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Header.Set("X-Accel-Buffering", "no")
		}
		resp.Body = &finishBody{ReadCloser: resp.Body, detach: st.v.Detach, st: st}
	}
	return nil
}

// errorHandler answers when the upstream cannot be reached or its response
// cannot be inspected: the exchange's End says with what.
func (p *Proxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	st := r.Context().Value(ctxKey{}).(*state)
	defer st.done()
	if isDialError(err) {
		err = errors.Join(gateway.ErrUnreached, err)
	}
	// A tools/call's own deadline (the only calls with one) is answered
	// with a tool error, not logged as an upstream failure.
	deadline := st.deadline != nil && errors.Is(context.Cause(st.deadline), gateway.ErrDeadline)
	switch {
	case deadline:
		err = errors.Join(gateway.ErrDeadline, err)
	case errors.Is(err, context.Canceled):
		p.log.LogAttrs(r.Context(), slog.LevelDebug, "client went away", slog.String("upstream", st.routeID))
	default:
		p.log.LogAttrs(r.Context(), slog.LevelWarn, "upstream exchange failed", slog.String("upstream", st.routeID), slog.Any("error", err))
	}
	if l := st.x.End(err); l != nil {
		writeLocal(w, l, st.v.ResponseExtra)
	}
}

// noBody is the content-length value ResponseHeaders gets for a response
// without a body.
var noBody = []string{"0"}

// bufferedBody relays an answer read in full (and inspected); Close ends
// the exchange.
type bufferedBody struct {
	bytes.Reader
	st *state
}

func (b *bufferedBody) Close() error {
	b.st.finish()
	return nil
}

// finishBody records the exchange's metrics when the relay ends.
type finishBody struct {
	io.ReadCloser
	detach bool // a write: read the answer to the end even if the client left
	st     *state
}

// drainLimit bounds how long a detached write's answer is read after the
// client went away.
const drainLimit = 2 * time.Minute

func (b *finishBody) Close() error {
	if b.detach {
		// The client may have gone away mid-stream: the rest of the
		// answer is still read through the pipeline, so the write's
		// outcome is recorded rather than left unknown.
		t := time.AfterFunc(drainLimit, func() { _ = b.ReadCloser.Close() })
		_, _ = io.Copy(io.Discard, b.ReadCloser)
		t.Stop()
	}
	err := b.ReadCloser.Close()
	b.st.finish()
	return err
}

// isDialError reports whether err is a failure to connect to the
// upstream: the request was never sent.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

func writeLocal(w http.ResponseWriter, l *gateway.Local, extra mcp.Header) {
	h := w.Header()
	for k, vals := range l.Header {
		h[canonical(k)] = vals
	}
	for k, vals := range extra {
		h[canonical(k)] = vals
	}
	if l.Body != nil {
		h.Set("Content-Length", strconv.Itoa(len(l.Body)))
	}
	w.WriteHeader(l.Status)
	if l.Body != nil {
		_, _ = w.Write(l.Body)
	}
}

// fromHTTP converts header fields to the pipeline's lower-case form. The
// value slices are shared, not copied.
func fromHTTP(h http.Header) mcp.Header {
	out := make(mcp.Header, len(h))
	for k, v := range h {
		out[lower(k)] = v
	}
	return out
}

// lower is strings.ToLower(k), without allocating for the field names MCP
// requests and answers carry (k in net/http's canonical form).
func lower(k string) string {
	if l, ok := lowerNames[k]; ok {
		return l
	}
	return strings.ToLower(k)
}

// lowerNames maps canonical field names (textproto.CanonicalMIMEHeaderKey)
// to their lower-case form, built from the names themselves.
var lowerNames = func() map[string]string {
	names := []string{
		"Accept", "Accept-Encoding", "Accept-Language", "Authorization",
		"Baggage", "Cache-Control", "Connection", "Content-Encoding",
		"Content-Length", "Content-Type", "Cookie", "Date", "Etag",
		"Forwarded", "Idempotency-Key", "Keep-Alive", "Last-Event-Id",
		"Location", "Mcp-Method", "Mcp-Name", "Mcp-Protocol-Version",
		"Mcp-Session-Id", "Origin", "Pragma", "Proxy-Authorization", "Referer",
		"Retry-After", "Server", "Set-Cookie", "Te", "Traceparent",
		"Tracestate", "Trailer", "Transfer-Encoding", "Upgrade", "User-Agent",
		"Vary", "Www-Authenticate", "X-Accel-Buffering", "X-Forwarded-For",
		"X-Forwarded-Host", "X-Forwarded-Proto", "X-Request-Id",
	}
	m := make(map[string]string, len(names))
	for _, n := range names {
		m[n] = strings.ToLower(n)
	}
	return m
}()
