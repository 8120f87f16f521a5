package config

import (
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Credential kinds (upstreams[].credential.kind).
const (
	CredentialNone              = "none"
	CredentialStatic            = "static"
	CredentialClientCredentials = "client_credentials"
	CredentialTokenExchange     = "token_exchange"
)

// Subject tokens of a token exchange (upstreams[].credential.subject).
const (
	SubjectAccessToken = "access_token"
	SubjectAssertion   = "assertion"
)

// Credential is what an upstream receives as its own credential besides
// mcpgate's identity assertion. The client's `Authorization` and `Cookie`
// never reach an upstream with a credential; a client-sent field named
// like the credential's header is removed too. The secrets themselves
// never sit in this file: each is read from a file or an environment
// variable, reread on `SIGHUP` and when the file changes, and never
// logged or shown by `mcpgate validate`.
type Credential struct {
	// `none` (only the assertion, as without this section), `static` (an
	// API key header or basic auth), `client_credentials` (an OAuth 2.0
	// access token of mcpgate's own identity, RFC 6749 section 4.4) or
	// `token_exchange` (an RFC 8693 token exchanged on behalf of the
	// caller).
	//
	// Required.
	Kind string `yaml:"kind"`
	// `static`: the header field that carries the secret, e.g. `x-api-key`
	// or `authorization`. Not `cookie`, `host`, `content-*`, `mcp-*`,
	// `mcpgate-*` or a hop-by-hop field. With `basic_user`: `authorization`
	// (the default then).
	Header string `yaml:"header"`
	// `static`: a scheme written before the secret, e.g. `Bearer`
	// (`authorization: Bearer <secret>`). One token of letters, digits
	// and `-`.
	//
	// Default: none: the field holds the secret alone.
	Scheme string `yaml:"scheme"`
	// `static`: the file holding the secret (surrounding white space
	// trimmed), relative to the configuration file. One of `value_file`,
	// `value_env`, or `basic_user` with a password.
	ValueFile string `yaml:"value_file"`
	// `static`: the environment variable holding the secret.
	ValueEnv string `yaml:"value_env"`
	// `static`: the user of HTTP basic authentication (RFC 7617); the
	// password comes from `password_file` or `password_env`. No `:`.
	BasicUser string `yaml:"basic_user"`
	// `static` with `basic_user`: the file holding the password, relative
	// to the configuration file.
	PasswordFile string `yaml:"password_file"`
	// `static` with `basic_user`: the environment variable holding the
	// password.
	PasswordEnv string `yaml:"password_env"`
	// `client_credentials`, `token_exchange`: the token endpoint, `https://`
	// (`http://` only on a loopback host).
	TokenURL string `yaml:"token_url"`
	// `client_credentials`, `token_exchange`: mcpgate's client id at the
	// token endpoint.
	ClientID string `yaml:"client_id"`
	// `client_credentials`, `token_exchange`: the file holding the client
	// secret, relative to the configuration file. This or
	// `client_secret_env`.
	ClientSecretFile string `yaml:"client_secret_file"`
	// `client_credentials`, `token_exchange`: the environment variable
	// holding the client secret.
	ClientSecretEnv string `yaml:"client_secret_env"`
	// `client_credentials`, `token_exchange`: the scopes asked for.
	//
	// Default: none.
	Scopes []string `yaml:"scopes"`
	// `client_credentials`, `token_exchange`: the `audience` parameter of
	// the token request (RFC 8693 section 2.1; many providers take it for
	// client credentials too), usually the upstream's identifier at the
	// provider. No spaces.
	//
	// Default: none.
	Audience string `yaml:"audience"`
	// `client_credentials`, `token_exchange`: the `resource` parameter
	// (RFC 8707), an absolute URI without fragment, e.g. the upstream's
	// URL.
	//
	// Default: none.
	Resource string `yaml:"resource"`
	// `token_exchange`: the subject token: `access_token` (the caller's
	// verified OAuth access token) or `assertion` (mcpgate's signed
	// identity assertion of the caller, for callers with gateway-issued
	// tokens; the provider must trust mcpgate's keys).
	//
	// Default: `access_token`.
	Subject string `yaml:"subject"`
	// `token_exchange`: how the catalog lists this upstream's tools, with
	// no caller to exchange for: `client_credentials` (a token of
	// mcpgate's own identity from the same `token_url`, client, scopes,
	// audience and resource) or `none` (the assertion alone). Required
	// with `token_exchange` while the catalog is on.
	Discovery string `yaml:"discovery"`
}

// CredentialKind is the kind of u's credential, CredentialNone when it
// has none.
func (u *Upstream) CredentialKind() string {
	if u.Credential == nil || u.Credential.Kind == "" {
		return CredentialNone
	}
	return u.Credential.Kind
}

// headerToken is an HTTP field name (RFC 9110 section 5.1).
var headerToken = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// schemeToken is an authentication scheme such as Bearer.
var schemeToken = regexp.MustCompile("^[A-Za-z0-9-]+$")

// forbiddenCredentialHeader reports a field name a static credential must
// not use: fields the gateway or HTTP itself owns.
func forbiddenCredentialHeader(h string) bool {
	switch h {
	case "cookie", "host", "connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
		"proxy-authorization", "proxy-connection", "accept-encoding", "accept", "origin",
		"x-forwarded-for", "x-forwarded-host", "x-forwarded-proto", "traceparent", "tracestate":
		return true
	}
	return strings.HasPrefix(h, "content-") || strings.HasPrefix(h, "mcp-") || strings.HasPrefix(h, "mcpgate-") || strings.HasPrefix(h, ":")
}

// validateCredential checks upstreams[i].credential.
func (c *Config) validateCredential(p *problems, at string, u Upstream) {
	cr := u.Credential
	if cr == nil {
		return
	}
	at += ".credential"
	// only lists the keys a kind takes; every other set key is an error.
	set := map[string]bool{
		"header": cr.Header != "", "scheme": cr.Scheme != "", "value_file": cr.ValueFile != "", "value_env": cr.ValueEnv != "",
		"basic_user": cr.BasicUser != "", "password_file": cr.PasswordFile != "", "password_env": cr.PasswordEnv != "",
		"token_url": cr.TokenURL != "", "client_id": cr.ClientID != "", "client_secret_file": cr.ClientSecretFile != "",
		"client_secret_env": cr.ClientSecretEnv != "", "scopes": len(cr.Scopes) > 0, "audience": cr.Audience != "",
		"resource": cr.Resource != "", "subject": cr.Subject != "", "discovery": cr.Discovery != "",
	}
	only := func(keys ...string) {
		for _, k := range []string{"header", "scheme", "value_file", "value_env", "basic_user", "password_file", "password_env",
			"token_url", "client_id", "client_secret_file", "client_secret_env", "scopes", "audience", "resource", "subject", "discovery"} {
			if set[k] && !slices.Contains(keys, k) {
				p.add(at+"."+k, "not a key of kind %q", cr.Kind)
			}
		}
	}
	oauth := []string{"token_url", "client_id", "client_secret_file", "client_secret_env", "scopes", "audience", "resource"}
	switch cr.Kind {
	case CredentialNone:
		only()
	case CredentialStatic:
		only("header", "scheme", "value_file", "value_env", "basic_user", "password_file", "password_env")
		c.validateStatic(p, at, cr)
	case CredentialClientCredentials:
		only(oauth...)
		validateOAuthClient(p, at, cr)
	case CredentialTokenExchange:
		only(append(oauth, "subject", "discovery")...)
		validateOAuthClient(p, at, cr)
		switch cr.Subject {
		case SubjectAccessToken, SubjectAssertion:
		default:
			p.add(at+".subject", "%q is not a subject token: use %q or %q", cr.Subject, SubjectAccessToken, SubjectAssertion)
		}
		switch {
		case cr.Discovery == "" && !c.Catalog.Disabled:
			p.add(at+".discovery", "required with kind %q while the catalog is on (how the catalog lists the upstream without a caller): %q or %q", cr.Kind, CredentialClientCredentials, CredentialNone)
		case cr.Discovery == "", cr.Discovery == CredentialClientCredentials, cr.Discovery == CredentialNone:
		default:
			p.add(at+".discovery", "%q is not a discovery credential: use %q or %q", cr.Discovery, CredentialClientCredentials, CredentialNone)
		}
	case "":
		p.add(at+".kind", "required: %s, %s, %s or %s", CredentialNone, CredentialStatic, CredentialClientCredentials, CredentialTokenExchange)
	default:
		p.add(at+".kind", "%q is not a credential kind: use %s, %s, %s or %s", cr.Kind, CredentialNone, CredentialStatic, CredentialClientCredentials, CredentialTokenExchange)
	}
}

func (c *Config) validateStatic(p *problems, at string, cr *Credential) {
	h := strings.ToLower(cr.Header)
	if cr.BasicUser != "" {
		if h != "" && h != "authorization" {
			p.add(at+".header", "%q: basic auth goes in authorization", cr.Header)
		}
		if cr.Scheme != "" {
			p.add(at+".scheme", "not with basic_user (the scheme is Basic)")
		}
		if cr.ValueFile != "" || cr.ValueEnv != "" {
			p.add(at+".basic_user", "not with value_file or value_env: the basic auth password comes from password_file or password_env")
		}
		if strings.ContainsRune(cr.BasicUser, ':') || hasControl(cr.BasicUser) {
			p.add(at+".basic_user", "must not contain ':' or control characters")
		}
		checkSecretRef(p, at, "password_file", "password_env", cr.PasswordFile, cr.PasswordEnv, "the basic auth password")
		return
	}
	switch {
	case h == "":
		p.add(at+".header", "required (the header field that carries the secret, e.g. x-api-key or authorization)")
	case !headerToken.MatchString(h):
		p.add(at+".header", "%q is not a header field name", cr.Header)
	case forbiddenCredentialHeader(h):
		p.add(at+".header", "%q is a field the gateway or HTTP owns; use another (e.g. x-api-key or authorization)", cr.Header)
	}
	if cr.Scheme != "" && !schemeToken.MatchString(cr.Scheme) {
		p.add(at+".scheme", "%q is not an authentication scheme (one token, e.g. Bearer)", cr.Scheme)
	}
	if cr.PasswordFile != "" || cr.PasswordEnv != "" {
		p.add(at+".password_file", "only with basic_user")
	}
	checkSecretRef(p, at, "value_file", "value_env", cr.ValueFile, cr.ValueEnv, "the secret")
}

// checkSecretRef checks that exactly one of a file and an environment
// variable names a secret; the file must exist (its content is never
// shown).
func checkSecretRef(p *problems, at, fileKey, envKey, file, env, what string) {
	switch {
	case file != "" && env != "":
		p.add(at+"."+envKey, "not with %s: %s comes from one place", fileKey, what)
	case file != "":
		checkFile(p, at+"."+fileKey, file, what)
	case env != "":
		if !envName.MatchString(env) {
			p.add(at+"."+envKey, "%q is not an environment variable name", env)
		}
	default:
		p.add(at+"."+fileKey, "required: %s or %s (%s)", fileKey, envKey, what)
	}
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

func validateOAuthClient(p *problems, at string, cr *Credential) {
	if cr.TokenURL == "" {
		p.add(at+".token_url", "required (the token endpoint)")
	} else if u, err := url.Parse(cr.TokenURL); err != nil || u.Host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopbackHost(u.Hostname()))) {
		p.add(at+".token_url", "%q must be an https:// URL with a host (http:// only on a loopback host)", cr.TokenURL)
	} else if u.User != nil || u.Fragment != "" {
		p.add(at+".token_url", "%q must not hold user information or a fragment", cr.TokenURL)
	}
	switch {
	case cr.ClientID == "":
		p.add(at+".client_id", "required (mcpgate's client id at the token endpoint)")
	case hasControl(cr.ClientID):
		p.add(at+".client_id", "must not contain control characters")
	}
	checkSecretRef(p, at, "client_secret_file", "client_secret_env", cr.ClientSecretFile, cr.ClientSecretEnv, "the client secret")
	for i, s := range cr.Scopes {
		if s == "" || hasSpaceOrControl(s) || strings.ContainsAny(s, `"\`) {
			p.add(indexPath(at+".scopes", i), "%q is not a scope (RFC 6749 section 3.3)", s)
		}
	}
	if hasSpaceOrControl(cr.Audience) {
		p.add(at+".audience", "%q must not contain spaces or control characters", cr.Audience)
	}
	if cr.Resource != "" {
		if u, err := url.Parse(cr.Resource); err != nil || !u.IsAbs() || u.Fragment != "" || hasSpaceOrControl(cr.Resource) {
			p.add(at+".resource", "%q must be an absolute URI without fragment (RFC 8707)", cr.Resource)
		}
	}
}

// resolveCredentialPaths makes the secret files of upstream credentials
// relative to baseDir.
func resolveCredentialPaths(c *Config, baseDir string) {
	for i := range c.Upstreams {
		cr := c.Upstreams[i].Credential
		if cr == nil {
			continue
		}
		for _, p := range []*string{&cr.ValueFile, &cr.PasswordFile, &cr.ClientSecretFile} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(baseDir, *p)
			}
		}
	}
}

// applyCredentialDefaults fills the defaults of upstream credentials.
func applyCredentialDefaults(c *Config) {
	for i := range c.Upstreams {
		cr := c.Upstreams[i].Credential
		if cr == nil {
			continue
		}
		if cr.Kind == CredentialStatic && cr.BasicUser != "" && cr.Header == "" {
			cr.Header = "authorization"
		}
		if cr.Kind == CredentialTokenExchange && cr.Subject == "" {
			cr.Subject = SubjectAccessToken
		}
	}
}
