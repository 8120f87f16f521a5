package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// This file is the state of write safety: the replay window of
// silent writes and the pending actions of two-step confirmation.

// ReplayStore is the replay window of silent writes. The fingerprint is
// connection + tool + SHA-256 of the canonical JSON (RFC 8785) of the
// normalised arguments; a repeat inside the window returns the first result with replayed: true and runs nothing.
// The caller builds the key from the fingerprint; the store treats it as an
// opaque identifier (CheckID rules).
//
// An entry lives from ClaimReplay until its ttl runs out; FinishReplay sets
// a new ttl. Expired entries are never returned (the backends delete them:
// bbolt's sweeper, Redis key expiry).
type ReplayStore interface {
	// ClaimReplay stores e under key for ttl when no live entry exists and
	// returns (e as stored, true). Otherwise it returns the live entry and
	// false, changing nothing. Exactly one of several concurrent claims of
	// one key wins, also across replicas. e.State must be ReplayRunning and
	// e.Claim a valid identifier; a zero e.Started is set to the store's
	// clock. ErrInvalid (CheckClaim) for a bad key, entry or ttl <= 0.
	ClaimReplay(ctx context.Context, key string, e ReplayEntry, ttl time.Duration) (ReplayEntry, bool, error)
	// FinishReplay records the outcome of the running entry that claim
	// owns: state ReplayDone (with the shaped result) or ReplayUnknown (the
	// client went away; result may be nil), and a new ttl from now.
	// ErrNotFound if there is no live entry; ErrConflict if it belongs to
	// another claim or is no longer running (the first outcome stands).
	// ErrInvalid for a bad key, claim, state or ttl <= 0.
	FinishReplay(ctx context.Context, key, claim, state string, result []byte, ttl time.Duration) error
	// ReleaseReplay deletes the running entry that claim owns (the call
	// never reached the upstream, so a repeat may run). No live entry: nil.
	// ErrConflict if the entry belongs to another claim or is finished
	// (a finished outcome is never deleted early).
	ReleaseReplay(ctx context.Context, key, claim string) error
}

// Replay entry states.
const (
	// ReplayRunning: the first call is in flight; a repeat must wait or be
	// told so, never run.
	ReplayRunning = "running"
	// ReplayDone: the first call completed; Result is its shaped result.
	ReplayDone = "done"
	// ReplayUnknown: the first call may or may not have taken effect (the
	// client went away mid-call); a repeat is told so instead of running.
	ReplayUnknown = "unknown"
)

// ReplayEntry is one fingerprint's entry in the replay window.
type ReplayEntry struct {
	// Claim is the random id of the request that claimed the fingerprint.
	Claim string
	// State is ReplayRunning, ReplayDone or ReplayUnknown.
	State string
	// Digest is the hex SHA-256 of the canonical arguments; an entry keyed
	// by an idempotency_key must match it. May be empty.
	Digest string
	// Result is the shaped JSON-RPC result (State ReplayDone), stored
	// byte for byte (results of a few hundred KiB are fine); never secrets.
	// Empty is returned as nil.
	Result []byte
	// Started is when the claim was made (microseconds, UTC).
	Started time.Time
}

// CheckClaim validates the arguments of ReplayStore.ClaimReplay; the error
// wraps ErrInvalid. Backends call it before writing.
func CheckClaim(key string, e ReplayEntry, ttl time.Duration) error {
	var errs []error
	if err := CheckID("replay key", key); err != nil {
		errs = append(errs, err)
	}
	if err := CheckID("replay claim", e.Claim); err != nil {
		errs = append(errs, err)
	}
	if e.State != ReplayRunning {
		errs = append(errs, fmt.Errorf("%w: a new replay entry must be %q, not %q", ErrInvalid, ReplayRunning, e.State))
	}
	if len(e.Digest) > MaxIDLen || strings.IndexByte(e.Digest, 0) >= 0 {
		errs = append(errs, fmt.Errorf("%w: replay digest is too long or contains a NUL byte", ErrInvalid))
	}
	if ttl <= 0 {
		errs = append(errs, fmt.Errorf("%w: replay ttl %s is not positive", ErrInvalid, ttl))
	}
	return errors.Join(errs...)
}

// CheckFinish validates the arguments of ReplayStore.FinishReplay; the
// error wraps ErrInvalid.
func CheckFinish(key, claim, state string, ttl time.Duration) error {
	var errs []error
	if err := CheckID("replay key", key); err != nil {
		errs = append(errs, err)
	}
	if err := CheckID("replay claim", claim); err != nil {
		errs = append(errs, err)
	}
	if state != ReplayDone && state != ReplayUnknown {
		errs = append(errs, fmt.Errorf("%w: a replay entry finishes %q or %q, not %q", ErrInvalid, ReplayDone, ReplayUnknown, state))
	}
	if ttl <= 0 {
		errs = append(errs, fmt.Errorf("%w: replay ttl %s is not positive", ErrInvalid, ttl))
	}
	return errors.Join(errs...)
}

// CheckRelease validates the arguments of ReplayStore.ReleaseReplay; the
// error wraps ErrInvalid.
func CheckRelease(key, claim string) error {
	return errors.Join(CheckID("replay key", key), CheckID("replay claim", claim))
}

// ReplayConflict is the ErrConflict error FinishReplay and ReleaseReplay
// return when the live entry is not claim's running entry.
func ReplayConflict(op string, cur ReplayEntry, claim string) error {
	if cur.Claim != claim {
		return fmt.Errorf("%s: replay entry belongs to another claim (state %q): %w", op, cur.State, ErrConflict)
	}
	return fmt.Errorf("%s: replay entry is already %q: %w", op, cur.State, ErrConflict)
}

// ActionStore holds the pending actions of two-step confirmation (notify,
// wake, alerting and delete take two steps by default) and of out-of-band
// approval.
//
// An action stays readable until ActionRetention after its ExpiresAt, so
// that an expired token can be told apart from an unknown one; then it is
// gone (ErrNotFound, left out of lists) and the backend deletes it. The
// store does not check ExpiresAt itself: the caller decides what an
// expired action means.
type ActionStore interface {
	// PutAction stores a new action. ErrExists if the id is taken (also by
	// an action past its retention that was not deleted yet); ErrInvalid
	// if a.Validate fails.
	PutAction(ctx context.Context, a Action) error
	// Action returns the action with that id. ErrNotFound if there is none
	// or its retention ran out.
	Action(ctx context.Context, id string) (Action, error)
	// TransitionAction atomically moves the action from state from to
	// u.State, setting u's non-zero fields (DecidedBy, DecidedAt, Reason),
	// and returns the updated action. Exactly one of several concurrent
	// transitions from one state wins, also across replicas. ErrConflict
	// (naming the current state) if the action is not in state from;
	// ErrNotFound if it is absent or gone; ErrInvalid if the move is not
	// allowed (ValidTransition) or u breaks the identifier rules.
	TransitionAction(ctx context.Context, id, from string, u ActionUpdate) (Action, error)
	// ListActions returns the live actions matching f, newest first
	// (CreatedAt, ties by ID descending), at most f.EffectiveLimit().
	ListActions(ctx context.Context, f ActionFilter) ([]Action, error)
}

// Action states.
const (
	ActionPending    = "pending"    // previewed, waiting for a decision
	ActionApproved   = "approved"   // approved out of band, not yet executing
	ActionExecuting  = "executing"  // the original call is being forwarded
	ActionExecuted   = "executed"   // forwarded and answered
	ActionRejected   = "rejected"   // declined (reject_action or the approver)
	ActionFailed     = "failed"     // execution failed or its outcome is unknown
	ActionSuperseded = "superseded" // replaced by a fresh preview
)

// Approval modes of an action.
const (
	// ApprovalClient: the person confirms in the client (confirm_action or
	// an elicitation).
	ApprovalClient = "client"
	// ApprovalOutOfBand: the person approves on mcpgate's approval page.
	ApprovalOutOfBand = "out_of_band"
)

// ActionRetention is how long an action stays readable after its
// ExpiresAt.
const ActionRetention = 24 * time.Hour

// ListActions limits.
const (
	// DefaultActionLimit applies when ActionFilter.Limit is zero or
	// negative.
	DefaultActionLimit = 100
	// MaxActionLimit caps ActionFilter.Limit.
	MaxActionLimit = 1000
)

// transitions lists, per state, the states an action may move to. Executed,
// rejected, failed and superseded are final.
var transitions = map[string][]string{
	ActionPending:  {ActionApproved, ActionExecuting, ActionRejected, ActionSuperseded, ActionFailed},
	ActionApproved: {ActionExecuting, ActionRejected, ActionSuperseded, ActionFailed},
	// Back to pending/approved: the holder of the lock found the call was
	// never sent (the upstream could not be reached, refused it with a
	// 4xx, or the gateway could not sign its assertion): it may be
	// confirmed again.
	ActionExecuting: {ActionExecuted, ActionFailed, ActionPending, ActionApproved},
}

// ValidTransition reports whether an action may move from from to to:
//
//	pending   → approved, executing, rejected, superseded, failed
//	approved  → executing, rejected, superseded, failed
//	executing → executed, failed
func ValidTransition(from, to string) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Action is a pending action of two-step confirmation or out-of-band
// approval.
type Action struct {
	// ID is the hex SHA-256 of the confirm token; the token itself is
	// never stored. Required.
	ID string
	// Who and what. Connection and Tool are required; Tenant may be empty
	// (then the action is found only by lists without a tenant).
	Tenant, Subject, Connection, Client, Upstream, Tool, Effect string
	// Arguments is the normalised arguments JSON, needed to forward the
	// call later; never audited or logged. Empty is returned as nil.
	Arguments []byte
	// Resume is the upstream's own multi-round state the call carried: a
	// JSON object holding its params members requestState and/or
	// inputResponses (MCP 2026-07-28 input_required round trips), sent
	// again with the confirmed call; never audited or logged. Empty is
	// returned as nil.
	Resume []byte
	// ArgsDigest is the hex SHA-256 of the RFC 8785 canonical arguments.
	ArgsDigest string
	// ToolHash is the catalog definition hash at preview time.
	ToolHash string
	// Summary is the server-written confirm_summary.
	Summary string
	// Approval is ApprovalClient or ApprovalOutOfBand.
	Approval string
	// CreatedAt is required; ExpiresAt must be after it.
	CreatedAt, ExpiresAt time.Time
	// State is one of the Action states; PutAction takes ActionPending only.
	State string
	// Set by TransitionAction.
	DecidedBy string
	DecidedAt time.Time
	Reason    string
}

// GoneAt is when the action stops being readable: ActionRetention after
// ExpiresAt.
func (a Action) GoneAt() time.Time { return a.ExpiresAt.Add(ActionRetention) }

// Validate checks the rules PutAction enforces.
func (a Action) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"action id", a.ID}, {"action connection", a.Connection}, {"action tool", a.Tool}} {
		if err := CheckID(f.name, f.v); err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range []struct{ name, v string }{{"tenant", a.Tenant}, {"subject", a.Subject}, {"client", a.Client},
		{"upstream", a.Upstream}, {"effect", a.Effect}, {"args digest", a.ArgsDigest}, {"tool hash", a.ToolHash}} {
		if len(f.v) > MaxIDLen || strings.IndexByte(f.v, 0) >= 0 {
			errs = append(errs, fmt.Errorf("%w: action %s is longer than %d bytes or contains a NUL byte", ErrInvalid, f.name, MaxIDLen))
		}
	}
	if a.Approval != ApprovalClient && a.Approval != ApprovalOutOfBand {
		errs = append(errs, fmt.Errorf("%w: action approval %q is neither %q nor %q", ErrInvalid, a.Approval, ApprovalClient, ApprovalOutOfBand))
	}
	if a.State != ActionPending {
		errs = append(errs, fmt.Errorf("%w: a new action must be %q, not %q", ErrInvalid, ActionPending, a.State))
	}
	if a.CreatedAt.IsZero() {
		errs = append(errs, fmt.Errorf("%w: action created_at is zero", ErrInvalid))
	}
	if !a.ExpiresAt.After(a.CreatedAt) {
		errs = append(errs, fmt.Errorf("%w: action expires_at is not after created_at", ErrInvalid))
	}
	if a.DecidedBy != "" || !a.DecidedAt.IsZero() || a.Reason != "" {
		errs = append(errs, fmt.Errorf("%w: a new action has no decision", ErrInvalid))
	}
	return errors.Join(errs...)
}

// ActionUpdate is a state change of TransitionAction; empty fields keep the
// action's value.
type ActionUpdate struct {
	State     string
	DecidedBy string
	Reason    string
	DecidedAt time.Time
}

// Apply returns a with u applied (State and u's non-zero fields).
func (u ActionUpdate) Apply(a Action) Action {
	a.State = u.State
	if u.DecidedBy != "" {
		a.DecidedBy = u.DecidedBy
	}
	if !u.DecidedAt.IsZero() {
		a.DecidedAt = u.DecidedAt
	}
	if u.Reason != "" {
		a.Reason = u.Reason
	}
	return a
}

// CheckTransition validates the arguments of ActionStore.TransitionAction;
// the error wraps ErrInvalid.
func CheckTransition(id, from string, u ActionUpdate) error {
	var errs []error
	if err := CheckID("action id", id); err != nil {
		errs = append(errs, err)
	}
	if !ValidTransition(from, u.State) {
		errs = append(errs, fmt.Errorf("%w: an action cannot move from %q to %q", ErrInvalid, from, u.State))
	}
	if len(u.DecidedBy) > MaxIDLen || strings.IndexByte(u.DecidedBy, 0) >= 0 {
		errs = append(errs, fmt.Errorf("%w: action decided_by is longer than %d bytes or contains a NUL byte", ErrInvalid, MaxIDLen))
	}
	return errors.Join(errs...)
}

// ActionConflict is the ErrConflict error TransitionAction returns when the
// action is in state cur instead of from.
func ActionConflict(id, from, cur string) error {
	return fmt.Errorf("transition action %q: state is %q, not %q: %w", id, cur, from, ErrConflict)
}

// ActionFilter selects actions; empty fields match everything.
type ActionFilter struct {
	Tenant, State, Connection string
	// Limit: <= 0 means DefaultActionLimit, above MaxActionLimit means
	// MaxActionLimit.
	Limit int
}

// Match reports whether a passes the filter.
func (f ActionFilter) Match(a Action) bool {
	return (f.Tenant == "" || f.Tenant == a.Tenant) && (f.State == "" || f.State == a.State) &&
		(f.Connection == "" || f.Connection == a.Connection)
}

// EffectiveLimit is the number of actions the filter may return.
func (f ActionFilter) EffectiveLimit() int {
	switch {
	case f.Limit <= 0:
		return DefaultActionLimit
	case f.Limit > MaxActionLimit:
		return MaxActionLimit
	}
	return f.Limit
}
