package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
)

// TestTokensExample checks that examples/tokens.yaml decodes to what its
// comments say: gateway tokens over a bolt store and a rights file, both
// next to the example.
func TestTokensExample(t *testing.T) {
	cfg, err := Load("examples/tokens.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Auth
	if a == nil || a.GatewayTokens == nil || len(a.Issuers) != 0 || a.TenantHeader != "X-Tenant" {
		t.Fatalf("auth = %+v", a)
	}
	if a.GatewayTokens.DefaultTTL.D() != 720*time.Hour || a.GatewayTokens.MaxTTL.D() != 2160*time.Hour || a.SessionTTL.D() != 24*time.Hour {
		t.Errorf("gateway tokens = %+v, session_ttl %s", *a.GatewayTokens, a.SessionTTL)
	}
	if cfg.Store == nil || cfg.Store.Bolt == nil || cfg.Store.Redis != nil || cfg.Store.Bolt.Path != filepath.Join("examples", "mcpgate-state.db") {
		t.Errorf("store = %+v", cfg.Store)
	}
	if cfg.Rights == nil || cfg.Rights.File == nil || cfg.Rights.HTTP != nil || cfg.Rights.File.Path != filepath.Join("examples", "rights.yaml") || cfg.Rights.MaxStaleness.D() != 0 {
		t.Errorf("rights = %+v", cfg.Rights)
	}
	if cfg.Audit.Retention.D() != 720*time.Hour || cfg.Audit.Log != AuditLogStderr {
		t.Errorf("audit = %+v", cfg.Audit)
	}
	if cfg.Assertion.KeysFile != "" || cfg.Assertion.Issuer != "http://localhost:8080" || cfg.Assertion.TTL.D() != time.Minute {
		t.Errorf("assertion = %+v", cfg.Assertion)
	}
	if cfg.Upstreams[0].Audience != "http://127.0.0.1:8081/mcp" {
		t.Errorf("audience = %q", cfg.Upstreams[0].Audience)
	}
	api := cfg.AdminAPI
	if api == nil || len(api.StaticTokens) != 2 || api.PlatformAdminRole != DefaultPlatformAdminRole || api.TenantAdminRole != DefaultTenantAdminRole {
		t.Fatalf("admin_api = %+v", api)
	}
	if st := api.StaticTokens[1]; st.Role != RoleTenantAdmin || st.Tenant != "acme" || st.Hash() == ([32]byte{}) {
		t.Errorf("static token = %+v", st)
	}
	// The rights the example's tools need are all granted to someone in
	// rights.yaml (a light check; package rights parses the file).
	data, err := os.ReadFile("examples/rights.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, d := range cfg.Upstreams[0].Tools {
		for _, r := range d.Rights {
			if !bytes.Contains(data, []byte(`"`+r+`"`)) {
				t.Errorf("tool %s: right %q is granted to nobody in examples/rights.yaml", name, r)
			}
		}
	}
}

func TestIdentityDefaults(t *testing.T) {
	c := Config{
		Upstreams: []Upstream{
			{Name: "a", URL: "https://user:pw@a.example/mcp"},
			{Name: "b"},
			{Name: "c", URL: "http://c", Audience: "urn:c"},
		},
		Auth:     &Auth{ResourceBaseURL: "https://gw.example", GatewayTokens: &GatewayTokens{}},
		Store:    &Store{Bolt: &BoltStore{Path: "x.db"}},
		Rights:   &Rights{HTTP: &RightsHTTP{URL: "https://r.example"}},
		AdminAPI: &AdminAPI{},
	}
	c.ApplyDefaults()
	for i, want := range []string{"https://a.example/mcp", "b", "urn:c"} {
		if got := c.Upstreams[i].Audience; got != want {
			t.Errorf("upstreams[%d].audience = %q, want %q", i, got, want)
		}
	}
	if got := *c.Auth.GatewayTokens; got != (GatewayTokens{DefaultTTL: DurationOf(DefaultGatewayTokenTTL), MaxTTL: DurationOf(DefaultGatewayTokenMaxTTL)}) {
		t.Errorf("gateway_tokens = %+v", got)
	}
	if c.Auth.SessionTTL != DurationOf(DefaultSessionTTL) || c.Auth.TenantHeader != "" {
		t.Errorf("auth = %+v", c.Auth)
	}
	if c.Audit != (Audit{Retention: DurationOf(DefaultAuditRetention), Log: DefaultAuditLog}) {
		t.Errorf("audit = %+v", c.Audit)
	}
	if c.Rights.MaxStaleness != DurationOf(DefaultRightsMaxStaleness) || c.Rights.HTTP.Timeout != DurationOf(DefaultRightsTimeout) {
		t.Errorf("rights = %+v %+v", c.Rights, c.Rights.HTTP)
	}
	if c.Assertion != (Assertion{Issuer: "https://gw.example", TTL: DurationOf(DefaultAssertionTTL)}) {
		t.Errorf("assertion = %+v", c.Assertion)
	}
	if c.AdminAPI.PlatformAdminRole != DefaultPlatformAdminRole || c.AdminAPI.TenantAdminRole != DefaultTenantAdminRole {
		t.Errorf("admin_api = %+v", c.AdminAPI)
	}
	if c.Store.Bolt.Path != "x.db" {
		t.Errorf("store = %+v", c.Store.Bolt)
	}

	// Without auth the assertion issuer is "mcpgate"; sections that are
	// absent stay absent; set values are kept.
	d := Config{
		Audit:     Audit{Retention: dur("1h"), Log: AuditLogOff},
		Assertion: Assertion{TTL: dur("10s")},
	}
	d.ApplyDefaults()
	if d.Assertion.Issuer != DefaultAssertionIssuer || d.Assertion.TTL != dur("10s") || d.Audit != (Audit{Retention: dur("1h"), Log: AuditLogOff}) {
		t.Errorf("set values not kept: %+v %+v", d.Assertion, d.Audit)
	}
	if d.Store != nil || d.Rights != nil || d.AdminAPI != nil {
		t.Errorf("absent sections were filled in: %+v %+v %+v", d.Store, d.Rights, d.AdminAPI)
	}
}

func TestStaticTokenHash(t *testing.T) {
	sum := sha256.Sum256([]byte("s3cret"))
	for _, s := range []string{hex.EncodeToString(sum[:]), strings.ToUpper(hex.EncodeToString(sum[:]))} {
		if got := (StaticToken{SHA256: s}).Hash(); got != sum {
			t.Errorf("Hash(%s) = %x, want %x", s, got, sum)
		}
	}
	for _, s := range []string{"", "s3cret", hex.EncodeToString(sum[:31]), hex.EncodeToString(sum[:]) + "00", strings.Repeat("zz", 32)} {
		if got := (StaticToken{SHA256: s}).Hash(); got != ([32]byte{}) {
			t.Errorf("Hash(%q) = %x, want zero", s, got)
		}
	}
}

// validIdentity returns a valid configuration with every identity section.
func validIdentity(t *testing.T) *Config {
	t.Helper()
	dir := t.TempDir()
	rightsFile := filepath.Join(dir, "rights.yaml")
	keysFile := filepath.Join(dir, "keys.json")
	for _, f := range []string{rightsFile, keysFile} {
		if err := os.WriteFile(f, []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256([]byte("admin"))
	c := &Config{
		Upstreams: []Upstream{{Name: "a", URL: "http://127.0.0.1:3000/mcp"}},
		Auth: &Auth{
			ResourceBaseURL: "https://gw.example",
			Issuers:         []Issuer{{Issuer: "https://login.example"}},
			GatewayTokens:   &GatewayTokens{},
			TenantHeader:    "X-Tenant",
		},
		Store:     &Store{Bolt: &BoltStore{Path: filepath.Join(dir, "state.db")}},
		Rights:    &Rights{File: &RightsFile{Path: rightsFile}},
		Assertion: Assertion{KeysFile: keysFile},
		AdminAPI: &AdminAPI{
			Audience:     "https://gw.example/admin",
			StaticTokens: []StaticToken{{Name: "ops", SHA256: hex.EncodeToString(sum[:]), Role: RolePlatformAdmin}},
		},
	}
	c.ApplyDefaults()
	return c
}

// TestValidateIdentity checks each rule of the identity sections on
// configurations built in Go.
func TestValidateIdentity(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string // substrings, one per expected problem; nil: valid
	}{
		{"valid", func(c *Config) {}, nil},
		{"no identity sections", func(c *Config) { c.Store, c.Rights, c.AdminAPI, c.Auth.GatewayTokens = nil, nil, nil, nil }, nil},
		{"gateway tokens without issuers", func(c *Config) { c.Auth.Issuers = nil; c.AdminAPI.Audience = "" }, nil},
		{"no issuers, no gateway tokens", func(c *Config) { c.Auth.Issuers, c.Auth.GatewayTokens = nil, nil; c.AdminAPI.Audience = "" }, []string{
			"auth.issuers: at least one issuer is required unless auth.gateway_tokens is set",
		}},
		{"gateway tokens need store and rights", func(c *Config) { c.Store, c.Rights, c.AdminAPI = nil, nil, nil }, []string{
			"auth.gateway_tokens: requires a store section: gateway tokens are kept (hashed) in the store",
			"auth.gateway_tokens: requires a rights section: the rights a token is created with are capped by its creator's live rights",
		}},
		{"gateway token ttls", func(c *Config) {
			c.Auth.GatewayTokens = &GatewayTokens{DefaultTTL: DurationOf(-time.Hour), MaxTTL: Duration{}}
		}, []string{
			`auth.gateway_tokens.default_ttl: "-1h" must not be negative`,
			`auth.gateway_tokens.max_ttl: required`,
		}},
		{"gateway token ttl order", func(c *Config) { c.Auth.GatewayTokens = &GatewayTokens{DefaultTTL: dur("3h"), MaxTTL: dur("2h")} }, []string{
			`auth.gateway_tokens.default_ttl: "3h" is longer than max_ttl ("2h")`,
		}},
		{"gateway token ttls equal", func(c *Config) { c.Auth.GatewayTokens = &GatewayTokens{DefaultTTL: dur("2h"), MaxTTL: dur("2h")} }, nil},
		{"session ttl", func(c *Config) { c.Auth.SessionTTL = dur("0s") }, []string{`auth.session_ttl: "0s" must be greater than 0`}},
		{"tenant header not a token", func(c *Config) { c.Auth.TenantHeader = "X Tenant" }, []string{`auth.tenant_header: "X Tenant" is not an HTTP header name`}},
		{"tenant header cookie", func(c *Config) { c.Auth.TenantHeader = "Cookie" }, []string{`auth.tenant_header: "Cookie" cannot name the tenant: it is reserved`}},
		{"tenant header host", func(c *Config) { c.Auth.TenantHeader = "HOST" }, []string{"auth.tenant_header:", "reserved"}},
		{"tenant header content-type", func(c *Config) { c.Auth.TenantHeader = "content-type" }, []string{"auth.tenant_header:", "reserved"}},
		{"tenant header assertion", func(c *Config) { c.Auth.TenantHeader = "Mcpgate-Assertion" }, []string{"auth.tenant_header:", "reserved"}},
		{"tenant header mcp", func(c *Config) { c.Auth.TenantHeader = "MCP-Session-Id" }, []string{"auth.tenant_header:", "mcp-* headers belong to the MCP protocol"}},
		{"tenant header upstream header", func(c *Config) { c.Auth.TenantHeader = DefaultUpstreamHeader }, []string{"auth.tenant_header:", "also listeners.extproc.upstream_header"}},
		{"tenant header mcpgate other", func(c *Config) { c.Auth.TenantHeader = "Mcpgate-Tenant" }, nil},
		{"store without backend", func(c *Config) { c.Store = &Store{} }, []string{"store: needs a backend"}},
		{"store with both", func(c *Config) { c.Store.Redis = &RedisStore{URL: "redis://r:6379"} }, []string{"store: has both bolt and redis"}},
		{"bolt path", func(c *Config) { c.Store.Bolt.Path = "" }, []string{"store.bolt.path: required"}},
		{"bolt path is a directory", func(c *Config) { c.Store.Bolt.Path = t.TempDir() }, []string{"store.bolt.path:", "is a directory; name the database file in it"}},
		{"bolt directory missing", func(c *Config) { c.Store.Bolt.Path = filepath.Join(t.TempDir(), "no", "state.db") }, []string{"store.bolt.path: directory", "does not exist"}},
		{"bolt directory is a file", func(c *Config) { c.Store.Bolt.Path = filepath.Join(file, "state.db") }, []string{"store.bolt.path:", "is not a directory"}},
		{"bolt relative in working directory", func(c *Config) { c.Store.Bolt.Path = "state.db" }, nil},
		{"redis urls", func(c *Config) {
			c.Store = &Store{Redis: &RedisStore{URL: "rediss://u:p@r.example:6380/3?dial_timeout=3s"}}
		}, nil},
		{"redis unix", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "unix:///run/redis.sock?db=2"}} }, nil},
		{"redis required", func(c *Config) { c.Store = &Store{Redis: &RedisStore{}} }, []string{"store.redis.url: required"}},
		{"redis scheme", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "http://:pw@r:6379"}} }, []string{`store.redis.url: "http://:xxxxx@r:6379": scheme must be redis, rediss or unix`}},
		{"redis opaque", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "redis:r.example:6379"}} }, []string{"store.redis.url:", "write redis://host:port"}},
		{"redis unparsable", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "redis://:pw@r example/"}} }, []string{"store.redis.url: not a URL"}},
		{"redis option", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "redis://:pw@r/0?color=red"}} }, []string{"store.redis.url:", "unexpected option: color"}},
		{"redis unix without path", func(c *Config) { c.Store = &Store{Redis: &RedisStore{URL: "unix://"}} }, []string{"store.redis.url:", "empty unix socket path"}},
		{"audit", func(c *Config) { c.Audit = Audit{Retention: dur("59m"), Log: "file"} }, []string{
			`audit.retention: "59m" is below the minimum of 1h`, `audit.log: "file" must be one of stderr, stdout, off`,
		}},
		{"audit retention 1h", func(c *Config) { c.Audit.Retention = dur("1h") }, nil},
		{"rights without source", func(c *Config) { c.Rights = &Rights{MaxStaleness: dur("0s")} }, []string{"rights: needs a source"}},
		{"rights with both", func(c *Config) { c.Rights.HTTP = &RightsHTTP{URL: "https://r.example", Timeout: dur("2s")} }, []string{"rights: has both http and file"}},
		{"rights staleness", func(c *Config) { c.Rights.MaxStaleness = dur("5m1s") }, []string{`rights.max_staleness: "5m1s" is above the maximum of 5m`}},
		{"rights staleness 5m", func(c *Config) { c.Rights.MaxStaleness = dur("5m") }, nil},
		{"rights staleness negative", func(c *Config) { c.Rights.MaxStaleness = DurationOf(-time.Second) }, []string{`rights.max_staleness: "-1s" must not be negative`}},
		{"rights file missing", func(c *Config) { c.Rights.File.Path = filepath.Join(t.TempDir(), "none.yaml") }, []string{"rights.file.path:", "does not exist"}},
		{"rights file directory", func(c *Config) { c.Rights.File.Path = t.TempDir() }, []string{"rights.file.path:", "is a directory, not the rights file"}},
		{"rights file required", func(c *Config) { c.Rights.File.Path = "" }, []string{"rights.file.path: required"}},
		{"rights http", func(c *Config) {
			c.Rights = &Rights{MaxStaleness: dur("1s"), HTTP: &RightsHTTP{URL: "http://localhost:9000/rights", Timeout: dur("30s"), Headers: map[string]string{"Authorization": "Bearer x"}}}
		}, nil},
		{"rights http problems", func(c *Config) {
			c.Rights = &Rights{MaxStaleness: dur("1s"), HTTP: &RightsHTTP{URL: "ftp://u:pw@r.example/x", Timeout: dur("0s"), Headers: map[string]string{
				"A B": "x", "X-Key": "line\nbreak", "x-key": "again", "Empty": "",
			}}}
		}, []string{
			`rights.http.url: "ftp://u:xxxxx@r.example/x": scheme must be https`,
			`rights.http.timeout: "0s" must be greater than 0`,
			`rights.http.headers["A B"]: "A B" is not an HTTP header name`,
			"rights.http.headers.Empty: empty value",
			"rights.http.headers.X-Key: the value contains a line break or control character",
			`rights.http.headers.x-key: "x-key" is also rights.http.headers.X-Key`,
		}},
		{"rights http url", func(c *Config) { c.Rights = &Rights{MaxStaleness: dur("0s"), HTTP: &RightsHTTP{Timeout: dur("1s")}} }, []string{"rights.http.url: required"}},
		{"rights http no host", func(c *Config) {
			c.Rights = &Rights{MaxStaleness: dur("0s"), HTTP: &RightsHTTP{URL: "https:///x", Timeout: dur("1s")}}
		}, []string{"rights.http.url:", "has no host"}},
		{"rights http plain", func(c *Config) {
			c.Rights = &Rights{MaxStaleness: dur("0s"), HTTP: &RightsHTTP{URL: "http://r.example/x", Timeout: dur("1s")}}
		}, []string{"rights.http.url:", "https is required except on loopback hosts"}},
		{"rights http timeout", func(c *Config) {
			c.Rights = &Rights{MaxStaleness: dur("0s"), HTTP: &RightsHTTP{URL: "https://r.example", Timeout: dur("31s")}}
		}, []string{`rights.http.timeout: "31s" is above the maximum of 30s`}},
		{"assertion", func(c *Config) {
			c.Assertion = Assertion{KeysFile: filepath.Join(t.TempDir(), "k.json"), Issuer: "", TTL: dur("11m")}
		}, []string{
			"assertion.keys_file:", "does not exist",
			"assertion.issuer: required",
			`assertion.ttl: "11m" is above the maximum of 10m`,
		}},
		{"assertion ttl bounds", func(c *Config) { c.Assertion.TTL = dur("10s") }, nil},
		{"assertion ttl below", func(c *Config) { c.Assertion.TTL = dur("9s") }, []string{`assertion.ttl: "9s" is below the minimum of 10s`}},
		{"assertion keys directory", func(c *Config) { c.Assertion.KeysFile = t.TempDir() }, []string{"assertion.keys_file:", "is a directory"}},
		{"assertion no keys file", func(c *Config) { c.Assertion.KeysFile = "" }, nil},
		{"audience", func(c *Config) { c.Upstreams[0].Audience = "a\tb" }, []string{`upstreams[0].audience: "a\tb" must not contain spaces`}},
		{"audience empty", func(c *Config) { c.Upstreams[0].Audience = "" }, []string{"upstreams[0].audience: required"}},
		{"admin api needs auth and store", func(c *Config) { c.Auth, c.Store = nil, nil; c.AdminAPI.Audience = "" }, []string{
			"admin_api: requires an auth section", "admin_api: requires a store section",
		}},
		{"admin api on disabled listener", func(c *Config) { c.Listeners.Admin.Disabled = true }, []string{"admin_api: is served on the admin listener, which is disabled"}},
		{"admin audience required with issuers", func(c *Config) { c.AdminAPI.Audience = "" }, []string{"admin_api.audience: required with auth.issuers"}},
		{"admin audience without issuers", func(c *Config) { c.Auth.Issuers = nil }, []string{"admin_api.audience: has no effect without auth.issuers"}},
		{"admin oidc only", func(c *Config) { c.AdminAPI.StaticTokens = nil }, nil},
		{"admin no way in", func(c *Config) { c.Auth.Issuers = nil; c.AdminAPI.Audience = ""; c.AdminAPI.StaticTokens = nil }, []string{
			"admin_api: no way to authenticate an admin",
		}},
		{"admin audience is a route", func(c *Config) { c.AdminAPI.Audience = "https://GW.example/mcp" }, []string{
			`admin_api.audience: "https://GW.example/mcp" is the resource URI of route /mcp`,
		}},
		{"admin audience spaces", func(c *Config) { c.AdminAPI.Audience = "a b" }, []string{`admin_api.audience: "a b" must not contain spaces`}},
		{"admin roles", func(c *Config) { c.AdminAPI.PlatformAdminRole, c.AdminAPI.TenantAdminRole = "", "" }, []string{
			"admin_api.platform_admin_role: required", "admin_api.tenant_admin_role: required",
		}},
		{"admin roles equal", func(c *Config) { c.AdminAPI.TenantAdminRole = c.AdminAPI.PlatformAdminRole }, []string{
			"admin_api.tenant_admin_role:", "the two roles must differ",
		}},
		{"static tokens", func(c *Config) {
			h := c.AdminAPI.StaticTokens[0].SHA256
			c.AdminAPI.StaticTokens = append(c.AdminAPI.StaticTokens,
				StaticToken{Name: "ops", SHA256: strings.ToUpper(h), Role: RoleTenantAdmin},
				StaticToken{Name: strings.Repeat("a", 64), SHA256: "hunter2", Role: "admin"},
				StaticToken{SHA256: emptySHA256, Role: RolePlatformAdmin, Tenant: "acme"},
				StaticToken{Name: "t", SHA256: h[:63] + "0", Tenant: " acme"},
			)
		}, []string{
			`admin_api.static_tokens[1].name: "ops" is also the name of admin_api.static_tokens[0]`,
			"admin_api.static_tokens[1].sha256: is also the sha256 of admin_api.static_tokens[0]",
			"admin_api.static_tokens[1].tenant: required with role tenant_admin",
			"admin_api.static_tokens[2].name:", "must be 1 to 63 characters",
			"admin_api.static_tokens[2].sha256: is not the SHA-256 of the token's secret as 64 hex digits",
			`admin_api.static_tokens[2].role: "admin" must be platform_admin or tenant_admin`,
			"admin_api.static_tokens[3].name: required",
			"admin_api.static_tokens[3].sha256: is the SHA-256 of the empty string",
			"admin_api.static_tokens[3].tenant: not allowed with role platform_admin",
			"admin_api.static_tokens[4].role: required",
			`admin_api.static_tokens[4].tenant: " acme" must not start or end with spaces`,
		}},
		{"static token secret never shown", func(c *Config) { c.AdminAPI.StaticTokens[0].SHA256 = "my-very-secret-token" }, []string{
			"admin_api.static_tokens[0].sha256: is not the SHA-256",
		}},
		{"not defaulted", func(c *Config) {
			*c = Config{Upstreams: c.Upstreams, Listeners: c.Listeners, Limits: c.Limits, Log: c.Log,
				Auth:     &Auth{ResourceBaseURL: "https://gw.example", GatewayTokens: &GatewayTokens{}},
				Store:    c.Store,
				Rights:   &Rights{HTTP: &RightsHTTP{URL: "https://r.example"}},
				AdminAPI: &AdminAPI{StaticTokens: c.AdminAPI.StaticTokens},
			}
		}, []string{
			"auth.session_ttl: required", "auth.gateway_tokens.default_ttl: required", "auth.gateway_tokens.max_ttl: required",
			"audit.retention: required", "audit.log:", "rights.max_staleness: required", "rights.http.timeout: required",
			"assertion.issuer: required", "assertion.ttl: required",
			"admin_api.platform_admin_role: required", "admin_api.tenant_admin_role: required",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validIdentity(t)
			tt.modify(c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded, want problems")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q; got:\n%v", w, err)
				}
			}
			for _, secret := range []string{"hunter2", "my-very-secret-token", ":pw@", ":p@", "line\nbreak", "Bearer x"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows the secret %q:\n%v", secret, err)
				}
			}
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) || fe.Path == "" {
					t.Errorf("problem %q has no key path", e)
				}
			}
		})
	}
}

// TestLoadResolvesIdentityPaths checks that the relative paths of the
// identity sections are relative to the configuration file in Load and to
// the working directory in Parse, as policy.dirs are.
func TestLoadResolvesIdentityPaths(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"rights.yaml", "keys.json"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	abs := filepath.Join(t.TempDir(), "abs.db")
	doc := func(bolt string) []byte {
		return []byte(fmt.Sprintf(`upstreams: [{name: a, url: 'http://a'}]
store: {bolt: {path: %q}}
rights: {file: {path: rights.yaml}}
assertion: {keys_file: keys.json}
`, bolt))
	}
	file := filepath.Join(dir, "mcpgate.yaml")
	if err := os.WriteFile(file, doc("state.db"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Store.Bolt.Path, filepath.Join(dir, "state.db"); got != want {
		t.Errorf("store.bolt.path = %q, want %q", got, want)
	}
	if got, want := cfg.Rights.File.Path, filepath.Join(dir, "rights.yaml"); got != want {
		t.Errorf("rights.file.path = %q, want %q", got, want)
	}
	if got, want := cfg.Assertion.KeysFile, filepath.Join(dir, "keys.json"); got != want {
		t.Errorf("assertion.keys_file = %q, want %q", got, want)
	}
	if err := os.WriteFile(file, doc(abs), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := Load(file); err != nil || cfg.Store.Bolt.Path != abs {
		t.Errorf("absolute store.bolt.path: %v, %+v", err, cfg)
	}
	_, err = Parse(doc("state.db"), "inline")
	if err == nil || !strings.Contains(err.Error(), `rights.file.path: "rights.yaml" does not exist`) ||
		!strings.Contains(err.Error(), `assertion.keys_file: "keys.json" does not exist`) || strings.Contains(err.Error(), "store.bolt.path") {
		t.Errorf("Parse: %v, want paths resolved against the working directory", err)
	}
}

// TestIdentitySecretsNeverPrinted checks that the rights endpoint's header
// values and the Redis password stay out of logs and formatted output.
func TestIdentitySecretsNeverPrinted(t *testing.T) {
	h := RightsHTTP{URL: "https://u:urlpw@r.example/x", Timeout: dur("2s"), Headers: map[string]string{"Authorization": "Bearer s3cret"}}
	r := RedisStore{URL: "rediss://:redispw@redis.example:6380/0"}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "http", h, "ptr", &h, "redis", r, "redisptr", &r)
	out := buf.String() + fmt.Sprintf("%v %+v %s %v %+v %s", h, h, &h, r, r, &r)
	for _, secret := range []string{"s3cret", "urlpw", "redispw"} {
		if strings.Contains(out, secret) {
			t.Errorf("%q printed:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "REDACTED") || !strings.Contains(out, "Authorization") || !strings.Contains(out, "redis.example:6380") {
		t.Errorf("redacted output lacks what is not secret:\n%s", out)
	}
	if got := (RightsHTTP{URL: "http://a b/"}).String(); !strings.Contains(got, "(invalid URL)") {
		t.Errorf("unparsable URL printed as %s", got)
	}
}

// TestIdentitySectionsAbsent checks that an empty section value (key:)
// leaves a pointer section off, as for auth.
func TestIdentitySectionsAbsent(t *testing.T) {
	cfg, err := Parse([]byte("upstreams: [{name: a, url: 'http://a'}]\nstore:\nrights:\nadmin_api:\nauth:\n"), "x.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store != nil || cfg.Rights != nil || cfg.AdminAPI != nil || cfg.Auth != nil {
		t.Errorf("sections = %+v %+v %+v %+v, want nil", cfg.Store, cfg.Rights, cfg.AdminAPI, cfg.Auth)
	}
	want := Assertion{Issuer: DefaultAssertionIssuer, TTL: DurationOf(DefaultAssertionTTL)}
	if !reflect.DeepEqual(cfg.Assertion, want) {
		t.Errorf("assertion = %+v, want %+v", cfg.Assertion, want)
	}
}

// TestIdentityRoundTrip checks that the identity sections survive a round
// trip through YAML (the redacting String and LogValue methods must not
// leak into marshalling).
func TestIdentityRoundTrip(t *testing.T) {
	for _, file := range []string{"testdata/valid/identity.yaml", "testdata/valid/identity_defaults.yaml", "examples/tokens.yaml"} {
		cfg, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(out, "roundtrip.yaml")
		if err != nil {
			t.Fatalf("%s: round trip: %v\n%s", file, err, out)
		}
		if !reflect.DeepEqual(normalize(cfg), normalize(back)) {
			t.Errorf("%s: round trip changed the config:\n%s", file, out)
		}
	}
}
