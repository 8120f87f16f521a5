package auth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// Verifier verifies bearer tokens for MCP routes. It is safe for concurrent
// use.
type Verifier struct {
	issuers []*issuer
	byIss   map[string]*issuer
	opaque  *issuer // the issuer that introspects opaque tokens, if any
	algs    map[string]bool
	cache   *tokenCache
	now     func() time.Time
	log     *slog.Logger
}

// issuer is one configured authorization server, discovered.
type issuer struct {
	cfg          IssuerConfig
	algs         map[string]bool
	joseAlgs     []jose.SignatureAlgorithm
	types        map[string]bool
	audiences    map[string]bool // nil: any route
	keys         *keySet
	verifier     *oidc.IDTokenVerifier
	introspector *introspector
}

type settings struct {
	client    *http.Client
	now       func() time.Time
	cacheSize int
	log       *slog.Logger
}

// Option configures NewVerifier.
type Option func(*settings)

// WithHTTPClient sets the client for discovery, JWKS and introspection.
// Default: a client with a 10s timeout.
func WithHTTPClient(c *http.Client) Option { return func(s *settings) { s.client = c } }

// WithClock sets the clock for expiry checks and refresh intervals (tests).
func WithClock(now func() time.Time) Option { return func(s *settings) { s.now = now } }

// WithTokenCacheSize bounds the verified-token cache (entries). 0 disables
// it. Default 10000.
func WithTokenCacheSize(n int) Option { return func(s *settings) { s.cacheSize = n } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(s *settings) { s.log = l } }

// ValidateIssuers checks issuer configs without any network access (for
// "mcpgate validate"), reporting every problem at once.
func ValidateIssuers(issuers []IssuerConfig) error {
	_, err := prepareIssuers(issuers)
	return err
}

// prepareIssuers applies defaults and validates.
func prepareIssuers(issuers []IssuerConfig) ([]IssuerConfig, error) {
	if len(issuers) == 0 {
		return nil, errors.New("auth: no issuer configured")
	}
	var errs []error
	cfgs := make([]IssuerConfig, len(issuers))
	seen := map[string]bool{}
	introspecting := 0
	for i, ic := range issuers {
		cfgs[i] = ic.withDefaults()
		if err := cfgs[i].validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[cfgs[i].Issuer] {
			errs = append(errs, fmt.Errorf("issuer %q: configured twice", cfgs[i].Issuer))
		}
		seen[cfgs[i].Issuer] = true
		if cfgs[i].Introspection != nil {
			introspecting++
		}
	}
	if introspecting > 1 {
		errs = append(errs, errors.New("introspection: at most one issuer may introspect opaque tokens (they carry no issuer to route on)"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return cfgs, nil
}

// NewVerifier discovers every issuer (go-oidc), fetches its JWKS once and
// returns a Verifier. Every configuration problem is reported at once; an
// unreachable issuer is an error.
func NewVerifier(ctx context.Context, issuers []IssuerConfig, opts ...Option) (*Verifier, error) {
	s := settings{
		client:    &http.Client{Timeout: DefaultHTTPTimeout},
		now:       time.Now,
		cacheSize: DefaultTokenCacheSize,
		log:       slog.Default(),
	}
	for _, o := range opts {
		o(&s)
	}
	cfgs, err := prepareIssuers(issuers)
	if err != nil {
		return nil, err
	}
	var errs []error
	v := &Verifier{
		byIss: map[string]*issuer{},
		algs:  map[string]bool{},
		cache: newTokenCache(s.cacheSize),
		now:   s.now,
		log:   s.log,
	}
	octx := oidc.ClientContext(ctx, s.client)
	for _, cfg := range cfgs {
		iss, err := v.discover(octx, cfg, s)
		if err != nil {
			errs = append(errs, fmt.Errorf("issuer %q: %w", cfg.Issuer, err))
			continue
		}
		v.issuers = append(v.issuers, iss)
		v.byIss[cfg.Issuer] = iss
		for a := range iss.algs {
			v.algs[a] = true
		}
		if iss.introspector != nil {
			v.opaque = iss
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	return v, nil
}

func (v *Verifier) discover(ctx context.Context, cfg IssuerConfig, s settings) (*issuer, error) {
	p, err := oidc.NewProvider(ctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	var meta struct {
		JWKSURI       string `json:"jwks_uri"`
		Introspection string `json:"introspection_endpoint"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if meta.JWKSURI == "" {
		return nil, errors.New("discovery: no jwks_uri")
	}
	iss, err := v.newIssuer(cfg, meta.JWKSURI, meta.Introspection, s)
	if err != nil {
		return nil, err
	}
	if err := iss.keys.refresh(ctx); err != nil {
		return nil, fmt.Errorf("JWKS: %w", err)
	}
	return iss, nil
}

// newIssuer builds an issuer from its config and discovered endpoints; its
// key set is still empty.
func (v *Verifier) newIssuer(cfg IssuerConfig, jwksURI, introspectionEndpoint string, s settings) (*issuer, error) {
	iss := &issuer{
		cfg:   cfg,
		algs:  map[string]bool{},
		types: map[string]bool{},
	}
	for _, a := range cfg.Algorithms {
		iss.algs[a] = true
		iss.joseAlgs = append(iss.joseAlgs, jose.SignatureAlgorithm(a))
	}
	for _, t := range cfg.Types {
		iss.types[normalizeTyp(t)] = true
	}
	if len(cfg.Audiences) > 0 {
		iss.audiences = map[string]bool{}
		for _, a := range cfg.Audiences {
			iss.audiences[a] = true
		}
	}
	iss.keys = &keySet{
		url:        jwksURI,
		client:     s.client,
		minRefresh: cfg.MinJWKSRefresh,
		maxAge:     cfg.JWKSMaxAge,
		now:        s.now,
		log:        s.log.With("issuer", cfg.Issuer),
		onUpdate: func(kids map[string]bool) {
			if n := v.cache.dropKeys(iss, kids); n > 0 {
				s.log.Info("dropped cached tokens whose key left the JWKS", "issuer", cfg.Issuer, "tokens", n)
			}
		},
	}
	// go-oidc checks the signature (through our key set), the alg against
	// the allowlist and iss; expiry and audience are ours (skew, RFC 8707).
	iss.verifier = oidc.NewVerifier(cfg.Issuer, keySetAdapter{iss}, &oidc.Config{
		SkipClientIDCheck:    true,
		SkipExpiryCheck:      true,
		SupportedSigningAlgs: cfg.Algorithms,
	})
	if in := cfg.Introspection; in != nil {
		endpoint := in.Endpoint
		if endpoint == "" {
			endpoint = introspectionEndpoint
		}
		if endpoint == "" {
			return nil, errors.New("introspection: no endpoint configured or discovered")
		}
		iss.introspector = &introspector{
			endpoint:     endpoint,
			clientID:     in.ClientID,
			clientSecret: in.ClientSecret,
			ttl:          in.CacheTTL,
			client:       s.client,
			sem:          make(chan struct{}, in.MaxConcurrent),
		}
	}
	return iss, nil
}

// Verify verifies a bearer token for the MCP route whose canonical URI is
// audience (see CanonicalResourceURI) and returns its claims. The caller
// owns the returned Claims.
//
// A JWT is verified against the issuer named by its iss (signature, alg and
// typ allowlists, exp/nbf/iat with the clock skew, aud containing
// audience); any other token is introspected if an issuer is configured
// for it. A verified token is cached until it expires; further calls only
// hash it and check expiry and audience.
//
// Errors are *Error values wrapping ErrInvalidToken, ErrMissingToken or
// ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, rawToken, audience string) (*Claims, error) {
	if rawToken == "" {
		return nil, newError(ReasonMissing, nil)
	}
	if len(rawToken) > MaxTokenLength {
		return nil, newError(ReasonMalformed, errors.New("token too long"))
	}
	if audience == "" {
		return nil, newError(ReasonWrongAudience, errors.New("no audience to verify against"))
	}
	now := v.now()
	key := sha256.Sum256([]byte(rawToken))
	if e := v.cache.get(key); e != nil {
		if now.Before(e.validUntil) {
			if e.jwt {
				e.issuer.keys.refreshIfStale()
			}
			return e.check(audience)
		}
		if e.jwt {
			return nil, newError(ReasonExpired, fmt.Errorf("token expired at %s", e.claims.Expiry.UTC().Format(time.RFC3339)))
		}
		v.cache.delete(key) // introspection answer too old: ask again
	}
	if strings.Count(rawToken, ".") == 2 {
		return v.verifyJWT(ctx, rawToken, audience, key, now)
	}
	if v.opaque != nil {
		return v.verifyOpaque(ctx, rawToken, audience, key, now)
	}
	return nil, newError(ReasonMalformed, errors.New("not a JWT and no issuer introspects opaque tokens"))
}

// check returns a copy of the entry's claims if audience is one of its
// audiences and one the issuer may serve.
func (e *cacheEntry) check(audience string) (*Claims, error) {
	if e.issuer.audiences != nil && !e.issuer.audiences[audience] {
		return nil, newError(ReasonWrongAudience, fmt.Errorf("issuer %q is not trusted for %q", e.issuer.cfg.Issuer, audience))
	}
	for _, a := range e.audiences {
		if a == audience {
			return e.claims.clone(), nil
		}
	}
	return nil, newError(ReasonWrongAudience, fmt.Errorf("aud %q does not contain %q", e.audiences, audience))
}

// jwtHeader is the part of the JOSE header we check before go-oidc runs.
type jwtHeader struct {
	Alg  string   `json:"alg"`
	Typ  *string  `json:"typ"`
	Kid  string   `json:"kid"`
	Crit []string `json:"crit"`
}

func (v *Verifier) verifyJWT(ctx context.Context, raw, audience string, key [32]byte, now time.Time) (*Claims, error) {
	parts := strings.SplitN(raw, ".", 3)
	var hdr jwtHeader
	if err := decodeSegment(parts[0], &hdr); err != nil {
		return nil, newError(ReasonMalformed, fmt.Errorf("header: %w", err))
	}
	var unverified struct {
		Iss string `json:"iss"`
	}
	if err := decodeSegment(parts[1], &unverified); err != nil {
		return nil, newError(ReasonMalformed, fmt.Errorf("payload: %w", err))
	}
	// The alg is checked before anything else: "none" and HMAC never get
	// near a key.
	if !v.algs[hdr.Alg] {
		return nil, newError(ReasonAlgNotAllowed, fmt.Errorf("alg %q", hdr.Alg))
	}
	iss := v.byIss[unverified.Iss]
	if iss == nil {
		return nil, newError(ReasonWrongIssuer, fmt.Errorf("iss %q", unverified.Iss))
	}
	if !iss.algs[hdr.Alg] {
		return nil, newError(ReasonAlgNotAllowed, fmt.Errorf("alg %q for issuer %q", hdr.Alg, iss.cfg.Issuer))
	}
	typ := ""
	if hdr.Typ != nil {
		typ = *hdr.Typ
	}
	if !iss.types[normalizeTyp(typ)] {
		return nil, newError(ReasonTypNotAllowed, fmt.Errorf("typ %q", typ))
	}
	if len(hdr.Crit) > 0 {
		return nil, newError(ReasonMalformed, fmt.Errorf("unsupported critical header parameters %q", hdr.Crit))
	}

	st := &sigState{}
	tok, err := iss.verifier.Verify(context.WithValue(ctx, sigStateKey{}, st), raw)
	if err != nil {
		if st.err != nil {
			return nil, st.err
		}
		return nil, newError(ReasonMalformed, err)
	}
	var m rawClaims
	if err := tok.Claims(&m); err != nil {
		return nil, newError(ReasonMalformed, err)
	}
	skew := iss.cfg.ClockSkew
	exp, ok, err := m.time("exp")
	if err != nil {
		return nil, newError(ReasonMalformed, err)
	}
	if !ok {
		return nil, newError(ReasonMalformed, errors.New("claim \"exp\": missing"))
	}
	claims, err := iss.validClaims(m, exp, true, now)
	if err != nil {
		return nil, err
	}
	e := &cacheEntry{
		claims:     claims,
		audiences:  claims.Audience,
		validUntil: exp.Add(skew),
		issuer:     iss,
		kid:        st.kid,
		jwt:        true,
	}
	// Cached before the audience check: the token is valid, whichever
	// route it is for.
	v.cache.put(key, e, now)
	return e.check(audience)
}

func (v *Verifier) verifyOpaque(ctx context.Context, raw, audience string, key [32]byte, now time.Time) (*Claims, error) {
	iss := v.opaque
	m, ierr := iss.introspector.introspect(ctx, raw)
	if ierr != nil {
		return nil, ierr
	}
	if s, ok, err := m.str("iss"); err != nil {
		return nil, newError(ReasonMalformed, err)
	} else if ok && s != iss.cfg.Issuer {
		return nil, newError(ReasonWrongIssuer, fmt.Errorf("introspection iss %q", s))
	}
	skew := iss.cfg.ClockSkew
	exp, hasExp, err := m.time("exp")
	if err != nil {
		return nil, newError(ReasonMalformed, err)
	}
	claims, err := iss.validClaims(m, exp, hasExp, now)
	if err != nil {
		return nil, err
	}
	claims.Introspected = true
	e := &cacheEntry{claims: claims, audiences: claims.Audience, issuer: iss}
	if hasExp {
		e.validUntil = exp.Add(skew)
		if ttl := iss.introspector.ttl; ttl > 0 && now.Add(ttl).Before(e.validUntil) {
			e.validUntil = now.Add(ttl)
		}
		v.cache.put(key, e, now)
	}
	return e.check(audience)
}

// validClaims applies the time checks (exp when hasExp, nbf and iat, with
// the issuer's skew) shared by signed and introspected tokens and maps the
// claims; audiences are returned canonical, not yet checked against the
// route.
func (iss *issuer) validClaims(m rawClaims, exp time.Time, hasExp bool, now time.Time) (*Claims, error) {
	skew := iss.cfg.ClockSkew
	if hasExp && !now.Before(exp.Add(skew)) {
		return nil, newError(ReasonExpired, fmt.Errorf("token expired at %s", exp.UTC().Format(time.RFC3339)))
	}
	if err := checkNotBefore(m, now, skew); err != nil {
		return nil, err
	}
	auds, err := m.audiences()
	if err != nil {
		return nil, newError(ReasonMalformed, err)
	}
	claims, err := iss.mapClaims(m)
	if err != nil {
		return nil, newError(ReasonMalformed, err)
	}
	claims.Expiry = exp
	claims.Audience = canonicalAudiences(auds)
	return claims, nil
}

// checkNotBefore refuses tokens whose nbf or iat lies beyond now + skew.
func checkNotBefore(m rawClaims, now time.Time, skew time.Duration) error {
	for _, name := range []string{"nbf", "iat"} {
		t, ok, err := m.time(name)
		if err != nil {
			return newError(ReasonMalformed, err)
		}
		if ok && now.Add(skew).Before(t) {
			return newError(ReasonNotYetValid, fmt.Errorf("%s is %s", name, t.UTC().Format(time.RFC3339)))
		}
	}
	return nil
}

func canonicalAudiences(auds []string) []string {
	out := make([]string, len(auds))
	for i, a := range auds {
		if c, err := CanonicalResourceURI(a); err == nil {
			out[i] = c
		} else {
			out[i] = a
		}
	}
	return out
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// sigState carries, through go-oidc's Verify, which key verified the
// signature or why none did: go-oidc flattens key set errors into text.
type sigState struct {
	kid string
	err *Error
}

type sigStateKey struct{}

// keySetAdapter is the oidc.KeySet go-oidc verifies signatures with.
type keySetAdapter struct{ iss *issuer }

var _ oidc.KeySet = keySetAdapter{}

// VerifySignature parses the JWS, selects the keys for its kid and alg
// (fetching the JWKS, rate-limited, for an unknown kid) and verifies.
func (a keySetAdapter) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	st, _ := ctx.Value(sigStateKey{}).(*sigState)
	if st == nil {
		st = &sigState{}
	}
	jws, err := jose.ParseSignedCompact(raw, a.iss.joseAlgs)
	if err != nil {
		st.err = newError(ReasonMalformed, err)
		return nil, st.err
	}
	if len(jws.Signatures) != 1 {
		st.err = newError(ReasonMalformed, errors.New("not exactly one signature"))
		return nil, st.err
	}
	h := jws.Signatures[0].Header
	keys, kerr := a.iss.keys.find(ctx, h.KeyID, h.Algorithm)
	if kerr != nil {
		st.err = kerr
		return nil, kerr
	}
	for i := range keys {
		if payload, err := jws.Verify(&keys[i]); err == nil {
			st.kid = keys[i].KeyID
			return payload, nil
		}
	}
	st.err = newError(ReasonBadSignature, fmt.Errorf("signature does not verify with key %q", h.KeyID))
	return nil, st.err
}
