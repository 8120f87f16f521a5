package config

import (
	"github.com/mcpgate/mcpgate/policy"
	"net"
	"time"
)

// Defaults. Durations are Go duration strings in the YAML ("5s").
const (
	DefaultProxyAddress      = "127.0.0.1:8080"
	DefaultAdminAddress      = "127.0.0.1:9090"
	DefaultRoutePath         = "/mcp"
	DefaultMaxBodyBytes      = 4 << 20  // 4 MiB request body limit
	DefaultMaxJSONDepth      = 64       // nesting depth of a JSON body
	DefaultMaxSSEEventBytes  = 16 << 20 // 16 MiB single SSE event
	DefaultReadHeaderTimeout = "5s"
	DefaultReadTimeout       = "30s"
	DefaultUpstreamTimeout   = "0s" // no overall upstream timeout (streams are long-lived)
	DefaultLogFormat         = "text"
	DefaultLogLevel          = "info"
	DefaultMessageBudget     = "150ms"              // ext_proc per-message budget
	DefaultMaxMessageBudget  = "5s"                 // ext_proc per-message budget when extended
	DefaultUpstreamHeader    = "x-mcpgate-upstream" // ext_proc upstream header
	// MaxMaxMessageBudget caps listeners.extproc.max_message_budget.
	MaxMaxMessageBudget = 30 * time.Second
)

// Config is the whole mcpgate configuration file.
type Config struct {
	Listeners Listeners  `yaml:"listeners"`
	Upstreams []Upstream `yaml:"upstreams"`
	Policy    Policy     `yaml:"policy"`
	Limits    Limits     `yaml:"limits"`
	Transport Transport  `yaml:"transport"`
	Log       Log        `yaml:"log"`
	// Auth turns on authentication (OAuth 2.1 resource server); nil (no
	// auth section) runs without it: every caller is anonymous.
	Auth *Auth `yaml:"auth" json:",omitempty"`
	// Store is the state store; nil (no section): no store — gateway
	// tokens, session binding and stored audit are off (audit goes to the
	// log only).
	Store *Store `yaml:"store" json:",omitempty"`
	// Audit configures the audit trail.
	Audit Audit `yaml:"audit"`
	// Rights is the live rights source; nil: effective rights = the
	// credential's rights.
	Rights *Rights `yaml:"rights" json:",omitempty"`
	// Assertion configures the identity assertions mcpgate signs for
	// upstreams.
	Assertion Assertion `yaml:"assertion"`
	// AdminAPI turns on the admin API (/v1/ on the admin listener); nil: off.
	AdminAPI *AdminAPI `yaml:"admin_api" json:",omitempty"`
	// Catalog is mcpgate's own listing of the upstreams' tools, with
	// pinning (on unless disabled).
	Catalog Catalog `yaml:"catalog"`
	// Toolsets are named toolsets a connection can be bound to (see
	// toolsets.go); the built-in "full" (every tool) is the default.
	Toolsets map[string]Toolset `yaml:"toolsets"`
	// WriteSafety configures replay protection and two-step
	// confirmation (writes.go).
	WriteSafety WriteSafety `yaml:"write_safety"`
	// RateLimits configures the limits per effect class (writes.go).
	RateLimits RateLimits `yaml:"rate_limits"`
	// Tasks turns MCP tasks (revision 2025-11-25) on; off by default.
	Tasks Tasks `yaml:"tasks"`
	// Extensions lists the capability extensions that pass between
	// clients and upstreams; every other one is stripped.
	Extensions Extensions `yaml:"extensions"`
	// Tracing turns OpenTelemetry tracing on (tracing.go); off by default.
	Tracing Tracing `yaml:"tracing"`
	// Approvals turns the approval page on (approval.go); nil: off.
	Approvals *Approvals `yaml:"approvals" json:",omitempty"`
}

// Listeners are the addresses mcpgate listens on.
type Listeners struct {
	// Proxy is the standalone MCP proxy listener (HTTP). Default
	// DefaultProxyAddress. "" after defaults never happens; set
	// Disabled to turn it off.
	Proxy Listener `yaml:"proxy"`
	// Admin serves /metrics, /healthz and /readyz. Default DefaultAdminAddress.
	Admin Listener `yaml:"admin"`
	// ExtProc is the Envoy ext_proc gRPC listener; off unless an address
	// is set.
	ExtProc ExtProcListener `yaml:"extproc"`
}

// ExtProcListener is the envoy.service.ext_proc.v3.ExternalProcessor gRPC
// listener, with the gRPC health service beside it.
type ExtProcListener struct {
	// Address is host:port, or "unix:/path/to.sock" for a Unix domain
	// socket (sidecars). Empty: the listener is off.
	Address string `yaml:"address"`
	// MessageBudget bounds mcpgate's work on one ext_proc message; keep
	// it below Envoy's message_timeout. Default DefaultMessageBudget.
	MessageBudget string `yaml:"message_budget"`
	// MaxMessageBudget bounds the work on one request message that
	// outlasts half of MessageBudget: mcpgate then sends Envoy
	// override_message_timeout with this value and goes on until it has
	// passed since the message arrived. Envoy's max_message_timeout must
	// be at least this (Envoy ignores a larger override). "0s" never
	// extends; otherwise at least MessageBudget. Default
	// DefaultMaxMessageBudget.
	MaxMessageBudget string `yaml:"max_message_budget"`
	// UpstreamHeader names the request header Envoy sets (overwriting) to
	// tell mcpgate the upstream when the route metadata does not. Default
	// DefaultUpstreamHeader.
	UpstreamHeader string `yaml:"upstream_header"`
	// TLS serves the listener over TLS (mTLS with ClientCAFile).
	TLS TLS `yaml:"tls"`
}

// TLS holds PEM file paths. CertFile and KeyFile go together; ClientCAFile
// requires client certificates signed by that CA (mTLS).
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// ProxyAllowedHosts returns the Host allowlist of the proxy listener:
// AllowedHosts, or the loopback names when the listener is on a loopback
// address and none are configured.
func (c *Config) ProxyAllowedHosts() []string {
	if len(c.Transport.AllowedHosts) > 0 {
		return c.Transport.AllowedHosts
	}
	host, _, err := net.SplitHostPort(c.Listeners.Proxy.Address)
	if err != nil {
		return nil
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return []string{"localhost", "127.0.0.1", "::1"}
	}
	return nil
}

// Enabled reports whether the ext_proc listener is on.
func (e ExtProcListener) Enabled() bool { return e.Address != "" }

// Listener is one listening socket.
type Listener struct {
	Address  string `yaml:"address"`  // host:port
	Disabled bool   `yaml:"disabled"` // default false
}

// Upstream is one MCP server behind mcpgate.
type Upstream struct {
	// Name identifies the upstream in policy, metrics and logs
	// ([a-z0-9_-], 1–63 characters). Required, unique.
	Name string `yaml:"name"`
	// URL is the upstream MCP endpoint, http or https. Required.
	URL string `yaml:"url"`
	// Route is the path on mcpgate's proxy listener that maps to this
	// upstream (exact match). Default DefaultRoutePath; unique.
	Route string `yaml:"route"`
	// Timeout bounds the wait for the upstream's response headers on the
	// standalone proxy (502 when it runs out); "0s" means none. Streams
	// that have started are not cut. Default DefaultUpstreamTimeout.
	Timeout string `yaml:"timeout"`
	// Tools are the per-tool declarations, keyed by upstream tool name.
	Tools map[string]policy.ToolDeclaration `yaml:"tools"`
	// Audience is the aud of the identity assertions this upstream
	// receives. Default: its URL (without user information), else its
	// name.
	Audience string `yaml:"audience"`
	// ResourceTenant are patterns saying where the tenant sits in this
	// upstream's resource URIs, e.g. "crm://{tenant}/**" ({tenant} once;
	// "*" one path segment, "**" any run; routes.CompileResourcePattern).
	// A resource URI naming another tenant than the caller's is refused,
	// list entries naming one are hidden, and resource links in results
	// naming one are removed. Default none (tenant-like query parameters
	// are checked in every URI all the same).
	ResourceTenant []string `yaml:"resource_tenant"`
}

// Policy selects the Rego policies.
type Policy struct {
	// Dirs are directories of .rego (and data .json/.yaml) files loaded in
	// addition to nothing else; empty means the embedded default policy.
	Dirs []string `yaml:"dirs"`
	// Watch reloads the policy when a file in Dirs changes (SIGHUP always
	// reloads). Default true.
	Watch *bool `yaml:"watch"`
	// TenantArguments are argument names, besides tenant, tenant_id,
	// workspace_id and org_id, that would let a model choose a tenant;
	// a tools/call carrying one is refused (compared case-insensitively).
	TenantArguments []string `yaml:"tenant_arguments"`
	// SecretNames are member names dropped from every tool result at any
	// depth (case, "_", "-", "." and spaces ignored; "*" a wildcard),
	// whatever the declarations' result_fields allow.
	SecretNames []string `yaml:"secret_names"`
	// Bundle, DecisionLogs and Shadow: policy operations (policyops.go).
	Bundle       *PolicyBundle `yaml:"bundle" json:",omitempty"`
	DecisionLogs *DecisionLogs `yaml:"decision_logs" json:",omitempty"`
	Shadow       *ShadowPolicy `yaml:"shadow" json:",omitempty"`
}

// Limits bound what a client can send.
type Limits struct {
	// MaxBodyBytes is the request body limit in bytes (413 above it).
	// Default DefaultMaxBodyBytes.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// MaxJSONDepth bounds nesting of objects and arrays. Default DefaultMaxJSONDepth.
	MaxJSONDepth int `yaml:"max_json_depth"`
	// MaxSSEEventBytes bounds one server-sent event. Default DefaultMaxSSEEventBytes.
	MaxSSEEventBytes int `yaml:"max_sse_event_bytes"`
	// ReadHeaderTimeout and ReadTimeout bound reading a client request.
	// Defaults DefaultReadHeaderTimeout, DefaultReadTimeout.
	ReadHeaderTimeout string `yaml:"read_header_timeout"`
	ReadTimeout       string `yaml:"read_timeout"`
}

// Transport holds HTTP-level rules.
type Transport struct {
	// AllowedOrigins are the Origin values accepted (scheme://host[:port],
	// e.g. "https://app.example.com"; compared exactly but for case and a
	// trailing "/"); a request with another Origin gets 403. Requests
	// without Origin are accepted. Default (empty): only loopback origins
	// (http or https on localhost, 127.0.0.1, [::1], any port); a
	// non-empty list replaces that default.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AllowedHosts are the Host names (without port) the standalone proxy
	// answers; another Host gets 403 (DNS rebinding protection). Default:
	// when the proxy listens on a loopback address, only localhost,
	// 127.0.0.1 and ::1; otherwise any host.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Log configures log/slog output.
type Log struct {
	Format string `yaml:"format"` // "text" or "json"; default DefaultLogFormat
	Level  string `yaml:"level"`  // debug, info, warn, error; default DefaultLogLevel
}
