package rights

import (
	"container/list"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// Defaults for [CacheOptions].
const (
	DefaultCacheEntries = 100000
	DefaultCacheTimeout = 10 * time.Second
)

// CacheOptions configure [NewCached].
type CacheOptions struct {
	// MaxStaleness is the longest an answer is reused, counted from the
	// moment the source was asked. Zero disables caching: every lookup
	// asks the source, and concurrent lookups are not merged either.
	// Negative is treated as zero.
	MaxStaleness time.Duration
	// MaxEntries bounds the number of (tenant, subject) answers kept;
	// when full, the oldest answer is dropped. Zero or negative means
	// DefaultCacheEntries (100000).
	MaxEntries int
	// Timeout bounds one call to the source made on behalf of merged
	// lookups. Such a call is detached from the callers' contexts (one
	// caller giving up must not fail the others), so this is what ends
	// it when the source has no timeout of its own. Zero or negative
	// means DefaultCacheTimeout (10s).
	Timeout time.Duration
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

// Cached is a [Source] that remembers the answers of another source for
// at most a maximum staleness. It is safe for concurrent use.
//
// Successful answers, inactive ones included, are cached per (tenant,
// subject); errors are never cached, so the next lookup after a failure
// asks the source again. Concurrent lookups of the same key that miss
// the cache share one call to the source; a caller whose context ends
// stops waiting (its error wraps ErrUnavailable and the context's error)
// while the shared call goes on for the others, bounded by
// CacheOptions.Timeout.
//
// [Cached.Invalidate] and [Cached.InvalidateAll] make a revocation take
// effect on the next lookup: the entry is dropped, an answer still on
// its way from the source is not stored, and later lookups do not join
// a source call that started before the invalidation.
type Cached struct {
	src        Source
	maxStale   time.Duration
	maxEntries int
	timeout    time.Duration
	now        func() time.Time
	group      singleflight.Group

	mu      sync.Mutex
	epoch   uint64 // incremented by every invalidation
	entries map[cacheKey]*list.Element
	order   *list.List // of *cacheEntry, oldest first
}

type cacheKey struct{ tenant, subject string }

type cacheEntry struct {
	key     cacheKey
	live    Live
	expires time.Time
}

// NewCached returns a cache in front of src configured by o (see
// [CacheOptions]). With MaxStaleness zero it adds nothing but the
// Invalidate methods, which then do nothing.
func NewCached(src Source, o CacheOptions) *Cached {
	c := &Cached{
		src:        src,
		maxStale:   max(o.MaxStaleness, 0),
		maxEntries: o.MaxEntries,
		timeout:    o.Timeout,
		now:        o.Now,
		entries:    make(map[cacheKey]*list.Element),
		order:      list.New(),
	}
	if c.maxEntries <= 0 {
		c.maxEntries = DefaultCacheEntries
	}
	if c.timeout <= 0 {
		c.timeout = DefaultCacheTimeout
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// Lookup answers from the cache when it holds an answer younger than
// MaxStaleness, and otherwise asks the source (sharing the call with
// concurrent lookups of the same key). Errors are the source's, or wrap
// ErrUnavailable and ctx.Err() when ctx ends before the answer. The
// returned Rights are the caller's to keep.
func (c *Cached) Lookup(ctx context.Context, tenant, subject string) (Live, error) {
	if c.maxStale == 0 {
		return c.src.Lookup(ctx, tenant, subject)
	}
	key := cacheKey{tenant, subject}
	c.mu.Lock()
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*cacheEntry)
		if c.now().Before(e.expires) {
			l := e.live
			c.mu.Unlock()
			return l.clone(), nil
		}
		c.remove(el)
	}
	epoch := c.epoch
	c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return Live{}, fmt.Errorf("%w: lookup abandoned: %w", ErrUnavailable, err)
	}

	// The epoch in the key keeps lookups after an invalidation from
	// joining a call that started before it.
	flightKey := strconv.FormatUint(epoch, 10) + ":" + strconv.Itoa(len(tenant)) + ":" + tenant + subject
	ch := c.group.DoChan(flightKey, func() (any, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		asked := c.now()
		l, err := c.src.Lookup(fctx, tenant, subject)
		if err != nil {
			return Live{}, err
		}
		c.store(key, l.clone(), asked.Add(c.maxStale), epoch)
		return l, nil
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return Live{}, r.Err
		}
		return r.Val.(Live).clone(), nil
	case <-ctx.Done():
		return Live{}, fmt.Errorf("%w: lookup abandoned: %w", ErrUnavailable, ctx.Err())
	}
}

// store records an answer unless an invalidation happened since the
// source was asked.
func (c *Cached) store(key cacheKey, l Live, expires time.Time, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	// Entries are in the order they were stored, which is close to the
	// order they expire in: drop expired ones first, then the oldest.
	now := c.now()
	for el := c.order.Front(); el != nil && !now.Before(el.Value.(*cacheEntry).expires); el = c.order.Front() {
		c.remove(el)
	}
	for c.order.Len() >= c.maxEntries {
		c.remove(c.order.Front())
	}
	c.entries[key] = c.order.PushBack(&cacheEntry{key: key, live: l, expires: expires})
}

// remove drops el; c.mu is held.
func (c *Cached) remove(el *list.Element) {
	c.order.Remove(el)
	delete(c.entries, el.Value.(*cacheEntry).key)
}

// Invalidate forgets the answer for subject in tenant: the next lookup
// asks the source.
func (c *Cached) Invalidate(tenant, subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if el, ok := c.entries[cacheKey{tenant, subject}]; ok {
		c.remove(el)
	}
}

// InvalidateAll forgets every answer: the next lookup of any subject
// asks the source.
func (c *Cached) InvalidateAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	clear(c.entries)
	c.order.Init()
}

// Len returns the number of answers held, expired ones included until
// they are looked up or pushed out.
func (c *Cached) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}
