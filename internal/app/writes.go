package app

import (
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// newWriteSafety builds the write-safety state on the store; nil without
// a store (calls the policy marks for replay protection or confirmation
// are then refused, loudly).
func newWriteSafety(cfg *config.Config, id *identity, log *slog.Logger) *gateway.WriteSafety {
	if id.store == nil {
		log.Warn("write safety is OFF: the configuration has no store section, so silent writes get NO replay protection, and notify, wake, alerting and delete tools are refused (they need a confirmed preview, which needs the store)")
		return nil
	}
	w := cfg.WriteSafety
	return &gateway.WriteSafety{
		Replays: id.store, Actions: id.store, Audit: id.store,
		ReplayWindow: w.ReplayWindow.D(), ConfirmTTL: w.ConfirmTTL.D(), WaitInFlight: w.WaitInFlight.D(),
	}
}

// newLimits builds the limits per effect class; nil when disabled.
func newLimits(cfg *config.Config, id *identity) *gateway.Limits {
	r := cfg.RateLimits
	if r.Disabled {
		return nil
	}
	l := &gateway.Limits{
		Buckets:              make(map[string]ratelimit.Limit, len(r.Buckets)),
		Slots:                ratelimit.NewSlots(r.Concurrency, r.ReservedForWrites),
		LoopBrake:            r.LoopBrake,
		ReadsWhenUnavailable: r.ReadsWhenUnavailable,
		DefaultDeadline:      r.DefaultDeadline.D(),
	}
	for name, b := range r.Buckets {
		l.Buckets[name] = ratelimit.Limit{Rate: b.Rate, Period: b.Per.D(), Burst: b.Burst}
	}
	l.Limiter = ratelimit.NewMemory(100_000)
	if rs, ok := id.store.(interface{ Client() redis.UniversalClient }); ok && r.Backend == config.RateBackendRedis {
		l.Limiter = ratelimit.NewRedis(rs.Client())
	}
	return l
}
