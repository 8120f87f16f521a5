// Package ratelimit is mcpgate's rate buckets and concurrency caps, per
// effect class: rate buckets per token and tenant for reads, expensive
// reads and writes, notify per object, wake per tenant, and concurrent
// calls per token with a slot kept for writes.
//
// Buckets use the generic cell rate algorithm (GCRA): a bucket of Burst
// events that refills at Rate events per Period. Two Limiter backends give
// the same answers:
//
//   - Memory: per instance, in process; a bounded number of keys.
//   - Redis: shared by every replica on one Redis, through
//     github.com/go-redis/redis_rate (the same algorithm as a Lua script,
//     timed by the Redis server's clock).
//
// Neither touches a disk: a limit check never waits for an fsync.
//
// Keys are the caller's: a bucket is named by what it limits, e.g.
// "write:tenant:acme" or "notify:object:T-42". Calls with one key must use
// one Limit; a key's state is its theoretical arrival time, interpreted with
// the Limit of each call.
//
// Slots caps concurrent calls per key, keeping part of the capacity for
// writes.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is returned (wrapped with the reason) for a Limit that breaks
// Limit.Validate or an empty key.
var ErrInvalid = errors.New("ratelimit: invalid argument")

// Limit is a GCRA bucket: at most Burst events at once, refilled at Rate
// events per Period (one event every Period/Rate).
type Limit struct {
	// Rate is the number of events per Period; >= 1.
	Rate int
	// Period is > 0 and at least Rate nanoseconds.
	Period time.Duration
	// Burst is the bucket's capacity; >= 1.
	Burst int
}

// Validate reports a Limit that cannot be enforced; the error wraps
// ErrInvalid.
func (l Limit) Validate() error {
	switch {
	case l.Rate < 1:
		return fmt.Errorf("%w: rate %d is below 1", ErrInvalid, l.Rate)
	case l.Period <= 0:
		return fmt.Errorf("%w: period %s is not positive", ErrInvalid, l.Period)
	case l.Period < time.Duration(l.Rate):
		return fmt.Errorf("%w: period %s is shorter than %d ns (rate %d)", ErrInvalid, l.Period, l.Rate, l.Rate)
	case l.Burst < 1:
		return fmt.Errorf("%w: burst %d is below 1", ErrInvalid, l.Burst)
	}
	return nil
}

// interval is the time one event adds to the bucket's debt.
func (l Limit) interval() time.Duration { return l.Period / time.Duration(l.Rate) }

// String is e.g. "10/1m0s burst 20".
func (l Limit) String() string { return fmt.Sprintf("%d/%s burst %d", l.Rate, l.Period, l.Burst) }

// Result is the answer to one event.
type Result struct {
	// Allowed reports whether the event may happen now (and was counted).
	Allowed bool
	// Remaining is how many more events the bucket allows right now.
	Remaining int
	// RetryAfter is how long until one event would be allowed; > 0 when
	// !Allowed, 0 when Allowed. Every limit answer tells the client when
	// to retry.
	RetryAfter time.Duration
}

// Limiter takes one event from the bucket key of limit l.
type Limiter interface {
	// Allow counts one event against key if the bucket allows it. A
	// refused event is not counted. An error (ErrInvalid, or the backend's
	// failure) comes with a zero Result: the caller decides whether it
	// fails closed.
	Allow(ctx context.Context, key string, l Limit) (Result, error)
}

func check(key string, l Limit) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", ErrInvalid)
	}
	return l.Validate()
}
