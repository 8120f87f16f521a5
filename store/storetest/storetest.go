// Package storetest is the behavioural test suite every store.Store
// backend passes, and the benchmarks they share. A backend's test calls
//
//	storetest.Run(t, open)
//
// with an OpenFunc for its backend.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// OpenFunc opens the store called name. A name not opened before gives an
// empty store; opening a name again, after the previous store of that name
// was closed, gives a store over the same data (a restart, or another
// replica). OpenFunc registers the store's Close with tb.Cleanup; the suite
// may close it earlier (Close is idempotent).
type OpenFunc func(tb testing.TB, name string) store.Store

// base is the suite's reference time: not UTC and with nanoseconds, to
// check that stores return UTC at microsecond precision.
var base = time.Date(2026, 7, 28, 10, 0, 0, 123456789, time.FixedZone("UTC+2", 2*3600))

// norm is what a store returns for t.
func norm(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Truncate(time.Microsecond).UTC()
}

type suite struct {
	open OpenFunc
	n    *atomic.Int64
}

// fresh opens a store with a name no other test uses.
func (s suite) fresh(tb testing.TB) (store.Store, string) {
	name := fmt.Sprintf("s%d", s.n.Add(1))
	return s.open(tb, name), name
}

// Run runs the suite against the backend open opens. Subtests run in
// parallel, each with its own store.
func Run(t *testing.T, open OpenFunc) {
	s := suite{open: open, n: new(atomic.Int64)}
	tests := []struct {
		name string
		fn   func(*testing.T, suite)
	}{
		{"Ping", testPing},
		{"TokenRoundTrip", testTokenRoundTrip},
		{"PutTokenConflicts", testPutTokenConflicts},
		{"PutTokenInvalid", testPutTokenInvalid},
		{"ListTokens", testListTokens},
		{"RevokeToken", testRevokeToken},
		{"Sessions", testSessions},
		{"SessionExpiry", testSessionExpiry},
		{"SessionInvalid", testSessionInvalid},
		{"AuditQuery", testAuditQuery},
		{"AuditDefaultLimit", testAuditDefaultLimit},
		{"AuditDuplicateAndInvalid", testAuditDuplicateAndInvalid},
		{"PruneAudit", testPruneAudit},
		{"ConcurrentPutTokenSameID", testConcurrentPutTokenSameID},
		{"ConcurrentPutTokenSameHash", testConcurrentPutTokenSameHash},
		{"ConcurrentBindSession", testConcurrentBindSession},
		{"ConcurrentRevoke", testConcurrentRevoke},
		{"ConcurrentMixed", testConcurrentMixed},
		{"Reopen", testReopen},
		{"Closed", testClosed},
		{"CancelledContext", testCancelledContext},
		{"Isolation", testIsolation},
		{"Switches", testSwitchesRun},
	}
	tests = append(tests, taskCases...)
	tests = append(tests, writeCases...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s)
		})
	}
}

// --- helpers ---

func newToken(id, tenant, creator string, created time.Time) store.Token {
	return store.Token{
		ID:        id,
		Tenant:    tenant,
		Creator:   creator,
		Name:      "name of " + id,
		Hash:      store.HashSecret("secret " + id),
		Rights:    []string{"tickets.read", "tickets.write", "contacts.read"},
		Toolset:   "core",
		CreatedAt: created,
		ExpiresAt: created.Add(24 * time.Hour),
	}
}

// show renders a token in its normalised form, for comparisons with
// readable failures.
func show(t store.Token) string {
	rev := "nil"
	if t.RevokedAt != nil {
		rev = norm(*t.RevokedAt).Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("{id=%q tenant=%q creator=%q name=%q hash=%x rights=%#v toolset=%q created=%s expires=%s revoked=%s}",
		t.ID, t.Tenant, t.Creator, t.Name, t.Hash, t.Rights, t.Toolset,
		fmtTime(t.CreatedAt), fmtTime(t.ExpiresAt), rev)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return norm(t).Format(time.RFC3339Nano)
}

// checkToken compares got with want as the store must return it: times in
// UTC at microsecond precision, empty rights as nil.
func checkToken(t *testing.T, got, want store.Token) {
	t.Helper()
	if len(want.Rights) == 0 {
		want.Rights = nil
	}
	if show(got) != show(want) {
		t.Errorf("token\n got %s\nwant %s", show(got), show(want))
	}
	for name, tm := range map[string]time.Time{"created_at": got.CreatedAt, "expires_at": got.ExpiresAt} {
		if !tm.IsZero() && (tm.Location() != time.UTC || tm.Nanosecond()%1000 != 0) {
			t.Errorf("%s = %v, want UTC at microsecond precision", name, tm)
		}
	}
}

func ids(ts []store.Token) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}

func auditIDs(rs []store.AuditRecord) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// parallel runs fn(i) for i in [0,n) at once and returns the errors.
func parallel(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			errs[i] = fn(i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// --- tests ---

func testPing(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	must(t, "Ping", st.Ping(t.Context()))
}

func testTokenRoundTrip(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)

	full := newToken("tok-full", "acme", "alice", base)
	bare := store.Token{ID: "tok-bare", Tenant: "acme", Creator: "bob", Hash: store.HashSecret("bare"), CreatedAt: base.Add(time.Second)}
	for _, tok := range []store.Token{full, bare} {
		must(t, "PutToken "+tok.ID, st.PutToken(ctx, tok))
	}
	for _, want := range []store.Token{full, bare} {
		got, err := st.TokenByHash(ctx, want.Hash)
		must(t, "TokenByHash "+want.ID, err)
		checkToken(t, got, want)
		got, err = st.TokenByID(ctx, want.ID)
		must(t, "TokenByID "+want.ID, err)
		checkToken(t, got, want)
	}
	if got, _ := st.TokenByHash(ctx, full.Hash); !got.Active(base.Add(time.Hour)) || got.Active(base.Add(25*time.Hour)) {
		t.Errorf("Active: want active before expiry and inactive after")
	}

	_, err := st.TokenByHash(ctx, store.HashSecret("unknown"))
	wantErr(t, "TokenByHash unknown", err, store.ErrNotFound)
	_, err = st.TokenByID(ctx, "unknown")
	wantErr(t, "TokenByID unknown", err, store.ErrNotFound)

	// The store keeps its own copy.
	full.Rights[0] = "changed"
	got, err := st.TokenByID(ctx, full.ID)
	must(t, "TokenByID", err)
	if got.Rights[0] != "tickets.read" {
		t.Errorf("stored rights changed with the caller's slice: %v", got.Rights)
	}
}

func testPutTokenConflicts(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	orig := newToken("tok-1", "acme", "alice", base)
	must(t, "PutToken", st.PutToken(ctx, orig))

	sameID := newToken("tok-1", "other", "mallory", base.Add(time.Minute))
	wantErr(t, "PutToken same id", st.PutToken(ctx, sameID), store.ErrExists)
	sameHash := newToken("tok-2", "other", "mallory", base.Add(time.Minute))
	sameHash.Hash = orig.Hash
	wantErr(t, "PutToken same hash", st.PutToken(ctx, sameHash), store.ErrExists)

	got, err := st.TokenByHash(ctx, orig.Hash)
	must(t, "TokenByHash", err)
	checkToken(t, got, orig)
	_, err = st.TokenByID(ctx, "tok-2")
	wantErr(t, "TokenByID of the refused token", err, store.ErrNotFound)
	all, err := st.ListTokens(ctx, store.TokenFilter{})
	must(t, "ListTokens", err)
	if g := ids(all); !slices.Equal(g, []string{"tok-1"}) {
		t.Errorf("ListTokens = %v, want [tok-1]", g)
	}
	other, err := st.ListTokens(ctx, store.TokenFilter{Tenant: "other"})
	must(t, "ListTokens other", err)
	if len(other) != 0 {
		t.Errorf("refused tokens are indexed: %v", ids(other))
	}
}

func testPutTokenInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	valid := newToken("tok", "acme", "alice", base)
	tests := []struct {
		name string
		edit func(*store.Token)
	}{
		{"empty id", func(t *store.Token) { t.ID = "" }},
		{"empty tenant", func(t *store.Token) { t.Tenant = "" }},
		{"empty creator", func(t *store.Token) { t.Creator = "" }},
		{"NUL in id", func(t *store.Token) { t.ID = "a\x00b" }},
		{"NUL in tenant", func(t *store.Token) { t.Tenant = "a\x00b" }},
		{"id too long", func(t *store.Token) { t.ID = strings.Repeat("x", store.MaxIDLen+1) }},
		{"zero hash", func(t *store.Token) { t.Hash = [32]byte{} }},
		{"zero created_at", func(t *store.Token) { t.CreatedAt = time.Time{} }},
		{"expires before created", func(t *store.Token) { t.ExpiresAt = t.CreatedAt.Add(-time.Second) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := valid
			tc.edit(&tok)
			wantErr(t, "PutToken", st.PutToken(ctx, tok), store.ErrInvalid)
		})
	}
	all, err := st.ListTokens(ctx, store.TokenFilter{})
	must(t, "ListTokens", err)
	if len(all) != 0 {
		t.Errorf("invalid tokens were stored: %v", ids(all))
	}
}

func testListTokens(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	// Put in an order unlike creation order; t-tie-a and t-tie-b share
	// their creation time (ordered by id).
	toks := []store.Token{
		newToken("t-5", "beta", "alice", base.Add(5*time.Second)),
		newToken("t-1", "acme", "alice", base.Add(1*time.Second)),
		newToken("t-tie-b", "acme", "bob", base.Add(3*time.Second)),
		newToken("t-4", "acme", "alice", base.Add(4*time.Second)),
		newToken("t-tie-a", "acme", "bob", base.Add(3*time.Second)),
		newToken("t-0", "beta", "carol", base.Add(-time.Hour)),
	}
	for _, tok := range toks {
		must(t, "PutToken "+tok.ID, st.PutToken(ctx, tok))
	}
	must(t, "RevokeToken", st.RevokeToken(ctx, "t-4", base.Add(time.Minute)))

	tests := []struct {
		f    store.TokenFilter
		want []string
	}{
		{store.TokenFilter{}, []string{"t-0", "t-1", "t-tie-a", "t-tie-b", "t-4", "t-5"}},
		{store.TokenFilter{Tenant: "acme"}, []string{"t-1", "t-tie-a", "t-tie-b", "t-4"}},
		{store.TokenFilter{Tenant: "beta"}, []string{"t-0", "t-5"}},
		{store.TokenFilter{Creator: "alice"}, []string{"t-1", "t-4", "t-5"}},
		{store.TokenFilter{Tenant: "acme", Creator: "alice"}, []string{"t-1", "t-4"}},
		{store.TokenFilter{Tenant: "beta", Creator: "bob"}, nil},
		{store.TokenFilter{Tenant: "nobody"}, nil},
		{store.TokenFilter{Creator: "nobody"}, nil},
	}
	for _, tc := range tests {
		got, err := st.ListTokens(ctx, tc.f)
		must(t, fmt.Sprintf("ListTokens(%+v)", tc.f), err)
		if g := ids(got); !slices.Equal(g, tc.want) {
			t.Errorf("ListTokens(%+v) = %v, want %v", tc.f, g, tc.want)
		}
		for _, tok := range got {
			if tok.ID == "t-4" && tok.RevokedAt == nil {
				t.Errorf("ListTokens(%+v): t-4 is not shown revoked", tc.f)
			}
		}
	}
	// Full records, not just ids.
	got, err := st.ListTokens(ctx, store.TokenFilter{Tenant: "beta"})
	must(t, "ListTokens", err)
	if len(got) == 2 {
		checkToken(t, got[0], toks[5])
		checkToken(t, got[1], toks[0])
	}
}

func testRevokeToken(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	tok := newToken("tok", "acme", "alice", base)
	must(t, "PutToken", st.PutToken(ctx, tok))

	wantErr(t, "RevokeToken unknown", st.RevokeToken(ctx, "unknown", base), store.ErrNotFound)
	wantErr(t, "RevokeToken zero time", st.RevokeToken(ctx, "tok", time.Time{}), store.ErrInvalid)

	first := base.Add(time.Hour + 1500*time.Nanosecond)
	must(t, "RevokeToken", st.RevokeToken(ctx, "tok", first))
	must(t, "RevokeToken again", st.RevokeToken(ctx, "tok", first.Add(time.Hour)))

	want := tok
	want.RevokedAt = &first
	got, err := st.TokenByHash(ctx, tok.Hash)
	must(t, "TokenByHash", err)
	checkToken(t, got, want)
	if got.Active(base) {
		t.Error("a revoked token is Active")
	}
	got, err = st.TokenByID(ctx, tok.ID)
	must(t, "TokenByID", err)
	checkToken(t, got, want)
}

func testSessions(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	alice := store.SessionBinding{Connection: "tok-1", Tenant: "acme", Subject: "alice"}
	mallory := store.SessionBinding{Connection: "tok-2", Tenant: "acme", Subject: "mallory"}

	_, err := st.Session(ctx, "sess-1")
	wantErr(t, "Session unknown", err, store.ErrNotFound)
	must(t, "BindSession", st.BindSession(ctx, "sess-1", alice, time.Hour))
	got, err := st.Session(ctx, "sess-1")
	must(t, "Session", err)
	if got != alice {
		t.Errorf("Session = %+v, want %+v", got, alice)
	}
	must(t, "BindSession same principal", st.BindSession(ctx, "sess-1", alice, time.Hour))
	wantErr(t, "BindSession other principal", st.BindSession(ctx, "sess-1", mallory, time.Hour), store.ErrExists)
	// Same connection, other subject or tenant: still another principal.
	wantErr(t, "BindSession other subject", st.BindSession(ctx, "sess-1",
		store.SessionBinding{Connection: alice.Connection, Tenant: alice.Tenant, Subject: "x"}, time.Hour), store.ErrExists)
	wantErr(t, "BindSession other tenant", st.BindSession(ctx, "sess-1",
		store.SessionBinding{Connection: alice.Connection, Tenant: "x", Subject: alice.Subject}, time.Hour), store.ErrExists)
	if got, _ := st.Session(ctx, "sess-1"); got != alice {
		t.Errorf("after refused binds Session = %+v, want %+v", got, alice)
	}

	// Only connection is required.
	minimal := store.SessionBinding{Connection: "tok-3"}
	must(t, "BindSession minimal", st.BindSession(ctx, "sess-2", minimal, time.Hour))
	if got, _ := st.Session(ctx, "sess-2"); got != minimal {
		t.Errorf("Session = %+v, want %+v", got, minimal)
	}

	must(t, "UnbindSession", st.UnbindSession(ctx, "sess-1"))
	_, err = st.Session(ctx, "sess-1")
	wantErr(t, "Session after unbind", err, store.ErrNotFound)
	must(t, "UnbindSession again", st.UnbindSession(ctx, "sess-1"))
	must(t, "BindSession after unbind", st.BindSession(ctx, "sess-1", mallory, time.Hour))
	if got, _ := st.Session(ctx, "sess-2"); got != minimal {
		t.Errorf("unbinding sess-1 changed sess-2: %+v", got)
	}
}

func testSessionExpiry(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	alice := store.SessionBinding{Connection: "tok-1", Tenant: "acme", Subject: "alice"}
	mallory := store.SessionBinding{Connection: "tok-2", Tenant: "acme", Subject: "mallory"}
	const short = 50 * time.Millisecond

	must(t, "BindSession expiring", st.BindSession(ctx, "expiring", alice, short))
	// Renewal: bound for short, then renewed for an hour.
	must(t, "BindSession renewed", st.BindSession(ctx, "renewed", alice, short))
	must(t, "BindSession renew", st.BindSession(ctx, "renewed", alice, time.Hour))
	// Sub-millisecond TTLs round up and still expire.
	must(t, "BindSession tiny", st.BindSession(ctx, "tiny", alice, time.Nanosecond))

	time.Sleep(3 * short)

	for _, id := range []string{"expiring", "tiny"} {
		_, err := st.Session(ctx, id)
		wantErr(t, "Session "+id+" after its ttl", err, store.ErrNotFound)
	}
	if got, err := st.Session(ctx, "renewed"); err != nil || got != alice {
		t.Errorf("renewed Session = %+v, %v; want %+v", got, err, alice)
	}
	// An expired binding no longer holds the id.
	must(t, "BindSession over expired", st.BindSession(ctx, "expiring", mallory, time.Hour))
	if got, _ := st.Session(ctx, "expiring"); got != mallory {
		t.Errorf("Session = %+v, want %+v", got, mallory)
	}
}

func testSessionInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	ok := store.SessionBinding{Connection: "tok-1", Tenant: "acme", Subject: "alice"}
	wantErr(t, "zero ttl", st.BindSession(ctx, "s", ok, 0), store.ErrInvalid)
	wantErr(t, "negative ttl", st.BindSession(ctx, "s", ok, -time.Second), store.ErrInvalid)
	wantErr(t, "empty session id", st.BindSession(ctx, "", ok, time.Hour), store.ErrInvalid)
	wantErr(t, "empty connection", st.BindSession(ctx, "s", store.SessionBinding{Tenant: "acme"}, time.Hour), store.ErrInvalid)
	_, err := st.Session(ctx, "s")
	wantErr(t, "Session after invalid binds", err, store.ErrNotFound)
}

func record(id, tenant string, at time.Time) store.AuditRecord {
	return store.AuditRecord{
		ID: id, Time: at, Channel: store.ChannelMCP, Tenant: tenant,
		Connection: "tok-1", Client: "claude", Subject: "alice",
		Action: "tickets.create", Outcome: "ok", DecisionID: "dec-" + id,
		PublicIDs: map[string]string{"ticket_id": "T-" + id},
	}
}

func appendAll(t *testing.T, st store.Store, recs []store.AuditRecord) {
	t.Helper()
	for _, err := range parallel(len(recs), func(i int) error { return st.AppendAudit(t.Context(), recs[i]) }) {
		must(t, "AppendAudit", err)
	}
}

func testAuditQuery(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	sec := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	recs := []store.AuditRecord{
		record("a0", "acme", sec(0)),
		record("b1", "beta", sec(1)),
		record("a2", "acme", sec(2)),
		record("a3x", "acme", sec(3)), // a3x and a3y share a time
		record("a3y", "acme", sec(3)),
		record("p4", "", sec(4)), // outside any tenant
		record("b5", "beta", sec(5)),
		record("a6", "acme", sec(6)),
	}
	recs[5].Channel = store.ChannelAdmin
	recs[5].PublicIDs = nil
	appendAll(t, st, recs)

	tests := []struct {
		name string
		q    store.AuditQuery
		want []string
	}{
		{"all", store.AuditQuery{}, []string{"a6", "b5", "p4", "a3y", "a3x", "a2", "b1", "a0"}},
		{"tenant", store.AuditQuery{Tenant: "acme"}, []string{"a6", "a3y", "a3x", "a2", "a0"}},
		{"other tenant", store.AuditQuery{Tenant: "beta"}, []string{"b5", "b1"}},
		{"unknown tenant", store.AuditQuery{Tenant: "nobody"}, nil},
		{"since inclusive", store.AuditQuery{Since: sec(3)}, []string{"a6", "b5", "p4", "a3y", "a3x"}},
		{"until exclusive", store.AuditQuery{Until: sec(3)}, []string{"a2", "b1", "a0"}},
		{"range", store.AuditQuery{Since: sec(1), Until: sec(5)}, []string{"p4", "a3y", "a3x", "a2", "b1"}},
		{"range in tenant", store.AuditQuery{Tenant: "acme", Since: sec(1), Until: sec(6)}, []string{"a3y", "a3x", "a2"}},
		{"limit", store.AuditQuery{Limit: 3}, []string{"a6", "b5", "p4"}},
		{"limit in range", store.AuditQuery{Tenant: "acme", Until: sec(6), Limit: 2}, []string{"a3y", "a3x"}},
		{"empty range", store.AuditQuery{Since: sec(5), Until: sec(5)}, nil},
		{"inverted range", store.AuditQuery{Since: sec(6), Until: sec(1)}, nil},
		{"sub-second since", store.AuditQuery{Since: sec(6).Add(time.Microsecond)}, nil},
		{"all before", store.AuditQuery{Until: sec(-1)}, nil},
	}
	for _, tc := range tests {
		got, err := st.QueryAudit(ctx, tc.q)
		must(t, "QueryAudit "+tc.name, err)
		if g := auditIDs(got); !slices.Equal(g, tc.want) {
			t.Errorf("QueryAudit %s (%+v) = %v, want %v", tc.name, tc.q, g, tc.want)
		}
	}

	got, err := st.QueryAudit(ctx, store.AuditQuery{})
	must(t, "QueryAudit", err)
	byID := map[string]store.AuditRecord{}
	for _, r := range got {
		byID[r.ID] = r
	}
	for _, want := range recs {
		want.Time = norm(want.Time)
		g := byID[want.ID]
		if fmt.Sprintf("%#v", g) != fmt.Sprintf("%#v", want) {
			t.Errorf("record %s\n got %#v\nwant %#v", want.ID, g, want)
		}
	}
}

func testAuditDefaultLimit(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	n := store.DefaultAuditLimit + 5
	recs := make([]store.AuditRecord, n)
	for i := range recs {
		recs[i] = record(fmt.Sprintf("r%04d", i), "acme", base.Add(time.Duration(i)*time.Millisecond))
	}
	appendAll(t, st, recs)
	for _, limit := range []int{0, -1} {
		got, err := st.QueryAudit(t.Context(), store.AuditQuery{Limit: limit})
		must(t, "QueryAudit", err)
		if len(got) != store.DefaultAuditLimit || got[0].ID != recs[n-1].ID {
			t.Errorf("Limit %d: %d records starting %v, want %d starting %s", limit, len(got), auditIDs(got[:1]), store.DefaultAuditLimit, recs[n-1].ID)
		}
	}
	got, err := st.QueryAudit(t.Context(), store.AuditQuery{Tenant: "acme", Limit: n + 10})
	must(t, "QueryAudit", err)
	if len(got) != n {
		t.Errorf("Limit %d: %d records, want %d", n+10, len(got), n)
	}
}

func testAuditDuplicateAndInvalid(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	r := record("dup", "acme", base)
	must(t, "AppendAudit", st.AppendAudit(ctx, r))
	must(t, "AppendAudit again", st.AppendAudit(ctx, r))
	got, err := st.QueryAudit(ctx, store.AuditQuery{})
	must(t, "QueryAudit", err)
	if g := auditIDs(got); !slices.Equal(g, []string{"dup"}) {
		t.Errorf("QueryAudit = %v, want [dup]", g)
	}

	tests := []struct {
		name string
		edit func(*store.AuditRecord)
	}{
		{"empty id", func(r *store.AuditRecord) { r.ID = "" }},
		{"zero time", func(r *store.AuditRecord) { r.Time = time.Time{} }},
		{"empty channel", func(r *store.AuditRecord) { r.Channel = "" }},
		{"NUL in tenant", func(r *store.AuditRecord) { r.Tenant = "a\x00" }},
		{"NUL in id", func(r *store.AuditRecord) { r.ID = "a\x00" }},
	}
	for _, tc := range tests {
		bad := record("bad", "acme", base)
		tc.edit(&bad)
		wantErr(t, "AppendAudit "+tc.name, st.AppendAudit(ctx, bad), store.ErrInvalid)
	}
	got, err = st.QueryAudit(ctx, store.AuditQuery{})
	must(t, "QueryAudit", err)
	if len(got) != 1 {
		t.Errorf("invalid records were stored: %v", auditIDs(got))
	}
}

func testPruneAudit(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	var recs []store.AuditRecord
	for i := range 10 {
		tenant := []string{"acme", "beta", ""}[i%3]
		recs = append(recs, record(fmt.Sprintf("r%d", i), tenant, base.Add(time.Duration(i)*time.Second)))
	}
	appendAll(t, st, recs)

	n, err := st.PruneAudit(ctx, base.Add(-time.Hour))
	must(t, "PruneAudit nothing", err)
	if n != 0 {
		t.Errorf("PruneAudit before everything = %d, want 0", n)
	}
	n, err = st.PruneAudit(ctx, base.Add(5*time.Second)) // r5 is kept: before is exclusive
	must(t, "PruneAudit", err)
	if n != 5 {
		t.Errorf("PruneAudit = %d, want 5", n)
	}
	n, err = st.PruneAudit(ctx, base.Add(5*time.Second))
	must(t, "PruneAudit again", err)
	if n != 0 {
		t.Errorf("PruneAudit again = %d, want 0", n)
	}
	for _, tc := range []struct {
		tenant string
		want   []string
	}{
		{"", []string{"r9", "r8", "r7", "r6", "r5"}},
		{"acme", []string{"r9", "r6"}},
		{"beta", []string{"r7"}},
	} {
		got, err := st.QueryAudit(ctx, store.AuditQuery{Tenant: tc.tenant})
		must(t, "QueryAudit", err)
		if g := auditIDs(got); !slices.Equal(g, tc.want) {
			t.Errorf("after prune QueryAudit(tenant %q) = %v, want %v", tc.tenant, g, tc.want)
		}
	}
	n, err = st.PruneAudit(ctx, base.Add(time.Hour))
	must(t, "PruneAudit all", err)
	if n != 5 {
		t.Errorf("PruneAudit all = %d, want 5", n)
	}
	got, err := st.QueryAudit(ctx, store.AuditQuery{Tenant: "acme"})
	must(t, "QueryAudit", err)
	if len(got) != 0 {
		t.Errorf("tenant index kept pruned records: %v", auditIDs(got))
	}
}

const racers = 16

// exactlyOne checks that one call succeeded and every other failed with
// target.
func exactlyOne(t *testing.T, what string, errs []error, target error) {
	t.Helper()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, target):
			t.Errorf("%s: unexpected error %v", what, err)
		}
	}
	if ok != 1 {
		t.Errorf("%s: %d calls succeeded, want exactly 1", what, ok)
	}
}

func testConcurrentPutTokenSameID(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	tok := func(i int) store.Token {
		t := newToken("same", fmt.Sprintf("tenant-%d", i), "alice", base.Add(time.Duration(i)*time.Second))
		t.Hash = store.HashSecret(fmt.Sprintf("secret %d", i))
		return t
	}
	errs := parallel(racers, func(i int) error { return st.PutToken(ctx, tok(i)) })
	exactlyOne(t, "PutToken same id", errs, store.ErrExists)
	winner := slices.Index(errs, nil)
	got, err := st.TokenByID(ctx, "same")
	must(t, "TokenByID", err)
	checkToken(t, got, tok(winner))
	for i := range racers {
		got, err := st.TokenByHash(ctx, tok(i).Hash)
		switch {
		case i == winner && err != nil:
			t.Errorf("TokenByHash of the winner: %v", err)
		case i == winner:
			checkToken(t, got, tok(winner))
		case !errors.Is(err, store.ErrNotFound):
			t.Errorf("TokenByHash of loser %d: err = %v, want ErrNotFound", i, err)
		}
	}
	all, err := st.ListTokens(ctx, store.TokenFilter{})
	must(t, "ListTokens", err)
	if len(all) != 1 {
		t.Errorf("ListTokens = %v, want one token", ids(all))
	}
}

func testConcurrentPutTokenSameHash(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	hash := store.HashSecret("one secret")
	errs := parallel(racers, func(i int) error {
		tok := newToken(fmt.Sprintf("tok-%d", i), "acme", "alice", base)
		tok.Hash = hash
		return st.PutToken(ctx, tok)
	})
	exactlyOne(t, "PutToken same hash", errs, store.ErrExists)
	winner := slices.Index(errs, nil)
	got, err := st.TokenByHash(ctx, hash)
	must(t, "TokenByHash", err)
	if want := fmt.Sprintf("tok-%d", winner); got.ID != want {
		t.Errorf("hash resolves to %q, want the winner %q", got.ID, want)
	}
	all, err := st.ListTokens(ctx, store.TokenFilter{Tenant: "acme"})
	must(t, "ListTokens", err)
	if len(all) != 1 {
		t.Errorf("ListTokens = %v, want one token", ids(all))
	}
}

func testConcurrentBindSession(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	bind := func(i int) store.SessionBinding {
		return store.SessionBinding{Connection: fmt.Sprintf("tok-%d", i), Tenant: "acme", Subject: fmt.Sprintf("user-%d", i)}
	}
	errs := parallel(racers, func(i int) error { return st.BindSession(ctx, "sess", bind(i), time.Hour) })
	exactlyOne(t, "BindSession", errs, store.ErrExists)
	got, err := st.Session(ctx, "sess")
	must(t, "Session", err)
	if want := bind(slices.Index(errs, nil)); got != want {
		t.Errorf("Session = %+v, want the winner %+v", got, want)
	}
}

func testConcurrentRevoke(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	tok := newToken("tok", "acme", "alice", base)
	must(t, "PutToken", st.PutToken(ctx, tok))
	at := func(i int) time.Time { return base.Add(time.Duration(i+1) * time.Minute) }
	for _, err := range parallel(racers, func(i int) error { return st.RevokeToken(ctx, "tok", at(i)) }) {
		must(t, "RevokeToken", err)
	}
	got, err := st.TokenByHash(ctx, tok.Hash)
	must(t, "TokenByHash", err)
	if got.RevokedAt == nil {
		t.Fatal("not revoked")
	}
	found := false
	for i := range racers {
		found = found || got.RevokedAt.Equal(norm(at(i)))
	}
	if !found {
		t.Errorf("RevokedAt %v is none of the revocation times", got.RevokedAt)
	}
}

// testConcurrentMixed runs every kind of call at once, for the race
// detector and for lost updates.
func testConcurrentMixed(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	const n = 24
	errs := parallel(n*4, func(i int) error {
		k := i / 4
		switch i % 4 {
		case 0:
			tok := newToken(fmt.Sprintf("tok-%d", k), fmt.Sprintf("tenant-%d", k%3), "alice", base.Add(time.Duration(k)*time.Second))
			if err := st.PutToken(ctx, tok); err != nil {
				return err
			}
			_, err := st.TokenByHash(ctx, tok.Hash)
			return err
		case 1:
			return st.AppendAudit(ctx, record(fmt.Sprintf("rec-%d", k), fmt.Sprintf("tenant-%d", k%3), base.Add(time.Duration(k)*time.Second)))
		case 2:
			b := store.SessionBinding{Connection: fmt.Sprintf("tok-%d", k)}
			if err := st.BindSession(ctx, fmt.Sprintf("sess-%d", k), b, time.Hour); err != nil {
				return err
			}
			_, err := st.Session(ctx, fmt.Sprintf("sess-%d", k))
			return err
		default:
			if _, err := st.ListTokens(ctx, store.TokenFilter{Tenant: fmt.Sprintf("tenant-%d", k%3)}); err != nil {
				return err
			}
			_, err := st.QueryAudit(ctx, store.AuditQuery{Tenant: fmt.Sprintf("tenant-%d", k%3)})
			return err
		}
	})
	for _, err := range errs {
		must(t, "concurrent call", err)
	}
	toks, err := st.ListTokens(ctx, store.TokenFilter{})
	must(t, "ListTokens", err)
	recs, err := st.QueryAudit(ctx, store.AuditQuery{})
	must(t, "QueryAudit", err)
	if len(toks) != n || len(recs) != n {
		t.Errorf("after concurrent writes: %d tokens and %d records, want %d each", len(toks), len(recs), n)
	}
}

func testReopen(t *testing.T, s suite) {
	ctx := t.Context()
	st, name := s.fresh(t)
	tok := newToken("tok", "acme", "alice", base)
	bind := store.SessionBinding{Connection: "tok", Tenant: "acme", Subject: "alice"}
	rec := record("rec", "acme", base)
	must(t, "PutToken", st.PutToken(ctx, tok))
	must(t, "RevokeToken", st.RevokeToken(ctx, "tok", base.Add(time.Minute)))
	must(t, "BindSession", st.BindSession(ctx, "sess", bind, time.Hour))
	must(t, "AppendAudit", st.AppendAudit(ctx, rec))
	must(t, "Close", st.Close())

	st = s.open(t, name)
	got, err := st.TokenByHash(ctx, tok.Hash)
	must(t, "TokenByHash after reopen", err)
	want := tok
	revoked := base.Add(time.Minute)
	want.RevokedAt = &revoked
	checkToken(t, got, want)
	list, err := st.ListTokens(ctx, store.TokenFilter{Creator: "alice"})
	must(t, "ListTokens after reopen", err)
	if g := ids(list); !slices.Equal(g, []string{"tok"}) {
		t.Errorf("ListTokens after reopen = %v", g)
	}
	b, err := st.Session(ctx, "sess")
	must(t, "Session after reopen", err)
	if b != bind {
		t.Errorf("Session after reopen = %+v, want %+v", b, bind)
	}
	recs, err := st.QueryAudit(ctx, store.AuditQuery{Tenant: "acme"})
	must(t, "QueryAudit after reopen", err)
	if g := auditIDs(recs); !slices.Equal(g, []string{"rec"}) {
		t.Errorf("QueryAudit after reopen = %v", g)
	}
	// Conflicts survive too.
	wantErr(t, "PutToken after reopen", st.PutToken(ctx, tok), store.ErrExists)
	wantErr(t, "BindSession after reopen", st.BindSession(ctx, "sess", store.SessionBinding{Connection: "other"}, time.Hour), store.ErrExists)
}

func testClosed(t *testing.T, s suite) {
	ctx := t.Context()
	st, _ := s.fresh(t)
	must(t, "Close", st.Close())
	must(t, "Close again", st.Close())
	tok := newToken("tok", "acme", "alice", base)
	calls := map[string]func() error{
		"Ping":          func() error { return st.Ping(ctx) },
		"PutToken":      func() error { return st.PutToken(ctx, tok) },
		"TokenByHash":   func() error { _, err := st.TokenByHash(ctx, tok.Hash); return err },
		"TokenByID":     func() error { _, err := st.TokenByID(ctx, "tok"); return err },
		"ListTokens":    func() error { _, err := st.ListTokens(ctx, store.TokenFilter{}); return err },
		"RevokeToken":   func() error { return st.RevokeToken(ctx, "tok", base) },
		"BindSession":   func() error { return st.BindSession(ctx, "s", store.SessionBinding{Connection: "c"}, time.Hour) },
		"Session":       func() error { _, err := st.Session(ctx, "s"); return err },
		"UnbindSession": func() error { return st.UnbindSession(ctx, "s") },
		"AppendAudit":   func() error { return st.AppendAudit(ctx, record("r", "acme", base)) },
		"QueryAudit":    func() error { _, err := st.QueryAudit(ctx, store.AuditQuery{}); return err },
		"PruneAudit":    func() error { _, err := st.PruneAudit(ctx, base); return err },
	}
	for name, call := range calls {
		wantErr(t, name+" after Close", call(), store.ErrClosed)
	}
}

func testCancelledContext(t *testing.T, s suite) {
	st, _ := s.fresh(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tok := newToken("tok", "acme", "alice", base)
	wantErr(t, "PutToken", st.PutToken(ctx, tok), context.Canceled)
	_, err := st.TokenByHash(ctx, tok.Hash)
	wantErr(t, "TokenByHash", err, context.Canceled)
	wantErr(t, "AppendAudit", st.AppendAudit(ctx, record("r", "acme", base)), context.Canceled)
	_, err = st.QueryAudit(ctx, store.AuditQuery{})
	wantErr(t, "QueryAudit", err, context.Canceled)
	wantErr(t, "BindSession", st.BindSession(ctx, "s", store.SessionBinding{Connection: "c"}, time.Hour), context.Canceled)
	// Nothing was written.
	_, err = st.TokenByHash(t.Context(), tok.Hash)
	wantErr(t, "TokenByHash after cancelled put", err, store.ErrNotFound)
}

func testIsolation(t *testing.T, s suite) {
	ctx := t.Context()
	a, _ := s.fresh(t)
	b, _ := s.fresh(t)
	tok := newToken("tok", "acme", "alice", base)
	must(t, "PutToken a", a.PutToken(ctx, tok))
	must(t, "AppendAudit a", a.AppendAudit(ctx, record("r", "acme", base)))
	must(t, "BindSession a", a.BindSession(ctx, "s", store.SessionBinding{Connection: "c"}, time.Hour))
	_, err := b.TokenByHash(ctx, tok.Hash)
	wantErr(t, "b.TokenByHash", err, store.ErrNotFound)
	_, err = b.Session(ctx, "s")
	wantErr(t, "b.Session", err, store.ErrNotFound)
	recs, err := b.QueryAudit(ctx, store.AuditQuery{})
	must(t, "b.QueryAudit", err)
	if len(recs) != 0 {
		t.Errorf("b sees a's audit records: %v", auditIDs(recs))
	}
	must(t, "PutToken b", b.PutToken(ctx, tok))
}
