package provider

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Admin and helper routes served beside the OpenID endpoints.
const (
	// PathRotate rotates the signing keys (POST). With ?retire=true the
	// previous generation leaves the JWKS at once; otherwise it stays
	// published until the next rotation.
	PathRotate = "/admin/rotate"
	// PathStats returns the request counters as JSON (GET).
	PathStats = "/admin/stats"
	// PathLogin is where the authorization endpoint sends the browser; it
	// logs in and approves without a page, or with Config.LoginForm shows
	// a sign-in form that posts back to it (loginform.go).
	PathLogin = "/login"
	// PathASMetadata is the RFC 8414 authorization server metadata.
	PathASMetadata = "/.well-known/oauth-authorization-server"
	// PathDiscovery is the OpenID Connect discovery document.
	PathDiscovery = "/.well-known/openid-configuration"
)

// Stats counts requests, for tests that assert how often a relying party
// came back (for example, JWKS fetches under an unknown-kid flood).
type Stats struct {
	DiscoveryRequests     int64 `json:"discovery_requests"`
	JWKSRequests          int64 `json:"jwks_requests"`
	TokensIssued          int64 `json:"tokens_issued"`
	IntrospectionRequests int64 `json:"introspection_requests"`
	// TokenExchanges counts RFC 8693 token exchange requests, granted or
	// refused.
	TokenExchanges int64 `json:"token_exchanges"`
	KeyGeneration  int   `json:"key_generation"`
}

// RotateResult is the answer of PathRotate.
type RotateResult struct {
	Generation int      `json:"generation"`
	Active     []string `json:"active"`
	Published  []string `json:"published"`
}

// Provider is the OpenID provider: an http.Handler.
type Provider struct {
	cfg     *Config
	keys    *keyring
	store   *storage
	op      *op.Provider
	server  *server
	handler http.Handler

	discovery     atomic.Int64
	jwks          atomic.Int64
	issued        atomic.Int64
	introspection atomic.Int64
	exchanges     atomic.Int64
}

// New builds a provider. cfg must have its Issuer set and be valid.
func New(cfg *Config) (*Provider, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("issuer is required")
	}
	cfg.Issuer = strings.TrimSuffix(cfg.Issuer, "/")
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	keys, err := newKeyring()
	if err != nil {
		return nil, err
	}
	p := &Provider{cfg: cfg, keys: keys, store: newStorage(cfg, keys)}

	opCfg := &op.Config{
		CodeMethodS256: true,
		AuthMethodPost: true,
		SupportedClaims: append(slices.Clone(op.DefaultSupportedClaims),
			"nbf", "jti", "scope", cfg.TenantClaim, cfg.RolesClaim),
	}
	if _, err := rand.Read(opCfg.CryptoKey[:]); err != nil {
		return nil, err
	}
	var opts []op.Option
	if strings.HasPrefix(cfg.Issuer, "http://") {
		opts = append(opts, op.WithAllowInsecure())
	}
	p.op, err = op.NewProvider(opCfg, p.store, op.StaticIssuer(cfg.Issuer), opts...)
	if err != nil {
		return nil, fmt.Errorf("create provider: %w", err)
	}
	endpoints := *op.DefaultEndpoints
	endpoints.DeviceAuthorization = nil
	p.server = &server{LegacyServer: op.NewLegacyServer(p.op, endpoints), p: p}
	oidcHandler := op.RegisterLegacyServer(p.server, op.AuthorizeCallbackHandler(p.op))

	mux := http.NewServeMux()
	mux.Handle("/", oidcHandler)
	mux.HandleFunc("GET "+PathLogin, p.login)
	mux.HandleFunc("POST "+PathLogin, p.loginSubmit)
	mux.HandleFunc("GET "+PathASMetadata, p.asMetadata)
	mux.HandleFunc("POST "+PathRotate, p.rotate)
	mux.HandleFunc("GET "+PathStats, p.stats)
	p.handler = mux
	return p, nil
}

// ServeHTTP serves every endpoint of the provider.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.handler.ServeHTTP(w, r) }

// Issuer returns the issuer identifier.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Stats returns the request counters.
func (p *Provider) Stats() Stats {
	gen, _, _ := p.keys.state()
	return Stats{
		DiscoveryRequests:     p.discovery.Load(),
		JWKSRequests:          p.jwks.Load(),
		TokensIssued:          p.issued.Load(),
		IntrospectionRequests: p.introspection.Load(),
		TokenExchanges:        p.exchanges.Load(),
		KeyGeneration:         gen,
	}
}

// Rotate rotates the signing keys; see PathRotate.
func (p *Provider) Rotate(retire bool) (RotateResult, error) {
	if err := p.keys.rotate(retire); err != nil {
		return RotateResult{}, err
	}
	gen, active, published := p.keys.state()
	return RotateResult{Generation: gen, Active: active, Published: published}, nil
}

func (p *Provider) rotate(w http.ResponseWriter, r *http.Request) {
	retire := false
	if v := r.URL.Query().Get("retire"); v != "" {
		switch v {
		case "true", "1":
			retire = true
		case "false", "0":
		default:
			http.Error(w, "retire must be true or false", http.StatusBadRequest)
			return
		}
	}
	res, err := p.Rotate(retire)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	slog.Info("rotated signing keys", "generation", res.Generation, "retire_previous", retire)
	writeJSON(w, res)
}

func (p *Provider) stats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, p.Stats())
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// login approves an auth request for the configured test user (or the
// configured user named in login_hint) and sends the browser back to the
// authorization callback, which issues the code.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	ar, err := p.store.AuthRequestByID(r.Context(), id)
	if err != nil {
		http.Error(w, "unknown auth request", http.StatusBadRequest)
		return
	}
	if p.cfg.LoginForm {
		p.showLoginForm(w, ar.(*authRequest), ar.(*authRequest).loginHint, "", http.StatusOK)
		return
	}
	subject := p.cfg.AutoApproveUser
	if hint := ar.(*authRequest).loginHint; hint != "" {
		if p.cfg.user(hint) == nil {
			http.Error(w, "login_hint names no configured user", http.StatusBadRequest)
			return
		}
		subject = hint
	}
	if subject == "" {
		http.Error(w, "no user configured to approve the request", http.StatusBadRequest)
		return
	}
	if _, err := p.store.approve(id, subject); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	callback := p.cfg.Issuer + p.server.Endpoints().Authorization.Relative() + "/callback?id=" + url.QueryEscape(id)
	http.Redirect(w, r, callback, http.StatusFound)
}

// asMetadata serves RFC 8414 authorization server metadata: the discovery
// document, which already holds every RFC 8414 field.
func (p *Provider) asMetadata(w http.ResponseWriter, r *http.Request) {
	ctx := op.ContextWithIssuer(r.Context(), p.cfg.Issuer)
	resp, err := p.server.Discovery(ctx, &op.Request[struct{}]{Method: r.Method, URL: r.URL, Header: r.Header})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, resp.Data)
}

// issued is what issue returns.
type issued struct {
	token     string
	expiresIn uint64
	record    *tokenRecord
}

// issue mints an access token for cl: an RFC 9068 JWT (typ, alg and
// lifetime from the client's config) or an opaque value.
func (p *Provider) issue(cl *Client, subject string, user *User, scopes, resources []string) (*issued, error) {
	now := time.Now().Truncate(time.Second)
	aud := resources
	if len(aud) == 0 {
		aud = cl.Audience
	}
	claims := map[string]any{}
	for k, v := range cl.Claims {
		claims[k] = v
	}
	tenant, roles := cl.Tenant, cl.Roles
	if user != nil {
		tenant, roles = user.Tenant, user.Roles
		for k, v := range user.Claims {
			claims[k] = v
		}
	}
	if tenant != "" {
		claims[p.cfg.TenantClaim] = tenant
	}
	if len(roles) > 0 {
		claims[p.cfg.RolesClaim] = roles
	}
	rec := &tokenRecord{
		ID:        randomID(16),
		Format:    cl.AccessTokenFormat,
		ClientID:  cl.ID,
		Subject:   subject,
		Audience:  slices.Clone(aud),
		Scopes:    slices.Clone(scopes),
		IssuedAt:  now,
		NotBefore: now.Add(cl.NotBefore.D()),
		Expiry:    now.Add(p.cfg.lifetime(cl)),
		Claims:    claims,
	}
	var expiresIn uint64
	if d := time.Until(rec.Expiry); d > 0 {
		expiresIn = uint64(d.Seconds())
	}
	if cl.AccessTokenFormat == FormatOpaque {
		value := randomID(32)
		p.store.saveToken(rec, value)
		p.issued.Add(1)
		return &issued{token: value, expiresIn: expiresIn, record: rec}, nil
	}

	atc := &oidc.AccessTokenClaims{
		TokenClaims: oidc.TokenClaims{
			Issuer:     p.cfg.Issuer,
			Subject:    subject,
			Audience:   aud,
			Expiration: oidc.FromTime(rec.Expiry),
			IssuedAt:   oidc.FromTime(rec.IssuedAt),
			NotBefore:  oidc.FromTime(rec.NotBefore),
			ClientID:   cl.ID,
			JWTID:      rec.ID,
		},
		Scopes: scopes,
		Claims: claims,
	}
	payload, err := json.Marshal(atc)
	if err != nil {
		return nil, fmt.Errorf("marshal claims: %w", err)
	}
	key, err := p.keys.signer(cl.SigningAlg)
	if err != nil {
		return nil, err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: key.alg, Key: jose.JSONWebKey{Key: key.priv, KeyID: key.id}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(cl.AccessTokenType)),
	)
	if err != nil {
		return nil, fmt.Errorf("signer: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	token, err := jws.CompactSerialize()
	if err != nil {
		return nil, err
	}
	p.store.saveToken(rec, "")
	p.issued.Add(1)
	return &issued{token: token, expiresIn: expiresIn, record: rec}, nil
}

// lookup finds the record of an access token this provider issued: an
// opaque value, or a JWT whose signature verifies with a published key.
func (p *Provider) lookup(raw string) (*tokenRecord, bool) {
	if rec, ok := p.store.tokenByOpaque(raw); ok {
		return rec, true
	}
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{jose.RS256, jose.PS256, jose.ES256, jose.EdDSA})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, false
	}
	key, ok := p.keys.lookup(jws.Signatures[0].Header.KeyID)
	if !ok {
		return nil, false
	}
	payload, err := jws.Verify(key.priv.Public())
	if err != nil {
		return nil, false
	}
	var c struct {
		JTI string `json:"jti"`
	}
	if json.Unmarshal(payload, &c) != nil || c.JTI == "" {
		return nil, false
	}
	return p.store.tokenByID(c.JTI)
}

// active reports whether rec is usable now.
func (rec *tokenRecord) active(now time.Time) bool {
	return rec != nil && !rec.Revoked && now.Before(rec.Expiry) && !now.Before(rec.NotBefore)
}

// checkScopes refuses scopes the client may not request (invalid_scope).
func checkScopes(cl *Client, scopes []string) error {
	if len(cl.Scopes) == 0 {
		return nil
	}
	for _, s := range scopes {
		if s == oidc.ScopeOpenID || s == oidc.ScopeProfile || s == oidc.ScopeEmail {
			continue
		}
		if !slices.Contains(cl.Scopes, s) {
			return oidc.ErrInvalidScope().WithDescription("scope %q is not allowed for this client", s)
		}
	}
	return nil
}

// checkResources validates RFC 8707 resource indicators (invalid_target).
func checkResources(cl *Client, resources []string) error {
	for _, r := range resources {
		if err := validResource(r); err != nil {
			return oidc.ErrInvalidTarget().WithDescription("resource must be an absolute URI without fragment")
		}
		if len(cl.Resources) > 0 && !slices.Contains(cl.Resources, r) {
			return oidc.ErrInvalidTarget().WithDescription("resource %q is not allowed for this client", r)
		}
	}
	return nil
}

// withIssuer is used where zitadel helpers read the issuer from the context.
func (p *Provider) withIssuer(ctx context.Context) context.Context {
	return op.ContextWithIssuer(ctx, p.cfg.Issuer)
}
