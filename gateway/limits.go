package gateway

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// Limits are the limits per effect class: rate buckets the policy names
// (Decision.Buckets), a concurrency cap per credential with slots kept for
// writes, a loop brake on repeated identical failures and a deadline per
// tool. Every refusal says when to retry.
type Limits struct {
	// Limiter keeps the buckets (in memory or in Redis).
	Limiter ratelimit.Limiter
	// Buckets maps a bucket name to its rate per credential; a tenant's
	// bucket holds TenantFactor times as much. A decision naming a bucket
	// missing here is refused (fail closed).
	Buckets map[string]ratelimit.Limit
	// Slots caps the calls in flight per credential; nil: no cap.
	Slots *ratelimit.Slots
	// LoopBrake: the LoopBrake-th identical failing call in a row is
	// answered "stop and ask the user" instead of running; 0: off.
	LoopBrake int
	// ReadsWhenUnavailable lets reads through when the bucket backend
	// (Redis) cannot be reached; writes are always refused then. Default
	// false: every call is refused (fail closed).
	ReadsWhenUnavailable bool
	// DefaultDeadline bounds a tools/call upstream when its tool declares
	// no deadline_ms (standalone adapter; under Envoy the route timeout
	// applies). 0: none.
	DefaultDeadline time.Duration
}

// TenantFactor is how many times a credential's rate a tenant's bucket
// holds.
const TenantFactor = 10

// Bucket names the gateway treats specially: notify is also kept per
// object (the tool's notify_object argument), wake per tenant only.
const (
	bucketNotify = "notify"
	bucketWake   = "wake"
)

// loopBrakeTTL is how long a run of identical failures is remembered.
const loopBrakeTTL = 10 * time.Minute

// maxLoopEntries bounds the loop brake's memory (oldest runs forgotten).
const maxLoopEntries = 100_000

// limitsGate runs the limits of an allowed tools/call; a refusal is a
// tool error saying when to retry.
func (p *Pipeline) limitsGate(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	l := p.opts.Limits
	if l == nil {
		return nil
	}
	pr := &x.input.Principal
	conn := connectionOf(pr)
	if l.LoopBrake > 1 && p.loops.empty() {
		// No run of failures is remembered, so this call cannot be
		// braked (it would be the first of its run): its key (a canonical digest of the arguments, the
		// costliest part of the limits) is made only if its answer is a
		// failure or failures appear meanwhile (loopOutcome).
		x.loopLater = true
	} else if l.LoopBrake > 0 {
		if key, ok := x.makeLoopKey(); ok {
			x.loopKey = key
			// Upstream failures: the next identical call would most
			// likely fail the same way, so it is not run.
			if n := p.loops.failures(x.loopKey); n >= l.LoopBrake-1 {
				x.outcome = OutcomeDeny
				p.m.observeLimit("loop_brake")
				return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{stopAndAsk(n, "failed")}, d.ID))
			}
		}
	}
	write := d.Effect != "" && d.Effect != policy.EffectRead
	// The concurrency cap is per credential: an anonymous caller (no auth
	// section) has none to hold slots for, and every anonymous client
	// would share one.
	if l.Slots != nil && x.input.Principal.Authenticated {
		slot, ok := l.Slots.Take(conn, write)
		if !ok {
			x.outcome = OutcomeDeny
			p.m.observeLimit("concurrency")
			return limitRefusal(x, d, "too_many_in_flight", "This credential already has as many calls in flight as it may"+
				map[bool]string{true: ".", false: " (one slot is kept for writes)."}[write], time.Second)
		}
		x.concurrency = slot
	}
	// A preview reaches nobody, and a repeat answered from the replay
	// window runs nothing: only calls that will run take from the
	// buckets (a silent write takes once it won its replay claim).
	preview := d.Confirm && x.confirming == nil && x.elicit == nil
	replay := d.Replay && !d.Confirm && p.opts.Writes != nil
	if !preview && !replay {
		if l := p.takeBuckets(ctx, x, d); l != nil {
			return l
		}
	}
	if dl := p.deadline(x, d); dl > 0 {
		x.deadline = dl
	}
	return nil
}

// bucketKey is one bucket instance a call takes from.
type bucketKey struct {
	key        string
	tenantWide bool
}

// bucketKeys are the instances of a bucket for a call: per credential and
// per tenant; notify also per object; wake per tenant only. They are
// written into keys (the caller's array: no slice is allocated), and the
// credential's and the tenant's key are cut from one string (one
// allocation; the keys are the same strings as ever: c␟bucket␟connection
// and t␟bucket␟tenant).
func bucketKeys(keys *[3]bucketKey, name string, pr *policy.Principal, conn string, x *Exchange) []bucketKey {
	if name == bucketWake {
		keys[0] = bucketKey{"t\x1f" + name + "\x1f" + pr.Tenant, true}
		return keys[:1]
	}
	both := "c\x1f" + name + "\x1f" + conn + "t\x1f" + name + "\x1f" + pr.Tenant
	split := len("c\x1f") + len(name) + len("\x1f") + len(conn)
	keys[0], keys[1] = bucketKey{both[:split], false}, bucketKey{both[split:], true}
	n := 2
	if name == bucketNotify && x.input.Tool != nil && x.input.Tool.NotifyObject != "" {
		if obj, ok := argumentText(x.normalisedArguments(), x.input.Tool.NotifyObject); ok {
			keys[2] = bucketKey{"o\x1f" + pr.Tenant + "\x1f" + x.msg.Name + "\x1f" + obj, false}
			n = 3
		}
	}
	return keys[:n]
}

// limitRefusal is a limit's tool error; it names when to retry.
func limitRefusal(x *Exchange, d *policy.Decision, code, cause string, retry time.Duration) *Local {
	secs := int(math.Ceil(retry.Seconds()))
	if secs < 1 {
		secs = 1
	}
	return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
		Code:  code,
		Cause: cause,
		Fix:   "Retry the same call in " + strconv.Itoa(secs) + " seconds; do not change it to get around the limit.",
	}}, d.ID))
}

// deadline is how long the call may take upstream: the tool's declared
// deadline_ms, else the default.
func (p *Pipeline) deadline(x *Exchange, d *policy.Decision) time.Duration {
	if t := x.input.Tool; t != nil && t.DeadlineMS > 0 {
		return time.Duration(t.DeadlineMS) * time.Millisecond
	}
	return p.opts.Limits.DefaultDeadline
}

// makeLoopKey is the loop brake's key of the call: connection, upstream,
// tool and the digest of the canonical arguments.
func (x *Exchange) makeLoopKey() (string, bool) {
	digest, _, err := writeDigest(x.normalisedArguments())
	if err != nil {
		return "", false
	}
	return connectionOf(&x.input.Principal) + "\x1f" + x.req.Upstream + "\x1f" + x.msg.Name + "\x1f" + digest, true
}

// loopOutcome records the outcome of a forwarded tools/call for the loop
// brake; failed is asked only when the brake is on.
func (x *Exchange) loopOutcome(failed func() bool) {
	if x.loopKey == "" && !x.loopLater {
		return // the brake is off (or the key could not be made)
	}
	f := failed()
	if x.loopLater {
		x.loopLater = false
		if !f && x.p.loops.empty() {
			return // a success with no run to end
		}
		key, ok := x.makeLoopKey()
		if !ok {
			return
		}
		x.loopKey = key
	}
	x.p.loops.record(x.loopKey, f)
}

// loopBrake counts runs of identical failing calls.
type loopBrake struct {
	mu   sync.Mutex
	runs map[string]loopRun
}

// empty reports whether no run of failures (or refusals) is remembered.
func (b *loopBrake) empty() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.runs) == 0
}

type loopRun struct {
	n    int
	last time.Time
}

func (b *loopBrake) failures(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.runs[key]
	if !ok || time.Since(r.last) > loopBrakeTTL {
		return 0
	}
	return r.n
}

// record notes the outcome of a call: a failure extends its run, a
// success ends it.
func (b *loopBrake) record(key string, failed bool) int {
	if key == "" {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !failed {
		delete(b.runs, key)
		delete(b.runs, "refused\x1f"+key)
		return 0
	}
	if b.runs == nil {
		b.runs = map[string]loopRun{}
	}
	if len(b.runs) >= maxLoopEntries {
		now := time.Now()
		for k, r := range b.runs {
			if now.Sub(r.last) > loopBrakeTTL || len(b.runs) >= maxLoopEntries {
				delete(b.runs, k)
			}
		}
	}
	r := b.runs[key]
	if time.Since(r.last) > loopBrakeTTL {
		r.n = 0
	}
	r.n++
	r.last = time.Now()
	b.runs[key] = r
	return r.n
}

// MetricLimitRefusals counts calls refused by a limit, by limit
// (loop_brake, concurrency, rate:<bucket>).
const MetricLimitRefusals = "mcpgate_limit_refusals_total"

// loopRefused counts a refused tools/call toward the loop brake and
// returns the reasons to answer with: the policy's, or — at the
// LoopBrake-th identical refusal in a row — "stop and ask the user"
// first. Refusals are not pre-empted (the rights or arguments may change
// between two calls); the answer tells the model to stop.
func (p *Pipeline) loopRefused(x *Exchange, reasons []policy.Reason) []policy.Reason {
	l := p.opts.Limits
	if l == nil || l.LoopBrake == 0 || x.msg == nil {
		return reasons
	}
	digest, _, err := writeDigest(x.normalisedArguments())
	if err != nil {
		return reasons
	}
	key := "refused\x1f" + connectionOf(&x.input.Principal) + "\x1f" + x.req.Upstream + "\x1f" + x.msg.Name + "\x1f" + digest
	n := p.loops.record(key, true)
	if n < l.LoopBrake {
		return reasons
	}
	p.m.observeLimit("loop_brake")
	return append([]policy.Reason{stopAndAsk(n, "was refused")}, reasons...)
}

// stopAndAsk is the loop brake's reason after n identical failures.
func stopAndAsk(n int, what string) policy.Reason {
	return policy.Reason{
		Code:  "stop_and_ask",
		Cause: "This exact call " + what + " " + strconv.Itoa(n) + " times in a row; trying it again will not help.",
		Fix:   "Stop and ask the user how to go on. Do not retry this call with the same arguments (the brake lifts once this exact call has not failed for 10 minutes).",
	}
}

var limitKinds = []string{"loop_brake", "concurrency"}

func newLimitMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricLimitRefusals,
		Help: "tools/call requests refused by a limit, by limit: loop_brake, concurrency, rate:<bucket>.",
	}, []string{"limit"})
	for _, k := range limitKinds {
		c.WithLabelValues(k)
	}
	reg.MustRegister(c)
	return c
}

func (m *Metrics) observeLimit(kind string) {
	if m == nil || m.limits == nil {
		return
	}
	m.limits.WithLabelValues(kind).Inc()
}

// takeBuckets takes the call from every bucket the decision names; a
// refusal says when to retry (the longest wait of the buckets refused).
func (p *Pipeline) takeBuckets(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	l := p.opts.Limits
	if l == nil {
		return nil
	}
	pr := &x.input.Principal
	conn := connectionOf(pr)
	var wait time.Duration
	var refused string
	for _, name := range d.Buckets {
		if l.Limiter == nil {
			break
		}
		lim, ok := l.Buckets[name]
		if !ok {
			x.outcome = OutcomeError
			p.log.LogAttrs(ctx, slog.LevelError, "the policy named a rate bucket that is not configured; call refused", slog.String("bucket", name))
			return limitRefusal(x, d, "rate_limited", "The gateway has no rate configured for this kind of call ("+name+").", time.Minute)
		}
		var kb [3]bucketKey
		for _, key := range bucketKeys(&kb, name, pr, conn, x) {
			eff := lim
			if key.tenantWide && name != bucketWake {
				eff.Rate, eff.Burst = lim.Rate*TenantFactor, lim.Burst*TenantFactor
			}
			res, err := l.Limiter.Allow(ctx, key.key, eff)
			if err != nil && l.ReadsWhenUnavailable && d.Effect == policy.EffectRead {
				p.log.LogAttrs(ctx, slog.LevelWarn, "rate limiter failed; a read goes through unlimited (rate_limits.reads_when_unavailable)", slog.String("bucket", name), slog.Any("error", err))
				continue
			}
			if err != nil {
				x.outcome = OutcomeError
				p.log.LogAttrs(ctx, slog.LevelError, "rate limiter failed; call refused", slog.String("bucket", name), slog.Any("error", err))
				return limitRefusal(x, d, "rate_limiter_unavailable", "The gateway cannot check its rate limits right now; nothing was sent.", 10*time.Second)
			}
			if !res.Allowed && res.RetryAfter >= wait {
				wait, refused = res.RetryAfter, name
			}
		}
	}
	if refused != "" {
		x.outcome = OutcomeDeny
		p.m.observeLimit("rate:" + refused)
		return limitRefusal(x, d, "rate_limited", "Too many calls of this kind ("+refused+") for this credential or tenant.", wait)
	}
	return nil
}

// limits is the stage that runs the limits of an allowed tools/call
// (limitsGate).
func (p *Pipeline) limits(ctx context.Context, x *Exchange) *Verdict {
	if x.msg.Method != "tools/call" {
		return nil
	}
	x.mark(SpanLimits)
	if l := p.limitsGate(ctx, x, x.decision); l != nil {
		return x.answer(l)
	}
	return nil
}
