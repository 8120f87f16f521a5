package app

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// registry registers collectors with the App's Registry and remembers
// them, so that every metric can be described, including vectors that
// have no series yet.
type registry struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

var _ prometheus.Registerer = (*registry)(nil)

// Register registers c with the Registry and remembers it.
func (r *registry) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return nil
}

// MustRegister registers every collector and panics on the first error.
func (r *registry) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Collectors returns every collector registered with the App's Registry
// while it started, in order: a collector's Describe names its metrics,
// labels and help.
func (a *App) Collectors() []prometheus.Collector {
	a.reg.mu.Lock()
	defer a.reg.mu.Unlock()
	return append([]prometheus.Collector(nil), a.reg.collectors...)
}

//go:generate go test -run ^TestMetricsReference$ -update .
