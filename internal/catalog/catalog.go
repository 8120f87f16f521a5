package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	// DefaultRefresh is how often Run lists each upstream again.
	DefaultRefresh = 5 * time.Minute
	// MinInterval is the least time between the starts of two listings of
	// one upstream: Refresh calls that come sooner wait (coalesced).
	MinInterval = time.Second
	// maxBackoff bounds the wait before retrying a failed listing.
	maxBackoff = time.Minute
)

// Errors of Catalog methods.
var (
	// ErrUnknownUpstream: the name is not one of Options.Upstreams.
	ErrUnknownUpstream = errors.New("catalog: unknown upstream")
	// ErrStopped: Run has returned; no more listings.
	ErrStopped = errors.New("catalog: stopped")
)

// Options configure a Catalog.
type Options struct {
	// Upstreams are the upstreams to list; names must be unique and not
	// empty, URLs not empty.
	Upstreams []Upstream
	// Refresh is how often Run lists each upstream again after a
	// successful listing (plus up to 10% random delay, so replicas spread
	// out). Zero means DefaultRefresh (5 min); negative means only on
	// demand (Catalog.Refresh) after the first successful listing. A failed
	// listing is retried sooner, after 1 s doubling up to Refresh (at most
	// 1 min); with a negative Refresh only while the upstream has never
	// been listed.
	Refresh time.Duration
	// MaxPages bounds the pages of one listing (ListOptions.MaxPages);
	// zero means DefaultMaxPages (50).
	MaxPages int
	// Timeout bounds one listing (ListOptions.Timeout); zero means
	// DefaultTimeout (30 s).
	Timeout time.Duration
	// HTTPClient sends the listings' requests (ListOptions.HTTPClient);
	// nil means http.DefaultClient.
	HTTPClient *http.Client
	// Logger receives failed listings (WARN), tool state changes (WARN for
	// drift, INFO when approved again), refused tools (WARN) and catalog
	// changes (INFO); nil discards.
	Logger *slog.Logger
	// Registerer receives the catalog's metrics (see the package
	// documentation); nil registers nothing.
	Registerer prometheus.Registerer
	// Manifest returns the pinned manifest in force, nil when pinning is
	// off. It is called after every successful listing and by CheckDrift,
	// so a manifest reloaded on SIGHUP takes effect; nil Manifest: pinning
	// off.
	Manifest func() *Manifest
	// OnChange is called after a successful listing whose tools differ
	// from the previous snapshot's (names, order, hashes or any member of
	// a definition; old is nil for the first listing). Calls for one
	// upstream never overlap; they come after the new snapshot is in
	// place and after OnDrift.
	OnChange func(upstream string, old, new *Snapshot)
	// OnDrift is called once per change of a tool's state against the
	// manifest: a tool that becomes changed, unpinned or missing (or
	// changes definition again while changed or unpinned), and a tool that
	// becomes approved again (State StateApproved) — not for tools that
	// are approved when first seen. Calls for one upstream never overlap.
	// It must not call CheckDrift.
	OnDrift func(Drift)
}

// Catalog keeps the latest listing of each upstream's tools. Create it
// with New, start it with Run; Snapshot and Refresh are safe for
// concurrent use, before and while Run runs.
type Catalog struct {
	o           Options
	log         *slog.Logger
	ups         map[string]*entry
	names       []string
	m           *metrics
	minInterval time.Duration
	listStarted func(upstream string, at time.Time) // test hook; nil

	base    context.Context
	stop    context.CancelFunc
	stopMu  sync.Mutex // orders flights.Add before Run's flights.Wait
	stopped bool
	flights sync.WaitGroup
}

// entry is one upstream's state.
type entry struct {
	u    Upstream
	snap atomic.Pointer[Snapshot]
	// failing: the latest listing failed (the previous snapshot, if any,
	// stays in use).
	failing atomic.Bool

	mu        sync.Mutex
	running   *flight // the listing in progress
	queued    *flight // the listing callers wait for, not started yet
	lastStart time.Time

	// Only touched by the running flight (flights of one upstream are
	// sequential).
	refusedKey string

	driftMu sync.Mutex
	drift   map[string]Drift // tool → its state when not approved
}

// flight is one listing that callers of Refresh wait for.
type flight struct {
	done chan struct{}
	err  error
}

// New checks the options and returns a Catalog; nothing is listed before
// Run or Refresh. It fails on an empty or duplicate upstream name, an
// empty URL, or when the metrics cannot be registered.
func New(o Options) (*Catalog, error) {
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Catalog{o: o, log: log, ups: map[string]*entry{}, minInterval: MinInterval}
	for _, u := range o.Upstreams {
		switch {
		case u.Name == "":
			return nil, errors.New("catalog: an upstream without a name")
		case u.URL == "":
			return nil, fmt.Errorf("catalog: upstream %q has no URL", u.Name)
		case c.ups[u.Name] != nil:
			return nil, fmt.Errorf("catalog: upstream %q twice", u.Name)
		}
		c.ups[u.Name] = &entry{u: u}
		c.names = append(c.names, u.Name)
	}
	m, err := newMetrics(o.Registerer, c.names)
	if err != nil {
		return nil, err
	}
	c.m = m
	c.base, c.stop = context.WithCancel(context.Background())
	return c, nil
}

// Upstreams returns the upstream names in the order of Options.Upstreams.
func (c *Catalog) Upstreams() []string { return slices.Clone(c.names) }

// Snapshot returns the latest successful listing of upstream, nil before
// the first one (or for an unknown name). It is one map lookup and one
// atomic load: safe on the hot path. The snapshot must not be modified.
func (c *Catalog) Snapshot(upstream string) *Snapshot {
	e := c.ups[upstream]
	if e == nil {
		return nil
	}
	return e.snap.Load()
}

// Failing reports whether the latest listing of upstream failed: the
// upstream did not answer when last asked, though its previous snapshot,
// if any, stays in use.
func (c *Catalog) Failing(upstream string) bool {
	e := c.ups[upstream]
	return e != nil && e.failing.Load()
}

// Run lists every upstream at once (those already listed by Refresh are
// not listed again at start), then each again every Options.Refresh
// (failed listings sooner, see Options.Refresh), until ctx ends; then it
// stops the listings in progress and returns. Call it once.
func (c *Catalog) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, name := range c.names {
		e := c.ups[name]
		wg.Go(func() { c.loop(ctx, e) })
	}
	<-ctx.Done() // loops may end sooner (negative Refresh); Refresh still works
	wg.Wait()
	c.stopMu.Lock()
	c.stopped = true
	c.stop()
	c.stopMu.Unlock()
	c.flights.Wait()
}

// loop keeps one upstream listed until ctx ends. An upstream already
// listed (Refresh before Run) is listed again after Options.Refresh.
func (c *Catalog) loop(ctx context.Context, e *entry) {
	failures := 0
	listed := e.snap.Load() != nil
	for {
		if !listed {
			err := c.refresh(ctx, e)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				failures++
			} else {
				failures = 0
			}
		}
		listed = false
		var wait time.Duration
		switch {
		case failures == 0 && c.o.Refresh < 0:
			return
		case failures == 0:
			wait = c.o.Refresh + rand.N(c.o.Refresh/10+1)
		case c.o.Refresh < 0 && e.snap.Load() != nil:
			return
		default:
			wait = backoff(failures, c.o.Refresh)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// backoff is the wait after the n-th failure in a row: 1 s doubling, at
// most refresh (when positive) and maxBackoff.
func backoff(n int, refresh time.Duration) time.Duration {
	d := time.Second << min(n-1, 16)
	d = min(d, maxBackoff)
	if refresh > 0 {
		d = min(d, refresh)
	}
	return d
}

// Refresh lists upstream now and returns when a listing that started after
// the call has ended, with its error (nil: the snapshot is updated; else
// the previous one stays). Calls are coalesced: callers that arrive while
// a listing runs share the next one, which starts when the running one
// ends and no sooner than MinInterval (1 s) after it started. Errors:
// ErrUnknownUpstream, ErrStopped, the listing's error (see List), or ctx's
// error when ctx ends first (the listing goes on for the other callers).
func (c *Catalog) Refresh(ctx context.Context, upstream string) error {
	e := c.ups[upstream]
	if e == nil {
		return fmt.Errorf("%w %q", ErrUnknownUpstream, upstream)
	}
	return c.refresh(ctx, e)
}

func (c *Catalog) refresh(ctx context.Context, e *entry) error {
	f := c.join(e)
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// join returns the flight a new caller waits for: the queued one, or a new
// one queued behind the running one.
func (c *Catalog) join(e *entry) *flight {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.queued != nil {
		return e.queued
	}
	f := &flight{done: make(chan struct{})}
	c.stopMu.Lock()
	defer c.stopMu.Unlock()
	if c.stopped {
		f.err = ErrStopped
		close(f.done)
		return f
	}
	e.queued = f
	prev := e.running
	c.flights.Add(1)
	go c.fly(e, f, prev)
	return f
}

// fly waits for the previous listing and the rate limit, then lists.
func (c *Catalog) fly(e *entry, f *flight, prev *flight) {
	defer c.flights.Done()
	defer close(f.done)
	if prev != nil {
		select {
		case <-prev.done:
		case <-c.base.Done():
		}
	}
	e.mu.Lock()
	wait := c.minInterval - time.Since(e.lastStart)
	e.mu.Unlock()
	if wait > 0 && c.base.Err() == nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.base.Done():
			t.Stop()
		}
	}
	e.mu.Lock()
	e.queued = nil // callers from now on wait for the next listing
	if c.base.Err() != nil {
		e.mu.Unlock()
		f.err = ErrStopped
		return
	}
	e.running = f
	e.lastStart = time.Now()
	if c.listStarted != nil {
		c.listStarted(e.u.Name, e.lastStart)
	}
	e.mu.Unlock()

	f.err = c.list(e)

	e.mu.Lock()
	e.running = nil
	e.mu.Unlock()
}

// list makes one listing of e and applies it.
func (c *Catalog) list(e *entry) error {
	name := e.u.Name
	snap, err := List(c.base, e.u, ListOptions{
		MaxPages: c.o.MaxPages, Timeout: c.o.Timeout, HTTPClient: c.o.HTTPClient,
		Logger: c.log.With("upstream", name),
	})
	if err != nil {
		e.failing.Store(true)
		c.m.refreshes.WithLabelValues(name, "failure").Inc()
		if prev := e.snap.Load(); prev != nil {
			c.log.Warn("catalog: listing the upstream's tools failed; the previous listing stays in use",
				"upstream", name, "error", err, "listed_at", prev.FetchedAt, "tools", len(prev.Tools))
		} else {
			c.log.Warn("catalog: listing the upstream's tools failed; it has no catalog yet",
				"upstream", name, "error", err)
		}
		return err
	}
	old := e.snap.Swap(snap)
	e.failing.Store(false)
	c.m.refreshes.WithLabelValues(name, "ok").Inc()
	c.m.tools.WithLabelValues(name).Set(float64(len(snap.Tools)))
	c.m.refused.WithLabelValues(name).Set(float64(len(snap.Refused)))
	c.m.lastSuccess.WithLabelValues(name).Set(float64(snap.FetchedAt.UnixNano()) / 1e9)
	c.logRefused(e, snap)

	changed := !sameTools(old, snap)
	switch {
	case old == nil:
		c.log.Info("catalog: upstream listed", "upstream", name, "tools", len(snap.Tools), "protocol_version", snap.ProtocolVersion)
	case changed:
		added, removed, modified := compare(old, snap)
		c.log.Info("catalog: the upstream's tools changed", "upstream", name, "tools", len(snap.Tools),
			"added", added, "removed", removed, "modified", modified)
	default:
		c.log.Debug("catalog: upstream listed, no change", "upstream", name, "tools", len(snap.Tools))
	}
	c.checkDrift(e)
	if changed && c.o.OnChange != nil {
		c.o.OnChange(name, old, snap)
	}
	return nil
}

// logRefused logs the refused tools when they differ from the last
// listing's.
func (c *Catalog) logRefused(e *entry, s *Snapshot) {
	var b strings.Builder
	for _, r := range s.Refused {
		fmt.Fprintf(&b, "%q: %s\n", r.Name, r.Reason)
	}
	key := b.String()
	if key == e.refusedKey {
		return
	}
	e.refusedKey = key
	if key == "" {
		c.log.Info("catalog: the upstream lists no refused tools any more", "upstream", s.Upstream)
		return
	}
	names := make([]string, len(s.Refused))
	reasons := make([]string, len(s.Refused))
	for i, r := range s.Refused {
		names[i], reasons[i] = r.Name, r.Reason
	}
	c.log.Warn("catalog: tools refused and left out of the catalog", "upstream", s.Upstream, "tools", names, "reasons", reasons)
}

// CheckDrift compares every upstream's latest snapshot with the manifest
// (Options.Manifest) again, as after a listing: call it after the manifest
// was reloaded. State changes are logged, counted and reported to
// OnDrift.
func (c *Catalog) CheckDrift() {
	for _, name := range c.names {
		c.checkDrift(c.ups[name])
	}
}

// checkDrift reports each change of a tool's state since the last check.
func (c *Catalog) checkDrift(e *entry) {
	e.driftMu.Lock()
	defer e.driftMu.Unlock()
	snap := e.snap.Load()
	if snap == nil {
		return
	}
	var m *Manifest
	if c.o.Manifest != nil {
		m = c.o.Manifest()
	}
	name := e.u.Name
	diff := m.Diff(snap)
	cur := make(map[string]Drift, len(diff))
	counts := map[State]int{}
	for _, d := range diff {
		cur[d.Tool] = d
		counts[d.State]++
		if prev, ok := e.drift[d.Tool]; ok && prev == d {
			continue
		}
		c.m.drift.WithLabelValues(name, string(d.State)).Inc()
		c.log.Warn("catalog: tool not approved: "+driftText(d.State),
			"upstream", name, "tool", d.Tool, "state", string(d.State), "pinned_hash", d.PinnedHash, "hash", d.Hash)
		if c.o.OnDrift != nil {
			c.o.OnDrift(d)
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(e.drift)) {
		if _, still := cur[tool]; still {
			continue
		}
		t, listed := snap.Lookup(tool)
		if !listed {
			c.log.Info("catalog: tool neither listed nor pinned any more", "upstream", name, "tool", tool, "was", string(e.drift[tool].State))
			continue
		}
		d := Drift{Upstream: name, Tool: tool, State: StateApproved, PinnedHash: t.Hash, Hash: t.Hash}
		if m == nil {
			d.PinnedHash = ""
		}
		c.log.Info("catalog: tool approved", "upstream", name, "tool", tool, "was", string(e.drift[tool].State), "hash", t.Hash)
		if c.o.OnDrift != nil {
			c.o.OnDrift(d)
		}
	}
	e.drift = cur
	for _, st := range driftStates {
		c.m.unapproved.WithLabelValues(name, string(st)).Set(float64(counts[st]))
	}
}

func driftText(s State) string {
	switch s {
	case StateChanged:
		return "its definition differs from the pinned one"
	case StateUnpinned:
		return "the manifest does not pin it"
	case StateMissing:
		return "pinned, but the upstream no longer lists it"
	}
	return string(s)
}

// sameTools reports whether two snapshots list the same tools in the same
// order with the same definitions (compared as RFC 8785 canonical JSON).
func sameTools(a, b *Snapshot) bool {
	if a == nil || b == nil {
		return a == b
	}
	if len(a.Tools) != len(b.Tools) {
		return false
	}
	for i := range a.Tools {
		x, y := &a.Tools[i], &b.Tools[i]
		if x.Name != y.Name || x.Hash != y.Hash || !sameJSON(x.Definition, y.Definition) {
			return false
		}
	}
	return true
}

func sameJSON(a, b jsontext.Value) bool {
	if bytes.Equal(a, b) {
		return true
	}
	ca, cb := a.Clone(), b.Clone()
	if ca.Canonicalize() != nil || cb.Canonicalize() != nil {
		return false
	}
	return bytes.Equal(ca, cb)
}

// compare names the tools added, removed and modified (hash or definition)
// from a to b.
func compare(a, b *Snapshot) (added, removed, modified []string) {
	for i := range b.Tools {
		t := &b.Tools[i]
		o, ok := a.Lookup(t.Name)
		switch {
		case !ok:
			added = append(added, t.Name)
		case o.Hash != t.Hash || !sameJSON(o.Definition, t.Definition):
			modified = append(modified, t.Name)
		}
	}
	for i := range a.Tools {
		if _, ok := b.Lookup(a.Tools[i].Name); !ok {
			removed = append(removed, a.Tools[i].Name)
		}
	}
	return added, removed, modified
}

var driftStates = []State{StateChanged, StateUnpinned, StateMissing}

type metrics struct {
	refreshes   *prometheus.CounterVec
	tools       *prometheus.GaugeVec
	refused     *prometheus.GaugeVec
	lastSuccess *prometheus.GaugeVec
	drift       *prometheus.CounterVec
	unapproved  *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer, upstreams []string) (*metrics, error) {
	m := &metrics{
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_catalog_refreshes_total",
			Help: "Listings of an upstream's tools by the catalog, by result (ok, failure).",
		}, []string{"upstream", "result"}),
		tools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgate_catalog_tools",
			Help: "Tools in the upstream's latest successful listing.",
		}, []string{"upstream"}),
		refused: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgate_catalog_refused_tools",
			Help: "Tools of the upstream's latest successful listing left out of the catalog (names outside [A-Za-z0-9_.-]{1,128}, invalid x-mcp-header).",
		}, []string{"upstream"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgate_catalog_last_success_timestamp_seconds",
			Help: "Unix time of the upstream's latest successful listing (0: never).",
		}, []string{"upstream"}),
		drift: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_catalog_drift_total",
			Help: "Tools that became not approved against the pinned manifest, by state (changed, unpinned, missing).",
		}, []string{"upstream", "state"}),
		unapproved: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "mcpgate_catalog_unapproved_tools",
			Help: "Tools now not approved against the pinned manifest, by state (changed, unpinned, missing).",
		}, []string{"upstream", "state"}),
	}
	for _, u := range upstreams {
		m.refreshes.WithLabelValues(u, "ok")
		m.refreshes.WithLabelValues(u, "failure")
		m.tools.WithLabelValues(u)
		m.refused.WithLabelValues(u)
		m.lastSuccess.WithLabelValues(u)
		for _, st := range driftStates {
			m.drift.WithLabelValues(u, string(st))
			m.unapproved.WithLabelValues(u, string(st))
		}
	}
	if reg != nil {
		for _, col := range []prometheus.Collector{m.refreshes, m.tools, m.refused, m.lastSuccess, m.drift, m.unapproved} {
			if err := reg.Register(col); err != nil {
				return nil, fmt.Errorf("catalog metrics: %w", err)
			}
		}
	}
	return m, nil
}
