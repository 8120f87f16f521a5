package redisstore_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/redisstore"
	"github.com/mcpgate/mcpgate/store/redistest"
)

// replicas opens two stores with their own clients on one Redis and one
// prefix: two mcpgate replicas.
func replicas(t *testing.T) (*redisstore.Store, *redisstore.Store) {
	t.Helper()
	srv := redistest.Start(t)
	open := func() *redisstore.Store {
		s, err := redisstore.Open(t.Context(), srv.URL, redisstore.Options{Prefix: "replicas:"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	return open(), open()
}

// race runs fn(i) for i in [0,n) at once, alternating the two replicas.
func race(n int, a, b *redisstore.Store, fn func(st *redisstore.Store, i int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		st := a
		if i%2 == 1 {
			st = b
		}
		wg.Go(func() {
			<-start
			errs[i] = fn(st, i)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// TestReplicasClaimOnce: 32 concurrent claims of one fingerprint through
// two replicas; exactly one wins and every loser sees the winner.
func TestReplicasClaimOnce(t *testing.T) {
	a, b := replicas(t)
	ctx := t.Context()
	const n = 32
	won := make([]bool, n)
	seen := make([]string, n)
	errs := race(n, a, b, func(st *redisstore.Store, i int) error {
		e, w, err := st.ClaimReplay(ctx, "fp", store.ReplayEntry{Claim: fmt.Sprintf("c%d", i), State: store.ReplayRunning}, time.Hour)
		won[i], seen[i] = w, e.Claim
		return err
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	winners := 0
	for _, w := range won {
		if w {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d claims won, want 1", winners)
	}
	want := fmt.Sprintf("c%d", slices.Index(won, true))
	for i, c := range seen {
		if c != want {
			t.Errorf("claim %d saw %q, want the winner %q", i, c, want)
		}
	}
	// The other replica finishes it; the first sees the result.
	other := b
	if slices.Index(won, true)%2 == 1 {
		other = a
	}
	if err := other.FinishReplay(ctx, "fp", want, store.ReplayDone, []byte(`{"n":1}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	e, w, err := a.ClaimReplay(ctx, "fp", store.ReplayEntry{Claim: "late", State: store.ReplayRunning}, time.Hour)
	if err != nil || w || e.State != store.ReplayDone || string(e.Result) != `{"n":1}` {
		t.Errorf("late claim = %+v, %v, %v; want the done entry", e, w, err)
	}
}

// TestReplicasTransitionOnce: 32 concurrent confirmations of one pending
// action through two replicas; exactly one moves it.
func TestReplicasTransitionOnce(t *testing.T) {
	a, b := replicas(t)
	ctx := t.Context()
	now := time.Now()
	act := store.Action{ID: "act", Connection: "tok-1", Tool: "send_invoice", Approval: store.ApprovalClient,
		State: store.ActionPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := a.PutAction(ctx, act); err != nil {
		t.Fatal(err)
	}
	if err := b.PutAction(ctx, act); !errors.Is(err, store.ErrExists) {
		t.Fatalf("PutAction on the other replica: err = %v, want ErrExists", err)
	}
	errs := race(32, a, b, func(st *redisstore.Store, i int) error {
		_, err := st.TransitionAction(ctx, "act", store.ActionPending, store.ActionUpdate{State: store.ActionExecuting, DecidedBy: fmt.Sprintf("r%d", i)})
		return err
	})
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d transitions won, want 1", ok)
	}
	got, err := b.Action(ctx, "act")
	if err != nil || got.State != store.ActionExecuting || got.DecidedBy != fmt.Sprintf("r%d", slices.Index(errs, nil)) {
		t.Errorf("Action = %+v, %v; want executing by the winner", got, err)
	}
}

// TestSweepActions: actions past their retention are deleted with their
// index entries, by PutAction a few at a time.
func TestSweepActions(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	s, err := redisstore.Open(ctx, srv.URL, redisstore.Options{Prefix: "sweep:"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := time.Now().Add(-store.ActionRetention - 2*time.Hour)
	for i := range 20 {
		a := store.Action{ID: fmt.Sprintf("old-%02d", i), Tenant: "acme", Connection: "tok", Tool: "t",
			Approval: store.ApprovalClient, State: store.ActionPending, CreatedAt: old, ExpiresAt: old.Add(time.Hour)}
		if err := s.PutAction(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	// Each put deletes up to 8 gone actions, itself included: nothing is
	// left, index entries included.
	rdb := srv.Client(t)
	keys, err := rdb.Keys(ctx, "sweep:action:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("keys left after putting gone actions: %v", keys)
	}
	if n, err := s.SweepWrites(ctx); err != nil || n != 0 {
		t.Errorf("SweepWrites with nothing due = %d, %v", n, err)
	}
	// A live action survives a sweep.
	now := time.Now()
	live := store.Action{ID: "live", Tenant: "acme", Connection: "tok", Tool: "t", Approval: store.ApprovalClient,
		State: store.ActionPending, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := s.PutAction(ctx, live); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SweepWrites(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Action(ctx, "live"); err != nil {
		t.Errorf("live action after a sweep: %v", err)
	}
}
