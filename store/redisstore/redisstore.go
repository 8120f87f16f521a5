// Package redisstore is the Redis store.Store, for a fleet of mcpgate
// replicas sharing one Redis (standalone, Sentinel or Cluster through
// go-redis's UniversalClient).
//
// # The Redis must not evict
//
// Audit records, tokens and (in later issues) the replay window and pending
// confirmations must never be evicted: an evicted replay window would let a
// replay through. Configure the Redis with
//
//	maxmemory-policy noeviction
//
// (and size it, or let writes fail when it is full, which fails closed).
// Open reads CONFIG GET maxmemory-policy and refuses any other policy,
// naming it, unless Options.AllowEviction is set; set AllowEviction also
// when a managed Redis disables CONFIG and its policy is known to be
// noeviction. Persistence (AOF or RDB) is the Redis operator's choice; the
// store does not check it.
//
// # Keys
//
// Every key starts with Options.Prefix (default "mcpgate:"):
//
//	schema                    string "1"
//	token:h:<sha256 hex>      hash: the token's fields (codec.TokenFields)
//	token:id:<id>             string: the sha256 hex of the token's secret
//	token:all                 zset: id scored by created_at (µs)
//	token:tenant:<tenant>     zset: id scored by created_at (µs)
//	token:creator:<creator>   zset: id scored by created_at (µs)
//	session:<session id>      hash: connection, tenant, subject; PEXPIRE ttl
//	task:<n>:<upstream>:<id>  hash: connection, tenant, subject, tool; PEXPIRE ttl (tasks.go)
//	audit:rec                 hash: audit id → record (JSON)
//	audit:all                 zset: audit id scored by time (µs)
//	audit:tenant:<tenant>     zset: audit id scored by time (µs)
//
// Tokens are keyed by hash so that authentication (TokenByHash) is one
// HGETALL. Scores are microseconds since the Unix epoch, exact in a
// float64 until the year 2255; ties are ordered by member, as bbolt orders
// equal times by id.
//
// # Atomicity
//
// PutToken, RevokeToken and BindSession are Lua scripts (check and write in
// one step: exactly one of several concurrent PutToken with one id wins);
// AppendAudit and each PruneAudit batch are MULTI/EXEC transactions. Every
// key a script touches is passed in KEYS. On Redis Cluster, make all keys
// hash to one slot with a hash-tagged prefix such as "{mcpgate}:".
package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

// DefaultPrefix is the default key prefix.
const DefaultPrefix = "mcpgate:"

// SchemaVersion is the layout version stored under <prefix>schema. Open
// refuses a Redis holding another version under the same prefix.
const SchemaVersion = "1"

// pruneBatch is the number of audit records one PruneAudit transaction
// removes.
const pruneBatch = 500

// Options configure New and Open.
type Options struct {
	// Prefix starts every key. Default DefaultPrefix.
	Prefix string
	// AllowEviction skips the maxmemory-policy check. Only for a Redis
	// whose policy is known to be noeviction but that refuses CONFIG, or
	// for throwaway set-ups: an evicting Redis can lose audit records and
	// let replays through.
	AllowEviction bool
}

// Connection defaults of Open (see there).
const (
	DefaultMaxRetries  = 1
	DefaultDialTimeout = time.Second
)

// Store is the Redis backend.
type Store struct {
	rdb       redis.UniversalClient
	owned     bool
	p         string
	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open connects to the Redis at url (redis://, rediss:// or unix://, see
// redis.ParseURL), checks it (see New) and owns the client: Close closes it.
//
// The store is on the request path, where a Redis that is down must give
// a quick 503 rather than a slow one: unless the URL sets them
// (max_retries, dial_timeout), a command is retried once
// (DefaultMaxRetries) and a connection attempt waits at most
// DefaultDialTimeout; go-redis's own defaults (3 retries with backoff, 5 s)
// held each request for about a second.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("open redis store: %w", err)
	}
	if !strings.Contains(url, "max_retries=") {
		o.MaxRetries = DefaultMaxRetries
	}
	if !strings.Contains(url, "dial_timeout=") {
		o.DialTimeout = DefaultDialTimeout
	}
	rdb := redis.NewClient(o)
	s, err := New(ctx, rdb, opts)
	if err != nil {
		_ = rdb.Close()
		return nil, err
	}
	s.owned = true
	return s, nil
}

// New uses rdb, which the caller keeps owning (Close does not close it).
// It pings the Redis, checks its maxmemory-policy (see the package doc) and
// its schema version.
func New(ctx context.Context, rdb redis.UniversalClient, opts Options) (*Store, error) {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		return nil, fmt.Errorf("open redis store: ping: %w", err)
	}
	if !opts.AllowEviction {
		if err := checkEviction(ctx, rdb); err != nil {
			return nil, fmt.Errorf("open redis store: %w", err)
		}
	}
	s := &Store{rdb: rdb, p: opts.Prefix}
	if err := s.checkSchema(ctx); err != nil {
		return nil, fmt.Errorf("open redis store: %w", err)
	}
	return s, nil
}

// ErrEvictingRedis is returned (wrapped, naming the policy) by Open and New
// when the Redis may evict keys.
var ErrEvictingRedis = errors.New("redis maxmemory-policy may evict mcpgate state; set it to noeviction")

func checkEviction(ctx context.Context, rdb redis.UniversalClient) error {
	m, err := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return fmt.Errorf("read maxmemory-policy (CONFIG GET; if CONFIG is disabled and the policy is noeviction, set AllowEviction): %w", err)
	}
	policy, ok := m["maxmemory-policy"]
	if !ok {
		return errors.New("read maxmemory-policy: not in CONFIG GET's answer")
	}
	if policy != "noeviction" {
		return fmt.Errorf("%w (it is %q)", ErrEvictingRedis, policy)
	}
	return nil
}

func (s *Store) checkSchema(ctx context.Context) error {
	k := s.p + "schema"
	if err := s.rdb.SetNX(ctx, k, SchemaVersion, 0).Err(); err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	v, err := s.rdb.Get(ctx, k).Result()
	if err != nil {
		return fmt.Errorf("schema: %w", err)
	}
	if v != SchemaVersion {
		return fmt.Errorf("schema version %q under prefix %q, this mcpgate reads %q", v, s.p, SchemaVersion)
	}
	return nil
}

// Prefix is the key prefix in use.
func (s *Store) Prefix() string { return s.p }

// Close closes the client if Open created it. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.owned {
			s.closeErr = s.rdb.Close()
		}
	})
	return s.closeErr
}

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return wrap("ping", s.rdb.Ping(ctx).Err())
}

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

func wrap(op string, err error) error { return store.Wrap(op, err, redis.ErrClosed) }

func score(t time.Time) float64 { return float64(codec.Micros(t)) }

func scoreArg(t time.Time) string { return strconv.FormatInt(codec.Micros(t), 10) }

// --- tokens ---

func (s *Store) kTokenHash(hexHash string) string { return s.p + "token:h:" + hexHash }
func (s *Store) kTokenID(id string) string        { return s.p + "token:id:" + id }
func (s *Store) kTokenAll() string                { return s.p + "token:all" }
func (s *Store) kTokenTenant(t string) string     { return s.p + "token:tenant:" + t }
func (s *Store) kTokenCreator(c string) string    { return s.p + "token:creator:" + c }

// putToken: KEYS id, hash, all, tenant, creator; ARGV hex, id, score,
// field, value, ... Returns 1, or 0 if the id is taken, -1 if the hash is.
var putToken = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], unpack(ARGV, 4))
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[2])
return 1
`)

// revokeToken: KEYS hash; ARGV revoked_us. Returns 0 if there is no token.
var revokeToken = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], '` + codec.FieldRevoked + `', ARGV[1])
return 1
`)

// PutToken implements store.TokenStore.
func (s *Store) PutToken(ctx context.Context, t store.Token) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	h := hex.EncodeToString(t.Hash[:])
	fields := codec.TokenFields(t)
	args := make([]any, 0, 3+2*len(fields))
	args = append(args, h, t.ID, scoreArg(t.CreatedAt))
	for k, v := range fields {
		args = append(args, k, v)
	}
	keys := []string{s.kTokenID(t.ID), s.kTokenHash(h), s.kTokenAll(), s.kTokenTenant(t.Tenant), s.kTokenCreator(t.Creator)}
	n, err := putToken.Run(ctx, s.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return wrap("put token", err)
	case n == 0:
		return fmt.Errorf("token id %q: %w", t.ID, store.ErrExists)
	case n < 0:
		return fmt.Errorf("token hash: %w", store.ErrExists)
	}
	return nil
}

func (s *Store) tokenByHex(ctx context.Context, h string) (store.Token, error) {
	m, err := s.rdb.HGetAll(ctx, s.kTokenHash(h)).Result()
	if err != nil {
		return store.Token{}, err
	}
	if len(m) == 0 {
		return store.Token{}, fmt.Errorf("token: %w", store.ErrNotFound)
	}
	return codec.TokenFromFields(m)
}

// TokenByHash implements store.TokenStore: one HGETALL.
func (s *Store) TokenByHash(ctx context.Context, hash [32]byte) (store.Token, error) {
	if err := s.check(ctx); err != nil {
		return store.Token{}, err
	}
	t, err := s.tokenByHex(ctx, hex.EncodeToString(hash[:]))
	return t, wrap("token by hash", err)
}

func (s *Store) hexOfID(ctx context.Context, id string) (string, error) {
	h, err := s.rdb.Get(ctx, s.kTokenID(id)).Result()
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("token %q: %w", id, store.ErrNotFound)
	}
	return h, err
}

// TokenByID implements store.TokenStore.
func (s *Store) TokenByID(ctx context.Context, id string) (store.Token, error) {
	if err := s.check(ctx); err != nil {
		return store.Token{}, err
	}
	h, err := s.hexOfID(ctx, id)
	if err != nil {
		return store.Token{}, wrap("token by id", err)
	}
	t, err := s.tokenByHex(ctx, h)
	return t, wrap("token by id", err)
}

// ListTokens implements store.TokenStore: the narrowest index (creator,
// else tenant, else all), then two pipelined round trips.
func (s *Store) ListTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	key := s.kTokenAll()
	switch {
	case f.Creator != "":
		key = s.kTokenCreator(f.Creator)
	case f.Tenant != "":
		key = s.kTokenTenant(f.Tenant)
	}
	ids, err := s.rdb.ZRange(ctx, key, 0, -1).Result()
	if err != nil || len(ids) == 0 {
		return nil, wrap("list tokens", err)
	}
	pipe := s.rdb.Pipeline()
	hexes := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		hexes[i] = pipe.Get(ctx, s.kTokenID(id))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap("list tokens", err)
	}
	pipe = s.rdb.Pipeline()
	recs := make([]*redis.MapStringStringCmd, len(ids))
	for i := range ids {
		recs[i] = pipe.HGetAll(ctx, s.kTokenHash(hexes[i].Val()))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap("list tokens", err)
	}
	out := make([]store.Token, 0, len(ids))
	for i, id := range ids {
		if len(recs[i].Val()) == 0 {
			return nil, fmt.Errorf("list tokens: index names token %q that has no record", id)
		}
		t, err := codec.TokenFromFields(recs[i].Val())
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		if f.Match(t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// RevokeToken implements store.TokenStore.
func (s *Store) RevokeToken(ctx context.Context, id string, at time.Time) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if at.IsZero() {
		return fmt.Errorf("%w: revocation time is zero", store.ErrInvalid)
	}
	// The id → hash mapping never changes once written, so reading it
	// outside the script is safe.
	h, err := s.hexOfID(ctx, id)
	if err != nil {
		return wrap("revoke token", err)
	}
	n, err := revokeToken.Run(ctx, s.rdb, []string{s.kTokenHash(h)}, scoreArg(at)).Int()
	switch {
	case err != nil:
		return wrap("revoke token", err)
	case n == 0:
		return fmt.Errorf("revoke token %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// --- sessions ---

func (s *Store) kSession(id string) string { return s.p + "session:" + id }

// bindSession: KEYS session; ARGV connection, tenant, subject, ttl ms.
// Returns 1, or 0 if the session is bound to another principal.
var bindSession = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'connection', 'tenant', 'subject')
if cur[1] then
  if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then return 0 end
else
  redis.call('HSET', KEYS[1], 'connection', ARGV[1], 'tenant', ARGV[2], 'subject', ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// BindSession implements store.SessionStore; Redis expires the key.
func (s *Store) BindSession(ctx context.Context, sessionID string, b store.SessionBinding, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckBinding(sessionID, b, ttl); err != nil {
		return err
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	n, err := bindSession.Run(ctx, s.rdb, []string{s.kSession(sessionID)},
		b.Connection, b.Tenant, b.Subject, strconv.FormatInt(int64(ms), 10)).Int()
	switch {
	case err != nil:
		return wrap("bind session", err)
	case n == 0:
		return fmt.Errorf("session: %w", store.ErrExists)
	}
	return nil
}

// Session implements store.SessionStore.
func (s *Store) Session(ctx context.Context, sessionID string) (store.SessionBinding, error) {
	if err := s.check(ctx); err != nil {
		return store.SessionBinding{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.kSession(sessionID)).Result()
	if err != nil {
		return store.SessionBinding{}, wrap("session", err)
	}
	if len(m) == 0 {
		return store.SessionBinding{}, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	return store.SessionBinding{Connection: m["connection"], Tenant: m["tenant"], Subject: m["subject"]}, nil
}

// UnbindSession implements store.SessionStore.
func (s *Store) UnbindSession(ctx context.Context, sessionID string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return wrap("unbind session", s.rdb.Del(ctx, s.kSession(sessionID)).Err())
}

// --- audit ---

func (s *Store) kAuditRec() string            { return s.p + "audit:rec" }
func (s *Store) kAuditAll() string            { return s.p + "audit:all" }
func (s *Store) kAuditTenant(t string) string { return s.p + "audit:tenant:" + t }

// AppendAudit implements store.AuditStore: one MULTI/EXEC round trip.
func (s *Store) AppendAudit(ctx context.Context, r store.AuditRecord) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	val, err := codec.MarshalAudit(r)
	if err != nil {
		return fmt.Errorf("append audit: %w", err)
	}
	z := redis.Z{Score: score(r.Time), Member: r.ID}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.kAuditRec(), r.ID, val)
		p.ZAdd(ctx, s.kAuditAll(), z)
		if r.Tenant != "" {
			p.ZAdd(ctx, s.kAuditTenant(r.Tenant), z)
		}
		return nil
	})
	return wrap("append audit", err)
}

// QueryAudit implements store.AuditStore: ZREVRANGEBYSCORE then HMGET.
func (s *Store) QueryAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	key := s.kAuditAll()
	if q.Tenant != "" {
		key = s.kAuditTenant(q.Tenant)
	}
	rng := &redis.ZRangeBy{Min: "-inf", Max: "+inf", Count: int64(q.EffectiveLimit())}
	if !q.Since.IsZero() {
		rng.Min = scoreArg(q.Since)
	}
	if !q.Until.IsZero() {
		rng.Max = "(" + scoreArg(q.Until)
	}
	ids, err := s.rdb.ZRevRangeByScore(ctx, key, rng).Result()
	if err != nil || len(ids) == 0 {
		return nil, wrap("query audit", err)
	}
	vals, err := s.rdb.HMGet(ctx, s.kAuditRec(), ids...).Result()
	if err != nil {
		return nil, wrap("query audit", err)
	}
	out := make([]store.AuditRecord, 0, len(ids))
	for _, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // pruned between the two reads
		}
		r, err := codec.UnmarshalAudit([]byte(str))
		if err != nil {
			return nil, fmt.Errorf("query audit: %w", err)
		}
		out = append(out, r)
	}
	return out, nil
}

// PruneAudit implements store.AuditStore, pruneBatch records per
// MULTI/EXEC. The count is what this call removed, also when several
// replicas prune at once.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	total := 0
	rng := &redis.ZRangeBy{Min: "-inf", Max: "(" + scoreArg(before), Count: pruneBatch}
	for {
		ids, err := s.rdb.ZRangeByScore(ctx, s.kAuditAll(), rng).Result()
		if err != nil {
			return total, wrap("prune audit", err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		vals, err := s.rdb.HMGet(ctx, s.kAuditRec(), ids...).Result()
		if err != nil {
			return total, wrap("prune audit", err)
		}
		byTenant := map[string][]any{}
		members := make([]any, len(ids))
		for i, id := range ids {
			members[i] = id
			if str, ok := vals[i].(string); ok {
				if r, err := codec.UnmarshalAudit([]byte(str)); err == nil && r.Tenant != "" {
					byTenant[r.Tenant] = append(byTenant[r.Tenant], id)
				}
			}
		}
		var removed *redis.IntCmd
		_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			removed = p.ZRem(ctx, s.kAuditAll(), members...)
			p.HDel(ctx, s.kAuditRec(), ids...)
			for t, m := range byTenant {
				p.ZRem(ctx, s.kAuditTenant(t), m...)
			}
			return nil
		})
		if err != nil {
			return total, wrap("prune audit", err)
		}
		total += int(removed.Val())
		if len(ids) < pruneBatch {
			return total, nil
		}
	}
}
