package boltstore

// The write-safety state (store.ReplayStore, store.ActionStore).
//
// Layout, in addition to the buckets of the package doc:
//
//	replay          key → uvarint(len(header)) header(JSON) result(raw bytes)
//	replay_expiry   time(8) key → ""                    for the sweeper
//	actions         id → action (JSON)
//	action_created  time(8) id → ""                     all actions, by creation
//	action_tenant   tenant 0x00 time(8) id → ""
//	action_gone     time(8) id → ""                     end of retention, for the sweeper
//
// A replay result is kept as raw bytes after its header, so a result of a
// few hundred KiB is neither re-encoded nor base64-inflated.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

var (
	bReplay        = []byte("replay")
	bReplayExpiry  = []byte("replay_expiry")
	bActions       = []byte("actions")
	bActionCreated = []byte("action_created")
	bActionTenant  = []byte("action_tenant")
	bActionGone    = []byte("action_gone")

	// writeBuckets are created by initSchema with allBuckets.
	writeBuckets = [][]byte{bReplay, bReplayExpiry, bActions, bActionCreated, bActionTenant, bActionGone}
)

var (
	_ store.ReplayStore = (*Store)(nil)
	_ store.ActionStore = (*Store)(nil)
)

// write runs fn in a write transaction. A lone writer commits its own
// transaction at once; while other writes are in flight, fn joins bbolt's
// Batch so that concurrent claims and confirmations share one fsync (each
// waits at most Options.BatchDelay for others). fn may run more than once
// (Batch retries the others of a batch when one fails), so it sets every
// output it has on each run and keeps no state outside tx.
func (s *Store) write(fn func(tx *bolt.Tx) error) error {
	defer s.writers.Add(-1)
	if s.writers.Add(1) > 1 {
		return s.db.Batch(fn)
	}
	return s.db.Update(fn)
}

// roundTTL rounds ttl up to whole milliseconds, as Redis keeps it.
func roundTTL(ttl time.Duration) time.Duration {
	return (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
}

// --- replay window ---

type replayHeader struct {
	Claim     string `json:"claim"`
	State     string `json:"state"`
	Digest    string `json:"digest,omitempty"`
	StartedUS int64  `json:"started_us"`
	ExpiresUS int64  `json:"expires_us"`
}

type replayRec struct {
	replayHeader
	result []byte
}

func (r replayRec) entry() store.ReplayEntry {
	e := store.ReplayEntry{Claim: r.Claim, State: r.State, Digest: r.Digest, Started: codec.FromMicros(r.StartedUS)}
	if len(r.result) > 0 {
		e.Result = bytes.Clone(r.result)
	}
	return e
}

func (r replayRec) expires() time.Time { return codec.FromMicros(r.ExpiresUS) }

func encodeReplay(r replayRec) ([]byte, error) {
	h, err := json.Marshal(r.replayHeader)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, binary.MaxVarintLen64+len(h)+len(r.result))
	out = binary.AppendUvarint(out, uint64(len(h)))
	out = append(out, h...)
	return append(out, r.result...), nil
}

// decodeReplay decodes v; the result aliases v (valid only inside the
// transaction).
func decodeReplay(v []byte) (replayRec, error) {
	n, k := binary.Uvarint(v)
	if k <= 0 || uint64(len(v)-k) < n {
		return replayRec{}, errors.New("decode replay entry: bad header length")
	}
	var r replayRec
	if err := json.Unmarshal(v[k:k+int(n)], &r.replayHeader); err != nil {
		return replayRec{}, fmt.Errorf("decode replay entry: %w", err)
	}
	r.result = v[k+int(n):]
	return r, nil
}

// liveReplay returns the entry under key if it has not expired at now.
func liveReplay(tx *bolt.Tx, key string, now time.Time) (replayRec, bool, error) {
	v := tx.Bucket(bReplay).Get([]byte(key))
	if v == nil {
		return replayRec{}, false, nil
	}
	r, err := decodeReplay(v)
	if err != nil {
		return replayRec{}, false, err
	}
	return r, now.Before(r.expires()), nil
}

// putReplay writes r under key and moves its expiry index entry from old
// (zero: none) to r's expiry.
func putReplay(tx *bolt.Tx, key string, r replayRec, old time.Time) error {
	val, err := encodeReplay(r)
	if err != nil {
		return err
	}
	idx := tx.Bucket(bReplayExpiry)
	if !old.IsZero() {
		if err := idx.Delete(indexKey("", old, key)); err != nil {
			return err
		}
	}
	return errors.Join(
		tx.Bucket(bReplay).Put([]byte(key), val),
		idx.Put(indexKey("", r.expires(), key), nil),
	)
}

// ClaimReplay implements store.ReplayStore: a read transaction answers a
// live entry; otherwise one write transaction checks and claims.
func (s *Store) ClaimReplay(ctx context.Context, key string, e store.ReplayEntry, ttl time.Duration) (store.ReplayEntry, bool, error) {
	if err := s.check(ctx); err != nil {
		return store.ReplayEntry{}, false, err
	}
	if err := store.CheckClaim(key, e, ttl); err != nil {
		return store.ReplayEntry{}, false, err
	}
	var (
		out store.ReplayEntry
		won bool
	)
	// A repeat finds a live entry: answer it from a read transaction,
	// without a commit. The write transaction below checks again.
	err := s.db.View(func(tx *bolt.Tx) error {
		cur, live, err := liveReplay(tx, key, s.now())
		if live {
			out = cur.entry()
		}
		won = !live
		return err
	})
	if err != nil {
		return store.ReplayEntry{}, false, wrap("claim replay", err)
	}
	if !won {
		return out, false, nil
	}
	err = s.write(func(tx *bolt.Tx) error {
		now := s.now()
		cur, live, err := liveReplay(tx, key, now)
		if err != nil {
			return err
		}
		if live {
			out, won = cur.entry(), false
			return nil
		}
		var old time.Time
		if cur.ExpiresUS != 0 {
			old = cur.expires()
		}
		started := e.Started
		if started.IsZero() {
			started = now
		}
		r := replayRec{replayHeader: replayHeader{
			Claim: e.Claim, State: e.State, Digest: e.Digest,
			StartedUS: codec.Micros(started), ExpiresUS: codec.Micros(now.Add(roundTTL(ttl))),
		}, result: e.Result}
		if err := putReplay(tx, key, r, old); err != nil {
			return err
		}
		out, won = r.entry(), true
		return nil
	})
	if err != nil {
		return store.ReplayEntry{}, false, wrap("claim replay", err)
	}
	return out, won, nil
}

// FinishReplay implements store.ReplayStore in one transaction.
func (s *Store) FinishReplay(ctx context.Context, key, claim, state string, result []byte, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckFinish(key, claim, state, ttl); err != nil {
		return err
	}
	return wrap("finish replay", s.write(func(tx *bolt.Tx) error {
		now := s.now()
		cur, live, err := liveReplay(tx, key, now)
		switch {
		case err != nil:
			return err
		case !live:
			return fmt.Errorf("finish replay: %w", store.ErrNotFound)
		case cur.Claim != claim || cur.State != store.ReplayRunning:
			return store.ReplayConflict("finish replay", cur.entry(), claim)
		}
		old := cur.expires()
		cur.State = state
		cur.result = result
		cur.ExpiresUS = codec.Micros(now.Add(roundTTL(ttl)))
		return putReplay(tx, key, cur, old)
	}))
}

// ReleaseReplay implements store.ReplayStore in one transaction.
func (s *Store) ReleaseReplay(ctx context.Context, key, claim string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckRelease(key, claim); err != nil {
		return err
	}
	return wrap("release replay", s.write(func(tx *bolt.Tx) error {
		cur, live, err := liveReplay(tx, key, s.now())
		switch {
		case err != nil || !live:
			return err
		case cur.Claim != claim || cur.State != store.ReplayRunning:
			return store.ReplayConflict("release replay", cur.entry(), claim)
		}
		return errors.Join(
			tx.Bucket(bReplay).Delete([]byte(key)),
			tx.Bucket(bReplayExpiry).Delete(indexKey("", cur.expires(), key)),
		)
	}))
}

// --- pending actions ---

type actionRec struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant,omitempty"`
	Subject    string `json:"subject,omitempty"`
	Connection string `json:"connection"`
	Client     string `json:"client,omitempty"`
	Upstream   string `json:"upstream,omitempty"`
	Tool       string `json:"tool"`
	Effect     string `json:"effect,omitempty"`
	Arguments  []byte `json:"arguments,omitempty"`
	Resume     []byte `json:"resume,omitempty"`
	ArgsDigest string `json:"args_digest,omitempty"`
	ToolHash   string `json:"tool_hash,omitempty"`
	Summary    string `json:"summary,omitempty"`
	Approval   string `json:"approval"`
	CreatedUS  int64  `json:"created_us"`
	ExpiresUS  int64  `json:"expires_us"`
	State      string `json:"state"`
	DecidedBy  string `json:"decided_by,omitempty"`
	DecidedUS  int64  `json:"decided_us,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

func toActionRec(a store.Action) actionRec {
	r := actionRec{
		ID: a.ID, Tenant: a.Tenant, Subject: a.Subject, Connection: a.Connection, Client: a.Client,
		Upstream: a.Upstream, Tool: a.Tool, Effect: a.Effect, Arguments: a.Arguments, Resume: a.Resume,
		ArgsDigest: a.ArgsDigest, ToolHash: a.ToolHash, Summary: a.Summary, Approval: a.Approval,
		CreatedUS: codec.Micros(a.CreatedAt), ExpiresUS: codec.Micros(a.ExpiresAt),
		State: a.State, DecidedBy: a.DecidedBy, Reason: a.Reason,
	}
	if !a.DecidedAt.IsZero() {
		r.DecidedUS = codec.Micros(a.DecidedAt)
	}
	return r
}

func (r actionRec) action() store.Action {
	a := store.Action{
		ID: r.ID, Tenant: r.Tenant, Subject: r.Subject, Connection: r.Connection, Client: r.Client,
		Upstream: r.Upstream, Tool: r.Tool, Effect: r.Effect, Arguments: r.Arguments, Resume: r.Resume,
		ArgsDigest: r.ArgsDigest, ToolHash: r.ToolHash, Summary: r.Summary, Approval: r.Approval,
		CreatedAt: codec.FromMicros(r.CreatedUS), ExpiresAt: codec.FromMicros(r.ExpiresUS),
		State: r.State, DecidedBy: r.DecidedBy, Reason: r.Reason,
	}
	if len(a.Arguments) == 0 {
		a.Arguments = nil
	}
	if len(a.Resume) == 0 {
		a.Resume = nil
	}
	if r.DecidedUS != 0 {
		a.DecidedAt = codec.FromMicros(r.DecidedUS)
	}
	return a
}

func getAction(tx *bolt.Tx, id []byte) (store.Action, bool, error) {
	v := tx.Bucket(bActions).Get(id)
	if v == nil {
		return store.Action{}, false, nil
	}
	var r actionRec
	if err := json.Unmarshal(v, &r); err != nil {
		return store.Action{}, false, fmt.Errorf("decode action: %w", err)
	}
	return r.action(), true, nil
}

// liveAction returns the action with that id, ErrNotFound if it is absent
// or its retention ran out at now.
func liveAction(tx *bolt.Tx, id string, now time.Time) (store.Action, error) {
	a, ok, err := getAction(tx, []byte(id))
	switch {
	case err != nil:
		return store.Action{}, err
	case !ok || !now.Before(a.GoneAt()):
		return store.Action{}, fmt.Errorf("action %q: %w", id, store.ErrNotFound)
	}
	return a, nil
}

func putAction(tx *bolt.Tx, a store.Action) error {
	val, err := json.Marshal(toActionRec(a))
	if err != nil {
		return err
	}
	return tx.Bucket(bActions).Put([]byte(a.ID), val)
}

// PutAction implements store.ActionStore.
func (s *Store) PutAction(ctx context.Context, a store.Action) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := a.Validate(); err != nil {
		return err
	}
	return wrap("put action", s.write(func(tx *bolt.Tx) error {
		if tx.Bucket(bActions).Get([]byte(a.ID)) != nil {
			return fmt.Errorf("action %q: %w", a.ID, store.ErrExists)
		}
		errs := []error{
			putAction(tx, a),
			tx.Bucket(bActionCreated).Put(indexKey("", a.CreatedAt, a.ID), nil),
			tx.Bucket(bActionGone).Put(indexKey("", a.GoneAt(), a.ID), nil),
		}
		if a.Tenant != "" {
			errs = append(errs, tx.Bucket(bActionTenant).Put(indexKey(a.Tenant, a.CreatedAt, a.ID), nil))
		}
		return errors.Join(errs...)
	}))
}

// Action implements store.ActionStore.
func (s *Store) Action(ctx context.Context, id string) (store.Action, error) {
	if err := s.check(ctx); err != nil {
		return store.Action{}, err
	}
	var a store.Action
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		a, err = liveAction(tx, id, s.now())
		return err
	})
	return a, wrap("action", err)
}

// TransitionAction implements store.ActionStore in one transaction; bbolt
// serialises write transactions, so exactly one of concurrent transitions
// from one state finds it.
func (s *Store) TransitionAction(ctx context.Context, id, from string, u store.ActionUpdate) (store.Action, error) {
	if err := s.check(ctx); err != nil {
		return store.Action{}, err
	}
	if err := store.CheckTransition(id, from, u); err != nil {
		return store.Action{}, err
	}
	var out store.Action
	err := s.write(func(tx *bolt.Tx) error {
		a, err := liveAction(tx, id, s.now())
		if err != nil {
			return err
		}
		if a.State != from {
			return store.ActionConflict(id, from, a.State)
		}
		out = u.Apply(a)
		out.DecidedAt = codec.Norm(out.DecidedAt)
		return putAction(tx, out)
	})
	if err != nil {
		return store.Action{}, wrap("transition action", err)
	}
	return out, nil
}

// ListActions implements store.ActionStore: it walks the tenant index when
// f names a tenant, else all actions, newest first.
func (s *Store) ListActions(ctx context.Context, f store.ActionFilter) ([]store.Action, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	limit := f.EffectiveLimit()
	bucket := bActionCreated
	if f.Tenant != "" {
		bucket = bActionTenant
	}
	p := indexPrefix(f.Tenant)
	var out []store.Action
	err := s.db.View(func(tx *bolt.Tx) error {
		now := s.now()
		c := tx.Bucket(bucket).Cursor()
		var k []byte
		if p == nil {
			k, _ = c.Last()
		} else {
			// The first key past the prefix is tenant 0x01.
			k, _ = c.Seek(append(bytes.Clone(p[:len(p)-1]), 1))
			k = prevOrLast(c, k)
		}
		for ; k != nil && bytes.HasPrefix(k, p) && len(out) < limit; k, _ = c.Prev() {
			if len(k) < len(p)+8 {
				return fmt.Errorf("bad action index key %q", k)
			}
			a, ok, err := getAction(tx, k[len(p)+8:])
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("action index entry %q has no action", k)
			}
			if now.Before(a.GoneAt()) && f.Match(a) {
				out = append(out, a)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list actions", err)
	}
	return out, nil
}

// --- sweeping ---

// SweepWrites deletes the replay entries that expired by now and the
// actions whose retention ran out, and returns how many records it
// deleted. The sweeper calls it; tests may too.
func (s *Store) SweepWrites(ctx context.Context) (int, error) {
	return s.sweep(ctx, "sweep writes", func(tx *bolt.Tx, limit []byte) (int, error) {
		return sweepIndexed(tx.Bucket(bReplay), tx.Bucket(bReplayExpiry), limit)
	}, sweepActions)
}

func sweepActions(tx *bolt.Tx, limit []byte) (int, error) {
	idx := tx.Bucket(bActionGone)
	keys := dueKeys(idx, limit)
	for _, k := range keys {
		id := k[8:]
		a, ok, err := getAction(tx, id)
		if err != nil {
			return 0, err
		}
		if ok {
			errs := []error{
				tx.Bucket(bActions).Delete(id),
				tx.Bucket(bActionCreated).Delete(indexKey("", a.CreatedAt, a.ID)),
			}
			if a.Tenant != "" {
				errs = append(errs, tx.Bucket(bActionTenant).Delete(indexKey(a.Tenant, a.CreatedAt, a.ID)))
			}
			if err := errors.Join(errs...); err != nil {
				return 0, err
			}
		}
		if err := idx.Delete(k); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}
