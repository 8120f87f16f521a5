package ratelimit

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// DefaultMaxKeys is the key bound of NewMemory when maxKeys <= 0.
const DefaultMaxKeys = 100_000

// Option configures NewMemory.
type Option func(*options)

type options struct {
	now func() time.Time
}

// WithClock sets the clock of a Memory limiter (default time.Now), for
// tests. A Redis limiter uses the Redis server's clock.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

func apply(opts []Option) options {
	o := options{now: time.Now}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// Memory is an in-process GCRA Limiter. It keeps at most maxKeys buckets;
// past that, the least recently used bucket is forgotten (that key starts
// full again), so size maxKeys above the number of keys active within a
// bucket's refill time. Safe for concurrent use.
type Memory struct {
	now     func() time.Time
	maxKeys int

	mu   sync.Mutex
	keys map[string]*list.Element // of *bucket
	lru  *list.List               // front: most recently used
}

type bucket struct {
	key string
	tat time.Time // theoretical arrival time: the bucket is full when tat <= now
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns a Memory limiter keeping at most maxKeys buckets
// (DefaultMaxKeys if maxKeys <= 0).
func NewMemory(maxKeys int, opts ...Option) *Memory {
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	o := apply(opts)
	return &Memory{now: o.now, maxKeys: maxKeys, keys: map[string]*list.Element{}, lru: list.New()}
}

// Allow implements Limiter. GCRA: each event moves the bucket's
// theoretical arrival time (tat) one interval (Period/Rate) later; an event
// is allowed when tat, after the move, is at most Burst intervals ahead of
// now.
func (m *Memory) Allow(ctx context.Context, key string, l Limit) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := check(key, l); err != nil {
		return Result{}, err
	}
	interval := l.interval()
	burst := interval * time.Duration(l.Burst)

	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	el, ok := m.keys[key]
	var b *bucket
	if ok {
		b = el.Value.(*bucket)
		m.lru.MoveToFront(el)
	} else {
		b = &bucket{key: key, tat: now}
	}
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	allowAt := next.Add(-burst)
	if now.Before(allowAt) {
		// Refused: nothing counted. A key seen for the first time cannot
		// be refused (Burst >= 1), so b is stored already.
		return Result{RetryAfter: allowAt.Sub(now)}, nil
	}
	b.tat = next
	if !ok {
		m.keys[key] = m.lru.PushFront(b)
		for m.lru.Len() > m.maxKeys {
			old := m.lru.Back()
			m.lru.Remove(old)
			delete(m.keys, old.Value.(*bucket).key)
		}
	}
	return Result{Allowed: true, Remaining: int(now.Sub(allowAt) / interval)}, nil
}

// Len is the number of buckets kept.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lru.Len()
}
