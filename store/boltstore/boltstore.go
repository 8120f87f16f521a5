// Package boltstore is the embedded, durable store.Store: one bbolt file,
// for a single mcpgate instance. Every write is committed with fsync before
// it returns; audit appends from concurrent callers share one commit
// (bbolt's Batch).
//
// # Layout
//
// One bucket per kind of record, plus index buckets whose values are empty:
//
//	meta            "schema" → "1"
//	tokens          id → token (JSON, codec.MarshalToken)
//	token_hash      sha256 (32 bytes) → id
//	token_created   time(8) id → ""                      all tokens, by creation
//	token_tenant    tenant 0x00 time(8) id → ""
//	token_creator   creator 0x00 time(8) id → ""
//	sessions        session id → binding and expiry (JSON)
//	session_expiry  time(8) session id → ""              for the sweeper
//	tasks           upstream 0x00 task id → binding and expiry (JSON; tasks.go)
//	task_expiry     time(8) upstream 0x00 task id → ""   for the sweeper
//	audit           time(8) audit id → record (JSON)
//	audit_tenant    tenant 0x00 time(8) audit id → ""
//	switches        0x00 (global) or tenant → kill switch (JSON; switches.go)
//
// time(8) is codec.SortableTime (microseconds, big-endian, sign bit
// flipped), so byte order is time order; identifiers never contain 0x00
// (store.CheckID), so prefixes cannot collide. Each write touches a record
// and its index entries in one transaction.
//
// Session expiry is checked on every read; a sweeper deletes expired
// bindings every Options.SweepInterval. The write-safety buckets (replay
// window, pending actions) are described in writes.go; the same sweeper
// deletes their expired entries.
//
// TokenByHash answers from an in-memory cache of the tokens it has found,
// which every token write invalidates (tokencache.go), so authenticating a
// gateway token on each call costs no transaction and no decoding while a
// revocation still takes effect on the next call.
package boltstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/internal/codec"
)

// Defaults of Options.
const (
	DefaultLockTimeout   = 5 * time.Second
	DefaultSweepInterval = time.Minute
	DefaultBatchDelay    = 2 * time.Millisecond
)

// SchemaVersion is the layout version written to the meta bucket. Open
// refuses a file with another version.
const SchemaVersion = "1"

// sweepChunk bounds the deletions of one transaction (sweep and prune), so
// a large backlog never holds the write lock for long.
const sweepChunk = 1000

var (
	bMeta          = []byte("meta")
	bTokens        = []byte("tokens")
	bTokenHash     = []byte("token_hash")
	bTokenCreated  = []byte("token_created")
	bTokenTenant   = []byte("token_tenant")
	bTokenCreator  = []byte("token_creator")
	bSessions      = []byte("sessions")
	bSessionExpiry = []byte("session_expiry")
	bAudit         = []byte("audit")
	bAuditTenant   = []byte("audit_tenant")

	allBuckets = [][]byte{bMeta, bTokens, bTokenHash, bTokenCreated, bTokenTenant, bTokenCreator,
		bSessions, bSessionExpiry, bAudit, bAuditTenant, bSwitches}

	keySchema = []byte("schema")
)

// Options configure Open. The zero value is usable.
type Options struct {
	// LockTimeout is how long Open waits for the file lock another process
	// holds. Default DefaultLockTimeout.
	LockTimeout time.Duration
	// SweepInterval is how often expired session bindings are deleted.
	// Default DefaultSweepInterval; negative disables the sweeper (expired
	// bindings are still never returned).
	SweepInterval time.Duration
	// BatchDelay is the longest an AppendAudit waits for others to share
	// its commit. Default DefaultBatchDelay.
	BatchDelay time.Duration
	// Now is the clock for session expiry. Default time.Now.
	Now func() time.Time
}

// Store is the bbolt backend.
type Store struct {
	db     *bolt.DB
	now    func() time.Time
	closed atomic.Bool
	// writers counts the write-safety writes in flight (see Store.write).
	writers atomic.Int64
	// tokens caches TokenByHash answers (tokencache.go). Every write to
	// the tokens or token_hash buckets must invalidate it.
	tokens *tokenCache
	// afterTokenRead, when set (tests only), runs after TokenByHash's read
	// transaction and before its result is cached.
	afterTokenRead func()

	stopSweep context.CancelFunc
	sweepDone chan struct{}
	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store file at path (mode 0600). The directory
// must exist.
func Open(path string, opts Options) (*Store, error) {
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.BatchDelay <= 0 {
		opts.BatchDelay = DefaultBatchDelay
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: opts.LockTimeout})
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("open store %q: file is locked by another process (waited %s)", path, opts.LockTimeout)
		}
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	db.MaxBatchDelay = opts.BatchDelay
	if err := db.Update(initSchema); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %q: %w", path, err)
	}
	s := &Store{db: db, now: opts.Now, sweepDone: make(chan struct{}), tokens: newTokenCache()}
	ctx, cancel := context.WithCancel(context.Background())
	s.stopSweep = cancel
	if opts.SweepInterval > 0 {
		go s.sweepLoop(ctx, opts.SweepInterval)
	} else {
		close(s.sweepDone)
	}
	return s, nil
}

func initSchema(tx *bolt.Tx) error {
	for _, name := range append(allBuckets[:len(allBuckets):len(allBuckets)], writeBuckets...) {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	meta := tx.Bucket(bMeta)
	switch v := meta.Get(keySchema); {
	case v == nil:
		return meta.Put(keySchema, []byte(SchemaVersion))
	case string(v) != SchemaVersion:
		return fmt.Errorf("schema version %q, this mcpgate reads %q", v, SchemaVersion)
	}
	return nil
}

// Close stops the sweeper and closes the file. Idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.stopSweep()
		<-s.sweepDone
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// Path is the file's path.
func (s *Store) Path() string { return s.db.Path() }

func (s *Store) check(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// wrap maps bbolt's closed-database error to store.ErrClosed and names the
// operation.
func wrap(op string, err error) error { return store.Wrap(op, err, bolterrors.ErrDatabaseNotOpen) }

// Ping checks that the file is open and readable.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return wrap("ping", s.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bMeta) == nil {
			return errors.New("meta bucket missing")
		}
		return nil
	}))
}

// indexKey is prefix 0x00 time(8) id, or time(8) id without a prefix.
func indexKey(prefix string, t time.Time, id string) []byte {
	k := make([]byte, 0, len(prefix)+1+8+len(id))
	if prefix != "" {
		k = append(k, prefix...)
		k = append(k, 0)
	}
	k = append(k, codec.SortableTime(t)...)
	return append(k, id...)
}

func indexPrefix(prefix string) []byte {
	if prefix == "" {
		return nil
	}
	return append([]byte(prefix), 0)
}

// --- tokens ---

// PutToken implements store.TokenStore.
func (s *Store) PutToken(ctx context.Context, t store.Token) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := t.Validate(); err != nil {
		return err
	}
	val, err := codec.MarshalToken(t)
	if err != nil {
		return fmt.Errorf("put token: %w", err)
	}
	// No entry for t.Hash can exist (misses are not cached); invalidate
	// keeps the rule that every token write moves the generation.
	defer s.tokens.invalidate(&t.Hash)
	return wrap("put token", s.db.Update(func(tx *bolt.Tx) error {
		tokens, byHash := tx.Bucket(bTokens), tx.Bucket(bTokenHash)
		if tokens.Get([]byte(t.ID)) != nil {
			return fmt.Errorf("token id %q: %w", t.ID, store.ErrExists)
		}
		if byHash.Get(t.Hash[:]) != nil {
			return fmt.Errorf("token hash: %w", store.ErrExists)
		}
		return errors.Join(
			tokens.Put([]byte(t.ID), val),
			byHash.Put(t.Hash[:], []byte(t.ID)),
			tx.Bucket(bTokenCreated).Put(indexKey("", t.CreatedAt, t.ID), nil),
			tx.Bucket(bTokenTenant).Put(indexKey(t.Tenant, t.CreatedAt, t.ID), nil),
			tx.Bucket(bTokenCreator).Put(indexKey(t.Creator, t.CreatedAt, t.ID), nil),
		)
	}))
}

func getToken(tx *bolt.Tx, id []byte) (store.Token, error) {
	v := tx.Bucket(bTokens).Get(id)
	if v == nil {
		return store.Token{}, fmt.Errorf("token %q: %w", id, store.ErrNotFound)
	}
	return codec.UnmarshalToken(v)
}

// TokenByHash implements store.TokenStore. Tokens found are cached in
// memory (tokencache.go explains why the cache is never stale); the token
// returned is the caller's to change.
func (s *Store) TokenByHash(ctx context.Context, hash [32]byte) (store.Token, error) {
	if err := s.check(ctx); err != nil {
		return store.Token{}, err
	}
	t, ok, gen := s.tokens.get(hash)
	if ok {
		return t, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		id := tx.Bucket(bTokenHash).Get(hash[:])
		if id == nil {
			return fmt.Errorf("token hash: %w", store.ErrNotFound)
		}
		var err error
		t, err = getToken(tx, id)
		return err
	})
	if err != nil {
		return store.Token{}, wrap("token by hash", err)
	}
	if s.afterTokenRead != nil {
		s.afterTokenRead()
	}
	s.tokens.add(hash, cloneToken(t), gen)
	return t, nil
}

// TokenByID implements store.TokenStore.
func (s *Store) TokenByID(ctx context.Context, id string) (store.Token, error) {
	if err := s.check(ctx); err != nil {
		return store.Token{}, err
	}
	var t store.Token
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		t, err = getToken(tx, []byte(id))
		return err
	})
	return t, wrap("token by id", err)
}

// ListTokens implements store.TokenStore. It walks the narrowest index:
// creator, else tenant, else all.
func (s *Store) ListTokens(ctx context.Context, f store.TokenFilter) ([]store.Token, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	bucket, prefix := bTokenCreated, ""
	switch {
	case f.Creator != "":
		bucket, prefix = bTokenCreator, f.Creator
	case f.Tenant != "":
		bucket, prefix = bTokenTenant, f.Tenant
	}
	var out []store.Token
	err := s.db.View(func(tx *bolt.Tx) error {
		p := indexPrefix(prefix)
		c := tx.Bucket(bucket).Cursor()
		for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
			if len(k) < len(p)+8 {
				return fmt.Errorf("bad index key %q", k)
			}
			t, err := getToken(tx, k[len(p)+8:])
			if err != nil {
				return err
			}
			if f.Match(t) {
				out = append(out, t)
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap("list tokens", err)
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
	var hash *[32]byte // the revoked token's, once read; nil drops every entry
	defer func() { s.tokens.invalidate(hash) }()
	return wrap("revoke token", s.db.Update(func(tx *bolt.Tx) error {
		t, err := getToken(tx, []byte(id))
		if err != nil {
			return err
		}
		hash = &t.Hash
		if t.RevokedAt != nil {
			return nil
		}
		t.RevokedAt = &at
		val, err := codec.MarshalToken(t)
		if err != nil {
			return err
		}
		return tx.Bucket(bTokens).Put([]byte(id), val)
	}))
}

// --- sessions ---

type session struct {
	Connection string `json:"connection"`
	Tenant     string `json:"tenant,omitempty"`
	Subject    string `json:"subject,omitempty"`
	ExpiresUS  int64  `json:"expires_us"`
}

func (v session) binding() store.SessionBinding {
	return store.SessionBinding{Connection: v.Connection, Tenant: v.Tenant, Subject: v.Subject}
}

func getSession(tx *bolt.Tx, id string) (session, bool, error) {
	raw := tx.Bucket(bSessions).Get([]byte(id))
	if raw == nil {
		return session{}, false, nil
	}
	var v session
	if err := json.Unmarshal(raw, &v); err != nil {
		return session{}, false, fmt.Errorf("decode session: %w", err)
	}
	return v, true, nil
}

// BindSession implements store.SessionStore.
func (s *Store) BindSession(ctx context.Context, sessionID string, b store.SessionBinding, ttl time.Duration) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	if err := store.CheckBinding(sessionID, b, ttl); err != nil {
		return err
	}
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	return wrap("bind session", s.db.Update(func(tx *bolt.Tx) error {
		now := s.now()
		cur, ok, err := getSession(tx, sessionID)
		if err != nil {
			return err
		}
		if ok {
			exp := codec.FromMicros(cur.ExpiresUS)
			if now.Before(exp) && cur.binding() != b {
				return fmt.Errorf("session: %w", store.ErrExists)
			}
			if err := tx.Bucket(bSessionExpiry).Delete(indexKey("", exp, sessionID)); err != nil {
				return err
			}
		}
		exp := now.Add(ttl)
		val, err := json.Marshal(session{Connection: b.Connection, Tenant: b.Tenant, Subject: b.Subject, ExpiresUS: codec.Micros(exp)})
		if err != nil {
			return err
		}
		return errors.Join(
			tx.Bucket(bSessions).Put([]byte(sessionID), val),
			tx.Bucket(bSessionExpiry).Put(indexKey("", exp, sessionID), nil),
		)
	}))
}

// Session implements store.SessionStore.
func (s *Store) Session(ctx context.Context, sessionID string) (store.SessionBinding, error) {
	if err := s.check(ctx); err != nil {
		return store.SessionBinding{}, err
	}
	var b store.SessionBinding
	err := s.db.View(func(tx *bolt.Tx) error {
		cur, ok, err := getSession(tx, sessionID)
		if err != nil {
			return err
		}
		if !ok || !s.now().Before(codec.FromMicros(cur.ExpiresUS)) {
			return fmt.Errorf("session: %w", store.ErrNotFound)
		}
		b = cur.binding()
		return nil
	})
	return b, wrap("session", err)
}

// UnbindSession implements store.SessionStore.
func (s *Store) UnbindSession(ctx context.Context, sessionID string) error {
	if err := s.check(ctx); err != nil {
		return err
	}
	return wrap("unbind session", s.db.Update(func(tx *bolt.Tx) error {
		cur, ok, err := getSession(tx, sessionID)
		if err != nil || !ok {
			return err
		}
		return errors.Join(
			tx.Bucket(bSessions).Delete([]byte(sessionID)),
			tx.Bucket(bSessionExpiry).Delete(indexKey("", codec.FromMicros(cur.ExpiresUS), sessionID)),
		)
	}))
}

// SweepSessions deletes the session bindings that expired by now and
// returns how many. The sweeper calls it; tests may too.
func (s *Store) SweepSessions(ctx context.Context) (int, error) {
	return s.sweep(ctx, "sweep sessions", func(tx *bolt.Tx, limit []byte) (int, error) {
		return sweepIndexed(tx.Bucket(bSessions), tx.Bucket(bSessionExpiry), limit)
	})
}

// sweep runs each step in write transactions of at most sweepChunk
// deletions until a step finds fewer than that due at the time sweep
// began, and returns how many entries the steps deleted in all.
func (s *Store) sweep(ctx context.Context, op string, steps ...func(tx *bolt.Tx, limit []byte) (int, error)) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	limit := codec.SortableTime(s.now())
	total := 0
	for _, step := range steps {
		for {
			n := 0
			err := s.db.Update(func(tx *bolt.Tx) error {
				var err error
				n, err = step(tx, limit)
				return err
			})
			total += n
			if err != nil {
				return total, wrap(op, err)
			}
			if n < sweepChunk {
				break
			}
			if err := s.check(ctx); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// dueKeys collects (then the caller deletes: deleting under a moving cursor
// can skip keys) up to sweepChunk keys of a time(8)-prefixed index whose
// time is at or before limit.
func dueKeys(idx *bolt.Bucket, limit []byte) [][]byte {
	var keys [][]byte
	c := idx.Cursor()
	for k, _ := c.First(); k != nil && len(keys) < sweepChunk; k, _ = c.Next() {
		if bytes.Compare(k[:8], limit) > 0 {
			break
		}
		keys = append(keys, bytes.Clone(k))
	}
	return keys
}

// sweepIndexed deletes the due entries of an expiry index (keys: time(8)
// then the data key) and their entries in data.
func sweepIndexed(data, idx *bolt.Bucket, limit []byte) (int, error) {
	keys := dueKeys(idx, limit)
	for _, k := range keys {
		if err := errors.Join(data.Delete(k[8:]), idx.Delete(k)); err != nil {
			return 0, err
		}
	}
	return len(keys), nil
}

func (s *Store) sweepLoop(ctx context.Context, every time.Duration) {
	defer close(s.sweepDone)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			// Errors are not fatal: reads never return expired bindings,
			// and the next tick tries again.
			_, _ = s.SweepSessions(ctx)
			_, _ = s.SweepTasks(ctx)
			_, _ = s.SweepWrites(ctx)
		}
	}
}

// --- audit ---

// AppendAudit implements store.AuditStore. Concurrent appends share one
// commit; each waits at most Options.BatchDelay before its commit starts.
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
	key := indexKey("", r.Time, r.ID)
	// Batch may run the function more than once: Puts are idempotent.
	return wrap("append audit", s.db.Batch(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bAudit).Put(key, val); err != nil {
			return err
		}
		if r.Tenant == "" {
			return nil
		}
		return tx.Bucket(bAuditTenant).Put(indexKey(r.Tenant, r.Time, r.ID), nil)
	}))
}

// QueryAudit implements store.AuditStore.
func (s *Store) QueryAudit(ctx context.Context, q store.AuditQuery) ([]store.AuditRecord, error) {
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	limit := q.EffectiveLimit()
	bucket := bAudit
	if q.Tenant != "" {
		bucket = bAuditTenant
	}
	p := indexPrefix(q.Tenant)
	var lower []byte
	if !q.Since.IsZero() {
		lower = append(bytes.Clone(p), codec.SortableTime(q.Since)...)
	}
	var out []store.AuditRecord
	err := s.db.View(func(tx *bolt.Tx) error {
		records := tx.Bucket(bAudit)
		c := tx.Bucket(bucket).Cursor()
		var k []byte
		if q.Until.IsZero() {
			// Past the last key with this prefix: seek to prefix+0xff...
			if p == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Seek(append(bytes.Clone(p[:len(p)-1]), 1))
				k = prevOrLast(c, k)
			}
		} else {
			k, _ = c.Seek(append(bytes.Clone(p), codec.SortableTime(q.Until)...))
			k = prevOrLast(c, k)
		}
		for ; k != nil && bytes.HasPrefix(k, p) && len(out) < limit; k, _ = c.Prev() {
			if lower != nil && bytes.Compare(k, lower) < 0 {
				break
			}
			v := records.Get(k[len(p):])
			if v == nil {
				return fmt.Errorf("audit index entry %q has no record", k)
			}
			r, err := codec.UnmarshalAudit(v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, wrap("query audit", err)
	}
	return out, nil
}

// prevOrLast steps back from a Seek result: the key before k, or the last
// key when the seek ran off the end.
func prevOrLast(c *bolt.Cursor, k []byte) []byte {
	if k == nil {
		k, _ = c.Last()
		return k
	}
	k, _ = c.Prev()
	return k
}

// PruneAudit implements store.AuditStore, in transactions of at most
// sweepChunk records.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int, error) {
	if err := s.check(ctx); err != nil {
		return 0, err
	}
	limit := codec.SortableTime(before)
	total := 0
	for {
		n := 0
		err := s.db.Update(func(tx *bolt.Tx) error {
			records, byTenant := tx.Bucket(bAudit), tx.Bucket(bAuditTenant)
			// Collect, then delete (see SweepSessions).
			var keys, tenantKeys [][]byte
			c := records.Cursor()
			for k, v := c.First(); k != nil && len(keys) < sweepChunk; k, v = c.Next() {
				if bytes.Compare(k[:8], limit) >= 0 {
					break
				}
				r, err := codec.UnmarshalAudit(v)
				if err != nil {
					return err
				}
				if r.Tenant != "" {
					tenantKeys = append(tenantKeys, append(indexPrefix(r.Tenant), k...))
				}
				keys = append(keys, bytes.Clone(k))
			}
			for _, k := range tenantKeys {
				if err := byTenant.Delete(k); err != nil {
					return err
				}
			}
			for _, k := range keys {
				if err := records.Delete(k); err != nil {
					return err
				}
			}
			n = len(keys)
			return nil
		})
		total += n
		if err != nil {
			return total, wrap("prune audit", err)
		}
		if n < sweepChunk {
			return total, nil
		}
		if err := s.check(ctx); err != nil {
			return total, err
		}
	}
}
