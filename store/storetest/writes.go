package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// writeCases are the ReplayStore and ActionStore cases of the suite
// (registered in Run).
var writeCases = []struct {
	name string
	fn   func(*testing.T, suite)
}{
	{"ReplayClaimFinish", testReplayClaimFinish},
	{"ReplayRelease", testReplayRelease},
	{"ReplayUnknown", testReplayUnknown},
	{"ReplayExpiry", testReplayExpiry},
	{"ReplayConcurrentClaims", testReplayConcurrentClaims},
	{"ReplayInvalid", testReplayInvalid},
	{"ActionRoundTrip", testActionRoundTrip},
	{"ActionInvalid", testActionInvalid},
	{"ActionTransitions", testActionTransitions},
	{"ActionConcurrentTransition", testActionConcurrentTransition},
	{"ListActions", testListActions},
	{"ActionRetention", testActionRetention},
	{"ActionReopen", testActionReopen},
	{"WritesClosed", testWritesClosed},
}

// writeRacers is the number of concurrent callers of the race cases.
const writeRacers = 32

// pollUntil calls cond until it reports true, failing the test after a
// generous deadline (the deadline bounds a hang; it does not measure
// latency).
func writesPoll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func running(claim string) store.ReplayEntry {
	return store.ReplayEntry{Claim: claim, State: store.ReplayRunning, Digest: strings.Repeat("ab", 32), Started: base}
}

func checkEntry(t *testing.T, what string, got, want store.ReplayEntry) {
	t.Helper()
	want.Started = norm(want.Started)
	if len(want.Result) == 0 {
		want.Result = nil
	}
	if got.Claim != want.Claim || got.State != want.State || got.Digest != want.Digest ||
		!got.Started.Equal(want.Started) || !bytes.Equal(got.Result, want.Result) || (got.Result == nil) != (want.Result == nil) {
		t.Errorf("%s: entry\n got {claim=%q state=%q digest=%q started=%s result=%d bytes}\nwant {claim=%q state=%q digest=%q started=%s result=%d bytes}",
			what, got.Claim, got.State, got.Digest, fmtTime(got.Started), len(got.Result),
			want.Claim, want.State, want.Digest, fmtTime(want.Started), len(want.Result))
	}
	if got.Started.Location() != time.UTC {
		t.Errorf("%s: started %v is not UTC", what, got.Started)
	}
}

func testReplayClaimFinish(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	first := running("claim-1")

	got, won, err := st.ClaimReplay(ctx, "fp", first, time.Hour)
	must(t, "ClaimReplay", err)
	if !won {
		t.Fatal("first ClaimReplay did not win")
	}
	checkEntry(t, "winner's entry", got, first)

	// A repeat while the first runs sees the running entry, changes nothing.
	second := running("claim-2")
	second.Digest = "other"
	got, won, err = st.ClaimReplay(ctx, "fp", second, time.Hour)
	must(t, "second ClaimReplay", err)
	if won {
		t.Fatal("second ClaimReplay won over a running entry")
	}
	checkEntry(t, "running entry", got, first)

	wantErr(t, "FinishReplay by another claim", st.FinishReplay(ctx, "fp", "claim-2", store.ReplayDone, []byte(`{}`), time.Hour), store.ErrConflict)
	wantErr(t, "FinishReplay of an unknown key", st.FinishReplay(ctx, "nope", "claim-1", store.ReplayDone, nil, time.Hour), store.ErrNotFound)

	// A result of a few hundred KiB, with every byte value, is kept as is.
	result := make([]byte, 300<<10)
	for i := range result {
		result[i] = byte(i * 7)
	}
	must(t, "FinishReplay", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayDone, result, time.Hour))
	got, won, err = st.ClaimReplay(ctx, "fp", running("claim-3"), time.Hour)
	must(t, "ClaimReplay after finish", err)
	if won {
		t.Fatal("ClaimReplay won over a done entry")
	}
	done := first
	done.State, done.Result = store.ReplayDone, result
	checkEntry(t, "done entry", got, done)

	// The first outcome stands.
	err = st.FinishReplay(ctx, "fp", "claim-1", store.ReplayUnknown, nil, time.Hour)
	wantErr(t, "FinishReplay twice", err, store.ErrConflict)
	if !strings.Contains(err.Error(), store.ReplayDone) {
		t.Errorf("FinishReplay twice: %v does not name the state %q", err, store.ReplayDone)
	}
	wantErr(t, "ReleaseReplay of a done entry", st.ReleaseReplay(ctx, "fp", "claim-1"), store.ErrConflict)
	got, _, err = st.ClaimReplay(ctx, "fp", running("claim-4"), time.Hour)
	must(t, "ClaimReplay after refused calls", err)
	checkEntry(t, "done entry after refused calls", got, done)

	// Keys are independent.
	if _, won, err := st.ClaimReplay(ctx, "fp2", running("claim-5"), time.Hour); err != nil || !won {
		t.Errorf("ClaimReplay of another key = %v, %v; want a win", won, err)
	}
}

func testReplayRelease(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	must(t, "ReleaseReplay of an unknown key", st.ReleaseReplay(ctx, "fp", "claim-1"))
	_, won, err := st.ClaimReplay(ctx, "fp", running("claim-1"), time.Hour)
	must(t, "ClaimReplay", err)
	if !won {
		t.Fatal("ClaimReplay did not win")
	}
	wantErr(t, "ReleaseReplay by another claim", st.ReleaseReplay(ctx, "fp", "claim-2"), store.ErrConflict)
	must(t, "ReleaseReplay", st.ReleaseReplay(ctx, "fp", "claim-1"))
	must(t, "ReleaseReplay again", st.ReleaseReplay(ctx, "fp", "claim-1"))
	wantErr(t, "FinishReplay after release", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayDone, nil, time.Hour), store.ErrNotFound)
	got, won, err := st.ClaimReplay(ctx, "fp", running("claim-2"), time.Hour)
	must(t, "ClaimReplay after release", err)
	if !won {
		t.Fatalf("ClaimReplay after release did not win; live entry %+v", got)
	}
}

func testReplayUnknown(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	e := running("claim-1")
	e.Started = time.Time{} // the store's clock
	before := time.Now().Add(-time.Second)
	got, _, err := st.ClaimReplay(ctx, "fp", e, time.Hour)
	must(t, "ClaimReplay", err)
	if got.Started.Before(before) || got.Started.After(time.Now().Add(time.Second)) {
		t.Errorf("a zero Started became %v, want about now", got.Started)
	}
	must(t, "FinishReplay unknown", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayUnknown, nil, time.Hour))
	cur, won, err := st.ClaimReplay(ctx, "fp", running("claim-2"), time.Hour)
	must(t, "ClaimReplay after unknown", err)
	if won {
		t.Fatal("ClaimReplay won over an unknown outcome")
	}
	want := e
	want.State, want.Started = store.ReplayUnknown, got.Started
	checkEntry(t, "unknown entry", cur, want)
}

func testReplayExpiry(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	const short = 50 * time.Millisecond
	_, won, err := st.ClaimReplay(ctx, "fp", running("claim-1"), short)
	must(t, "ClaimReplay", err)
	if !won {
		t.Fatal("ClaimReplay did not win")
	}
	// Sub-millisecond ttls round up and still expire.
	_, _, err = st.ClaimReplay(ctx, "tiny", running("claim-1"), time.Nanosecond)
	must(t, "ClaimReplay tiny", err)

	// Once the entry expired, another request claims the key.
	for _, key := range []string{"fp", "tiny"} {
		writesPoll(t, "claim of expired "+key, func() bool {
			_, won, err := st.ClaimReplay(ctx, key, running("claim-2"), time.Hour)
			must(t, "ClaimReplay "+key, err)
			return won
		})
	}
	wantErr(t, "FinishReplay by the expired claim", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayDone, nil, time.Hour), store.ErrConflict)

	// A finished entry lives for the finish ttl, then goes.
	must(t, "FinishReplay", st.FinishReplay(ctx, "fp", "claim-2", store.ReplayDone, []byte(`{"ok":true}`), short))
	writesPoll(t, "claim after the done entry expired", func() bool {
		cur, won, err := st.ClaimReplay(ctx, "fp", running("claim-3"), time.Hour)
		must(t, "ClaimReplay", err)
		if !won && (cur.State != store.ReplayDone || string(cur.Result) != `{"ok":true}`) {
			t.Fatalf("live entry before expiry = %+v, want the done entry", cur)
		}
		return won
	})
}

func testReplayConcurrentClaims(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	entries := make([]store.ReplayEntry, writeRacers)
	won := make([]bool, writeRacers)
	errs := parallel(writeRacers, func(i int) error {
		var err error
		entries[i], won[i], err = st.ClaimReplay(ctx, "fp", running(fmt.Sprintf("claim-%d", i)), time.Hour)
		return err
	})
	for _, err := range errs {
		must(t, "ClaimReplay", err)
	}
	if n := countTrue(won); n != 1 {
		t.Fatalf("%d of %d concurrent claims won, want exactly 1", n, writeRacers)
	}
	winner := fmt.Sprintf("claim-%d", slices.Index(won, true))
	for i, e := range entries {
		if e.Claim != winner || e.State != store.ReplayRunning {
			t.Errorf("claim %d saw entry %q/%q, want the winner %q running", i, e.Claim, e.State, winner)
		}
	}
	// Exactly one of concurrent finishes by all racers succeeds.
	errs = parallel(writeRacers, func(i int) error {
		return st.FinishReplay(ctx, "fp", fmt.Sprintf("claim-%d", i), store.ReplayDone, []byte(`{}`), time.Hour)
	})
	exactlyOne(t, "FinishReplay", errs, store.ErrConflict)
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func testReplayInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	ok := running("claim-1")
	claim := func(key string, e store.ReplayEntry, ttl time.Duration) error {
		_, _, err := st.ClaimReplay(ctx, key, e, ttl)
		return err
	}
	noClaim := ok
	noClaim.Claim = ""
	done := ok
	done.State = store.ReplayDone
	nul := ok
	nul.Claim = "a\x00b"
	for _, c := range []struct {
		name string
		err  error
	}{
		{"claim empty key", claim("", ok, time.Hour)},
		{"claim long key", claim(strings.Repeat("k", store.MaxIDLen+1), ok, time.Hour)},
		{"claim empty claim", claim("fp", noClaim, time.Hour)},
		{"claim NUL claim", claim("fp", nul, time.Hour)},
		{"claim not running", claim("fp", done, time.Hour)},
		{"claim zero ttl", claim("fp", ok, 0)},
		{"claim negative ttl", claim("fp", ok, -time.Second)},
		{"finish empty key", st.FinishReplay(ctx, "", "claim-1", store.ReplayDone, nil, time.Hour)},
		{"finish empty claim", st.FinishReplay(ctx, "fp", "", store.ReplayDone, nil, time.Hour)},
		{"finish running", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayRunning, nil, time.Hour)},
		{"finish bad state", st.FinishReplay(ctx, "fp", "claim-1", "bogus", nil, time.Hour)},
		{"finish zero ttl", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayDone, nil, 0)},
		{"release empty key", st.ReleaseReplay(ctx, "", "claim-1")},
		{"release empty claim", st.ReleaseReplay(ctx, "fp", "")},
	} {
		wantErr(t, c.name, c.err, store.ErrInvalid)
	}
	// Nothing was stored.
	if _, won, err := st.ClaimReplay(ctx, "fp", ok, time.Hour); err != nil || !won {
		t.Errorf("ClaimReplay after invalid calls = %v, %v; want a win", won, err)
	}
}

// --- actions ---

// newAction is a pending action created at created, expiring an hour
// later.
func newAction(id, tenant, conn string, created time.Time) store.Action {
	return store.Action{
		ID: id, Tenant: tenant, Subject: "alice", Connection: conn, Client: "claude",
		Upstream: "crm", Tool: "send_invoice", Effect: "notify",
		Arguments:  []byte(`{"invoice_id":"INV-1","to":"bob@example.com"}`),
		Resume:     []byte(`{"requestState":"round-2","inputResponses":{"pick":{"action":"accept"}}}`),
		ArgsDigest: strings.Repeat("0f", 32), ToolHash: strings.Repeat("a1", 32),
		Summary:  "Send invoice INV-1 to bob@example.com",
		Approval: store.ApprovalClient, CreatedAt: created, ExpiresAt: created.Add(time.Hour),
		State: store.ActionPending,
	}
}

func showAction(a store.Action) string {
	return fmt.Sprintf("{id=%q tenant=%q subject=%q conn=%q client=%q upstream=%q tool=%q effect=%q args=%q resume=%q digest=%q toolhash=%q summary=%q approval=%q created=%s expires=%s state=%q by=%q at=%s reason=%q}",
		a.ID, a.Tenant, a.Subject, a.Connection, a.Client, a.Upstream, a.Tool, a.Effect, a.Arguments, a.Resume,
		a.ArgsDigest, a.ToolHash, a.Summary, a.Approval, fmtTime(a.CreatedAt), fmtTime(a.ExpiresAt),
		a.State, a.DecidedBy, fmtTime(a.DecidedAt), a.Reason)
}

func checkAction(t *testing.T, what string, got, want store.Action) {
	t.Helper()
	if showAction(got) != showAction(want) {
		t.Errorf("%s:\n got %s\nwant %s", what, showAction(got), showAction(want))
	}
	if len(want.Arguments) == 0 && got.Arguments != nil {
		t.Errorf("%s: empty arguments returned as %#v, want nil", what, got.Arguments)
	}
	if len(want.Resume) == 0 && got.Resume != nil {
		t.Errorf("%s: empty resume returned as %#v, want nil", what, got.Resume)
	}
	for name, tm := range map[string]time.Time{"created_at": got.CreatedAt, "expires_at": got.ExpiresAt, "decided_at": got.DecidedAt} {
		if !tm.IsZero() && (tm.Location() != time.UTC || tm.Nanosecond()%1000 != 0) {
			t.Errorf("%s: %s = %v, want UTC at microsecond precision", what, name, tm)
		}
	}
}

func actionIDs(as []store.Action) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ID
	}
	return out
}

// wallNow is a reference time near the wall clock, with nanoseconds and not in
// UTC: action retention is judged by the store's clock.
func wallNow() time.Time {
	return time.Now().Add(123 * time.Nanosecond).In(time.FixedZone("UTC-5", -5*3600))
}

func testActionRoundTrip(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	full := newAction("act-full", "acme", "tok-1", wallNow())
	must(t, "PutAction", st.PutAction(ctx, full))
	got, err := st.Action(ctx, "act-full")
	must(t, "Action", err)
	checkAction(t, "full action", got, full)

	// Only id, connection, tool, approval, state and times are required.
	minimal := store.Action{ID: "act-min", Connection: "tok-1", Tool: "delete_ticket",
		Approval: store.ApprovalOutOfBand, State: store.ActionPending, CreatedAt: wallNow(), ExpiresAt: wallNow().Add(time.Minute)}
	must(t, "PutAction minimal", st.PutAction(ctx, minimal))
	got, err = st.Action(ctx, "act-min")
	must(t, "Action minimal", err)
	checkAction(t, "minimal action", got, minimal)

	other := newAction("act-full", "other", "tok-2", wallNow())
	wantErr(t, "PutAction duplicate id", st.PutAction(ctx, other), store.ErrExists)
	got, _ = st.Action(ctx, "act-full")
	checkAction(t, "action after refused duplicate", got, full)
	_, err = st.Action(ctx, "nope")
	wantErr(t, "Action unknown", err, store.ErrNotFound)
}

func testActionInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	mod := func(f func(*store.Action)) store.Action {
		a := newAction("act", "acme", "tok-1", wallNow())
		f(&a)
		return a
	}
	for name, a := range map[string]store.Action{
		"empty id":         mod(func(a *store.Action) { a.ID = "" }),
		"empty connection": mod(func(a *store.Action) { a.Connection = "" }),
		"empty tool":       mod(func(a *store.Action) { a.Tool = "" }),
		"NUL tenant":       mod(func(a *store.Action) { a.Tenant = "a\x00b" }),
		"bad approval":     mod(func(a *store.Action) { a.Approval = "model" }),
		"not pending":      mod(func(a *store.Action) { a.State = store.ActionApproved }),
		"bogus state":      mod(func(a *store.Action) { a.State = "bogus" }),
		"zero created":     mod(func(a *store.Action) { a.CreatedAt = time.Time{} }),
		"expires first":    mod(func(a *store.Action) { a.ExpiresAt = a.CreatedAt }),
		"already decided":  mod(func(a *store.Action) { a.DecidedBy = "bob" }),
		"long id":          mod(func(a *store.Action) { a.ID = strings.Repeat("x", store.MaxIDLen+1) }),
		"long args digest": mod(func(a *store.Action) { a.ArgsDigest = strings.Repeat("x", store.MaxIDLen+1) }),
		"decided_at set":   mod(func(a *store.Action) { a.DecidedAt = a.CreatedAt }),
	} {
		wantErr(t, "PutAction "+name, st.PutAction(ctx, a), store.ErrInvalid)
	}
	list, err := st.ListActions(ctx, store.ActionFilter{})
	must(t, "ListActions", err)
	if len(list) != 0 {
		t.Errorf("invalid actions were stored: %v", actionIDs(list))
	}
}

func testActionTransitions(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	a := newAction("act", "acme", "tok-1", wallNow())
	must(t, "PutAction", st.PutAction(ctx, a))

	at := wallNow().Add(time.Minute)
	got, err := st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionApproved, DecidedBy: "bob", DecidedAt: at, Reason: "looks right"})
	must(t, "approve", err)
	want := a
	want.State, want.DecidedBy, want.DecidedAt, want.Reason = store.ActionApproved, "bob", norm(at), "looks right"
	checkAction(t, "approved (returned)", got, want)
	got, err = st.Action(ctx, "act")
	must(t, "Action", err)
	checkAction(t, "approved (read)", got, want)

	// From the wrong state: ErrConflict naming the current state, nothing changes.
	_, err = st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionExecuting})
	wantErr(t, "from a stale state", err, store.ErrConflict)
	if !strings.Contains(err.Error(), store.ActionApproved) {
		t.Errorf("conflict %v does not name the current state %q", err, store.ActionApproved)
	}

	// Empty update fields keep the action's values.
	got, err = st.TransitionAction(ctx, "act", store.ActionApproved, store.ActionUpdate{State: store.ActionExecuting})
	must(t, "execute", err)
	want.State = store.ActionExecuting
	checkAction(t, "executing", got, want)
	got, err = st.TransitionAction(ctx, "act", store.ActionExecuting, store.ActionUpdate{State: store.ActionExecuted, Reason: "ok"})
	must(t, "executed", err)
	want.State, want.Reason = store.ActionExecuted, "ok"
	checkAction(t, "executed", got, want)

	// Final states stay final; moves outside the graph are invalid.
	for _, c := range []struct{ from, to string }{
		{store.ActionExecuted, store.ActionPending},
		{store.ActionExecuted, store.ActionExecuting},
		{store.ActionPending, store.ActionPending},
		{store.ActionPending, store.ActionExecuted},
		{store.ActionRejected, store.ActionExecuting},
		{store.ActionPending, "bogus"},
		{"bogus", store.ActionExecuting},
	} {
		_, err := st.TransitionAction(ctx, "act", c.from, store.ActionUpdate{State: c.to})
		wantErr(t, fmt.Sprintf("%s → %s", c.from, c.to), err, store.ErrInvalid)
	}
	_, err = st.TransitionAction(ctx, "", store.ActionPending, store.ActionUpdate{State: store.ActionRejected})
	wantErr(t, "empty id", err, store.ErrInvalid)
	_, err = st.TransitionAction(ctx, "nope", store.ActionPending, store.ActionUpdate{State: store.ActionRejected})
	wantErr(t, "unknown id", err, store.ErrNotFound)
	got, _ = st.Action(ctx, "act")
	checkAction(t, "after refused transitions", got, want)

	// Reject and supersede from pending.
	for _, to := range []string{store.ActionRejected, store.ActionSuperseded} {
		id := "act-" + to
		must(t, "PutAction "+id, st.PutAction(ctx, newAction(id, "acme", "tok-1", wallNow())))
		got, err := st.TransitionAction(ctx, id, store.ActionPending, store.ActionUpdate{State: to, DecidedBy: "alice"})
		must(t, "to "+to, err)
		if got.State != to || got.DecidedBy != "alice" || !got.DecidedAt.IsZero() {
			t.Errorf("to %s: got state %q by %q at %v", to, got.State, got.DecidedBy, got.DecidedAt)
		}
	}
}

func testActionConcurrentTransition(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	must(t, "PutAction", st.PutAction(ctx, newAction("act", "acme", "tok-1", wallNow())))
	errs := parallel(writeRacers, func(i int) error {
		_, err := st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionExecuting, DecidedBy: fmt.Sprintf("req-%d", i)})
		return err
	})
	exactlyOne(t, "TransitionAction pending→executing", errs, store.ErrConflict)
	got, err := st.Action(ctx, "act")
	must(t, "Action", err)
	if want := fmt.Sprintf("req-%d", slices.Index(errs, nil)); got.State != store.ActionExecuting || got.DecidedBy != want {
		t.Errorf("after the race: state %q by %q, want executing by the winner %q", got.State, got.DecidedBy, want)
	}
}

func testListActions(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	t0 := wallNow()
	acts := []store.Action{
		newAction("a1", "acme", "tok-1", t0),
		newAction("a2", "acme", "tok-2", t0.Add(time.Second)),
		newAction("a3", "globex", "tok-3", t0.Add(2*time.Second)),
		newAction("a4", "acme", "tok-1", t0.Add(3*time.Second)),
		newAction("a5", "acme", "tok-1", t0.Add(3*time.Second)), // tie with a4: by id, descending
		newAction("a6", "", "tok-4", t0.Add(4*time.Second)),     // no tenant
	}
	for _, err := range parallel(len(acts), func(i int) error { return st.PutAction(ctx, acts[i]) }) {
		must(t, "PutAction", err)
	}
	_, err := st.TransitionAction(ctx, "a4", store.ActionPending, store.ActionUpdate{State: store.ActionRejected})
	must(t, "reject a4", err)

	for _, c := range []struct {
		name string
		f    store.ActionFilter
		want []string
	}{
		{"all", store.ActionFilter{}, []string{"a6", "a5", "a4", "a3", "a2", "a1"}},
		{"tenant", store.ActionFilter{Tenant: "acme"}, []string{"a5", "a4", "a2", "a1"}},
		{"other tenant", store.ActionFilter{Tenant: "globex"}, []string{"a3"}},
		{"unknown tenant", store.ActionFilter{Tenant: "initech"}, []string{}},
		{"tenant prefix is not a tenant", store.ActionFilter{Tenant: "acm"}, []string{}},
		{"state", store.ActionFilter{State: store.ActionPending}, []string{"a6", "a5", "a3", "a2", "a1"}},
		{"rejected", store.ActionFilter{Tenant: "acme", State: store.ActionRejected}, []string{"a4"}},
		{"connection", store.ActionFilter{Connection: "tok-1"}, []string{"a5", "a4", "a1"}},
		{"tenant, state and connection", store.ActionFilter{Tenant: "acme", State: store.ActionPending, Connection: "tok-1"}, []string{"a5", "a1"}},
		{"limit", store.ActionFilter{Limit: 2}, []string{"a6", "a5"}},
		{"limit after filter", store.ActionFilter{Connection: "tok-1", State: store.ActionPending, Limit: 1}, []string{"a5"}},
	} {
		got, err := st.ListActions(ctx, c.f)
		must(t, "ListActions "+c.name, err)
		if g := actionIDs(got); !slices.Equal(g, c.want) {
			t.Errorf("ListActions %s = %v, want %v", c.name, g, c.want)
		}
	}
	got, _ := st.ListActions(ctx, store.ActionFilter{Tenant: "globex"})
	if len(got) == 1 {
		checkAction(t, "listed action", got[0], acts[2])
	}

	// The default limit.
	many := make([]store.Action, store.DefaultActionLimit+5)
	for i := range many {
		many[i] = newAction(fmt.Sprintf("m%03d", i), "many", "tok-m", t0.Add(time.Duration(i)*time.Millisecond))
	}
	for _, err := range parallel(len(many), func(i int) error { return st.PutAction(ctx, many[i]) }) {
		must(t, "PutAction", err)
	}
	got, err = st.ListActions(ctx, store.ActionFilter{Tenant: "many"})
	must(t, "ListActions default limit", err)
	if len(got) != store.DefaultActionLimit || got[0].ID != "m104" {
		t.Errorf("ListActions with the default limit: %d actions starting %v, want %d starting m104", len(got), actionIDs(got[:min(1, len(got))]), store.DefaultActionLimit)
	}
}

func testActionRetention(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	n := wallNow()
	// Expired an hour ago: still readable, so "expired" differs from "unknown".
	expired := newAction("expired", "acme", "tok-1", n.Add(-2*time.Hour))
	// Expired longer than the retention ago: gone.
	gone := newAction("gone", "acme", "tok-1", n.Add(-store.ActionRetention-2*time.Hour))
	must(t, "PutAction expired", st.PutAction(ctx, expired))
	must(t, "PutAction gone", st.PutAction(ctx, gone))

	got, err := st.Action(ctx, "expired")
	must(t, "Action expired", err)
	checkAction(t, "expired action", got, expired)
	// The store leaves expiry to the caller: an expired action still moves.
	_, err = st.TransitionAction(ctx, "expired", store.ActionPending, store.ActionUpdate{State: store.ActionFailed, Reason: "expired"})
	must(t, "TransitionAction expired", err)

	_, err = st.Action(ctx, "gone")
	wantErr(t, "Action gone", err, store.ErrNotFound)
	_, err = st.TransitionAction(ctx, "gone", store.ActionPending, store.ActionUpdate{State: store.ActionRejected})
	wantErr(t, "TransitionAction gone", err, store.ErrNotFound)
	list, err := st.ListActions(ctx, store.ActionFilter{Tenant: "acme"})
	must(t, "ListActions", err)
	if g := actionIDs(list); !slices.Equal(g, []string{"expired"}) {
		t.Errorf("ListActions = %v, want only the expired (not the gone) action", g)
	}
}

func testActionReopen(t *testing.T, s suite) {
	ctx := t.Context()
	st, name := s.fresh(t)
	a := newAction("act", "acme", "tok-1", wallNow())
	must(t, "PutAction", st.PutAction(ctx, a))
	_, won, err := st.ClaimReplay(ctx, "fp", running("claim-1"), time.Hour)
	if err != nil || !won {
		t.Fatalf("ClaimReplay = %v, %v", won, err)
	}
	must(t, "FinishReplay", st.FinishReplay(ctx, "fp", "claim-1", store.ReplayDone, []byte(`{"id":1}`), time.Hour))
	must(t, "Close", st.Close())

	// A restart between preview and confirm keeps the pending action.
	st = s.open(t, name)
	got, err := st.Action(ctx, "act")
	must(t, "Action after reopen", err)
	checkAction(t, "action after reopen", got, a)
	_, err = st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionExecuting})
	must(t, "TransitionAction after reopen", err)
	list, err := st.ListActions(ctx, store.ActionFilter{Tenant: "acme"})
	must(t, "ListActions after reopen", err)
	if g := actionIDs(list); !slices.Equal(g, []string{"act"}) {
		t.Errorf("ListActions after reopen = %v", g)
	}
	wantErr(t, "PutAction after reopen", st.PutAction(ctx, a), store.ErrExists)
	// And the replay window.
	e, won, err := st.ClaimReplay(ctx, "fp", running("claim-2"), time.Hour)
	must(t, "ClaimReplay after reopen", err)
	if won || e.State != store.ReplayDone || string(e.Result) != `{"id":1}` {
		t.Errorf("ClaimReplay after reopen = %+v, won %v; want the done entry", e, won)
	}
}

func testWritesClosed(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	must(t, "Close", st.Close())
	a := newAction("act", "acme", "tok-1", wallNow())
	calls := map[string]func(ctx context.Context) error{
		"ClaimReplay": func(ctx context.Context) error {
			_, _, err := st.ClaimReplay(ctx, "fp", running("c"), time.Hour)
			return err
		},
		"FinishReplay": func(ctx context.Context) error {
			return st.FinishReplay(ctx, "fp", "c", store.ReplayDone, nil, time.Hour)
		},
		"ReleaseReplay": func(ctx context.Context) error { return st.ReleaseReplay(ctx, "fp", "c") },
		"PutAction":     func(ctx context.Context) error { return st.PutAction(ctx, a) },
		"Action":        func(ctx context.Context) error { _, err := st.Action(ctx, "act"); return err },
		"TransitionAction": func(ctx context.Context) error {
			_, err := st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionRejected})
			return err
		},
		"ListActions": func(ctx context.Context) error { _, err := st.ListActions(ctx, store.ActionFilter{}); return err },
	}
	for name, call := range calls {
		wantErr(t, name+" after Close", call(ctx), store.ErrClosed)
	}

	// A cancelled context gives the context's error and writes nothing.
	live, _ := s.fresh(t)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	st = live
	for name, call := range calls {
		if err := call(cctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: err = %v, want context.Canceled", name, err)
		}
	}
	_, err := live.Action(ctx, "act")
	wantErr(t, "Action after cancelled put", err, store.ErrNotFound)
	if _, won, err := live.ClaimReplay(ctx, "fp", running("c"), time.Hour); err != nil || !won {
		t.Errorf("ClaimReplay after cancelled claim = %v, %v; want a win", won, err)
	}
}
