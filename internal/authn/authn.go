// Package authn is the gateway's Authenticator (gateway.Authenticator). It
// takes the bearer token from the Authorization header only and accepts
// two kinds of credential:
//
//   - gateway-issued MCP tokens (internal/tokens; prefix "mcpg_"), looked
//     up by hash on every call, so a revocation takes effect at once;
//   - OAuth 2.1 access tokens, verified with the auth package for the
//     resource URI of the route called.
//
// Then it binds the tenant (a tenant named in the transport — the path of
// a route with {tenant}, or the configured tenant header — must be one the
// credential serves) and, when a rights source is configured, looks up the
// person's live rights: an inactive person fails the credential (401),
// effective rights = the credential's rights ∩ live rights. It also builds
// each route's protected resource metadata (RFC 9728; per tenant on a
// route with {tenant}) and the WWW-Authenticate challenges that point at
// it.
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
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/routes"
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
	// Path is the route's path on the gateway, e.g. "/mcp", or a pattern
	// with one {tenant} segment, e.g. "/t/{tenant}/mcp" (package routes):
	// then every tenant's path is a protected resource of its own.
	Path string
	// Scopes are scopes_supported of the route's metadata.
	Scopes []string
}

// GatewayTokens verifies gateway-issued MCP tokens; *tokens.Service
// implements it. The token Verify returns is the caller's: the
// Authenticator keeps its Rights slice in the principal without a copy.
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
	// URI is it followed by the route's path (for a route with {tenant},
	// the path with the request's tenant filled in).
	ResourceBaseURL string
	// Routes are the MCP routes; the first without {tenant} also gets the
	// metadata at the bare /.well-known/oauth-protected-resource.
	Routes []Route
	// ClientToolsets bind OAuth clients' connections to toolsets:
	// issuer → client id → toolset (config auth.issuers[].client_toolsets).
	// A client not listed gets none ("full"). A gateway token carries its
	// own toolset.
	ClientToolsets map[string]map[string]string
	Logger         *slog.Logger
}

// Authenticator implements gateway.Authenticator.
type Authenticator struct {
	v            Verifier
	tokens       GatewayTokens
	rights       rights.Source
	tenantHeader string
	issuers      []auth.IssuerConfig
	routes       map[string]*route // by upstream name
	table        *routes.Table
	docs         map[string][]byte // metadata path → document (exact routes)
	// oauth: an OAuth issuer is configured. Without one (gateway tokens
	// only) no protected resource metadata is served nor named in a
	// challenge: the MCP authorization spec requires authorization_servers
	// in that document (at least one) and a client that finds the
	// resource_metadata parameter (RFC 9728 section 5.1) starts an OAuth
	// flow no authorization server could complete. The challenge is then
	// the plain RFC 6750 one.
	oauth    bool
	toolsets map[string]map[string]string
	log      *slog.Logger
}

var _ gateway.Authenticator = (*Authenticator)(nil)

// route is one protected resource, or with {tenant} one per tenant.
type route struct {
	scopes []string
	// exact is the resource of a route without {tenant}.
	exact *target
	// A route with {tenant}: the resource URI and metadata URL of tenant
	// t are prefix + t + suffix.
	resourcePrefix, resourceSuffix string
	metadataPrefix, metadataSuffix string
}

// target is the protected resource a request calls.
type target struct {
	resource    string // canonical resource URI (the tokens' audience)
	metadataURL string // where its metadata is served
}

// target returns the resource of rt for a request naming tenant; false
// when rt has {tenant} and tenant is not a valid tenant.
func (rt *route) target(tenant string) (*target, bool) {
	if rt.exact != nil {
		return rt.exact, true
	}
	if !routes.ValidTenant(tenant) {
		return nil, false
	}
	return &target{resource: rt.resourcePrefix + tenant + rt.resourceSuffix,
		metadataURL: rt.metadataPrefix + tenant + rt.metadataSuffix}, true
}

// servesResource reports whether uri is the resource URI of rt for some
// tenant (rt has {tenant}).
func (rt *route) servesResource(uri string) bool {
	if len(uri) <= len(rt.resourcePrefix)+len(rt.resourceSuffix) || !strings.HasPrefix(uri, rt.resourcePrefix) || !strings.HasSuffix(uri, rt.resourceSuffix) {
		return false
	}
	return routes.ValidTenant(uri[len(rt.resourcePrefix) : len(uri)-len(rt.resourceSuffix)])
}

// sampleTenant stands for the tenant while the URIs of a route with
// {tenant} are worked out: a valid tenant that no URI has by chance.
const sampleTenant = "mcpgate-sample-tenant-7f3a"

// split cuts s at its only sampleTenant.
func split(s string) (prefix, suffix string, err error) {
	if strings.Count(s, sampleTenant) != 1 {
		return "", "", fmt.Errorf("cannot place the tenant in %q", s)
	}
	prefix, suffix, _ = strings.Cut(s, sampleTenant)
	return prefix, suffix, nil
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
		issuers: o.Issuers, routes: map[string]*route{}, docs: map[string][]byte{}, toolsets: o.ClientToolsets, log: o.Logger,
		oauth: o.Verifier != nil}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	var rs []routes.Route
	for _, r := range o.Routes {
		rs = append(rs, routes.Route{Path: r.Path, Upstream: r.Upstream})
	}
	table, err := routes.New(rs)
	if err != nil {
		return nil, fmt.Errorf("authn: %w", err)
	}
	a.table = table
	base := strings.TrimSuffix(o.ResourceBaseURL, "/")
	bare := false
	for _, r := range o.Routes {
		pattern, _ := table.Pattern(r.Upstream)
		rt := &route{scopes: r.Scopes}
		tenant := ""
		if pattern.HasTenant() {
			tenant = sampleTenant
		}
		resource, err := auth.CanonicalResourceURI(base + pattern.Expand(tenant))
		if err != nil {
			return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
		}
		mdURL, err := auth.ResourceMetadataURL(resource)
		if err != nil {
			return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
		}
		a.routes[r.Upstream] = rt
		if pattern.HasTenant() {
			if rt.resourcePrefix, rt.resourceSuffix, err = split(resource); err == nil {
				rt.metadataPrefix, rt.metadataSuffix, err = split(mdURL)
			}
			if err != nil {
				return nil, fmt.Errorf("authn: route %s: %w", r.Path, err)
			}
			if o.Verifier != nil && !slices.ContainsFunc(o.Issuers, func(ic auth.IssuerConfig) bool {
				return len(ic.Audiences) == 0 || slices.ContainsFunc(ic.Audiences, rt.servesResource)
			}) {
				return nil, fmt.Errorf("authn: route %s: no issuer may issue tokens for any tenant's %s (check auth.issuers[].audiences)", r.Path, rt.resourcePrefix+routes.Param+rt.resourceSuffix)
			}
			continue
		}
		rt.exact = &target{resource: resource, metadataURL: mdURL}
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
		if !a.oauth {
			continue
		}
		a.docs[auth.ResourceMetadataPath(r.Path)] = doc
		if !bare {
			a.docs[auth.WellKnownProtectedResource] = doc
			bare = true
		}
	}
	return a, nil
}

// ResourceMetadata returns the protected resource metadata document
// served at a request path (gateway.Options.ResourceMetadata): an exact
// route's, built once, or, under /.well-known/oauth-protected-resource
// followed by a path on a route with {tenant}, that tenant's, built for
// the request (nothing is kept: anyone may ask for any tenant's).
func (a *Authenticator) ResourceMetadata(path string) ([]byte, bool) {
	if !a.oauth {
		return nil, false
	}
	if doc, ok := a.docs[path]; ok {
		return doc, true
	}
	rest, ok := strings.CutPrefix(path, auth.WellKnownProtectedResource)
	if !ok || rest == "" {
		return nil, false
	}
	upstream, tenant, ok := a.table.Match(rest)
	if !ok || tenant == "" {
		return nil, false
	}
	rt := a.routes[upstream]
	t, _ := rt.target(tenant)
	md, err := auth.NewResourceMetadata(t.resource, a.issuers, rt.scopes)
	if err != nil {
		return nil, false // New built this route's URIs; not reached
	}
	doc, err := json.Marshal(md)
	if err != nil {
		return nil, false
	}
	return doc, true
}

// ResourceURI returns the resource URI of an upstream's route, "" if the
// upstream has none. For a route with {tenant} it is a template holding
// {tenant}.
func (a *Authenticator) ResourceURI(upstream string) string {
	rt := a.routes[upstream]
	switch {
	case rt == nil:
		return ""
	case rt.exact != nil:
		return rt.exact.resource
	}
	return rt.resourcePrefix + routes.Param + rt.resourceSuffix
}

// Authenticate verifies the bearer token of r for the resource URI of r's
// route. A token in the query string is refused whatever the header holds
// (RFC 6750 section 2.3 is not supported; sending two is invalid_request);
// cookies are never read.
func (a *Authenticator) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	pr := new(policy.Principal)
	if f := a.AuthenticateInto(ctx, r, pr); f != nil {
		return nil, f
	}
	return pr, nil
}

// AuthenticateInto is Authenticate writing the principal into pr, which it
// overwrites whole, for a caller that has the storage. On a failure pr
// holds nothing to use.
func (a *Authenticator) AuthenticateInto(ctx context.Context, r *gateway.Request, pr *policy.Principal) *gateway.AuthFailure {
	*pr = policy.Principal{}
	rt := a.target(r)
	if rt == nil {
		// Only routes with an upstream (and, on a route with {tenant}, a
		// tenant) reach authentication; fail closed.
		return &gateway.AuthFailure{Status: 401, Code: gateway.AuthInvalidToken,
			Message: "This path is not a protected MCP resource.", Fix: "Call the MCP endpoint of this server."}
	}
	if queryHasToken(r.RawQuery) {
		return &gateway.AuthFailure{
			Status:          401,
			WWWAuthenticate: challenge(rt.metadataURL, "invalid_request", "access tokens are accepted in the Authorization header only"),
			Code:            gateway.AuthInvalidRequest,
			Message:         "Access tokens are accepted only in the Authorization header, never in the URL query.",
			Fix:             `Remove access_token from the URL and send the token as "Authorization: Bearer <token>".`,
		}
	}
	raw, err := auth.BearerTokenFromValues(r.Header.Values("authorization"))
	if err != nil {
		return a.failure(ctx, rt, r, err)
	}
	var tenants []string // the tenants the credential serves
	if tokens.HasPrefix(raw) {
		var f *gateway.AuthFailure
		if f = a.gatewayToken(ctx, rt, raw, pr); f != nil {
			return f
		}
		tenants = []string{pr.Tenant}
	} else {
		if a.v == nil {
			return invalid(rt, "this server accepts only MCP tokens it issued itself",
				"The access token was refused: this server accepts only MCP tokens it issued (they start with "+tokens.Prefix+").",
				"Ask your administrator for an MCP token for this server.")
		}
		claims, err := a.v.Verify(ctx, raw, rt.resource)
		if err != nil {
			return a.failure(ctx, rt, r, err)
		}
		*pr = policy.Principal{
			Authenticated:  true,
			Tenant:         claims.Tenant,
			Subject:        claims.Subject,
			TokenRights:    slices.Clone(claims.Scopes),
			CredentialKind: policy.CredentialOAuth,
			CredentialID:   claims.TokenID,
			Issuer:         claims.Issuer,
			ClientID:       claims.ClientID,
			Toolset:        a.toolsets[claims.Issuer][claims.ClientID],
		}
		tenants = claims.Tenants
		if len(tenants) == 0 && claims.Tenant != "" {
			tenants = []string{claims.Tenant}
		}
	}
	if f := a.bindTenant(pr, tenants, r); f != nil {
		return f
	}
	if pr.CredentialKind == policy.CredentialOAuth {
		pr.Connection = ConnectionID(pr.Issuer, pr.Subject, pr.ClientID, pr.Tenant)
	}
	if f := a.liveRights(ctx, rt, r, pr); f != nil {
		return f
	}
	return nil
}

// target returns the protected resource r calls, nil if none.
func (a *Authenticator) target(r *gateway.Request) *target {
	rt := a.routes[r.Upstream]
	if rt == nil {
		return nil
	}
	t, ok := rt.target(r.Tenant)
	if !ok {
		return nil
	}
	return t
}

// gatewayToken verifies a gateway-issued MCP token: its id is the
// connection, its creator the subject.
func (a *Authenticator) gatewayToken(ctx context.Context, rt *target, raw string, pr *policy.Principal) *gateway.AuthFailure {
	if a.tokens == nil {
		return invalid(rt, "MCP tokens are not enabled on this server",
			"The MCP token was refused: this server does not accept MCP tokens.", "Use an OAuth access token for "+rt.resource+".")
	}
	t, err := a.tokens.Verify(ctx, raw)
	switch {
	case err == nil:
	case errors.Is(err, tokens.ErrUnavailable):
		a.log.LogAttrs(ctx, slog.LevelWarn, "MCP token cannot be checked now; refused (503)", slog.Any("error", err))
		return &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable,
			Message: "The MCP token cannot be checked right now.", Fix: "Retry in a few seconds."}
	case errors.Is(err, tokens.ErrRevoked):
		return invalid(rt, "the MCP token was revoked", "The MCP token was revoked.", "Ask for a new MCP token.")
	case errors.Is(err, tokens.ErrExpired):
		return invalid(rt, "the MCP token expired", "The MCP token expired.", "Ask for a new MCP token.")
	default:
		return invalid(rt, "the MCP token is not valid", "The MCP token was refused: it is not a token this server issued.", "Check the token, or ask for a new one.")
	}
	*pr = policy.Principal{
		Authenticated:  true,
		Tenant:         t.Tenant,
		Subject:        t.Creator,
		TokenRights:    t.Rights, // Verify's copy (GatewayTokens)
		CredentialKind: policy.CredentialGatewayToken,
		CredentialID:   t.ID,
		Connection:     t.ID,
		Toolset:        t.Toolset,
	}
	return nil
}

// bindTenant fixes the principal's tenant after authentication: a
// tenant the request names — in the path of a route with {tenant}
// (r.Tenant), or in the tenant header — must be one of tenants; when both
// name one they must be the same; a credential serving several tenants
// must name one.
func (a *Authenticator) bindTenant(pr *policy.Principal, tenants []string, r *gateway.Request) *gateway.AuthFailure {
	header := ""
	if a.tenantHeader != "" {
		vals := r.Header.Values(a.tenantHeader)
		if len(vals) > 1 || (len(vals) == 1 && strings.TrimSpace(vals[0]) == "") {
			// Two fields, or an empty one: which tenant is meant is not
			// clear, and proxies may pick another value than mcpgate.
			return &gateway.AuthFailure{Status: 400, Code: CodeTenantHeaderInvalid,
				Message: "The " + a.tenantHeader + " header must be sent once, with one tenant.",
				Fix:     "Send the " + a.tenantHeader + " header once with the tenant's name, or leave it out."}
		}
		header = r.Header.Get(a.tenantHeader)
	}
	switch {
	case r.Tenant != "" && header != "" && header != r.Tenant:
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantMismatch,
			Message: "The URL is for tenant " + strconv.Quote(r.Tenant) + " but the " + a.tenantHeader + " header names another tenant.",
			Fix:     "Send the " + a.tenantHeader + " header with the URL's tenant, or leave it out."}
	case r.Tenant != "" && !slices.Contains(tenants, r.Tenant):
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantMismatch,
			Message: "Your credential does not serve tenant " + strconv.Quote(r.Tenant) + ", the tenant of this URL.",
			Fix:     "Call the MCP URL of a tenant your credential serves, or get a credential for this tenant."}
	case r.Tenant != "":
		pr.Tenant = r.Tenant
	case header != "" && !slices.Contains(tenants, header):
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantMismatch,
			Message: "Your credential does not serve the tenant named in the " + a.tenantHeader + " header.",
			Fix:     "Send the request for a tenant your credential serves, or without the " + a.tenantHeader + " header."}
	case header != "":
		pr.Tenant = header
	case len(tenants) > 1:
		fix := "Name the tenant in the " + a.tenantHeader + " header."
		if a.tenantHeader == "" {
			fix = "Call the MCP URL of one tenant, or use a credential for a single tenant."
		}
		return &gateway.AuthFailure{Status: 403, Code: CodeTenantRequired,
			Message: "Your credential serves several tenants; the request does not say which one it is for.",
			Fix:     fix}
	}
	return nil
}

// Codes of tenant-binding refusals (403; 400 for the header's form).
const (
	CodeTenantHeaderInvalid = "tenant_header_invalid"
	CodeTenantMismatch      = "tenant_mismatch"
	CodeTenantRequired      = "tenant_required"
	// CodeInactive: the person the credential speaks for is no longer
	// active (401 invalid_token).
	CodeInactive = "inactive_subject"
	// CodeRightsUnavailable: the rights source cannot answer (503).
	CodeRightsUnavailable = "rights_unavailable"
)

// liveRights asks the rights source what the principal's person may do
// now: an inactive person fails the credential (401); effective rights
// are the credential's rights ∩ live rights.
func (a *Authenticator) liveRights(ctx context.Context, rt *target, r *gateway.Request, pr *policy.Principal) *gateway.AuthFailure {
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
	// The source's answer is ours to keep (rights.Source); not nil, so
	// that an empty answer still reaches the policy as live_rights: [].
	pr.LiveRights = live.Rights
	if pr.LiveRights == nil {
		pr.LiveRights = []string{}
	}
	pr.Rights = rights.Intersect(pr.TokenRights, live.Rights)
	return nil
}

// needsToken says which credential a request without one needs.
func (a *Authenticator) needsToken() string {
	switch {
	case a.v == nil:
		return "This MCP server needs an MCP token it issued (" + tokens.Prefix + "…)."
	case a.tokens == nil:
		return "This MCP server needs an OAuth access token."
	}
	return "This MCP server needs an OAuth access token or an MCP token it issued (" + tokens.Prefix + "…)."
}

// howToGetToken is the fix of a missing or refused token: where to get one
// of the kinds the server accepts.
func (a *Authenticator) howToGetToken(rt *target) string {
	const send = ` and send it as "Authorization: Bearer <token>".`
	oauth := "Get an access token for " + rt.resource + " from an authorization server listed in " + rt.metadataURL
	switch {
	case a.v == nil:
		return "Ask an administrator of this server for an MCP token (or create one with `mcpgate tokens create`)" + send
	case a.tokens == nil:
		return oauth + send
	}
	return oauth + ", or ask an administrator for an MCP token," + send
}

// invalid is a 401 invalid_token refusal with its challenge.
func invalid(rt *target, description, message, fix string) *gateway.AuthFailure {
	return &gateway.AuthFailure{Status: 401, WWWAuthenticate: challenge(rt.metadataURL, "invalid_token", description),
		Code: gateway.AuthInvalidToken, Message: message, Fix: fix}
}

// failure turns a verification error into the answer: 401 with the
// challenge (error="invalid_token" when a token was presented), or 503
// without one when the token cannot be checked now.
func (a *Authenticator) failure(ctx context.Context, rt *target, r *gateway.Request, err error) *gateway.AuthFailure {
	var ae *auth.Error
	if !errors.As(err, &ae) {
		a.log.LogAttrs(ctx, slog.LevelError, "token verification failed unexpectedly", slog.String("upstream", r.Upstream), slog.Any("error", err))
		ae = &auth.Error{Reason: auth.ReasonUnavailable}
	}
	getToken := a.howToGetToken(rt)
	switch ae.Reason {
	case auth.ReasonMissing:
		return &gateway.AuthFailure{Status: 401, WWWAuthenticate: ae.WWWAuthenticate(a.metadataURL(rt)), Code: gateway.AuthMissingToken,
			Message: a.needsToken(), Fix: getToken}
	case auth.ReasonUnavailable:
		a.log.LogAttrs(ctx, slog.LevelWarn, "access token cannot be verified now; refused (503)", slog.String("upstream", r.Upstream), slog.Any("error", err))
		return &gateway.AuthFailure{Status: 503, Code: gateway.AuthUnavailable,
			Message: "The access token cannot be verified right now: its authorization server cannot be reached.", Fix: "Retry in a little while."}
	}
	a.log.LogAttrs(ctx, slog.LevelDebug, "access token refused", slog.String("upstream", r.Upstream), slog.String("reason", string(ae.Reason)), slog.Any("error", err))
	return &gateway.AuthFailure{Status: 401, WWWAuthenticate: ae.WWWAuthenticate(a.metadataURL(rt)), Code: gateway.AuthInvalidToken,
		Message: "The access token was refused: " + ae.Description() + ".", Fix: getToken}
}

// metadataURL is the resource_metadata of rt's challenges: none without an
// OAuth issuer (see Authenticator.oauth).
func (a *Authenticator) metadataURL(rt *target) string {
	if !a.oauth {
		return ""
	}
	return rt.metadataURL
}

// InsufficientScope returns the 403 challenge naming the scopes a request
// of r's route needs.
func (a *Authenticator) InsufficientScope(r *gateway.Request, scopes []string) *gateway.AuthFailure {
	rt := a.target(r)
	if rt == nil {
		return nil
	}
	ae := &auth.Error{Reason: auth.ReasonInsufficientScope, Scopes: scopes}
	return &gateway.AuthFailure{Status: 403, WWWAuthenticate: ae.WWWAuthenticate(a.metadataURL(rt)), Code: gateway.AuthInsufficientScope,
		Message: "The access token's scopes do not cover this request.",
		Fix:     "Ask the authorization server for a token with the scopes " + strings.Join(scopes, " ") + ", then retry."}
}

// ConnectionID is the connection of an OAuth principal (replay windows,
// limits, audit and session bindings key on it): "oauth_" and 32 hex digits of a SHA-256 over the issuer,
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
