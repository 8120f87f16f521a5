package gateway

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/gateway/clip"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/ratelimit"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// Transport kinds, the values of the metrics label "transport".
const (
	TransportProxy   = "proxy"
	TransportExtProc = "extproc"
)

// Decider evaluates the policy; *policy.Engine implements it.
type Decider interface {
	Decide(ctx context.Context, in *policy.Input) (*policy.Decision, error)
}

var _ Decider = (*policy.Engine)(nil)

// Options configure a Pipeline. Zero limits take the config package's
// defaults through the caller; the pipeline itself does not default them.
type Options struct {
	// Declarations are the per-tool declarations, upstream → tool → declaration.
	Declarations map[string]map[string]policy.ToolDeclaration
	// UndeclaredTools say, per upstream, what happens to the tools it lists
	// that Declarations do not declare (policy.Tool.Undeclared):
	// policy.UndeclaredConfirm lists them and has every call confirmed by
	// a person; absent (or policy.UndeclaredRefuse) hides and refuses them.
	UndeclaredTools map[string]string
	// Instructions returns a note the gateway adds to the instructions of
	// an upstream's initialize and server/discover results (after the
	// upstream's own, if any), e.g. which tools it hides because nobody
	// declared them and what the operator can add: a client that reads
	// the list before calling learns why tools are missing. nil, or "",
	// adds nothing.
	Instructions func(upstream string) string
	// MaxBodyBytes bounds a request body, after decoding (413 above it).
	MaxBodyBytes int64
	// MaxJSONDepth bounds nesting in a JSON body (request or response).
	MaxJSONDepth int
	// MaxSSEEventBytes bounds one server-sent event the pipeline inspects.
	MaxSSEEventBytes int
	// AllowedOrigins are the accepted Origin values (exact match, case
	// folded); loopback origins are accepted when the list is empty.
	AllowedOrigins []string
	// TenantArguments are argument names, besides DefaultTenantArguments,
	// that would choose a tenant (compared case-insensitively); the policy
	// refuses calls carrying them.
	TenantArguments []string
	// Authenticator verifies credentials; nil runs without
	// authentication (every caller anonymous, client headers forwarded
	// as they are).
	Authenticator Authenticator
	// ResourceMetadata returns the OAuth Protected Resource Metadata
	// document (RFC 9728) the pipeline serves itself, unauthenticated, to
	// GET at a request path, ok false when there is none there. It is
	// asked for every request path (cheaply answer paths outside
	// /.well-known/oauth-protected-resource) and must answer the paths of
	// tenant routes (/.well-known/oauth-protected-resource/t/acme/mcp)
	// without remembering every tenant ever asked for. Set with an
	// Authenticator; nil serves none.
	ResourceMetadata func(path string) (doc []byte, ok bool)
	// Asserter signs the identity assertion forwarded requests carry
	// (AssertionHeader); nil forwards none. Used with an Authenticator.
	Asserter Asserter
	// JWKS returns the public keys of the assertions (a JWK Set), served
	// at JWKSPath; nil serves nothing there.
	JWKS func() []byte
	// Sessions binds older revisions' session ids to the principal that
	// created them; nil leaves sessions to the upstream alone.
	Sessions store.SessionStore
	// SessionTTL is how long a binding lives (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// StripHeaders are further request header fields (lower case) removed
	// before forwarding, e.g. the tenant header the authenticator read.
	StripHeaders []string
	// TenantHeader is the request header field (lower case) a client may
	// name its tenant in (auth.tenant_header); "" for none. The transport
	// gate refuses it repeated or holding a comma.
	TenantHeader string
	// Audit, when set, receives one record per tools/call that reached a
	// decision (allowed, refused); it must not block (see store.Auditor).
	Audit func(ctx context.Context, r store.AuditRecord)
	// Catalog is mcpgate's own listing of the upstreams' tools: tools/list
	// is answered from it and tools/call arguments are checked against
	// it. nil: tools/list is forwarded and filtered, no schema checks.
	Catalog ToolCatalog
	// ListTTL is the ttlMs of tools/list answers given from the catalog
	// (never longer than the live-rights staleness bound).
	ListTTL time.Duration
	// SecretNames are result member names always dropped from tool
	// results (any depth), whatever the declarations allow.
	SecretNames []string
	// Tasks configures MCP tasks (gateway/tasks.go); the zero value
	// refuses every task path.
	Tasks TaskOptions
	// Extensions are the capability extensions and experimental
	// capabilities that pass between client and upstream; every other one
	// is stripped (gateway/extensions.go).
	Extensions []string
	// OnToolsChanged is called when an upstream announces
	// notifications/tools/list_changed in a stream the pipeline relays
	// (the catalog then lists it again). It must not block.
	OnToolsChanged func(upstream string)
	// Switches are the kill switches (killswitch.go), read right after
	// authentication; nil: no kill switch (no state store).
	Switches Switches
	// Toolsets are the configured toolsets (toolsets.go); nil: only the
	// built-in "full". A credential bound to another toolset is refused.
	Toolsets *Toolsets
	// ResourceTenants are, per upstream, the patterns that say where the
	// tenant sits in its resource URIs (upstreams[].resource_tenant, see
	// routes.CompileResourcePattern and resources.go).
	ResourceTenants map[string][]string
	// Writes turns on write safety: replay protection, two-step
	// confirmation and the gateway tools confirm_action, reject_action
	// and list_recent_changes (writes.go). nil: off, and a call the
	// policy marks for replay protection or confirmation is refused.
	Writes *WriteSafety
	// UpstreamCredentials are the upstreams' own credentials, keyed by
	// upstream name (credentials.go): each forwarded request gets its
	// upstream's header fields, never the client's Authorization or
	// Cookie. An upstream without one (or with upstreamauth.None) gets
	// the assertion alone.
	UpstreamCredentials map[string]upstreamauth.Source
	// Servers are the federated routes (federation.go): a request whose
	// Request.Upstream names one is resolved to one of its members.
	Servers []Server
	// MemberSessions holds the members' sessions of the client sessions
	// mcpgate terminates on federated routes (revisions before
	// 2026-07-28); nil: older revisions are refused there.
	MemberSessions MemberSessions
	// Members lists the prompts, resources and capabilities of federated
	// routes' members; nil: their lists are empty and initialize
	// announces tools only.
	Members MemberLister
	// Limits are the rate buckets, concurrency cap, loop brake and
	// deadlines (limits.go); nil: no limits.
	Limits  *Limits
	Logger  *slog.Logger
	Metrics *Metrics
	// Tracer records a span per request and its phases, and the upstream
	// gets the W3C trace context (tracing.go); nil: tracing off, at no
	// cost.
	Tracer trace.Tracer
}

// Pipeline runs the request stages (requestStages) on each message and
// the response phases on its answer.
//
// The settings a configuration reload may change live in a snapshot: a
// Pipeline value built from one Options (Reconfigure). HandleRequest loads
// the current snapshot once (one atomic load) and the whole exchange, its
// response phase included, runs on it, so a request sees the old or the
// new settings, never a mix. The state that outlives a snapshot (the
// decider, the open notification streams, the loop brake's runs) is
// shared by every snapshot through pointers.
type Pipeline struct {
	opts    Options
	decider *atomic.Pointer[deciderBox]
	// cur is the current snapshot, shared by every snapshot.
	cur     *atomic.Pointer[Pipeline]
	origins map[string]bool
	// tenantArgs are the lower-case tenant-like argument names.
	tenantArgs map[string]bool
	log        *slog.Logger
	m          *Metrics
	schemas    schemaCache
	loops      *loopBrake
	// textShaper shapes resources/read results (secret names, untrusted
	// text); secretShaper drops the secret names from the results of
	// undeclared tools (nil without secret names).
	textShaper, secretShaper *shape.Shaper
	// lists are the open notification streams (listchanged.go);
	// resTenants the compiled ResourceTenants (resources.go).
	lists *listHub
	// calls are the requests in flight on federated routes, by the id a
	// cancellation names (federation.go); shared by every snapshot.
	calls      *memberCalls
	resTenants resourceTenants
	// exposure resolves the names tools are exposed under (expose.go);
	// servers the federated routes by name.
	exposure exposure
	servers  map[string]*federation
	// removeFields are the request fields every forwarded request loses
	// (forwardVerdict): the assertion header, the credentials when
	// authentication is on, Options.StripHeaders, the fields of static
	// upstream credentials. Capacity = length.
	removeFields []string
	// creds are the compiled UpstreamCredentials (credentials.go); nil
	// when no upstream has one.
	creds map[string]*upstreamCred
}

type deciderBox struct{ Decider }

// New returns a pipeline deciding with d.
func New(d Decider, o Options) *Pipeline {
	p := build(o)
	p.decider, p.cur = new(atomic.Pointer[deciderBox]), new(atomic.Pointer[Pipeline])
	p.loops, p.lists, p.calls = new(loopBrake), new(listHub), new(memberCalls)
	p.decider.Store(&deciderBox{d})
	p.cur.Store(p)
	return p
}

// Reconfigure swaps in o (a configuration reload): requests that start
// after it returns run with o; requests in flight finish with the settings
// they started with. o replaces every option, so callers start from
// Options() and change the parts that may change at run time
// (internal/app/reload.go): Declarations, UndeclaredTools, MaxJSONDepth, MaxSSEEventBytes,
// TenantArguments, SecretNames, Toolsets, Limits and Writes. The decider,
// the open notification streams and the loop brake's runs are kept; the
// caches of compiled schemas and result shapers start empty.
func (p *Pipeline) Reconfigure(o Options) {
	n := build(o)
	n.decider, n.cur, n.loops, n.lists, n.calls = p.decider, p.cur, p.loops, p.lists, p.calls
	p.cur.Store(n)
}

// Options returns the options of the current snapshot (a shallow copy:
// its maps and pointers are shared and must not be mutated).
func (p *Pipeline) Options() Options { return p.cur.Load().opts }

// build compiles o into a snapshot without its shared state.
func build(o Options) *Pipeline {
	p := &Pipeline{opts: o, log: o.Logger, m: o.Metrics, origins: map[string]bool{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.tenantArgs = map[string]bool{}
	for _, n := range append(DefaultTenantArguments, o.TenantArguments...) {
		p.tenantArgs[foldName(n)] = true
	}
	for _, origin := range o.AllowedOrigins {
		p.origins[strings.ToLower(strings.TrimSuffix(origin, "/"))] = true
	}
	rt, err := compileResourceTenants(o.ResourceTenants)
	if err != nil {
		// Validated at load (config); a pattern that slips through is
		// left out and logged.
		p.log.Error("a resource_tenant pattern cannot be compiled", "error", err)
	}
	p.resTenants = rt
	ts, err := shape.Compile(shape.Rules{SecretNames: o.SecretNames})
	if err != nil {
		// Fail closed: an allowlist nothing matches.
		p.log.Error("policy.secret_names cannot be compiled; tool results of undeclared tools and resources are withheld", "error", err)
		ts, _ = shape.Compile(shape.Rules{ResultFields: []string{withheldField}})
	}
	p.textShaper = ts
	if len(o.SecretNames) > 0 {
		p.secretShaper = ts
	}
	p.exposure = newExposure(o.Declarations)
	p.servers = newFederations(o.Servers)
	// A client never chooses the member of a federated route.
	p.removeFields = []string{AssertionHeader, UpstreamHeader}
	if o.Authenticator != nil {
		p.removeFields = append(p.removeFields, credentialHeaders...)
	}
	p.removeFields = slices.Clip(append(p.removeFields, o.StripHeaders...))
	p.compileCredentials(o)
	return p
}

// SetDecider swaps the decider atomically (a new policy engine on reload).
func (p *Pipeline) SetDecider(d Decider) { p.decider.Store(&deciderBox{d}) }

// Request is one HTTP request as the adapter received it. The adapter sets
// Tenant from the route it matched (routes.Pattern.Match); the
// authenticator checks it against the credential (403 tenant_mismatch when
// the credential does not serve it) and the policy sees it as
// input.transport.tenant.
type Request struct {
	Transport string     // TransportProxy or TransportExtProc
	Method    string     // HTTP method, upper case
	Path      string     // request path as received (never percent-decoded), without query
	RawQuery  string     // query string without "?" ("" when none)
	Upstream  string     // configured upstream the route maps to ("" for a path the pipeline answers itself)
	Tenant    string     // tenant the path names on a route with {tenant} ("" on an exact route)
	Header    mcp.Header // request header fields, lower-case keys
	Body      []byte     // the whole request body (nil for GET)
}

// Local is an answer mcpgate gives itself instead of forwarding.
type Local struct {
	Status int
	Header mcp.Header // includes content-type when Body is set
	Body   []byte     // nil: no body
}

// Verdict is the pipeline's answer to a request: either Local is set (answer
// locally, forward nothing), or the request goes upstream with the header
// mutations and, when BodyChanged, the new Body (the adapter recomputes
// content-length).
type Verdict struct {
	Local     *Local
	SetHeader mcp.Header
	// RemoveHeader is read only: verdicts may share it.
	RemoveHeader  []string
	Body          []byte
	BodyChanged   bool
	ResponseExtra mcp.Header // header fields to add to the upstream's response (CORS)
	// ResponseRemove are fields removed from the upstream's response
	// (lower case; read only): the challenge and cookies of an upstream
	// with a credential of its own.
	ResponseRemove []string
	// Detach: the request is a write whose outcome must be recorded; the
	// standalone adapter does not cancel it when the client goes away,
	// and reads its answer to the end.
	Detach bool
	// Deadline bounds the upstream exchange (standalone adapter; under
	// Envoy the route's timeout applies); 0: none.
	Deadline time.Duration
	// Upstream is the member upstream a request on a federated route goes
	// to ("" on a route that fronts one upstream). The standalone proxy
	// forwards to that upstream's URL; the ext_proc adapter sets
	// UpstreamHeader to it and clears Envoy's route cache, so that a route
	// matching on the header picks the member's cluster.
	Upstream string
}

// UpstreamHeader is the request header field that names the member
// upstream of a federated route to Envoy. mcpgate sets it on every
// request it forwards on a federated route and removes a client's.
const UpstreamHeader = "x-mcpgate-upstream"

// Outcome labels of mcpgate_requests_total{decision}.
const (
	OutcomeAllow   = "allow"   // forwarded
	OutcomeDeny    = "deny"    // refused by policy
	OutcomeInvalid = "invalid" // refused by a protocol or transport gate
	OutcomeError   = "error"   // policy evaluation failed (refused, fail closed)
	OutcomeLocal   = "local"   // answered by mcpgate itself (CORS preflight, resource metadata)
	// OutcomeUnauthenticated: refused by authentication (401, or 503
	// when the credential cannot be checked).
	OutcomeUnauthenticated = "unauthenticated"
)

// Exchange carries one request's state to its response phase.
type Exchange struct {
	ctx      context.Context
	p        *Pipeline
	req      *Request
	msg      *mcp.Message
	version  string
	label    string // mcp_method metric label
	outcome  string
	start    time.Time
	listKind string // "tools", "prompts", "resources", "resourceTemplates" for list methods
	asserted bool   // the forwarded request carries mcpgate's identity assertion
	// cred is the upstream's credential the forwarded request carries,
	// credCaller who it was asked for (credentials.go); nil without.
	cred       *upstreamCred
	credCaller *upstreamauth.Caller
	// shapeResult: the answer carries a result to shape — a tools/call
	// result (shaper, warnings), or third-party text of resources/read,
	// prompts/get and completion/complete — and its stream's progress and
	// log notifications.
	shapeResult bool
	fromCatalog bool // tools/list answered from the catalog
	watchTools  bool // a notification stream read for tools/list_changed
	shapeNotes  bool // an SSE answer whose progress and log notifications are shaped
	// shapeMessages: every message of the answer that is not a result —
	// JSON-RPC errors, notifications, server-to-client requests — is
	// shaped (Pipeline.shapesMessages).
	shapeMessages bool
	// endStream: the event just shaped ends what the client gets of the
	// stream (a server-to-client request it cannot answer, replaced by an
	// error for the request).
	endStream    bool
	bodyChanged  bool // body differs from the body received
	stopSent     bool // ResponseEvents emitted stop
	ended        bool // End ran
	watched      bool // WatchSwitches started a goroutine that holds x
	loopLater    bool // the loop key is made when the answer is known (limits.go)
	shaper       *shape.Shaper
	reqMsg       mcp.Message       // what parseMessage reads the request into; msg points here
	answerMsg    mcp.Message       // what parse reads the answer into (response.go)
	frame        answerFrame       // the response a shaped tools/call result is written into (response.go)
	early        earlyResult       // the tools/call result shaped as the answer was parsed (response.go)
	coerced      []byte            // the arguments after coercion (nil: unchanged)
	warnings     []args.Warning    // coercions applied
	headerParams map[string]string // Mcp-Param-<Name> → argument, from the schema
	task         taskState         // tasks and capability stripping (tasks.go)
	// write follows a forwarded write to its answer (replay window,
	// confirmed action, audit); confirming is the pending action a
	// confirm_action call is executing (write safety, writes.go).
	write      *writeState
	confirming *store.Action
	// elicit is the approval a retry carried in a sealed requestState
	// (elicit.go).
	elicit *elicitState
	// loopKey identifies the call for the loop brake; concurrency is its
	// concurrency slot, freed at End; deadline bounds it upstream
	// (limits.go).
	loopKey     string
	concurrency ratelimit.Slot
	deadline    time.Duration
	input       policy.Input
	client      policy.Client // input.Message.Client's storage
	decision    *policy.Decision
	cat         catalogLookup // the catalog's answer for this request (catalog.go)
	// exposedAs is the name a tools/call named its tool by when that is an
	// exposed name (msg.Name is then the tool's own name); unexposed: the
	// call named a renamed tool by its own name (expose.go).
	exposedAs string
	unexposed bool
	// fed is the federated route the request came in on (federation.go),
	// member the upstream its message resolved to ("" while none: lists,
	// initialize); fedUnknown: its name or URI resolves to no member.
	fed        *federation
	member     string
	fedUnknown bool
	// memberSession is the member's session id the forwarded request
	// carries (older revisions on a federated route); routeReq is the
	// request as received when req became the member's (routeRequest).
	memberSession string
	routeReq      *Request
	// callKey is the exchange's entry in Pipeline.calls ("" when none).
	callKey string
	// toolView and catEntry back input.Tool and input.Tool.Catalog of a
	// tools/call (one allocation with the exchange instead of two more).
	toolView policy.Tool
	catEntry policy.ToolCatalog
	ls       *listStream // the notification stream watched for tool list changes (listchanged.go)

	// requestDecision is the storage of the request's policy decision
	// (decide), to which decision points when the decider fills it in.
	requestDecision policy.Decision

	// codings are the content codings of a JSON answer, undone before
	// it is inspected and relayed (coding.go).
	codings []string

	// body is the request body the stages judge and forward (decoded,
	// rewritten).
	body []byte
	// setHeader are request fields the forwarded request gets besides
	// the verdict's own (Mcp-Param-* derived from the arguments).
	setHeader mcp.Header
	// fwdHeader is the map forwardVerdict fills, emptied and kept by
	// Release for the exchange's next use; fwdGiven: a verdict has it.
	fwdHeader mcp.Header
	fwdGiven  bool
	// verdict is the request side's answer, returned by the stage that
	// ended it.
	verdict Verdict

	// events relays a StreamSSE answer (ResponseEvents); stop holds the
	// event that ends it once a kill switch covers the request, found by
	// whichever of ResponseEvents and WatchSwitches looks first.
	events *EventRewriter
	stop   atomic.Pointer[[]byte]
}

// MaxBodyBytes is the request body limit (Options.MaxBodyBytes), for an
// adapter that refuses a declared length before the body arrives.
func (p *Pipeline) MaxBodyBytes() int64 { return p.opts.MaxBodyBytes }

// Message returns the parsed message, nil if the request carried none.
func (x *Exchange) Message() *mcp.Message { return x.msg }

// Outcome returns the request's outcome label (OutcomeAllow, ...).
func (x *Exchange) Outcome() string { return x.outcome }

// Decision returns the policy decision, nil if none was made.
func (x *Exchange) Decision() *policy.Decision { return x.decision }

var jsonHeader = mcp.Header{"content-type": {"application/json"}}

func local(status int, body []byte) *Local {
	l := &Local{Status: status}
	if body != nil {
		l.Header = jsonHeader.Clone()
		l.Body = body
	}
	return l
}

// shapesMessages reports whether the answers' errors, notifications and
// server-to-client requests are shaped: with the tool contracts on, or
// with secret names to drop. (One-line mode without secret names stays a
// transparent protocol gate for them.)
func (p *Pipeline) shapesMessages() bool {
	return p.opts.Catalog != nil || len(p.opts.SecretNames) > 0
}

// textResults are the methods whose results carry third-party text that
// is shaped like a tool's untrusted text (gateway/shape), with the tool
// contracts on (Options.Catalog set; off in the one-line mode, where the
// gateway is a transparent protocol gate).
var textResults = map[string]bool{"resources/read": true, "prompts/get": true, "completion/complete": true}

var jsonNull = []byte("null")

func idOrNull(id []byte) []byte {
	if id == nil {
		return jsonNull
	}
	return id
}

// quote repeats a client-supplied value in a message, cut by clip.Value.
func quote(s string) string {
	return `"` + clip.Value(s) + `"`
}

// Finish ends the exchange without a failure: End(nil).
func (x *Exchange) Finish() { x.End(nil) }

// finish records the request's metrics once and releases what the
// exchange holds (End).
func (x *Exchange) finish() {
	x.p.closeListStream(x)
	if x.callKey != "" {
		x.p.calls.remove(x.callKey)
	}
	// A forwarded write whose answer never arrived (client gone, stream
	// cut, upstream failed): its outcome is unknown.
	x.abandon()
	x.concurrency.Release()
	if x.p.opts.Tracer != nil {
		x.endTrace()
	}
	if x.p.m == nil || x.start.IsZero() {
		return
	}
	x.p.m.observeRequest(x.req.Transport, x.label, x.outcome, time.Since(x.start))
	x.start = time.Time{}
}
