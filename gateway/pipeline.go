// Package gateway is mcpgate's transport-neutral pipeline. Adapters (the
// standalone proxy in gateway/proxy, the Envoy ext_proc service) translate
// their transport into a Request, ask the Pipeline for a Verdict, forward or
// answer, and feed the upstream's response back through the Exchange.
//
// The package never imports net/http or gRPC: it sees method, path, header
// fields and body bytes, and answers with data.
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
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
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

// Authenticator verifies the credential of a request (ARCHITECTURE.md, the
// pipeline's step 2). The pipeline calls it after the transport gate and
// the header checks, before the policy; internal/authn implements it with
// the auth package. A nil Authenticator in Options means the gateway runs
// without authentication: every caller is anonymous.
type Authenticator interface {
	// Authenticate returns the verified principal of r, or why r is
	// refused (401 no or invalid credential, 503 the credential cannot be
	// checked now).
	Authenticate(ctx context.Context, r *Request) (*policy.Principal, *AuthFailure)
	// InsufficientScope returns the 403 challenge for a request of r's
	// route whose token lacks scopes: the challenge names scopes, the
	// scopes the request needs (RFC 6750 section 3.1).
	InsufficientScope(r *Request, scopes []string) *AuthFailure
}

// AuthFailure is an authentication refusal: the HTTP status, the
// WWW-Authenticate challenge and a text safe to show the client.
type AuthFailure struct {
	// Status is 401 (no or invalid credential), 403 (insufficient scope)
	// or 503 (the credential cannot be checked now; fail closed).
	Status int
	// WWWAuthenticate is the value of the WWW-Authenticate header; ""
	// sends none.
	WWWAuthenticate string
	// Code is a stable snake_case code: one of the Auth* constants.
	Code string
	// Message says what is wrong; Fix what to do. Both are safe to show a
	// client and carry no token material.
	Message string
	Fix     string
}

// AuthFailure codes (details error.code of the JSON-RPC error body).
const (
	AuthMissingToken      = "missing_token"      // 401: no bearer token
	AuthInvalidToken      = "invalid_token"      // 401: the token was refused
	AuthInvalidRequest    = "invalid_request"    // 401: a token outside the Authorization header
	AuthInsufficientScope = "insufficient_scope" // 403: the token's scopes do not cover the call
	AuthUnavailable       = "auth_unavailable"   // 503: the token cannot be verified now
)

// Options configure a Pipeline. Zero limits take the config package's
// defaults through the caller; the pipeline itself does not default them.
type Options struct {
	// Declarations are the per-tool declarations, upstream → tool → declaration.
	Declarations map[string]map[string]policy.ToolDeclaration
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

// Pipeline runs the gates of ARCHITECTURE.md on each message.
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
	lists      *listHub
	resTenants resourceTenants
	// removeFields are the request fields every forwarded request loses
	// (forwardVerdict): the assertion header, the credentials when
	// authentication is on, Options.StripHeaders. Capacity = length.
	removeFields []string
}

type deciderBox struct{ Decider }

// New returns a pipeline deciding with d.
func New(d Decider, o Options) *Pipeline {
	p := build(o)
	p.decider, p.cur = new(atomic.Pointer[deciderBox]), new(atomic.Pointer[Pipeline])
	p.loops, p.lists = new(loopBrake), new(listHub)
	p.decider.Store(&deciderBox{d})
	p.cur.Store(p)
	return p
}

// Reconfigure swaps in o (a configuration reload): requests that start
// after it returns run with o; requests in flight finish with the settings
// they started with. o replaces every option, so callers start from
// Options() and change the parts that may change at run time
// (internal/app/reload.go): Declarations, MaxJSONDepth, MaxSSEEventBytes,
// TenantArguments, SecretNames, Toolsets, Limits and Writes. The decider,
// the open notification streams and the loop brake's runs are kept; the
// caches of compiled schemas and result shapers start empty.
func (p *Pipeline) Reconfigure(o Options) {
	n := build(o)
	n.decider, n.cur, n.loops, n.lists = p.decider, p.cur, p.loops, p.lists
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
	p.removeFields = []string{AssertionHeader}
	if o.Authenticator != nil {
		p.removeFields = append(p.removeFields, credentialHeaders...)
	}
	p.removeFields = slices.Clip(append(p.removeFields, o.StripHeaders...))
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
	// Detach: the request is a write whose outcome must be recorded; the
	// standalone adapter does not cancel it when the client goes away,
	// and reads its answer to the end (issue 6: "in standalone mode
	// upstream writes are not cancelled by a client disconnect").
	Detach bool
	// Deadline bounds the upstream exchange (standalone adapter; under
	// Envoy the route's timeout applies); 0: none.
	Deadline time.Duration
}

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
	// shapeResult: the answer carries a result to shape — a tools/call
	// result (shaper, warnings), or third-party text of resources/read,
	// prompts/get and completion/complete — and its stream's progress and
	// log notifications.
	shapeResult  bool
	fromCatalog  bool // tools/list answered from the catalog
	watchTools   bool // a notification stream read for tools/list_changed
	shapeNotes   bool // an SSE answer whose progress and log notifications are shaped
	shaper       *shape.Shaper
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
	// loopKey identifies the call for the loop brake; releaseSlot frees
	// its concurrency slot; deadline bounds it upstream (limits.go).
	loopKey     string
	loopLater   bool // the loop key is made when the answer is known (limits.go)
	releaseSlot func()
	deadline    time.Duration
	input       policy.Input
	decision    *policy.Decision
	cat         catalogLookup // the catalog's answer for this request (catalog.go)
	// toolView and catEntry back input.Tool and input.Tool.Catalog of a
	// tools/call (one allocation with the exchange instead of two more).
	toolView policy.Tool
	catEntry policy.ToolCatalog
	ls       *listStream // the notification stream watched for tool list changes (listchanged.go)
	// responseExtra is Verdict.ResponseExtra (CORS): every answer to the
	// request carries it, the pipeline's own answers to the upstream's
	// response too (withExtra).
	responseExtra mcp.Header

	// shapeMessages: every message of the answer that is not a result —
	// JSON-RPC errors, notifications, server-to-client requests — is
	// shaped (Pipeline.shapesMessages).
	shapeMessages bool
	// endStream: the event just shaped ends what the client gets of the
	// stream (a server-to-client request it cannot answer, replaced by an
	// error for the request).
	endStream bool
	// codings are the content codings of a JSON answer, undone before
	// it is inspected and relayed (coding.go).
	codings []string
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

// withExtra adds the exchange's response fields (Verdict.ResponseExtra)
// to a local answer built after the request was forwarded, so that an
// adapter sends it with the fields the upstream's answer would have got.
func (x *Exchange) withExtra(l *Local) *Local {
	if len(x.responseExtra) == 0 {
		return l
	}
	if l.Header == nil {
		l.Header = mcp.Header{}
	}
	for k, vals := range x.responseExtra {
		l.Header[k] = vals
	}
	return l
}

func local(status int, body []byte) *Local {
	l := &Local{Status: status}
	if body != nil {
		l.Header = jsonHeader.Clone()
		l.Body = body
	}
	return l
}

// AnswersPath reports whether the pipeline answers requests to path
// itself (the protected resource metadata documents), so that an adapter
// hands them over although no upstream is routed there.
func (p *Pipeline) AnswersPath(path string) bool {
	if path == JWKSPath && p.opts.JWKS != nil {
		return true
	}
	_, ok := p.metadata(path)
	return ok
}

// StaticMetadata serves fixed protected resource metadata documents,
// request path → document (an Options.ResourceMetadata for routes without
// {tenant}).
func StaticMetadata(docs map[string][]byte) func(path string) ([]byte, bool) {
	return func(path string) ([]byte, bool) {
		doc, ok := docs[path]
		return doc, ok
	}
}

// metadata returns the protected resource metadata document at path.
func (p *Pipeline) metadata(path string) ([]byte, bool) {
	if p.opts.ResourceMetadata == nil {
		return nil, false
	}
	return p.opts.ResourceMetadata(path)
}

// HandleRequest runs the request-side gates in order: Origin, HTTP method,
// CORS preflight, Content-Type, content encoding, body size, strict JSON and
// JSON-RPC shape, known method, MCP headers, authentication (when an
// Authenticator is set), then the policy decision.
func (p *Pipeline) HandleRequest(ctx context.Context, r *Request) (*Exchange, Verdict) {
	p = p.cur.Load() // the settings this exchange runs with, start to end
	x := &Exchange{ctx: ctx, p: p, req: r, start: time.Now(), label: LabelNone}
	if p.opts.Tracer != nil {
		ctx = p.startTrace(x)
	}
	v := p.handle(ctx, x)
	if v.Local != nil && x.version >= mcp.Version20260728 && !x.fromCatalog {
		// (tools/list answered from the catalog writes it itself: no
		// second pass over the whole list.)
		v.Local.Body = withResultType(v.Local.Body)
	}
	if v.Local != nil && x.outcome == OutcomeAllow && !x.fromCatalog {
		x.outcome = OutcomeLocal
	}
	if origin := r.Header.Get("origin"); origin != "" && x.outcome != OutcomeInvalid {
		v.ResponseExtra = corsResponseHeader(origin)
		x.responseExtra = v.ResponseExtra
		if v.Local != nil {
			for k, vals := range v.ResponseExtra {
				if v.Local.Header == nil {
					v.Local.Header = mcp.Header{}
				}
				v.Local.Header[k] = vals
			}
		}
	}
	if p.opts.Tracer != nil {
		p.endRequestTrace(x, &v)
	}
	if v.Local != nil {
		x.Finish()
	}
	return x, v
}

func (p *Pipeline) handle(ctx context.Context, x *Exchange) Verdict {
	r := x.req
	if l := p.headerFaults(r); l != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: l}
	}
	if origin := r.Header.Get("origin"); origin != "" && !p.originAllowed(origin) {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(403, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Origin " + quote(origin) + " is not allowed"}))}
	}
	if doc, ok := p.metadata(r.Path); ok {
		return serveDocument(x, doc, "application/json", "300")
	}
	if r.Path == JWKSPath && p.opts.JWKS != nil {
		return serveDocument(x, p.opts.JWKS(), "application/jwk-set+json", "60")
	}
	if name := tenantQueryName(r.RawQuery, p.tenantArgs); name != "" {
		x.outcome = OutcomeInvalid
		return Verdict{Local: p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest,
			Message: "The query parameter " + quote(name) + " would choose a tenant; the tenant comes from your credential. Remove it from the URL."})}
	}
	switch r.Method {
	case "POST":
	case "OPTIONS":
		x.outcome = OutcomeAllow
		return Verdict{Local: preflight(r.Header)}
	case "GET", "DELETE":
		// Older revisions' server-to-client stream (GET) and session end
		// (DELETE) carry no JSON-RPC message; the upstream applies its
		// own session rules. Revision 2026-07-28 servers answer 405. A
		// body, or headers naming a message, would reach the upstream
		// unchecked: refused.
		if len(r.Body) > 0 || r.Header.Has(mcp.HeaderMethod) || r.Header.Has(mcp.HeaderName) {
			x.outcome = OutcomeInvalid
			return Verdict{Local: local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: r.Method + " carries no JSON-RPC message: no body, Mcp-Method or Mcp-Name"}))}
		}
		x.mark(SpanAuth)
		if l := p.authenticate(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		x.mark(SpanKillSwitch)
		if l := p.killSwitch(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		if l := p.checkSession(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		x.outcome = OutcomeAllow
		x.watchTools = r.Method == "GET" && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
		x.task.watch = r.Method == "GET" && p.opts.Tasks.Enabled
		x.shapeMessages = r.Method == "GET" && p.shapesMessages()
		return p.forwardVerdict(x, nil, false)
	default:
		x.outcome = OutcomeInvalid
		l := local(405, nil)
		l.Header = mcp.Header{"allow": {"GET, POST, DELETE, OPTIONS"}}
		return Verdict{Local: l}
	}
	if !isJSON(r.Header.Get("content-type")) {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(415, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Content-Type must be application/json"}))}
	}
	body, changed, ferr := decodeBody(r.Header.Get("content-encoding"), r.Body, p.opts.MaxBodyBytes)
	if ferr != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(ferr.Status, mcp.ErrorResponse(nil, ferr))}
	}
	msg, perr := mcp.Parse(body, p.opts.MaxJSONDepth)
	if perr != nil && perr.Code == mcp.CodeInvalidParams && msg != nil && msg.Method != "" &&
		!mcp.KnownMethodIn(mcp.EffectiveVersion(r.Header, msg), msg.Method, msg.Kind) {
		// JSON-RPC: a method that does not exist is reported as such
		// before its params are judged.
		perr = nil
	}
	if perr != nil {
		x.outcome = OutcomeInvalid
		var id = jsonNull
		if msg != nil && msg.ID != nil {
			id = msg.ID
		}
		return Verdict{Local: local(perr.Status, mcp.ErrorResponse(id, perr))}
	}
	x.msg = msg
	x.label = MethodLabel(msg)
	x.version = mcp.EffectiveVersion(r.Header, msg)
	x.shapeMessages = msg.Kind == mcp.KindRequest && p.shapesMessages()
	if msg.Kind != mcp.KindResponse && !mcp.KnownMethodIn(x.version, msg.Method, msg.Kind) {
		x.outcome = OutcomeInvalid
		if msg.Kind == mcp.KindNotification {
			return Verdict{Local: local(404, nil)}
		}
		return Verdict{Local: local(404, mcp.ErrorResponse(msg.ID, &mcp.Error{Status: 404, Code: mcp.CodeMethodNotFound, Message: "Method not found: " + quote(msg.Method)}))}
	}
	if herr := mcp.CheckHeaders(r.Header, msg); herr != nil {
		x.outcome = OutcomeInvalid
		if msg.Kind == mcp.KindNotification {
			return Verdict{Local: local(herr.Status, nil)}
		}
		return Verdict{Local: local(herr.Status, mcp.ErrorResponse(idOrNull(msg.ID), herr))}
	}
	if msg.Kind == mcp.KindResponse && x.version >= mcp.Version20260728 {
		// Revision 2026-07-28 has no server-to-client requests a client
		// could answer on this endpoint.
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "clients do not send JSON-RPC responses in protocol revision " + x.version}))}
	}
	x.mark(SpanAuth)
	if l := p.authenticate(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	x.mark(SpanKillSwitch)
	if l := p.killSwitch(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	if l := p.checkSession(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	if nb, err := p.stripClientCapabilities(msg, body); err != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidParams, Message: "The client capabilities cannot be read."}))}
	} else if nb != nil {
		body, changed = nb, true
	}
	if msg.Kind == mcp.KindResponse {
		// A client's answer to a server request (older revisions) decides
		// nothing; it is relayed to the upstream that asked.
		x.outcome = OutcomeAllow
		return p.forwardVerdict(x, body, changed)
	}
	x.mark(SpanPolicy)
	if p.opts.Writes != nil && msg.Method == "tools/call" && isGatewayTool(msg.Name) {
		// mcpgate's own tools; a confirm_action that may run becomes the
		// original call, judged below with the current principal.
		if l := p.gatewayTool(ctx, x, &body); l != nil {
			return Verdict{Local: l}
		}
		msg, changed = x.msg, true
	} else if p.opts.Writes != nil && msg.Method == "tools/call" {
		// A retry carrying a requestState mcpgate sealed (an approval
		// asked through input_required): checked before anything else;
		// the approved call goes on with the upstream's own state.
		if l := p.elicitRetry(ctx, x, &body); l != nil {
			return Verdict{Local: l}
		}
		if x.elicit != nil {
			msg, changed = x.msg, true
		}
	}
	if p.opts.Catalog != nil && (msg.Method == "tools/call" || msg.Method == "tools/list") {
		// One look at the catalog per request: the entry (or the list)
		// found here is the one the policy and the answer use
		// (catalogTool, listAnswer).
		var loaded bool
		if msg.Method == "tools/call" {
			loaded = x.lookupTool(msg.Name)
		} else {
			x.cat.tools, loaded = p.opts.Catalog.Tools(r.Upstream)
		}
		if !loaded {
			x.outcome = OutcomeError
			return Verdict{Local: catalogUnavailable(msg)}
		}
	}
	d := p.decide(ctx, x, policy.PhaseRequest, nil)
	x.decision = d
	if !d.Allow {
		p.audit(ctx, x, d)
	}
	if !d.Allow {
		if x.outcome == "" {
			x.outcome = OutcomeDeny
		}
		p.logRefusal(ctx, x, d)
		if l := p.scopeChallenge(x, d); l != nil {
			return Verdict{Local: l}
		}
		switch {
		case msg.Kind == mcp.KindNotification:
			return Verdict{Local: local(403, nil)}
		case msg.Method == "tools/call":
			return Verdict{Local: local(200, refusal.ToolError(msg.ID, p.loopRefused(x, d.Reasons), d.ID))}
		default:
			return Verdict{Local: local(200, refusal.RPCError(msg.ID, d.Reasons, d.ID))}
		}
	}
	x.outcome = OutcomeAllow
	if l := p.taskRequest(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	switch {
	case msg.Method == "tools/list" && p.opts.Catalog != nil:
		return Verdict{Local: p.listAnswer(ctx, x)}
	case msg.Method == "tools/call":
		var extra mcp.Header
		if p.opts.Catalog != nil {
			herr, set := x.checkParamHeaders()
			if herr != nil {
				x.outcome = OutcomeInvalid
				return Verdict{Local: local(herr.Status, mcp.ErrorResponse(msg.ID, herr))}
			}
			extra = set
			if x.coerced != nil {
				nb, err := replaceArguments(body, x.coerced)
				if err != nil {
					x.outcome = OutcomeError
					p.log.LogAttrs(ctx, slog.LevelError, "coerced arguments cannot be put back into the request", slog.Any("error", err))
					return Verdict{Local: local(500, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not rewrite the arguments."}))}
				}
				body, changed = nb, true
			}
		}
		shaper, serr := p.resultShaper(r.Upstream, msg.Name, d)
		if serr != nil {
			x.outcome = OutcomeError
			p.log.LogAttrs(ctx, slog.LevelError, "the policy's result paths cannot be compiled; call refused",
				slog.String("decision_id", d.ID), slog.String("tool", msg.Name), slog.Any("error", serr))
			return Verdict{Local: local(200, shapeRefusal(msg.ID, d.ID))}
		}
		x.shaper = shaper
		x.shapeResult = x.shaper != nil || len(x.warnings) > 0 || x.checksResultURIs() || x.task.inspect
		// With the contracts on, a tool's stream is read even when its
		// result needs no shaping: its progress and log notifications
		// carry text too.
		x.shapeNotes = p.opts.Catalog != nil
		if x.confirming != nil {
			extra = x.paramHeaders()
		}
		x.mark(SpanLimits)
		if l := p.limitsGate(ctx, x, d); l != nil {
			return Verdict{Local: l}
		}
		x.mark(SpanWriteSafety)
		if l := p.writeSafety(ctx, x, d); l != nil {
			return Verdict{Local: l}
		}
		if p.opts.Limits != nil && p.opts.Limits.LoopBrake > 0 {
			x.shapeResult = true // its outcome feeds the loop brake
		}
		v := p.forwardVerdict(x, body, changed)
		for k, vals := range extra {
			if v.SetHeader != nil {
				v.SetHeader[k] = vals
			}
		}
		v.Deadline = x.deadline
		if v.Local != nil {
			x.release()
		} else if x.write != nil {
			v.Detach = true // audited with its outcome when the answer arrives
		} else {
			p.audit(ctx, x, d) // allowed and forwarded
		}
		return v
	}
	x.listKind = listKinds[msg.Method]
	x.shapeResult = p.opts.Catalog != nil && textResults[msg.Method] || x.task.inspect
	x.watchTools = msg.Method == "subscriptions/listen" && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
	if !x.shapeResult && x.checksResultURIs() && (msg.Method == "resources/read" || msg.Method == "prompts/get") {
		x.shapeResult = true // resource links of other tenants are removed
	}
	return p.forwardVerdict(x, body, changed)
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

// authenticate runs the Authenticator, if any, and keeps the principal
// for the policy input. It returns the answer of a refused request.
func (p *Pipeline) authenticate(ctx context.Context, x *Exchange) *Local {
	a := p.opts.Authenticator
	if a == nil {
		return nil
	}
	pr, f := a.Authenticate(ctx, x.req)
	if f == nil && pr == nil {
		f = &AuthFailure{Status: 401, Code: AuthInvalidToken, Message: "The credential could not be verified."}
	}
	if f != nil {
		x.outcome = OutcomeUnauthenticated
		return authLocal(f, x.msg, []policy.Reason{{Code: f.Code, Cause: f.Message, Fix: f.Fix}}, "")
	}
	x.input.Principal = *pr
	return p.checkToolset(x)
}

// scopeChallenge returns the 403 insufficient_scope answer when the policy
// refused a request only because the OAuth token's scopes lack rights
// (every reason is insufficient_scope): the client can fix that by asking
// for a token with more scopes, which a tool error would not tell it. The
// challenge names every right the request needs (for tools/call, the
// tool's declared rights), the body's details the missing ones.
func (p *Pipeline) scopeChallenge(x *Exchange, d *policy.Decision) *Local {
	a := p.opts.Authenticator
	if a == nil || x.input.Principal.CredentialKind != policy.CredentialOAuth || len(d.Reasons) == 0 {
		return nil
	}
	var needed []string
	if x.input.Tool != nil {
		needed = append(needed, x.input.Tool.Rights...)
	}
	for _, r := range d.Reasons {
		if r.Code != policy.CodeInsufficientScope {
			return nil
		}
		for _, right := range r.Rights {
			if !slices.Contains(needed, right) {
				needed = append(needed, right)
			}
		}
	}
	f := a.InsufficientScope(x.req, needed)
	if f == nil {
		return nil
	}
	return authLocal(f, x.msg, d.Reasons, d.ID)
}

// authLocal is the answer to a request refused by authentication: the
// status and challenge of f, and a JSON-RPC error (refusal.AuthError) for
// the request's id; a notification gets no body.
func authLocal(f *AuthFailure, msg *mcp.Message, reasons []policy.Reason, decisionID string) *Local {
	var l *Local
	switch {
	case msg != nil && msg.Kind == mcp.KindNotification:
		l = local(f.Status, nil)
	case msg != nil && msg.Kind == mcp.KindRequest:
		l = local(f.Status, refusal.AuthError(msg.ID, reasons, decisionID))
	default: // no message (GET, DELETE) or a client's response
		l = local(f.Status, refusal.AuthError(jsonNull, reasons, decisionID))
	}
	if f.WWWAuthenticate != "" || f.Status == 503 {
		if l.Header == nil {
			l.Header = mcp.Header{}
		}
	}
	if f.WWWAuthenticate != "" {
		l.Header.Set("www-authenticate", f.WWWAuthenticate)
	}
	if f.Status == 503 {
		l.Header.Set("retry-after", RetryAfterSeconds)
	}
	return l
}

// serveDocument answers a request for a public document the pipeline
// serves itself, without a credential: the protected resource metadata
// (RFC 9728) and the assertion keys (RFC 7517). GET gets doc with
// contentType and a Cache-Control max-age of maxAge seconds, OPTIONS is a
// CORS preflight, anything else 405.
func serveDocument(x *Exchange, doc []byte, contentType, maxAge string) Verdict {
	switch x.req.Method {
	case "GET":
		x.outcome = OutcomeLocal
		l := local(200, doc)
		l.Header.Set("content-type", contentType)
		l.Header.Set("cache-control", "max-age="+maxAge)
		return Verdict{Local: l}
	case "OPTIONS":
		x.outcome = OutcomeLocal
		return Verdict{Local: preflight(x.req.Header)}
	}
	x.outcome = OutcomeInvalid
	return Verdict{Local: &Local{Status: 405, Header: mcp.Header{"allow": {"GET, OPTIONS"}}}}
}

// credentialHeaders are removed from every forwarded request when
// authentication is on: the upstream never sees the client's token or
// cookies (ARCHITECTURE.md, "Forward").
var credentialHeaders = []string{"authorization", "cookie"}

// identityEncoding is the accept-encoding every forwarded request gets.
// Shared by every verdict: its capacity is its length, so an adapter that
// adds a value copies it; nothing writes into it.
var identityEncoding = []string{"identity"}[:1:1]

// forwardVerdict lets the request go upstream. The upstream is asked for an
// identity-encoded response so the pipeline never inspects compressed bytes.
func (p *Pipeline) forwardVerdict(x *Exchange, body []byte, changed bool) Verdict {
	x.mark(SpanForward)
	v := Verdict{SetHeader: mcp.Header{"accept-encoding": identityEncoding}}
	// The upstream sees the standard headers in their plain form: a
	// base64-encoded Mcp-Name that matched the body is re-derived from it.
	if m := x.msg; m != nil && m.Target() != "" {
		if h := x.req.Header.Get(mcp.HeaderName); h != "" {
			if enc := mcp.EncodeHeaderValue(m.Target()); h != enc {
				v.SetHeader.Set(mcp.HeaderName, enc)
			}
		}
	}
	// The fields to remove: the snapshot's own list, shared by every
	// verdict of an unchanged body without aliases (its capacity is its
	// length, so an append copies it; nothing writes into it).
	v.RemoveHeader = p.removeFields
	if changed {
		v.Body, v.BodyChanged = body, true
		v.RemoveHeader = append(append(make([]string, 0, 1+len(p.removeFields)), "content-encoding"), p.removeFields...)
	}
	if aliases := underscoreAliases(x.req.Header, v.RemoveHeader); len(aliases) > 0 {
		v.RemoveHeader = append(v.RemoveHeader, aliases...)
	}
	if err := p.assert(x, &v); err != nil {
		p.log.LogAttrs(x.ctx, slog.LevelError, "identity assertion cannot be signed; request refused", slog.Any("error", err))
		x.outcome = OutcomeError
		return Verdict{Local: unavailable(x.msg, "The gateway cannot vouch for your identity to the upstream right now.")}
	}
	return v
}

// decide builds the policy input and evaluates it, recording the
// evaluation's duration. A failed evaluation is a deny (fail closed).
func (p *Pipeline) decide(ctx context.Context, x *Exchange, phase string, items []policy.Item) *policy.Decision {
	in := &x.input
	in.Version = policy.SchemaVersion
	in.Phase = phase
	in.Items = items
	if phase == policy.PhaseRequest {
		r, msg := x.req, x.msg
		in.Transport = policy.Transport{Kind: r.Transport, HTTPMethod: r.Method, Path: r.Path, Upstream: r.Upstream, Tenant: r.Tenant, ProtocolVersion: x.version, Origin: r.Header.Get("origin")}
		in.Message = policy.Message{Kind: msg.Kind.String(), Method: msg.Method, Name: msg.Name, URI: msg.URI, Arguments: msg.Arguments}
		p.messageTenants(x)
		if ci := clientInfo(msg); ci != nil {
			in.Message.Client = &policy.Client{Name: ci.Name, Version: ci.Version}
		}
		if msg.Method == "tools/call" {
			x.toolView = p.toolValue(r.Upstream, msg.Name)
			in.Tool = &x.toolView
			in.Message.TenantArguments = tenantArguments(msg.Arguments, p.tenantArgs)
			p.catalogTool(x)
			if notFound(in.Tool) {
				in.Finders = p.finders(r.Upstream, msg.Name)
			}
		}
	}
	start := time.Now()
	d, err := p.decider.Load().Decide(ctx, in)
	p.m.observePolicy(time.Since(start))
	if err != nil {
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "policy evaluation failed", slog.String("decision_id", d.ID), slog.String("mcp_method", x.label), slog.Any("error", err))
	}
	return d
}

func clientInfo(m *mcp.Message) *mcp.Implementation {
	if m.Meta.ClientInfo != nil {
		return m.Meta.ClientInfo
	}
	return m.InitializeClientInfo
}

// tool returns the policy view of a tool's declaration; an undeclared tool
// has Declared false and no effect (the policy's fail-closed default).
func (p *Pipeline) tool(upstream, name string) *policy.Tool {
	t := p.toolValue(upstream, name)
	return &t
}

// toolValue is tool's value.
func (p *Pipeline) toolValue(upstream, name string) policy.Tool {
	d, ok := p.opts.Declarations[upstream][name]
	return policy.Tool{Name: name, Declared: ok, ToolDeclaration: d, Toolsets: p.opts.Toolsets.Holding(upstream, name)}
}

func (p *Pipeline) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if len(p.origins) > 0 {
		return p.origins[o]
	}
	return isLoopbackOrigin(o)
}

// quote repeats a client-supplied value in a message, cut by clip.Value.
func quote(s string) string {
	return `"` + clip.Value(s) + `"`
}

// Finish records the request's metrics once; adapters call it when the
// exchange ends (after the response, or at once for a local answer).
func (x *Exchange) Finish() {
	x.p.closeListStream(x)
	// A forwarded write whose answer never arrived (client gone, stream
	// cut, upstream failed): its outcome is unknown.
	x.abandon()
	if x.releaseSlot != nil {
		x.releaseSlot()
		x.releaseSlot = nil
	}
	if x.p.opts.Tracer != nil {
		x.endTrace()
	}
	if x.p.m == nil || x.start.IsZero() {
		return
	}
	x.p.m.observeRequest(x.req.Transport, x.label, x.outcome, time.Since(x.start))
	x.start = time.Time{}
}

// logRefusal writes one line per policy refusal with the decision id, so a
// refusal a client reports can be found (never arguments or tokens).
func (p *Pipeline) logRefusal(ctx context.Context, x *Exchange, d *policy.Decision) {
	code := ""
	if len(d.Reasons) > 0 {
		code = d.Reasons[0].Code
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "request refused by policy",
		slog.String("decision_id", d.ID), slog.String("reason", code),
		slog.String("mcp_method", x.label), slog.String("upstream", x.req.Upstream),
		slog.String("transport", x.req.Transport))
}
