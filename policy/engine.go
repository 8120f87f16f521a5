package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/prometheus/client_golang/prometheus"
)

// Options configure an Engine.
type Options struct {
	// Dirs are directories of .rego files and optional data files (.json,
	// .yaml, .yml), loaded recursively; *_test.rego files and names starting
	// with "." are skipped. Empty means the embedded default policy
	// (rego.Default without examples/ and tests).
	Dirs []string
	// Declarations are the per-tool declarations, upstream → tool →
	// declaration, loaded as data.mcpgate.upstreams[u].tools[t]. New checks
	// them with ValidateDeclarations. Input.Tool should be built from the
	// same declarations (Tool{Name, Declared, ToolDeclaration}): a Tool
	// equal to its declaration reuses a term made once, saving work per
	// Decide.
	Declarations map[string]map[string]ToolDeclaration
	// Logger receives load, reload and evaluation failures. Nil discards.
	Logger *slog.Logger
	// OnReload, if set, is called after every Reload attempt (also those
	// Watch starts, not the initial load in New) with its outcome; e.g. to
	// count reloads and record the last success.
	OnReload func(ok bool, err error)
	// Bundle, if set, takes the policy from an OPA bundle server instead
	// of Dirs (bundle.go). Dirs must then be empty.
	Bundle *BundleOptions
	// DecisionLogs, if set, sends every decision to OPA's decision-log
	// plugin, masked (decisionlog.go).
	DecisionLogs *DecisionLogOptions
	// Shadow, if set, evaluates a candidate policy beside this one and
	// counts the differences (shadow.go). The live policy still decides.
	Shadow *ShadowOptions
	// Registerer receives the decision memo's counter
	// (mcpgate_policy_decision_memo_total) and the metrics of DecisionLogs
	// and Shadow; nil: not registered.
	Registerer prometheus.Registerer
	// NoDecisionMemo evaluates the policy for every Decide, even for an
	// input equal to a recent one in every part the policy reads (memo.go,
	// reads.go; the memo is on by default for a policy that calls no
	// time-, network- or randomness-dependent builtin).
	NoDecisionMemo bool
}

// Engine evaluates data.mcpgate.decision. It is safe for concurrent use:
// each Decide sees one whole policy version, and Reload swaps versions
// atomically.
type Engine struct {
	dirs         []string
	declarations map[string]map[string]ToolDeclaration
	log          *slog.Logger
	onReload     func(bool, error)
	caches       atomic.Pointer[termCaches] // swapped by SetDeclarations
	noMemo       bool                       // Options.NoDecisionMemo
	wholeInput   bool                       // tests: evaluate the whole input, never the parts read
	// memoHit, memoMiss and memoOff count decisions answered by the memo,
	// evaluated and remembered, and evaluated without it.
	memoHit, memoMiss, memoOff prometheus.Counter

	reloadMu sync.Mutex // serialises Reload
	current  atomic.Pointer[policyVersion]

	bundle *bundleSource   // nil: the policy comes from dirs (bundle.go)
	logs   *decisionLogger // nil: no decision logs (decisionlog.go)
	shadow *shadowEval     // nil: no shadow policy (shadow.go)
}

// New loads, compiles and prepares the policy. The error lists every
// problem found in the policy files and the declarations.
func New(ctx context.Context, o Options) (*Engine, error) {
	e := &Engine{
		dirs:         slices.Clone(o.Dirs),
		declarations: make(map[string]map[string]ToolDeclaration, len(o.Declarations)),
		log:          o.Logger,
		onReload:     o.OnReload,
		noMemo:       o.NoDecisionMemo,
	}
	memo := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_policy_decision_memo_total",
		Help: "Policy decisions by how the decision memo took part: hit (an input equal to a recent one in every part the policy reads, answered from the memo), miss (evaluated, then remembered), off (evaluated without the memo: the policy calls a builtin whose answer changes between calls, the input is too large, or the memo is turned off).",
	}, []string{"result"})
	e.memoHit, e.memoMiss, e.memoOff = memo.WithLabelValues("hit"), memo.WithLabelValues("miss"), memo.WithLabelValues("off")
	if o.Registerer != nil {
		if err := o.Registerer.Register(memo); err != nil {
			return nil, fmt.Errorf("policy: register metrics: %w", err)
		}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	var errs []error
	for _, u := range slices.Sorted(maps.Keys(o.Declarations)) {
		errs = append(errs, ValidateDeclarations(u, o.Declarations[u])...)
		e.declarations[u] = maps.Clone(o.Declarations[u])
	}
	if len(errs) > 0 {
		return nil, problems("invalid tool declarations", errs)
	}
	e.caches.Store(newTermCaches(e.declarations))
	if o.Bundle != nil {
		if len(e.dirs) > 0 {
			return nil, errors.New("policy: a bundle and dirs cannot be used together")
		}
		if err := e.startBundle(ctx, o.Bundle); err != nil { // bundle.go
			return nil, err
		}
	} else {
		start := time.Now()
		p, err := load(ctx, e.dirs, e.declarations)
		if err != nil {
			return nil, err
		}
		e.current.Store(p)
		e.loaded(ctx, "policy loaded", p, start)
	}
	if err := e.startOps(ctx, o); err != nil { // decisionlog.go, shadow.go
		e.Close(ctx)
		return nil, err
	}
	return e, nil
}

func (e *Engine) loaded(ctx context.Context, msg string, p *policyVersion, start time.Time) {
	e.log.LogAttrs(ctx, slog.LevelInfo, msg,
		slog.Int("modules", p.modules),
		slog.Any("dirs", e.dirs),
		slog.Float64("duration_seconds", time.Since(start).Seconds()))
	if !p.defined {
		e.log.LogAttrs(ctx, slog.LevelWarn, "no rule defines "+Query+"; every message will be denied",
			slog.Any("dirs", e.dirs))
	}
}

// Reload recompiles the policy from Options.Dirs (and the declarations
// given to New). On success the new version serves every later Decide; on
// failure the previous version stays, the failure is logged, and the error
// is returned. Either way OnReload is told.
func (e *Engine) Reload(ctx context.Context) error {
	if e.shadow != nil {
		// The shadow policy follows the live one's reloads.
		_ = e.shadow.engine.Reload(ctx)
	}
	if e.bundle != nil {
		return e.reloadBundle(ctx) // bundle.go
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	start := time.Now()
	p, err := load(ctx, e.dirs, e.declarations)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelError, "policy reload failed; keeping the previous policy",
			slog.Any("dirs", e.dirs), slog.String("error", err.Error()))
	} else {
		e.current.Store(p)
		e.loaded(ctx, "policy reloaded", p, start)
	}
	if e.onReload != nil {
		e.onReload(err == nil, err)
	}
	return err
}

// SetDeclarations replaces the per-tool declarations (upstream → tool →
// declaration; a configuration reload). They are checked like New's
// (ValidateDeclarations) and compiled into a new policy version from the
// same source (Options.Dirs, or the active bundle), which is swapped in
// atomically: each Decide sees the old declarations or the new ones. On
// any problem nothing changes and the error lists every problem. Input.Tool
// should follow the same switch (gateway.Pipeline.Reconfigure).
func (e *Engine) SetDeclarations(ctx context.Context, decls map[string]map[string]ToolDeclaration) error {
	next := make(map[string]map[string]ToolDeclaration, len(decls))
	var errs []error
	for _, u := range slices.Sorted(maps.Keys(decls)) {
		errs = append(errs, ValidateDeclarations(u, decls[u])...)
		next[u] = maps.Clone(decls[u])
	}
	if len(errs) > 0 {
		return problems("invalid tool declarations", errs)
	}
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	prev := e.declarations
	e.declarations = next
	var err error
	switch cur := e.current.Load(); {
	case e.bundle == nil:
		var p *policyVersion
		if p, err = load(ctx, e.dirs, next); err == nil {
			e.current.Store(p)
		}
	case cur != nil:
		err = e.swapBundle(ctx, cur.revision) // bundle.go
	} // a bundle not activated yet compiles with next when it is
	if err != nil {
		e.declarations = prev
		return err
	}
	e.caches.Store(newTermCaches(next))
	return nil
}

// neverCancelled serves evaluations whose context cannot be cancelled.
var neverCancelled = topdown.NewCancel()

// resultTerm keeps the decision as an OPA term (no conversion to Go maps);
// readDecision checks it.
func resultTerm(t *ast.Term, _ *rego.EvalContext) (any, error) { return t, nil }

// Decide evaluates data.mcpgate.decision for in. It never returns a nil
// Decision, and every Decision has a fresh ID.
//
// A non-nil error means the policy failed and the Decision is a deny with
// one reason whose code says how: CodeUndefinedDecision (ErrUndefinedDecision),
// CodeInvalidDecision (ErrInvalidDecision), CodeInvalidInput
// (ErrInvalidInput) or CodePolicyError (an evaluation error, including ctx
// ending). The failure is already logged with the decision id; callers
// answer with the Decision and may count the code.
func (e *Engine) Decide(ctx context.Context, in *Input) (*Decision, error) {
	return e.decide(ctx, in, &Decision{ID: newID()})
}

// DecideInto is Decide writing the Decision into d, which it overwrites
// whole, for a caller that has the storage (no allocation for it). The
// Engine keeps nothing that points into d.
func (e *Engine) DecideInto(ctx context.Context, in *Input, d *Decision) error {
	*d = Decision{ID: newID()}
	_, err := e.decide(ctx, in, d)
	return err
}

// decide is Decide into d (its fresh ID set); every result is d itself.
func (e *Engine) decide(ctx context.Context, in *Input, d *Decision) (*Decision, error) {
	if in == nil {
		return e.fail(ctx, d, CodeInvalidInput, fmt.Errorf("%w: nil Input", ErrInvalidInput))
	}
	p := e.current.Load()
	var key []byte
	if p.memo != nil && !e.noMemo {
		kb := memoKeys.Get().(*[]byte)
		defer memoKeys.Put(kb)
		k, ok := p.keys.key((*kb)[:0], in)
		*kb = k[:0] // keep a grown buffer
		if ok {
			key = k
		}
		if ok && ctx.Err() == nil && p.memo.get(key, d) {
			// A repeat (memo.go): no OPA input is built unless the
			// decision logs or the shadow policy need it.
			e.memoHit.Inc()
			e.outOfBand(ctx, in, d)
			if e.logs != nil || e.shadow != nil {
				input, err := inputValue(in, e.caches.Load())
				if err != nil { // cannot happen: the same fields converted before
					return e.fail(ctx, d, CodeInvalidInput, fmt.Errorf("%w: %w", ErrInvalidInput, err))
				}
				e.observe(in, input, p, d, nil)
			}
			return d, nil
		}
	}
	var input ast.Value
	var err error
	if p.keys != nil && e.logs == nil && e.shadow == nil && !e.wholeInput {
		// Only the parts of the arguments the policy reads: it decides
		// alike, and nothing else sees this input.
		input, err = p.keys.inputValue(in, e.caches.Load())
	} else {
		input, err = inputValue(in, e.caches.Load())
	}
	if err != nil {
		return e.fail(ctx, d, CodeInvalidInput, fmt.Errorf("%w: %w", ErrInvalidInput, err))
	}
	if key != nil {
		e.memoMiss.Inc()
		d, err = e.memoEval(ctx, p, d, in, input, key)
	} else {
		e.memoOff.Inc()
		d, err = e.eval(ctx, p, d, in, input)
	}
	if e.logs != nil || e.shadow != nil {
		e.observe(in, input, p, d, err) // decisionlog.go: queued, off the hot path
	}
	return d, err
}

// eval evaluates version p for in (input is its OPA value) into d.
func (e *Engine) eval(ctx context.Context, p *policyVersion, d *Decision, in *Input, input ast.Value) (*Decision, error) {
	if err := ctx.Err(); err != nil {
		return e.fail(ctx, d, CodePolicyError, fmt.Errorf("policy: evaluate: %w", err))
	}

	// An external Cancel spares the goroutine rego would otherwise start
	// per evaluation to watch ctx.
	cancel := neverCancelled
	if ctx.Done() != nil {
		cancel = topdown.NewCancel()
		defer context.AfterFunc(ctx, cancel.Cancel)()
	}
	rs, err := p.query.Eval(ctx,
		rego.EvalParsedInput(input),
		rego.EvalMetrics(metrics.NoOp()),
		rego.EvalGenerateJSON(resultTerm),
		rego.EvalExternalCancel(cancel),
	)
	if err != nil {
		return e.fail(ctx, d, CodePolicyError, fmt.Errorf("policy: evaluate: %w", err))
	}
	if len(rs) == 0 {
		return e.fail(ctx, d, CodeUndefinedDecision, ErrUndefinedDecision)
	}
	if len(rs) > 1 || len(rs[0].Expressions) != 1 {
		return e.fail(ctx, d, CodeInvalidDecision, fmt.Errorf("%w: %d results", ErrInvalidDecision, len(rs)))
	}
	t, ok := rs[0].Expressions[0].Value.(*ast.Term)
	if !ok {
		return e.fail(ctx, d, CodeInvalidDecision, fmt.Errorf("%w: result is %T", ErrInvalidDecision, rs[0].Expressions[0].Value))
	}
	if err := readDecision(t, d); err != nil {
		return e.fail(ctx, d, CodeInvalidDecision, err)
	}
	if in != nil { // nil from memoEval, which applies it itself
		e.outOfBand(ctx, in, d)
	}
	return d, nil
}

// memoEval is eval through p's memo (memo.go) for an input the memo has
// no decision for (Decide looked key up): a successful evaluation is
// remembered under key, before the out-of-band rule is applied. Failures
// are never remembered.
func (e *Engine) memoEval(ctx context.Context, p *policyVersion, d *Decision, in *Input, input ast.Value, key []byte) (*Decision, error) {
	if err := ctx.Err(); err != nil {
		return e.fail(ctx, d, CodePolicyError, fmt.Errorf("policy: evaluate: %w", err))
	}
	d, err := e.eval(ctx, p, d, nil, input) // nil: the out-of-band rule after put
	if err != nil {
		return d, err
	}
	p.memo.put(key, d)
	e.outOfBand(ctx, in, d)
	return d, nil
}

// outOfBand keeps the rule that steps which move money or are legally
// binding are approved by a person on the approval page, whatever
// the policy answers: an allowed tools/call of a tool declared moves_money
// or legally_binding gets Confirm and ApprovalOutOfBand. A policy that
// answered otherwise is overruled, and that is logged (a warning with the
// decision id, the tool and what the policy said).
func (e *Engine) outOfBand(ctx context.Context, in *Input, d *Decision) {
	t := in.Tool
	if t != nil && d.Allow && !t.Declared && t.Undeclared == UndeclaredConfirm {
		e.undeclaredConfirmed(ctx, t, d)
		return
	}
	if t == nil || !d.Allow || !t.Declared || !(t.MovesMoney || t.LegallyBinding) {
		return
	}
	if d.Confirm && d.Approval == ApprovalOutOfBand {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "policy decision overruled: a tool that moves money or is legally binding is approved out of band only",
		slog.String("decision_id", d.ID),
		slog.String("tool", t.Name),
		slog.Bool("policy_confirm", d.Confirm),
		slog.String("policy_approval", d.Approval))
	d.Confirm, d.Approval = true, ApprovalOutOfBand
}

// undeclaredConfirmed keeps the rule that an allowed call of a tool nobody
// declared, on an upstream whose undeclared tools go through confirmation,
// waits for a person: nothing that may have an effect runs unconfirmed,
// whatever the policy answers. A policy that answered otherwise is
// overruled (Confirm, the delete class unless it named a write class,
// approval in the client unless it chose the approval page), and that is
// logged.
func (e *Engine) undeclaredConfirmed(ctx context.Context, t *Tool, d *Decision) {
	if d.Confirm && d.Effect != "" && d.Effect != EffectRead && d.Effect != EffectSilentWrite {
		return
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "policy decision overruled: a tool nobody declared is called only after a person confirms",
		slog.String("decision_id", d.ID),
		slog.String("tool", t.Name),
		slog.Bool("policy_confirm", d.Confirm),
		slog.String("policy_effect", d.Effect))
	d.Confirm, d.Replay = true, false
	if d.Effect == "" || d.Effect == EffectRead || d.Effect == EffectSilentWrite {
		d.Effect = EffectDelete
	}
	if d.Approval != ApprovalOutOfBand {
		d.Approval = ApprovalClient
	}
	if len(d.Buckets) == 0 {
		d.Buckets = []string{"writes"}
	}
}

// fail turns d into a deny with code, logs err and returns both.
func (e *Engine) fail(ctx context.Context, d *Decision, code string, err error) (*Decision, error) {
	d.deny(code)
	level := slog.LevelError
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		level = slog.LevelWarn
	}
	e.log.LogAttrs(ctx, level, "policy decision failed",
		slog.String("decision_id", d.ID),
		slog.String("code", code),
		slog.String("error", err.Error()))
	return d, err
}
