package envoydriver

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// Defaults, each Envoy's own.
const (
	// DefaultMessageTimeout is ExternalProcessor.message_timeout's default.
	DefaultMessageTimeout = 200 * time.Millisecond
	// DefaultBufferLimit is per_connection_buffer_limit_bytes' default
	// (1 MiB), which bounds what a filter may buffer per stream.
	DefaultBufferLimit = 1 << 20
	// remoteCloseTimeout is how long a gracefully closed side stream waits for
	// the server to finish (envoy.filters.http.ext_proc.remote_close_timeout_milliseconds).
	remoteCloseTimeout = time.Second
	// readChunkSize bounds one body chunk read from the client or upstream.
	readChunkSize = 16 << 10
)

// Config configures a Driver. Field names follow the Envoy ext_proc filter
// configuration (envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor).
type Config struct {
	// Target is the gRPC target of the ext_proc server, for example
	// "127.0.0.1:9002" or "unix:///tmp/x.sock". Required.
	Target string
	// Upstream is where the "router" forwards: scheme://host:port. The path
	// and query come from the (possibly mutated) :path header. Required
	// unless Routes is set.
	Upstream *url.URL
	// Routes is the route table, matched in order on the request headers
	// (see Route); empty means one route for every request, to Upstream,
	// with RouteName, ClusterName and RouteMetadata. With Routes, those
	// four stay unset. No route matching is answered 404, as Envoy's
	// router does.
	Routes []Route
	// RouteCacheAction is route_cache_action: DEFAULT (the zero value)
	// honours clear_route_cache in answers, CLEAR clears the route cache on
	// every request answer with a header mutation, RETAIN never clears.
	RouteCacheAction extprocfilterv3.ExternalProcessor_RouteCacheAction
	// DisableClearRouteCache is disable_clear_route_cache (RETAIN); New
	// refuses it together with a RouteCacheAction other than DEFAULT.
	DisableClearRouteCache bool
	// Mode is the filter's processing_mode. Nil means request headers SEND,
	// request body BUFFERED, response headers SEND, response body BUFFERED,
	// trailers SKIP. Body modes NONE, STREAMED and BUFFERED are supported;
	// BUFFERED_PARTIAL, FULL_DUPLEX_STREAMED and GRPC are refused by New.
	// Trailers are never sent (the driver never relays HTTP trailers), so a
	// trailer mode of SEND has no effect.
	Mode *extprocfilterv3.ProcessingMode
	// AllowModeOverride is allow_mode_override. Envoy's default, and the zero
	// value here, is false: mode_override in responses is ignored. mcpgate's
	// Envoy configuration sets it to true.
	AllowModeOverride bool
	// AllowedOverrideModes is allowed_override_modes; empty allows any.
	AllowedOverrideModes []*extprocfilterv3.ProcessingMode
	// MessageTimeout is message_timeout; 0 means Envoy's default, 200ms.
	MessageTimeout time.Duration
	// MaxMessageTimeout is max_message_timeout, the upper bound of an
	// override_message_timeout; 0 (Envoy's default) ignores every override.
	MaxMessageTimeout time.Duration
	// FailureModeAllow is failure_mode_allow: on a stream error, timeout or
	// spurious message continue unprocessed instead of answering 500/504.
	FailureModeAllow bool
	// BufferLimit is the per-stream buffer limit in bytes for BUFFERED bodies;
	// 0 means 1 MiB. A request body over it is answered 413, a response body
	// over it 500, as Envoy's filter manager does.
	BufferLimit int
	// RouteMetadata is the route's metadata (filter_metadata namespace →
	// fields), exposed as the "xds.route_metadata" attribute.
	RouteMetadata map[string]map[string]any
	// RouteName and ClusterName are exposed as "xds.route_name" and
	// "xds.cluster_name".
	RouteName, ClusterName string
	// RequestAttributes is request_attributes: sent once, with the first
	// request-path message, in ProcessingRequest.attributes[
	// "envoy.filters.http.ext_proc"]. Supported: request.{path, url_path,
	// query, host, scheme, method, id, referer, useragent, protocol, time,
	// headers}, source.{address, port}, destination.{address, port},
	// connection.mtls, xds.{route_name, cluster_name, route_metadata}. As in
	// Envoy, message-typed values such as xds.route_metadata arrive as a
	// string in protobuf text format and unknown attributes are left out.
	RequestAttributes []string
	// ResponseAttributes is response_attributes (sent with the first
	// response-path message); additionally supports response.code.
	ResponseAttributes []string
	// GRPCInitialMetadata is grpc_service.initial_metadata (or, per route,
	// ExtProcPerRoute.overrides.grpc_initial_metadata): sent as gRPC
	// metadata on every Process stream.
	GRPCInitialMetadata map[string]string
	// Client is the "router"'s HTTP client. Nil means a transport with
	// compression off and a 5s connect timeout (Envoy's cluster default).
	// Redirects are never followed.
	Client *http.Client
	// Logf, when set, traces every message sent and received.
	Logf func(format string, args ...any)
}

// PhaseCounts counts ext_proc messages per phase.
type PhaseCounts struct {
	RequestHeaders, RequestBody, RequestTrailers    int64
	ResponseHeaders, ResponseBody, ResponseTrailers int64
}

// Stats are cumulative counters, named after Envoy's ext_proc statistics
// where one exists.
type Stats struct {
	// StreamsStarted counts Process streams opened (streams_started).
	StreamsStarted int64
	// StreamsFailed counts streams that ended with a non-OK gRPC status,
	// including streams that could not be opened (streams_failed).
	StreamsFailed int64
	// StreamsClosedByServer counts streams the server ended with OK status
	// while processing was still going on; Envoy then continues unprocessed.
	StreamsClosedByServer int64
	// Sent counts messages sent per phase (stream_msgs_sent).
	Sent PhaseCounts
	// Received counts responses accepted per phase (stream_msgs_received).
	Received PhaseCounts
	// ImmediateResponses counts ImmediateResponse messages acted on.
	ImmediateResponses int64
	// SpuriousMessages counts responses that matched no outstanding message
	// (spurious_msgs_received).
	SpuriousMessages int64
	// MessageTimeouts counts expired per-message timers (message_timeouts).
	MessageTimeouts int64
	// OverrideTimeoutsReceived and OverrideTimeoutsIgnored count
	// override_message_timeout messages honoured and ignored.
	OverrideTimeoutsReceived, OverrideTimeoutsIgnored int64
	// FailureModeAllowed counts failures passed over by FailureModeAllow.
	FailureModeAllowed int64
	// RejectedHeaderMutations counts header mutations refused by the mutation
	// rules (rejected_header_mutations).
	RejectedHeaderMutations int64
	// RejectedBodyMutations counts BUFFERED body mutations refused because
	// their length differs from the content-length header (answered 500).
	RejectedBodyMutations int64
	// ProcessingErrors counts responses Envoy answers with a 500 local reply:
	// invalid header mutations, rejected body mutations.
	ProcessingErrors int64
	// ModeOverrides and ModeOverridesIgnored count mode_override fields
	// applied and ignored.
	ModeOverrides, ModeOverridesIgnored int64
	// ClearRouteCache counts route caches cleared by an answer.
	ClearRouteCache int64
	// ClearRouteCacheIgnored counts clear_route_cache in answers without a
	// header mutation (clear_route_cache_ignored); ClearRouteCacheDisabled
	// those ignored under RETAIN (clear_route_cache_disabled).
	ClearRouteCacheIgnored, ClearRouteCacheDisabled int64
	// LocalReplies counts responses generated by the driver itself
	// (immediate responses, 413/500/503/504 …).
	LocalReplies int64
	// StreamResets counts downstream streams reset because a local reply
	// was due after the response headers had been sent.
	StreamResets int64
	// UpstreamRequests and UpstreamFailures count requests forwarded and
	// those that failed before a response (503).
	UpstreamRequests, UpstreamFailures int64
	// Unsupported counts requests failed (500) because a mode_override asked
	// for a body mode this driver does not model.
	Unsupported int64
}

type phase int

const (
	phaseRequestHeaders phase = iota
	phaseRequestBody
	phaseRequestTrailers
	phaseResponseHeaders
	phaseResponseBody
	phaseResponseTrailers
	numPhases
)

func (p phase) String() string {
	return [...]string{"request_headers", "request_body", "request_trailers",
		"response_headers", "response_body", "response_trailers"}[p]
}

type counters struct {
	streamsStarted, streamsFailed, streamsClosedByServer atomic.Int64
	sent, received                                       [numPhases]atomic.Int64
	immediate, spurious, timeouts                        atomic.Int64
	overrideReceived, overrideIgnored                    atomic.Int64
	failureModeAllowed                                   atomic.Int64
	rejectedHeaderMutations, rejectedBodyMutations       atomic.Int64
	processingErrors                                     atomic.Int64
	modeOverrides, modeOverridesIgnored                  atomic.Int64
	clearRouteCache, localReplies, streamResets          atomic.Int64
	clearRouteCacheIgnored, clearRouteCacheDisabled      atomic.Int64
	upstreamRequests, upstreamFailures, unsupported      atomic.Int64
}

func phaseCounts(c *[numPhases]atomic.Int64) PhaseCounts {
	return PhaseCounts{
		RequestHeaders: c[phaseRequestHeaders].Load(), RequestBody: c[phaseRequestBody].Load(),
		RequestTrailers: c[phaseRequestTrailers].Load(), ResponseHeaders: c[phaseResponseHeaders].Load(),
		ResponseBody: c[phaseResponseBody].Load(), ResponseTrailers: c[phaseResponseTrailers].Load(),
	}
}

// Driver is an http.Handler that plays Envoy's "ext_proc filter → router"
// HTTP filter chain against a real ext_proc server and a real upstream.
type Driver struct {
	cfg        Config
	mode       *extprocfilterv3.ProcessingMode
	routes     []*route
	routeCache extprocfilterv3.ExternalProcessor_RouteCacheAction
	conn       *grpc.ClientConn
	client     extprocv3.ExternalProcessorClient
	http       *http.Client
	ownHTTP    bool
	st         counters
	bgMu       sync.Mutex     // orders Close against graceful closes starting
	bg         sync.WaitGroup // graceful side-stream closes
	closed     bool           // under bgMu: Close has begun
}

var _ http.Handler = (*Driver)(nil)

// New validates cfg and connects (lazily, as gRPC does) to the ext_proc server.
func New(cfg Config) (*Driver, error) {
	var errs []error
	if cfg.Target == "" {
		errs = append(errs, errors.New("Target is required"))
	}
	routes, err := compileRoutes(&cfg)
	if err != nil {
		errs = append(errs, err)
	}
	rca, err := routeCacheAction(&cfg)
	if err != nil {
		errs = append(errs, err)
	}
	if cfg.MessageTimeout < 0 || cfg.MaxMessageTimeout < 0 || cfg.BufferLimit < 0 {
		errs = append(errs, errors.New("MessageTimeout, MaxMessageTimeout and BufferLimit must not be negative"))
	}
	mode := defaultMode()
	if cfg.Mode != nil {
		mode = proto.Clone(cfg.Mode).(*extprocfilterv3.ProcessingMode)
	}
	for _, m := range []extprocfilterv3.ProcessingMode_BodySendMode{mode.GetRequestBodyMode(), mode.GetResponseBodyMode()} {
		if !supportedBodyMode(m) {
			errs = append(errs, fmt.Errorf("body mode %v is not modelled by this driver", m))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("envoydriver: %w", err)
	}
	if cfg.MessageTimeout == 0 {
		cfg.MessageTimeout = DefaultMessageTimeout
	}
	if cfg.BufferLimit == 0 {
		cfg.BufferLimit = DefaultBufferLimit
	}
	// Envoy's HTTP/2 client uses fixed flow-control windows (its defaults,
	// initial_stream_window_size and initial_connection_window_size, are
	// 256 MiB) and never probes the bandwidth-delay product with PINGs the
	// way grpc-go's client does; a fixed window turns that probing off, so
	// the server answers what Envoy would send and nothing more.
	conn, err := grpc.NewClient(cfg.Target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(envoyWindow), grpc.WithInitialConnWindowSize(envoyWindow))
	if err != nil {
		return nil, fmt.Errorf("envoydriver: ext_proc target %q: %w", cfg.Target, err)
	}
	d := &Driver{cfg: cfg, mode: mode, routes: routes, routeCache: rca, conn: conn, client: extprocv3.NewExternalProcessorClient(conn)}
	if cfg.Client != nil {
		c := *cfg.Client
		d.http = &c
	} else {
		d.ownHTTP = true
		d.http = &http.Client{Transport: &http.Transport{
			DisableCompression:  true,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
		}}
	}
	d.http.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return d, nil
}

func defaultMode() *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SEND,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		ResponseBodyMode:    extprocfilterv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
}

func supportedBodyMode(m extprocfilterv3.ProcessingMode_BodySendMode) bool {
	switch m {
	case extprocfilterv3.ProcessingMode_NONE, extprocfilterv3.ProcessingMode_STREAMED, extprocfilterv3.ProcessingMode_BUFFERED:
		return true
	}
	return false
}

// ServeHTTP runs one HTTP request through the filter chain.
func (d *Driver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := newExchange(d, w, r)
	if x.run() {
		// The stream was reset after the response started (or the
		// upstream reset it): the client sees a broken response.
		panic(http.ErrAbortHandler)
	}
}

// Close waits for side streams being closed gracefully, then closes the gRPC
// connection and, if the driver made it, the upstream client's idle
// connections.
func (d *Driver) Close() error {
	d.bgMu.Lock()
	was := d.closed
	d.closed = true
	d.bgMu.Unlock()
	if was {
		return nil
	}
	d.bg.Wait()
	if d.ownHTTP {
		d.http.CloseIdleConnections()
	}
	return d.conn.Close()
}

// background counts one more graceful close for Close to wait for, or
// reports false once Close has begun (an HTTP server's Close does not wait
// for its handlers, so exchanges may still be ending).
func (d *Driver) background() bool {
	d.bgMu.Lock()
	defer d.bgMu.Unlock()
	if d.closed {
		return false
	}
	d.bg.Add(1)
	return true
}

// Stats returns a snapshot of the counters.
func (d *Driver) Stats() Stats {
	c := &d.st
	return Stats{
		StreamsStarted: c.streamsStarted.Load(), StreamsFailed: c.streamsFailed.Load(),
		StreamsClosedByServer: c.streamsClosedByServer.Load(),
		Sent:                  phaseCounts(&c.sent), Received: phaseCounts(&c.received),
		ImmediateResponses: c.immediate.Load(), SpuriousMessages: c.spurious.Load(),
		MessageTimeouts:          c.timeouts.Load(),
		OverrideTimeoutsReceived: c.overrideReceived.Load(), OverrideTimeoutsIgnored: c.overrideIgnored.Load(),
		FailureModeAllowed:      c.failureModeAllowed.Load(),
		RejectedHeaderMutations: c.rejectedHeaderMutations.Load(), RejectedBodyMutations: c.rejectedBodyMutations.Load(),
		ProcessingErrors: c.processingErrors.Load(),
		ModeOverrides:    c.modeOverrides.Load(), ModeOverridesIgnored: c.modeOverridesIgnored.Load(),
		ClearRouteCache: c.clearRouteCache.Load(), LocalReplies: c.localReplies.Load(),
		ClearRouteCacheIgnored: c.clearRouteCacheIgnored.Load(), ClearRouteCacheDisabled: c.clearRouteCacheDisabled.Load(),
		StreamResets:     c.streamResets.Load(),
		UpstreamRequests: c.upstreamRequests.Load(), UpstreamFailures: c.upstreamFailures.Load(),
		Unsupported: c.unsupported.Load(),
	}
}

func (d *Driver) logf(format string, args ...any) {
	if d.cfg.Logf != nil {
		d.cfg.Logf(format, args...)
	}
}

// envoyWindow is Envoy's default HTTP/2 stream and connection flow-control
// window (http2_protocol_options initial_stream_window_size and
// initial_connection_window_size: 268435456 bytes).
const envoyWindow = 256 << 20
