package gateway

import (
	"context"
	"log/slog"
	"mime"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/mcp/sse"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/store"
)

// Switches is the kill switch state the pipeline reads on every request
// (the kill_switch stage); internal/killswitch.Watcher
// implements it. Reads must be cheap and lock-free: they are on the hot
// path.
type Switches interface {
	// Global returns the global switch.
	Global() (on bool, s store.Switch)
	// Tenant returns tenant's switch ("" is never on).
	Tenant(tenant string) (on bool, s store.Switch)
	// Changed returns a channel closed at the next change of any switch.
	Changed() <-chan struct{}
}

// Kill switch answers.
const (
	// CodeKillSwitch is the JSON-RPC error code of a request refused
	// because a kill switch is on (JSON-RPC leaves -32000 to -32099 to
	// implementations; MCP and its SDKs do not use -32031).
	CodeKillSwitch = -32031
	// ReasonKillSwitch is the details code (error.data.error.code).
	ReasonKillSwitch = "kill_switch"
	// KillSwitchRetryAfter is the Retry-After, in seconds, of the 503
	// answer: long enough that a fleet of agents does not hammer a gateway
	// in an incident, short enough to resume soon after the switch is off.
	KillSwitchRetryAfter = "30"
)

// Metric names of the kill switch gate (the switch states themselves are
// internal/killswitch's mcpgate_killswitch_active).
const (
	// MetricKillSwitchRefusals counts requests refused with 503 because a
	// kill switch was on, by scope ("global" or "tenant").
	MetricKillSwitchRefusals = "mcpgate_killswitch_refusals_total" // counter{scope}
	// MetricKillSwitchStreams counts SSE responses ended mid-stream because
	// a kill switch turned on, by transport.
	MetricKillSwitchStreams = "mcpgate_killswitch_streams_ended_total" // counter{transport}
)

// Scopes of a kill switch (metrics label "scope").
const (
	ScopeGlobal = "global"
	ScopeTenant = "tenant"
)

type killSwitchMetrics struct {
	refusals *prometheus.CounterVec
	streams  *prometheus.CounterVec
}

func newKillSwitchMetrics(reg prometheus.Registerer) *killSwitchMetrics {
	m := &killSwitchMetrics{
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricKillSwitchRefusals,
			Help: "MCP requests refused with 503 because a kill switch was on, by scope (global, tenant).",
		}, []string{"scope"}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricKillSwitchStreams,
			Help: "SSE responses ended with a JSON-RPC error event because a kill switch turned on while they streamed, by transport.",
		}, []string{"transport"}),
	}
	for _, s := range []string{ScopeGlobal, ScopeTenant} {
		m.refusals.WithLabelValues(s)
	}
	for _, t := range []string{TransportProxy, TransportExtProc} {
		m.streams.WithLabelValues(t)
	}
	reg.MustRegister(m.refusals, m.streams)
	return m
}

func (m *Metrics) killSwitchRefused(scope string) {
	if m == nil || m.killSwitch == nil {
		return
	}
	m.killSwitch.refusals.WithLabelValues(scope).Inc()
}

func (m *Metrics) killSwitchStreamEnded(transport string) {
	if m == nil || m.killSwitch == nil {
		return
	}
	m.killSwitch.streams.WithLabelValues(transport).Inc()
}

// switchedOff returns the switch that covers x's request, if one is on:
// the global switch first, then the tenant of the verified credential,
// then the tenant the path names (they are equal when both are set: the
// authenticator refuses a mismatch). A scope nothing was set for is off
// (store.DefaultSwitch).
func (x *Exchange) switchedOff() (store.Switch, bool) {
	sw := x.p.opts.Switches
	if sw == nil {
		return store.Switch{}, false
	}
	if on, s := sw.Global(); on {
		return s, true
	}
	for _, t := range []string{x.input.Principal.Tenant, x.req.Tenant} {
		if t == "" {
			continue
		}
		if on, s := sw.Tenant(t); on {
			return s, true
		}
	}
	return store.Switch{}, false
}

// killSwitch is the stage right after authentication: while a kill switch covers the request it answers 503
// with Retry-After and a JSON-RPC error naming the admin's reason, for any
// method; nothing is forwarded and nothing is queued. It is Go, not
// policy: an incident switch must not depend on a policy that may be the
// problem. It returns nil when the request may go on.
func (p *Pipeline) killSwitch(ctx context.Context, x *Exchange) *Verdict {
	x.mark(SpanKillSwitch)
	s, on := x.switchedOff()
	if !on {
		return nil
	}
	x.outcome = OutcomeDeny
	scope := ScopeTenant
	if s.Global() {
		scope = ScopeGlobal
	}
	p.m.killSwitchRefused(scope)
	p.log.LogAttrs(ctx, slog.LevelInfo, "request refused: kill switch on",
		slog.String("scope", scope), slog.String("tenant", s.Tenant),
		slog.String("mcp_method", x.label), slog.String("upstream", x.req.Upstream), slog.String("transport", x.req.Transport))
	return x.answer(killSwitchLocal(x.msg, s))
}

// killSwitchError is the JSON-RPC error of a request a kill switch
// covers: the admin's reason, that nothing reaches the MCP server, and
// what to do (retry later, ask the operator).
func killSwitchError(s store.Switch) *mcp.Error {
	where := "for every tenant"
	if !s.Global() {
		where = "for tenant " + quote(s.Tenant)
	}
	reason := strings.TrimSpace(s.Reason)
	if reason == "" {
		reason = "no reason given"
	}
	cause := "The gateway's kill switch is on " + where + ". The operator's reason: " + endSentence(reason) + " Nothing is forwarded to the MCP server while it is on."
	fix := "Retry later (not before Retry-After); if the work is urgent, ask the operator of this gateway."
	return &mcp.Error{Status: 503, Code: CodeKillSwitch, Message: cause + " " + fix,
		Data: refusal.Details{Error: refusal.DetailsError{Code: ReasonKillSwitch, Cause: cause, Fix: fix}}}
}

func endSentence(s string) string {
	if strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// killSwitchLocal is the 503 answer: a JSON-RPC error for the request's
// id (null without one); a notification gets no body.
func killSwitchLocal(msg *mcp.Message, s store.Switch) *Local {
	var l *Local
	switch {
	case msg != nil && msg.Kind == mcp.KindNotification:
		l = local(503, nil)
		l.Header = mcp.Header{}
	case msg != nil && msg.Kind == mcp.KindRequest:
		l = local(503, mcp.ErrorResponse(msg.ID, killSwitchError(s)))
	default: // no message (GET, DELETE) or a client's response
		l = local(503, mcp.ErrorResponse(jsonNull, killSwitchError(s)))
	}
	l.Header.Set("retry-after", KillSwitchRetryAfter)
	return l
}

// KillableStream returns the mode in which an adapter relays a response
// so that a kill switch turned on mid-stream can end it: with switches
// configured, an identity-encoded text/event-stream response that would
// pass through untouched is relayed event by event instead (StreamSSE,
// nothing changed in it), so that the error event lands between two
// events. Every other mode is returned as it is. ResponseHeaders applies
// it.
func (x *Exchange) KillableStream(mode ResponseMode, h mcp.Header) ResponseMode {
	if mode != PassThrough || x.p.opts.Switches == nil {
		return mode
	}
	mt, _, _ := mime.ParseMediaType(h.Get("content-type"))
	if enc := h.Get("content-encoding"); mt != "text/event-stream" || (enc != "" && !strings.EqualFold(enc, "identity")) {
		return mode
	}
	return StreamSSE
}

// StreamStop returns the bytes that end the SSE response of x when a kill
// switch now covers its request, nil while none does. For a request it
// is one complete event carrying the JSON-RPC error (the same as the 503
// body) for the request's id; for a stream that answers no request (an
// older revision's GET stream) an SSE comment, which clients ignore. The
// adapter relays the bytes after the last complete event and ends the
// stream. Each non-nil answer counts one ended stream: call it until it
// answers, then never again.
func (x *Exchange) StreamStop() []byte {
	s, on := x.switchedOff()
	if !on {
		return nil
	}
	x.streamEnded(s)
	return x.stopEvent(s)
}

// stopStream is StreamStop for the exchange's own relay: the switch is
// found, counted and logged once, by whichever of ResponseEvents and
// WatchSwitches looks first; later calls return the same bytes.
func (x *Exchange) stopStream() []byte {
	if ev := x.stop.Load(); ev != nil {
		return *ev
	}
	s, on := x.switchedOff()
	if !on {
		return nil
	}
	ev := x.stopEvent(s)
	if !x.stop.CompareAndSwap(nil, &ev) {
		return *x.stop.Load()
	}
	x.streamEnded(s)
	return ev
}

// streamEnded counts and logs a stream the switch s ended.
func (x *Exchange) streamEnded(s store.Switch) {
	x.p.m.killSwitchStreamEnded(x.req.Transport)
	x.p.log.LogAttrs(x.ctx, slog.LevelInfo, "stream ended: kill switch on",
		slog.String("tenant", s.Tenant), slog.String("mcp_method", x.label), slog.String("transport", x.req.Transport))
}

// stopEvent is the last event of a stream the switch s ended.
func (x *Exchange) stopEvent(s store.Switch) []byte {
	if x.msg == nil || x.msg.Kind != mcp.KindRequest {
		return []byte(": mcpgate: kill switch on, stream ended\n\n")
	}
	return sse.AppendEvent(nil, sse.Event{Type: "message", HasData: true,
		Data: mcp.ErrorResponse(x.msg.ID, killSwitchError(s))})
}

// WatchSwitches calls stop once, from another goroutine, with the bytes
// that end x's stream as soon as a kill switch covers its request (at once
// if one does already), unless ctx ends or the returned cancel is called
// first. The standalone proxy uses it to wake a relay that waits for the
// upstream's next event (ResponseEvents then emits the bytes and ends the
// stream); stop must not block. Without switches it does nothing.
func (x *Exchange) WatchSwitches(ctx context.Context, stop func(last []byte)) (cancel func()) {
	sw := x.p.opts.Switches
	if sw == nil {
		return func() {}
	}
	ctx, cancel = context.WithCancel(ctx)
	x.watched = true // never reused (Release)
	go func() {
		for {
			changed := sw.Changed()
			if last := x.stopStream(); last != nil {
				stop(last)
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return cancel
}
