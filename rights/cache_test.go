package rights

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// countingSource answers from a Static, counts the calls that reach it,
// and can be made to fail or to wait for a gate.
type countingSource struct {
	static *Static
	calls  atomic.Int64
	fail   atomic.Bool
	gate   chan struct{} // when not nil, calls wait for it to close
	ctxErr chan error    // when not nil, receives ctx.Err() after the gate
}

func (s *countingSource) Lookup(ctx context.Context, tenant, subject string) (Live, error) {
	s.calls.Add(1)
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return Live{}, unavailable("counting", "abandoned", ctx.Err())
		}
		if s.ctxErr != nil {
			s.ctxErr <- ctx.Err()
		}
	}
	if s.fail.Load() {
		return Live{}, unavailable("counting", "down", nil)
	}
	return s.static.Lookup(ctx, tenant, subject)
}

func newCounting() *countingSource {
	st := &Static{}
	st.Set("acme", "alice", aliceLive)
	st.Set("acme", "bob", Live{Active: false})
	return &countingSource{static: st}
}

// clock is a settable time for CacheOptions.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestCachedZeroStalenessAlwaysAsks(t *testing.T) {
	src := newCounting()
	c := NewCached(src, CacheOptions{})
	for range 5 {
		expectLive(t, c, "acme", "alice", aliceLive)
	}
	if n := src.calls.Load(); n != 5 {
		t.Fatalf("%d calls, want 5", n)
	}
	c.Invalidate("acme", "alice") // does nothing, does not fail
	c.InvalidateAll()
}

func TestCachedServesUntilStale(t *testing.T) {
	src := newCounting()
	clk := &clock{t: time.Unix(1000, 0)}
	c := NewCached(src, CacheOptions{MaxStaleness: time.Minute, Now: clk.Now})
	expectLive(t, c, "acme", "alice", aliceLive)
	expectLive(t, c, "acme", "bob", Live{}) // inactive answers are cached too
	src.static.Set("acme", "alice", readOnly)
	src.static.Set("acme", "bob", readOnly)
	clk.Add(59 * time.Second)
	expectLive(t, c, "acme", "alice", aliceLive)
	expectLive(t, c, "acme", "bob", Live{})
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("%d calls, want 2", n)
	}
	clk.Add(time.Second) // exactly MaxStaleness old: no longer served
	expectLive(t, c, "acme", "alice", readOnly)
	expectLive(t, c, "acme", "bob", readOnly)
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("%d calls, want 4", n)
	}

	// The caller owns the returned rights.
	l, _ := c.Lookup(context.Background(), "acme", "alice")
	l.Rights[0] = "admin"
	expectLive(t, c, "acme", "alice", readOnly)
}

func TestCachedInvalidate(t *testing.T) {
	src := newCounting()
	c := NewCached(src, CacheOptions{MaxStaleness: time.Hour})
	expectLive(t, c, "acme", "alice", aliceLive)
	expectLive(t, c, "acme", "bob", Live{})
	src.static.Delete("acme", "alice")
	src.static.Set("acme", "bob", readOnly)
	expectLive(t, c, "acme", "alice", aliceLive) // cached

	c.Invalidate("acme", "alice")
	expectLive(t, c, "acme", "alice", Live{})
	expectLive(t, c, "acme", "bob", Live{}) // still cached
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}

	c.InvalidateAll()
	if c.Len() != 0 {
		t.Fatalf("Len = %d after InvalidateAll", c.Len())
	}
	expectLive(t, c, "acme", "bob", readOnly)
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("%d calls, want 4", n)
	}
}

func TestCachedErrorsAreNotCached(t *testing.T) {
	src := newCounting()
	c := NewCached(src, CacheOptions{MaxStaleness: time.Hour})
	src.fail.Store(true)
	for range 2 {
		if _, err := c.Lookup(context.Background(), "acme", "alice"); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err = %v", err)
		}
	}
	src.fail.Store(false)
	expectLive(t, c, "acme", "alice", aliceLive)
	expectLive(t, c, "acme", "alice", aliceLive)
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
}

func TestCachedMaxEntries(t *testing.T) {
	src := newCounting()
	for i := range 3 {
		src.static.Set("t", fmt.Sprint(i), readOnly)
	}
	c := NewCached(src, CacheOptions{MaxStaleness: time.Hour, MaxEntries: 2})
	for i := range 3 {
		expectLive(t, c, "t", fmt.Sprint(i), readOnly)
	}
	if c.Len() != 2 {
		t.Fatalf("Len = %d, want 2", c.Len())
	}
	expectLive(t, c, "t", "2", readOnly) // kept
	expectLive(t, c, "t", "1", readOnly) // kept
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("%d calls, want 3", n)
	}
	expectLive(t, c, "t", "0", readOnly) // the oldest was dropped
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("%d calls, want 4", n)
	}
}

// Keys that would collide if tenant and subject were simply joined stay
// apart.
func TestCachedKeysDoNotCollide(t *testing.T) {
	src := newCounting()
	src.static.Set("a:b", "c", readOnly)
	src.static.Set("a", "b:c", aliceLive)
	c := NewCached(src, CacheOptions{MaxStaleness: time.Hour})
	expectLive(t, c, "a:b", "c", readOnly)
	expectLive(t, c, "a", "b:c", aliceLive)
}

func TestCachedSharesOneCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newCounting()
		src.gate = make(chan struct{})
		c := NewCached(src, CacheOptions{MaxStaleness: time.Minute})
		const n = 20
		results := make(chan Live, n)
		for range n {
			go func() {
				l, err := c.Lookup(context.Background(), "acme", "alice")
				if err != nil {
					t.Error(err)
				}
				results <- l
			}()
		}
		synctest.Wait() // all lookups are waiting
		if got := src.calls.Load(); got != 1 {
			t.Fatalf("%d calls while blocked, want 1", got)
		}
		close(src.gate)
		var first []string
		for i := range n {
			l := <-results
			if !equalLive(l, aliceLive) {
				t.Fatalf("result %d = %+v", i, l)
			}
			if i == 0 {
				first = l.Rights
			} else if &first[0] == &l.Rights[0] {
				t.Fatal("callers share one rights slice")
			}
		}
		expectLive(t, c, "acme", "alice", aliceLive)
		if got := src.calls.Load(); got != 1 {
			t.Fatalf("%d calls, want 1", got)
		}
	})
}

func TestCachedCallerCancellationDoesNotCancelOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newCounting()
		src.gate = make(chan struct{})
		src.ctxErr = make(chan error, 1)
		c := NewCached(src, CacheOptions{MaxStaleness: time.Minute})

		ctx, cancel := context.WithCancel(context.Background())
		first := make(chan error, 1)
		go func() {
			_, err := c.Lookup(ctx, "acme", "alice")
			first <- err
		}()
		synctest.Wait()
		second := make(chan Live, 1)
		go func() {
			l, err := c.Lookup(context.Background(), "acme", "alice")
			if err != nil {
				t.Error(err)
			}
			second <- l
		}()
		synctest.Wait()

		cancel()
		err := <-first
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: err = %v", err)
		}
		close(src.gate)
		if err := <-src.ctxErr; err != nil {
			t.Fatalf("the shared call saw %v", err)
		}
		if l := <-second; !equalLive(l, aliceLive) {
			t.Fatalf("other caller got %+v", l)
		}
		if got := src.calls.Load(); got != 1 {
			t.Fatalf("%d calls, want 1", got)
		}
	})
}

// The shared call is bounded by CacheOptions.Timeout even when no caller
// has a deadline and the source has none of its own.
func TestCachedTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newCounting()
		src.gate = make(chan struct{}) // never closed
		c := NewCached(src, CacheOptions{MaxStaleness: time.Minute, Timeout: 3 * time.Second})
		start := time.Now()
		_, err := c.Lookup(context.Background(), "acme", "alice")
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("gave up after %s", d)
		}
	})
}

// An invalidation while a call is in flight: the answer on its way is
// not stored, and a lookup after the invalidation does not join it.
func TestCachedInvalidateDuringCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := newCounting()
		src.gate = make(chan struct{})
		c := NewCached(src, CacheOptions{MaxStaleness: time.Hour})

		old := make(chan Live, 1)
		go func() {
			l, _ := c.Lookup(context.Background(), "acme", "alice")
			old <- l
		}()
		synctest.Wait()

		// Revoke alice while the first call is waiting.
		src.static.Delete("acme", "alice")
		c.Invalidate("acme", "alice")

		fresh := make(chan Live, 1)
		go func() {
			l, _ := c.Lookup(context.Background(), "acme", "alice")
			fresh <- l
		}()
		synctest.Wait()
		if got := src.calls.Load(); got != 2 {
			t.Fatalf("%d calls, want 2: the lookup after Invalidate joined the old call", got)
		}
		close(src.gate)
		<-old
		if l := <-fresh; l.Active {
			t.Fatalf("lookup after Invalidate = %+v", l)
		}
		expectLive(t, c, "acme", "alice", Live{})
		if got := src.calls.Load(); got != 2 {
			t.Fatalf("%d calls, want 2", got)
		}
	})
}

// Two lookups of different keys run in parallel; racing invalidations and
// lookups leave the cache consistent (run with -race).
func TestCachedConcurrentUse(t *testing.T) {
	src := newCounting()
	c := NewCached(src, CacheOptions{MaxStaleness: time.Millisecond, MaxEntries: 4})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				subject := fmt.Sprint("s", (i+j)%6)
				if _, err := c.Lookup(context.Background(), "acme", subject); err != nil {
					t.Error(err)
					return
				}
				switch j % 50 {
				case 0:
					c.Invalidate("acme", subject)
				case 25:
					c.InvalidateAll()
				}
			}
		})
	}
	wg.Wait()
	if c.Len() > 4 {
		t.Fatalf("Len = %d, above MaxEntries", c.Len())
	}
}
