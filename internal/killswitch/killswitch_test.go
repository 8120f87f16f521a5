package killswitch_test

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/internal/killswitch"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
	"github.com/mcpgate/mcpgate/store/redisstore"
	"github.com/mcpgate/mcpgate/store/redistest"
)

func openBolt(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openRedis(t *testing.T, url string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(t.Context(), url, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newWatcher(t *testing.T, st store.SwitchStore, reg prometheus.Registerer, log *slog.Logger) *killswitch.Watcher {
	t.Helper()
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: st, Registerer: reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go w.Run(ctx)
	t.Cleanup(func() { cancel(); w.Stop() })
	return w
}

func TestDefaultsAndSetApplyAtOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	w := newWatcher(t, openBolt(t), reg, nil)
	if on, s := w.Global(); on || s != store.DefaultSwitch("") {
		t.Fatalf("Global() on a fresh store = %t %+v, want the default (off)", on, s)
	}
	if on, s := w.Tenant("acme"); on || s != store.DefaultSwitch("acme") {
		t.Fatalf("Tenant(acme) on a fresh store = %t %+v, want the default (off)", on, s)
	}
	changed := w.Changed()
	at := time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)
	if err := w.SetSwitch(t.Context(), store.Switch{Tenant: "acme", On: true, Reason: "bad deploy", SetBy: "ops", At: at}); err != nil {
		t.Fatal(err)
	}
	// Applied on this replica when SetSwitch returns, and announced.
	if on, s := w.Tenant("acme"); !on || s.Reason != "bad deploy" || s.SetBy != "ops" {
		t.Fatalf("Tenant(acme) after SetSwitch = %t %+v", on, s)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Changed() was not closed by the change")
	}
	if on, _ := w.Tenant("globex"); on {
		t.Error("another tenant is on")
	}
	if on, _ := w.Global(); on {
		t.Error("the global switch is on")
	}
	if on, _ := w.Tenant(""); on {
		t.Error(`Tenant("") is on`)
	}
	if got := gauge(t, reg, killswitch.MetricActive, killswitch.ScopeTenant); got != 1 {
		t.Errorf("active{scope=tenant} = %v, want 1", got)
	}
	if err := w.SetSwitch(t.Context(), store.Switch{On: true, Reason: "incident", SetBy: "ops", At: at}); err != nil {
		t.Fatal(err)
	}
	if on, s := w.Global(); !on || s.Reason != "incident" {
		t.Fatalf("Global() = %t %+v", on, s)
	}
	if got := gauge(t, reg, killswitch.MetricActive, killswitch.ScopeGlobal); got != 1 {
		t.Errorf("active{scope=global} = %v, want 1", got)
	}
	// Off again: the default state, the gauge back to 0.
	if err := w.SetSwitch(t.Context(), store.Switch{Tenant: "acme", SetBy: "ops", At: at}); err != nil {
		t.Fatal(err)
	}
	if on, _ := w.Tenant("acme"); on {
		t.Error("acme still on after turning it off")
	}
	if got := gauge(t, reg, killswitch.MetricActive, killswitch.ScopeTenant); got != 0 {
		t.Errorf("active{scope=tenant} = %v, want 0", got)
	}
	// A refused write changes nothing.
	if err := w.SetSwitch(t.Context(), store.Switch{On: true, SetBy: "ops", At: at}); err == nil {
		t.Error("SetSwitch on without a reason succeeded")
	}
}

// gauge returns the value of metric name (with label scope, "" for none)
// in reg.
func gauge(t *testing.T, reg *prometheus.Registry, name, scope string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if scope != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != scope) {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s{scope=%q}", name, scope)
	return 0
}

// TestReplicasOnRedis: a switch set through one replica's watcher is seen
// by another replica's within a second (its poll), both on one real
// redis-server.
func TestReplicasOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	a := newWatcher(t, openRedis(t, srv.URL), nil, nil)
	b := newWatcher(t, openRedis(t, srv.URL), nil, nil)
	changed := b.Changed()
	set := time.Now()
	if err := a.SetSwitch(t.Context(), store.Switch{On: true, Reason: "incident 7", SetBy: "ops", At: set}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "replica B sees the global switch", func() bool { on, _ := b.Global(); return on })
	if d := time.Since(set); d > time.Second {
		t.Logf("note: replica B saw the switch after %s (a loaded machine)", d)
	}
	// The snapshot is stored before the channel is closed (so a reader
	// that takes the channel first never misses a change): the close may
	// follow the state by a moment.
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Error("replica B's Changed() was not closed")
	}
	if _, s := b.Global(); s.Reason != "incident 7" || s.SetBy != "ops" {
		t.Errorf("replica B's global switch = %+v", s)
	}
	if err := b.SetSwitch(t.Context(), store.Switch{SetBy: "ops", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "replica A sees the switch off", func() bool { on, _ := a.Global(); return !on })
}

// TestStoreDownKeepsState: when the store cannot be read, the last known
// states stay in force, the failure is logged once and counted; New fails
// when the first read fails.
func TestStoreDownKeepsState(t *testing.T) {
	srv := redistest.Start(t)
	st := openRedis(t, srv.URL)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: st, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetSwitch(t.Context(), store.Switch{Tenant: "acme", On: true, Reason: "r", SetBy: "ops", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	_ = srv.Client(t).ShutdownNoSave(ctx).Err()
	cancel()
	for range 3 {
		if err := w.Refresh(t.Context()); err == nil {
			t.Fatal("Refresh with the store down succeeded")
		}
	}
	if on, _ := w.Tenant("acme"); !on {
		t.Error("the switch was lost when the store went down")
	}
	if n := strings.Count(logs.String(), "kill switches cannot be read"); n != 1 {
		t.Errorf("the failure was logged %d times, want once:\n%s", n, logs.String())
	}
	if got := gauge(t, reg, killswitch.MetricSyncErrors, ""); got != 3 {
		t.Errorf("%s = %v, want 3", killswitch.MetricSyncErrors, got)
	}
	if _, err := killswitch.New(t.Context(), killswitch.Options{Store: st}); err == nil {
		t.Error("New with the store down succeeded")
	}
}

func TestOptions(t *testing.T) {
	if _, err := killswitch.New(t.Context(), killswitch.Options{}); err == nil {
		t.Error("New without a store succeeded")
	}
	for _, d := range []time.Duration{time.Millisecond, time.Second} {
		if _, err := killswitch.New(t.Context(), killswitch.Options{Store: openBolt(t), Interval: d}); err == nil {
			t.Errorf("New with interval %s succeeded", d)
		}
	}
	// Stop without Run, twice, and Run after Stop return at once.
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: openBolt(t)})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	w.Stop()
	w.Run(t.Context())
	var nilW *killswitch.Watcher
	nilW.Stop()
}
