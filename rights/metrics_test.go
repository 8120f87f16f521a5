package rights

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
)

// series returns the metrics of family name in reg keyed by their label
// values joined with ",", in the order of the label names.
func series(t *testing.T, reg prometheus.Gatherer, name string) map[string]*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Metric{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := ""
			for i, lp := range m.GetLabel() {
				if i > 0 {
					key += ","
				}
				key += lp.GetName() + "=" + lp.GetValue()
			}
			out[key] = m
		}
	}
	return out
}

func TestInstrument(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	src := newCounting()
	s := Instrument(src, "file", m)
	ctx := context.Background()

	for range 2 {
		if _, err := s.Lookup(ctx, "acme", "alice"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Lookup(ctx, "acme", "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Lookup(ctx, "acme", "nobody"); err != nil {
		t.Fatal(err)
	}
	src.fail.Store(true)
	if _, err := s.Lookup(ctx, "acme", "alice"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}

	counts := series(t, reg, "mcpgate_rights_lookups_total")
	want := map[string]float64{
		"result=ok,source=file":          2,
		"result=inactive,source=file":    2,
		"result=unavailable,source=file": 1,
	}
	if len(counts) != len(want) {
		t.Fatalf("series %v, want %v", counts, want)
	}
	for k, v := range want {
		if got := counts[k].GetCounter().GetValue(); got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	hist := series(t, reg, "mcpgate_rights_lookup_duration_seconds")
	if h := hist["source=file"].GetHistogram(); len(hist) != 1 || h.GetSampleCount() != 5 {
		t.Fatalf("histogram series %v", hist)
	}

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil || len(problems) != 0 {
		t.Fatalf("promlint: %v %v", problems, err)
	}

	// Series start at zero for a source nobody asked yet.
	_ = Instrument(newCounting(), "http", m)
	counts = series(t, reg, "mcpgate_rights_lookups_total")
	if c, ok := counts["result=unavailable,source=http"]; !ok || c.GetCounter().GetValue() != 0 {
		t.Fatalf("http series: %v", counts)
	}
}

func TestNewMetricsTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := NewMetrics(reg)
	b := NewMetrics(reg) // must not panic; shares the registered collectors
	_, _ = Instrument(newCounting(), "x", a).Lookup(context.Background(), "acme", "alice")
	_, _ = Instrument(newCounting(), "x", b).Lookup(context.Background(), "acme", "alice")
	if v := series(t, reg, "mcpgate_rights_lookups_total")["result=ok,source=x"].GetCounter().GetValue(); v != 2 {
		t.Fatalf("ok = %v, want 2", v)
	}
}

func TestInstrumentNilMetrics(t *testing.T) {
	src := newCounting()
	if s := Instrument(src, "x", nil); s != Source(src) {
		t.Fatal("Instrument with nil metrics wrapped the source")
	}
	NewMetrics(nil) // not registered anywhere; must not panic
}
