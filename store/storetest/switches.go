package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// switchTests are the kill switch cases of the suite (store.SwitchStore).
var switchTests = []struct {
	name string
	fn   func(*testing.T, suite)
}{
	{"SwitchesDefaultOff", testSwitchesDefaultOff},
	{"SwitchesRoundTrip", testSwitchesRoundTrip},
	{"SwitchesLatestPerScope", testSwitchesLatestPerScope},
	{"SwitchesInvalid", testSwitchesInvalid},
	{"SwitchesConcurrent", testSwitchesConcurrent},
	{"SwitchesReopenAndReplica", testSwitchesReopenAndReplica},
	{"SwitchesClosedAndCancelled", testSwitchesClosedAndCancelled},
}

// testSwitchesRun runs switchTests as subtests (one entry of Run).
func testSwitchesRun(t *testing.T, s suite) {
	for _, tc := range switchTests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s)
		})
	}
}

func showSwitch(s store.Switch) string {
	return fmt.Sprintf("{tenant=%q on=%t reason=%q set_by=%q at=%s}", s.Tenant, s.On, s.Reason, s.SetBy, fmtTime(s.At))
}

func checkSwitches(t *testing.T, st store.Store, want ...store.Switch) {
	t.Helper()
	got, err := st.Switches(t.Context())
	if err != nil {
		t.Fatalf("Switches: %v", err)
	}
	var g, w []string
	for _, s := range got {
		g = append(g, showSwitch(s))
		if !s.At.IsZero() && (s.At.Location() != time.UTC || s.At.Nanosecond()%1000 != 0) {
			t.Errorf("switch %q: at %v, want UTC at microsecond precision", s.Tenant, s.At)
		}
	}
	for _, s := range want {
		w = append(w, showSwitch(s))
	}
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("Switches\n got %s\nwant %s", strings.Join(g, "\n     "), strings.Join(w, "\n     "))
	}
}

// testSwitchesDefaultOff: a fresh store lists no switch: every scope is in
// the default state, which is off.
func testSwitchesDefaultOff(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	checkSwitches(t, st)
	if d := store.DefaultSwitch("acme"); d.On || d.Tenant != "acme" {
		t.Errorf("DefaultSwitch = %+v, want off", d)
	}
	if d := store.DefaultSwitch(""); d.On || !d.Global() {
		t.Errorf("DefaultSwitch(\"\") = %+v, want the global switch, off", d)
	}
}

func testSwitchesRoundTrip(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	g := store.Switch{On: true, Reason: "incident 42: agents page everyone — ünïcode ok", SetBy: "ops@example.com", At: base}
	must(t, "set global", st.SetSwitch(t.Context(), g))
	zeta := store.Switch{Tenant: "zeta", On: false, SetBy: "zeta-admin", At: base.Add(time.Second)}
	acme := store.Switch{Tenant: "acme", On: true, Reason: "bad deploy", SetBy: "acme-admin", At: base.Add(2 * time.Second)}
	must(t, "set zeta", st.SetSwitch(t.Context(), zeta))
	must(t, "set acme", st.SetSwitch(t.Context(), acme))
	// The global switch first, then tenants in byte order.
	checkSwitches(t, st, g, acme, zeta)
}

func testSwitchesLatestPerScope(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	ctx := t.Context()
	on := store.Switch{Tenant: "acme", On: true, Reason: "first", SetBy: "a", At: base}
	off := store.Switch{Tenant: "acme", On: false, Reason: "resolved", SetBy: "b", At: base.Add(time.Minute)}
	// The last write wins, even with an earlier time (clocks of replicas
	// differ; the admin's latest action is what counts).
	again := store.Switch{Tenant: "acme", On: true, Reason: "again", SetBy: "c", At: base.Add(-time.Hour)}
	must(t, "on", st.SetSwitch(ctx, on))
	must(t, "off", st.SetSwitch(ctx, off))
	checkSwitches(t, st, off)
	must(t, "again", st.SetSwitch(ctx, again))
	checkSwitches(t, st, again)
	g := store.Switch{On: false, SetBy: "ops", At: base}
	must(t, "global off", st.SetSwitch(ctx, g))
	checkSwitches(t, st, g, again)
}

func testSwitchesInvalid(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	ok := store.Switch{Tenant: "acme", On: true, Reason: "r", SetBy: "ops", At: base}
	for name, mut := range map[string]func(*store.Switch){
		"on without reason":      func(s *store.Switch) { s.Reason = "" },
		"on with a blank reason": func(s *store.Switch) { s.Reason = "  \t" },
		"reason too long":        func(s *store.Switch) { s.Reason = strings.Repeat("x", store.MaxSwitchReasonLen+1) },
		"reason not UTF-8":       func(s *store.Switch) { s.Reason = "bad \xff" },
		"reason with a newline":  func(s *store.Switch) { s.Reason = "line\nbreak" },
		"tenant with NUL":        func(s *store.Switch) { s.Tenant = "a\x00b" },
		"tenant too long":        func(s *store.Switch) { s.Tenant = strings.Repeat("t", store.MaxIDLen+1) },
		"no set_by":              func(s *store.Switch) { s.SetBy = "" },
		"zero time":              func(s *store.Switch) { s.At = time.Time{} },
	} {
		sw := ok
		mut(&sw)
		wantErr(t, name, st.SetSwitch(t.Context(), sw), store.ErrInvalid)
	}
	checkSwitches(t, st)
	// Off needs no reason; the longest reason is accepted.
	must(t, "off without reason", st.SetSwitch(t.Context(), store.Switch{Tenant: "acme", SetBy: "ops", At: base}))
	long := store.Switch{On: true, Reason: strings.Repeat("é", store.MaxSwitchReasonLen/2), SetBy: "ops", At: base}
	must(t, "longest reason", st.SetSwitch(t.Context(), long))
	checkSwitches(t, st, long, store.Switch{Tenant: "acme", SetBy: "ops", At: base})
}

// testSwitchesConcurrent: concurrent writers to many scopes all land, and
// each scope ends in one of the states written to it.
func testSwitchesConcurrent(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	const tenants, writes = 8, 5
	errs := parallel(tenants*writes, func(i int) error {
		return st.SetSwitch(context.Background(), store.Switch{
			Tenant: fmt.Sprintf("t%d", i%tenants), On: i%2 == 0, Reason: fmt.Sprintf("w%d", i),
			SetBy: "ops", At: base.Add(time.Duration(i) * time.Millisecond),
		})
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, err := st.Switches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != tenants {
		t.Fatalf("%d switches, want %d", len(got), tenants)
	}
	for i, sw := range got {
		if sw.Tenant != fmt.Sprintf("t%d", i) {
			t.Errorf("switch %d is %q", i, sw.Tenant)
		}
		var n int
		if _, err := fmt.Sscanf(sw.Reason, "w%d", &n); err != nil || n%tenants != i || sw.On != (n%2 == 0) {
			t.Errorf("switch %q = %s: not one of the states written to it", sw.Tenant, showSwitch(sw))
		}
	}
}

// testSwitchesReopenAndReplica: switches survive a restart and are seen by
// another instance on the same data.
func testSwitchesReopenAndReplica(t *testing.T, s suite) {
	st, name := s.fresh(t)
	g := store.Switch{On: true, Reason: "incident", SetBy: "ops", At: base}
	must(t, "set", st.SetSwitch(t.Context(), g))
	must(t, "close", st.Close())
	re := s.open(t, name)
	checkSwitches(t, re, g)
}

func testSwitchesClosedAndCancelled(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	sw := store.Switch{On: true, Reason: "r", SetBy: "ops", At: base}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantErr(t, "set, cancelled", st.SetSwitch(ctx, sw), context.Canceled)
	_, err := st.Switches(ctx)
	wantErr(t, "switches, cancelled", err, context.Canceled)
	must(t, "close", st.Close())
	wantErr(t, "set, closed", st.SetSwitch(context.Background(), sw), store.ErrClosed)
	_, err = st.Switches(context.Background())
	wantErr(t, "switches, closed", err, store.ErrClosed)
}
