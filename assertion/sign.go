package assertion

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Assertion lifetime bounds and the default signature cache size.
const (
	DefaultTTL       = 60 * time.Second
	MaxTTL           = 10 * time.Minute
	MinTTL           = time.Second
	DefaultCacheSize = 4096
)

// ErrIncompleteIdentity is returned (wrapped) by Signer.Sign when the
// audience, tenant, subject or connection is empty: an assertion without them
// would be refused by every verifier.
var ErrIncompleteIdentity = errors.New("assertion: identity is incomplete")

// SignerOptions configures NewSigner.
type SignerOptions struct {
	// Issuer is the "iss" of every assertion; required. Use a stable name
	// for the gateway fleet, e.g. its public base URL. Verifiers must be
	// configured with the same string.
	Issuer string
	// TTL is the lifetime of an assertion (exp - iat). Zero means DefaultTTL
	// (60s); it must be between MinTTL (1s) and MaxTTL (10m).
	TTL time.Duration
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// CacheSize bounds the number of signed assertions kept for reuse. Zero
	// means DefaultCacheSize; a negative value disables the cache.
	CacheSize int
}

// Signer signs identity assertions on the gateway. It is safe for concurrent
// use; SetKeys swaps the key set atomically while Sign runs.
//
// Sign reuses a signed assertion for an identical identity (same audience,
// tenant, subject, rights, connection, client, credential kind and signing
// key) while more than half of its lifetime remains, so the hot path is a
// map lookup instead of a signature. The reuses share one "jti": an
// assertion is a short-lived bearer proof of who is calling through the
// gateway, not a one-time token, and upstreams must not use the jti for
// replay detection. The cache holds at most CacheSize assertions; when full,
// assertions past their reuse window go first, then arbitrary ones.
type Signer struct {
	issuer    string
	ttl       time.Duration
	now       func() time.Time
	cacheSize int

	state atomic.Pointer[signerState]
	gen   atomic.Uint64

	mu    sync.RWMutex
	cache map[string]cacheEntry
}

// signerState is the key material in use; replaced as a whole by SetKeys.
type signerState struct {
	ks     *KeySet
	signer jose.Signer
	kid    string
	gen    uint64
}

type cacheEntry struct {
	token      string
	gen        uint64
	issuedAt   time.Time
	reuseUntil time.Time
}

// claims is the JWT claims set of an assertion (RFC 7519 section 4 for the
// registered names; the others are private claim names, section 4.3).
type claims struct {
	Issuer         string           `json:"iss"`
	Subject        string           `json:"sub"`
	Audience       jwt.Audience     `json:"aud"`
	IssuedAt       *jwt.NumericDate `json:"iat"`
	NotBefore      *jwt.NumericDate `json:"nbf"`
	Expiry         *jwt.NumericDate `json:"exp"`
	ID             string           `json:"jti"`
	Tenant         string           `json:"tenant"`
	Rights         []string         `json:"rights"`
	Connection     string           `json:"connection"`
	Client         string           `json:"client,omitempty"`
	CredentialKind string           `json:"credential_kind,omitempty"`
}

// NewSigner returns a Signer that signs with the first key of ks. It fails if
// ks is nil, the issuer is empty or the TTL is out of bounds.
func NewSigner(ks *KeySet, o SignerOptions) (*Signer, error) {
	if o.Issuer == "" {
		return nil, errors.New("assertion: signer needs an issuer")
	}
	switch {
	case o.TTL == 0:
		o.TTL = DefaultTTL
	case o.TTL < MinTTL || o.TTL > MaxTTL:
		return nil, fmt.Errorf("assertion: TTL %s out of bounds [%s, %s]", o.TTL, MinTTL, MaxTTL)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	s := &Signer{issuer: o.Issuer, ttl: o.TTL, now: o.Now, cacheSize: o.CacheSize}
	if s.cacheSize > 0 {
		s.cache = make(map[string]cacheEntry)
	}
	st, err := s.newState(ks)
	if err != nil {
		return nil, err
	}
	s.state.Store(st)
	return s, nil
}

// SetKeys makes ks the key set: its first key signs every assertion from now
// on and JWKS serves its public keys. Assertions cached under the previous set
// are no longer reused. A nil ks is ignored (the current keys stay), so a
// failed reload never leaves the gateway without keys.
func (s *Signer) SetKeys(ks *KeySet) {
	if ks == nil {
		return
	}
	st, err := s.newState(ks)
	if err != nil {
		// Unreachable for a KeySet built by this package: its keys passed
		// a signing self-test. Keep the keys that work.
		return
	}
	s.state.Store(st)
	if s.cache != nil {
		s.mu.Lock()
		clear(s.cache)
		s.mu.Unlock()
	}
}

// JWKS returns the public JWK Set of the current keys (see
// KeySet.PublicJWKS), the body to serve at JWKSPath.
func (s *Signer) JWKS() []byte { return s.state.Load().ks.PublicJWKS() }

// SigningKeyID returns the kid that signs now.
func (s *Signer) SigningKeyID() string { return s.state.Load().kid }

// Sign returns a compact JWS (RFC 7515 section 7.1) whose protected header is
// {"alg":"EdDSA"|"ES256","kid":...,"typ":"mcpgate-assertion+jwt"} and whose
// payload is the JWT claims set (RFC 7519):
//
//	iss              SignerOptions.Issuer
//	sub              id.Subject
//	aud              audience (one string: the upstream the call goes to)
//	iat, nbf, exp    seconds since the epoch; nbf = iat, exp = iat + TTL
//	jti              16 random bytes, base64url
//	tenant           id.Tenant
//	rights           id.Rights sorted and de-duplicated (always an array)
//	connection       id.Connection
//	client           id.Client (omitted when empty)
//	credential_kind  id.CredentialKind (omitted when empty)
//
// id.Issuer, id.Audience, id.ID, id.IssuedAt and id.Expiry are ignored. Sign
// fails with ErrIncompleteIdentity when audience, tenant, subject or
// connection is empty. See Signer for the reuse of signed assertions.
func (s *Signer) Sign(id Identity, audience string) (string, error) {
	if audience == "" || id.Tenant == "" || id.Subject == "" || id.Connection == "" {
		return "", fmt.Errorf("%w: audience, tenant, subject and connection are required", ErrIncompleteIdentity)
	}
	st := s.state.Load()
	rights := normaliseRights(id.Rights)
	now := s.now()

	var scratch [512]byte
	var key []byte
	if s.cache != nil {
		key = appendCacheKey(scratch[:0], st.kid, audience, id.Tenant, id.Subject, id.Connection, id.Client, id.CredentialKind, rights)
		s.mu.RLock()
		e, ok := s.cache[string(key)] // no allocation for the lookup
		s.mu.RUnlock()
		if ok && e.gen == st.gen && now.Before(e.reuseUntil) && !now.Before(e.issuedAt) {
			return e.token, nil
		}
	}

	iat := now.Truncate(time.Second)
	exp := iat.Add(s.ttl)
	c := claims{
		Issuer:         s.issuer,
		Subject:        id.Subject,
		Audience:       jwt.Audience{audience},
		IssuedAt:       jwt.NewNumericDate(iat),
		NotBefore:      jwt.NewNumericDate(iat),
		Expiry:         jwt.NewNumericDate(exp),
		ID:             randomID(16),
		Tenant:         id.Tenant,
		Rights:         rights,
		Connection:     id.Connection,
		Client:         id.Client,
		CredentialKind: id.CredentialKind,
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("assertion: encode claims: %w", err)
	}
	jws, err := st.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("assertion: sign: %w", err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		return "", fmt.Errorf("assertion: serialize: %w", err)
	}

	if s.cache != nil {
		e := cacheEntry{token: token, gen: st.gen, issuedAt: iat, reuseUntil: exp.Add(-s.ttl / 2)}
		k := string(key)
		s.mu.Lock()
		if _, exists := s.cache[k]; !exists && len(s.cache) >= s.cacheSize {
			s.evictLocked(now)
		}
		s.cache[k] = e
		s.mu.Unlock()
	}
	return token, nil
}

// evictLocked makes room in a full cache: it drops every entry that can no
// longer be reused and, if that freed less than an eighth of the capacity,
// arbitrary entries (map order) until an eighth is free, so the O(n) sweep
// runs at most once per CacheSize/8 insertions.
func (s *Signer) evictLocked(now time.Time) {
	gen := s.state.Load().gen
	for k, e := range s.cache {
		if e.gen != gen || !now.Before(e.reuseUntil) {
			delete(s.cache, k)
		}
	}
	target := s.cacheSize - max(s.cacheSize/8, 1)
	for k := range s.cache {
		if len(s.cache) <= target {
			break
		}
		delete(s.cache, k)
	}
}

func (s *Signer) newState(ks *KeySet) (*signerState, error) {
	if ks == nil || len(ks.keys) == 0 {
		return nil, errors.New("assertion: signer needs a key set")
	}
	k := ks.keys[0]
	opts := (&jose.SignerOptions{}).WithType(TokenType)
	js, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k}, opts)
	if err != nil {
		return nil, fmt.Errorf("assertion: signing key %q: %w", k.KeyID, err)
	}
	return &signerState{ks: ks, signer: js, kid: k.KeyID, gen: s.gen.Add(1)}, nil
}

// normaliseRights returns rights sorted and without duplicates, never nil. It
// returns the argument itself when it already is, to keep the hot path free
// of allocations.
func normaliseRights(rights []string) []string {
	if rights == nil {
		return []string{}
	}
	ok := true
	for i := 1; i < len(rights); i++ {
		if rights[i-1] >= rights[i] {
			ok = false
			break
		}
	}
	if ok {
		return rights
	}
	out := slices.Clone(rights)
	slices.Sort(out)
	return slices.Compact(out)
}

// appendCacheKey appends the fields to b as length-prefixed strings, so no
// two distinct identities share a key whatever bytes they contain.
func appendCacheKey(b []byte, kid, aud, tenant, subject, conn, client, kind string, rights []string) []byte {
	put := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	put(kid)
	put(aud)
	put(tenant)
	put(subject)
	put(conn)
	put(client)
	put(kind)
	b = strconv.AppendInt(b, int64(len(rights)), 10)
	b = append(b, '#')
	for _, r := range rights {
		put(r)
	}
	return b
}
