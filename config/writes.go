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
	DefaultReplayWindow = "10m"
	DefaultConfirmTTL   = "10m"
	DefaultWaitInFlight = "2s"
	MaxReplayWindow     = "24h"
	MaxConfirmTTL       = "24h"
	MaxWaitInFlight     = "25s"
)

// WriteSafety configures replay protection of silent writes and two-step
// confirmation of notify, wake, alerting and delete tools (seed 002). The
// policy decides which applies to a call (decision replay / confirm);
// these are the mechanics' settings. Write safety needs the store section
// (pending actions and the replay window live there): without a store,
// calls the policy marks for either are refused.
type WriteSafety struct {
	// ReplayWindow is how long the result of a silent write answers an
	// identical repeat (same connection, tool and canonical arguments)
	// instead of running it again. Default DefaultReplayWindow, at most
	// MaxReplayWindow.
	ReplayWindow string `yaml:"replay_window"`
	// ConfirmTTL is how long a preview's confirm_token stays valid.
	// Default DefaultConfirmTTL, at most MaxConfirmTTL.
	ConfirmTTL string `yaml:"confirm_ttl"`
	// WaitInFlight is how long a repeat arriving while the first call
	// still runs waits for its result before it is answered "in
	// progress". Default DefaultWaitInFlight, at most MaxWaitInFlight
	// (keep it below Envoy's message timeout in ext_proc mode).
	WaitInFlight string `yaml:"wait_in_flight"`
	// SealingKeysFile is the keys file that seals the requestState of
	// approvals asked through input_required (config/sealing.go).
	SealingKeysFile string `yaml:"sealing_keys_file"`
}

// ReplayWindowDuration, ConfirmTTLDuration and WaitInFlightDuration are
// the keys as durations (the default on a value that does not parse).
func (w WriteSafety) ReplayWindowDuration() time.Duration {
	return durationOr(w.ReplayWindow, DefaultReplayWindow)
}

// ConfirmTTLDuration: see ReplayWindowDuration.
func (w WriteSafety) ConfirmTTLDuration() time.Duration {
	return durationOr(w.ConfirmTTL, DefaultConfirmTTL)
}

// WaitInFlightDuration: see ReplayWindowDuration.
func (w WriteSafety) WaitInFlightDuration() time.Duration {
	return durationOr(w.WaitInFlight, DefaultWaitInFlight)
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

// Defaults of the rate_limits section (seed 002, "limits per effect
// class": two concurrent calls per token with a slot kept for writes, the
// third identical failing call stopped).
const (
	DefaultConcurrency       = 2
	DefaultReservedForWrites = 1
	DefaultLoopBrake         = 3
	DefaultToolDeadline      = "60s"
	MaxToolDeadline          = "10m"
)

// RateLimits configures the limits per effect class (issue 6 item 4).
type RateLimits struct {
	// Disabled turns every limit off (not recommended: seed 002 says
	// limits are not optional).
	Disabled bool `yaml:"disabled"`
	// Backend keeps the buckets in memory per instance (RateBackendMemory)
	// or in Redis, shared by the replicas (RateBackendRedis; needs
	// store.redis). Default: redis when store.redis is set, else memory.
	Backend string `yaml:"backend"`
	// Buckets maps a bucket name (the policy's decision names them) to
	// its rate. Each bucket is kept per credential (connection) and per
	// tenant; notify is kept per object too (the tool's notify_object
	// argument) and wake per tenant only. Defaults DefaultBuckets for
	// names not given.
	Buckets map[string]Bucket `yaml:"buckets"`
	// Concurrency is how many calls one credential may have in flight.
	// Default DefaultConcurrency.
	Concurrency int `yaml:"concurrency"`
	// ReservedForWrites of those slots only writes may use. Default
	// DefaultReservedForWrites; less than Concurrency.
	ReservedForWrites int `yaml:"reserved_for_writes"`
	// LoopBrake: the LoopBrake-th identical failing call in a row (same
	// connection, tool and arguments) is answered "stop and ask the user"
	// instead of being run. Default DefaultLoopBrake; at least 2.
	LoopBrake int `yaml:"loop_brake"`
	// ReadsWhenUnavailable lets reads through, unlimited, while the
	// bucket backend (Redis) cannot be reached; writes are refused then
	// whatever this says. Default false: every call is refused (fail
	// closed).
	ReadsWhenUnavailable bool `yaml:"reads_when_unavailable"`
	// DefaultDeadline bounds one tools/call upstream when the tool
	// declares no deadline_ms. Default DefaultToolDeadline.
	DefaultDeadline string `yaml:"default_deadline"`
}

// Bucket is one rate: Rate events per Per, with bursts up to Burst.
type Bucket struct {
	Rate  int    `yaml:"rate"`
	Per   string `yaml:"per"`
	Burst int    `yaml:"burst"`
}

// PerDuration is Per as a duration (one minute on a value that does not
// parse).
func (b Bucket) PerDuration() time.Duration { return durationOr(b.Per, "1m") }

// DefaultBuckets are the rates of the default bucket names.
var DefaultBuckets = map[string]Bucket{
	BucketReads:          {Rate: 600, Per: "1m", Burst: 60},
	BucketExpensiveReads: {Rate: 60, Per: "1m", Burst: 10},
	BucketWrites:         {Rate: 60, Per: "1m", Burst: 10},
	BucketNotify:         {Rate: 10, Per: "1h", Burst: 3},
	BucketWake:           {Rate: 6, Per: "1h", Burst: 2},
}

// DefaultDeadlineDuration is DefaultDeadline as a duration.
func (r RateLimits) DefaultDeadlineDuration() time.Duration {
	return durationOr(r.DefaultDeadline, DefaultToolDeadline)
}

func (c *Config) applyWriteDefaults() {
	w := &c.WriteSafety
	if w.ReplayWindow == "" {
		w.ReplayWindow = DefaultReplayWindow
	}
	if w.ConfirmTTL == "" {
		w.ConfirmTTL = DefaultConfirmTTL
	}
	if w.WaitInFlight == "" {
		w.WaitInFlight = DefaultWaitInFlight
	}
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
	if r.DefaultDeadline == "" {
		r.DefaultDeadline = DefaultToolDeadline
	}
}

func (c *Config) validateWrites(p *problems) {
	w := c.WriteSafety
	checkDurationIn(p, "write_safety.replay_window", w.ReplayWindow, durationRange{positive: true, min: "1s", max: MaxReplayWindow})
	checkDurationIn(p, "write_safety.confirm_ttl", w.ConfirmTTL, durationRange{positive: true, min: "10s", max: MaxConfirmTTL})
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
		checkDurationIn(p, path+".per", b.Per, durationRange{positive: true, min: "1s", max: "24h"})
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
	checkDurationIn(p, "rate_limits.default_deadline", r.DefaultDeadline, durationRange{positive: true, min: "1s", max: MaxToolDeadline})
}
