package boltstore_test

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
	"github.com/mcpgate/mcpgate/store/storetest"
)

func opener(dir string, opts boltstore.Options) storetest.OpenFunc {
	return func(tb testing.TB, name string) store.Store {
		tb.Helper()
		s, err := boltstore.Open(filepath.Join(dir, name+".db"), opts)
		if err != nil {
			tb.Fatalf("open: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestSuite(t *testing.T) {
	storetest.Run(t, opener(t.TempDir(), boltstore.Options{SweepInterval: 10 * time.Millisecond}))
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, opener(b.TempDir(), boltstore.Options{}))
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestSweepSessions(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := boltstore.Open(path, boltstore.Options{SweepInterval: -1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b := store.SessionBinding{Connection: "c"}
	for i, ttl := range []time.Duration{time.Minute, 2 * time.Minute, time.Hour} {
		if err := s.BindSession(ctx, string(rune('a'+i)), b, ttl); err != nil {
			t.Fatal(err)
		}
	}
	// Renewing "a" moves its expiry: the old index entry must go.
	if err := s.BindSession(ctx, "a", b, 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	clock.Add(2 * time.Minute) // "b" expires exactly now
	if _, err := s.Session(ctx, "b"); err == nil {
		t.Error(`"b" is returned at its expiry time`)
	}
	n, err := s.SweepSessions(ctx)
	if err != nil || n != 1 {
		t.Fatalf("SweepSessions = %d, %v; want 1", n, err)
	}
	clock.Add(time.Minute)
	if n, err := s.SweepSessions(ctx); err != nil || n != 1 {
		t.Fatalf("SweepSessions = %d, %v; want 1 (the renewed a)", n, err)
	}
	if _, err := s.Session(ctx, "c"); err != nil {
		t.Errorf(`"c" is gone: %v`, err)
	}
	if err := s.UnbindSession(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	if n, err := s.SweepSessions(ctx); err != nil || n != 0 {
		t.Fatalf("SweepSessions after unbind = %d, %v; want 0", n, err)
	}
	if n, m := boltstore.SessionKeys(s); n != 0 || m != 0 {
		t.Errorf("after sweeping everything: %d sessions, %d expiry entries", n, m)
	}
}

// TestSweeper: the background sweeper deletes expired bindings.
func TestSweeper(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)}
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{SweepInterval: time.Millisecond, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.BindSession(ctx, "a", store.SessionBinding{Connection: "c"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, m := boltstore.SessionKeys(s); n == 0 && m == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper did not delete the expired binding")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	s, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// bbolt's flock is per open file description, so a second Open in the
	// same process waits like another process would.
	_, err = boltstore.Open(path, boltstore.Options{LockTimeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("second Open: err = %v, want a lock error", err)
	}
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("schema"), []byte("99"))
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = boltstore.Open(path, boltstore.Options{})
	if err == nil || !strings.Contains(err.Error(), `"99"`) {
		t.Fatalf("Open of a newer schema: err = %v", err)
	}
}

func TestNotAFile(t *testing.T) {
	if _, err := boltstore.Open(filepath.Join(t.TempDir(), "missing", "s.db"), boltstore.Options{}); err == nil {
		t.Fatal("Open in a missing directory succeeded")
	}
}
