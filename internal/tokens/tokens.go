// Package tokens issues, lists, revokes and verifies gateway-issued MCP
// tokens: credentials for MCP clients that cannot do OAuth.
//
// A token's secret is Prefix followed by the unpadded base64url form of 32
// random bytes (256 bits); it is returned once, by Create, and only its
// SHA-256 (store.HashSecret) is stored. Each token is bound at creation to
// one tenant and one creator (the person whose rights bound it), carries
// rights that are a subset of the creator's live rights at that moment
// (rights.Source), and expires. Its public id, "tok_" followed by 32 hex
// digits, is also the connection id of the calls made with it.
//
// Who may do what (Actor.Role):
//
//   - RolePerson: creates, lists and revokes only their own tokens in their
//     own tenant.
//   - RoleTenantAdmin: creates tokens for any subject of their tenant, and
//     lists and revokes every token of their tenant.
//   - RolePlatformAdmin: any tenant and subject.
//
// Every Create and Revoke, refused ones included, is audited (channel
// store.ChannelAdmin, actions "tokens.create" and "tokens.revoke"). The
// secret is never logged or audited.
//
// Errors are *Error values wrapping one of the sentinels below; test with
// errors.Is.
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
)

// Prefix starts every token secret, so an authenticator can tell a
// gateway-issued MCP token from an OAuth access token without a lookup,
// and secret scanners can recognise leaked ones.
const Prefix = "mcpg_"

// secretBytes is the number of random bytes in a secret (256 bits).
const secretBytes = 32

// SecretLen is the length of a token secret: Prefix plus 43 base64url
// characters (32 bytes, unpadded).
const SecretLen = len(Prefix) + (secretBytes*8+5)/6

// IDPrefix starts every token id.
const IDPrefix = "tok_"

// Roles of an Actor.
const (
	// RolePlatformAdmin manages the tokens of every tenant.
	RolePlatformAdmin = "platform_admin"
	// RoleTenantAdmin manages the tokens of one tenant (Actor.Tenant).
	RoleTenantAdmin = "tenant_admin"
	// RolePerson manages their own tokens (Actor.Tenant, Actor.Subject).
	RolePerson = "person"
)

// Defaults of Options.
const (
	DefaultMaxTTL     = 90 * 24 * time.Hour
	DefaultDefaultTTL = 30 * 24 * time.Hour
)

// MaxNameLen bounds a token's name (bytes).
const MaxNameLen = 200

// ToolsetFull is the built-in toolset of every tool: what a token without a
// toolset is bound to.
const ToolsetFull = "full"

// MaxRights bounds the number of rights a request may name.
const MaxRights = 256

// Audit actions.
const (
	ActionCreate = "tokens.create"
	ActionRevoke = "tokens.revoke"
)

// HasPrefix reports whether raw looks like a gateway-issued MCP token (it
// starts with Prefix). It says nothing about validity; see Verify.
func HasPrefix(raw string) bool { return strings.HasPrefix(raw, Prefix) }

// Options configure New.
type Options struct {
	// Store holds the tokens. Required.
	Store store.TokenStore
	// Rights answers the creator's live rights at creation. Required.
	Rights rights.Source
	// Auditor records every Create and Revoke. Required.
	Auditor *store.Auditor
	// MaxTTL is the longest lifetime a token may get. 0: DefaultMaxTTL.
	MaxTTL time.Duration
	// DefaultTTL is the lifetime of a token created without one. 0:
	// DefaultDefaultTTL (or MaxTTL when that is shorter).
	DefaultTTL time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Toolsets are the toolsets a token may be bound to besides "full"
	// (config toolsets); a request naming another is refused.
	Toolsets []string
}

// Service issues and checks gateway-issued MCP tokens. It is safe for
// concurrent use and keeps no state of its own (no cache): a revocation
// takes effect on the next Verify, on every replica sharing the store.
type Service struct {
	store      store.TokenStore
	rights     rights.Source
	audit      *store.Auditor
	maxTTL     time.Duration
	defaultTTL time.Duration
	now        func() time.Time
	toolsets   []string
}

// New checks o and returns a Service.
func New(o Options) (*Service, error) {
	var errs []error
	if o.Store == nil {
		errs = append(errs, errors.New("store is required"))
	}
	if o.Rights == nil {
		errs = append(errs, errors.New("rights source is required"))
	}
	if o.Auditor == nil {
		errs = append(errs, errors.New("auditor is required"))
	}
	if o.MaxTTL == 0 {
		o.MaxTTL = DefaultMaxTTL
	}
	if o.DefaultTTL == 0 {
		o.DefaultTTL = min(DefaultDefaultTTL, o.MaxTTL)
	}
	if o.MaxTTL < 0 {
		errs = append(errs, fmt.Errorf("max TTL %s: must be positive", o.MaxTTL))
	}
	if o.DefaultTTL < 0 || o.DefaultTTL > o.MaxTTL {
		errs = append(errs, fmt.Errorf("default TTL %s: must be positive and at most the max TTL %s", o.DefaultTTL, o.MaxTTL))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	return &Service{
		store:      o.Store,
		rights:     o.Rights,
		audit:      o.Auditor,
		maxTTL:     o.MaxTTL,
		defaultTTL: o.DefaultTTL,
		now:        o.Now,
		toolsets:   slices.Clone(o.Toolsets),
	}, nil
}

// MaxTTL is the longest lifetime a token may get.
func (s *Service) MaxTTL() time.Duration { return s.maxTTL }

// DefaultTTL is the lifetime of a token created without one.
func (s *Service) DefaultTTL() time.Duration { return s.defaultTTL }

// Active reports whether t is neither revoked nor expired now, by the
// service's clock.
func (s *Service) Active(t store.Token) bool { return t.Active(s.now()) }

// Actor is who asks: the authenticated caller of the admin API.
type Actor struct {
	// Role is RolePlatformAdmin, RoleTenantAdmin or RolePerson.
	Role string
	// Tenant is the actor's tenant: required for RoleTenantAdmin and
	// RolePerson, optional for RolePlatformAdmin.
	Tenant string
	// Subject is the person; required for RolePerson, empty for a static
	// admin token.
	Subject string
	// Name is the static admin token's name, or the OIDC client the actor
	// used; recorded in audit records.
	Name string
}

// CreateRequest asks for a new token.
type CreateRequest struct {
	// Tenant and Subject name the token's tenant and creator: the person
	// whose live rights bound it. A person may leave them empty (their
	// own) or give their own; a tenant admin may leave Tenant empty (theirs)
	// and Subject empty (themselves, when they have a subject); a platform
	// admin must give both.
	Tenant, Subject string
	// Name is an optional label (at most MaxNameLen bytes, printable
	// UTF-8).
	Name string
	// Rights are the token's rights: a subset of the creator's live rights.
	// Empty: all of them.
	Rights []string
	// TTL is the token's lifetime: 0 means the default; otherwise it must be
	// positive and at most the max TTL.
	TTL time.Duration
	// Toolset binds the token's connection to a toolset (Options.Toolsets
	// or "full"); "" means "full" (every tool).
	Toolset string
}

// Created is a new token and its secret. The secret is never available
// again.
type Created struct {
	Token  store.Token
	Secret string
}

// Create issues a token: it checks that a may create a token for the
// request's tenant and subject, looks up the subject's live rights (the
// requested rights must all be held; none requested means all of them),
// stores the token with the hash of a fresh secret and returns both.
//
// Errors: ErrInvalid (a malformed request: ids, name, rights, TTL),
// ErrForbidden (outside the actor's scope, the person is not active, holds
// no rights, or lacks some of the requested rights — the *Error's Missing
// names them), ErrUnavailable (the rights source or the store failed).
func (s *Service) Create(ctx context.Context, a Actor, r CreateRequest) (Created, error) {
	rec := s.record(a, ActionCreate)
	c, err := s.create(ctx, a, r, &rec)
	s.finish(ctx, rec, err)
	return c, err
}

func (s *Service) create(ctx context.Context, a Actor, r CreateRequest, rec *store.AuditRecord) (Created, error) {
	if err := checkActor(a); err != nil {
		return Created{}, err
	}
	rec.Tenant = a.Tenant
	tenant, subject := r.Tenant, r.Subject
	switch a.Role {
	case RolePerson:
		if tenant == "" {
			tenant = a.Tenant
		}
		if subject == "" {
			subject = a.Subject
		}
		if tenant != a.Tenant || subject != a.Subject {
			return Created{}, forbidden("not_your_token", "a person may create tokens only for themselves in their own tenant",
				"leave tenant and subject empty, or ask an admin of the tenant")
		}
	case RoleTenantAdmin:
		if tenant == "" {
			tenant = a.Tenant
		}
		if subject == "" {
			subject = a.Subject
		}
		if tenant != a.Tenant {
			return Created{}, forbidden("other_tenant", "a tenant admin may create tokens only in their own tenant",
				"leave tenant empty, or ask a platform admin")
		}
		if subject == "" {
			return Created{}, invalid("subject_required", "the subject (the person the token acts for) is required",
				"give the subject")
		}
	case RolePlatformAdmin:
		if tenant == "" || subject == "" {
			return Created{}, invalid("tenant_and_subject_required", "a platform admin must name the tenant and the subject",
				"give both tenant and subject")
		}
	}
	if err := checkID("tenant", tenant); err != nil {
		return Created{}, err
	}
	if err := checkID("subject", subject); err != nil {
		return Created{}, err
	}
	rec.Tenant = tenant
	rec.PublicIDs["creator"] = subject
	if err := checkName(r.Name); err != nil {
		return Created{}, err
	}
	want, err := checkRights(r.Rights)
	if err != nil {
		return Created{}, err
	}
	ttl, err := s.ttl(r.TTL)
	if err != nil {
		return Created{}, err
	}
	if r.Toolset != "" && r.Toolset != ToolsetFull && !slices.Contains(s.toolsets, r.Toolset) {
		known := append([]string{ToolsetFull}, s.toolsets...)
		return Created{}, invalid("unknown_toolset", fmt.Sprintf("the toolset %q is not defined on this server", r.Toolset),
			"use one of: "+strings.Join(known, ", "))
	}

	live, err := s.rights.Lookup(ctx, tenant, subject)
	if err != nil {
		return Created{}, &Error{Err: ErrUnavailable, Code: "rights_unavailable",
			Message: "the live rights of the subject cannot be looked up now", Fix: "retry shortly",
			cause: err}
	}
	if !live.Active {
		return Created{}, forbidden("inactive", "the person is not active in the tenant",
			"tokens can be created only for an active person")
	}
	granted := want
	if len(want) == 0 {
		granted = dedupe(live.Rights)
		if len(granted) == 0 {
			return Created{}, forbidden("no_rights", "the person holds no rights in the tenant, so the token could do nothing",
				"grant the person rights first")
		}
	} else if missing := notHeld(want, live.Rights); len(missing) > 0 {
		return Created{}, &Error{Err: ErrForbidden, Code: "rights_not_held",
			Message: fmt.Sprintf("the person does not hold the rights %s", strings.Join(quoteAll(missing), ", ")),
			Fix:     "ask only for rights the person holds, or leave rights empty for all of them",
			Missing: missing}
	}

	now := s.now().Truncate(time.Microsecond).UTC()
	t := store.Token{
		Tenant:    tenant,
		Creator:   subject,
		Name:      r.Name,
		Rights:    slices.Clone(granted),
		Toolset:   r.Toolset,
		CreatedAt: now,
		ExpiresAt: now.Add(ttl),
	}
	var secret string
	for attempt := 0; ; attempt++ {
		t.ID = newID()
		secret = newSecret()
		t.Hash = store.HashSecret(secret)
		err = s.store.PutToken(ctx, t)
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrExists) && attempt < 2 {
			continue // a collision of 128 or 256 random bits: never in practice
		}
		if errors.Is(err, store.ErrInvalid) {
			return Created{}, &Error{Err: ErrInvalid, Code: "invalid_request", Message: "the token cannot be stored as asked",
				Fix: "check tenant, subject and name", cause: err}
		}
		return Created{}, unavailable(err)
	}
	rec.PublicIDs["token_id"] = t.ID
	return Created{Token: t, Secret: secret}, nil
}

// List returns the tokens matching f that a may see, revoked and expired
// ones included, oldest first. A tenant admin sees only their tenant and a
// person only their own tokens: the filter is narrowed to that, and asking
// explicitly for another tenant or creator is ErrForbidden. Store failures
// are ErrUnavailable.
func (s *Service) List(ctx context.Context, a Actor, f store.TokenFilter) ([]store.Token, error) {
	if err := checkActor(a); err != nil {
		return nil, err
	}
	switch a.Role {
	case RoleTenantAdmin:
		if f.Tenant != "" && f.Tenant != a.Tenant {
			return nil, forbidden("other_tenant", "a tenant admin may list only the tokens of their own tenant",
				"leave the tenant filter empty")
		}
		f.Tenant = a.Tenant
	case RolePerson:
		if (f.Tenant != "" && f.Tenant != a.Tenant) || (f.Creator != "" && f.Creator != a.Subject) {
			return nil, forbidden("not_your_token", "a person may list only their own tokens",
				"leave the tenant and creator filters empty")
		}
		f.Tenant, f.Creator = a.Tenant, a.Subject
	}
	ts, err := s.store.ListTokens(ctx, f)
	if err != nil {
		return nil, unavailable(err)
	}
	return ts, nil
}

// Revoke revokes the token with that id and returns it as stored (with
// RevokedAt). Revoking a revoked token succeeds and keeps the first
// revocation time. A token outside a's scope (see List) is ErrNotFound,
// exactly like an unknown id, so the caller learns nothing about it. Store
// failures are ErrUnavailable.
func (s *Service) Revoke(ctx context.Context, a Actor, id string) (store.Token, error) {
	rec := s.record(a, ActionRevoke)
	t, err := s.revoke(ctx, a, id, &rec)
	s.finish(ctx, rec, err)
	return t, err
}

func (s *Service) revoke(ctx context.Context, a Actor, id string, rec *store.AuditRecord) (store.Token, error) {
	if err := checkActor(a); err != nil {
		return store.Token{}, err
	}
	rec.Tenant = a.Tenant
	notFound := &Error{Err: ErrNotFound, Code: "token_not_found", Message: "no token with that id",
		Fix: "list the tokens to find the id"}
	if !ValidID(id) {
		return store.Token{}, notFound
	}
	rec.PublicIDs["token_id"] = id
	t, err := s.store.TokenByID(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Token{}, notFound
	}
	if err != nil {
		return store.Token{}, unavailable(err)
	}
	if !inScope(a, t) {
		return store.Token{}, notFound
	}
	rec.Tenant = t.Tenant
	rec.PublicIDs["creator"] = t.Creator
	if err := s.store.RevokeToken(ctx, id, s.now()); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return store.Token{}, notFound
		}
		return store.Token{}, unavailable(err)
	}
	t, err = s.store.TokenByID(ctx, id)
	if err != nil {
		return store.Token{}, unavailable(err)
	}
	return t, nil
}

// Verify checks a presented secret and returns its token, which is the
// caller's to change (stores return a fresh copy). It looks the hash up in
// the store on every call; the service keeps no cache (a store may, if it
// is never stale: see store/boltstore). Errors:
//
//   - ErrInvalidToken: not a well-formed secret, or no token has it;
//   - ErrRevoked: the token was revoked (also matches ErrInvalidToken);
//   - ErrExpired: the token expired (also matches ErrInvalidToken);
//   - ErrUnavailable: the store failed; the caller must fail closed.
//
// Verify does not check the creator's live rights; the pipeline does that
// on every call.
func (s *Service) Verify(ctx context.Context, raw string) (store.Token, error) {
	if !wellFormed(raw) {
		return store.Token{}, &Error{Err: ErrInvalidToken, Code: "invalid_token", Message: "the token is malformed",
			Fix: "present the whole token as it was shown at creation"}
	}
	h := hashSecret(raw)
	t, err := s.store.TokenByHash(ctx, h)
	if errors.Is(err, store.ErrNotFound) {
		return store.Token{}, &Error{Err: ErrInvalidToken, Code: "invalid_token", Message: "the token is unknown",
			Fix: "create a new token"}
	}
	if err != nil {
		return store.Token{}, unavailable(err)
	}
	if subtle.ConstantTimeCompare(t.Hash[:], h[:]) != 1 {
		return store.Token{}, &Error{Err: ErrInvalidToken, Code: "invalid_token", Message: "the token is unknown",
			Fix: "create a new token"}
	}
	if t.RevokedAt != nil {
		return t, &Error{Err: ErrRevoked, Code: "token_revoked", Message: "the token was revoked",
			Fix: "create a new token"}
	}
	if !t.Active(s.now()) {
		return t, &Error{Err: ErrExpired, Code: "token_expired", Message: "the token expired",
			Fix: "create a new token"}
	}
	return t, nil
}

// ValidID reports whether id has the form of a token id: IDPrefix and 32
// lowercase hex digits.
func ValidID(id string) bool {
	hexPart, ok := strings.CutPrefix(id, IDPrefix)
	if !ok || len(hexPart) != 32 {
		return false
	}
	for i := 0; i < len(hexPart); i++ {
		if c := hexPart[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// strictBase64 is the secrets' encoding: unpadded base64url, refusing
// non-canonical forms (trailing bits that are not zero) and line breaks.
var strictBase64 = base64.RawURLEncoding.Strict()

// wellFormed reports whether raw is Prefix plus the canonical base64url
// form of 32 bytes. It runs on every call, so it decodes from and into
// arrays on the stack instead of allocating.
func wellFormed(raw string) bool {
	if len(raw) != SecretLen || !HasPrefix(raw) {
		return false
	}
	var src [SecretLen - len(Prefix)]byte
	copy(src[:], raw[len(Prefix):])
	var dst [secretBytes]byte // strictBase64.DecodedLen(len(src)) == secretBytes
	n, err := strictBase64.Decode(dst[:], src[:])
	return err == nil && n == secretBytes
}

// hashSecret is store.HashSecret(raw) for a well-formed secret (at most
// SecretLen bytes), computed over a copy on the stack: the []byte(raw) of
// store.HashSecret is a heap allocation for strings this long. The two
// agree (TestHashSecretAgrees); longer input is hashed by store.HashSecret.
func hashSecret(raw string) [32]byte {
	if len(raw) > SecretLen {
		return store.HashSecret(raw)
	}
	var b [SecretLen]byte
	n := copy(b[:], raw)
	return sha256.Sum256(b[:n])
}

func newSecret() string {
	var b [secretBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return IDPrefix + hex.EncodeToString(b[:])
}

// MinTTL is the shortest lifetime a token may be given: a shorter one
// would be dead, or nearly, when its creator first sees it.
const MinTTL = time.Second

func (s *Service) ttl(d time.Duration) (time.Duration, error) {
	switch {
	case d == 0:
		return s.defaultTTL, nil
	case d < MinTTL:
		return 0, invalid("invalid_expiry", fmt.Sprintf("the lifetime %s is shorter than %s", d, MinTTL),
			fmt.Sprintf("give a lifetime between 1s and %s, or none for %s", s.maxTTL, s.defaultTTL))
	case d > s.maxTTL:
		return 0, invalid("expiry_too_long", fmt.Sprintf("the lifetime %s is longer than the maximum %s", d, s.maxTTL),
			fmt.Sprintf("give a lifetime of at most %s", s.maxTTL))
	}
	return d, nil
}

func checkActor(a Actor) error {
	bad := forbidden("unknown_role", "the caller has no role that may manage tokens", "authenticate as a person or an admin")
	switch a.Role {
	case RolePlatformAdmin:
		return nil
	case RoleTenantAdmin:
		if a.Tenant == "" {
			return bad
		}
	case RolePerson:
		if a.Tenant == "" || a.Subject == "" {
			return bad
		}
	default:
		return bad
	}
	return nil
}

// inScope reports whether a may see and revoke t.
func inScope(a Actor, t store.Token) bool {
	switch a.Role {
	case RolePlatformAdmin:
		return true
	case RoleTenantAdmin:
		return t.Tenant == a.Tenant
	case RolePerson:
		return t.Tenant == a.Tenant && t.Creator == a.Subject
	}
	return false
}

func checkID(what, v string) error {
	if err := store.CheckID(what, v); err != nil {
		return &Error{Err: ErrInvalid, Code: "invalid_" + what,
			Message: fmt.Sprintf("the %s must be non-empty, at most %d bytes, without NUL", what, store.MaxIDLen),
			Fix:     "give a valid " + what, cause: err}
	}
	return nil
}

func checkName(n string) error {
	if len(n) > MaxNameLen || !utf8.ValidString(n) || strings.IndexFunc(n, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return invalid("invalid_name", fmt.Sprintf("the name must be printable UTF-8 of at most %d bytes", MaxNameLen),
			"give a shorter plain-text name")
	}
	return nil
}

// checkRights validates requested rights and drops repeats, keeping order.
func checkRights(rs []string) ([]string, error) {
	if len(rs) > MaxRights {
		return nil, invalid("invalid_rights", fmt.Sprintf("at most %d rights may be requested", MaxRights),
			"ask for fewer rights, or none for all the person holds")
	}
	for _, r := range rs {
		if r == "" || len(r) > store.MaxIDLen || !utf8.ValidString(r) ||
			strings.IndexFunc(r, func(c rune) bool { return !unicode.IsPrint(c) || unicode.IsSpace(c) }) >= 0 {
			return nil, invalid("invalid_rights", "every right must be a non-empty name without spaces or control characters",
				"give right names as the rights source lists them")
		}
	}
	return dedupe(rs), nil
}

func dedupe(rs []string) []string {
	var out []string
	for _, r := range rs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func notHeld(want, held []string) []string {
	var missing []string
	for _, r := range want {
		if !slices.Contains(held, r) {
			missing = append(missing, r)
		}
	}
	return missing
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// record starts the audit record of an action by a.
func (s *Service) record(a Actor, action string) store.AuditRecord {
	rec := store.AuditRecord{
		Channel:   store.ChannelAdmin,
		Subject:   a.Subject,
		Action:    action,
		PublicIDs: map[string]string{},
	}
	if a.Subject == "" {
		rec.Subject = a.Name // a static admin token
	} else {
		rec.Client = a.Name
	}
	if a.Role != "" {
		rec.PublicIDs["role"] = a.Role
	}
	return rec
}

// finish writes the audit record of an action that ended with err. The
// Auditor logs the record even when the store write fails, so a failed
// write does not fail the action (the log holds it).
func (s *Service) finish(ctx context.Context, rec store.AuditRecord, err error) {
	rec.Outcome = "ok"
	if err != nil {
		rec.Outcome = "denied"
		if errors.Is(err, ErrUnavailable) {
			rec.Outcome = "error"
		}
		var e *Error
		if errors.As(err, &e) {
			rec.PublicIDs["reason"] = e.Code
		}
	}
	_, _ = s.audit.Record(ctx, rec)
}
