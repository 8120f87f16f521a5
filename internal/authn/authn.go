// Package authn is the gateway's Authenticator (gateway.Authenticator). It
// takes the bearer token from the Authorization header only and accepts
// two kinds of credential:
//
//   - gateway-issued MCP tokens (internal/tokens; prefix "mcpg_"), looked
//     up by hash on every call, so a revocation takes effect at once;
//   - OAuth 2.1 access tokens, verified with the auth package for the
//     resource URI of the route called.
//
// Then it binds the tenant (a tenant named in the transport, the
// configured tenant header, must be one the credential serves) and, when a
// rights source is configured, looks up the person's live rights: an
// inactive person fails the credential (401), effective rights = the
// credential's rights ∩ live rights. It also builds each route's protected
// resource metadata (RFC 9728) and the WWW-Authenticate challenges that
// point at it.
//
// The pipeline calls it; the package keeps net/http and the auth package
// out of gateway.
package authn

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
)

// Verifier verifies a bearer token for a resource URI; *auth.Verifier
// implements it.
type Verifier interface {
	Verify(ctx context.Context, rawToken, audience string) (*auth.Claims, error)
}

var _ Verifier = (*auth.Verifier)(nil)

// Route is one MCP route, a protected resource of its own.
type Route struct {
	// Upstream is the configured upstream name (gateway.Request.Upstream).
	Upstream string
	// Path is the route's path on the gateway, e.g. "/mcp".
	Path string
	// Scopes are scopes_supported of the route's metadata.
	Scopes []string
}

// GatewayTokens verifies gateway-issued MCP tokens; *tokens.Service
// implements it.
type GatewayTokens interface {
	Verify(ctx context.Context, raw string) (store.Token, error)
}

var _ GatewayTokens = (*tokens.Service)(nil)

// Options configure an Authenticator. At least one of Verifier and Tokens
// is required.
type Options struct {
	// Verifier verifies OAuth access tokens; nil accepts none.
	Verifier Verifier
	// Tokens verifies gateway-issued MCP tokens; nil accepts none.
	Tokens GatewayTokens
	// Rights is the live rights source; nil: effective rights are the
	// credential's rights.
	Rights rights.Source
	// TenantHeader is the request header field (any case) in which a
	// client names the tenant it acts in; "" reads none. A named tenant
	// must be one the credential serves; a credential serving several
	// tenants must name one.
	TenantHeader string
	// Issuers are the trusted issuers: the authorization_servers of each
	// route's metadata (those whose audiences hold the route, or have none).
	Issuers []auth.IssuerConfig
	// ResourceBaseURL is the gateway's public origin; a route's resource
	// URI is it followed by the route's path.
	ResourceBaseURL string
	// Routes are the MCP routes; the first also gets the metadata at the
	// bare /.well-known/oauth-protected-resource.
	Routes []Route
	Logger *slog.Logger
}

// Authenticator implements gateway.Authenticator.
type Authenticator struct {
	v            Verifier
	tokens       GatewayTokens
	rights       rights.Source
	tenantHeader string
	routes       map[string]*route // by upstream name
	docs         map[string][]byte // metadata path → document
	log          *slog.Logger
}

var _ gateway.Authenticator = (*Authenticator)(nil)

type route struct {
	resource    string // canonical resource URI (the tokens' audience)
	metadataURL string // where its metadata is served
}

// New builds the Authenticator and every route's metadata document.
func New(o Options) (*Authenticator, error) {
	if o.Verifier == nil && o.Tokens == nil {
		return nil, errors.New("authn: neither an OAuth verifier nor gateway tokens")
	}
	if len(o.Routes) == 0 {
		return nil, errors.New("authn: no route")
	}
	a := &Authenticator{v: o.Verifier, tokens: o.Tokens, rights: o.Rights, tenantHeader: strings.ToLower(o.TenantHeader),
		routes: map[string]*route{}, docs: map[string][]byte{}, log: o.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	base := strings.TrimSuffix(o.ResourceBaseURL, "/")
	for i, r := range o.Routes {
		resource, err := auth.CanonicalResourceURI(base + r.Path)
		if err != nil {
			return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
		}
		mdURL, err := auth.ResourceMetadataURL(resource)
		if err != nil {
			return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
		}
		md, err := auth.NewResourceMetadata(resource, o.Issuers, r.Scopes)
		if err != nil {
			return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
		}
		if len(md.AuthorizationServers) == 0 && o.Verifier != nil {
			return nil, fmt.Errorf("authn: route %s: no issuer may issue tokens for %s (check auth.issuers[].audiences)", r.Path, resource)
		}
		doc, err := json.Marshal(md)
		if err != nil {
			return nil, err
		}
		a.routes[r.Upstream] = &route{resource: resource, metadataURL: mdURL}
		a.docs[auth.ResourceMetadataPath(r.Path)] = doc
		if i == 0 {
			a.docs[auth.WellKnownProtectedResource] = doc
		}
	}
	return a, nil
}

// Metadata returns the protected resource metadata documents by request
// path (gateway.Options.ResourceMetadata).
func (a *Authenticator) Metadata() map[string][]byte { return a.docs }

// ResourceURI returns the resource URI of an upstream's route, "" if the
// upstream has none.
func (a *Authenticator) ResourceURI(upstream string) string {
	if rt := a.routes[upstream]; rt != nil {
		return rt.resource
	}
	return ""
}

// Authenticate verifies the bearer token of r for the resource URI of r's
// route. A token in the query string is refused whatever the header holds
// (RFC 6750 section 2.3 is not supported; sending two is invalid_request);
// cookies are never read.
func (a *Authenticator) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	rt := a.routes[r.Upstream]
	if rt == nil {
		// Only routes with an upstream reach authentication; fail closed.
		return nil, &gateway.AuthFailure{Status: 401, Code: gateway.AuthInvalidToken,
			Message: "This path is not a protected MCP resource.", Fix: "Call the MCP endpoint of this server."}
	}
	if queryHasToken(r.RawQuery) {
		return nil, &gateway.AuthFailure{
			Status:          401,
			WWWAuthenticate: challenge(rt.metadataURL, "invalid_request", "access tokens are accepted in the Authorization header only"),
			Code:            gateway.AuthInvalidRequest,
			Message:         "Access tokens are accepted only in the Authorization header, never in the URL query.",
			Fix:             `Remove access_token from the URL and send the token as "Authorization: Bearer <token>".`,
		}
	}
	raw, err := auth.BearerTokenFromValues(r.Header.Values("authorization"))
	if err != nil {
		return nil, a.failure(ctx, rt, r, err)
	}
	var pr *policy.Principal
	var tenants []string // the tenants the credential serves
	if tokens.HasPrefix(raw) {
		var f *gateway.AuthFailure
		if pr, f = a.gatewayToken(ctx, rt, raw); f != nil {
			return nil, f
		}
		tenants = []string{pr.Tenant}
	} else {
		if a.v == nil {
			return nil, invalid(rt, "this server accepts only MCP tokens it issued itself",
				"The access token was refused: this server accepts only MCP tokens it issued (they start with "+tokens.Prefix+").",
				"Ask your administrator for an MCP token for this server.")
		}
		claims, err := a.v.Verify(ctx, raw, rt.resource)
		if err != nil {
			return nil, a.failure(ctx, rt, r, err)
		}
		pr = &policy.Principal{
			Authenticated:  true,
			Tenant:         claims.Tenant,
			Subject:        claims.Subject,
			TokenRights:    slices.Clone(claims.Scopes),
			CredentialKind: policy.CredentialOAuth,
			CredentialID:   claims.TokenID,
			Issuer:         claims.Issuer,
			ClientID:       claims.ClientID,
		}
		tenants = claims.Tenants
		if len(tenants) == 0 && claims.Tenant != "" {
			tenants = []string{claims.Tenant}
		}
	}
	if f := a.bindTenant(pr, tenants, r); f != nil {
		return nil, f
	}
	if pr.CredentialKind == policy.CredentialOAuth {
		pr.Connection = ConnectionID(pr.Issuer, pr.Subject, pr.ClientID, pr.Tenant)
	}
	if f := a.liveRights(ctx, rt, r, pr); f != nil {
		return nil, f
	}
	return pr, nil
}

// gatewayToken verifies a gateway-issued MCP token: its id is the
// connection, its creator the subject.
func (a *Authenticator) gatewayToken(ctx context.Context, rt *route, raw string) (*policy.Principal, *gateway.AuthFailure) {
	if a.tokens == nil {
		return nil, invalid(rt, "MCP tokens are not enabled on this server",
			"The MCP token was refused: this server does not accept MCP tokens.", "Use an OAuth access token for "+rt.resource+".")
	}
	t, err := a.tokens.Verify(ctx, raw)
	switch {
	case err == nil:
	case errors.Is(err, tokens.ErrUnavailable):
		a.log.LogAttrs(ctx, slog.LevelWarn, "MCP token cannot be checked now; refused (503)", slog.Any("error", err))
		return nil, &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable,
			Message: "The MCP token cannot be checked right now.", Fix: "Retry in a few seconds."}
	case errors.Is(err, tokens.ErrRevoked):
		return nil, invalid(rt, "the MCP token was revoked", "The MCP token was revoked.", "Ask for a new MCP token.")
	case errors.Is(err, tokens.ErrExpired):
		return nil, invalid(rt, "the MCP token expired", "The MCP token expired.", "Ask for a new MCP token.")
	default:
		return nil, invalid(rt, "the MCP token is not valid", "The MCP token was refused: it is not a token this server issued.", "Check the token, or ask for a new one.")
	}
	return &policy.Principal{
		Authenticated:  true,
		Tenant:         t.Tenant,
		Subject:        t.Creator,
		TokenRights:    slices.Clone(t.Rights),
		CredentialKind: policy.CredentialGatewayToken,
		CredentialID:   t.ID,
		Connection:     t.ID,
	}, nil
}

// bindTenant fixes the principal's tenant (ARCHITECTURE.md, step 4): a
// tenant the request names in the tenant header must be one of tenants;
// a credential serving several tenants must name one.
func (a *Authenticator) bindTenant(pr *policy.Principal, tenants []string, r *gateway.Request) *gateway.AuthFailure {
	named := ""
	if a.tenantHeader != "" {
		named = r.Header.Get(a.tenantHeader)
	}
	switch {
	case named != "" && !slices.Contains(tenants, named):
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantMismatch,
			Message: "Your credential does not serve the tenant named in the " + a.tenantHeader + " header.",
			Fix:     "Send the request for a tenant your credential serves, or without the " + a.tenantHeader + " header."}
	case named != "":
		pr.Tenant = named
	case len(tenants) > 1:
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantRequired,
			Message: "Your credential serves several tenants; the request does not say which one it is for.",
			Fix:     "Name the tenant in the " + a.tenantHeader + " header."}
	}
	return nil
}

// Codes of tenant-binding refusals (403).
const (
	CodeTenantMismatch = "tenant_mismatch"
	CodeTenantRequired = "tenant_required"
	// CodeInactive: the person the credential speaks for is no longer
	// active (401 invalid_token).
	CodeInactive = "inactive_subject"
	// CodeRightsUnavailable: the rights source cannot answer (503).
	CodeRightsUnavailable = "rights_unavailable"
)

// liveRights asks the rights source what the principal's person may do
// now: an inactive person fails the credential (401); effective rights
// are the credential's rights ∩ live rights.
func (a *Authenticator) liveRights(ctx context.Context, rt *route, r *gateway.Request, pr *policy.Principal) *gateway.AuthFailure {
	if a.rights == nil {
		pr.Rights = slices.Clone(pr.TokenRights)
		return nil
	}
	live, err := a.rights.Lookup(ctx, pr.Tenant, pr.Subject)
	if err != nil {
		a.log.LogAttrs(ctx, slog.LevelWarn, "rights source cannot answer; request refused (503)", slog.String("upstream", r.Upstream), slog.Any("error", err))
		return &gateway.AuthFailure{Status: 503, Code: CodeRightsUnavailable,
			Message: "Your current rights cannot be checked right now, so nothing is allowed.", Fix: "Retry in a few seconds."}
	}
	if !live.Active {
		f := invalid(rt, "the person this credential speaks for is not active", "The credential was refused: the person it speaks for is no longer active in this tenant.",
			"Ask an administrator of your organisation.")
		f.Code = CodeInactive
		return f
	}
	pr.LiveRights = append(make([]string, 0, len(live.Rights)), live.Rights...)
	pr.Rights = rights.Intersect(pr.TokenRights, live.Rights)
	return nil
}

// invalid is a 401 invalid_token refusal with its challenge.
func invalid(rt *route, description, message, fix string) *gateway.AuthFailure {
	return &gateway.AuthFailure{Status: 401, WWWAuthenticate: challenge(rt.metadataURL, "invalid_token", description),
		Code: gateway.AuthInvalidToken, Message: message, Fix: fix}
}

// failure turns a verification error into the answer: 401 with the
// challenge (error="invalid_token" when a token was presented), or 503
// without one when the token cannot be checked now.
func (a *Authenticator) failure(ctx context.Context, rt *route, r *gateway.Request, err error) *gateway.AuthFailure {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		a.log.LogAttrs(ctx, slog.LevelError, "token verification failed unexpectedly", slog.String("upstream", r.Upstream), slog.Any("error", err))
		ae = &auth.Error{Reason: auth.ReasonUnavailable}
	}
	getToken := "Get an access token for " + rt.resource + " from an authorization server listed in " + rt.metadataURL +
		` and send it as "Authorization: Bearer <token>".`
	switch ae.Reason {
	case auth.ReasonMissing:
		return &gateway.AuthFailure{Status: 401, WWWAuthenticate: ae.WWWAuthenticate(rt.metadataURL), Code: gateway.AuthMissingToken,
			Message: "This MCP server needs an OAuth access token.", Fix: getToken}
	case auth.ReasonUnavailable:
		a.log.LogAttrs(ctx, slog.LevelWarn, "access token cannot be verified now; refused (503)", slog.String("upstream", r.Upstream), slog.Any("error", err))
		return &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable,
			Message: "The access token cannot be verified right now: its authorization server cannot be reached.", Fix: "Retry in a little while."}
	}
	a.log.LogAttrs(ctx, slog.LevelDebug, "access token refused", slog.String("upstream", r.Upstream), slog.String("reason", string(ae.Reason)), slog.Any("error", err))
	return &gateway.AuthFailure{Status: 401, WWWAuthenticate: ae.WWWAuthenticate(rt.metadataURL), Code: gateway.AuthInvalidToken,
		Message: "The access token was refused: " + ae.Description() + ".", Fix: getToken}
}

// InsufficientScope returns the 403 challenge naming the scopes a request
// of r's route needs.
func (a *Authenticator) InsufficientScope(r *gateway.Request, scopes []string) *gateway.AuthFailure {
	rt := a.routes[r.Upstream]
	if rt == nil {
		return nil
	}
	ae := &auth.Error{Reason: auth.ReasonInsufficientScope, Scopes: scopes}
	return &gateway.AuthFailure{Status: 403, WWWAuthenticate: ae.WWWAuthenticate(rt.metadataURL), Code: gateway.AuthInsufficientScope,
		Message: "The access token's scopes do not cover this request.",
		Fix:     "Ask the authorization server for a token with the scopes " + strings.Join(scopes, " ") + ", then retry."}
}

// ConnectionID is the connection of an OAuth principal (ARCHITECTURE.md,
// "Connection"): "oauth_" and 32 hex digits of a SHA-256 over the issuer,
// subject, client id and tenant, each length-prefixed, so it is stable
// across token refresh and no two tuples share it.
func ConnectionID(issuer, subject, clientID, tenant string) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...]string{issuer, subject, clientID, tenant} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	return "oauth_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// queryHasToken reports whether a query string carries an access_token
// parameter, however it is escaped or separated.
func queryHasToken(rawQuery string) bool {
	if rawQuery == "" {
		return false
	}
	for _, part := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(part, "=")
		if u, err := url.QueryUnescape(name); err == nil {
			name = u
		}
		if strings.EqualFold(strings.TrimSpace(name), "access_token") {
			return true
		}
	}
	return false
}

// challenge formats a Bearer challenge with an RFC 6750 error code the auth
// package does not produce (invalid_request).
func challenge(metadataURL, code, description string) string {
	return `Bearer resource_metadata="` + metadataURL + `", error="` + code + `", error_description="` + description + `"`
}
