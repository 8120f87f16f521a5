package gateway

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Span names. Each request is one server span named after its MCP method
// and target ("tools/call find_customers", or "mcp" before the body is
// parsed), following the OpenTelemetry semantic conventions for MCP
// (semantic-conventions-genai, docs/gen-ai/mcp.md, "Server"); the phases
// it went through are its children, in order:
const (
	SpanTransport   = "mcpgate.transport"    // transport gate: headers, Origin, body, JSON, JSON-RPC, MCP headers
	SpanAuth        = "mcpgate.authenticate" // credential checked, principal bound
	SpanKillSwitch  = "mcpgate.kill_switch"  // global and tenant switches, session binding
	SpanPolicy      = "mcpgate.policy"       // gateway tools, catalog, Rego decision
	SpanLimits      = "mcpgate.limits"       // rate buckets, concurrency, loop brake
	SpanWriteSafety = "mcpgate.write_safety" // replay window, two-step confirmation
	SpanForward     = "mcpgate.forward"      // verdict: header mutations, identity assertion
	// SpanUpstream (kind client) runs from the verdict to the upstream's
	// response headers; its context is the traceparent the upstream gets.
	SpanUpstream = "mcpgate.upstream"
	SpanResponse = "mcpgate.response" // response inspection and shaping, to the end of the stream
)

// Span attributes. The MCP ones are the semantic conventions' names;
// nothing here is an argument, a result, a resource URI or a credential.
const (
	AttrMCPMethod       = "mcp.method.name"
	AttrMCPVersion      = "mcp.protocol.version"
	AttrToolName        = "gen_ai.tool.name"
	AttrPromptName      = "gen_ai.prompt.name"
	AttrHTTPMethod      = "http.request.method"
	AttrHTTPStatus      = "http.response.status_code"
	AttrErrorType       = "error.type"
	AttrTransport       = "mcpgate.transport"        // TransportProxy or TransportExtProc
	AttrUpstream        = "mcpgate.upstream"         // configured upstream name
	AttrDecision        = "mcpgate.decision"         // an Outcome*
	AttrReason          = "mcpgate.reason"           // the first policy reason code
	AttrDecisionID      = "mcpgate.decision_id"      // the policy evaluation's id (logs, audit)
	AttrEffect          = "mcpgate.effect"           // the effect class of a tools/call
	AttrConfirmRequired = "mcpgate.confirm_required" // the call needs a person's confirmation
)

// traceContext reads and writes the W3C Trace Context headers
// (traceparent, tracestate; W3C Recommendation "Trace Context").
var traceContext propagation.TraceContext

// headerCarrier adapts the pipeline's lower-case header map to the
// propagator.
type headerCarrier mcp.Header

func (c headerCarrier) Get(k string) string { return mcp.Header(c).Get(k) }
func (c headerCarrier) Set(k, v string)     { mcp.Header(c).Set(k, v) }
func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// exchangeTrace is an exchange's tracing state, kept in its context (so
// that an Exchange is no bigger for it with tracing off): span is the
// request's span, nil once ended; phase is the pipeline phase running
// since phaseAt; up is open from the verdict to the upstream's response
// headers.
type exchangeTrace struct {
	span, up trace.Span
	phase    string
	phaseAt  time.Time
}

type traceKey struct{}

// trace returns the exchange's tracing state, nil when its request was
// not traced.
func (x *Exchange) trace() *exchangeTrace {
	tr, _ := x.ctx.Value(traceKey{}).(*exchangeTrace)
	return tr
}

// startTrace opens the request's server span, continuing the trace of an
// incoming traceparent, and its first phase. It returns the context the
// pipeline runs in. Called only with a tracer.
func (p *Pipeline) startTrace(x *Exchange) context.Context {
	r := x.req
	parent := traceContext.Extract(x.ctx, headerCarrier(r.Header))
	ctx, sp := p.opts.Tracer.Start(parent, "mcp",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithTimestamp(x.start),
		trace.WithAttributes(
			attribute.String(AttrTransport, r.Transport),
			attribute.String(AttrHTTPMethod, r.Method),
			attribute.String(AttrUpstream, r.Upstream),
		))
	x.ctx = context.WithValue(ctx, traceKey{}, &exchangeTrace{span: sp, phase: SpanTransport, phaseAt: x.start})
	return x.ctx
}

// mark ends the current phase span and starts the next one ("" for none).
// Phases are recorded after the fact, with their start and end times, so
// that an early return needs no cleanup. Nothing happens without tracing.
func (x *Exchange) mark(next string) {
	if x.p.opts.Tracer == nil {
		return
	}
	tr := x.trace()
	if tr == nil || tr.span == nil {
		return
	}
	now := time.Now()
	if tr.phase != "" && tr.span.IsRecording() {
		_, sp := x.p.opts.Tracer.Start(x.ctx, tr.phase, trace.WithTimestamp(tr.phaseAt))
		sp.End(trace.WithTimestamp(now))
	}
	tr.phase, tr.phaseAt = next, now
}

// endRequestTrace closes the request side: the last phase, the span's name
// and attributes, and for a forwarded request the upstream span, whose
// context goes to the upstream in v.SetHeader.
func (p *Pipeline) endRequestTrace(x *Exchange, v *Verdict) {
	x.mark("")
	tr := x.trace()
	if tr == nil {
		return
	}
	sp := tr.span
	if m := x.msg; m != nil && sp.IsRecording() {
		name := MethodLabel(m)
		attrs := make([]attribute.KeyValue, 0, 8)
		attrs = append(attrs, attribute.String(AttrMCPMethod, name))
		if x.version != "" {
			attrs = append(attrs, attribute.String(AttrMCPVersion, x.version))
		}
		if target := m.Name; target != "" && len(target) <= 128 && (m.Method == "tools/call" || m.Method == "prompts/get") && m.URI == "" {
			name += " " + target
			if m.Method == "tools/call" {
				attrs = append(attrs, attribute.String(AttrToolName, target))
			} else {
				attrs = append(attrs, attribute.String(AttrPromptName, target))
			}
		}
		if d := x.decision; d != nil {
			attrs = append(attrs, attribute.String(AttrDecisionID, d.ID))
			if len(d.Reasons) > 0 {
				attrs = append(attrs, attribute.String(AttrReason, d.Reasons[0].Code))
			}
			if d.Effect != "" {
				attrs = append(attrs, attribute.String(AttrEffect, d.Effect))
			}
			if d.Confirm {
				attrs = append(attrs, attribute.Bool(AttrConfirmRequired, true))
			}
		}
		sp.SetName(name)
		sp.SetAttributes(attrs...)
	}
	if v.Local != nil {
		if sp.IsRecording() {
			sp.SetAttributes(attribute.Int(AttrHTTPStatus, v.Local.Status))
		}
		return
	}
	ctx, up := p.opts.Tracer.Start(x.ctx, SpanUpstream, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrUpstream, x.req.Upstream)))
	tr.up = up
	if v.SetHeader == nil {
		v.SetHeader = mcp.Header{}
	}
	// The upstream continues mcpgate's trace, not the client's span: a
	// traceparent the client sent is overwritten.
	traceContext.Inject(ctx, headerCarrier(v.SetHeader))
}

// upstreamAnswered ends the upstream span at the response headers and
// starts the response phase.
func (x *Exchange) upstreamAnswered(status int) {
	if x.p.opts.Tracer == nil {
		return
	}
	tr := x.trace()
	if tr == nil || tr.up == nil {
		return
	}
	tr.up.SetAttributes(attribute.Int(AttrHTTPStatus, status))
	if status >= 500 {
		tr.up.SetStatus(codes.Error, "upstream answered "+strconv.Itoa(status))
	}
	tr.up.End()
	tr.up = nil
	tr.phase, tr.phaseAt = SpanResponse, time.Now()
}

// endTrace ends the request's spans once (End).
func (x *Exchange) endTrace() {
	tr := x.trace()
	if tr == nil || tr.span == nil {
		return
	}
	if tr.up != nil {
		tr.up.SetStatus(codes.Error, "no answer from the upstream")
		tr.up.End()
		tr.up = nil
	}
	x.mark("")
	sp := tr.span
	tr.span = nil
	if sp.IsRecording() {
		sp.SetAttributes(attribute.String(AttrDecision, x.outcome))
		if x.outcome == OutcomeError {
			sp.SetAttributes(attribute.String(AttrErrorType, OutcomeError))
			sp.SetStatus(codes.Error, "mcpgate failed closed")
		}
	}
	sp.End()
}
