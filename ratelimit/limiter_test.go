package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/ratelimit"
	"github.com/mcpgate/mcpgate/store/redistest"
)

// limiters gives the Limiters under test: two handles on the same buckets
// (for Redis, two clients: two replicas; for Memory, the same limiter).
type limiters func(t *testing.T) (ratelimit.Limiter, ratelimit.Limiter)

func backends() map[string]limiters {
	return map[string]limiters{
		"memory": func(t *testing.T) (ratelimit.Limiter, ratelimit.Limiter) {
			m := ratelimit.NewMemory(0)
			return m, m
		},
		"redis": func(t *testing.T) (ratelimit.Limiter, ratelimit.Limiter) {
			srv := redistest.Start(t)
			return ratelimit.NewRedis(srv.Client(t)), ratelimit.NewRedis(srv.Client(t))
		},
	}
}

// TestLimiters is the behaviour both backends share, on the wall clock:
// every assertion holds however slowly the test runs.
func TestLimiters(t *testing.T) {
	for name, open := range backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, b := open(t)
			ctx := t.Context()
			slow := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 3}

			// The burst, then a refusal that says when to retry.
			for i, want := range []int{2, 1, 0} {
				r, err := a.Allow(ctx, "burst", slow)
				if err != nil || !r.Allowed || r.Remaining != want || r.RetryAfter != 0 {
					t.Fatalf("event %d = %+v, %v; want allowed with %d remaining", i, r, err, want)
				}
			}
			r, err := b.Allow(ctx, "burst", slow)
			if err != nil || r.Allowed || r.RetryAfter <= 0 || r.RetryAfter > time.Hour {
				t.Fatalf("over the burst (other handle) = %+v, %v; want refused, retry within (0, 1h]", r, err)
			}
			if r.RetryAfter < 50*time.Minute {
				t.Errorf("RetryAfter = %s; the next event refills in about an hour", r.RetryAfter)
			}
			// Keys are independent.
			if r, err := b.Allow(ctx, "burst-other", slow); err != nil || !r.Allowed {
				t.Errorf("another key = %+v, %v; want allowed", r, err)
			}

			// Refill: a refused event is allowed once RetryAfter passed.
			fast := ratelimit.Limit{Rate: 50, Period: time.Second, Burst: 1}
			if r, err := a.Allow(ctx, "refill", fast); err != nil || !r.Allowed {
				t.Fatalf("first = %+v, %v", r, err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				r, err := b.Allow(ctx, "refill", fast)
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					break
				}
				if r.RetryAfter <= 0 || r.RetryAfter > 20*time.Millisecond {
					t.Fatalf("refused with RetryAfter %s, want within (0, 20ms]", r.RetryAfter)
				}
				if time.Now().After(deadline) {
					t.Fatal("the bucket never refilled")
				}
				time.Sleep(r.RetryAfter)
			}

			// Concurrent events through both handles: exactly the burst passes.
			burst := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 10}
			var mu sync.Mutex
			allowed := 0
			var wg sync.WaitGroup
			for i := range 40 {
				l := a
				if i%2 == 1 {
					l = b
				}
				wg.Go(func() {
					r, err := l.Allow(ctx, "race", burst)
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						mu.Lock()
						allowed++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if allowed != 10 {
				t.Errorf("%d of 40 concurrent events allowed, want the burst of 10", allowed)
			}
		})
	}
}

func BenchmarkRedis(b *testing.B) {
	srv := redistest.Start(b)
	r := ratelimit.NewRedis(srv.Client(b))
	l := ratelimit.Limit{Rate: 1 << 20, Period: time.Second, Burst: 1 << 20}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := r.Allow(b.Context(), "write:tenant:acme", l); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
