package policy

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultShadowQueue is how many decisions wait for the shadow policy
// before new ones are dropped (and counted).
const DefaultShadowQueue = 1024

// shadowTimeout bounds one shadow evaluation.
const shadowTimeout = 5 * time.Second

// Shadow difference kinds, the values of the change label of
// mcpgate_policy_shadow_differences_total.
const (
	ShadowAllowToDeny  = "allow_to_deny" // live allows, shadow denies
	ShadowDenyToAllow  = "deny_to_allow" // live denies, shadow allows
	ShadowReasons      = "reasons"       // both deny, with other codes
	ShadowConfirmation = "confirmation"  // both allow; confirm or approval differ
)

// ShadowOptions evaluate a candidate policy beside the live one: every
// decision is evaluated again, on a worker goroutine off the request path,
// with the same input and declarations; a different outcome is logged
// (decision id, method, tool, allow and reason codes of both; never
// arguments) and counted. The live policy alone decides, and the engine's
// own rules (out-of-band approval for money and legal steps) apply to the
// shadow's decisions as to the live ones.
type ShadowOptions struct {
	// Dirs are the candidate's policy directories (as Options.Dirs).
	Dirs []string
	// Bundle takes the candidate from an OPA bundle instead.
	Bundle *BundleOptions
	// QueueSize bounds decisions waiting for the shadow; default
	// DefaultShadowQueue. When full, decisions are not shadowed and
	// are counted in mcpgate_policy_shadow_dropped_total.
	QueueSize int
}

type shadowEval struct {
	*worker[shadowItem]
	engine      *Engine
	log         *slog.Logger
	differences *prometheus.CounterVec
}

type shadowItem struct {
	method, tool string
	oob          *Input // just the tool, for the out-of-band rule
	input        ast.Value
	live         Decision
}

func newShadow(ctx context.Context, o Options, log *slog.Logger) (*shadowEval, error) {
	so := o.Shadow
	if len(so.Dirs) == 0 && so.Bundle == nil {
		return nil, errors.New("policy shadow: neither dirs nor a bundle")
	}
	slog := log.With("policy", "shadow")
	child, err := New(ctx, Options{Dirs: so.Dirs, Bundle: so.Bundle, Declarations: o.Declarations, Logger: slog})
	if err != nil {
		return nil, err
	}
	size := so.QueueSize
	if size <= 0 {
		size = DefaultShadowQueue
	}
	s := &shadowEval{
		engine: child, log: slog,
		differences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_policy_shadow_differences_total",
			Help: "Decisions on which the shadow policy differs from the live one, by kind of change.",
		}, []string{"change"}),
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpgate_policy_shadow_dropped_total",
		Help: "Decisions not evaluated by the shadow policy because its queue was full.",
	})
	for _, c := range []string{ShadowAllowToDeny, ShadowDenyToAllow, ShadowReasons, ShadowConfirmation} {
		s.differences.WithLabelValues(c)
	}
	if r := o.Registerer; r != nil {
		for _, c := range []prometheus.Collector{s.differences, dropped} {
			if err := r.Register(c); err != nil {
				child.Close(ctx)
				return nil, err
			}
		}
	}
	s.worker = newWorker(size, dropped, s.compare)
	return s, nil
}

func (s *shadowEval) compare(it shadowItem) {
	ctx, cancel := context.WithTimeout(context.Background(), shadowTimeout)
	defer cancel()
	sd, err := s.engine.eval(ctx, s.engine.current.Load(), &Decision{ID: it.live.ID}, it.oob, it.input)
	change := shadowChange(&it.live, sd)
	if change == "" {
		return
	}
	s.differences.WithLabelValues(change).Inc()
	attrs := []slog.Attr{
		slog.String("decision_id", it.live.ID),
		slog.String("change", change),
		slog.String("method", it.method),
		slog.String("tool", it.tool),
		slog.Bool("live_allow", it.live.Allow),
		slog.Any("live_codes", reasonCodes(&it.live)),
		slog.Bool("shadow_allow", sd.Allow),
		slog.Any("shadow_codes", reasonCodes(sd)),
	}
	if change == ShadowConfirmation {
		attrs = append(attrs, slog.Bool("live_confirm", it.live.Confirm), slog.String("live_approval", it.live.Approval),
			slog.Bool("shadow_confirm", sd.Confirm), slog.String("shadow_approval", sd.Approval))
	}
	if err != nil {
		attrs = append(attrs, slog.String("shadow_error", err.Error()))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "shadow policy decides differently", attrs...)
}

// shadowChange says how shadow differs from live, "" when it does not.
func shadowChange(live, shadow *Decision) string {
	switch {
	case live.Allow && !shadow.Allow:
		return ShadowAllowToDeny
	case !live.Allow && shadow.Allow:
		return ShadowDenyToAllow
	case !live.Allow && !slices.Equal(reasonCodes(live), reasonCodes(shadow)):
		return ShadowReasons
	case live.Allow && (live.Confirm != shadow.Confirm || live.Approval != shadow.Approval):
		return ShadowConfirmation
	}
	return ""
}

// reasonCodes are the sorted, distinct reason codes of d.
func reasonCodes(d *Decision) []string {
	out := make([]string, 0, len(d.Reasons))
	for _, r := range d.Reasons {
		out = append(out, r.Code)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// WaitShadow waits until every decision queued for the shadow policy has
// been compared, or ctx ends. Tests use it.
func (e *Engine) WaitShadow(ctx context.Context) error {
	if e.shadow == nil {
		return nil
	}
	return e.shadow.wait(ctx)
}

// shadowItemFor builds the queued copy of one decision for the shadow.
func shadowItemFor(in *Input, input ast.Value, live Decision) shadowItem {
	it := shadowItem{method: in.Message.Method, input: input, live: live, oob: &Input{}}
	if t := in.Tool; t != nil {
		it.tool = t.Name
		it.oob.Tool = &Tool{Name: t.Name, Declared: t.Declared, Undeclared: t.Undeclared}
		it.oob.Tool.MovesMoney, it.oob.Tool.LegallyBinding = t.MovesMoney, t.LegallyBinding
	}
	return it
}
