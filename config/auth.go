package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Defaults of the auth section, applied to each issuer.
const (
	DefaultClockSkew      = 30 * time.Second
	DefaultMinJWKSRefresh = 30 * time.Second
	DefaultSubjectClaim   = auth.DefaultSubjectClaim
	// DefaultSessionTTL is how long an older revision's session id stays
	// bound to its principal.
	DefaultSessionTTL = 24 * time.Hour
	// DefaultGatewayTokenTTL and DefaultGatewayTokenMaxTTL are the
	// lifetime of a gateway token created without one, and the longest
	// lifetime one may be given.
	DefaultGatewayTokenTTL    = 720 * time.Hour  // 30 days
	DefaultGatewayTokenMaxTTL = 2160 * time.Hour // 90 days
)

// Auth turns on authentication: every MCP route becomes an OAuth 2.1
// protected resource (RFC 9728) whose callers need a bearer access token
// from one of the issuers. Without an auth section every caller is
// anonymous.
type Auth struct {
	// The gateway's public origin as clients reach it:
	// `scheme://host[:port]`, no path, query or fragment. `https` except on
	// loopback hosts (`localhost`, `127.x`, `[::1]`).
	//
	// Required.
	ResourceBaseURL string `yaml:"resource_base_url"`
	// `scopes_supported` of every route's protected resource metadata. Each
	// an RFC 6749 scope (printable ASCII without spaces); unique.
	//
	// Default: none: per route, the rights its tools declare.
	ScopesSupported []string `yaml:"scopes_supported"`
	// The trusted authorization servers (OpenID providers). Each `issuer`
	// once. With `gateway_tokens`, the list may be empty: then only gateway
	// tokens are accepted.
	//
	// Required: at least one, unless `auth.gateway_tokens` is set.
	Issuers []Issuer `yaml:"issuers"`
	// The request header in which a client that serves several tenants names
	// the tenant of a request; it must be one the credential serves. On a
	// [route with `{tenant}`](#routes-with-a-tenant) the path names the
	// tenant, and the header, if sent, must name the same one. An HTTP
	// header name (RFC 9110 token), compared ignoring case. Not
	// `Authorization`, `Proxy-Authorization`, `Cookie`, `Host`,
	// `Content-Type`, `Mcpgate-Assertion`, any `Mcp-*` header, or
	// `listeners.extproc.upstream_header`.
	//
	// Default: none: the credential's tenant.
	TenantHeader string `yaml:"tenant_header"`
	// Turn on MCP access tokens issued by mcpgate itself (`mcpg_…`, created
	// through the admin API), for MCP clients that cannot do OAuth.
	// **Requires a [`store`](#store)** (tokens are kept there, only their
	// SHA-256) **and a [`rights`](#rights) section** (the rights a token is
	// created with are capped by its creator's live rights at that moment).
	// `gateway_tokens: {}` turns it on with the defaults.
	//
	// Default: none: off.
	GatewayTokens *GatewayTokens `yaml:"gateway_tokens" json:",omitempty"`
	// How long a session id of an older MCP protocol revision
	// (`Mcp-Session-Id`) stays bound to the principal that opened it; a
	// request presenting it with another principal's credential is refused.
	// Greater than 0.
	SessionTTL Duration `yaml:"session_ttl"`
}

// GatewayTokens configures the MCP access tokens mcpgate issues itself
// (stored hashed in the store; the rights they carry are capped, at
// creation, by the creator's live rights).
type GatewayTokens struct {
	// Lifetime of a token created without one. Greater than 0, at most
	// `max_ttl`.
	//
	// Default: `720h` (30 days).
	DefaultTTL Duration `yaml:"default_ttl"`
	// The longest lifetime a token may be created with. Greater than 0.
	//
	// Default: `2160h` (90 days).
	MaxTTL Duration `yaml:"max_ttl"`
}

// Issuer is one trusted authorization server (auth.IssuerConfig).
type Issuer struct {
	// The issuer identifier, exactly as the provider's discovery document
	// (`<issuer>/.well-known/openid-configuration`) and its tokens' `iss`
	// spell it. `https` except on loopback hosts; no query or fragment.
	// mcpgate reads discovery and the JWKS at start; an issuer that cannot
	// be reached stops `serve`.
	//
	// Required.
	Issuer string `yaml:"issuer"`
	// The routes this issuer may issue tokens for, each a route's resource
	// URI in canonical form (lower-case scheme and host, no default port);
	// for a route with `{tenant}`, one tenant's
	// (`https://mcp.example.com/t/acme/mcp`; `{tenant}` itself is refused —
	// leave the list empty to trust the issuer for every tenant). Whatever
	// the list, a token's `aud` must contain the resource URI of the route
	// it is presented at.
	//
	// Default: none: every route.
	Audiences []string `yaml:"audiences"`
	// JWS `alg` allowlist. Only asymmetric algorithms (`RS256/384/512`,
	// `PS256/384/512`, `ES256/384/512`, `EdDSA`); `none` and `HS*` are
	// refused.
	Algorithms []string `yaml:"algorithms"`
	// JOSE `typ` allowlist (RFC 9068), compared ignoring case and an
	// `application/` prefix. An entry `""` also admits tokens without `typ`
	// (providers that issue plain JWTs).
	Types []string `yaml:"types"`
	// Tolerance for `exp`, `nbf` and `iat`. Greater than 0.
	ClockSkew Duration `yaml:"clock_skew"`
	// Least time between two JWKS fetches: tokens with unknown `kid`s cannot
	// make mcpgate hammer the provider. A token signed by a key mcpgate has
	// not seen yet is refused (401) until the next fetch is allowed. Greater
	// than 0.
	MinJWKSRefresh Duration `yaml:"min_jwks_refresh"`
	// Claim carrying the tenant (`principal.tenant`). Empty: this issuer's
	// tokens carry no tenant.
	//
	// Default: none.
	TenantClaim string `yaml:"tenant_claim"`
	// Claim carrying the subject (`principal.subject`); required in every
	// token.
	SubjectClaim string `yaml:"subject_claim"`
	// Claim carrying the scopes (`principal.rights`): a space-separated
	// string or an array of strings.
	//
	// Default: `scope`, else `scp`.
	ScopeClaim string `yaml:"scope_claim"`
	// Claim naming the OAuth client (`principal.client_id`).
	//
	// Default: `client_id`, else `azp`.
	ClientIDClaim string `yaml:"client_id_claim"`
	// Verify opaque (non-JWT) access tokens with RFC 7662 introspection at
	// this issuer. At most one issuer may introspect.
	//
	// Default: none.
	Introspection *Introspection `yaml:"introspection"`
	// The [toolset](#toolsets) of the connections of each OAuth client of
	// this issuer (`principal.toolset`): a key of `toolsets`, or `full`.
	// Clients not listed get `full`.
	//
	// Default: none.
	ClientToolsets map[string]string `yaml:"client_toolsets"`
}

// Introspection configures RFC 7662 token introspection for one issuer.
type Introspection struct {
	// Introspection endpoint.
	//
	// Default: the discovery document's `introspection_endpoint`.
	Endpoint string `yaml:"endpoint"`
	// Client mcpgate authenticates as (`client_secret_basic`).
	//
	// Required.
	ClientID string `yaml:"client_id"`
	// Its secret. Never logged. Keep the file readable by mcpgate only.
	//
	// Required.
	ClientSecret string `yaml:"client_secret"`
}

// LogValue keeps the client secret out of logs.
func (in Introspection) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", in.Endpoint),
		slog.String("client_id", in.ClientID),
		slog.String("client_secret", redacted(in.ClientSecret)),
	)
}

// String keeps the client secret out of formatted output.
func (in Introspection) String() string {
	return fmt.Sprintf("{Endpoint:%s ClientID:%s ClientSecret:%s}", in.Endpoint, in.ClientID, redacted(in.ClientSecret))
}

func redacted(secret string) string {
	if secret == "" {
		return ""
	}
	return "REDACTED"
}

// applyDefaults fills the unset keys of the section and of each issuer.
func (a *Auth) applyDefaults() {
	a.SessionTTL.orDefault(DefaultSessionTTL)
	if g := a.GatewayTokens; g != nil {
		g.DefaultTTL.orDefault(DefaultGatewayTokenTTL)
		g.MaxTTL.orDefault(DefaultGatewayTokenMaxTTL)
	}
	for i := range a.Issuers {
		is := &a.Issuers[i]
		if len(is.Algorithms) == 0 {
			is.Algorithms = slices.Clone(auth.DefaultAlgorithms)
		}
		if len(is.Types) == 0 {
			is.Types = slices.Clone(auth.DefaultTypes)
		}
		is.ClockSkew.orDefault(DefaultClockSkew)
		is.MinJWKSRefresh.orDefault(DefaultMinJWKSRefresh)
		if is.SubjectClaim == "" {
			is.SubjectClaim = DefaultSubjectClaim
		}
	}
}

// IssuerConfigs returns the issuers as the auth package takes them.
func (a *Auth) IssuerConfigs() []auth.IssuerConfig {
	out := make([]auth.IssuerConfig, len(a.Issuers))
	for i, is := range a.Issuers {
		out[i] = is.issuerConfig()
	}
	return out
}

func (is Issuer) issuerConfig() auth.IssuerConfig {
	ic := auth.IssuerConfig{
		Issuer:         is.Issuer,
		Audiences:      slices.Clone(is.Audiences),
		Algorithms:     slices.Clone(is.Algorithms),
		Types:          slices.Clone(is.Types),
		ClockSkew:      is.ClockSkew.D(),
		MinJWKSRefresh: is.MinJWKSRefresh.D(),
		TenantClaim:    is.TenantClaim,
		SubjectClaim:   is.SubjectClaim,
		ScopeClaim:     is.ScopeClaim,
		ClientIDClaim:  is.ClientIDClaim,
	}
	if ic.MinJWKSRefresh > auth.DefaultJWKSMaxAge {
		// The JWKS is never refetched more often than MinJWKSRefresh, so
		// its background refresh age cannot be below it.
		ic.JWKSMaxAge = ic.MinJWKSRefresh
	}
	if in := is.Introspection; in != nil {
		ic.Introspection = &auth.IntrospectionConfig{Endpoint: in.Endpoint, ClientID: in.ClientID, ClientSecret: in.ClientSecret}
	}
	return ic
}

// ResourceURI returns the canonical resource URI (RFC 8707) of the route
// with the given path: resource_base_url followed by the path. For a route
// with {tenant} it is a template: each tenant's resource URI is it with
// {tenant} filled in (see TenantResource).
func (a *Auth) ResourceURI(route string) (string, error) {
	if pattern, err := routes.Parse(route); err == nil && pattern.HasTenant() {
		base, err := auth.CanonicalResourceURI(a.ResourceBaseURL)
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(base, "/") + route, nil
	}
	return auth.CanonicalResourceURI(strings.TrimSuffix(a.ResourceBaseURL, "/") + route)
}

// TenantResource reports whether uri (canonical) is the resource URI of
// the route with {tenant} for some tenant, and which.
func (a *Auth) TenantResource(route, uri string) (tenant string, ok bool) {
	pattern, err := routes.Parse(route)
	if err != nil || !pattern.HasTenant() {
		return "", false
	}
	base, err := auth.CanonicalResourceURI(a.ResourceBaseURL)
	if err != nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(uri, strings.TrimSuffix(base, "/"))
	if !ok {
		return "", false
	}
	return pattern.Match(rest)
}

// validateAuth checks the auth section, if there is one.
func (c *Config) validateAuth(p *problems) {
	a := c.Auth
	if a == nil {
		return
	}
	baseOK := checkResourceBase(p, "auth.resource_base_url", a.ResourceBaseURL)
	resources := map[string]string{} // resource URI (a template for routes with {tenant}) → route
	var tenantRoutes []string
	if baseOK {
		for _, u := range c.Upstreams {
			pattern, err := routes.Parse(u.Route)
			if err != nil {
				continue // reported with the upstreams
			}
			if uri, err := a.ResourceURI(u.Route); err == nil {
				resources[uri] = u.Route
			}
			if pattern.HasTenant() {
				tenantRoutes = append(tenantRoutes, u.Route)
			}
		}
	}
	onTenantRoute := func(uri string) bool {
		return slices.ContainsFunc(tenantRoutes, func(route string) bool {
			_, ok := a.TenantResource(route, uri)
			return ok
		})
	}
	for i, u := range c.Upstreams {
		if strings.HasPrefix(u.Route, auth.WellKnownProtectedResource) {
			p.add(indexPath("upstreams", i)+".route", "%q is under %s, where mcpgate serves the protected resource metadata", u.Route, auth.WellKnownProtectedResource)
		}
	}
	seenScope := map[string]int{}
	for i, s := range a.ScopesSupported {
		at := indexPath("auth.scopes_supported", i)
		if !isScopeToken(s) {
			p.add(at, "%q is not a scope (RFC 6749: printable ASCII without spaces, \" or \\)", s)
			continue
		}
		if j, dup := seenScope[s]; dup {
			p.add(at, "%q is listed twice (also auth.scopes_supported[%d])", s, j)
			continue
		}
		seenScope[s] = i
	}
	checkTenantHeader(p, "auth.tenant_header", a.TenantHeader, c.Listeners.ExtProc.UpstreamHeader)
	checkDurationIn(p, "auth.session_ttl", a.SessionTTL, durationRange{positive: true})
	if g := a.GatewayTokens; g != nil {
		if c.Store == nil {
			p.add("auth.gateway_tokens", "requires a store section: gateway tokens are kept (hashed) in the store")
		}
		if c.Rights == nil {
			p.add("auth.gateway_tokens", "requires a rights section: the rights a token is created with are capped by its creator's live rights")
		}
		def, defOK := checkDurationIn(p, "auth.gateway_tokens.default_ttl", g.DefaultTTL, durationRange{positive: true})
		maxTTL, maxOK := checkDurationIn(p, "auth.gateway_tokens.max_ttl", g.MaxTTL, durationRange{positive: true})
		if defOK && maxOK && def > maxTTL {
			p.add("auth.gateway_tokens.default_ttl", "%q is longer than max_ttl (%q); it must not be", g.DefaultTTL, g.MaxTTL)
		}
	}
	if len(a.Issuers) == 0 {
		if a.GatewayTokens == nil {
			p.add("auth.issuers", "at least one issuer is required unless auth.gateway_tokens is set (remove the auth section to run without authentication)")
		}
		return
	}
	seen := map[string]int{}
	introspecting := -1
	for i, is := range a.Issuers {
		at := indexPath("auth.issuers", i)
		if is.Issuer == "" {
			p.add(at+".issuer", "required (the issuer identifier, e.g. \"https://login.example.com\")")
		} else if j, dup := seen[strings.TrimSpace(is.Issuer)]; dup {
			p.add(at+".issuer", "%q is also auth.issuers[%d]; each issuer once", is.Issuer, j)
		} else {
			seen[strings.TrimSpace(is.Issuer)] = i
		}
		checkDurationIn(p, at+".clock_skew", is.ClockSkew, durationRange{positive: true})
		checkDurationIn(p, at+".min_jwks_refresh", is.MinJWKSRefresh, durationRange{positive: true})
		for j, aud := range is.Audiences {
			apath := indexPath(at+".audiences", j)
			canon, err := auth.CanonicalResourceURI(aud)
			switch {
			case strings.Contains(aud, routes.Param):
				p.add(apath, "%q: %s is not filled in here; list each tenant's resource URI (e.g. %q), or leave audiences empty to trust the issuer for every tenant", aud, routes.Param, strings.Replace(aud, routes.Param, "acme", 1))
			case err != nil:
				p.addErr(apath, err, "%q is not a resource URI (resource_base_url followed by a route, e.g. \"https://mcp.example.com/mcp\")", aud)
			case canon != aud:
				p.add(apath, "%q is not in canonical form; write %q", aud, canon)
			case baseOK && resources[aud] == "" && !onTenantRoute(aud):
				p.add(apath, "%q is not the resource URI of any route (%s)", aud, strings.Join(slices.Sorted(keys(resources)), ", "))
			}
		}
		if in := is.Introspection; in != nil {
			if introspecting >= 0 {
				p.add(at+".introspection", "auth.issuers[%d] already introspects opaque tokens; at most one issuer may (opaque tokens name no issuer to choose by)", introspecting)
			} else {
				introspecting = i
			}
			if in.Endpoint != "" {
				if u, err := url.Parse(in.Endpoint); err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
					p.add(at+".introspection.endpoint", "%q is not an absolute http(s) URL", in.Endpoint)
				}
			}
			if in.ClientID == "" {
				p.add(at+".introspection.client_id", "required with introspection")
			}
			if in.ClientSecret == "" {
				p.add(at+".introspection.client_secret", "required with introspection")
			}
		}
		// What remains (issuer URL rules, algorithm and type
		// allowlists) is the auth package's own check, one issuer at a
		// time so each problem names its issuer's key path.
		ic := is.issuerConfig()
		ic.Audiences = nil // checked above, with the routes
		ic.Introspection = nil
		if err := auth.ValidateIssuers([]auth.IssuerConfig{ic}); err != nil && is.Issuer != "" {
			// "auth: issuer "x": problem\nproblem..."
			msg := strings.TrimPrefix(err.Error(), "auth: ")
			msg = strings.TrimPrefix(msg, fmt.Sprintf("issuer %q: ", strings.TrimSpace(is.Issuer)))
			for _, line := range strings.Split(msg, "\n") {
				if line != "" {
					p.addErr(at, err, "%s", line)
				}
			}
		}
	}
}

// checkResourceBase checks resource_base_url: an absolute http(s) origin,
// https except on loopback hosts. It reports whether the value is usable.
func checkResourceBase(p *problems, path, raw string) bool {
	const form = "the gateway's public origin, e.g. \"https://mcp.example.com\""
	if raw == "" {
		p.add(path, "required (%s)", form)
		return false
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		p.add(path, "%q is not an absolute URL (%s)", raw, form)
		return false
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(raw, "?#") || (u.Path != "" && u.Path != "/") {
		p.add(path, "%q must be only scheme://host[:port], without path, query, fragment or user (%s)", raw, form)
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
	case "http":
		if !isLoopbackHost(u.Hostname()) {
			p.add(path, "%q: https is required except on loopback hosts", raw)
			return false
		}
	default:
		p.add(path, "%q: scheme must be https", raw)
		return false
	}
	if _, err := auth.CanonicalResourceURI(raw); err != nil {
		p.addErr(path, err, "%q is not a resource URI: %v", raw, err)
		return false
	}
	return true
}

func isLoopbackHost(h string) bool {
	h = strings.ToLower(h)
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// reservedTenantHeaders are headers tenant_header may not name: they carry
// credentials, routing or MCP protocol state, or mcpgate's own assertion.
var reservedTenantHeaders = []string{"authorization", "proxy-authorization", "cookie", "host", "content-type", "mcpgate-assertion"}

// checkTenantHeader checks auth.tenant_header: empty, or an HTTP header
// name that is not reserved.
func checkTenantHeader(p *problems, path, h, upstreamHeader string) {
	if h == "" {
		return
	}
	lower := strings.ToLower(h)
	switch {
	case !httpTokenPattern.MatchString(h):
		p.add(path, "%q is not an HTTP header name (letters, digits and !#$%%&'*+-.^_`|~)", h)
	case slices.Contains(reservedTenantHeaders, lower):
		p.add(path, "%q cannot name the tenant: it is reserved (%s and mcp-*)", h, strings.Join(reservedTenantHeaders, ", "))
	case strings.HasPrefix(lower, "mcp-"):
		p.add(path, "%q cannot name the tenant: mcp-* headers belong to the MCP protocol", h)
	case strings.EqualFold(h, upstreamHeader):
		p.add(path, "%q is also listeners.extproc.upstream_header", h)
	}
}

// isScopeToken reports whether s is an RFC 6749 scope-token:
// 1*( %x21 / %x23-5B / %x5D-7E ).
func isScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func keys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
