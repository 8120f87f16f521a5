package gateway

import (
	"context"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// A stage is one step of the request side. It returns the exchange's
// verdict when the request is answered or forwarded (&x.verdict, set with
// x.answer, x.answerAs or x.forwardWith), nil to go on to the next stage.
type stage struct {
	name string
	run  func(p *Pipeline, ctx context.Context, x *Exchange) *Verdict
}

// requestStages are the stages of a request, in order; the package doc
// names the file of each. A stage that does not apply to the request
// (a GET has no message to parse, only tools/call has limits) returns nil
// at once.
var requestStages = []stage{
	{"transport", (*Pipeline).transportGate},         // transport.go: header fields, Origin
	{"documents", (*Pipeline).serveDocuments},        // documents.go: resource metadata, assertion keys
	{"query", (*Pipeline).queryGate},                 // query.go: no tenant in the query string
	{"method", (*Pipeline).methodGate},               // transport.go: OPTIONS, GET/DELETE, 405
	{"parse", (*Pipeline).parseMessage},              // parse.go: Content-Type, coding, JSON-RPC, MCP headers
	{"expose", (*Pipeline).exposeName},               // expose.go: a tool's exposed name → its own name
	{"authenticate", (*Pipeline).authenticate},       // authenticate.go: credential, toolset
	{"kill_switch", (*Pipeline).killSwitch},          // killswitch.go
	{"session", (*Pipeline).checkSession},            // session.go: Mcp-Session-Id binding
	{"capabilities", (*Pipeline).clientCapabilities}, // extensions.go: unhandled client capabilities
	{"federation", (*Pipeline).federationGate},       // federation.go: unknown names, ping, methods not federated
	{"relay", (*Pipeline).relayUndecided},            // forward.go: GET, DELETE, a client's response
	{"gateway_tools", (*Pipeline).gatewayTools},      // confirm.go: confirm_action, reject_action, approvals
	{"catalog", (*Pipeline).lookupCatalog},           // catalog.go: the tool's entry or the list
	{"policy", (*Pipeline).policyDecision},           // decide.go: the Rego decision, refusals
	{"tasks", (*Pipeline).taskGate},                  // tasks.go
	{"tools_list", (*Pipeline).toolsListAnswer},      // catalog.go: tools/list from the catalog
	{"federated", (*Pipeline).federatedAnswer},       // federation.go: a federated route's lists, initialize
	{"arguments", (*Pipeline).checkArguments},        // catalog.go: Mcp-Param-*, coerced arguments
	{"shaping", (*Pipeline).planShaping},             // response.go: how the answer is inspected
	{"limits", (*Pipeline).limits},                   // limits.go: buckets, concurrency, loop brake, deadline
	{"write_safety", (*Pipeline).writeSafetyGate},    // writes.go: replay window, confirmation
	{"forward", (*Pipeline).forward},                 // forward.go: header mutations, assertion, audit
}

// HandleRequest is the request phase of an exchange: it runs the stages of
// requestStages in order on r and returns the exchange, whose methods are
// the response phases, with its verdict (answer locally, or forward).
func (p *Pipeline) HandleRequest(ctx context.Context, r *Request) (*Exchange, Verdict) {
	p = p.cur.Load()                 // the settings this exchange runs with, start to end
	x := exchanges.Get().(*Exchange) // zero: new, or zeroed by Release
	x.ctx, x.p, x.req, x.start, x.label = ctx, p, r, time.Now(), LabelNone
	if p.opts.Tracer != nil {
		ctx = p.startTrace(x)
	}
	p.handle(ctx, x)
	v := &x.verdict
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
		p.endRequestTrace(x, v)
	}
	if v.Local != nil {
		x.End(nil)
	}
	return x, *v
}

// maxKeptFields bounds the fields of a map Release keeps.
const maxKeptFields = 16

// exchanges are Exchanges given back by Release, zeroed.
var exchanges = sync.Pool{New: func() any { return new(Exchange) }}

// Release gives x back for reuse by a later HandleRequest. An adapter may
// call it once, after End, when it is done with x and with what x
// returned that points into it or that x reuses (Message, Decision, the
// verdict's SetHeader); it must not use them afterwards. x is reused only if nothing but the adapter can still
// reach it: an exchange that relayed an SSE answer (its EventRewriter,
// a tool-list watch that a background recheck may read), started
// WatchSwitches or asked an upstream credential source for a credential
// (which was given a pointer into x) is left to the collector, as is
// one whose End has not run. Release reports whether x was taken back:
// then nothing of the pipeline holds x's Request any more either.
func (x *Exchange) Release() bool {
	if !x.ended || x.watched || x.events != nil || x.watchTools || x.ls != nil || x.cred != nil || x.credCaller != nil {
		return false
	}
	// The verdict's map is the adapter's until it released x: kept, empty.
	h := x.fwdHeader
	if len(h) > maxKeptFields {
		h = nil
	}
	clear(h)
	*x = Exchange{fwdHeader: h}
	exchanges.Put(x)
	return true
}

// handle runs the stages until one answers or forwards the request (the
// forward stage always does), leaving the verdict in x.verdict.
func (p *Pipeline) handle(ctx context.Context, x *Exchange) {
	for i := range requestStages {
		if requestStages[i].run(p, ctx, x) != nil {
			return
		}
	}
}

// answer ends the request side with the local answer l.
func (x *Exchange) answer(l *Local) *Verdict {
	x.verdict = Verdict{Local: l}
	return &x.verdict
}

// answerAs records outcome and ends the request side with l.
func (x *Exchange) answerAs(outcome string, l *Local) *Verdict {
	x.outcome = outcome
	return x.answer(l)
}

// forwardWith ends the request side with v (forwardVerdict's).
func (x *Exchange) forwardWith(v Verdict) *Verdict {
	x.verdict = v
	return &x.verdict
}
