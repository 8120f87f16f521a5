package config

import (
	"github.com/mcpgate/mcpgate/policy"
	"net"
	"time"
)

// Defaults. Durations are Go duration strings in the YAML ("5s").
const (
	DefaultProxyAddress                    = "127.0.0.1:8080"
	DefaultAdminAddress                    = "127.0.0.1:9090"
	DefaultRoutePath                       = "/mcp"
	DefaultMaxBodyBytes                    = 4 << 20  // 4 MiB request body limit
	DefaultMaxJSONDepth                    = 64       // nesting depth of a JSON body
	DefaultMaxSSEEventBytes                = 16 << 20 // 16 MiB single SSE event
	DefaultReadHeaderTimeout               = 5 * time.Second
	DefaultReadTimeout                     = 30 * time.Second
	DefaultUpstreamTimeout   time.Duration = 0 // no overall upstream timeout (streams are long-lived)
	DefaultLogFormat                       = "text"
	DefaultLogLevel                        = "info"
	DefaultMessageBudget                   = 150 * time.Millisecond // ext_proc per-message budget
	DefaultMaxMessageBudget                = 5 * time.Second        // ext_proc per-message budget when extended
	DefaultUpstreamHeader                  = "x-mcpgate-upstream"   // ext_proc upstream header
	// MaxMaxMessageBudget caps listeners.extproc.max_message_budget.
	MaxMaxMessageBudget = 30 * time.Second
)

// Config is the whole mcpgate configuration file.
type Config struct {
	// The sockets mcpgate listens on; at least one of `proxy` and `admin`
	// is enabled.
	Listeners Listeners `yaml:"listeners"`
	// One element per upstream MCP server.
	//
	// Required.
	Upstreams []Upstream `yaml:"upstreams"`
	// Virtual servers: routes that front several upstreams, each member's
	// tools, prompts and resources named with its prefix (federation).
	//
	// Default: none.
	Servers []Server `yaml:"servers" json:",omitempty"`
	// Which Rego policies decide, and the policy operations (bundles,
	// decision logs, a shadow policy).
	Policy Policy `yaml:"policy"`
	// Bounds on what a client can send.
	Limits Limits `yaml:"limits"`
	// HTTP-level rules of the standalone proxy.
	Transport Transport `yaml:"transport"`
	// `log/slog` output, to standard error.
	Log Log `yaml:"log"`
	// Turns authentication on.
	//
	// Default: none: no authentication.
	Auth *Auth `yaml:"auth" json:",omitempty"`
	// The state store; exactly one of `bolt` and `redis`.
	//
	// Default: none: no store.
	Store *Store `yaml:"store" json:",omitempty"`
	// The audit trail of gateway decisions and admin actions.
	Audit Audit `yaml:"audit"`
	// The live rights source; exactly one of `http` and `file`.
	//
	// Default: none: the credential's rights.
	Rights *Rights `yaml:"rights" json:",omitempty"`
	// The identity assertions mcpgate signs for upstreams.
	Assertion Assertion `yaml:"assertion"`
	// Turns the admin API on.
	//
	// Default: none: off.
	AdminAPI *AdminAPI `yaml:"admin_api" json:",omitempty"`
	// mcpgate's own listing of the upstreams' tools, with pinning; on
	// unless disabled.
	Catalog Catalog `yaml:"catalog"`
	// Names: lower-case letters, digits, `_`, `-` (1–63 characters); not
	// `full`.
	//
	// Default: none.
	Toolsets map[string]Toolset `yaml:"toolsets"`
	// Replay protection of silent writes and two-step confirmation.
	//
	// Default: on with a store.
	WriteSafety WriteSafety `yaml:"write_safety"`
	// Limits per effect class.
	//
	// Default: on.
	RateLimits RateLimits `yaml:"rate_limits"`
	// MCP tasks (revision 2025-11-25).
	//
	// Default: off.
	Tasks Tasks `yaml:"tasks"`
	// Which capability extensions pass between clients and upstreams.
	//
	// Default: none allowed.
	Extensions Extensions `yaml:"extensions"`
	// OpenTelemetry tracing, exported with OTLP.
	//
	// Default: off.
	Tracing Tracing `yaml:"tracing"`
	// The approval page, on the admin listener.
	//
	// Default: off.
	Approvals *Approvals `yaml:"approvals" json:",omitempty"`
}

// Listeners are the addresses mcpgate listens on.
type Listeners struct {
	// The standalone MCP proxy listener (HTTP), where MCP clients connect;
	// each upstream is served on its `route`.
	Proxy Listener `yaml:"proxy"`
	// The admin listener (HTTP): `/metrics`, `/healthz`, `/readyz` and the
	// admin API.
	Admin Listener `yaml:"admin"`
	// The Envoy ext_proc gRPC listener
	// (`envoy.service.ext_proc.v3.ExternalProcessor`, plus the gRPC health
	// service). Off unless `address` is set.
	ExtProc ExtProcListener `yaml:"extproc"`
}

// ExtProcListener is the envoy.service.ext_proc.v3.ExternalProcessor gRPC
// listener, with the gRPC health service beside it.
type ExtProcListener struct {
	// `host:port`, or `unix:/absolute/path.sock` for a Unix domain socket
	// (sidecars).
	//
	// Default: off.
	Address string `yaml:"address"`
	// Bound on mcpgate's work for one ext_proc message; keep it below
	// Envoy's `message_timeout` (default 200 ms). Greater than 0. With
	// `max_message_budget` above it, work still running at half of it is
	// extended instead of cut (see [slow
	// messages](#slow-ext_proc-messages)).
	MessageBudget Duration `yaml:"message_budget"`
	// Bound on mcpgate's work for one request message that is still running
	// at half of `message_budget` (an authentication that fetches a JWKS, a
	// live-rights lookup, a slow state store): mcpgate then sends Envoy
	// `override_message_timeout` with this value and the work may go on
	// until this much time has passed since the message arrived. **Envoy's
	// `max_message_timeout` must be at least this**, or Envoy ignores the
	// override and answers 504 at its `message_timeout`. `0s` never extends
	// (work is cut at `message_budget`, 503); otherwise at least
	// `message_budget` and at most `30s`. See [slow
	// messages](#slow-ext_proc-messages).
	MaxMessageBudget Duration `yaml:"max_message_budget"`
	// Request header Envoy sets (with `OVERWRITE_IF_EXISTS_OR_ADD`) to name
	// the upstream when the route metadata
	// (`filter_metadata.mcpgate.upstream`, sent as the `xds.route_metadata`
	// attribute) does not. Only configured upstream names are accepted.
	UpstreamHeader string `yaml:"upstream_header"`
	// Serve the listener over TLS.
	TLS TLS `yaml:"tls"`
}

// TLS holds PEM file paths. CertFile and KeyFile go together; ClientCAFile
// requires client certificates signed by that CA (mTLS).
type TLS struct {
	// PEM certificate; requires `key_file`.
	//
	// Default: none.
	CertFile string `yaml:"cert_file"`
	// PEM private key; requires `cert_file`.
	//
	// Default: none.
	KeyFile string `yaml:"key_file"`
	// PEM CA bundle; when set, clients (Envoy) must present a certificate
	// signed by it (mTLS).
	//
	// Default: none.
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
	// Listen address, `host:port`. An empty host (`:8080`) listens on every
	// interface; port `0` picks a free port. The port must be a number
	// 0–65535. Keep it on loopback unless it sits behind TLS. The proxy's
	// and the admin listener's addresses must differ (unless a port is
	// `0`); the address of a disabled listener is not checked.
	Address string `yaml:"address"`
	// Turn the listener off (the proxy, e.g., when only Envoy's ext_proc
	// path is used).
	Disabled bool `yaml:"disabled"`
}

// Upstream is one MCP server behind mcpgate.
type Upstream struct {
	// Identifies the upstream in policy data
	// (`data.mcpgate.upstreams[<name>]`), metric labels and logs. 1–63
	// characters of `a-z`, `0-9`, `_`, `-`, starting with a letter or digit.
	// Unique.
	//
	// Required.
	Name string `yaml:"name"`
	// The upstream's MCP endpoint: `http://` or `https://` with a host, e.g.
	// `http://127.0.0.1:3000/mcp`. On a route with `{tenant}` the URL may
	// hold `{tenant}` in its path (only there), which the standalone proxy
	// replaces with the request's tenant:
	// `http://crm.internal/tenants/{tenant}/mcp`. See [routes with a
	// tenant](#routes-with-a-tenant).
	//
	// Required unless `command` is set; exactly one of `url` and `command`.
	URL string `yaml:"url"`
	// A local MCP server that speaks the stdio transport: mcpgate starts
	// it, keeps it running and serves it to the pipeline as an HTTP
	// upstream on loopback. Keys below; see the stdio upstreams guide.
	//
	// Default: none (`url` is required).
	Command *Command `yaml:"command" json:",omitempty"`
	// The path that maps to this upstream: an exact path (`/mcp`), or a
	// pattern with one `{tenant}` segment (`/t/{tenant}/mcp`) that gives
	// each tenant its own MCP URL. Starts with `/`; no `?`, `#`, spaces or
	// percent-encoding: only letters, digits and `- . _ ~ ! $ & ' ( ) * + ,
	// ; = : @ /`, besides `{tenant}`. Request paths are matched as sent,
	// never percent-decoded (`/m%63p` is not `/mcp`: 404). Exact routes are
	// unique across upstreams, so with several upstreams all but one need a
	// route. See [routes with a tenant](#routes-with-a-tenant).
	Route string `yaml:"route"`
	// Standalone proxy: bounds the wait for the upstream's response headers
	// (502 with a JSON-RPC error when it runs out). A response that has
	// started, such as an SSE stream, is not cut. Under Envoy the route's
	// own timeouts apply.
	//
	// Default: `0s` (none).
	Timeout Duration `yaml:"timeout"`
	// The per-tool declarations, keyed by the tool's name on the upstream. A
	// tool that is not declared gets the policy's fail-closed default; an
	// upstream's own annotations (e.g. `readOnlyHint`) never count as a
	// declaration.
	//
	// Default: none.
	Tools map[string]policy.ToolDeclaration `yaml:"tools"`
	// What happens to a tool this upstream lists that `tools` does not
	// declare: `refuse` hides it from `tools/list` and refuses its calls
	// (`tool_not_declared`, naming the declaration to add); `confirm` lists
	// it and treats every call as the most guarded class a person can
	// confirm in the client (the `delete` class: a preview with the exact
	// arguments, then `confirm_action` or the client's elicitation; the
	// `writes` rate bucket), so nothing that may have an effect runs
	// unconfirmed. `confirm` needs the [`store`](#store) section (pending
	// confirmations live there). The upstream's annotations never decide.
	//
	// Default: `refuse` (`confirm` in the one-line mode `mcpgate serve
	// --upstream URL`).
	UndeclaredTools string `yaml:"undeclared_tools"`
	// The `aud` of the identity assertions (see [`assertion`](#assertion))
	// this upstream receives; the upstream checks that it is its own, so an
	// assertion meant for one upstream is refused by another. No spaces or
	// control characters.
	//
	// Default: the upstream's `url` without user information
	// (`https://u:p@h/mcp` → `https://h/mcp`).
	Audience string `yaml:"audience"`
	// Where the tenant sits in this upstream's resource URIs, e.g.
	// `crm://{tenant}/**`: `{tenant}` exactly once (one or more characters
	// other than `/`, `?`, `#`), `*` one path segment, `**` any run (`/**`
	// at the end also matches nothing); lower-case scheme; no query or
	// fragment. A `resources/read`, `resources/subscribe`/`unsubscribe` or
	// `subscriptions/listen` `resourceSubscriptions` URI naming another
	// tenant than the caller's is refused (JSON-RPC error,
	// `tenant_mismatch`), a URI that cannot be parsed too
	// (`invalid_resource_uri`); `resources/list` and
	// `resources/templates/list` entries naming another tenant are hidden;
	// `resource_link` and embedded `resource` items of tool results,
	// `prompts/get` messages and `resources/read` contents naming another
	// tenant are removed, with a warning in `_meta["io.mcpgate/warnings"]`.
	// Tenant-like query parameters (`?tenant=`, `?org_id=`, … and
	// `policy.tenant_arguments`) name a tenant in every URI, with or without
	// patterns.
	//
	// Default: none.
	ResourceTenant []string `yaml:"resource_tenant"`
	// The upstream's own credential, sent beside the identity assertion:
	// an API key or basic auth, an OAuth client-credentials token, or a
	// token exchanged on behalf of the caller. Keys below; see the
	// upstream credentials guide.
	//
	// Default: none: the assertion alone.
	Credential *Credential `yaml:"credential" json:",omitempty"`
}

// Policy selects the Rego policies.
type Policy struct {
	// Directories of `.rego` files and `.json` / `.yaml` data, loaded
	// recursively (`*_test.rego` and names starting with `.` skipped). Each
	// must exist and be a directory; listed once. Relative paths are
	// relative to the configuration file.
	//
	// Default: none: the policy built into mcpgate.
	Dirs []string `yaml:"dirs"`
	// Reload the policy when a file in `policy.dirs` changes. `SIGHUP`
	// always reloads. No effect without `dirs`. A reload that fails keeps
	// the previous policy.
	Watch *bool `yaml:"watch"`
	// Argument names, besides `tenant`, `tenant_id`, `workspace_id` and
	// `org_id`, that would let a model choose a tenant. A `tools/call`
	// carrying one (compared case-insensitively) is refused with the reason
	// `tenant_argument`: the tenant comes from the credential.
	//
	// Default: none.
	TenantArguments []string `yaml:"tenant_arguments"`
	// Member names dropped from every tool result at any depth —
	// `structuredContent`, the text blocks, `_meta` — whatever
	// `result_fields` allow, and from the `data` of upstream JSON-RPC
	// errors, the params of notifications and of server-to-client requests
	// (case, `_`, `-`, `.` and spaces ignored, so `portal_password` also
	// catches `portalPassword`; `*` is a wildcard). Applies with the catalog
	// on; errors, notifications and server requests are shaped whenever the
	// list is set.
	//
	// Default: none.
	SecretNames []string `yaml:"secret_names"`
	// Take the policy from an OPA bundle server instead of `dirs` (not
	// both). Keys below.
	//
	// Default: none.
	Bundle *PolicyBundle `yaml:"bundle" json:",omitempty"`
	// Send every decision, in OPA's decision-log format (`decision_id`,
	// `path: mcpgate/decision`, `input`, `result`, `bundles`, `timestamp`,
	// `erased`), through OPA's decision-log plugin. A mask policy runs
	// first: the default (`rego/mask.rego`) erases
	// `input.message.arguments`, `argument_problems`, `uri`,
	// `principal.credential_id` and any input member named like a token,
	// secret, password, key or cookie. An event whose masking fails is not
	// logged. Needs `url` or `console`.
	//
	// Default: none: no decision logs.
	DecisionLogs *DecisionLogs `yaml:"decision_logs" json:",omitempty"`
	// A candidate policy evaluated beside the live one on every decision, on
	// a worker off the request path. The live policy alone decides; the
	// candidate's differences are logged (decision id, method, tool, allow
	// and reason codes; never arguments) and counted in
	// `mcpgate_policy_shadow_differences_total{change}`. mcpgate's own rules
	// (out-of-band approval for money and legal steps) apply to the
	// candidate too. `dirs` or `bundle`.
	//
	// Default: none.
	Shadow *ShadowPolicy `yaml:"shadow" json:",omitempty"`
}

// Limits bound what a client can send.
type Limits struct {
	// Request body limit; a larger body gets 413. In bytes.
	//
	// Default: `4194304` (4 MiB).
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// Deepest nesting of objects and arrays in a JSON body (request or
	// response).
	MaxJSONDepth int `yaml:"max_json_depth"`
	// Largest single server-sent event in a streamed response. In bytes.
	//
	// Default: `16777216` (16 MiB).
	MaxSSEEventBytes int `yaml:"max_sse_event_bytes"`
	// Time to read a request's headers, on both listeners. `0s`: none.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// Time to read one request body on the proxy listener (408 when it runs
	// out). `0s`: none. No timeout covers a whole exchange: streams are
	// long-lived.
	ReadTimeout Duration `yaml:"read_timeout"`
}

// Transport holds HTTP-level rules.
type Transport struct {
	// The `Origin` header values accepted. Each is `scheme://host[:port]` as
	// a browser sends it: no path, query or user, and no default port
	// (`https://app.example.com`, not `https://app.example.com:443`).
	// Compared ignoring case and a trailing `/`. A request with another
	// `Origin` gets 403; a request without `Origin` is accepted. When the
	// list is empty, `http` and `https` origins on `localhost`, `127.0.0.1`
	// and `[::1]` (any port) are accepted; a non-empty list replaces that
	// default. `*` and `null` are refused.
	//
	// Default: none: loopback origins only.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// Host names (without port) the standalone proxy answers; a request with
	// another `Host` gets 403 with a JSON-RPC error (DNS rebinding
	// protection). Under Envoy, its virtual hosts do this.
	//
	// Default: loopback names when the proxy listens on loopback, else any.
	AllowedHosts []string `yaml:"allowed_hosts"`
}

// Log configures log/slog output.
type Log struct {
	// `text` or `json`.
	Format string `yaml:"format"`
	// `debug`, `info`, `warn` or `error`.
	Level string `yaml:"level"`
}
