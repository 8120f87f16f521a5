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
	"mime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
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
	// MaxBodyBytes bounds a request body, after decoding (413 above it).
	MaxBodyBytes int64
	// MaxJSONDepth bounds nesting in a JSON body (request or response).
	MaxJSONDepth int
	// MaxSSEEventBytes bounds one server-sent event the pipeline inspects.
	MaxSSEEventBytes int
	// AllowedOrigins are the accepted Origin values (exact match, case
	// folded); loopback origins are accepted when the list is empty.
	AllowedOrigins []string
	Logger         *slog.Logger
	Metrics        *Metrics
}

// Pipeline runs the gates of ARCHITECTURE.md on each message.
type Pipeline struct {
	opts    Options
	decider atomic.Pointer[deciderBox]
	origins map[string]bool
	log     *slog.Logger
	m       *Metrics
}

type deciderBox struct{ Decider }

// New returns a pipeline deciding with d.
func New(d Decider, o Options) *Pipeline {
	p := &Pipeline{opts: o, log: o.Logger, m: o.Metrics, origins: map[string]bool{}}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	for _, origin := range o.AllowedOrigins {
		p.origins[strings.ToLower(strings.TrimSuffix(origin, "/"))] = true
	}
	p.decider.Store(&deciderBox{d})
	return p
}

// SetDecider swaps the decider atomically (a new policy engine on reload).
func (p *Pipeline) SetDecider(d Decider) { p.decider.Store(&deciderBox{d}) }

// Request is one HTTP request as the adapter received it.
type Request struct {
	Transport string     // TransportProxy or TransportExtProc
	Method    string     // HTTP method, upper case
	Path      string     // request path without query
	Upstream  string     // configured upstream the route maps to
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
	Local         *Local
	SetHeader     mcp.Header
	RemoveHeader  []string
	Body          []byte
	BodyChanged   bool
	ResponseExtra mcp.Header // header fields to add to the upstream's response (CORS)
}

// Outcome labels of mcpgate_requests_total{decision}.
const (
	OutcomeAllow   = "allow"   // forwarded
	OutcomeDeny    = "deny"    // refused by policy
	OutcomeInvalid = "invalid" // refused by a protocol or transport gate
	OutcomeError   = "error"   // policy evaluation failed (refused, fail closed)
	OutcomeLocal   = "local"   // answered by mcpgate itself (CORS preflight)
)

// Exchange carries one request's state to its response phase.
type Exchange struct {
	p        *Pipeline
	req      *Request
	msg      *mcp.Message
	version  string
	label    string // mcp_method metric label
	outcome  string
	start    time.Time
	listKind string // "tools", "prompts", "resources", "resourceTemplates" for list methods
	input    policy.Input
	decision *policy.Decision
}

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

// HandleRequest runs the request-side gates in order: HTTP method, Origin,
// CORS preflight, Content-Type, content encoding, body size, strict JSON and
// JSON-RPC shape, known method, MCP headers, then the policy decision.
func (p *Pipeline) HandleRequest(ctx context.Context, r *Request) (*Exchange, Verdict) {
	x := &Exchange{p: p, req: r, start: time.Now(), label: LabelNone}
	v := p.handle(ctx, x)
	if v.Local != nil && x.outcome == OutcomeAllow {
		x.outcome = OutcomeLocal
	}
	if origin := r.Header.Get("origin"); origin != "" && x.outcome != OutcomeInvalid {
		v.ResponseExtra = corsResponseHeader(origin)
		if v.Local != nil {
			for k, vals := range v.ResponseExtra {
				if v.Local.Header == nil {
					v.Local.Header = mcp.Header{}
				}
				v.Local.Header[k] = vals
			}
		}
	}
	if v.Local != nil {
		x.Finish()
	}
	return x, v
}

func (p *Pipeline) handle(ctx context.Context, x *Exchange) Verdict {
	r := x.req
	if origin := r.Header.Get("origin"); origin != "" && !p.originAllowed(origin) {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(403, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Origin " + quote(origin) + " is not allowed"}))}
	}
	switch r.Method {
	case "POST":
	case "OPTIONS":
		x.outcome = OutcomeAllow
		return Verdict{Local: preflight(r.Header)}
	case "GET", "DELETE":
		// Older revisions' server-to-client stream (GET) and session end
		// (DELETE) carry no JSON-RPC message; the upstream applies its
		// own session rules. Revision 2026-07-28 servers answer 405.
		x.outcome = OutcomeAllow
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
	if msg.Kind != mcp.KindResponse && !mcp.KnownMethodIn(mcp.EffectiveVersion(r.Header, msg), msg.Method, msg.Kind) {
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
	x.version = mcp.EffectiveVersion(r.Header, msg)
	if msg.Kind == mcp.KindResponse {
		if x.version >= mcp.Version20260728 {
			// Revision 2026-07-28 has no server-to-client requests a
			// client could answer on this endpoint.
			x.outcome = OutcomeInvalid
			return Verdict{Local: local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "clients do not send JSON-RPC responses in protocol revision " + x.version}))}
		}
		// A client's answer to a server request (older revisions) decides
		// nothing; it is relayed to the upstream that asked.
		x.outcome = OutcomeAllow
		return p.forwardVerdict(x, body, changed)
	}
	d := p.decide(ctx, x, policy.PhaseRequest, nil)
	x.decision = d
	if !d.Allow {
		if x.outcome == "" {
			x.outcome = OutcomeDeny
		}
		switch {
		case msg.Kind == mcp.KindNotification:
			return Verdict{Local: local(403, nil)}
		case msg.Method == "tools/call":
			return Verdict{Local: local(200, refusal.ToolError(msg.ID, d.Reasons, d.ID))}
		default:
			return Verdict{Local: local(200, refusal.RPCError(msg.ID, d.Reasons, d.ID))}
		}
	}
	x.outcome = OutcomeAllow
	x.listKind = listKinds[msg.Method]
	return p.forwardVerdict(x, body, changed)
}

var jsonNull = []byte("null")

func idOrNull(id []byte) []byte {
	if id == nil {
		return jsonNull
	}
	return id
}

// forwardVerdict lets the request go upstream. The upstream is asked for an
// identity-encoded response so the pipeline never inspects compressed bytes.
func (p *Pipeline) forwardVerdict(x *Exchange, body []byte, changed bool) Verdict {
	v := Verdict{SetHeader: mcp.Header{"accept-encoding": {"identity"}}}
	// The upstream sees the standard headers in their plain form: a
	// base64-encoded Mcp-Name that matched the body is re-derived from it.
	if m := x.msg; m != nil && m.Target() != "" {
		if h := x.req.Header.Get(mcp.HeaderName); h != "" {
			if enc := mcp.EncodeHeaderValue(m.Target()); h != enc {
				v.SetHeader.Set(mcp.HeaderName, enc)
			}
		}
	}
	if changed {
		v.Body, v.BodyChanged = body, true
		v.RemoveHeader = []string{"content-encoding"}
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
		in.Transport = policy.Transport{Kind: r.Transport, HTTPMethod: r.Method, Path: r.Path, Upstream: r.Upstream, ProtocolVersion: x.version, Origin: r.Header.Get("origin")}
		in.Message = policy.Message{Kind: msg.Kind.String(), Method: msg.Method, Name: msg.Name, URI: msg.URI, Arguments: msg.Arguments}
		if ci := clientInfo(msg); ci != nil {
			in.Message.Client = &policy.Client{Name: ci.Name, Version: ci.Version}
		}
		if msg.Method == "tools/call" {
			in.Tool = p.tool(r.Upstream, msg.Name)
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
	d, ok := p.opts.Declarations[upstream][name]
	return &policy.Tool{Name: name, Declared: ok, ToolDeclaration: d}
}

func (p *Pipeline) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if len(p.origins) > 0 {
		return p.origins[o]
	}
	return isLoopbackOrigin(o)
}

func isLoopbackOrigin(o string) bool {
	for _, prefix := range []string{"http://localhost", "http://127.0.0.1", "http://[::1]", "https://localhost", "https://127.0.0.1", "https://[::1]"} {
		if rest, ok := strings.CutPrefix(o, prefix); ok && (rest == "" || rest[0] == ':') {
			return true
		}
	}
	return false
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

func quote(s string) string {
	const max = 80
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + s + `"`
}

// Finish records the request's metrics once; adapters call it when the
// exchange ends (after the response, or at once for a local answer).
func (x *Exchange) Finish() {
	if x.p.m == nil || x.start.IsZero() {
		return
	}
	x.p.m.observeRequest(x.req.Transport, x.label, x.outcome, time.Since(x.start))
	x.start = time.Time{}
}
