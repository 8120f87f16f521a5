package redisstore

// The write-safety state (store.ReplayStore, store.ActionStore).
//
// Keys, in addition to those of the package doc (all under the prefix):
//
//	replay:<key>          hash: claim, state, digest, started_us, result; PEXPIRE ttl
//	action:id:<id>        hash: the action's fields (actionFields) and gone_us
//	action:all            zset: id scored by created_at (µs)
//	action:tenant:<t>     zset: id scored by created_at (µs)
//	action:gone           zset: id scored by the end of retention (µs)
//
// Every check-and-write is one Lua script, so of several replicas claiming
// one fingerprint or confirming one action exactly one wins. Replay
// entries expire by Redis key expiry. Actions carry no key ttl: reads treat
// an action past gone_us as absent, and PutAction (or SweepWrites) deletes
// a few actions whose retention ran out, so the backlog shrinks with every
// new action.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

var (
	_ store.ReplayStore = (*Store)(nil)
	_ store.ActionStore = (*Store)(nil)
)

// sweepPerPut is the number of gone actions one PutAction deletes at most.
const sweepPerPut = 8

func (s *Store) kReplay(key string) string     { return s.p + "replay:" + key }
func (s *Store) kAction(id string) string      { return s.p + "action:id:" + id }
func (s *Store) kActionAll() string            { return s.p + "action:all" }
func (s *Store) kActionTenant(t string) string { return s.p + "action:tenant:" + t }
func (s *Store) kActionGone() string           { return s.p + "action:gone" }

func ms(ttl time.Duration) string {
	return strconv.FormatInt(int64((ttl+time.Millisecond-1)/time.Millisecond), 10)
}

// --- replay window ---

// claimReplay: KEYS replay; ARGV claim, state, digest, started_us, result,
// ttl ms. Returns 1 when it stored the entry, else the live entry's claim,
// state, digest, started_us, result.
var claimReplay = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'claim', 'state', 'digest', 'started_us', 'result')
if cur[1] then return cur end
redis.call('HSET', KEYS[1], 'claim', ARGV[1], 'state', ARGV[2], 'digest', ARGV[3], 'started_us', ARGV[4], 'result', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 1
`)

// finishReplay: KEYS replay; ARGV claim, state, result, ttl ms. Returns 1
// when done, 0 if there is no entry, else the entry's {claim, state}.
var finishReplay = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'claim', 'state')
if not cur[1] then return 0 end
if cur[1] ~= ARGV[1] or cur[2] ~= '` + store.ReplayRunning + `' then return cur end
redis.call('HSET', KEYS[1], 'state', ARGV[2], 'result', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
`)

// releaseReplay: KEYS replay; ARGV claim. Returns 1 when deleted, 0 if
// there is no entry, else the entry's {claim, state}.
var releaseReplay = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'claim', 'state')
if not cur[1] then return 0 end
if cur[1] ~= ARGV[1] or cur[2] ~= '` + store.ReplayRunning + `' then return cur end
redis.call('DEL', KEYS[1])
return 1
`)

func str(v any) string { s, _ := v.(string); return s }

// replayFromReply decodes the {claim, state, digest, started_us, result}
// array of claimReplay.
func replayFromReply(vals []any) (store.ReplayEntry, error) {
	if len(vals) != 5 {
		return store.ReplayEntry{}, fmt.Errorf("replay entry: %d fields", len(vals))
	}
	us, err := strconv.ParseInt(str(vals[3]), 10, 64)
	if err != nil {
		return store.ReplayEntry{}, fmt.Errorf("replay entry started_us: %w", err)
	}
	e := store.ReplayEntry{Claim: str(vals[0]), State: str(vals[1]), Digest: str(vals[2]), Started: codec.FromMicros(us)}
	if r := str(vals[4]); r != "" {
		e.Result = []byte(r)
	}
	return e, nil
}

// replayResult interprets the answer of finishReplay and releaseReplay.
func replayResult(op, claim string, v any, err error, absent error) error {
	if err != nil {
		return wrap(op, err)
	}
	switch v := v.(type) {
	case int64:
		if v == 0 {
			return absent
		}
		return nil
	case []any:
		if len(v) == 2 {
			return store.ReplayConflict(op, store.ReplayEntry{Claim: str(v[0]), State: str(v[1])}, claim)
		}
	}
	return fmt.Errorf("%s: unexpected script answer %v", op, v)
}

// ClaimReplay implements store.ReplayStore: one script.
func (s *Store) ClaimReplay(ctx context.Context, key string, e store.ReplayEntry, ttl time.Duration) (store.ReplayEntry, bool, error) {
	if err := s.check(ctx); err != nil {
		return store.ReplayEntry{}, false, err
	}
	if err := store.CheckClaim(key, e, ttl); err != nil {
		return store.ReplayEntry{}, false, err
	}
	if e.Started.IsZero() {
		e.Started = time.Now()
	}
	e.Started = codec.Norm(e.Started)
	if len(e.Result) == 0 {
		e.Result = nil
	}
	v, err := claimReplay.Run(ctx, s.rdb, []string{s.kReplay(key)},
		e.Claim, e.State, e.Digest, scoreArg(e.Started), e.Result, ms(ttl)).Result()
	if err != nil {
		return store.ReplayEntry{}, false, wrap("claim replay", err)
	}
	switch v := v.(type) {
	case int64:
		return e, true, nil
	case []any:
		cur, err := replayFromReply(v)
		if err != nil {
			return store.ReplayEntry{}, false, fmt.Errorf("claim replay: %w", err)
		}
		return cur, false, nil
	}
	return store.ReplayEntry{}, false, fmt.Errorf("claim replay: unexpected script answer %v", v)
}

// FinishReplay implements store.ReplayStore: one script.
func (s *Store) FinishReplay(ctx context.Context, key, claim, state string, result []byte, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckFinish(key, claim, state, ttl); err != nil {
		return err
	}
	v, err := finishReplay.Run(ctx, s.rdb, []string{s.kReplay(key)}, claim, state, result, ms(ttl)).Result()
	return replayResult("finish replay", claim, v, err, fmt.Errorf("finish replay: %w", store.ErrNotFound))
}

// ReleaseReplay implements store.ReplayStore: one script.
func (s *Store) ReleaseReplay(ctx context.Context, key, claim string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckRelease(key, claim); err != nil {
		return err
	}
	v, err := releaseReplay.Run(ctx, s.rdb, []string{s.kReplay(key)}, claim).Result()
	return replayResult("release replay", claim, v, err, nil)
}

// --- pending actions ---

// Action hash fields.
const (
	fGone    = "gone_us"
	fState   = "state"
	fDecBy   = "decided_by"
	fDecAt   = "decided_us"
	fReason  = "reason"
	fTenant  = "tenant"
	fCreated = "created_us"
)

func usOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return scoreArg(t)
}

// actionFields is the flat encoding of an action: strings as they are,
// times in decimal microseconds (empty when unset), gone_us the end of its
// retention.
func actionFields(a store.Action) []any {
	return []any{
		"id", a.ID, fTenant, a.Tenant, "subject", a.Subject, "connection", a.Connection,
		"client", a.Client, "upstream", a.Upstream, "tool", a.Tool, "effect", a.Effect,
		"arguments", a.Arguments, "resume", a.Resume, "args_digest", a.ArgsDigest, "tool_hash", a.ToolHash,
		"summary", a.Summary, "approval", a.Approval,
		fCreated, scoreArg(a.CreatedAt), "expires_us", scoreArg(a.ExpiresAt), fGone, scoreArg(a.GoneAt()),
		fState, a.State, fDecBy, a.DecidedBy, fDecAt, usOrEmpty(a.DecidedAt), fReason, a.Reason,
	}
}

func parseUS(m map[string]string, field string) (time.Time, error) {
	v := m[field]
	if v == "" {
		return time.Time{}, nil
	}
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("action %s: %w", field, err)
	}
	return codec.FromMicros(us), nil
}

func actionFromFields(m map[string]string) (store.Action, error) {
	a := store.Action{
		ID: m["id"], Tenant: m[fTenant], Subject: m["subject"], Connection: m["connection"],
		Client: m["client"], Upstream: m["upstream"], Tool: m["tool"], Effect: m["effect"],
		ArgsDigest: m["args_digest"], ToolHash: m["tool_hash"], Summary: m["summary"], Approval: m["approval"],
		State: m[fState], DecidedBy: m[fDecBy], Reason: m[fReason],
	}
	if v := m["arguments"]; v != "" {
		a.Arguments = []byte(v)
	}
	if v := m["resume"]; v != "" {
		a.Resume = []byte(v)
	}
	var err error
	if a.CreatedAt, err = parseUS(m, fCreated); err != nil {
		return store.Action{}, err
	}
	if a.ExpiresAt, err = parseUS(m, "expires_us"); err != nil {
		return store.Action{}, err
	}
	if a.DecidedAt, err = parseUS(m, fDecAt); err != nil {
		return store.Action{}, err
	}
	return a, nil
}

// pairs turns a flat [field, value, ...] reply into a map.
func pairs(vals []any) map[string]string {
	m := make(map[string]string, len(vals)/2)
	for i := 0; i+1 < len(vals); i += 2 {
		m[str(vals[i])] = str(vals[i+1])
	}
	return m
}

// putAction: KEYS action, all, tenant, gone; ARGV id, created_us, gone_us,
// has tenant ("1"/""), field, value, ... Returns 1, or 0 if the id is taken.
var putAction = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
if ARGV[4] == '1' then redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1]) end
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
return 1
`)

// transitionAction: KEYS action; ARGV from, to, decided_by, decided_us,
// reason, now_us. Returns {1, HGETALL} when moved, {0} if absent or gone,
// {-1, state} if the state is not from.
var transitionAction = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], '` + fState + `', '` + fGone + `')
if not cur[1] or tonumber(cur[2]) <= tonumber(ARGV[6]) then return {0} end
if cur[1] ~= ARGV[1] then return {-1, cur[1]} end
redis.call('HSET', KEYS[1], '` + fState + `', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], '` + fDecBy + `', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], '` + fDecAt + `', ARGV[4]) end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], '` + fReason + `', ARGV[5]) end
return {1, redis.call('HGETALL', KEYS[1])}
`)

// deleteGone: KEYS action, all, tenant, gone; ARGV id, tenant, now_us.
// Deletes the action if its retention ran out by now and its tenant is
// still ARGV[2]; always drops the id from the gone index when the action
// is absent. Returns 1 when it deleted something.
var deleteGone = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], '` + fGone + `', '` + fTenant + `')
if not cur[1] then
  redis.call('ZREM', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
  return 1
end
if tonumber(cur[1]) > tonumber(ARGV[3]) or cur[2] ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if ARGV[2] ~= '' then redis.call('ZREM', KEYS[3], ARGV[1]) end
redis.call('ZREM', KEYS[4], ARGV[1])
return 1
`)

// PutAction implements store.ActionStore: one script, then the deletion of
// at most sweepPerPut actions whose retention ran out.
func (s *Store) PutAction(ctx context.Context, a store.Action) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	hasTenant := ""
	if a.Tenant != "" {
		hasTenant = "1"
	}
	fields := actionFields(a)
	args := make([]any, 0, 4+len(fields))
	args = append(args, a.ID, scoreArg(a.CreatedAt), scoreArg(a.GoneAt()), hasTenant)
	args = append(args, fields...)
	keys := []string{s.kAction(a.ID), s.kActionAll(), s.kActionTenant(a.Tenant), s.kActionGone()}
	n, err := putAction.Run(ctx, s.rdb, keys, args...).Int()
	switch {
	case err != nil:
		return wrap("put action", err)
	case n == 0:
		return fmt.Errorf("action %q: %w", a.ID, store.ErrExists)
	}
	// The action is stored; a failed sweep is left to the next one.
	_, _ = s.sweepActions(ctx, sweepPerPut)
	return nil
}

// SweepWrites deletes the actions whose retention ran out (replay entries
// expire by themselves) and returns how many it deleted. PutAction sweeps
// a few each time; an operator or a test may call this for all.
func (s *Store) SweepWrites(ctx context.Context) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	total := 0
	for {
		n, err := s.sweepActions(ctx, pruneBatch)
		total += n
		if err != nil || n < pruneBatch {
			return total, err
		}
	}
}

// sweepActions deletes up to max actions whose retention ran out; it
// returns how many due ids it handled.
func (s *Store) sweepActions(ctx context.Context, max int64) (int, error) {
	now := scoreArg(time.Now())
	ids, err := s.rdb.ZRangeByScore(ctx, s.kActionGone(), &redis.ZRangeBy{Min: "-inf", Max: now, Count: max}).Result()
	if err != nil || len(ids) == 0 {
		return 0, wrap("sweep actions", err)
	}
	pipe := s.rdb.Pipeline()
	tenants := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		tenants[i] = pipe.HGet(ctx, s.kAction(id), fTenant)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, wrap("sweep actions", err)
	}
	for i, id := range ids {
		t := tenants[i].Val()
		keys := []string{s.kAction(id), s.kActionAll(), s.kActionTenant(t), s.kActionGone()}
		if err := deleteGone.Run(ctx, s.rdb, keys, id, t, now).Err(); err != nil {
			return i, wrap("sweep actions", err)
		}
	}
	return len(ids), nil
}

// Action implements store.ActionStore: one HGETALL.
func (s *Store) Action(ctx context.Context, id string) (store.Action, error) {
	if err := s.check(ctx); err != nil {
		return store.Action{}, err
	}
	m, err := s.rdb.HGetAll(ctx, s.kAction(id)).Result()
	if err != nil {
		return store.Action{}, wrap("action", err)
	}
	a, ok, err := liveAction(m, time.Now())
	switch {
	case err != nil:
		return store.Action{}, fmt.Errorf("action: %w", err)
	case !ok:
		return store.Action{}, fmt.Errorf("action %q: %w", id, store.ErrNotFound)
	}
	return a, nil
}

// liveAction decodes m; ok is false if m is empty or the action's
// retention ran out at now.
func liveAction(m map[string]string, now time.Time) (store.Action, bool, error) {
	if len(m) == 0 {
		return store.Action{}, false, nil
	}
	gone, err := parseUS(m, fGone)
	if err != nil {
		return store.Action{}, false, err
	}
	if !now.Before(gone) {
		return store.Action{}, false, nil
	}
	a, err := actionFromFields(m)
	return a, err == nil, err
}

// TransitionAction implements store.ActionStore: one script.
func (s *Store) TransitionAction(ctx context.Context, id, from string, u store.ActionUpdate) (store.Action, error) {
	if err := s.check(ctx); err != nil {
		return store.Action{}, err
	}
	if err := store.CheckTransition(id, from, u); err != nil {
		return store.Action{}, err
	}
	v, err := transitionAction.Run(ctx, s.rdb, []string{s.kAction(id)},
		from, u.State, u.DecidedBy, usOrEmpty(u.DecidedAt), u.Reason, scoreArg(time.Now())).Slice()
	if err != nil {
		return store.Action{}, wrap("transition action", err)
	}
	code, _ := v[0].(int64)
	switch {
	case code == 0:
		return store.Action{}, fmt.Errorf("transition action %q: %w", id, store.ErrNotFound)
	case code < 0 && len(v) == 2:
		return store.Action{}, store.ActionConflict(id, from, str(v[1]))
	case code == 1 && len(v) == 2:
		flat, _ := v[1].([]any)
		a, err := actionFromFields(pairs(flat))
		if err != nil {
			return store.Action{}, fmt.Errorf("transition action: %w", err)
		}
		return a, nil
	}
	return store.Action{}, fmt.Errorf("transition action: unexpected script answer %v", v)
}

// ListActions implements store.ActionStore: pages of ZREVRANGE on the
// tenant index (or all actions), each followed by pipelined HGETALLs.
func (s *Store) ListActions(ctx context.Context, f store.ActionFilter) ([]store.Action, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	limit := f.EffectiveLimit()
	key := s.kActionAll()
	if f.Tenant != "" {
		key = s.kActionTenant(f.Tenant)
	}
	page := int64(max(2*limit, 64))
	now := time.Now()
	seen := map[string]bool{}
	var out []store.Action
	for start := int64(0); len(out) < limit; start += page {
		ids, err := s.rdb.ZRevRange(ctx, key, start, start+page-1).Result()
		if err != nil {
			return nil, wrap("list actions", err)
		}
		if len(ids) == 0 {
			break
		}
		pipe := s.rdb.Pipeline()
		recs := make([]*redis.MapStringStringCmd, len(ids))
		for i, id := range ids {
			recs[i] = pipe.HGetAll(ctx, s.kAction(id))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, wrap("list actions", err)
		}
		for i, id := range ids {
			if seen[id] || len(out) >= limit {
				continue
			}
			seen[id] = true
			a, ok, err := liveAction(recs[i].Val(), now)
			if err != nil {
				return nil, fmt.Errorf("list actions: %w", err)
			}
			if ok && f.Match(a) {
				out = append(out, a)
			}
		}
		if int64(len(ids)) < page {
			break
		}
	}
	return out, nil
}
