// Package config loads and validates mcpgate's YAML configuration.
//
// [Load] reads a file and [Parse] reads bytes; both decode strictly, fill
// unset keys from the Default... constants ([Config.ApplyDefaults]) and
// check the result ([Config.Validate]), reporting every problem at once as
// an errors.Join of [*FieldError], each naming file, line, column and key
// path:
//
//	mcpgate.yaml:7:5: upstreams[0].tols: unknown field (did you mean "tools"?)
//	mcpgate.yaml:9:14: upstreams[0].timeout: "5" is not a duration; use a number with a unit: ms, s, m or h (e.g. "30s", "1m30s")
//
// [Default] is the configuration of the one-line mode
// `mcpgate serve --upstream URL`.
//
// # File format
//
// One YAML document (a mapping). Decoding is strict: an unknown key, a
// duplicate key, a value of the wrong type (a number or true/false where a
// string belongs — quote it; durations are strings such as "30s"), a
// second document after ---, YAML tags (!!str) and merge keys (<<) are
// errors. Anchors (&name) and aliases (*name) may be used to repeat a
// value. An absent key, an empty value (key:), "" and 0 all mean "use the
// default". Durations are Go duration strings ("500ms", "30s", "1m30s",
// "0s"); they must not be negative. The file may be at most
// [MaxConfigBytes] bytes of UTF-8.
//
// Relative paths (policy.dirs, store.bolt.path, rights.file.path,
// assertion.keys_file) are relative to the configuration file's directory
// with [Load], to the working directory with [Parse]. Sections that switch
// something on (auth, auth.gateway_tokens, store, rights, admin_api) are
// off when absent or empty (key:); write {} for one with its defaults.
//
// # Keys
//
// Every key, its type, default and meaning. A path such as
// upstreams[].tools.<tool>.effect means: the effect key of the declaration
// of a tool, in the tools mapping of an element of the upstreams list.
//
// listeners (mapping): the sockets mcpgate listens on. At least one of
// proxy and admin must be enabled.
//
//   - listeners.proxy (mapping): the standalone MCP proxy listener (HTTP),
//     where MCP clients connect; each upstream is served on its route.
//   - listeners.proxy.address (string, host:port; default "127.0.0.1:8080"):
//     the listen address. An empty host (":8080") listens on every
//     interface; port 0 picks a free port. The port must be a number.
//   - listeners.proxy.disabled (boolean; default false): turn the proxy
//     listener off, e.g. when only Envoy's ext_proc path is used.
//   - listeners.admin (mapping): the admin listener (HTTP): /metrics,
//     /healthz, /readyz and the admin API.
//   - listeners.admin.address (string, host:port; default "127.0.0.1:9090"):
//     as listeners.proxy.address; it must differ from it.
//   - listeners.admin.disabled (boolean; default false): turn the admin
//     listener off.
//   - listeners.extproc (mapping): the Envoy ext_proc gRPC listener with
//     the gRPC health service; off unless listeners.extproc.address is set.
//   - listeners.extproc.address (string; default off): host:port, or
//     "unix:/absolute/path.sock" for a Unix domain socket.
//   - listeners.extproc.message_budget (duration; default "150ms"): bound on
//     the work for one ext_proc message, below Envoy's message_timeout.
//   - listeners.extproc.max_message_budget (duration; default "5s"; "0s"
//     never extends, otherwise at least message_budget): bound on the work
//     for one request message still running at half of message_budget;
//     mcpgate then sends Envoy override_message_timeout with this value, so
//     Envoy's max_message_timeout must be at least this (no margin is
//     added: Envoy's restarted timer ends at least message_budget/2 after
//     mcpgate's own deadline, which counts from the message's arrival).
//   - listeners.extproc.upstream_header (string; default
//     "x-mcpgate-upstream"): header Envoy overwrites to name the upstream
//     when the route metadata does not.
//   - listeners.extproc.tls (mapping): TLS for the listener.
//   - listeners.extproc.tls.cert_file, listeners.extproc.tls.key_file
//     (string, paths; together): PEM certificate and key.
//   - listeners.extproc.tls.client_ca_file (string, path): require client
//     certificates signed by this CA (mTLS).
//
// upstreams (list; required, at least one): the MCP servers behind
// mcpgate.
//
//   - upstreams[].name (string; required): identifies the upstream in
//     policy data (data.mcpgate.upstreams[name]), metric labels and logs.
//     1–63 characters of a-z, 0-9, _ and -, starting with a letter or digit;
//     unique.
//   - upstreams[].url (string, URL; required): the upstream's MCP endpoint,
//     http:// or https:// with a host, e.g. "http://127.0.0.1:3000/mcp".
//     On a route with {tenant}, a {tenant} in the URL's path (only there)
//     is replaced by the request's tenant on the standalone proxy, e.g.
//     "http://crm.internal/tenants/{tenant}/mcp"; refused on a route
//     without one.
//   - upstreams[].route (string, path; default "/mcp"): the path that maps
//     to this upstream: an exact path, or a pattern with one whole segment
//     {tenant} (e.g. "/t/{tenant}/mcp") that names the tenant of each
//     request, which the credential must serve. Starts with "/"; only
//     letters, digits and - . _ ~ ! $ & ' ( ) * + , ; = : @ / (written as
//     sent, no percent-encoding), besides {tenant}; a pattern needs a
//     non-empty segment besides {tenant}. Paths are matched as received,
//     never decoded; a tenant segment is 1–128 characters of A-Z a-z 0-9 .
//     _ ~ - and not "." or "..". Exact routes are unique across upstreams
//     (so with more than one upstream every one but one needs a route) and
//     win over patterns; two patterns must not match the same path.
//   - upstreams[].timeout (string, duration; default "0s" = none): on the
//     standalone proxy, bounds the wait for the upstream's response headers
//     (502 when it runs out); a response that has started, such as an SSE
//     stream, is not cut by it.
//   - upstreams[].audience (string; default the url without user
//     information): the aud of the identity assertions the upstream
//     receives. No spaces or control characters.
//   - upstreams[].resource_tenant (list of strings; default none): where
//     the tenant sits in the upstream's resource URIs, e.g.
//     "crm://{tenant}/**" ({tenant} once; "*" one path segment, "**" any
//     run; lower-case scheme; no query). A resources/read, subscribe or
//     listen naming another tenant than the caller's is refused
//     (tenant_mismatch), such list entries are hidden and such resource
//     links are removed from results. Tenant-like query parameters are
//     checked in every URI regardless.
//   - upstreams[].tools (mapping of tool name to declaration; default
//     none): the per-tool declarations, keyed by the tool's name on the
//     upstream. A tool that is not declared gets the policy's fail-closed
//     default; the upstream's annotations never count as a declaration.
//     Checked by policy.ValidateDeclarations.
//   - upstreams[].tools.<tool>.effect (string; required): what calling the
//     tool does: read, silent_write, notify, wake, alerting or delete.
//   - upstreams[].tools.<tool>.rights (list of strings; default none): the
//     rights a caller needs, all of them; non-empty, unique.
//   - upstreams[].tools.<tool>.untrusted_text (list of paths; default
//     none): where the tool's results carry third-party text, which is
//     wrapped as untrusted. A path is field names joined by ".", each
//     optionally followed by [*] (every element) or [N], e.g.
//     "items[*].comment".
//   - upstreams[].tools.<tool>.result_fields (list of paths; default none =
//     not yet minimised): the only result fields an agent sees; the rest is
//     dropped.
//   - upstreams[].tools.<tool>.hidden (boolean; default false): withdraw the
//     tool: left out of tools/list, calls refused (reason tool_hidden).
//   - upstreams[].tools.<tool>.expensive (boolean; default false): a costly
//     read; the default policy takes it from the rate bucket
//     expensive_reads instead of reads.
//   - upstreams[].tools.<tool>.moves_money (boolean; default false): the
//     call moves money; a person confirms it on the approval page
//     (approval out_of_band), whatever the policy answers.
//   - upstreams[].tools.<tool>.legally_binding (boolean; default false):
//     the call is legally binding; treated like moves_money.
//   - upstreams[].tools.<tool>.notify_object (string; default none): for a
//     notify tool, the argument naming the object the message goes to;
//     notify limits count per value of it.
//   - upstreams[].tools.<tool>.deadline_ms (integer, milliseconds; default
//     0 = the gateway's default): bound on one call of the tool.
//
// policy (mapping): which Rego policies decide.
//
//   - policy.dirs (list of directory paths; default none = the policy built
//     into mcpgate): directories of .rego files and .json/.yaml data, loaded
//     recursively. Each must exist and be a directory. Relative paths are
//     relative to the configuration file (with Load) or to the working
//     directory (with Parse).
//   - policy.watch (boolean; default true): reload the policy when a file in
//     policy.dirs changes. SIGHUP always reloads. No effect without dirs.
//   - policy.secret_names (list of strings; default none): member names
//     dropped from every tool result at any depth (case, "_", "-", "."
//     and spaces ignored; "*" a wildcard).
//   - policy.tenant_arguments (list of strings; default none): argument
//     names, besides tenant, tenant_id, workspace_id and org_id, that would
//     let a model choose a tenant; a tools/call carrying one is refused.
//   - policy.bundle (mapping; default none): the policy from an OPA bundle
//     server instead of dirs. A bundle that fails to download, verify or
//     compile keeps the previous policy.
//   - policy.bundle.url (string, http(s) URL; required): the bundle's URL,
//     polled with ETags by OPA's bundle plugin.
//   - policy.bundle.min_delay, policy.bundle.max_delay (string, duration;
//     default OPA's 60s and 120s): wait between polls.
//   - policy.bundle.bearer_token_file (file path): bearer token for the server.
//   - policy.bundle.public_key_file (file path): PEM key bundle signatures
//     must verify against; unsigned bundles are then refused.
//   - policy.bundle.key_id (default "mcpgate"), policy.bundle.algorithm (default
//     RS256), policy.bundle.scope: the signature's keyid, algorithm, scope.
//   - policy.bundle.status_url (http(s) URL): where OPA's status plugin
//     reports; default the log.
//   - policy.decision_logs (mapping; default none): every decision to OPA's
//     decision-log plugin, masked by rego/mask.rego (arguments, URIs,
//     credential ids, secret-like names erased).
//   - policy.decision_logs.url (http(s) URL), policy.decision_logs.console
//     (boolean; default false): where events go; one is required.
//   - policy.decision_logs.bearer_token_file (file path).
//   - policy.decision_logs.min_delay, policy.decision_logs.max_delay
//     (duration; default OPA's 300s and 600s).
//   - policy.decision_logs.mask_policy_file (file path): replaces the
//     default mask policy (package system.log, rule mask).
//   - policy.decision_logs.queue_size (integer; default 10000).
//   - policy.shadow (mapping; default none): a candidate policy evaluated
//     beside the live one; differences logged and counted, the live policy
//     decides.
//   - policy.shadow.dirs (list of directory paths) or
//     policy.shadow.bundle (mapping, keys as policy.bundle):
//   - policy.shadow.bundle.url (string, http(s) URL; required): the bundle's URL,
//     polled with ETags by OPA's bundle plugin.
//   - policy.shadow.bundle.min_delay, policy.shadow.bundle.max_delay (string, duration;
//     default OPA's 60s and 120s): wait between polls.
//   - policy.shadow.bundle.bearer_token_file (file path): bearer token for the server.
//   - policy.shadow.bundle.public_key_file (file path): PEM key bundle signatures
//     must verify against; unsigned bundles are then refused.
//   - policy.shadow.bundle.key_id (default "mcpgate"), policy.shadow.bundle.algorithm (default
//     RS256), policy.shadow.bundle.scope: the signature's keyid, algorithm, scope.
//   - policy.shadow.bundle.status_url (http(s) URL): where OPA's status plugin
//     reports; default the log.
//   - policy.shadow.queue_size (integer; default 1024).
//
// limits (mapping): bounds on what a client can send. Each number must be
// greater than 0.
//
//   - limits.max_body_bytes (integer, bytes; default 4194304 = 4 MiB): the
//     request body limit; a larger body gets 413.
//   - limits.max_json_depth (integer; default 64): the deepest nesting of
//     objects and arrays in a JSON body (request or response).
//   - limits.max_sse_event_bytes (integer, bytes; default 16777216 =
//     16 MiB): the largest single server-sent event in a streamed response.
//   - limits.read_header_timeout (string, duration; default "5s"; "0s" =
//     none): time to read a request's headers, on both listeners.
//   - limits.read_timeout (string, duration; default "30s"; "0s" = none):
//     time to read one request body on the proxy listener (408 when it
//     runs out). No timeout covers a whole exchange: streams are
//     long-lived.
//
// transport (mapping): HTTP-level rules.
//
//   - transport.allowed_origins (list of origins; default none = loopback
//     origins only): the Origin header values accepted, each
//     scheme://host[:port] as a browser sends it, without path and without
//     a default port (https://a.example, not https://a.example:443);
//     compared ignoring case and a trailing "/". A request with another
//     Origin gets 403; a request without Origin is accepted. When empty,
//     http(s) origins on localhost, 127.0.0.1 and [::1] (any port) are
//     accepted; a non-empty list replaces that. "*" and "null" are refused.
//   - transport.allowed_hosts (list of strings; default: loopback names
//     when the proxy listens on loopback, else any): Host names the
//     standalone proxy answers; another Host gets 403 (DNS rebinding).
//
// log (mapping): log/slog output (to standard error).
//
//   - log.format (string; default "text"): "text" or "json".
//   - log.level (string; default "info"): "debug", "info", "warn" or
//     "error".
//
// auth (mapping; default none = no authentication, every caller
// anonymous, logged as a warning at start): every MCP route becomes an
// OAuth 2.1 protected resource. A route's resource URI (RFC 8707, the
// audience its tokens must carry) is auth.resource_base_url followed by the
// route's path; its protected resource metadata (RFC 9728) is served at
// /.well-known/oauth-protected-resource<route>, the first exact route's
// also at /.well-known/oauth-protected-resource. On a route with {tenant}
// each tenant's path is a resource of its own: resource URI and metadata
// path with the tenant filled in (https://mcp.example.com/t/acme/mcp,
// /.well-known/oauth-protected-resource/t/acme/mcp). Routes may not lie
// under that path.
//
//   - auth.resource_base_url (string, URL; required): the gateway's public
//     origin, scheme://host[:port] without path, query or fragment; https
//     except on loopback hosts. Never derived from a request's Host.
//   - auth.scopes_supported (list of strings; default none = per route, the
//     rights its tools declare): scopes_supported of the metadata; RFC 6749
//     scope tokens, unique.
//   - auth.issuers (list; required, at least one unless
//     auth.gateway_tokens is set): trusted authorization servers, checked
//     by auth.ValidateIssuers; each issuer once.
//   - auth.issuers[].issuer (string, URL; required): the issuer identifier
//     (discovery at <issuer>/.well-known/openid-configuration, the tokens'
//     iss); https except on loopback hosts.
//   - auth.issuers[].audiences (list of resource URIs; default none = every
//     route): the routes the issuer may issue tokens for, each the canonical
//     resource URI of a configured route, or of a route with {tenant} for
//     one tenant (https://mcp.example.com/t/acme/mcp; {tenant} itself is
//     refused).
//   - auth.issuers[].algorithms (list of strings; default RS256, ES256,
//     PS256, EdDSA): JWS alg allowlist, asymmetric algorithms only.
//   - auth.issuers[].types (list of strings; default at+jwt,
//     application/at+jwt): JOSE typ allowlist; "" admits tokens without typ.
//   - auth.issuers[].clock_skew (duration; default "30s"): tolerance for
//     exp, nbf and iat; greater than 0.
//   - auth.issuers[].min_jwks_refresh (duration; default "30s"): least time
//     between two JWKS fetches; greater than 0.
//   - auth.issuers[].tenant_claim (string; default none): the tenant claim.
//   - auth.issuers[].subject_claim (string; default "sub"): the subject
//     claim, required in every token.
//   - auth.issuers[].scope_claim (string; default "scope", else "scp"): the
//     scope claim (a space-separated string or an array of strings).
//   - auth.issuers[].client_id_claim (string; default "client_id", else
//     "azp"): the claim naming the OAuth client.
//   - auth.issuers[].client_toolsets (mapping of client id to toolset
//     name; default none): the toolset of the connections of each OAuth
//     client (a key of toolsets, or "full"); other clients get "full".
//   - auth.issuers[].introspection (mapping; default none): verify opaque
//     tokens with RFC 7662 at this issuer; at most one issuer.
//   - auth.issuers[].introspection.endpoint (string, URL; default the
//     discovery document's introspection_endpoint).
//   - auth.issuers[].introspection.client_id,
//     auth.issuers[].introspection.client_secret (strings; both required):
//     the gateway's client credentials (client_secret_basic); the secret is
//     never logged.
//   - auth.tenant_header (string, header name; default none): the request
//     header in which a client names the tenant of a request, one its
//     credential serves; on a route with {tenant} it must name the path's
//     tenant if sent. An HTTP token; not Authorization,
//     Proxy-Authorization, Cookie, Host, Content-Type, Mcpgate-Assertion,
//     Mcp-* or listeners.extproc.upstream_header.
//   - auth.gateway_tokens (mapping; default none = off): MCP access tokens
//     issued by mcpgate (admin API). Requires a store section (tokens are
//     kept there, hashed) and a rights section (a token's rights at
//     creation are capped by its creator's live rights).
//   - auth.gateway_tokens.default_ttl (duration; default "720h"): lifetime
//     of a token created without one; greater than 0, at most max_ttl.
//   - auth.gateway_tokens.max_ttl (duration; default "2160h"): the longest
//     lifetime a token may get; greater than 0.
//   - auth.session_ttl (duration; default "24h"): how long an older MCP
//     revision's session id stays bound to its principal; greater than 0.
//
// store (mapping; default none = no store: gateway tokens, session binding
// and stored audit are off, audit goes to the log only): the state store,
// exactly one backend.
//
//   - store.bolt (mapping): a bbolt file, for one instance.
//   - store.bolt.path (string, path; required): the database file, created
//     if missing; its directory must exist.
//   - store.redis (mapping): a Redis server shared by several instances.
//   - store.redis.url (string, URL; required): redis://, rediss:// or
//     unix://, as go-redis's ParseURL reads it; the password is never
//     logged or shown.
//
// audit (mapping): the audit trail.
//
//   - audit.retention (duration; default "720h"; at least "1h"): how long
//     stored audit records are kept.
//   - audit.log (string; default "stderr"): where audit records are also
//     written as JSON lines: "stderr", "stdout" or "off".
//
// rights (mapping; default none = effective rights are the credential's
// rights): the live rights source, exactly one of http and file.
//
//   - rights.http (mapping): the product's rights endpoint.
//   - rights.http.url (string, URL; required): https, or http on loopback
//     hosts.
//   - rights.http.timeout (duration; default "2s"; greater than 0, at most
//     "30s"): bound on one request.
//   - rights.http.headers (mapping of header name to value; default none):
//     sent with every request, e.g. Authorization; names unique ignoring
//     case, values non-empty without line breaks and never logged.
//   - rights.file (mapping): a rights file, reread when it changes.
//   - rights.file.path (string, path; required): the file; it must exist.
//   - rights.max_staleness (duration; default "0s" = no cache; at most
//     "5m"): how long an answer may be reused.
//
// assertion (mapping): the signed identity assertions upstreams receive.
//
//   - assertion.keys_file (string, path; default none = a key made for
//     this process only, logged as a warning): the private JWK Set that
//     signs (mcpgate keys generate); it must exist.
//   - assertion.issuer (string; default auth.resource_base_url when set,
//     else "mcpgate"): the assertions' iss.
//   - assertion.ttl (duration; default "60s"; from "10s" to "10m"): the
//     lifetime of one assertion.
//
// catalog (mapping): mcpgate's own listing of each upstream's tools, with
// pinning. On unless disabled.
//
//   - catalog.disabled (bool; default false; true in serve --upstream):
//     turn the catalog off
//     (tools/list forwarded and filtered, no schema validation, no pinning).
//   - catalog.refresh (duration; default "5m"; at least "10s"): how often
//     each upstream is listed again.
//   - catalog.max_pages (int; default 50; 1 to 1000): bound on the pages
//     of one listing.
//   - catalog.manifest (string, path; default none = pinning off): the
//     pinned manifest (mcpgate manifest pin writes it there; serve needs
//     it to exist).
//   - catalog.unpinned ("refuse" or "allow"; default "refuse"): what
//     happens to a listed tool the manifest does not pin.
//   - catalog.list_changed_check (duration; default "10s"; "0s" or at
//     least "100ms"): how often every open notification stream is checked
//     for a change of the tools its principal sees (rights, tokens);
//     notifications/tools/list_changed is then sent on it. Catalog,
//     manifest and policy changes are checked at once besides.
//
// toolsets (mapping of toolset name to toolset; default none): named
// toolsets a connection can be bound to (a gateway token's --toolset,
// auth.issuers[].client_toolsets). The built-in "full" (every tool) is the
// default and cannot be defined. Names: lower-case letters, digits, "_"
// and "-".
//
//   - toolsets.<name>.tools (list of strings; required): the toolset's
//     tools, "<tool>" with one upstream, "<upstream>/<tool>" with several;
//     each declared in upstreams[].tools (only a warning with the catalog
//     off).
//   - toolsets.<name>.description_chars (int; default 0 = the upstream's
//     description; else 20 to 2000): tools/list shows the first sentence,
//     cut at a word to this many characters.
//   - toolsets.<name>.descriptions (mapping of tool to string; default
//     none): declared short descriptions (at most 1000 characters) that
//     replace the upstream's for this toolset.
//
// write_safety (mapping): replay protection and two-step confirmation;
// needs a store section (without one, calls the policy marks for either
// are refused).
//
//   - write_safety.replay_window (duration; default "10m"; "1s" to "24h"):
//     how long a silent write's result answers an identical repeat.
//   - write_safety.confirm_ttl (duration; default "10m"; "10s" to "24h"):
//     how long a preview's confirm_token stays valid.
//   - write_safety.wait_in_flight (duration; default "2s"; at most "25s"):
//     how long a repeat waits for the running first call.
//   - write_safety.sealing_keys_file (path; default none: a key made for
//     this process only): the AES-256-GCM keys that seal the requestState
//     of approvals asked through input_required; shared by replicas, the
//     first key seals, every key opens (mcpgate sealing-keys).
//
// rate_limits (mapping): limits per effect class.
//
//   - rate_limits.disabled (bool; default false): turn every limit off.
//   - rate_limits.backend ("memory" or "redis"; default redis with
//     store.redis, else memory): where buckets live.
//   - rate_limits.buckets (mapping; defaults for reads, expensive_reads,
//     writes, notify, wake): bucket name to rate; rate_limits.buckets.<name>.rate
//     (int, at least 1), rate_limits.buckets.<name>.per (duration, "1s" to
//     "24h"), rate_limits.buckets.<name>.burst (int, at least 1).
//   - rate_limits.concurrency (int; default 2): calls one credential may
//     have in flight.
//   - rate_limits.reserved_for_writes (int; default 1; below concurrency):
//     slots only writes may use.
//   - rate_limits.loop_brake (int; default 3; at least 2): the n-th
//     identical failing call in a row is stopped.
//   - rate_limits.reads_when_unavailable (bool; default false): let reads
//     through unlimited while Redis cannot be reached (writes are refused).
//   - rate_limits.default_deadline (duration; default "60s"; "1s" to
//     "10m"): how long one tools/call may take upstream by default.
//
// tasks (mapping): MCP tasks of revision 2025-11-25. Off by default
// (task-augmented calls and tasks/* refused, the upstream's tasks
// capability hidden).
//
//   - tasks.enabled (bool; default false; needs a store section): turn
//     tasks on; each task id is bound to its caller and tool.
//   - tasks.max_ttl (duration; default "1h"; from "1s" to "168h"): the
//     longest a task binding lives.
//
// extensions (mapping): capability extensions that pass between clients
// and upstreams; every other one is stripped.
//
//   - extensions.allow (list of strings; default none): extension
//     identifiers and experimental capability names that pass unchanged
//     (not "io.modelcontextprotocol/tasks").
//
// tracing (mapping): OpenTelemetry tracing of each request through the
// pipeline, exported with OTLP; W3C trace context goes to the upstream.
// Off by default. Spans never carry arguments, results or credentials.
//
//   - tracing.enabled (bool; default false): turn tracing on.
//   - tracing.protocol (string; default "http/protobuf"): "http/protobuf"
//     or "grpc".
//   - tracing.endpoint (URL; default "http://127.0.0.1:4318/v1/traces",
//     "http://127.0.0.1:4317" for grpc): the collector; http:// or
//     https://, no credentials (OTEL_EXPORTER_OTLP_HEADERS instead).
//   - tracing.sample_ratio (string; default "1"; "0" to "1"): fraction of
//     new traces recorded; a caller's traceparent decides for its own.
//   - tracing.service_name (string; default "mcpgate"): service.name.
//
// approvals (mapping; default none = off): the approval page, /approvals/
// on the admin listener, where a person holding the right approves or
// rejects out-of-band actions. Requires store, rights and the admin
// listener.
//
//   - approvals.base_url (URL; required): origin browsers reach the admin
//     listener at; http only on loopback.
//   - approvals.oidc (mapping; required): the approvers' OpenID provider.
//   - approvals.oidc.issuer (URL; required): issuer identifier.
//   - approvals.oidc.client_id (string; required): the page's own client.
//   - approvals.oidc.client_secret (string; default none = public client).
//   - approvals.oidc.scopes (list of strings; default none): besides openid.
//   - approvals.oidc.tenant_claim (string; default the matching
//     auth.issuers[] entry's): claim with the approver's tenant.
//   - approvals.oidc.subject_claim (string; default "sub").
//   - approvals.session_ttl (duration; default 1h; 1m–24h).
//   - approvals.require_second_person (bool; default false): a requester
//     never approves their own action.
//   - approvals.second_person_effects (list of effect classes; default
//     none): the same rule for these classes only.
//   - approvals.webhook (mapping; default none = off): announce new
//     out-of-band actions (JSON, HMAC-SHA256 signed, retried).
//   - approvals.webhook.url (URL; required).
//   - approvals.webhook.secret (string; required; at least 32 bytes).
//   - approvals.webhook.max_attempts (integer; default 5; 1–10).
//   - approvals.webhook.timeout (duration; default 5s; at most 1m).
//
// admin_api (mapping; default none = off): the admin API, /v1/ on the
// admin listener. Requires an auth section, a store section and an enabled
// admin listener, and static_tokens or (auth.issuers and audience).
//
//   - admin_api.audience (string; required when auth.issuers is not empty,
//     refused otherwise): the aud of admin OIDC tokens; it must differ from
//     every route's resource URI, every tenant's of a route with {tenant}
//     included.
//   - admin_api.platform_admin_role (string; default
//     "mcpgate.platform_admin"): the OIDC role of a platform admin.
//   - admin_api.tenant_admin_role (string; default "mcpgate.tenant_admin"):
//     the OIDC role of a tenant admin; differs from platform_admin_role.
//   - admin_api.static_tokens (list; default none): static admin tokens.
//   - admin_api.static_tokens[].name (string; required): 1–63 characters of
//     a-z, 0-9, _ and -; unique.
//   - admin_api.static_tokens[].sha256 (string; required): the SHA-256 of
//     the secret as 64 hex digits, never the secret itself; unique.
//   - admin_api.static_tokens[].role (string; required): "platform_admin"
//     or "tenant_admin".
//   - admin_api.static_tokens[].tenant (string): required for
//     tenant_admin, refused for platform_admin.
//
// # Example
//
// The smallest useful file (see examples/minimal.yaml):
//
//	upstreams:
//	  - name: crm
//	    url: http://127.0.0.1:3000/mcp
package config
