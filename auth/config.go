package auth

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Defaults applied to an IssuerConfig.
const (
	DefaultClockSkew              = 30 * time.Second
	DefaultMinJWKSRefresh         = 30 * time.Second
	DefaultJWKSMaxAge             = 10 * time.Minute
	DefaultSubjectClaim           = "sub"
	DefaultRolesClaim             = "roles"
	DefaultTokenCacheSize         = 10000
	DefaultIntrospectionParallel  = 16
	DefaultHTTPTimeout            = 10 * time.Second
	maxProviderResponseBytes      = 1 << 20
	defaultIntrospectionTokenHint = "access_token"
)

// DefaultAlgorithms is the default JWS algorithm allowlist.
var DefaultAlgorithms = []string{"RS256", "ES256", "PS256", "EdDSA"}

// DefaultTypes is the default JOSE typ allowlist (RFC 9068 section 2.1).
var DefaultTypes = []string{"at+jwt", "application/at+jwt"}

// asymmetricAlgorithms are the algorithms an allowlist may hold: never
// "none", never an HMAC algorithm (a public key used as an HMAC secret is
// the classic algorithm-confusion attack).
var asymmetricAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA",
}

// IssuerConfig is one trusted authorization server.
type IssuerConfig struct {
	// Issuer is the issuer identifier; discovery reads
	// Issuer + "/.well-known/openid-configuration" and its issuer must be
	// exactly this. https is required except on loopback hosts.
	Issuer string
	// Audiences are the canonical MCP route URIs (RFC 8707) this issuer may
	// issue tokens for; see CanonicalResourceURI. Empty: any route. The
	// token's aud must contain the URI of the route being called either way.
	Audiences []string
	// Algorithms is the JWS alg allowlist. Default RS256, ES256, PS256,
	// EdDSA. "none" and HMAC algorithms are refused.
	Algorithms []string
	// Types is the JOSE typ header allowlist, compared case-insensitively
	// with an optional "application/" prefix. Default "at+jwt",
	// "application/at+jwt". An entry "" admits tokens without typ.
	Types []string
	// ClockSkew is the tolerance for exp, nbf and iat. Default 30s.
	ClockSkew time.Duration
	// MinJWKSRefresh is the least time between two JWKS fetches, so tokens
	// with unknown kids cannot hammer the provider. Default 30s.
	MinJWKSRefresh time.Duration
	// JWKSMaxAge is how old the cached JWKS may get before a call refreshes
	// it in the background, so a key that left the JWKS (and the tokens it
	// signed) is noticed even when no unknown kid shows up. Default 10m.
	JWKSMaxAge time.Duration
	// TenantClaim names the claim that carries the tenant: a string, or an
	// array of strings for a principal of several tenants (see
	// Claims.Tenants). Empty: tokens of this issuer carry no tenant
	// (Claims.Tenant is "").
	TenantClaim string
	// RolesClaim names the claim that carries the principal's roles
	// (Claims.Roles): a string (one role) or an array of strings. Default
	// "roles". A token without it has no roles.
	RolesClaim string
	// SubjectClaim names the subject claim. Default "sub". Required in
	// every token.
	SubjectClaim string
	// ScopeClaim names the scope claim, a space-separated string or an
	// array of strings. Default: "scope", else "scp".
	ScopeClaim string
	// ClientIDClaim names the client claim. Default: "client_id", else "azp".
	ClientIDClaim string
	// Introspection, if set, verifies opaque (non-JWT) tokens with RFC 7662
	// at this issuer. At most one issuer may set it.
	Introspection *IntrospectionConfig
}

// IntrospectionConfig configures RFC 7662 token introspection.
type IntrospectionConfig struct {
	// Endpoint is the introspection URL. Default: introspection_endpoint of
	// the issuer's discovery document.
	Endpoint string
	// ClientID and ClientSecret authenticate the gateway
	// (client_secret_basic).
	ClientID     string
	ClientSecret string
	// CacheTTL bounds how long an active answer is reused. Default 0: until
	// the token's exp.
	CacheTTL time.Duration
	// MaxConcurrent bounds the introspection requests in flight. Default 16.
	MaxConcurrent int
}

// LogValue keeps the client secret out of logs.
func (c IntrospectionConfig) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("endpoint", c.Endpoint),
		slog.String("client_id", c.ClientID),
		slog.String("client_secret", "REDACTED"),
		slog.Duration("cache_ttl", c.CacheTTL),
	)
}

// String keeps the client secret out of formatted output.
func (c IntrospectionConfig) String() string {
	return fmt.Sprintf("{Endpoint:%s ClientID:%s ClientSecret:REDACTED CacheTTL:%s}", c.Endpoint, c.ClientID, c.CacheTTL)
}

// withDefaults returns c with every unset field defaulted.
func (c IssuerConfig) withDefaults() IssuerConfig {
	c.Issuer = strings.TrimSpace(c.Issuer)
	if len(c.Algorithms) == 0 {
		c.Algorithms = DefaultAlgorithms
	}
	if len(c.Types) == 0 {
		c.Types = DefaultTypes
	}
	if c.ClockSkew == 0 {
		c.ClockSkew = DefaultClockSkew
	}
	if c.MinJWKSRefresh == 0 {
		c.MinJWKSRefresh = DefaultMinJWKSRefresh
	}
	if c.JWKSMaxAge == 0 {
		c.JWKSMaxAge = DefaultJWKSMaxAge
	}
	if c.SubjectClaim == "" {
		c.SubjectClaim = DefaultSubjectClaim
	}
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	if c.Introspection != nil {
		in := *c.Introspection
		if in.MaxConcurrent == 0 {
			in.MaxConcurrent = DefaultIntrospectionParallel
		}
		c.Introspection = &in
	}
	c.Algorithms = slices.Clone(c.Algorithms)
	c.Types = slices.Clone(c.Types)
	c.Audiences = slices.Clone(c.Audiences)
	return c
}

// validate reports every problem of a defaulted config.
func (c IssuerConfig) validate() error {
	var errs []error
	if err := validIssuerURL(c.Issuer); err != nil {
		errs = append(errs, err)
	}
	for _, a := range c.Audiences {
		canon, err := CanonicalResourceURI(a)
		if err != nil {
			errs = append(errs, fmt.Errorf("audience: %w", err))
		} else if canon != a {
			errs = append(errs, fmt.Errorf("audience %q: not canonical, use %q", a, canon))
		}
	}
	for _, a := range c.Algorithms {
		if !slices.Contains(asymmetricAlgorithms, a) {
			errs = append(errs, fmt.Errorf("algorithm %q: not allowed (asymmetric JWS algorithms only: %s)", a, strings.Join(asymmetricAlgorithms, ", ")))
		}
	}
	if c.ClockSkew < 0 {
		errs = append(errs, errors.New("clock skew: must not be negative"))
	}
	if c.MinJWKSRefresh < 0 {
		errs = append(errs, errors.New("min JWKS refresh: must not be negative"))
	}
	if c.JWKSMaxAge < c.MinJWKSRefresh {
		errs = append(errs, errors.New("JWKS max age: must not be below the min JWKS refresh"))
	}
	if in := c.Introspection; in != nil {
		if in.Endpoint != "" {
			if u, err := url.Parse(in.Endpoint); err != nil || !u.IsAbs() || u.Host == "" {
				errs = append(errs, fmt.Errorf("introspection endpoint %q: must be an absolute URL", in.Endpoint))
			}
		}
		if in.ClientID == "" || in.ClientSecret == "" {
			errs = append(errs, errors.New("introspection: client ID and client secret are required"))
		}
		if in.CacheTTL < 0 || in.MaxConcurrent < 0 {
			errs = append(errs, errors.New("introspection: cache TTL and max concurrent must not be negative"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("issuer %q: %w", c.Issuer, err)
	}
	return nil
}

func validIssuerURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || !u.IsAbs() || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("issuer %q: must be an absolute URL without query, fragment or user info", s)
	}
	switch u.Scheme {
	case "https":
	case "http":
		if !isLoopback(u.Hostname()) {
			return fmt.Errorf("issuer %q: https is required except on loopback hosts", s)
		}
	default:
		return fmt.Errorf("issuer %q: scheme must be https", s)
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CanonicalResourceURI returns the canonical form of a resource URI (an MCP
// route, RFC 8707 / MCP authorization): an absolute http(s) URI with a
// lowercase scheme and host, no default port, no fragment and no user info.
// The path and query are kept as they are, except that a lone "/" path is
// dropped. Routes and audiences are compared in this form.
func CanonicalResourceURI(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("resource URI %q: %w", s, err)
	}
	if !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("resource URI %q: must be absolute", s)
	}
	if u.Fragment != "" || strings.Contains(s, "#") {
		return "", fmt.Errorf("resource URI %q: must not have a fragment", s)
	}
	if u.User != nil {
		return "", fmt.Errorf("resource URI %q: must not have user info", s)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "https" && scheme != "http" {
		return "", fmt.Errorf("resource URI %q: scheme must be https or http", s)
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port := u.Port(); port != "" && !(scheme == "https" && port == "443") && !(scheme == "http" && port == "80") {
		host += ":" + port
	}
	path := u.EscapedPath()
	if path == "/" {
		path = ""
	}
	out := scheme + "://" + host + path
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, nil
}

// normalizeTyp lowercases a typ value and drops an "application/" prefix
// (RFC 7515 section 4.1.9).
func normalizeTyp(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	return strings.TrimPrefix(t, "application/")
}
