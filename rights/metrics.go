package rights

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus collectors of [Instrument].
//
//	mcpgate_rights_lookups_total{source, result}        counter
//	mcpgate_rights_lookup_duration_seconds{source}      histogram
//
// result is "ok" (active), "inactive" (deactivated or removed) or
// "unavailable" (an error). source is the name given to Instrument, so
// the label set stays as small as the configuration.
type Metrics struct {
	lookups  *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// Lookup results, the values of the result label.
const (
	ResultOK          = "ok"
	ResultInactive    = "inactive"
	ResultUnavailable = "unavailable"
)

// NewMetrics creates the collectors and registers them with reg, unless
// reg is nil. When reg already holds them (NewMetrics called twice on
// one registry), the registered ones are used.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpgate_rights_lookups_total",
			Help: "Live-rights lookups, by source and result (ok, inactive, unavailable).",
		}, []string{"source", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpgate_rights_lookup_duration_seconds",
			Help:    "Time taken by live-rights lookups, in seconds, by source.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"source"}),
	}
	if reg != nil {
		m.lookups = register(reg, m.lookups)
		m.duration = register(reg, m.duration)
	}
	return m
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Instrument returns a Source that passes lookups to src and records
// their result and duration under the label source=name. With m nil it
// returns src itself.
//
// Instrumenting the source inside a [Cached] counts the calls that reach
// the product; instrumenting the Cached counts every lookup, hits
// included (keep a reference to the *Cached for Invalidate).
func Instrument(src Source, name string, m *Metrics) Source {
	if m == nil {
		return src
	}
	return &instrumented{
		src:         src,
		ok:          m.lookups.WithLabelValues(name, ResultOK),
		inactive:    m.lookups.WithLabelValues(name, ResultInactive),
		unavailable: m.lookups.WithLabelValues(name, ResultUnavailable),
		duration:    m.duration.WithLabelValues(name),
	}
}

type instrumented struct {
	src                       Source
	ok, inactive, unavailable prometheus.Counter
	duration                  prometheus.Observer
}

func (s *instrumented) Lookup(ctx context.Context, tenant, subject string) (Live, error) {
	start := time.Now()
	l, err := s.src.Lookup(ctx, tenant, subject)
	s.duration.Observe(time.Since(start).Seconds())
	switch {
	case err != nil:
		s.unavailable.Inc()
	case !l.Active:
		s.inactive.Inc()
	default:
		s.ok.Inc()
	}
	return l, err
}
