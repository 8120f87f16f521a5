package assertion

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Verifier defaults and bounds.
const (
	DefaultLeeway             = 30 * time.Second
	DefaultMinRefreshInterval = 30 * time.Second
	DefaultMaxAge             = 10 * time.Minute
	// DefaultFetchTimeout bounds one JWKS fetch when the HTTP client has no
	// timeout of its own.
	DefaultFetchTimeout = 10 * time.Second
	// MaxTokenSize is the largest assertion Verify parses, in bytes.
	MaxTokenSize = 16 << 10
	// maxJWKSSize is the largest JWKS body the verifier reads, in bytes.
	maxJWKSSize = 1 << 20
)

// allowedAlgs is the alg allowlist (RFC 8725 section 3.1).
var allowedAlgs = []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256}

// Reason says why an assertion was refused. The values are a closed set,
// stable across versions, safe to show a caller and to use as a metric label.
type Reason string

// Reasons.
const (
	ReasonMissing         Reason = "missing"          // no assertion in the request
	ReasonMalformed       Reason = "malformed"        // not a compact JWS / JWT, or claims of the wrong JSON type
	ReasonWrongType       Reason = "wrong_type"       // JOSE "typ" is not TokenType
	ReasonWrongAlgorithm  Reason = "wrong_algorithm"  // "alg" is not EdDSA or ES256, or does not fit the key
	ReasonUnknownKey      Reason = "unknown_key"      // no published key has the "kid" (or the kid is empty)
	ReasonBadSignature    Reason = "bad_signature"    // the signature does not verify
	ReasonWrongIssuer     Reason = "wrong_issuer"     // "iss" is not VerifierOptions.Issuer
	ReasonWrongAudience   Reason = "wrong_audience"   // "aud" does not contain VerifierOptions.Audience
	ReasonExpired         Reason = "expired"          // "exp" is past, beyond the leeway
	ReasonNotYetValid     Reason = "not_yet_valid"    // "nbf" or "iat" is in the future, beyond the leeway
	ReasonInvalidClaims   Reason = "invalid_claims"   // exp, iat, tenant, subject or connection is missing
	ReasonKeysUnavailable Reason = "keys_unavailable" // the JWKS could not be fetched and no usable copy is held
)

// Reasons lists every Reason, e.g. to pre-register metric labels.
var Reasons = []Reason{
	ReasonMissing, ReasonMalformed, ReasonWrongType, ReasonWrongAlgorithm,
	ReasonUnknownKey, ReasonBadSignature, ReasonWrongIssuer, ReasonWrongAudience,
	ReasonExpired, ReasonNotYetValid, ReasonInvalidClaims, ReasonKeysUnavailable,
}

// Error is the error Verify returns. Its message names the reason and a
// fixed description, never any part of the token (a kid is quoted, cut to 64
// bytes, for unknown_key). Err, when set, is the underlying cause, for logs.
type Error struct {
	Reason Reason
	Detail string
	Err    error
}

func (e *Error) Error() string {
	return "assertion: " + string(e.Reason) + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

func fail(r Reason, detail string, cause error) *Error {
	return &Error{Reason: r, Detail: detail, Err: cause}
}

// VerifierOptions configures NewVerifier. Exactly one of JWKSURL and Keys is
// required.
type VerifierOptions struct {
	// Issuer is the expected "iss" (the gateway's SignerOptions.Issuer);
	// required.
	Issuer string
	// Audience is this upstream's audience, as the gateway names it;
	// required. The "aud" claim must contain it.
	Audience string
	// JWKSURL is the gateway's public JWKS (https://gateway/.well-known/jwks.json).
	// The set is fetched on first use and again when a token names an unknown
	// kid (at most once per MinRefreshInterval) or when it is older than
	// MaxAge. If a refresh fails the previous set stays in use until it is
	// twice MaxAge old; then verification fails with keys_unavailable until
	// a fetch succeeds.
	JWKSURL string
	// Keys is a static public JWK Set (KeySet.PublicJWKS, `mcpgate keys
	// public`), for tests and air-gapped upstreams. It is never refreshed.
	Keys []byte
	// MinRefreshInterval is the least time between two JWKS fetches; zero
	// means DefaultMinRefreshInterval (30s). Tokens with random kids cannot
	// make the verifier fetch more often than this.
	MinRefreshInterval time.Duration
	// MaxAge is how long a fetched JWKS is used before it is fetched again
	// (so a key removed from the gateway stops being accepted); zero means
	// DefaultMaxAge (10m).
	MaxAge time.Duration
	// Leeway is the clock skew tolerated on exp, nbf and iat; zero means
	// DefaultLeeway (30s), a negative value means none.
	Leeway time.Duration
	// HTTPClient fetches the JWKS; nil means a client with a
	// DefaultFetchTimeout timeout.
	HTTPClient *http.Client
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// Verifier checks assertions on the upstream side. It is safe for concurrent
// use.
type Verifier struct {
	issuer     string
	audience   string
	url        string
	client     *http.Client
	minRefresh time.Duration
	maxAge     time.Duration
	leeway     time.Duration
	now        func() time.Time

	keys atomic.Pointer[publicKeys]

	mu          sync.Mutex
	inflight    chan struct{} // closed when the fetch in flight ends
	lastAttempt time.Time     // start of the last fetch attempt
	lastErr     error         // outcome of the last fetch attempt
}

// publicKeys is a parsed public JWKS.
type publicKeys struct {
	byKID     map[string]jose.JSONWebKey
	fetchedAt time.Time
}

// NewVerifier checks o and returns a Verifier. With Keys, the set is parsed
// here and errors are returned; with JWKSURL, nothing is fetched until the
// first Verify (call Refresh to fetch at start-up).
func NewVerifier(o VerifierOptions) (*Verifier, error) {
	if o.Issuer == "" {
		return nil, errors.New("assertion: verifier needs the expected issuer")
	}
	if o.Audience == "" {
		return nil, errors.New("assertion: verifier needs this upstream's audience")
	}
	if (o.JWKSURL == "") == (len(o.Keys) == 0) {
		return nil, errors.New("assertion: verifier needs exactly one of JWKSURL and Keys")
	}
	if o.JWKSURL != "" {
		u, err := url.Parse(o.JWKSURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("assertion: JWKSURL %q is not an http(s) URL", o.JWKSURL)
		}
	}
	if o.MinRefreshInterval < 0 || o.MaxAge < 0 {
		return nil, errors.New("assertion: MinRefreshInterval and MaxAge cannot be negative")
	}
	if o.MinRefreshInterval == 0 {
		o.MinRefreshInterval = DefaultMinRefreshInterval
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	switch {
	case o.Leeway == 0:
		o.Leeway = DefaultLeeway
	case o.Leeway < 0:
		o.Leeway = 0
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: DefaultFetchTimeout}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{
		issuer: o.Issuer, audience: o.Audience, url: o.JWKSURL, client: o.HTTPClient,
		minRefresh: o.MinRefreshInterval, maxAge: o.MaxAge, leeway: o.Leeway, now: o.Now,
	}
	if len(o.Keys) > 0 {
		pk, err := parsePublicJWKS(o.Keys)
		if err != nil {
			return nil, err
		}
		v.keys.Store(pk)
	}
	return v, nil
}

// Verify checks raw, a compact JWS, and returns the identity it asserts.
// Checks, in order: present and at most MaxTokenSize bytes; compact
// serialization (RFC 7515 section 7.1) with one signature; "alg" EdDSA or
// ES256 (RFC 8725 section 3.1; "none", HMAC and RSA are refused before any
// key is looked up); "typ" equal to TokenType, compared case-insensitively
// with an optional "application/" prefix (RFC 7515 section 4.1.9, RFC 8725
// section 3.11); a "kid" naming a published key whose type and alg fit
// "alg"; the signature; "iss"; "aud"; "exp", "nbf" and "iat" with the
// leeway (RFC 7519 section 4.1); non-empty tenant, subject and connection.
// Keys embedded in the token ("jwk", "jku", "x5c", "x5u") are never used.
//
// Every failure is an *Error with one of the Reason values.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Identity, error) {
	if raw == "" {
		return nil, fail(ReasonMissing, "no assertion", nil)
	}
	if len(raw) > MaxTokenSize {
		return nil, fail(ReasonMalformed, fmt.Sprintf("assertion larger than %d bytes", MaxTokenSize), nil)
	}
	jws, err := jose.ParseSignedCompact(raw, allowedAlgs)
	if err != nil {
		var algErr *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &algErr) {
			return nil, fail(ReasonWrongAlgorithm, "signature algorithm not allowed (want EdDSA or ES256)", nil)
		}
		return nil, fail(ReasonMalformed, "not a compact JWS", nil)
	}
	if len(jws.Signatures) != 1 {
		return nil, fail(ReasonMalformed, "want exactly one signature", nil)
	}
	h := jws.Signatures[0].Header
	if !typeOK(h.ExtraHeaders[jose.HeaderType]) {
		return nil, fail(ReasonWrongType, `JOSE header "typ" is not `+TokenType, nil)
	}
	if h.KeyID == "" {
		return nil, fail(ReasonUnknownKey, `JOSE header has no "kid"`, nil)
	}
	key, ferr := v.findKey(ctx, h.KeyID)
	if ferr != nil {
		return nil, ferr
	}
	if !keyFits(key, h.Algorithm) {
		return nil, fail(ReasonWrongAlgorithm, fmt.Sprintf("key %.64q is not for the token's algorithm", h.KeyID), nil)
	}
	payload, err := jws.Verify(key)
	if err != nil {
		return nil, fail(ReasonBadSignature, "signature does not verify", nil)
	}

	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fail(ReasonMalformed, "claims are not a valid JWT claims set", nil)
	}
	std := jwt.Claims{
		Issuer: c.Issuer, Subject: c.Subject, Audience: c.Audience,
		Expiry: c.Expiry, NotBefore: c.NotBefore, IssuedAt: c.IssuedAt, ID: c.ID,
	}
	err = std.ValidateWithLeeway(jwt.Expected{
		Issuer:      v.issuer,
		AnyAudience: jwt.Audience{v.audience},
		Time:        v.now(),
	}, v.leeway)
	switch {
	case err == nil:
	case errors.Is(err, jwt.ErrInvalidIssuer):
		return nil, fail(ReasonWrongIssuer, "issuer is not the expected gateway", nil)
	case errors.Is(err, jwt.ErrInvalidAudience):
		return nil, fail(ReasonWrongAudience, "audience does not include this upstream", nil)
	case errors.Is(err, jwt.ErrExpired):
		return nil, fail(ReasonExpired, "assertion expired", nil)
	case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
		return nil, fail(ReasonNotYetValid, "assertion is not valid yet", nil)
	default:
		return nil, fail(ReasonInvalidClaims, "claims do not validate", err)
	}
	var missing []string
	for _, f := range []struct{ name, val string }{
		{"tenant", c.Tenant}, {"sub", c.Subject}, {"connection", c.Connection},
	} {
		if f.val == "" {
			missing = append(missing, f.name)
		}
	}
	if c.Expiry == nil {
		missing = append(missing, "exp")
	}
	if c.IssuedAt == nil {
		missing = append(missing, "iat")
	}
	if len(missing) > 0 {
		return nil, fail(ReasonInvalidClaims, "missing or empty claims: "+strings.Join(missing, ", "), nil)
	}

	id := &Identity{
		Issuer:         c.Issuer,
		Audience:       v.audience,
		Tenant:         c.Tenant,
		Subject:        c.Subject,
		Rights:         c.Rights,
		Connection:     c.Connection,
		Client:         c.Client,
		CredentialKind: c.CredentialKind,
		ID:             c.ID,
		IssuedAt:       c.IssuedAt.Time(),
		Expiry:         c.Expiry.Time(),
	}
	if id.Rights == nil {
		id.Rights = []string{}
	}
	return id, nil
}

// Refresh fetches the JWKS now, unless a fetch started less than
// MinRefreshInterval ago (then it returns the outcome of that one, waiting
// for it if it is still running). It does nothing for a verifier with static
// Keys. Upstreams may call it at start-up to fail fast on a wrong JWKSURL.
func (v *Verifier) Refresh(ctx context.Context) error {
	if v.url == "" {
		return nil
	}
	return v.refresh(ctx)
}

// findKey returns the published key with this kid, fetching the JWKS when
// needed (see VerifierOptions.JWKSURL).
func (v *Verifier) findKey(ctx context.Context, kid string) (jose.JSONWebKey, *Error) {
	pk := v.keys.Load()
	if v.url == "" {
		if k, ok := pk.byKID[kid]; ok {
			return k, nil
		}
		return jose.JSONWebKey{}, fail(ReasonUnknownKey, fmt.Sprintf("no published key has kid %.64q", kid), nil)
	}
	now := v.now()
	if pk != nil && now.Sub(pk.fetchedAt) < v.maxAge {
		if k, ok := pk.byKID[kid]; ok {
			return k, nil
		}
	}
	// Unknown kid, no set yet, or a set past MaxAge: fetch (rate-limited).
	err := v.refresh(ctx)
	pk = v.keys.Load()
	if pk == nil || now.Sub(pk.fetchedAt) >= 2*v.maxAge {
		cause := err
		if cause == nil || errors.Is(cause, errRefreshLimited) {
			cause = v.lastError()
		}
		return jose.JSONWebKey{}, fail(ReasonKeysUnavailable, "the gateway's JWKS could not be fetched", cause)
	}
	if k, ok := pk.byKID[kid]; ok {
		return k, nil
	}
	return jose.JSONWebKey{}, fail(ReasonUnknownKey, fmt.Sprintf("no published key has kid %.64q", kid), nil)
}

func (v *Verifier) lastError() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastErr
}

// errRefreshLimited: a fetch was skipped because the previous attempt is
// more recent than MinRefreshInterval.
var errRefreshLimited = errors.New("JWKS fetch skipped: minimum refresh interval not elapsed")

// refresh fetches the JWKS unless an attempt started within minRefresh.
// Callers arriving while a fetch runs wait for it (or for ctx). The fetch
// itself is not cancelled when the caller that started it goes away.
func (v *Verifier) refresh(ctx context.Context) error {
	v.mu.Lock()
	if ch := v.inflight; ch != nil {
		v.mu.Unlock()
		select {
		case <-ch:
			return v.lastError()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := v.now()
	if !v.lastAttempt.IsZero() && now.Sub(v.lastAttempt) < v.minRefresh {
		v.mu.Unlock()
		return errRefreshLimited
	}
	v.lastAttempt = now
	ch := make(chan struct{})
	v.inflight = ch
	v.mu.Unlock()

	pk, err := v.fetch(context.WithoutCancel(ctx))
	if err == nil {
		pk.fetchedAt = now
		v.keys.Store(pk)
	}

	v.mu.Lock()
	v.lastErr = err
	v.inflight = nil
	v.mu.Unlock()
	close(ch)
	return err
}

func (v *Verifier) fetch(ctx context.Context) (*publicKeys, error) {
	if v.client.Timeout == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultFetchTimeout)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.url, nil)
	if err != nil {
		return nil, fmt.Errorf("assertion: JWKS request: %w", err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("assertion: fetch JWKS: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("assertion: fetch JWKS: HTTP status %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize+1))
	if err != nil {
		return nil, fmt.Errorf("assertion: fetch JWKS: %w", err)
	}
	if len(body) > maxJWKSSize {
		return nil, fmt.Errorf("assertion: fetch JWKS: body larger than %d bytes", maxJWKSSize)
	}
	return parsePublicJWKS(body)
}

// parsePublicJWKS reads a public JWK Set. Keys the verifier cannot use
// (other key types or curves, another "use", no kid, unparseable members)
// are skipped, so a gateway can later publish keys of a kind this version
// does not know. A key with private parameters, a kid used twice or a set
// with no usable key is an error.
func parsePublicJWKS(data []byte) (*publicKeys, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("assertion: JWKS is not a JSON JWK Set: %w", err)
	}
	if len(doc.Keys) > 4*maxKeys {
		return nil, fmt.Errorf("assertion: JWKS holds %d keys; at most %d are read", len(doc.Keys), 4*maxKeys)
	}
	pk := &publicKeys{byKID: make(map[string]jose.JSONWebKey, len(doc.Keys))}
	for i, r := range doc.Keys {
		var probe struct {
			D json.RawMessage `json:"d"`
			P json.RawMessage `json:"p"`
			K json.RawMessage `json:"k"`
		}
		if err := json.Unmarshal(r, &probe); err != nil {
			continue
		}
		if probe.D != nil || probe.P != nil || probe.K != nil {
			return nil, fmt.Errorf("assertion: JWKS keys[%d] holds private or secret key material; publish public keys only", i)
		}
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			continue
		}
		if k.KeyID == "" || (k.Use != "" && k.Use != "sig") || !k.IsPublic() || !k.Valid() {
			continue
		}
		switch key := k.Key.(type) {
		case ed25519.PublicKey:
			if k.Algorithm == "" {
				k.Algorithm = AlgEdDSA
			}
		case *ecdsa.PublicKey:
			if key.Curve != elliptic.P256() {
				continue
			}
			if k.Algorithm == "" {
				k.Algorithm = AlgES256
			}
		default:
			continue
		}
		if k.Algorithm != AlgEdDSA && k.Algorithm != AlgES256 {
			continue
		}
		if _, dup := pk.byKID[k.KeyID]; dup {
			return nil, fmt.Errorf("assertion: JWKS has two keys with kid %.64q", k.KeyID)
		}
		pk.byKID[k.KeyID] = k
	}
	if len(pk.byKID) == 0 {
		return nil, errors.New("assertion: JWKS has no usable key (Ed25519/EdDSA or P-256/ES256 with a kid)")
	}
	return pk, nil
}

// keyFits reports whether key may verify a signature made with alg: the
// key's alg is alg and its type is the one alg needs.
func keyFits(key jose.JSONWebKey, alg string) bool {
	if key.Algorithm != alg {
		return false
	}
	switch k := key.Key.(type) {
	case ed25519.PublicKey:
		return alg == AlgEdDSA
	case *ecdsa.PublicKey:
		return alg == AlgES256 && k.Curve == elliptic.P256()
	}
	return false
}

// typeOK reports whether the JOSE "typ" value is TokenType. Media type names
// are case-insensitive and "application/" may be left out (RFC 7515 section
// 4.1.9).
func typeOK(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	s = strings.ToLower(s)
	s = strings.TrimPrefix(s, "application/")
	return s == TokenType
}
