// Package store is mcpgate's state: gateway-issued tokens (hashed), session
// bindings of older MCP revisions, and audit records. Later issues add the
// replay window, pending confirmations and switches to the same interface.
//
// Two backends implement Store and pass the same behavioural suite
// (store/storetest):
//
//   - store/boltstore: one bbolt file, for a single instance (the default;
//     nothing is lost on restart).
//   - store/redisstore: Redis, for a fleet of replicas. The Redis must not
//     evict keys (maxmemory-policy noeviction); Open checks it.
//
// # Conventions
//
//   - Times are stored with microsecond precision and returned in UTC
//     (t.Truncate(time.Microsecond).UTC()). A zero time means "not set"
//     where a field allows it.
//   - Identifiers (token ids, tenants, creators, session ids, audit ids)
//     are non-empty, at most MaxIDLen bytes, and contain no NUL byte.
//   - Errors: ErrNotFound, ErrExists, ErrInvalid (wrapped with the reason),
//     ErrConflict (a replay entry or pending action in another state than
//     the call requires), ErrClosed after Close; a cancelled or expired context gives the
//     context's error; anything else is a backend failure, wrapped with the
//     operation's name.
//   - Every method is safe for concurrent use, also across processes that
//     share the backend (several replicas on one Redis).
package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinel errors; backends wrap them, test with errors.Is.
var (
	// ErrNotFound: no such token, or no live session binding.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: the token id or token hash is taken, or the session is
	// bound to another principal.
	ErrExists = errors.New("store: already exists")
	// ErrInvalid: an argument breaks the documented rules.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrConflict: the record is in another state than the call requires
	// (a replay entry claimed by another request, an action no longer in
	// the expected state); the message names the current state.
	ErrConflict = errors.New("store: conflict")
)

// MaxIDLen is the maximum length, in bytes, of every identifier the store
// keys on.
const MaxIDLen = 1024

// Audit query limits.
const (
	// DefaultAuditLimit applies when AuditQuery.Limit is zero or negative.
	DefaultAuditLimit = 100
	// MaxAuditLimit caps AuditQuery.Limit.
	MaxAuditLimit = 1000
)

// Audit channels.
const (
	// ChannelMCP: calls through the MCP endpoint.
	ChannelMCP = "mcp"
	// ChannelAdmin: changes through the admin API (tokens, switches).
	ChannelAdmin = "admin"
)

// Store is the whole state interface. Both backends implement it.
type Store interface {
	TokenStore
	SessionStore
	TaskStore
	SwitchStore
	AuditStore
	ReplayStore
	ActionStore
	// Ping checks that the backend answers.
	Ping(ctx context.Context) error
	// Close releases the backend; later calls return ErrClosed. Close is
	// idempotent.
	Close() error
}

// TokenStore holds gateway-issued MCP tokens. Only the SHA-256 of a token's
// secret is stored; see HashSecret.
type TokenStore interface {
	// PutToken stores a new token. ErrExists if its id or its hash is
	// already stored; ErrInvalid if Token.Validate fails.
	PutToken(ctx context.Context, t Token) error
	// TokenByHash returns the token whose secret hashes to hash, revoked
	// and expired tokens included (check Token.Active). ErrNotFound.
	TokenByHash(ctx context.Context, hash [32]byte) (Token, error)
	// TokenByID returns the token with that id. ErrNotFound.
	TokenByID(ctx context.Context, id string) (Token, error)
	// ListTokens returns the tokens matching f, revoked and expired ones
	// included, ordered by CreatedAt then ID, oldest first.
	ListTokens(ctx context.Context, f TokenFilter) ([]Token, error)
	// RevokeToken marks the token revoked at at. Revoking a revoked token
	// succeeds and keeps the first revocation time. ErrNotFound.
	RevokeToken(ctx context.Context, id string, at time.Time) error
}

// SessionStore binds session ids of MCP revisions that have sessions
// (Mcp-Session-Id) to the principal that created them.
type SessionStore interface {
	// BindSession binds sessionID to b for ttl (rounded up to whole
	// milliseconds). Binding a session again to an equal binding renews
	// the ttl; binding a live session to a different binding returns
	// ErrExists and changes nothing. ErrInvalid if ttl <= 0 or b.Validate
	// fails.
	BindSession(ctx context.Context, sessionID string, b SessionBinding, ttl time.Duration) error
	// Session returns the live binding of sessionID. ErrNotFound if there
	// is none or it expired.
	Session(ctx context.Context, sessionID string) (SessionBinding, error)
	// UnbindSession deletes the binding; deleting an unknown session
	// succeeds.
	UnbindSession(ctx context.Context, sessionID string) error
}

// AuditStore keeps audit records. Records never hold arguments.
type AuditStore interface {
	// AppendAudit stores r. IDs must be unique (the Auditor makes them);
	// appending the same record twice stores it once. ErrInvalid if
	// r.Validate fails.
	AppendAudit(ctx context.Context, r AuditRecord) error
	// QueryAudit returns the records matching q, newest first (ties by ID,
	// descending).
	QueryAudit(ctx context.Context, q AuditQuery) ([]AuditRecord, error)
	// PruneAudit deletes every record with Time before before and returns
	// how many it deleted.
	PruneAudit(ctx context.Context, before time.Time) (int, error)
}

// Token is a gateway-issued MCP token.
type Token struct {
	// ID is the token's public id; it is also the connection id of the
	// calls made with it.
	ID string
	// Tenant and Creator are fixed at creation.
	Tenant  string
	Creator string
	// Name is a label the creator chose; may be empty.
	Name string
	// Hash is the SHA-256 of the secret (HashSecret). Never zero.
	Hash [32]byte
	// Rights are the token's rights, as granted (capped at the creator's
	// rights at creation). The order is kept; empty is returned as nil.
	Rights []string
	// Toolset is the toolset the token's connection is bound to (config
	// toolsets); "" means the built-in "full" (every tool).
	Toolset string
	// CreatedAt is required. ExpiresAt zero means no expiry; otherwise it
	// must be after CreatedAt.
	CreatedAt time.Time
	ExpiresAt time.Time
	// RevokedAt is set by RevokeToken.
	RevokedAt *time.Time
}

// Active reports whether the token is neither revoked nor expired at now.
func (t Token) Active(now time.Time) bool {
	if t.RevokedAt != nil {
		return false
	}
	return t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt)
}

// Validate checks the rules PutToken enforces.
func (t Token) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"id", t.ID}, {"tenant", t.Tenant}, {"creator", t.Creator}} {
		if err := CheckID(f.name, f.v); err != nil {
			errs = append(errs, err)
		}
	}
	if t.Hash == ([32]byte{}) {
		errs = append(errs, fmt.Errorf("%w: token hash is zero", ErrInvalid))
	}
	if t.CreatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: token created_at is zero", ErrInvalid))
	}
	if !t.ExpiresAt.IsZero() && !t.ExpiresAt.After(t.CreatedAt) {
		errs = append(errs, fmt.Errorf("%w: token expires_at is not after created_at", ErrInvalid))
	}
	return errors.Join(errs...)
}

// HashSecret is the hash stored for a token secret.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// TokenFilter selects tokens; empty fields match everything.
type TokenFilter struct {
	Tenant  string
	Creator string
}

// Match reports whether t passes the filter.
func (f TokenFilter) Match(t Token) bool {
	return (f.Tenant == "" || f.Tenant == t.Tenant) && (f.Creator == "" || f.Creator == t.Creator)
}

// SessionBinding is the principal a session id belongs to. Another
// principal presenting the session id must get 404 and learn nothing.
type SessionBinding struct {
	// Connection is required: the principal's connection id (a gateway
	// token's id, or authn.ConnectionID of an OAuth principal).
	Connection string
	Tenant     string
	Subject    string
}

// Validate checks the rules BindSession enforces.
func (b SessionBinding) Validate() error {
	if err := CheckID("session connection", b.Connection); err != nil {
		return err
	}
	if strings.IndexByte(b.Tenant, 0) >= 0 || strings.IndexByte(b.Subject, 0) >= 0 {
		return fmt.Errorf("%w: session binding contains a NUL byte", ErrInvalid)
	}
	return nil
}

// AuditRecord is one audited action. It never holds arguments or results:
// only who (tenant, connection, client, subject), what (action: a tool
// name or an admin verb), the outcome, the ids the action touched that are
// safe to show (PublicIDs) and the policy decision id.
type AuditRecord struct {
	// ID is unique; required.
	ID string
	// Time is required.
	Time time.Time
	// Channel is required: ChannelMCP or ChannelAdmin.
	Channel string
	// Tenant may be empty for actions outside a tenant (platform admin);
	// such records are found only by queries without a tenant.
	Tenant     string
	Connection string
	Client     string
	Subject    string
	Action     string
	// Outcome is e.g. "ok", "denied", "error", "pending".
	Outcome    string
	DecisionID string
	// PublicIDs maps a name (snake_case) to an id; empty is returned as nil.
	PublicIDs map[string]string
}

// Validate checks the rules AppendAudit enforces.
func (r AuditRecord) Validate() error {
	var errs []error
	if err := CheckID("audit id", r.ID); err != nil {
		errs = append(errs, err)
	}
	if r.Time.IsZero() {
		errs = append(errs, fmt.Errorf("%w: audit time is zero", ErrInvalid))
	}
	if r.Channel == "" {
		errs = append(errs, fmt.Errorf("%w: audit channel is empty", ErrInvalid))
	}
	if len(r.Tenant) > MaxIDLen || strings.IndexByte(r.Tenant, 0) >= 0 {
		errs = append(errs, fmt.Errorf("%w: audit tenant is too long or contains a NUL byte", ErrInvalid))
	}
	return errors.Join(errs...)
}

// AuditQuery selects audit records.
type AuditQuery struct {
	// Tenant restricts to one tenant; empty means every tenant.
	Tenant string
	// Since is inclusive, Until exclusive; zero means unbounded.
	Since, Until time.Time
	// Limit is the maximum number of records: <= 0 means
	// DefaultAuditLimit, above MaxAuditLimit means MaxAuditLimit.
	Limit int
}

// EffectiveLimit is the number of records the query may return.
func (q AuditQuery) EffectiveLimit() int {
	switch {
	case q.Limit <= 0:
		return DefaultAuditLimit
	case q.Limit > MaxAuditLimit:
		return MaxAuditLimit
	}
	return q.Limit
}

// CheckID returns an ErrInvalid error naming what if v is not a valid
// identifier (non-empty, at most MaxIDLen bytes, no NUL byte).
func CheckID(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(v) > MaxIDLen:
		return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, what, MaxIDLen)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

// CheckBinding validates the arguments of SessionStore.BindSession: a
// valid session id, a valid binding and a positive ttl; the error wraps
// ErrInvalid. Backends call it before writing.
func CheckBinding(sessionID string, b SessionBinding, ttl time.Duration) error {
	if err := CheckID("session id", sessionID); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: session ttl %s is not positive", ErrInvalid, ttl)
	}
	return nil
}
