package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix starts the name of every bucket a Redis limiter keeps.
// redis_rate puts "rate:" in front, so a bucket "write:tenant:acme" is the
// Redis key "rate:mcpgate:rl:write:tenant:acme", a string holding the
// bucket's theoretical arrival time that expires when the bucket is full
// again.
const DefaultRedisPrefix = "mcpgate:rl:"

// Redis is a GCRA Limiter shared by every replica using one Redis: each
// Allow is one script (github.com/go-redis/redis_rate), atomic on the
// server and timed by the server's clock, so replicas with skewed clocks
// share one bucket correctly. The Redis should not evict keys (an evicted
// bucket starts full); see store/redisstore.
type Redis struct {
	l *redis_rate.Limiter
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a Redis limiter on c, which the caller keeps owning.
func NewRedis(c redis.UniversalClient) *Redis {
	return &Redis{l: redis_rate.NewLimiter(c)}
}

// Allow implements Limiter: one round trip.
func (r *Redis) Allow(ctx context.Context, key string, l Limit) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := check(key, l); err != nil {
		return Result{}, err
	}
	res, err := r.l.Allow(ctx, DefaultRedisPrefix+key, redis_rate.Limit{Rate: l.Rate, Burst: l.Burst, Period: l.Period})
	if err != nil {
		return Result{}, fmt.Errorf("rate limit %q: %w", key, err)
	}
	if res.Allowed > 0 {
		return Result{Allowed: true, Remaining: max(res.Remaining, 0)}, nil
	}
	// redis_rate computes in float seconds; never answer "retry in 0".
	return Result{RetryAfter: max(res.RetryAfter, time.Millisecond)}, nil
}
