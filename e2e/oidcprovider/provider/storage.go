package provider

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// errNotFound is the storage's not-found error.
type errNotFound string

func (e errNotFound) Error() string { return string(e) + " not found" }
func (errNotFound) IsNotFound()     {}

var errUnsupported = errors.New("not supported by this provider")

// storage is the in-memory op.Storage.
type storage struct {
	cfg  *Config
	keys *keyring

	mu       sync.Mutex
	authReqs map[string]*authRequest // by ID
	codes    map[string]string       // code -> auth request ID
	tokens   map[string]*tokenRecord // by token ID (jti)
	opaque   map[string]string       // opaque token value -> token ID
}

var (
	_ op.Storage                   = (*storage)(nil)
	_ op.ClientCredentialsStorage  = (*storage)(nil)
	_ op.CanSetUserinfoFromRequest = (*storage)(nil)
)

func newStorage(cfg *Config, keys *keyring) *storage {
	return &storage{
		cfg:      cfg,
		keys:     keys,
		authReqs: map[string]*authRequest{},
		codes:    map[string]string{},
		tokens:   map[string]*tokenRecord{},
		opaque:   map[string]string{},
	}
}

// tokenRecord is an issued access token.
type tokenRecord struct {
	ID        string
	Format    string
	ClientID  string
	Subject   string
	Audience  []string
	Scopes    []string
	IssuedAt  time.Time
	NotBefore time.Time
	Expiry    time.Time
	Claims    map[string]any
	Revoked   bool
}

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *storage) saveToken(rec *tokenRecord, opaqueValue string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[rec.ID] = rec
	if opaqueValue != "" {
		s.opaque[opaqueValue] = rec.ID
	}
}

// tokenByOpaque returns the record of an opaque token value.
func (s *storage) tokenByOpaque(v string) (*tokenRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.opaque[v]
	if !ok {
		return nil, false
	}
	rec, ok := s.tokens[id]
	return rec, ok
}

func (s *storage) tokenByID(id string) (*tokenRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.tokens[id]
	return rec, ok
}

func (s *storage) revoke(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec, ok := s.tokens[id]; ok {
		rec.Revoked = true
	}
}

// --- AuthStorage ---

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, userID string) (op.AuthRequest, error) {
	ar := &authRequest{
		id:           randomID(16),
		created:      time.Now(),
		clientID:     req.ClientID,
		redirectURI:  req.RedirectURI,
		state:        req.State,
		nonce:        req.Nonce,
		scopes:       slices.Clone([]string(req.Scopes)),
		responseType: req.ResponseType,
		responseMode: req.ResponseMode,
		loginHint:    req.LoginHint,
		userID:       userID,
	}
	if req.CodeChallenge != "" {
		ar.codeChallenge = &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}
	}
	s.mu.Lock()
	s.authReqs[ar.id] = ar
	s.mu.Unlock()
	return ar, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authReqs[id]
	if !ok {
		return nil, errNotFound("auth request")
	}
	return ar, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.codes[code]
	if !ok {
		return nil, errNotFound("code")
	}
	ar, ok := s.authReqs[id]
	if !ok {
		return nil, errNotFound("auth request")
	}
	return ar, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.authReqs[id]; !ok {
		return errNotFound("auth request")
	}
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest also deletes its code, so a code is used at most once.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authReqs, id)
	for code, reqID := range s.codes {
		if reqID == id {
			delete(s.codes, code)
		}
	}
	return nil
}

// approve marks an auth request as logged in by subject.
func (s *storage) approve(id, subject string) (*authRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ar, ok := s.authReqs[id]
	if !ok {
		return nil, errNotFound("auth request")
	}
	ar.userID = subject
	ar.done = true
	ar.authTime = time.Now()
	return ar, nil
}

// setResources records the RFC 8707 resource indicators of an auth request.
func (s *storage) setResources(id string, resources []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar, ok := s.authReqs[id]; ok {
		ar.resources = slices.Clone(resources)
	}
}

func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return "", time.Time{}, errUnsupported
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(_ context.Context, tokenOrID, _, clientID string) *oidc.Error {
	rec, ok := s.tokenByOpaque(tokenOrID)
	if !ok {
		rec, ok = s.tokenByID(tokenOrID)
	}
	if !ok {
		return nil // RFC 7009: unknown tokens are not an error
	}
	if rec.ClientID != clientID {
		return oidc.ErrInvalidClient().WithDescription("token was issued to another client")
	}
	s.revoke(rec.ID)
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return s.keys.signer("RS256")
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	algs := make([]jose.SignatureAlgorithm, len(SigningAlgs))
	for i, a := range SigningAlgs {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	return algs, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return s.keys.keys(), nil
}

// --- OPStorage ---

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	cl := s.cfg.client(id)
	if cl == nil {
		return nil, errNotFound("client")
	}
	return &client{cfg: cl, idTokenLifetime: s.cfg.IDTokenLifetime.D()}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	cl := s.cfg.client(id)
	if cl == nil || cl.Secret == "" || subtle.ConstantTimeCompare([]byte(cl.Secret), []byte(secret)) != 1 {
		return errors.New("invalid client credentials")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	s.setUserinfo(info, req.GetSubject(), scopes)
	return nil
}

func (s *storage) setUserinfo(info *oidc.UserInfo, subject string, scopes []string) {
	info.Subject = subject
	u := s.cfg.user(subject)
	if u == nil {
		return
	}
	if slices.Contains(scopes, oidc.ScopeEmail) && u.Email != "" {
		info.Email = u.Email
		info.EmailVerified = true
	}
	if slices.Contains(scopes, oidc.ScopeProfile) {
		info.PreferredUsername = u.Subject
	}
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, subject, _ string) error {
	rec, ok := s.tokenByID(tokenID)
	if !ok || rec.Revoked || time.Now().After(rec.Expiry) {
		return errors.New("token is not active")
	}
	s.setUserinfo(info, subject, rec.Scopes)
	return nil
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported // the server answers introspection itself
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}

func (s *storage) Health(context.Context) error { return nil }

// --- ClientCredentialsStorage ---

func (s *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.GetClientByClientID(ctx, id)
}

func (s *storage) ClientCredentialsTokenRequest(_ context.Context, id string, scopes []string) (op.TokenRequest, error) {
	cl := s.cfg.client(id)
	if cl == nil {
		return nil, errNotFound("client")
	}
	return &ccRequest{subject: cl.Subject, audience: cl.Audience, scopes: scopes}, nil
}

// ccRequest is the op.TokenRequest of a client_credentials grant.
type ccRequest struct {
	subject  string
	audience []string
	scopes   []string
}

func (r *ccRequest) GetSubject() string    { return r.subject }
func (r *ccRequest) GetAudience() []string { return r.audience }
func (r *ccRequest) GetScopes() []string   { return r.scopes }

// --- auth request ---

type authRequest struct {
	id            string
	created       time.Time
	clientID      string
	redirectURI   string
	state         string
	nonce         string
	scopes        []string
	responseType  oidc.ResponseType
	responseMode  oidc.ResponseMode
	loginHint     string
	codeChallenge *oidc.CodeChallenge
	resources     []string

	userID   string
	done     bool
	authTime time.Time
}

var _ op.AuthRequest = (*authRequest)(nil)

func (a *authRequest) GetID() string  { return a.id }
func (a *authRequest) GetACR() string { return "" }
func (a *authRequest) GetAMR() []string {
	if a.done {
		return []string{"pwd"}
	}
	return nil
}
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.codeChallenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.userID }
func (a *authRequest) Done() bool                            { return a.done }

// --- client ---

type client struct {
	cfg             *Client
	idTokenLifetime time.Duration
}

var _ op.Client = (*client)(nil)

func (c *client) GetID() string                    { return c.cfg.ID }
func (c *client) RedirectURIs() []string           { return c.cfg.RedirectURIs }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) ApplicationType() op.ApplicationType {
	if c.cfg.Secret == "" {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeWeb
}
func (c *client) AuthMethod() oidc.AuthMethod {
	if c.cfg.Secret == "" {
		return oidc.AuthMethodNone
	}
	return oidc.AuthMethodBasic
}
func (c *client) ResponseTypes() []oidc.ResponseType {
	if slices.Contains(c.cfg.GrantTypes, GrantAuthorizationCode) {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}
func (c *client) GrantTypes() []oidc.GrantType {
	out := make([]oidc.GrantType, len(c.cfg.GrantTypes))
	for i, g := range c.cfg.GrantTypes {
		out[i] = oidc.GrantType(g)
	}
	return out
}
func (c *client) LoginURL(id string) string { return "/login?id=" + url.QueryEscape(id) }
func (c *client) AccessTokenType() op.AccessTokenType {
	if c.cfg.AccessTokenFormat == FormatOpaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}
func (c *client) IDTokenLifetime() time.Duration { return c.idTokenLifetime }
func (c *client) DevMode() bool                  { return true }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool {
	return len(c.cfg.Scopes) == 0 || slices.Contains(c.cfg.Scopes, scope)
}
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

func (c *client) String() string { return fmt.Sprintf("client(%s)", c.cfg.ID) }
