package stdio

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the bridges' Prometheus metrics, labelled by upstream name
// (from the configuration).
//
//	mcpgate_stdio_children{upstream}                        children running (0 or 1)
//	mcpgate_stdio_restarts_total{upstream}                  starts after the first (after an exit, a failed start or initialize)
//	mcpgate_stdio_stderr_lines_dropped_total{upstream}      standard error lines over the log rate, counted instead of logged
//	mcpgate_stdio_messages_dropped_total{upstream}          notifications of the child not relayed (a client's stream not keeping up)
//	mcpgate_stdio_ready_seconds{upstream}                   seconds from a child's start to its initialize answer
//	mcpgate_stdio_sessions_evicted_total{upstream}          streamable-HTTP sessions of the bridge ended because the session limit was reached
type Metrics struct {
	children      *prometheus.GaugeVec
	restarts      *prometheus.CounterVec
	stderrDropped *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	readySeconds  *prometheus.HistogramVec
	evicted       *prometheus.CounterVec
}

// NewMetrics registers the bridges' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		children: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "mcpgate_stdio_children",
			Help: "Child processes of stdio upstreams running now (0 or 1 per upstream)."}, []string{"upstream"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpgate_stdio_restarts_total",
			Help: "Starts of a stdio upstream's child after the first: after it exited, or failed to start or to answer initialize in time."}, []string{"upstream"}),
		stderrDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpgate_stdio_stderr_lines_dropped_total",
			Help: "Lines a stdio upstream's child wrote to standard error beyond the log rate: read and counted, not logged."}, []string{"upstream"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpgate_stdio_messages_dropped_total",
			Help: "Notifications of a stdio upstream's child not relayed because the client's stream was not keeping up."}, []string{"upstream"}),
		readySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mcpgate_stdio_ready_seconds",
			Help:    "Seconds from the start of a stdio upstream's child to its answer to initialize.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}}, []string{"upstream"}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpgate_stdio_sessions_evicted_total",
			Help: "Streamable-HTTP sessions of a stdio upstream's bridge ended because the session limit was reached (idle ones first, least recently used first)."}, []string{"upstream"}),
	}
	reg.MustRegister(m.children, m.restarts, m.stderrDropped, m.dropped, m.readySeconds, m.evicted)
	return m
}

// upstreamMetrics are one upstream's series.
type upstreamMetrics struct {
	children      prometheus.Gauge
	restarts      prometheus.Counter
	stderrDropped prometheus.Counter
	dropped       prometheus.Counter
	readySeconds  prometheus.Observer
	evicted       prometheus.Counter
}

// of returns upstream's series; a nil m counts nowhere.
func (m *Metrics) of(upstream string) upstreamMetrics {
	if m == nil {
		m = NewMetrics(prometheus.NewRegistry())
	}
	return upstreamMetrics{
		children:      m.children.WithLabelValues(upstream),
		restarts:      m.restarts.WithLabelValues(upstream),
		stderrDropped: m.stderrDropped.WithLabelValues(upstream),
		dropped:       m.dropped.WithLabelValues(upstream),
		readySeconds:  m.readySeconds.WithLabelValues(upstream),
		evicted:       m.evicted.WithLabelValues(upstream),
	}
}
