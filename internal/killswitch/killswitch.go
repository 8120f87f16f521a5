// Package killswitch keeps every gateway replica's view of the kill
// switches fresh: a Watcher reads the
// switches from the state store (store.SwitchStore) every Interval and
// publishes them as an immutable snapshot that the pipeline reads without
// locks on every request.
//
// # Propagation
//
// A switch set through this replica's admin API (Watcher.Set) applies here
// as soon as the store write returns. Other replicas on the same Redis see
// it at their next poll: within Interval (DefaultInterval, 250 ms) plus one
// Redis round trip, so well within a second. With the embedded store there
// is one replica.
//
// # When the store cannot be read
//
// New fails when the first read fails (the gateway does not start without
// knowing the switches). Later failed polls keep the last snapshot, log a
// warning (once per run of failures) and count
// mcpgate_killswitch_sync_errors_total: with the store unreachable nobody
// can change a switch through it either, and refusing every request
// because Redis blinked would turn a store outage into a full outage.
// Requests that need the store fail closed on their own.
//
// # Metrics
//
//	mcpgate_killswitch_active{scope="global"}   1 while the global switch is on, else 0
//	mcpgate_killswitch_active{scope="tenant"}   number of tenants whose switch is on
//	mcpgate_killswitch_sync_errors_total        failed polls of the store
package killswitch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/store"
)

// Defaults and bounds of Options.Interval.
const (
	// DefaultInterval is how often the store is read.
	DefaultInterval = 250 * time.Millisecond
	// MaxInterval bounds Options.Interval, so that a switch set on one
	// replica applies on every other within a second.
	MaxInterval = 500 * time.Millisecond
	// readTimeout bounds one read of the store.
	readTimeout = 2 * time.Second
)

// Metric names (see the package documentation).
const (
	MetricActive     = "mcpgate_killswitch_active"
	MetricSyncErrors = "mcpgate_killswitch_sync_errors_total"
)

// Scope label values of MetricActive.
const (
	ScopeGlobal = "global"
	ScopeTenant = "tenant"
)

// Options configure New.
type Options struct {
	// Store holds the switches. Required.
	Store store.SwitchStore
	// Interval is how often the store is read: 0 means DefaultInterval;
	// otherwise from 10 ms to MaxInterval.
	Interval time.Duration
	// Registerer, if set, gets the package's metrics.
	Registerer prometheus.Registerer
	// Logger logs failed polls and switch changes. Default: discard.
	Logger *slog.Logger
}

// snapshot is one immutable view of the switches.
type snapshot struct {
	global  store.Switch
	tenants map[string]store.Switch // the tenants whose switch is on
}

// Watcher keeps the switch snapshot. Its methods are safe for concurrent
// use.
type Watcher struct {
	st       store.SwitchStore
	interval time.Duration
	log      *slog.Logger
	snap     atomic.Pointer[snapshot]

	mu      sync.Mutex
	changed chan struct{} // closed at the next change; guarded by mu
	failing bool          // the last poll failed; guarded by mu

	active     *prometheus.GaugeVec
	syncErrors prometheus.Counter

	// stop is closed by Stop; runDone, set by Run, is closed when Run
	// returns; stopped: Stop was called. Guarded by mu.
	stop    chan struct{}
	runDone chan struct{}
	stopped bool
}

// New reads the switches once and returns the watcher; it fails when the
// store cannot be read. Call Run to keep the snapshot fresh.
func New(ctx context.Context, o Options) (*Watcher, error) {
	if o.Store == nil {
		return nil, errors.New("killswitch: a switch store is required")
	}
	switch {
	case o.Interval == 0:
		o.Interval = DefaultInterval
	case o.Interval < 10*time.Millisecond || o.Interval > MaxInterval:
		return nil, fmt.Errorf("killswitch: interval %s must be from 10ms to %s", o.Interval, MaxInterval)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Watcher{
		st: o.Store, interval: o.Interval, log: o.Logger,
		changed: make(chan struct{}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricActive,
			Help: "Kill switches that are on: 1 or 0 for scope=\"global\", the number of tenants for scope=\"tenant\".",
		}, []string{"scope"}),
		syncErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricSyncErrors,
			Help: "Failed reads of the kill switches from the state store (the last known states stay in force).",
		}),
		stop: make(chan struct{}),
	}
	w.active.WithLabelValues(ScopeGlobal)
	w.active.WithLabelValues(ScopeTenant)
	w.snap.Store(&snapshot{global: store.DefaultSwitch(""), tenants: map[string]store.Switch{}})
	if err := w.Refresh(ctx); err != nil {
		return nil, fmt.Errorf("killswitch: read the switches: %w", err)
	}
	if o.Registerer != nil {
		for _, c := range []prometheus.Collector{w.active, w.syncErrors} {
			if err := o.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("killswitch: %w", err)
			}
		}
	}
	return w, nil
}

// Run polls the store every Interval until ctx ends or Stop is called.
// Only the first call runs; later ones return at once.
func (w *Watcher) Run(ctx context.Context) {
	w.mu.Lock()
	if w.stopped || w.runDone != nil {
		w.mu.Unlock()
		return
	}
	done := make(chan struct{})
	w.runDone = done
	w.mu.Unlock()
	defer close(done)
	t := time.NewTicker(w.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.stop:
			return
		case <-t.C:
			_ = w.Refresh(ctx) // logged and counted there
		}
	}
}

// Stop ends Run and waits for it; call it before closing the store. A Run
// started after Stop returns at once. Stop is idempotent and nil-safe.
func (w *Watcher) Stop() {
	if w == nil {
		return
	}
	w.mu.Lock()
	if !w.stopped {
		w.stopped = true
		close(w.stop)
	}
	done := w.runDone
	w.mu.Unlock()
	if done != nil {
		<-done
	}
}

// Refresh reads the switches now and publishes them. On failure the
// previous snapshot stays.
func (w *Watcher) Refresh(ctx context.Context) error {
	rctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	all, err := w.st.Switches(rctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down
		}
		w.syncErrors.Inc()
		if !w.failing {
			w.log.WarnContext(ctx, "kill switches cannot be read from the store; the last known states stay in force", "error", err)
		}
		w.failing = true
		return err
	}
	if w.failing {
		w.log.InfoContext(ctx, "kill switches are read from the store again")
		w.failing = false
	}
	next := &snapshot{global: store.DefaultSwitch(""), tenants: map[string]store.Switch{}}
	for _, s := range all {
		switch {
		case s.Global():
			next.global = s
		case s.On:
			next.tenants[s.Tenant] = s
		}
	}
	prev := w.snap.Load()
	if sameState(prev, next) {
		return nil
	}
	w.snap.Store(next)
	w.logChanges(ctx, prev, next)
	gl := 0.0
	if next.global.On {
		gl = 1
	}
	w.active.WithLabelValues(ScopeGlobal).Set(gl)
	w.active.WithLabelValues(ScopeTenant).Set(float64(len(next.tenants)))
	close(w.changed)
	w.changed = make(chan struct{})
	return nil
}

// sameState reports whether two snapshots refuse the same requests with
// the same reasons.
func sameState(a, b *snapshot) bool {
	if a.global != b.global || len(a.tenants) != len(b.tenants) {
		return false
	}
	for t, s := range a.tenants {
		if b.tenants[t] != s {
			return false
		}
	}
	return true
}

func (w *Watcher) logChanges(ctx context.Context, prev, next *snapshot) {
	if prev.global.On != next.global.On {
		w.log.WarnContext(ctx, "global kill switch changed", "on", next.global.On, "reason", next.global.Reason, "set_by", next.global.SetBy)
	}
	for t, s := range next.tenants {
		if _, was := prev.tenants[t]; !was {
			w.log.WarnContext(ctx, "tenant kill switch turned on", "tenant", t, "reason", s.Reason, "set_by", s.SetBy)
		}
	}
	for t := range prev.tenants {
		if _, is := next.tenants[t]; !is {
			w.log.WarnContext(ctx, "tenant kill switch turned off", "tenant", t)
		}
	}
}

// Global returns the global switch's state; on is s.On.
func (w *Watcher) Global() (on bool, s store.Switch) {
	g := w.snap.Load().global
	return g.On, g
}

// Tenant returns tenant's switch; a tenant whose switch is off gets
// store.DefaultSwitch(tenant) (the details of an off switch are in
// Switches).
func (w *Watcher) Tenant(tenant string) (on bool, s store.Switch) {
	if tenant == "" {
		return false, store.DefaultSwitch("")
	}
	if s, ok := w.snap.Load().tenants[tenant]; ok {
		return true, s
	}
	return false, store.DefaultSwitch(tenant)
}

// Changed returns a channel that is closed at the next change of any
// switch's state. Take it before reading the state, so that no change
// falls between the two.
func (w *Watcher) Changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

// Switches reads every switch ever set from the store (not the snapshot):
// the admin API shows what the store holds.
func (w *Watcher) Switches(ctx context.Context) ([]store.Switch, error) {
	return w.st.Switches(ctx)
}

// SetSwitch writes s to the store and applies it on this replica at once
// (other replicas at their next poll). The write's error is returned; a
// failed refresh afterwards is not (the next poll retries it).
func (w *Watcher) SetSwitch(ctx context.Context, s store.Switch) error {
	if err := w.st.SetSwitch(ctx, s); err != nil {
		return err
	}
	_ = w.Refresh(context.WithoutCancel(ctx))
	return nil
}
