// Package extproc is mcpgate's Envoy adapter: an
// envoy.service.ext_proc.v3.ExternalProcessor server that hands each HTTP
// request Envoy sees to the shared pipeline and translates the verdict back
// into ext_proc responses (Envoy ext_proc filter docs; external_processor.proto).
//
// Processing modes expected from Envoy (config/envoy/): request headers
// SEND, request body BUFFERED (every decision needs the JSON-RPC body),
// response headers SEND, response body BUFFERED with allow_mode_override, so
// mcpgate can switch text/event-stream responses to STREAMED and answers it
// need not see to NONE. A request body Envoy states it sends otherwise
// (protocol_config) is refused.
//
// On a federated route the request answer names the member in
// gateway.UpstreamHeader and clears Envoy's route cache (route.go, with
// Envoy's rules for when the clear is honoured).
//
// Work on a request message is bounded by Options.MessageBudget, below
// Envoy's message_timeout. Work that legitimately takes longer (a JWKS
// fetch, a live-rights lookup) is extended up to Options.MaxMessageBudget:
// at half the budget the server sends Envoy one override_message_timeout
// on the stream, then the answer (see Options.MaxMessageBudget).
package extproc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Defaults.
const (
	// DefaultUpstreamHeader names the request header Envoy sets (with
	// OVERWRITE_IF_EXISTS_OR_ADD) to tell mcpgate the upstream.
	DefaultUpstreamHeader = "x-mcpgate-upstream"
	// DefaultMessageBudget bounds mcpgate's work on one ext_proc message;
	// it stays below Envoy's default message_timeout (200ms).
	DefaultMessageBudget = 150 * time.Millisecond
	// DefaultMaxMessageBudget is the config default of MaxMessageBudget
	// (config.DefaultMaxMessageBudget); Envoy's max_message_timeout must
	// be at least this.
	DefaultMaxMessageBudget = 5 * time.Second
	// RouteMetadataNamespace is the filter_metadata namespace of the route
	// metadata mcpgate reads (key "upstream") from the
	// "xds.route_metadata" request attribute.
	RouteMetadataNamespace = "mcpgate"
)

// Upstream is one configured upstream as the adapter needs it.
type Upstream struct {
	Name string // upstream name
	// Route is the path on which the upstream is served (see package
	// routes): it routes requests Envoy does not name the upstream of, and
	// a route with {tenant} gives every request its tenant, whichever way
	// the upstream was chosen. "" for none.
	Route string
}

// Options configure a Server.
type Options struct {
	Pipeline  *gateway.Pipeline
	Upstreams []Upstream
	// UpstreamHeader is the header Envoy sets to name the upstream
	// (DefaultUpstreamHeader when empty). Envoy must overwrite it, or a
	// client could choose; only configured names are accepted.
	UpstreamHeader string
	// MessageBudget bounds the work on one message (DefaultMessageBudget
	// when zero) when it is not extended.
	MessageBudget time.Duration
	// MaxMessageBudget, when above MessageBudget, lets the work on one
	// request message (request headers without a body, or the request
	// body) outlast MessageBudget: if it has not finished after half of
	// MessageBudget, the server sends Envoy one ProcessingResponse with
	// only override_message_timeout = MaxMessageBudget (Envoy restarts the
	// message's timer with it, if it is at most its max_message_timeout)
	// and the work may go on until MaxMessageBudget after the message
	// arrived; the answer follows on the stream. Work that ends sooner
	// sends nothing extra.
	//
	// No margin is added to the value sent: Envoy's new timer starts when
	// the override arrives, at least MessageBudget/2 after the message,
	// while mcpgate's deadline counts from the message, so mcpgate's own
	// answer to work that runs out (503, fail closed) reaches Envoy
	// MessageBudget/2 before Envoy's timer ends, and Envoy's
	// max_message_timeout need only be at least MaxMessageBudget.
	//
	// Zero never extends: the work ends at MessageBudget (as does a value
	// equal to it). Between zero and MessageBudget New refuses it.
	MaxMessageBudget time.Duration
	// Metrics counts the overrides sent; nil records nothing.
	Metrics *gateway.Metrics
	Logger  *slog.Logger
}

// Server implements envoy.service.ext_proc.v3.ExternalProcessor.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	o      Options
	log    *slog.Logger
	names  map[string]bool
	routes *routes.Table
	// extend: the work on a message may be extended (MaxMessageBudget >
	// MessageBudget); timers then holds idle *overrideTimers.
	extend bool
	timers sync.Pool
	// handle runs the pipeline on a request: Pipeline.HandleRequest (tests
	// may wrap it).
	handle func(context.Context, *gateway.Request) (*gateway.Exchange, gateway.Verdict)
}

var _ extprocv3.ExternalProcessorServer = (*Server)(nil)

// New returns the ext_proc server. It fails on routes the routes package
// refuses (bad pattern, duplicate, overlapping patterns).
func New(o Options) (*Server, error) {
	if o.UpstreamHeader == "" {
		o.UpstreamHeader = DefaultUpstreamHeader
	}
	o.UpstreamHeader = strings.ToLower(o.UpstreamHeader)
	if o.MessageBudget <= 0 {
		o.MessageBudget = DefaultMessageBudget
	}
	if o.MaxMessageBudget < 0 || o.MaxMessageBudget > 0 && o.MaxMessageBudget < o.MessageBudget {
		return nil, fmt.Errorf("extproc: MaxMessageBudget %v must be 0 (never extend) or at least MessageBudget %v", o.MaxMessageBudget, o.MessageBudget)
	}
	s := &Server{o: o, log: o.Logger, names: map[string]bool{}, extend: o.MaxMessageBudget > o.MessageBudget}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	var rs []routes.Route
	for _, u := range o.Upstreams {
		s.names[u.Name] = true
		if u.Route != "" {
			rs = append(rs, routes.Route{Path: u.Route, Upstream: u.Name})
		}
	}
	t, err := routes.New(rs)
	if err != nil {
		return nil, fmt.Errorf("extproc: %w", err)
	}
	s.routes = t
	s.handle = o.Pipeline.HandleRequest
	return s, nil
}

// exchange is the state of one HTTP request on its stream.
type exchange struct {
	s       *Server
	stream  extprocv3.ExternalProcessor_ProcessServer
	a       *answers // the stream's messages (answers.go)
	ctx     context.Context
	req     *gateway.Request
	x       *gateway.Exchange
	verdict gateway.Verdict
	mode    gateway.ResponseMode
	// streaming: a StreamSSE answer is being relayed (ResponseEvents).
	streaming bool
	finished  bool
	out       []byte
	killed    bool // a kill switch ended the response stream (killswitch.go)
	// path is the :path the upstream gets when the client's had a query
	// ("" when it had none): MCP endpoints take no query parameters, and
	// the client's query is read by the gates, never forwarded.
	path string
	// request is req's storage; repeated: the stream carried request
	// headers more than once (each replaced req).
	request  gateway.Request
	repeated bool
}

// Process serves one ext_proc stream: one HTTP request and its response.
// Every ProcessingRequest gets exactly one ProcessingResponse that answers
// it, in order; a request message whose work is extended gets one
// override_message_timeout before it.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	ctx := stream.Context()
	a := answerSets.Get().(*answers)
	defer a.release()
	ex := &a.ex
	*ex = exchange{s: s, stream: stream, ctx: ctx, a: a}
	defer ex.release()
	defer ex.finish()
	in := &ex.a.in
	for {
		if err := stream.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		resp := ex.handle(in)
		if resp == nil {
			return status.Error(codes.InvalidArgument, "mcpgate: unexpected ext_proc message")
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func (ex *exchange) finish() {
	if ex.x != nil && !ex.finished {
		ex.finished = true
		ex.x.End(nil)
	}
}

// release gives the pipeline's exchange back once the stream is done
// (after finish): nothing of the stream uses it any more.
//
// ex and the header maps its messages were converted into live in the
// stream's answers, which the next stream reuses only when nothing else
// can reach them: no pipeline exchange, or one that Release took back.
func (ex *exchange) release() {
	released := ex.x == nil || ex.x.Release()
	ex.x = nil
	ex.a.held = !released || ex.repeated
}

// fail ends the exchange with the upstream's failure err and returns the
// immediate response that answers in its place.
func (ex *exchange) fail(err error) *extprocv3.ProcessingResponse {
	ex.s.log.LogAttrs(ex.ctx, slog.LevelWarn, "upstream response cannot be inspected", slog.String("upstream", ex.req.Upstream), slog.Any("error", err))
	ex.finished = true
	return immediate(ex.x.End(err))
}

func (ex *exchange) handle(in *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	switch r := in.Request.(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return ex.requestHeaders(in, r.RequestHeaders)
	case *extprocv3.ProcessingRequest_RequestBody:
		return ex.requestBody(r.RequestBody)
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return ex.responseHeaders(r.ResponseHeaders)
	case *extprocv3.ProcessingRequest_ResponseBody:
		return ex.responseBody(r.ResponseBody)
	case *extprocv3.ProcessingRequest_RequestTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}}
	case *extprocv3.ProcessingRequest_ResponseTrailers:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}}
	}
	return nil
}

// requestHeaders starts an exchange. Without a body (GET, DELETE,
// OPTIONS) the pipeline decides at once; otherwise the decision waits for
// the buffered body.
func (ex *exchange) requestHeaders(in *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	hdr, pseudo := fromHeaderMap(h.GetHeaders(), &ex.a.maps.req)
	path, query, hasQuery := strings.Cut(pseudo.path, "?")
	if hasQuery {
		ex.path = path
	}
	if ex.req != nil {
		// A repeated message: the exchange it started may still hold
		// the request (a new one replaces it).
		ex.repeated = true
		ex.req = new(gateway.Request)
	} else {
		ex.req = &ex.request
	}
	*ex.req = gateway.Request{
		Transport: gateway.TransportExtProc,
		Method:    strings.ToUpper(pseudo.method),
		Path:      path,
		RawQuery:  query,
		Header:    hdr,
	}
	// A path the pipeline answers itself (protected resource metadata)
	// needs no upstream: whichever route Envoy chose, nothing is forwarded.
	if !ex.s.o.Pipeline.AnswersPath(path) {
		upstream, tenant, found := ex.s.upstream(in, h, hdr, path)
		switch found {
		case noUpstream:
			return immediate(gateway.Misconfigured("mcpgate: no upstream is configured for this route"))
		case notOnRoute:
			ex.s.log.LogAttrs(ex.ctx, slog.LevelDebug, "path on no route of mcpgate; 404", slog.String("upstream", upstream), slog.String("path", path))
			return immediate(gateway.NotFound())
		}
		ex.req.Upstream, ex.req.Tenant = upstream, tenant
	}
	if limit := ex.s.o.Pipeline.MaxBodyBytes(); limit > 0 && !h.GetEndOfStream() {
		// A declared length over the limit is refused before Envoy
		// buffers the body, as the standalone proxy refuses it before
		// reading: no body was read, so the id is null.
		if cl := hdr.Get("content-length"); cl != "" {
			if n, err := strconv.ParseInt(cl, 10, 64); err == nil && n > limit {
				return immediate(gateway.TooLarge(limit))
			}
		}
	}
	if !h.GetEndOfStream() {
		if l := checkBodyMode(in); l != nil {
			return immediate(l)
		}
		return ex.a.answer(requestHeaders, change{}, nil)
	}
	ex.decide(gateway.PhaseRequestHeaders)
	if ex.verdict.Local != nil {
		return immediate(ex.verdict.Local)
	}
	set, remove, clear := ex.routing(ex.withPath(ex.verdict.SetHeader), ex.verdict.RemoveHeader)
	return ex.a.answer(requestHeaders, change{header: ex.a.mutation(set, remove), clearRoute: clear}, nil)
}

// withPath returns set with the :path the upstream gets when the client's
// carried a query (a copy; set itself when it carried none).
func (ex *exchange) withPath(set mcp.Header) mcp.Header {
	if ex.path == "" {
		return set
	}
	set = set.Clone()
	if set == nil {
		set = mcp.Header{}
	}
	set[":path"] = []string{ex.path}
	return set
}

// requestBody decides on the whole body (BUFFERED mode).
func (ex *exchange) requestBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if ex.req == nil {
		return nil
	}
	if !b.GetEndOfStream() {
		// A partial body means Envoy is not in BUFFERED mode; deciding on
		// part of a message is never allowed.
		return immediate(gateway.Misconfigured("mcpgate: Envoy must send the request body BUFFERED (request_body_mode: BUFFERED)"))
	}
	ex.req.Body = b.GetBody()
	ex.decide(gateway.PhaseRequestBody)
	v := ex.verdict
	if v.Local != nil {
		return immediate(v.Local)
	}
	set := ex.withPath(v.SetHeader)
	if v.BodyChanged {
		// In BUFFERED mode Envoy keeps the headers until this answer, so
		// content-length must match the new body or Envoy rejects it.
		set = set.Clone()
		set.Set("content-length", strconv.Itoa(len(v.Body)))
	}
	set, remove, clear := ex.routing(set, v.RemoveHeader)
	return ex.a.answer(requestBody, change{header: ex.a.mutation(set, remove), setBody: v.BodyChanged, body: v.Body, clearRoute: clear}, nil)
}

// decide runs the pipeline on the request, within MessageBudget, or
// MaxMessageBudget when the work may be extended: then an override timer
// asks Envoy for the extra time if the work outlasts half of
// MessageBudget. The caller sends the answer once decide has returned,
// after any override (stream sends are never concurrent).
func (ex *exchange) decide(phase string) {
	o := &ex.s.o
	budget := o.MessageBudget
	var ot *overrideTimer
	if ex.s.extend {
		budget = o.MaxMessageBudget
		ot = ex.s.armOverride(ex, phase)
	}
	if ex.x != nil {
		// Decided again (the request's messages repeated): the exchange
		// the first decision started ends (its slot, its write) and is
		// not given back; nor is the stream's storage it may share.
		ex.finish()
		ex.finished, ex.repeated = false, true
	}
	ctx, cancel := context.WithTimeout(ex.ctx, budget)
	ex.x, ex.verdict = ex.s.handle(ctx, ex.req)
	cancel()
	if ot != nil {
		ex.s.disarmOverride(ot)
	}
	if ex.verdict.Local != nil {
		ex.finished = true // HandleRequest recorded it
	}
}

// overrideTimer sends one override_message_timeout for the message being
// decided if its work outlasts half of MessageBudget. Its AfterFunc timer
// is reused (Server.timers) as long as it never fired, so the common case
// — work done in time — allocates nothing and sends nothing. It holds the
// stream, not the exchange, so that the exchange can stay on the stack.
type overrideTimer struct {
	s  *Server
	t  *time.Timer
	mu sync.Mutex // held while the override is sent
	// Guarded by mu. stream is nil when nothing is to be sent: the
	// message was answered, or the override was sent.
	stream   extprocv3.ExternalProcessor_ProcessServer
	ctx      context.Context // the stream's
	phase    string          // gateway.PhaseRequestHeaders or gateway.PhaseRequestBody
	upstream string          // of the request, for the log
}

// armOverride starts the override timer for ex's message.
func (s *Server) armOverride(ex *exchange, phase string) *overrideTimer {
	ot, _ := s.timers.Get().(*overrideTimer)
	fresh := ot == nil
	if fresh {
		ot = &overrideTimer{s: s}
	}
	ot.mu.Lock()
	ot.stream, ot.ctx, ot.phase, ot.upstream = ex.stream, ex.ctx, phase, ex.req.Upstream
	ot.mu.Unlock()
	if fresh {
		ot.t = time.AfterFunc(s.o.MessageBudget/2, ot.fire)
	} else {
		ot.t.Reset(s.o.MessageBudget / 2)
	}
	return ot
}

// disarmOverride stops the override timer once the message's work is
// done. If the timer fired, it waits until the override has been sent,
// so that the answer follows it on the stream, and drops the timer (its
// function may still be about to run); otherwise the timer goes back to
// the pool.
func (s *Server) disarmOverride(ot *overrideTimer) {
	stopped := ot.t.Stop()
	ot.mu.Lock()
	ot.stream, ot.ctx = nil, nil
	ot.mu.Unlock()
	if stopped {
		s.timers.Put(ot)
	}
}

// fire runs on the timer's goroutine while the message's work goes on.
func (ot *overrideTimer) fire() {
	ot.mu.Lock()
	defer ot.mu.Unlock()
	if ot.stream == nil {
		return // answered meanwhile
	}
	s, stream, ctx := ot.s, ot.stream, ot.ctx
	ot.stream, ot.ctx = nil, nil
	if err := stream.Send(&extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(s.o.MaxMessageBudget)}); err != nil {
		// The stream is gone (Envoy reset it): the work's context ends
		// with it.
		s.log.LogAttrs(ctx, slog.LevelDebug, "override_message_timeout not sent", slog.String("phase", ot.phase), slog.Any("error", err))
		return
	}
	s.o.Metrics.ExtProcTimeoutOverride(ot.phase)
	s.log.LogAttrs(ctx, slog.LevelDebug, "message work outlasts half the budget; asked Envoy for more time",
		slog.String("phase", ot.phase), slog.String("upstream", ot.upstream), slog.Duration("override_message_timeout", s.o.MaxMessageBudget))
}

// responseHeaders chooses how the response body is handled: not at all
// (NONE), BUFFERED JSON, or STREAMED SSE event by event.
func (ex *exchange) responseHeaders(h *extprocv3.HttpHeaders) *extprocv3.ProcessingResponse {
	if ex.x == nil {
		return ex.a.answer(responseHeaders, change{}, nil)
	}
	hdr, pseudo := fromHeaderMap(h.GetHeaders(), &ex.a.maps.resp)
	code, _ := strconv.Atoi(pseudo.status)
	ex.checkRouted(code)
	if h.GetEndOfStream() && hdr["content-length"] == nil {
		hdr["content-length"] = noBody // no body follows (ResponseHeaders)
	}
	mode, err := ex.x.ResponseHeaders(code, hdr)
	if err != nil {
		return ex.fail(err)
	}
	ex.mode = mode
	set := ex.verdict.ResponseExtra
	remove := ex.verdict.ResponseRemove // read only: appending copies
	if len(remove) > 0 {
		remove = remove[:len(remove):len(remove)]
	}
	var override *extprocfilterv3.ProcessingMode
	switch {
	case h.GetEndOfStream():
		ex.finish()
	case mode == gateway.PassThrough:
		// Nothing to inspect: Envoy relays the body itself, streams
		// included, without buffering it for mcpgate.
		override = passThroughMode
		ex.finish()
	case mode == gateway.StreamSSE:
		override = streamedMode
		remove = append(remove, "content-length")
		if set == nil {
			set = mcp.Header{}
		} else {
			set = set.Clone()
		}
		set.Set("x-accel-buffering", "no")
		ex.streaming = true
	}
	return ex.a.answer(responseHeaders, change{header: ex.a.mutation(set, remove)}, override)
}

// responseBody shapes a BUFFERED JSON body, or one STREAMED chunk of SSE.
func (ex *exchange) responseBody(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if ex.x == nil || ex.finished && !ex.streaming {
		return ex.a.answer(responseBody, change{}, nil) // nothing to do, or a repeated end of stream
	}
	switch ex.mode {
	case gateway.BufferJSON:
		if !b.GetEndOfStream() {
			return ex.a.answer(responseBody, change{}, nil)
		}
		out, changed, err := ex.x.ResponseBody(ex.ctx, b.GetBody())
		if err != nil {
			return ex.fail(err)
		}
		ex.finish()
		if !changed {
			return ex.a.answer(responseBody, change{}, nil)
		}
		// Shaped or decoded: relayed uncompressed. In BUFFERED mode Envoy
		// holds the headers until this answer and applies its mutation.
		return ex.a.answer(responseBody, change{header: ex.a.contentLength(len(out), contentEncoding), setBody: true, body: out}, nil)
	case gateway.StreamSSE:
		if !ex.streaming {
			return ex.a.answer(responseBody, change{}, nil) // a repeated end of stream
		}
		ex.out = ex.out[:0]
		emit := func(p []byte) error { ex.out = append(ex.out, p...); return nil }
		var end error
		if b.GetEndOfStream() {
			end = io.EOF
		}
		// mcpgate's own events (a tools/list_changed announcement) ride on
		// this chunk: ext_proc can only answer the messages Envoy sends,
		// so an announcement waits for the upstream's next chunk.
		err := ex.x.ResponseEvents(ex.ctx, b.GetBody(), end, emit)
		if errors.Is(err, gateway.ErrStreamStopped) {
			return ex.stopped(b) // killswitch.go
		}
		if end != nil {
			ex.streaming = false
			ex.finish()
		}
		// ex.out is sent as it is: the answer is marshalled before the
		// next chunk reuses it (answers).
		return ex.a.answer(responseBody, change{setBody: len(ex.out) > 0, body: ex.out, clearBody: len(ex.out) == 0}, nil)
	}
	return ex.a.answer(responseBody, change{}, nil)
}

// Results of Server.upstream.
const (
	found      = iota
	noUpstream // Envoy named an upstream mcpgate does not know: its configuration is wrong (500)
	// notOnRoute: nothing named the upstream and the path is on no route
	// (with several upstreams), or the upstream's route has {tenant} and
	// the path is not on it (404, as the standalone proxy answers).
	notOnRoute
)

// upstream resolves the upstream of a request: the route metadata Envoy
// sends as the "xds.route_metadata" attribute (namespace "mcpgate", key
// "upstream"), else the configured header, else the configured routes,
// else the only upstream. Unknown names never match (500); a path on no
// route is 404.
//
// When the upstream's route has a {tenant} segment, the path must be on
// that route, whichever way the upstream was chosen: it names the tenant
// (and so the resource URI, the tenant the credential must serve and the
// metadata). A path that is not — e.g. "/t/%61cme/mcp", or a route
// Envoy maps more widely than mcpgate's — is refused with 404, as the
// standalone proxy refuses it; nothing is forwarded without a tenant.
// An upstream with an exact route is served on any path Envoy sends it.
func (s *Server) upstream(in *extprocv3.ProcessingRequest, h *extprocv3.HttpHeaders, hdr mcp.Header, path string) (upstream, tenant string, result int) {
	name := ""
	for _, attrs := range []map[string]*structpb.Struct{in.GetAttributes(), h.GetAttributes()} {
		for _, a := range attrs {
			if name = routeUpstream(a); name != "" {
				break
			}
		}
		if name != "" {
			break
		}
	}
	if name == "" {
		name = hdr.Get(s.o.UpstreamHeader)
	}
	if name == "" {
		if u, t, ok := s.routes.Match(path); ok {
			return u, t, found
		}
		switch len(s.o.Upstreams) {
		case 0:
			return "", "", noUpstream
		case 1:
		default:
			return "", "", notOnRoute
		}
		name = s.o.Upstreams[0].Name
	}
	if !s.names[name] {
		return "", "", noUpstream
	}
	if p, ok := s.routes.Pattern(name); ok && p.HasTenant() {
		t, ok := p.Match(path)
		if !ok {
			return "", "", notOnRoute
		}
		return name, t, found
	}
	return name, "", found
}

// noBody is the content-length value ResponseHeaders gets for response
// headers with end_of_stream (no body follows).
var noBody = []string{"0"}

// contentEncoding is the removal that goes with a decoded answer; shared,
// never modified.
var contentEncoding = []string{"content-encoding"}

// immediate turns a local answer into an ImmediateResponse. Envoy's own
// default content type is text/plain, so the answer's headers are always
// set explicitly.
func immediate(l *gateway.Local) *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: &extprocv3.ImmediateResponse{
		Status:  &typev3.HttpStatus{Code: typev3.StatusCode(l.Status)},
		Headers: mutation(l.Header, nil),
		Body:    l.Body,
		Details: "mcpgate",
	}}}
}

// pseudoHeaders are the pseudo-header fields of an Envoy header map that
// mcpgate reads (RFC 9113 section 8.3); the others are dropped.
type pseudoHeaders struct {
	method, path, status string
}

// fromHeaderMap converts Envoy's header map: regular fields into the
// pipeline's lower-case Header, the pseudo-headers ":method", ":path" and
// ":status" apart (the last value wins). Envoy sends values in raw_value
// (value in older releases).
//
// A value from raw_value is a string over the message's own bytes
// (rawString), not a copy: a received message is never written to, and
// protobuf's Unmarshal copies every bytes field out of gRPC's buffer. The
// first values of all fields share one backing array, each field's slice
// capped at length 1, so that a repeated field — or a later Add by the
// pipeline — appends into a fresh array and never overwrites the next
// field's value. Envoy's header map keeps names lower-case whatever the
// client's protocol, so lower-casing costs a scan and no copy.
//
// The map and the values' array come from st when it has them and has
// not given them out on this stream yet (it then records them as given
// out); st nil: both are new.
func fromHeaderMap(hm *corev3.HeaderMap, st *headerStorage) (mcp.Header, pseudoHeaders) {
	hvs := hm.GetHeaders()
	regular := 0
	for _, hv := range hvs {
		if !strings.HasPrefix(hv.GetKey(), ":") {
			regular++
		}
	}
	var hdr mcp.Header
	var vals []string
	if st != nil && !st.given {
		hdr, vals = st.m, st.vals[:0]
	}
	if hdr == nil {
		hdr = make(mcp.Header, regular)
	}
	if cap(vals) < regular {
		vals = make([]string, 0, regular) // never grows below: values keep their array
	}
	if st != nil && !st.given {
		st.m, st.vals, st.given = hdr, vals, true // (cleared reads vals to its capacity)
	}
	var p pseudoHeaders
	for _, hv := range hvs {
		k := strings.ToLower(hv.GetKey())
		v := hv.GetValue()
		if raw := hv.GetRawValue(); len(raw) > 0 {
			v = rawString(raw)
		}
		if strings.HasPrefix(k, ":") {
			switch k {
			case ":method":
				p.method = v
			case ":path":
				p.path = v
			case ":status":
				p.status = v
			}
			continue
		}
		if prev, ok := hdr[k]; ok {
			hdr[k] = append(prev, v)
			continue
		}
		vals = append(vals, v)
		n := len(vals)
		hdr[k] = vals[n-1 : n : n]
	}
	return hdr, p
}

// rawString is b as a string without a copy, for bytes of a received
// message (never written to after Unmarshal).
func rawString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// FlowControlWindow is the HTTP/2 flow-control window, in bytes, the
// ext_proc listener grants Envoy per stream and per connection (RFC 9113
// section 6.9.2: SETTINGS_INITIAL_WINDOW_SIZE, and a connection-level
// WINDOW_UPDATE).
//
// A fixed window turns off grpc-go's bandwidth-delay estimation, which
// otherwise sends a PING and a WINDOW_UPDATE after nearly every DATA frame
// it receives when messages are as small as ext_proc's, and processes
// each PING's acknowledgement; with the fixed window it sends none of
// them. The estimation pays on long,
// high-latency links; Envoy talks to mcpgate over loopback, a Unix socket
// or a cluster network. 1 MiB lets a request body up to about 1 MiB
// arrive without waiting for a window update (a larger message is granted
// its window when grpc-go reads its length: one extra round trip, as
// with the estimator's 64 KiB start), and bounds what a stream Envoy
// feeds faster than mcpgate answers (STREAMED SSE chunks) can queue in
// mcpgate (the estimator may grow the window to 16 MiB).
const FlowControlWindow = 1 << 20

// KeepaliveMinTime is the shortest interval at which the ext_proc listener
// accepts HTTP/2 PINGs from Envoy, with or without open streams. The
// Envoy configurations mcpgate ships (config/envoy, the chart) send
// connection_keepalive PINGs every 30 s; grpc-go's default policy (5
// minutes, none without streams) counts those as abuse on an idle
// connection and closes it with GOAWAY ENHANCE_YOUR_CALM
// ("too_many_pings") at the fourth (three strikes, grpc-go
// http2Server.handlePing), so Envoy reconnected after every ~2 minutes of
// quiet. Pings more frequent than this still end the connection.
const KeepaliveMinTime = 10 * time.Second

// StreamWorkers is the number of goroutines the ext_proc listener keeps to
// serve streams (grpc.NumStreamWorkers): 8 per CPU.
//
// A stream that finds every worker busy is served on a new goroutine,
// whose stack grows, by copying, to the depth of the pipeline (the
// policy's evaluation, hashing, JSON); a worker keeps its grown stack from
// one stream to the next. Envoy holds one stream open for the whole of
// each HTTP request it sends through mcpgate, upstream time included, so
// the streams open at once follow the requests in flight. But grpc-go
// hands a stream to the worker that has waited longest, so a large pool
// cycles through all its stacks, and the garbage collector shrinks those
// of workers it finds idle, which then grow again. In CPU profiles of the
// e2e bench (8 requests in flight, 2 CPUs, 20 000 calls each), stack
// growth took 2.7 % of the server's CPU with 4 workers per CPU (a sixth of
// the streams' CPU on new goroutines), 1.1 % with 32 per CPU (no new
// goroutines, regrowth after shrinking) and none with 8 per CPU.
func StreamWorkers() int { return 8 * runtime.GOMAXPROCS(0) }

// GRPCServerOptions are the grpc-go server options the ext_proc listener
// needs: messages up to maxMsg bytes (the body limit plus headroom); a
// pool of stream workers (StreamWorkers); a fixed flow-control window
// (FlowControlWindow); and Envoy's keepalive PINGs allowed
// (KeepaliveMinTime).
func GRPCServerOptions(maxMsg int) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.MaxRecvMsgSize(maxMsg),
		grpc.MaxSendMsgSize(maxMsg),
		grpc.NumStreamWorkers(uint32(StreamWorkers())),
		grpc.InitialWindowSize(FlowControlWindow),
		grpc.InitialConnWindowSize(FlowControlWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: KeepaliveMinTime, PermitWithoutStream: true}),
	}
}
