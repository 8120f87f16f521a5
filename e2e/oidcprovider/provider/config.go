// Package provider is a real OpenID provider for tests, built on
// github.com/zitadel/oidc/v3/pkg/op with in-memory storage.
//
// It serves discovery (OpenID Connect and RFC 8414), a JWKS with RSA, EC and
// Ed25519 keys, the token endpoint with the client_credentials, the
// authorization_code (+PKCE, auto-approved for a configured user) and the
// RFC 8693 token exchange grants,
// RFC 9068 JWT access tokens or opaque ones, RFC 7662 introspection and
// RFC 7009 revocation, plus a small admin API for tests (key rotation and
// request counters). The e2e/oidcprovider main package runs it as its own
// process; the oidctest package starts that process from tests.
package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"time"
)

// Defaults applied by [Config.ApplyDefaults].
const (
	DefaultTokenLifetime   = 5 * time.Minute
	DefaultIDTokenLifetime = 5 * time.Minute
	DefaultSigningAlg      = "RS256"
	DefaultTenantClaim     = "tenant"
	DefaultRolesClaim      = "roles"
	DefaultAccessTokenType = "at+jwt"
)

// Access token formats a client may be configured with.
const (
	FormatJWT    = "jwt"
	FormatOpaque = "opaque"
)

// Grant types a client may be configured with.
const (
	GrantClientCredentials = "client_credentials"
	GrantAuthorizationCode = "authorization_code"
	// GrantTokenExchange is RFC 8693 token exchange: the client trades an
	// active access token this provider issued for one of another audience
	// with the same subject.
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// SigningAlgs are the JWS algorithms the provider holds a key for. Every key
// rotation creates one new key per algorithm.
var SigningAlgs = []string{"RS256", "PS256", "ES256", "EdDSA"}

// Duration is a time.Duration written as a Go duration string ("5m", "-2m").
type Duration time.Duration

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"5m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// DurationPtr returns a pointer to d, for the optional Duration fields.
func DurationPtr(d time.Duration) *Duration {
	v := Duration(d)
	return &v
}

// Config is the provider's configuration, read from a JSON file. Unknown keys
// are errors.
type Config struct {
	// Issuer is the issuer identifier. Default: "http://" + the listen address.
	Issuer string `json:"issuer,omitempty"`
	// TokenLifetime is the access token lifetime. Default "5m".
	TokenLifetime Duration `json:"token_lifetime,omitempty"`
	// IDTokenLifetime is the ID token lifetime. Default "5m".
	IDTokenLifetime Duration `json:"id_token_lifetime,omitempty"`
	// SigningAlg is the default JWS algorithm of access tokens: one of
	// RS256, PS256, ES256, EdDSA. Default RS256. ID tokens always use RS256.
	SigningAlg string `json:"signing_alg,omitempty"`
	// TenantClaim names the claim carrying the tenant. Default "tenant".
	TenantClaim string `json:"tenant_claim,omitempty"`
	// RolesClaim names the claim carrying the roles. Default "roles".
	RolesClaim string `json:"roles_claim,omitempty"`
	// AutoApproveUser is the subject of the user the authorization endpoint
	// logs in and approves without asking, unless the request names another
	// configured user in login_hint. Default: the first user.
	AutoApproveUser string `json:"auto_approve_user,omitempty"`
	// LoginForm makes the authorization endpoint show a sign-in page
	// (PathLogin) where a person types or picks a configured user's subject
	// and submits it, as in a browser; login_hint fills the field in.
	// Default false: the request is approved without a page, for
	// AutoApproveUser or the login_hint user.
	LoginForm bool `json:"login_form,omitempty"`
	// Clients are the registered OAuth clients.
	Clients []Client `json:"clients"`
	// Users are the people who can log in through the code flow.
	Users []User `json:"users,omitempty"`
}

// Client is a registered OAuth client.
type Client struct {
	// ID is the client_id.
	ID string `json:"id"`
	// Secret is the client secret (client_secret_basic or client_secret_post).
	// Empty makes a public client: authorization code with PKCE only.
	Secret string `json:"secret,omitempty"`
	// RedirectURIs are the registered redirect URIs (exact match; a loopback
	// URI of a public client matches on any port, RFC 8252).
	RedirectURIs []string `json:"redirect_uris,omitempty"`
	// GrantTypes: client_credentials, authorization_code and/or
	// GrantTokenExchange (RFC 8693, needs a secret). Default:
	// client_credentials if the client has a secret, authorization_code if it
	// has redirect URIs.
	GrantTypes []string `json:"grant_types,omitempty"`
	// Scopes are the scopes the client may request. Empty: any scope.
	Scopes []string `json:"scopes,omitempty"`
	// Resources are the resource indicators (RFC 8707) the client may
	// request, and the audiences it may request in a token exchange.
	// Empty: any absolute URI without a fragment (any audience).
	Resources []string `json:"resources,omitempty"`
	// Audience is the aud of tokens requested without a resource parameter.
	// Default: the client ID.
	Audience []string `json:"audience,omitempty"`
	// AccessTokenFormat is "jwt" (RFC 9068, default) or "opaque" (a random
	// string only introspection can read).
	AccessTokenFormat string `json:"access_token_format,omitempty"`
	// AccessTokenType is the JOSE typ header of JWT access tokens. Default
	// "at+jwt"; "JWT" mints plain JWTs for negative tests.
	AccessTokenType string `json:"access_token_type,omitempty"`
	// SigningAlg overrides Config.SigningAlg for this client's access tokens.
	SigningAlg string `json:"signing_alg,omitempty"`
	// TokenLifetime overrides Config.TokenLifetime. It may be zero or
	// negative to mint tokens that are already expired.
	TokenLifetime *Duration `json:"token_lifetime,omitempty"`
	// NotBefore is added to the issue time to give nbf; positive values mint
	// tokens that are not yet valid. Default 0.
	NotBefore Duration `json:"not_before,omitempty"`
	// Subject is the sub of client_credentials tokens. Default: the client ID.
	Subject string `json:"subject,omitempty"`
	// Tenant is the tenant claim of client_credentials tokens.
	Tenant string `json:"tenant,omitempty"`
	// Roles is the roles claim of client_credentials tokens.
	Roles []string `json:"roles,omitempty"`
	// Claims are extra claims added to every access token of this client.
	Claims map[string]any `json:"claims,omitempty"`
}

// User is a person who logs in through the authorization code flow.
type User struct {
	// Subject is the sub claim.
	Subject string `json:"subject"`
	// Tenant is the tenant claim.
	Tenant string `json:"tenant,omitempty"`
	// Roles is the roles claim.
	Roles []string `json:"roles,omitempty"`
	// Email is returned in ID tokens and userinfo for the email scope.
	Email string `json:"email,omitempty"`
	// Claims are extra claims added to this user's access tokens; they win
	// over the client's claims of the same name.
	Claims map[string]any `json:"claims,omitempty"`
}

// LoadConfig reads a JSON config file strictly: unknown keys and trailing
// data are errors. Defaults are applied and the result validated.
func LoadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	cfg, err := ParseConfig(b)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes a JSON config strictly, applies defaults and validates.
func ParseConfig(b []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode: trailing data after the config object")
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// ApplyDefaults fills unset fields with the documented defaults.
func (c *Config) ApplyDefaults() {
	if c.TokenLifetime == 0 {
		c.TokenLifetime = Duration(DefaultTokenLifetime)
	}
	if c.IDTokenLifetime == 0 {
		c.IDTokenLifetime = Duration(DefaultIDTokenLifetime)
	}
	if c.SigningAlg == "" {
		c.SigningAlg = DefaultSigningAlg
	}
	if c.TenantClaim == "" {
		c.TenantClaim = DefaultTenantClaim
	}
	if c.RolesClaim == "" {
		c.RolesClaim = DefaultRolesClaim
	}
	if c.AutoApproveUser == "" && len(c.Users) > 0 {
		c.AutoApproveUser = c.Users[0].Subject
	}
	for i := range c.Clients {
		cl := &c.Clients[i]
		if len(cl.GrantTypes) == 0 {
			if cl.Secret != "" {
				cl.GrantTypes = append(cl.GrantTypes, GrantClientCredentials)
			}
			if len(cl.RedirectURIs) > 0 {
				cl.GrantTypes = append(cl.GrantTypes, GrantAuthorizationCode)
			}
		}
		if cl.AccessTokenFormat == "" {
			cl.AccessTokenFormat = FormatJWT
		}
		if cl.AccessTokenType == "" {
			cl.AccessTokenType = DefaultAccessTokenType
		}
		if cl.SigningAlg == "" {
			cl.SigningAlg = c.SigningAlg
		}
		if cl.Subject == "" {
			cl.Subject = cl.ID
		}
		if len(cl.Audience) == 0 {
			cl.Audience = []string{cl.ID}
		}
	}
}

// Validate reports every problem of the config at once.
func (c *Config) Validate() error {
	var errs []error
	if c.Issuer != "" {
		if u, err := url.Parse(c.Issuer); err != nil || u.Scheme == "" || u.Host == "" || u.Fragment != "" || u.RawQuery != "" {
			errs = append(errs, fmt.Errorf("issuer %q: must be an absolute URL without query or fragment", c.Issuer))
		}
	}
	if !slices.Contains(SigningAlgs, c.SigningAlg) {
		errs = append(errs, fmt.Errorf("signing_alg %q: must be one of %v", c.SigningAlg, SigningAlgs))
	}
	if c.TokenLifetime <= 0 {
		errs = append(errs, errors.New("token_lifetime: must be positive"))
	}
	if c.IDTokenLifetime <= 0 {
		errs = append(errs, errors.New("id_token_lifetime: must be positive"))
	}
	users := map[string]bool{}
	for i, u := range c.Users {
		if u.Subject == "" {
			errs = append(errs, fmt.Errorf("users[%d].subject: required", i))
		}
		if users[u.Subject] {
			errs = append(errs, fmt.Errorf("users[%d].subject %q: duplicate", i, u.Subject))
		}
		users[u.Subject] = true
	}
	if c.AutoApproveUser != "" && !users[c.AutoApproveUser] {
		errs = append(errs, fmt.Errorf("auto_approve_user %q: not a configured user", c.AutoApproveUser))
	}
	if len(c.Clients) == 0 {
		errs = append(errs, errors.New("clients: at least one client is required"))
	}
	ids := map[string]bool{}
	for i, cl := range c.Clients {
		p := fmt.Sprintf("clients[%d]", i)
		if cl.ID == "" {
			errs = append(errs, fmt.Errorf("%s.id: required", p))
		}
		if ids[cl.ID] {
			errs = append(errs, fmt.Errorf("%s.id %q: duplicate", p, cl.ID))
		}
		ids[cl.ID] = true
		for _, g := range cl.GrantTypes {
			switch g {
			case GrantClientCredentials:
				if cl.Secret == "" {
					errs = append(errs, fmt.Errorf("%s.grant_types: client_credentials needs a secret", p))
				}
			case GrantTokenExchange:
				if cl.Secret == "" {
					errs = append(errs, fmt.Errorf("%s.grant_types: token exchange needs a secret", p))
				}
			case GrantAuthorizationCode:
				if len(cl.RedirectURIs) == 0 {
					errs = append(errs, fmt.Errorf("%s.grant_types: authorization_code needs redirect_uris", p))
				}
			default:
				errs = append(errs, fmt.Errorf("%s.grant_types: unsupported grant type %q", p, g))
			}
		}
		if len(cl.GrantTypes) == 0 {
			errs = append(errs, fmt.Errorf("%s: no grant type (set a secret or redirect_uris)", p))
		}
		for _, r := range cl.RedirectURIs {
			if u, err := url.Parse(r); err != nil || u.Scheme == "" || u.Fragment != "" {
				errs = append(errs, fmt.Errorf("%s.redirect_uris %q: must be an absolute URI without fragment", p, r))
			}
		}
		for _, r := range cl.Resources {
			if err := validResource(r); err != nil {
				errs = append(errs, fmt.Errorf("%s.resources: %w", p, err))
			}
		}
		switch cl.AccessTokenFormat {
		case FormatJWT, FormatOpaque:
		default:
			errs = append(errs, fmt.Errorf("%s.access_token_format %q: must be jwt or opaque", p, cl.AccessTokenFormat))
		}
		if !slices.Contains(SigningAlgs, cl.SigningAlg) {
			errs = append(errs, fmt.Errorf("%s.signing_alg %q: must be one of %v", p, cl.SigningAlg, SigningAlgs))
		}
		for _, reserved := range []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti", "client_id", "scope"} {
			if _, ok := cl.Claims[reserved]; ok {
				errs = append(errs, fmt.Errorf("%s.claims: %q is set by the provider", p, reserved))
			}
		}
	}
	return errors.Join(errs...)
}

// validResource checks an RFC 8707 resource indicator: an absolute URI
// without a fragment.
func validResource(r string) error {
	u, err := url.Parse(r)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Fragment != "" || u.RawFragment != "" {
		return fmt.Errorf("resource %q: must be an absolute URI without fragment", r)
	}
	return nil
}

func (c *Config) client(id string) *Client {
	for i := range c.Clients {
		if c.Clients[i].ID == id {
			return &c.Clients[i]
		}
	}
	return nil
}

func (c *Config) user(subject string) *User {
	for i := range c.Users {
		if c.Users[i].Subject == subject {
			return &c.Users[i]
		}
	}
	return nil
}

// lifetime returns the access token lifetime for cl.
func (c *Config) lifetime(cl *Client) time.Duration {
	if cl.TokenLifetime != nil {
		return cl.TokenLifetime.D()
	}
	return c.TokenLifetime.D()
}
