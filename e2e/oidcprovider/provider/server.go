package provider

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// server is zitadel's LegacyServer with the token-minting endpoints
// replaced: zitadel signs access tokens with typ "JWT" and without the
// scope claim and has no RFC 8707 resource parameter, so the grants that
// issue access tokens, introspection, revocation and userinfo are ours.
// Routing, request parsing, client authentication, redirect URI and PKCE
// method validation, auth codes, ID tokens, discovery and the JWKS stay
// zitadel's.
type server struct {
	*op.LegacyServer
	p *Provider
}

var _ op.ExtendedLegacyServer = (*server)(nil)

// Discovery adds the grants, PKCE method and response types this provider
// supports and counts the request.
func (s *server) Discovery(ctx context.Context, r *op.Request[struct{}]) (*op.Response, error) {
	s.p.discovery.Add(1)
	resp, err := s.LegacyServer.Discovery(ctx, r)
	if err != nil {
		return nil, err
	}
	if d, ok := resp.Data.(*oidc.DiscoveryConfiguration); ok {
		d.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeClientCredentials, oidc.GrantTypeTokenExchange}
		d.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
		d.CodeChallengeMethodsSupported = []oidc.CodeChallengeMethod{oidc.CodeChallengeMethodS256}
		d.DeviceAuthorizationEndpoint = ""
	}
	return resp, nil
}

// Keys counts JWKS requests.
func (s *server) Keys(ctx context.Context, r *op.Request[struct{}]) (*op.Response, error) {
	s.p.jwks.Add(1)
	resp, err := s.LegacyServer.Keys(ctx, r)
	if err != nil {
		return nil, err
	}
	resp.Header.Set("Cache-Control", "no-store")
	return resp, nil
}

// VerifyClient answers a failed client authentication with invalid_client
// (401): zitadel passes the storage's plain error on, which becomes a 500.
func (s *server) VerifyClient(ctx context.Context, r *op.Request[op.ClientCredentials]) (op.Client, error) {
	c, err := s.LegacyServer.VerifyClient(ctx, r)
	if err != nil {
		var oe *oidc.Error
		var se op.StatusError
		if !errors.As(err, &oe) && !errors.As(err, &se) {
			return nil, op.NewStatusError(oidc.ErrInvalidClient().WithParent(err), http.StatusUnauthorized)
		}
		return nil, err
	}
	return c, nil
}

// Authorize requires PKCE with S256 (OAuth 2.1), records the RFC 8707
// resource indicators and sends the browser to the auto-approving login.
func (s *server) Authorize(ctx context.Context, r *op.ClientRequest[oidc.AuthRequest]) (*op.Redirect, error) {
	if r.Data.RequestParam != "" {
		return nil, oidc.ErrRequestNotSupported()
	}
	if r.Data.IDTokenHint != "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("id_token_hint is not supported")
	}
	if r.Data.CodeChallenge == "" || r.Data.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method=S256 is required")
	}
	cl := s.p.cfg.client(r.Client.GetID())
	if err := checkScopes(cl, r.Data.Scopes); err != nil {
		return nil, err
	}
	resources := r.Form["resource"]
	if err := checkResources(cl, resources); err != nil {
		return nil, err
	}
	req, err := s.p.store.CreateAuthRequest(ctx, r.Data, "")
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	s.p.store.setResources(req.GetID(), resources)
	return op.NewRedirect(r.Client.LoginURL(req.GetID())), nil
}

// CodeExchange redeems an authorization code (once) for an access token and,
// with the openid scope, an ID token.
func (s *server) CodeExchange(ctx context.Context, r *op.ClientRequest[oidc.AccessTokenRequest]) (*op.Response, error) {
	authReq, err := op.AuthRequestByCode(ctx, s.p.store, r.Data.Code)
	if err != nil {
		return nil, err
	}
	ar := authReq.(*authRequest)
	// The code is single use whatever happens next.
	_ = s.p.store.DeleteAuthRequest(ctx, ar.id)
	if !ar.done {
		return nil, oidc.ErrInvalidGrant().WithDescription("authorization was not approved")
	}
	if ar.codeChallenge == nil {
		return nil, oidc.ErrInvalidGrant().WithDescription("code was issued without PKCE")
	}
	if err := op.AuthorizeCodeChallenge(r.Data.CodeVerifier, ar.codeChallenge); err != nil {
		return nil, err
	}
	if r.Client.GetID() != ar.clientID {
		return nil, oidc.ErrInvalidGrant().WithDescription("code was issued to another client")
	}
	if r.Data.RedirectURI != ar.redirectURI {
		return nil, oidc.ErrInvalidGrant().WithDescription("redirect_uri does not correspond")
	}
	cl := s.p.cfg.client(ar.clientID)
	resources := ar.resources
	if requested := r.Form["resource"]; len(requested) > 0 {
		if err := checkResources(cl, requested); err != nil {
			return nil, err
		}
		for _, res := range requested {
			if len(ar.resources) > 0 && !slices.Contains(ar.resources, res) {
				return nil, oidc.ErrInvalidTarget().WithDescription("resource %q was not part of the authorization", res)
			}
		}
		resources = requested
	}
	user := s.p.cfg.user(ar.userID)
	if user == nil {
		return nil, oidc.ErrInvalidGrant().WithDescription("user no longer exists")
	}
	is, err := s.p.issue(cl, ar.userID, user, ar.scopes, resources)
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	resp := &oidc.AccessTokenResponse{
		AccessToken: is.token,
		TokenType:   oidc.BearerToken,
		ExpiresIn:   is.expiresIn,
		Scope:       ar.scopes,
	}
	if slices.Contains(ar.scopes, oidc.ScopeOpenID) {
		resp.IDToken, err = op.CreateIDToken(s.p.withIssuer(ctx), s.p.cfg.Issuer, ar, r.Client.IDTokenLifetime(), is.token, r.Data.Code, s.p.store, r.Client)
		if err != nil {
			return nil, oidc.ErrServerError().WithParent(err)
		}
	}
	return op.NewResponse(resp), nil
}

// ClientCredentialsExchange issues an access token to an authenticated
// confidential client for the requested scopes and resources.
func (s *server) ClientCredentialsExchange(_ context.Context, r *op.ClientRequest[oidc.ClientCredentialsRequest]) (*op.Response, error) {
	cl := s.p.cfg.client(r.Client.GetID())
	scopes := []string(r.Data.Scope)
	if err := checkScopes(cl, scopes); err != nil {
		return nil, err
	}
	resources := r.Form["resource"]
	if err := checkResources(cl, resources); err != nil {
		return nil, err
	}
	is, err := s.p.issue(cl, cl.Subject, nil, scopes, resources)
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	return op.NewResponse(&oidc.AccessTokenResponse{
		AccessToken: is.token,
		TokenType:   oidc.BearerToken,
		ExpiresIn:   is.expiresIn,
		Scope:       scopes,
	}), nil
}

// RefreshToken, JWTProfile: not offered.
func (s *server) RefreshToken(context.Context, *op.ClientRequest[oidc.RefreshTokenRequest]) (*op.Response, error) {
	return nil, op.NewStatusError(oidc.ErrUnsupportedGrantType(), http.StatusBadRequest)
}

func (s *server) JWTProfile(context.Context, *op.Request[oidc.JWTProfileGrantRequest]) (*op.Response, error) {
	return nil, op.NewStatusError(oidc.ErrUnsupportedGrantType(), http.StatusBadRequest)
}

// Introspect is RFC 7662: an authenticated client asks about a token; the
// answer is {"active": false} for anything unknown, expired, not yet valid
// or revoked.
func (s *server) Introspect(_ context.Context, r *op.Request[op.IntrospectionRequest]) (*op.Response, error) {
	s.p.introspection.Add(1)
	cc := r.Data.ClientCredentials
	if cc.ClientAssertion != "" {
		return nil, op.NewStatusError(oidc.ErrInvalidClient().WithDescription("client_assertion not supported"), http.StatusUnauthorized)
	}
	if err := s.p.store.AuthorizeClientIDSecret(context.Background(), cc.ClientID, cc.ClientSecret); err != nil {
		return nil, op.NewStatusError(oidc.ErrInvalidClient(), http.StatusUnauthorized)
	}
	resp := &oidc.IntrospectionResponse{}
	rec, ok := s.p.lookup(r.Data.Token)
	if !ok || !rec.active(time.Now()) {
		return op.NewResponse(resp), nil
	}
	resp.Active = true
	resp.Scope = rec.Scopes
	resp.ClientID = rec.ClientID
	resp.TokenType = oidc.BearerToken
	resp.Expiration = oidc.FromTime(rec.Expiry)
	resp.IssuedAt = oidc.FromTime(rec.IssuedAt)
	resp.NotBefore = oidc.FromTime(rec.NotBefore)
	resp.Subject = rec.Subject
	resp.Audience = rec.Audience
	resp.Issuer = s.p.cfg.Issuer
	resp.JWTID = rec.ID
	resp.Claims = rec.Claims
	return op.NewResponse(resp), nil
}

// Revocation is RFC 7009 for access tokens issued to the calling client.
func (s *server) Revocation(_ context.Context, r *op.ClientRequest[oidc.RevocationRequest]) (*op.Response, error) {
	if rec, ok := s.p.lookup(r.Data.Token); ok && rec.ClientID == r.Client.GetID() {
		s.p.store.revoke(rec.ID)
	}
	return op.NewResponse(struct{}{}), nil
}

// UserInfo answers for active access tokens of users.
func (s *server) UserInfo(_ context.Context, r *op.Request[oidc.UserInfoRequest]) (*op.Response, error) {
	rec, ok := s.p.lookup(r.Data.AccessToken)
	if !ok || !rec.active(time.Now()) {
		return nil, op.NewStatusError(oidc.ErrAccessDenied().WithDescription("access token invalid"), http.StatusUnauthorized)
	}
	info := &oidc.UserInfo{}
	s.p.store.setUserinfo(info, rec.Subject, rec.Scopes)
	return op.NewResponse(info), nil
}
