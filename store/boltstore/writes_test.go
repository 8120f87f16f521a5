package boltstore_test

import (
	"errors"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// TestSweepWrites: expired replay entries and actions past their retention
// are deleted with their index entries; live ones stay.
func TestSweepWrites(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{SweepInterval: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	claim := func(key string, ttl time.Duration) {
		t.Helper()
		if _, won, err := s.ClaimReplay(ctx, key, store.ReplayEntry{Claim: "c", State: store.ReplayRunning}, ttl); err != nil || !won {
			t.Fatalf("ClaimReplay %s = %v, %v", key, won, err)
		}
	}
	claim("short", time.Minute)
	claim("long", time.Hour)
	claim("finished", time.Minute)
	// Finishing moves the expiry: the old index entry must go.
	if err := s.FinishReplay(ctx, "finished", "c", store.ReplayDone, []byte(`{}`), 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	action := func(id, tenant string, expires time.Duration) {
		t.Helper()
		now := clock.Now()
		a := store.Action{ID: id, Tenant: tenant, Connection: "tok", Tool: "t", Approval: store.ApprovalClient,
			State: store.ActionPending, CreatedAt: now, ExpiresAt: now.Add(expires)}
		if err := s.PutAction(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	action("a-soon", "acme", time.Minute)
	action("a-soon-no-tenant", "", time.Minute)
	action("a-later", "acme", 3*time.Hour)

	want := map[string]int{"replay": 3, "replay_expiry": 3, "actions": 3, "action_created": 3, "action_tenant": 2, "action_gone": 3}
	if got := boltstore.WriteKeys(s); !maps.Equal(got, want) {
		t.Fatalf("before sweeping: %v, want %v", got, want)
	}

	clock.Add(time.Minute) // "short" expires exactly now
	if n, err := s.SweepWrites(ctx); err != nil || n != 1 {
		t.Fatalf("SweepWrites = %d, %v; want 1 (short)", n, err)
	}
	// An action expired an hour ago is kept (readable) until its retention ends.
	clock.Add(store.ActionRetention)
	if _, err := s.Action(ctx, "a-soon"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a-soon at the end of its retention: err = %v, want ErrNotFound", err)
	}
	if n, err := s.SweepWrites(ctx); err != nil || n != 4 {
		t.Fatalf("SweepWrites = %d, %v; want 4 (long, finished, a-soon, a-soon-no-tenant)", n, err)
	}
	want = map[string]int{"replay": 0, "replay_expiry": 0, "actions": 1, "action_created": 1, "action_tenant": 1, "action_gone": 1}
	if got := boltstore.WriteKeys(s); !maps.Equal(got, want) {
		t.Fatalf("after sweeping: %v, want %v", got, want)
	}
	if _, err := s.Action(ctx, "a-later"); err != nil {
		t.Errorf("a-later after the sweep: %v", err)
	}
	clock.Add(3 * time.Hour)
	if n, err := s.SweepWrites(ctx); err != nil || n != 1 {
		t.Fatalf("SweepWrites = %d, %v; want 1 (a-later)", n, err)
	}
	for k, v := range boltstore.WriteKeys(s) {
		if v != 0 {
			t.Errorf("after sweeping everything: %s has %d entries", k, v)
		}
	}
}

// TestSweeperWrites: the background sweeper also deletes expired replay
// entries.
func TestSweeperWrites(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{SweepInterval: time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.ClaimReplay(ctx, "fp", store.ReplayEntry{Claim: "c", State: store.ReplayRunning}, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for boltstore.WriteKeys(s)["replay"] != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not delete the expired replay entry")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
