package gateway

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Metric names. Labels come from closed sets: transport is "proxy" or
// "extproc"; mcp_method is a method mcp.KnownMethod accepts, or
// LabelOther, LabelResponse or LabelNone; decision is an Outcome*; upstream
// is a configured upstream name; result is "success" or "failure"; phase
// is PhaseRequestHeaders or PhaseRequestBody.
const (
	MetricRequests         = "mcpgate_requests_total"                     // counter{transport,mcp_method,decision}
	MetricRequestDuration  = "mcpgate_request_duration_seconds"           // histogram{transport,mcp_method}
	MetricPolicyDuration   = "mcpgate_policy_evaluation_duration_seconds" // histogram
	MetricUpstreamDuration = "mcpgate_upstream_request_duration_seconds"  // histogram{upstream}
	MetricPolicyReloads    = "mcpgate_policy_reloads_total"               // counter{result}
	// MetricExtProcOverrides counts the override_message_timeout messages
	// the ext_proc adapter sent to give slow work on a message more time.
	MetricExtProcOverrides = "mcpgate_extproc_message_timeout_overrides_total" // counter{phase}
)

// phase label values: the ext_proc message whose work was extended.
const (
	PhaseRequestHeaders = "request_headers" // request headers of a request without a body
	PhaseRequestBody    = "request_body"    // the buffered request body
)

// mcp_method label values outside the method names.
const (
	LabelOther    = "other"    // a method mcpgate does not know
	LabelResponse = "response" // a client's JSON-RPC response
	LabelNone     = "none"     // no JSON-RPC message (GET, DELETE, OPTIONS, refused before parsing)
)

// Metrics holds mcpgate's Prometheus collectors. A nil *Metrics records
// nothing.
type Metrics struct {
	requests         *prometheus.CounterVec
	requestDuration  *prometheus.HistogramVec
	policyDuration   prometheus.Histogram
	upstreamDuration *prometheus.HistogramVec
	policyReloads    *prometheus.CounterVec
	extprocOverrides *prometheus.CounterVec
	killSwitch       *killSwitchMetrics     // killswitch.go
	writes           *prometheus.CounterVec // writes.go
	limits           *prometheus.CounterVec // limits.go
	listChanged      *prometheus.CounterVec // listchanged.go

	// series are the request counter and duration histogram of each
	// label set seen, resolved once: WithLabelValues hashes and looks the
	// labels up on every call. The label values come from closed sets
	// (see the constants above), so the map stays small.
	seriesMu sync.RWMutex
	series   map[seriesKey]requestSeries
	upstream map[string]prometheus.Observer // upstreamDuration's, by upstream
}

type seriesKey struct{ transport, method, outcome string }

type requestSeries struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// NewMetrics creates the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricRequests,
			Help: "MCP HTTP requests handled, by transport, MCP method and outcome (allow, deny, invalid, error, local, unauthenticated).",
		}, []string{"transport", "mcp_method", "decision"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricRequestDuration,
			Help:    "Time from receiving a request to the end of its exchange (streams included), in seconds.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"transport", "mcp_method"}),
		policyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    MetricPolicyDuration,
			Help:    "Time spent evaluating one Rego policy decision, in seconds.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .05},
		}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricUpstreamDuration,
			Help:    "Time from forwarding a request to receiving the upstream's response headers, in seconds.",
			Buckets: prometheus.DefBuckets,
		}, []string{"upstream"}),
		policyReloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPolicyReloads,
			Help: "Policy reload attempts, by result (success, failure).",
		}, []string{"result"}),
		extprocOverrides: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricExtProcOverrides,
			Help: "ext_proc messages whose work outlasted half of listeners.extproc.message_budget, so that mcpgate sent Envoy override_message_timeout (listeners.extproc.max_message_budget), by phase (request_headers, request_body).",
		}, []string{"phase"}),
	}
	// Both results exist from the start, so a rate() over them works
	// before the first reload; so do both phases.
	m.policyReloads.WithLabelValues("success")
	m.policyReloads.WithLabelValues("failure")
	m.extprocOverrides.WithLabelValues(PhaseRequestHeaders)
	m.extprocOverrides.WithLabelValues(PhaseRequestBody)
	reg.MustRegister(m.requests, m.requestDuration, m.policyDuration, m.upstreamDuration, m.policyReloads, m.extprocOverrides)
	m.killSwitch = newKillSwitchMetrics(reg)
	m.writes = newWriteMetrics(reg)
	m.limits = newLimitMetrics(reg)
	m.listChanged = newListChangedMetrics(reg)
	return m
}

func (m *Metrics) observeRequest(transport, method, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	k := seriesKey{transport, method, outcome}
	m.seriesMu.RLock()
	rs, ok := m.series[k]
	m.seriesMu.RUnlock()
	if !ok {
		// The children WithLabelValues returns are the collector's own
		// (created once, never replaced): keeping them is exact.
		rs = requestSeries{m.requests.WithLabelValues(transport, method, outcome), m.requestDuration.WithLabelValues(transport, method)}
		m.seriesMu.Lock()
		if m.series == nil {
			m.series = map[seriesKey]requestSeries{}
		}
		m.series[k] = rs
		m.seriesMu.Unlock()
	}
	rs.requests.Inc()
	rs.duration.Observe(d.Seconds())
}

func (m *Metrics) observePolicy(d time.Duration) {
	if m == nil {
		return
	}
	m.policyDuration.Observe(d.Seconds())
}

// ObserveRefused counts a request an adapter refused before the pipeline
// could run (a Host not allowed, 413 or 408 while reading the body).
func (m *Metrics) ObserveRefused(transport string, d time.Duration) {
	m.observeRequest(transport, LabelNone, OutcomeInvalid, d)
}

// ObserveUpstream records the time to the upstream's response headers.
func (m *Metrics) ObserveUpstream(upstream string, d time.Duration) {
	if m == nil {
		return
	}
	m.seriesMu.RLock()
	o, ok := m.upstream[upstream]
	m.seriesMu.RUnlock()
	if !ok {
		// upstream is a configured upstream's name: a closed set.
		o = m.upstreamDuration.WithLabelValues(upstream)
		m.seriesMu.Lock()
		if m.upstream == nil {
			m.upstream = map[string]prometheus.Observer{}
		}
		m.upstream[upstream] = o
		m.seriesMu.Unlock()
	}
	o.Observe(d.Seconds())
}

// PolicyReloaded counts one reload attempt; the policy engine's OnReload
// hook calls it.
func (m *Metrics) PolicyReloaded(ok bool, _ error) {
	if m == nil {
		return
	}
	result := "success"
	if !ok {
		result = "failure"
	}
	m.policyReloads.WithLabelValues(result).Inc()
}

// ExtProcTimeoutOverride counts one override_message_timeout sent by the
// ext_proc adapter for a message of phase (PhaseRequestHeaders or
// PhaseRequestBody).
func (m *Metrics) ExtProcTimeoutOverride(phase string) {
	if m == nil {
		return
	}
	m.extprocOverrides.WithLabelValues(phase).Inc()
}

// MethodLabel returns the bounded mcp_method label of a parsed message.
func MethodLabel(m *mcp.Message) string {
	switch {
	case m == nil:
		return LabelNone
	case m.Kind == mcp.KindResponse:
		return LabelResponse
	case mcp.KnownMethod(m.Method, m.Kind):
		return m.Method
	}
	return LabelOther
}
