package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/auth"
)

// Defaults and bounds of the store, audit, rights, assertion and admin_api
// sections. Durations are Go duration strings, bounds inclusive.
const (
	DefaultAuditRetention                   = 720 * time.Hour // 30 days
	MinAuditRetention                       = time.Hour
	DefaultAuditLog                         = "stderr"
	DefaultRightsMaxStaleness time.Duration = 0 // no cache: every call asks the source
	MaxRightsMaxStaleness                   = 5 * time.Minute
	DefaultRightsTimeout                    = 2 * time.Second
	MaxRightsTimeout                        = 30 * time.Second
	// DefaultAssertionIssuer is the assertion issuer when there is no
	// auth.resource_base_url to use.
	DefaultAssertionIssuer   = "mcpgate"
	DefaultAssertionTTL      = 60 * time.Second
	MinAssertionTTL          = 10 * time.Second
	MaxAssertionTTL          = 10 * time.Minute
	DefaultPlatformAdminRole = "mcpgate.platform_admin"
	DefaultTenantAdminRole   = "mcpgate.tenant_admin"
)

// Roles of a static admin token (StaticToken.Role).
const (
	RolePlatformAdmin = "platform_admin"
	RoleTenantAdmin   = "tenant_admin"
)

// Audit.Log values.
const (
	AuditLogStderr = "stderr"
	AuditLogStdout = "stdout"
	AuditLogOff    = "off"
)

var auditLogs = []string{AuditLogStderr, AuditLogStdout, AuditLogOff}

// Store is the state store: gateway tokens, session bindings and audit
// records. Exactly one of Bolt and Redis.
type Store struct {
	// A bbolt (go.etcd.io/bbolt) database file, for **one**
	// mcpgate instance (the file is locked by the process that opens it).
	Bolt *BoltStore `yaml:"bolt"`
	// A Redis server shared by **several** instances. Its `maxmemory-policy`
	// must be `noeviction` (checked at start).
	Redis *RedisStore `yaml:"redis"`
}

// BoltStore is a bbolt database file.
type BoltStore struct {
	// The database file, created if missing. Its directory must exist
	// (mcpgate does not create directories); the path must not be a
	// directory. Relative to the configuration file. Keep it readable by
	// mcpgate only.
	//
	// Required.
	Path string `yaml:"path"`
}

// RedisStore is a Redis server.
type RedisStore struct {
	// `redis://[user:password@]host[:port][/db]`, `rediss://…` (TLS) or
	// `unix:///path/to.sock`, with go-redis's query options
	// (`?dial_timeout=3s`…). Checked as go-redis parses it. The password is
	// never logged or shown in an error.
	//
	// Required.
	URL string `yaml:"url"`
}

// LogValue keeps the password in the URL out of logs.
func (r RedisStore) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", redactURL(r.URL)))
}

// String keeps the password in the URL out of formatted output.
func (r RedisStore) String() string {
	return fmt.Sprintf("{URL:%s}", redactURL(r.URL))
}

// Audit configures the audit trail of gateway decisions and admin actions.
type Audit struct {
	// How long stored audit records are kept; older ones are deleted hourly.
	// At least `1h`. No effect without a store.
	//
	// Default: `720h` (30 days).
	Retention Duration `yaml:"retention"`
	// Where audit records are also written, one JSON line each: `stderr`,
	// `stdout` or `off`. Separate from `log`: its format and level do not
	// apply.
	Log string `yaml:"log"`
}

// Rights is the live rights source: what a person may do now, asked on
// every call. Exactly one of HTTP and File.
type Rights struct {
	// Ask the product's rights endpoint, one request per lookup (see package
	// `rights` for the wire contract).
	HTTP *RightsHTTP `yaml:"http"`
	// Read a rights file, reread when it changes
	// (`config/examples/rights.yaml` shows the format:
	// `tenants: {<tenant>: {<subject>: {rights: [...], active: true}}}`).
	File *RightsFile `yaml:"file"`
	// How long an answer (active or not) may be reused. `0s` asks the source
	// on every call, so a revoked right takes effect at once; a longer value
	// trades that for fewer lookups. At most `5m`.
	//
	// Default: `0s`: no cache.
	MaxStaleness Duration `yaml:"max_staleness"`
}

// RightsHTTP is the product's rights endpoint.
type RightsHTTP struct {
	// The endpoint. `https`, or `http` on loopback hosts only; no
	// `#fragment`. A password in it is never shown.
	//
	// Required.
	URL string `yaml:"url"`
	// Bound on one request; a source that does not answer in time fails the
	// call closed. Greater than 0, at most `30s`.
	Timeout Duration `yaml:"timeout"`
	// Headers sent with every request, e.g. `Authorization: Bearer …` for
	// the product. Names are HTTP header names, unique ignoring case; values
	// non-empty, without line breaks. **Values are never logged or shown in
	// an error**; keep the file readable by mcpgate only.
	//
	// Default: none.
	Headers map[string]string `yaml:"headers"`
}

// LogValue keeps the header values (credentials) and any password in the
// URL out of logs.
func (r RightsHTTP) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("url", redactURL(r.URL)),
		slog.String("timeout", r.Timeout.String()),
		slog.Any("headers", r.redactedHeaders()),
	)
}

// String keeps the header values and any password in the URL out of
// formatted output.
func (r RightsHTTP) String() string {
	return fmt.Sprintf("{URL:%s Timeout:%s Headers:%v}", redactURL(r.URL), r.Timeout, r.redactedHeaders())
}

func (r RightsHTTP) redactedHeaders() map[string]string {
	if r.Headers == nil {
		return nil
	}
	out := make(map[string]string, len(r.Headers))
	for k, v := range r.Headers {
		out[k] = redacted(v)
	}
	return out
}

// RightsFile is a rights file (see package rights for its format).
type RightsFile struct {
	// The rights file; it must exist. Relative to the configuration file.
	//
	// Required.
	Path string `yaml:"path"`
}

// Assertion configures the signed identity assertions mcpgate sends
// upstreams (who is calling, for which tenant, with which rights).
type Assertion struct {
	// The private JWK Set that signs (`mcpgate keys generate`); reread on
	// `SIGHUP`, so keys can be rotated. It must exist. Relative to the
	// configuration file. Without it mcpgate makes a key for this process
	// only and logs a warning: fine for one instance, wrong for replicas
	// (they would not share a key) or for upstreams that cache the JWKS
	// across restarts. Keep the file readable by mcpgate only.
	//
	// Default: none: a key made at start.
	KeysFile string `yaml:"keys_file"`
	// The assertions' `iss`. No spaces or control characters.
	//
	// Default: `auth.resource_base_url` when set, else `mcpgate`.
	Issuer string `yaml:"issuer"`
	// Lifetime of one assertion. From `10s` to `10m`.
	TTL Duration `yaml:"ttl"`
}

// AdminAPI configures the admin API (/v1/ on the admin listener). Callers
// authenticate with a static token or with an OIDC access token from one
// of auth.issuers whose aud is Audience.
type AdminAPI struct {
	// The `aud` admin OIDC tokens must carry, e.g.
	// `https://mcp.example.com/admin`. It must differ from every route's
	// resource URI (every tenant's, on a route with `{tenant}`), so an MCP
	// access token never passes as an admin token. Refused without
	// `auth.issuers` (nothing would verify such tokens).
	//
	// Required when `auth.issuers` is not empty.
	Audience string `yaml:"audience"`
	// The role, in an OIDC token, of a platform admin (every tenant).
	PlatformAdminRole string `yaml:"platform_admin_role"`
	// The role, in an OIDC token, of an admin of the token's tenant. Must
	// differ from `platform_admin_role`.
	TenantAdminRole string `yaml:"tenant_admin_role"`
	// Static admin tokens, for automation and for deployments without an
	// OpenID provider.
	//
	// Default: none.
	StaticTokens []StaticToken `yaml:"static_tokens"`
}

// StaticToken is one static admin token.
type StaticToken struct {
	// Names the token in the audit trail. 1–63 characters of `a-z`, `0-9`,
	// `_`, `-`; unique.
	//
	// Required.
	Name string `yaml:"name"`
	// The SHA-256 of the token's secret, **never the secret itself**:
	// `SECRET=$(openssl rand -base64 32); printf %s "$SECRET" | sha256sum`.
	// Upper or lower case; unique (each token its own secret); not the hash
	// of the empty string. The value is never shown in an error (it might be
	// a secret pasted by mistake).
	//
	// Required.
	SHA256 string `yaml:"sha256"`
	// `platform_admin` (every tenant) or `tenant_admin` (one tenant).
	//
	// Required.
	Role string `yaml:"role"`
	// The tenant a `tenant_admin` administers: required for `tenant_admin`,
	// refused for `platform_admin`.
	Tenant string `yaml:"tenant"`
}

// Hash returns SHA256 decoded; the zero array when it is not 64 hex digits
// (only possible on a configuration that failed Validate).
func (t StaticToken) Hash() [32]byte {
	var h [32]byte
	if len(t.SHA256) != 2*len(h) {
		return [32]byte{}
	}
	if _, err := hex.Decode(h[:], []byte(t.SHA256)); err != nil {
		return [32]byte{}
	}
	return h
}

// redactURL returns raw with any password replaced, or a placeholder when
// it does not parse (it might hide a password).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return u.Redacted()
}

// defaultAudience is the default aud of an upstream's assertions: its URL
// without user information, else its name.
func defaultAudience(u Upstream) string {
	if u.URL == "" {
		return u.Name
	}
	parsed, err := url.Parse(u.URL)
	if err != nil || parsed.User == nil {
		return u.URL
	}
	parsed.User = nil
	return parsed.String()
}

// applyIdentityDefaults fills the unset keys of the store, audit, rights,
// assertion and admin_api sections.
func (c *Config) applyIdentityDefaults() {
	c.Audit.Retention.orDefault(DefaultAuditRetention)
	if c.Audit.Log == "" {
		c.Audit.Log = DefaultAuditLog
	}
	if r := c.Rights; r != nil {
		r.MaxStaleness.orDefault(DefaultRightsMaxStaleness)
		if r.HTTP != nil {
			r.HTTP.Timeout.orDefault(DefaultRightsTimeout)
		}
	}
	if c.Assertion.Issuer == "" {
		c.Assertion.Issuer = DefaultAssertionIssuer
		if c.Auth != nil && c.Auth.ResourceBaseURL != "" {
			c.Assertion.Issuer = c.Auth.ResourceBaseURL
		}
	}
	c.Assertion.TTL.orDefault(DefaultAssertionTTL)
	if a := c.AdminAPI; a != nil {
		if a.PlatformAdminRole == "" {
			a.PlatformAdminRole = DefaultPlatformAdminRole
		}
		if a.TenantAdminRole == "" {
			a.TenantAdminRole = DefaultTenantAdminRole
		}
	}
}

// resolveIdentityPaths makes the relative file paths of the identity
// sections relative to baseDir.
func resolveIdentityPaths(c *Config, baseDir string) {
	resolve := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(baseDir, *p)
		}
	}
	if c.Store != nil && c.Store.Bolt != nil {
		resolve(&c.Store.Bolt.Path)
	}
	if c.Rights != nil && c.Rights.File != nil {
		resolve(&c.Rights.File.Path)
	}
	resolve(&c.Assertion.KeysFile)
	resolve(&c.WriteSafety.SealingKeysFile)
	resolve(&c.Catalog.Manifest)
}

func (c *Config) validateStore(p *problems) {
	s := c.Store
	if s == nil {
		return
	}
	switch {
	case s.Bolt == nil && s.Redis == nil:
		p.add("store", "needs a backend: bolt (a file, one instance) or redis (shared by several instances)")
	case s.Bolt != nil && s.Redis != nil:
		p.add("store", "has both bolt and redis; choose one")
	}
	if b := s.Bolt; b != nil {
		checkBoltPath(p, "store.bolt.path", b.Path)
	}
	if r := s.Redis; r != nil {
		checkRedisURL(p, "store.redis.url", r.URL)
	}
}

// checkBoltPath checks the bbolt file: its directory must exist (mcpgate
// creates the file, not directories), and it must not be a directory.
func checkBoltPath(p *problems, path, file string) {
	if file == "" {
		p.add(path, "required (the database file, e.g. \"/var/lib/mcpgate/state.db\")")
		return
	}
	if fi, err := os.Stat(file); err == nil && fi.IsDir() {
		p.add(path, "%q is a directory; name the database file in it (e.g. %q)", file, filepath.Join(file, "state.db"))
		return
	}
	dir := filepath.Dir(file)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.addErr(path, err, "directory %q does not exist; create it (mcpgate creates only the file)", dir)
	case err != nil:
		p.addErr(path, err, "directory %q: %v", dir, err)
	case !fi.IsDir():
		p.add(path, "%q is not a directory", dir)
	}
}

// checkRedisURL checks a Redis URL as redisstore.Open will read it. The
// URL may hold a password: messages show it redacted.
func checkRedisURL(p *problems, path, raw string) {
	const form = `e.g. "redis://redis.internal:6379/0", "rediss://…" for TLS, or "unix:///run/redis.sock"`
	u, shown, ok := parseURLAt(p, path, raw, form)
	if !ok {
		return
	}
	switch {
	case u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
		p.add(path, "%q: scheme must be redis, rediss or unix (%s)", shown, form)
		return
	case u.Opaque != "":
		p.add(path, "%q is not a URL with a host; write %s://host:port", shown, u.Scheme)
		return
	}
	if _, err := redis.ParseURL(raw); err != nil {
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
		p.add(path, "%q: %s", shown, msg)
	}
}

// urlErr strips the URL from a url.Parse error: it may hold a password.
func urlErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func (c *Config) validateAudit(p *problems) {
	checkDurationIn(p, "audit.retention", c.Audit.Retention, durationRange{positive: true, min: MinAuditRetention})
	if !slices.Contains(auditLogs, c.Audit.Log) {
		p.add("audit.log", "%q must be one of %s", c.Audit.Log, strings.Join(auditLogs, ", "))
	}
}

func (c *Config) validateRights(p *problems) {
	r := c.Rights
	if r == nil {
		return
	}
	switch {
	case r.HTTP == nil && r.File == nil:
		p.add("rights", "needs a source: http (the product's rights endpoint) or file")
	case r.HTTP != nil && r.File != nil:
		p.add("rights", "has both http and file; choose one")
	}
	checkDurationIn(p, "rights.max_staleness", r.MaxStaleness, durationRange{max: MaxRightsMaxStaleness})
	if h := r.HTTP; h != nil {
		checkServiceURL(p, "rights.http.url", h.URL, "the product's rights endpoint, e.g. \"https://app.internal.example/mcpgate/rights\"")
		checkDurationIn(p, "rights.http.timeout", h.Timeout, durationRange{positive: true, max: MaxRightsTimeout})
		seen := map[string]string{}
		for _, name := range slices.Sorted(keys(h.Headers)) {
			at := keyPath("rights.http.headers", name)
			lower := strings.ToLower(name)
			switch {
			case !httpTokenPattern.MatchString(name):
				p.add(at, "%q is not an HTTP header name", name)
				continue
			case seen[lower] != "":
				p.add(at, "%q is also rights.http.headers.%s (header names ignore case)", name, seen[lower])
				continue
			}
			seen[lower] = name
			// The value is a credential: never shown.
			v := h.Headers[name]
			switch {
			case v == "":
				p.add(at, "empty value")
			case strings.ContainsFunc(v, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }):
				p.add(at, "the value contains a line break or control character")
			}
		}
	}
	if f := r.File; f != nil {
		checkFile(p, "rights.file.path", f.Path, "the rights file")
	}
}

// parseURLAt parses the required URL at path; a problem (naming form, the
// expected shape) is added when it is empty or does not parse. shown is the
// URL with any password redacted, for messages.
func parseURLAt(p *problems, path, raw, form string) (u *url.URL, shown string, ok bool) {
	if raw == "" {
		p.add(path, "required (%s)", form)
		return nil, "", false
	}
	u, err := url.Parse(raw)
	if err != nil {
		p.add(path, "not a URL: %v (%s)", urlErr(err), form)
		return nil, "", false
	}
	return u, u.Redacted(), true
}

// checkServiceURL checks the URL of a service mcpgate calls with
// credentials: http(s) with a host, https except on loopback hosts, no
// fragment. Messages show it with any password redacted.
func checkServiceURL(p *problems, path, raw, form string) {
	u, shown, ok := parseURLAt(p, path, raw, form)
	if !ok {
		return
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		p.add(path, "%q: scheme must be https (%s)", shown, form)
	case u.Host == "":
		p.add(path, "%q has no host (%s)", shown, form)
	case u.Scheme == "http" && !isLoopbackHost(u.Hostname()):
		p.add(path, "%q: https is required except on loopback hosts", shown)
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		p.add(path, "%q must not have a #fragment", shown)
	}
}

// checkFile checks that a file exists and is not a directory.
func checkFile(p *problems, path, file, what string) {
	if file == "" {
		p.add(path, "required (%s)", what)
		return
	}
	fi, err := os.Stat(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		p.addErr(path, err, "%q does not exist", file)
	case err != nil:
		p.addErr(path, err, "%q: %v", file, err)
	case fi.IsDir():
		p.add(path, "%q is a directory, not %s", file, what)
	}
}

// hasSpaceOrControl reports whether s contains white space or a control
// character.
func hasSpaceOrControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// checkAudience checks the assertion audience of upstream u. An empty one
// is only reported when there was a url or name to default it to (when
// both are missing, that is the problem reported).
func checkAudience(p *problems, path string, u Upstream) {
	aud := u.Audience
	switch {
	case aud == "":
		if u.URL != "" || u.Name != "" {
			p.add(path, "required (the aud of the upstream's identity assertions; default its url)")
		}
	case hasSpaceOrControl(aud):
		p.add(path, "%q must not contain spaces or control characters", aud)
	}
}

func (c *Config) validateAssertion(p *problems) {
	a := c.Assertion
	if a.KeysFile != "" {
		checkFile(p, "assertion.keys_file", a.KeysFile, "the private key set (mcpgate keys generate)")
	}
	switch {
	case a.Issuer == "":
		p.add("assertion.issuer", "required (the iss of identity assertions; default auth.resource_base_url, else %q)", DefaultAssertionIssuer)
	case hasSpaceOrControl(a.Issuer):
		p.add("assertion.issuer", "%q must not contain spaces or control characters", a.Issuer)
	}
	checkDurationIn(p, "assertion.ttl", a.TTL, durationRange{min: MinAssertionTTL, max: MaxAssertionTTL})
}

// staticTokenNamePattern is what a static admin token's name may look like.
var staticTokenNamePattern = regexp.MustCompile(`^[a-z0-9_-]{1,63}$`)

// emptySHA256 is the SHA-256 of the empty string: no token has it.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

func (c *Config) validateAdminAPI(p *problems) {
	a := c.AdminAPI
	if a == nil {
		return
	}
	if c.Auth == nil {
		p.add("admin_api", "requires an auth section (auth.resource_base_url, and auth.issuers for OIDC admin tokens)")
	}
	if c.Store == nil {
		p.add("admin_api", "requires a store section: the admin API manages the tokens and reads the audit records kept there")
	}
	if c.Listeners.Admin.Disabled {
		p.add("admin_api", "is served on the admin listener, which is disabled (listeners.admin.disabled)")
	}
	issuers := c.Auth != nil && len(c.Auth.Issuers) > 0
	switch {
	case issuers && a.Audience == "":
		p.add("admin_api.audience", "required with auth.issuers: the aud admin OIDC tokens must carry (e.g. \"https://mcp.example.com/admin\"), distinct from every route's resource URI")
	case !issuers && a.Audience != "":
		p.add("admin_api.audience", "has no effect without auth.issuers, which verify admin OIDC tokens")
	case a.Audience != "":
		c.checkAdminAudience(p, a.Audience)
	}
	if !issuers && len(a.StaticTokens) == 0 {
		p.add("admin_api", "no way to authenticate an admin: add static_tokens, or auth.issuers and admin_api.audience")
	}
	if a.PlatformAdminRole == "" {
		p.add("admin_api.platform_admin_role", "required (default %q)", DefaultPlatformAdminRole)
	}
	if a.TenantAdminRole == "" {
		p.add("admin_api.tenant_admin_role", "required (default %q)", DefaultTenantAdminRole)
	} else if a.TenantAdminRole == a.PlatformAdminRole {
		p.add("admin_api.tenant_admin_role", "%q is also platform_admin_role; the two roles must differ", a.TenantAdminRole)
	}
	names := map[string]int{}
	hashes := map[string]int{}
	for i, t := range a.StaticTokens {
		at := indexPath("admin_api.static_tokens", i)
		checkUniqueName(p, at+".name", "admin_api.static_tokens", t.Name, i, staticTokenNamePattern, "1 to 63 characters of a-z, 0-9, _ and -", names)
		// The value might be a secret pasted by mistake: never shown.
		const how = "the SHA-256 of the token's secret as 64 hex digits, never the secret itself; e.g. printf %s \"$SECRET\" | sha256sum"
		h := strings.ToLower(t.SHA256)
		switch _, err := hex.DecodeString(h); {
		case t.SHA256 == "":
			p.add(at+".sha256", "required: %s", how)
		case len(h) != 64 || err != nil:
			p.add(at+".sha256", "is not %s", how)
		case h == emptySHA256:
			p.add(at+".sha256", "is the SHA-256 of the empty string; hash the token's secret")
		default:
			if j, dup := hashes[h]; dup {
				p.add(at+".sha256", "is also the sha256 of admin_api.static_tokens[%d]; each token needs its own secret", j)
			} else {
				hashes[h] = i
			}
		}
		switch t.Role {
		case RolePlatformAdmin:
			if t.Tenant != "" {
				p.add(at+".tenant", "not allowed with role %s (a platform admin is not bound to a tenant)", RolePlatformAdmin)
			}
		case RoleTenantAdmin:
			if t.Tenant == "" {
				p.add(at+".tenant", "required with role %s (the tenant it administers)", RoleTenantAdmin)
			}
		case "":
			p.add(at+".role", "required (%s or %s)", RolePlatformAdmin, RoleTenantAdmin)
		default:
			p.add(at+".role", "%q must be %s or %s", t.Role, RolePlatformAdmin, RoleTenantAdmin)
		}
		if t.Tenant != "" && (strings.TrimSpace(t.Tenant) != t.Tenant || strings.ContainsFunc(t.Tenant, unicode.IsControl)) {
			p.add(at+".tenant", "%q must not start or end with spaces or contain control characters", t.Tenant)
		}
	}
}

// checkAdminAudience checks that admin_api.audience is not an audience MCP
// access tokens carry: an MCP token must never pass as an admin token.
func (c *Config) checkAdminAudience(p *problems, aud string) {
	if hasSpaceOrControl(aud) {
		p.add("admin_api.audience", "%q must not contain spaces or control characters", aud)
		return
	}
	canon, err := auth.CanonicalResourceURI(aud)
	if err != nil {
		canon = aud
	}
	for _, u := range c.Upstreams {
		if uri, err := c.Auth.ResourceURI(u.Route); err == nil && (uri == aud || uri == canon) {
			p.add("admin_api.audience", "%q is the resource URI of route %s; admin tokens need an audience of their own, or MCP access tokens would pass as admin tokens", aud, u.Route)
			return
		}
		if tenant, ok := c.Auth.TenantResource(u.Route, canon); ok {
			p.add("admin_api.audience", "%q is the resource URI of route %s for tenant %q; admin tokens need an audience of their own, or MCP access tokens would pass as admin tokens", aud, u.Route, tenant)
			return
		}
	}
}
