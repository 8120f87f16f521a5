package ratelimit_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/ratelimit"
)

// fakeClock is a settable clock for the Memory limiter.
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

func newClock() *fakeClock { return &fakeClock{t: time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)} }

// TestMemoryBurstAndRefill follows one bucket through a burst, refusals with
// exact retry times, and refills, on a fake clock.
func TestMemoryBurstAndRefill(t *testing.T) {
	clock := newClock()
	m := ratelimit.NewMemory(10, ratelimit.WithClock(clock.Now))
	l := ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 3} // one event per 100ms, 3 at once
	allow := func(step string) ratelimit.Result {
		t.Helper()
		r, err := m.Allow(t.Context(), "k", l)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return r
	}
	type want struct {
		allowed    bool
		remaining  int
		retryAfter time.Duration
	}
	steps := []struct {
		name    string
		advance time.Duration
		want    want
	}{
		{"burst 1", 0, want{true, 2, 0}},
		{"burst 2", 0, want{true, 1, 0}},
		{"burst 3", 0, want{true, 0, 0}},
		{"over the burst", 0, want{false, 0, 100 * time.Millisecond}},
		{"refused again, not counted", 40 * time.Millisecond, want{false, 0, 60 * time.Millisecond}},
		{"one refilled", 60 * time.Millisecond, want{true, 0, 0}},
		{"empty again", 0, want{false, 0, 100 * time.Millisecond}},
		{"long idle refills to the burst, no more", time.Hour, want{true, 2, 0}},
		{"burst 2 after idle", 0, want{true, 1, 0}},
		{"half an interval adds nothing", 50 * time.Millisecond, want{true, 0, 0}},
		{"empty", 0, want{false, 0, 50 * time.Millisecond}},
	}
	for _, s := range steps {
		clock.Add(s.advance)
		r := allow(s.name)
		if got := (want{r.Allowed, r.Remaining, r.RetryAfter}); got != s.want {
			t.Errorf("%s: got %+v, want %+v", s.name, got, s.want)
		}
	}
	// Other keys have their own bucket.
	if r, _ := m.Allow(t.Context(), "other", l); !r.Allowed || r.Remaining != 2 {
		t.Errorf("another key: %+v, want allowed with 2 remaining", r)
	}
}

// TestMemoryEviction: at most maxKeys buckets are kept; the least recently
// used goes first.
func TestMemoryEviction(t *testing.T) {
	clock := newClock()
	m := ratelimit.NewMemory(2, ratelimit.WithClock(clock.Now))
	l := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	allowed := func(key string) bool {
		r, err := m.Allow(t.Context(), key, l)
		if err != nil {
			t.Fatal(err)
		}
		return r.Allowed
	}
	if !allowed("a") || !allowed("b") {
		t.Fatal("first events refused")
	}
	if allowed("a") { // a is now the most recently used
		t.Fatal("a allowed twice within its hour")
	}
	if !allowed("c") { // evicts b
		t.Fatal("c refused")
	}
	if n := m.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
	if allowed("a") {
		t.Error("a was evicted instead of the least recently used b")
	}
	if !allowed("b") {
		t.Error("b was not evicted (its bucket was still empty)")
	}
	if n := m.Len(); n != 2 {
		t.Errorf("Len = %d, want 2", n)
	}
}

func TestInvalid(t *testing.T) {
	m := ratelimit.NewMemory(0)
	for _, c := range []struct {
		key string
		l   ratelimit.Limit
	}{
		{"", ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 1}},
		{"k", ratelimit.Limit{Rate: 0, Period: time.Second, Burst: 1}},
		{"k", ratelimit.Limit{Rate: 1, Period: 0, Burst: 1}},
		{"k", ratelimit.Limit{Rate: 1, Period: time.Second, Burst: 0}},
		{"k", ratelimit.Limit{Rate: 10, Period: 5 * time.Nanosecond, Burst: 1}},
	} {
		r, err := m.Allow(t.Context(), c.key, c.l)
		if !errors.Is(err, ratelimit.ErrInvalid) || r.Allowed {
			t.Errorf("Allow(%q, %v) = %+v, %v; want ErrInvalid and not allowed", c.key, c.l, r, err)
		}
	}
	if m.Len() != 0 {
		t.Errorf("invalid calls stored %d buckets", m.Len())
	}
}

func BenchmarkMemory(b *testing.B) {
	m := ratelimit.NewMemory(0)
	l := ratelimit.Limit{Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("write:tenant:t%d", i)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Allow(b.Context(), keys[i%len(keys)], l); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
