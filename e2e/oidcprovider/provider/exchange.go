package provider

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// TokenExchange is RFC 8693 token exchange without an actor token: an
// authenticated client whose grant_types include GrantTokenExchange trades
// an active access token this provider issued (subject_token_type
// access_token, or jwt for a JWT access token) for an access token of the
// requested audience and/or resource. The new token keeps the subject, the
// tenant, roles and extra claims of the subject token, and names the
// exchanging client in the act claim (RFC 8693 section 4.1).
//
// Refusals: unauthorized_client (the client may not exchange),
// invalid_grant (the subject token is unknown, expired, revoked or not yet
// valid), invalid_target (an audience or resource the client may not
// request), invalid_scope (a scope the client may not request or the
// subject token does not hold), invalid_request (actor tokens, requested
// token types other than access_token).
func (s *server) TokenExchange(_ context.Context, r *op.ClientRequest[oidc.TokenExchangeRequest]) (*op.Response, error) {
	s.p.exchanges.Add(1)
	cl := s.p.cfg.client(r.Client.GetID())
	if cl == nil || !slices.Contains(cl.GrantTypes, GrantTokenExchange) {
		return nil, oidc.ErrUnauthorizedClient().WithDescription("client may not use token exchange")
	}
	d := r.Data
	switch d.SubjectTokenType {
	case oidc.AccessTokenType, oidc.JWTTokenType:
	default:
		return nil, oidc.ErrInvalidRequest().WithDescription("subject_token_type must be access_token or jwt")
	}
	if d.RequestedTokenType != "" && d.RequestedTokenType != oidc.AccessTokenType {
		return nil, oidc.ErrInvalidRequest().WithDescription("requested_token_type must be access_token")
	}
	if d.ActorToken != "" || d.ActorTokenType != "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("actor tokens are not supported")
	}
	rec, ok := s.p.lookup(d.SubjectToken)
	if !ok || !rec.active(time.Now()) {
		return nil, oidc.ErrInvalidGrant().WithDescription("subject_token is not an active access token of this provider")
	}
	if d.SubjectTokenType == oidc.JWTTokenType && rec.Format != FormatJWT {
		return nil, oidc.ErrInvalidGrant().WithDescription("subject_token is not a JWT")
	}

	// RFC 8693 section 2.1: audience is any string, resource an absolute URI.
	resources := d.Resource
	if err := checkResources(cl, resources); err != nil {
		return nil, err
	}
	for _, a := range d.Audience {
		if a == "" || (len(cl.Resources) > 0 && !slices.Contains(cl.Resources, a)) {
			return nil, oidc.ErrInvalidTarget().WithDescription("audience %q is not allowed for this client", a)
		}
	}
	aud := append(slices.Clone([]string(d.Audience)), resources...)

	scopes := []string(d.Scopes)
	if len(scopes) == 0 {
		scopes = rec.Scopes
	}
	if err := checkScopes(cl, scopes); err != nil {
		return nil, err
	}
	if len(rec.Scopes) > 0 {
		for _, sc := range scopes {
			if !slices.Contains(rec.Scopes, sc) {
				return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not held by the subject token", sc)
			}
		}
	}

	// The subject token's claims (tenant, roles, extra claims) travel as
	// the claims of a user, which win over the exchanging client's.
	claims := maps.Clone(rec.Claims)
	if claims == nil {
		claims = map[string]any{}
	}
	claims["act"] = map[string]any{"sub": cl.Subject}
	is, err := s.p.issue(cl, rec.Subject, &User{Subject: rec.Subject, Claims: claims}, scopes, aud)
	if err != nil {
		return nil, oidc.ErrServerError().WithParent(err)
	}
	return op.NewResponse(&oidc.TokenExchangeResponse{
		AccessToken:     is.token,
		IssuedTokenType: oidc.AccessTokenType,
		TokenType:       oidc.BearerToken,
		ExpiresIn:       is.expiresIn,
		Scopes:          scopes,
	}), nil
}
