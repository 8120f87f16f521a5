package config

import (
	"regexp"
	"slices"
	"time"
)

// bucketName is the form of a rate bucket name.
var bucketName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,62}$`)

// Defaults and bounds of the write_safety section.
const (
	DefaultReplayWindow = 10 * time.Minute
	DefaultConfirmTTL   = 10 * time.Minute
	DefaultWaitInFlight = 2 * time.Second
	MaxReplayWindow     = 24 * time.Hour
	MaxConfirmTTL       = 24 * time.Hour
	MaxWaitInFlight     = 25 * time.Second
)

// WriteSafety configures replay protection of silent writes and two-step
// confirmation of notify, wake, alerting and delete tools. The
// policy decides which applies to a call (decision replay / confirm);
// these are the mechanics' settings. Write safety needs the store section
// (pending actions and the replay window live there): without a store,
// calls the policy marks for either are refused.
type WriteSafety struct {
	// How long the result of a silent write answers an identical repeat
	// (same connection, tool and RFC 8785 canonical arguments; an
	// `idempotency_key` argument the tool declares names the write instead)
	// with `replayed: true`, running nothing. From `1s` to `24h`.
	ReplayWindow Duration `yaml:"replay_window"`
	// How long a preview's `confirm_token` stays valid. From `10s` to `24h`.
	ConfirmTTL Duration `yaml:"confirm_ttl"`
	// How long a repeat arriving while the first call still runs waits for
	// its result before it is answered `in_progress`. At most `25s`; keep it
	// below Envoy's message timeout in ext_proc mode.
	WaitInFlight Duration `yaml:"wait_in_flight"`
	// The AES-256-GCM keys (a JSON set of `oct` JWKs, `mcpgate sealing-keys
	// generate`) that seal the `requestState` of approvals asked through
	// `input_required` (a 2026-07-28 client that declares form elicitation
	// approves in the client without a `confirm_token`). Share the file
	// between replicas; its first key seals, every key opens; rotate with
	// `mcpgate sealing-keys rotate --stage`, `promote`, then `remove` the
	// old key after `confirm_ttl`; SIGHUP rereads it. Relative to the
	// configuration file.
	//
	// Default: none: a key made for this process only (a warning at start).
	SealingKeysFile string `yaml:"sealing_keys_file"`
}

// Rate bucket names the default policy uses (decision buckets). A
// policy may name others; each must be configured here.
const (
	BucketReads          = "reads"
	BucketExpensiveReads = "expensive_reads"
	BucketWrites         = "writes"
	BucketNotify         = "notify"
	BucketWake           = "wake"
)

// Rate-limit backends (rate_limits.backend).
const (
	RateBackendMemory = "memory" // per instance
	RateBackendRedis  = "redis"  // shared by replicas (store.redis)
)

// Defaults of the rate_limits section: two concurrent calls per token with a slot kept for writes, the
// third identical failing call stopped).
const (
	DefaultConcurrency       = 2
	DefaultReservedForWrites = 1
	DefaultLoopBrake         = 3
	DefaultToolDeadline      = 60 * time.Second
	MaxToolDeadline          = 10 * time.Minute
)

// RateLimits configures the limits per effect class.
type RateLimits struct {
	// Turn every limit off (not recommended).
	Disabled bool `yaml:"disabled"`
	// Where buckets live: `memory` (per instance) or `redis` (in Redis,
	// shared by the replicas; GCRA). Never behind an fsync.
	//
	// Default: `redis` with `store.redis`, else `memory`.
	Backend string `yaml:"backend"`
	// Bucket name → rate. Names the policy uses must be configured; unnamed
	// defaults stay.
	//
	// Default: the five below.
	Buckets map[string]Bucket `yaml:"buckets"`
	// Calls one credential may have in flight.
	Concurrency int `yaml:"concurrency"`
	// Of those slots, how many only writes may use (reads cannot starve a
	// write). Less than `concurrency`.
	ReservedForWrites int `yaml:"reserved_for_writes"`
	// The n-th identical failing call in a row (same connection, tool,
	// arguments) is answered "stop and ask the user" instead of being run.
	// At least 2.
	LoopBrake int `yaml:"loop_brake"`
	// While the bucket backend (Redis) cannot be reached, let reads through
	// unlimited instead of refusing them. Writes and confirmations are
	// refused then either way (their state lives in the same store).
	ReadsWhenUnavailable bool `yaml:"reads_when_unavailable"`
	// How long one `tools/call` may take upstream when its tool declares no
	// `deadline_ms`. From `1s` to `10m`.
	DefaultDeadline Duration `yaml:"default_deadline"`
}

// Bucket is one rate: Rate events per Per, with bursts up to Burst.
type Bucket struct {
	// Events per `per`. At least 1.
	//
	// Default: reads 600, expensive_reads 60, writes 60, notify 10, wake 6.
	Rate int `yaml:"rate"`
	// The period of `rate`. From `1s` to `24h`.
	//
	// Default: `1m` (notify, wake: `1h`).
	Per Duration `yaml:"per"`
	// Calls allowed at once before the rate applies. At least 1.
	//
	// Default: reads 60, expensive_reads 10, writes 10, notify 3, wake 2.
	Burst int `yaml:"burst"`
}

// DefaultBuckets are the rates of the default bucket names.
var DefaultBuckets = map[string]Bucket{
	BucketReads:          {Rate: 600, Per: DurationOf(time.Minute), Burst: 60},
	BucketExpensiveReads: {Rate: 60, Per: DurationOf(time.Minute), Burst: 10},
	BucketWrites:         {Rate: 60, Per: DurationOf(time.Minute), Burst: 10},
	BucketNotify:         {Rate: 10, Per: DurationOf(time.Hour), Burst: 3},
	BucketWake:           {Rate: 6, Per: DurationOf(time.Hour), Burst: 2},
}

func (c *Config) applyWriteDefaults() {
	w := &c.WriteSafety
	w.ReplayWindow.orDefault(DefaultReplayWindow)
	w.ConfirmTTL.orDefault(DefaultConfirmTTL)
	w.WaitInFlight.orDefault(DefaultWaitInFlight)
	r := &c.RateLimits
	if r.Backend == "" {
		r.Backend = RateBackendMemory
		if c.Store != nil && c.Store.Redis != nil {
			r.Backend = RateBackendRedis
		}
	}
	if r.Buckets == nil {
		r.Buckets = map[string]Bucket{}
	}
	for name, b := range DefaultBuckets {
		if _, ok := r.Buckets[name]; !ok {
			r.Buckets[name] = b
		}
	}
	if r.Concurrency == 0 {
		r.Concurrency = DefaultConcurrency
	}
	if r.ReservedForWrites == 0 && r.Concurrency > 1 {
		r.ReservedForWrites = min(DefaultReservedForWrites, r.Concurrency-1)
	}
	if r.LoopBrake == 0 {
		r.LoopBrake = DefaultLoopBrake
	}
	r.DefaultDeadline.orDefault(DefaultToolDeadline)
}

func (c *Config) validateWrites(p *problems) {
	w := c.WriteSafety
	checkDurationIn(p, "write_safety.replay_window", w.ReplayWindow, durationRange{positive: true, min: time.Second, max: MaxReplayWindow})
	checkDurationIn(p, "write_safety.confirm_ttl", w.ConfirmTTL, durationRange{positive: true, min: 10 * time.Second, max: MaxConfirmTTL})
	checkDurationIn(p, "write_safety.wait_in_flight", w.WaitInFlight, durationRange{positive: true, max: MaxWaitInFlight})
	r := c.RateLimits
	switch r.Backend {
	case RateBackendMemory:
	case RateBackendRedis:
		if c.Store == nil || c.Store.Redis == nil {
			p.add("rate_limits.backend", "%q needs store.redis", r.Backend)
		}
	default:
		p.add("rate_limits.backend", "%q must be %q or %q", r.Backend, RateBackendMemory, RateBackendRedis)
	}
	names := make([]string, 0, len(r.Buckets))
	for name := range r.Buckets {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b := r.Buckets[name]
		path := "rate_limits.buckets." + name
		if !bucketName.MatchString(name) {
			p.add(path, "bucket names are snake_case")
		}
		if b.Rate < 1 {
			p.add(path+".rate", "%d must be at least 1", b.Rate)
		}
		if b.Burst < 1 {
			p.add(path+".burst", "%d must be at least 1", b.Burst)
		}
		checkDurationIn(p, path+".per", b.Per, durationRange{positive: true, min: time.Second, max: 24 * time.Hour})
	}
	if r.Concurrency < 1 {
		p.add("rate_limits.concurrency", "%d must be at least 1", r.Concurrency)
	}
	if r.ReservedForWrites < 0 || (r.Concurrency >= 1 && r.ReservedForWrites >= r.Concurrency) {
		p.add("rate_limits.reserved_for_writes", "%d must be from 0 to concurrency-1 (%d)", r.ReservedForWrites, r.Concurrency-1)
	}
	if r.LoopBrake < 2 {
		p.add("rate_limits.loop_brake", "%d must be at least 2", r.LoopBrake)
	}
	checkDurationIn(p, "rate_limits.default_deadline", r.DefaultDeadline, durationRange{positive: true, min: time.Second, max: MaxToolDeadline})
}
