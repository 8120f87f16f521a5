// Package policy evaluates mcpgate's Rego policies with OPA's Go packages.
// The rest of mcpgate sees only the typed Input and Decision documents below;
// OPA types stay inside this package. Both documents are versioned and
// described as JSON Schema in input.schema.json and decision.schema.json.
package policy

import "github.com/go-json-experiment/json/jsontext"

// SchemaVersion is the version of the Input and Decision documents.
const SchemaVersion = "mcpgate.policy/v1"

// Phases of an evaluation (Input.Phase).
const (
	PhaseRequest = "request" // decide on a client message
	PhaseList    = "list"    // choose the visible items of a list result
)

// Input is the `input` document of one policy evaluation: one per JSON-RPC
// message (phase "request") or per list result (phase "list").
type Input struct {
	Version string `json:"version"` // SchemaVersion
	// Phase is "request" (decide on a client message) or "list" (choose the
	// visible items of a tools/list, prompts/list, resources/list or
	// resources/templates/list result).
	Phase     string    `json:"phase"`
	Transport Transport `json:"transport"`
	Message   Message   `json:"message"`
	// Tool is the declaration of the tool a tools/call names (nil otherwise).
	Tool *Tool `json:"tool,omitempty"`
	// Finders are the tools a refusal of a tools/call that names no usable
	// tool (undeclared, not listed by the upstream, or hidden) may point to
	// instead ("not found" points to a find tool, never to create): the
	// declared read tools of the same upstream whose names
	// start with find_, search_, list_ or get_, in the catalog's order
	// (declaration order by name without a catalog), each as input.tool
	// would show it. Absent for a tools/call of a declared, listed, not
	// hidden tool (the hot path) and for other messages.
	Finders []Tool `json:"finders,omitempty"`
	// Items are the entries of a list result (phase "list" only).
	Items []Item `json:"items,omitempty"`
	// Principal is who is calling: {"authenticated": false} when the
	// gateway runs without authentication (no auth section).
	Principal Principal `json:"principal"`
}

// Transport holds the transport facts of the message.
type Transport struct {
	Kind       string `json:"kind"`        // "proxy" or "extproc"
	HTTPMethod string `json:"http_method"` // e.g. "POST"
	Path       string `json:"path"`        // request path, e.g. "/mcp"
	Upstream   string `json:"upstream"`    // configured upstream name
	// Tenant is the tenant the request path names, on a route with a
	// {tenant} segment (e.g. /t/{tenant}/mcp); "" (absent) on an exact
	// route. With authentication it equals principal.tenant: a credential
	// that does not serve it was refused before the policy ran.
	Tenant          string `json:"tenant,omitempty"`
	ProtocolVersion string `json:"protocol_version"` // effective MCP revision
	Origin          string `json:"origin,omitempty"` // Origin header, if any
}

// Message is the parsed MCP message.
type Message struct {
	Kind   string `json:"kind"`   // "request" or "notification"
	Method string `json:"method"` // JSON-RPC method
	// Name is the tool or prompt name (tools/call, prompts/get).
	Name string `json:"name,omitempty"`
	// URI is the resource URI (resources/read, subscribe, unsubscribe).
	URI string `json:"uri,omitempty"`
	// Arguments is the raw JSON of the tools/call or prompts/get arguments
	// (normally an object), already checked as strict JSON by gateway/mcp.
	// The engine converts it to an OPA value without a JSON round trip.
	Arguments jsontext.Value `json:"arguments,omitempty"`
	// ArgumentsStrict says that Arguments are exactly bytes a strict JSON
	// reader accepted (jsontext's defaults: valid UTF-8, no duplicate
	// names, one value without trailing data), as gateway/mcp's parse
	// does. The decision memo's check of the arguments then only looks
	// for numbers OPA cannot hold instead of reading the JSON again.
	// Never set it for bytes not read so.
	ArgumentsStrict bool `json:"-"`
	// TenantArguments are the top-level argument names of a tools/call
	// that would choose a tenant (tenant, tenant_id, workspace_id, org_id
	// and policy.tenant_arguments, compared case-insensitively), found by
	// the gateway; absent when there are none. The policy refuses such a
	// call: the tenant comes from the credential.
	TenantArguments []string `json:"tenant_arguments,omitempty"`
	// ArgumentProblems are what is wrong with the arguments of a tools/call
	// against the tool's inputSchema from the catalog (unknown arguments,
	// wrong types, missing required ones), found by the gateway; absent
	// when there is nothing wrong or no catalog. The policy refuses such a
	// call with the problems, so the model can correct it.
	ArgumentProblems []ArgumentProblem `json:"argument_problems,omitempty"`
	// Client is clientInfo from _meta (2026-07-28) or initialize.
	Client *Client `json:"client,omitempty"`
	// URITenants are the tenants the resource URIs of the message name
	// (resources/read, resources/subscribe and unsubscribe, and the
	// resourceSubscriptions of subscriptions/listen), found by the gateway
	// with the upstream's resource_tenant patterns and tenant-like query
	// parameters, sorted, without repeats; absent when they name none.
	// The default policy refuses a message naming a tenant other than the
	// caller's (tenant_mismatch): no resource URI chooses the tenant.
	URITenants []string `json:"uri_tenants,omitempty"`
	// URIProblem says why a resource URI of the message cannot be checked
	// (it does not parse, or its tenant part does not decode); "" when
	// every URI could be. The default policy refuses such a message
	// (invalid_resource_uri): fail closed.
	URIProblem string `json:"uri_problem,omitempty"`
}

// ArgumentProblem is one thing wrong with a tools/call's arguments.
type ArgumentProblem struct {
	// Argument is the argument's path ("limit", "filter.status"); "" for
	// the arguments as a whole.
	Argument string `json:"argument"`
	// Code: not_an_object, unknown_argument, missing_argument, wrong_type,
	// invalid_value, invalid.
	Code string `json:"code"`
	// Message says what is wrong, for the model.
	Message string `json:"message"`
	// Allowed are the tool's argument names (unknown_argument).
	Allowed []string `json:"allowed,omitempty"`
	// Expected is the type the schema wants (wrong_type).
	Expected string `json:"expected,omitempty"`
}

// Client identifies the MCP client implementation (self-reported).
type Client struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Credential kinds (Principal.CredentialKind).
const (
	// CredentialOAuth: an OAuth 2.1 access token verified against a
	// configured issuer (JWT or introspection).
	CredentialOAuth = "oauth"
	// CredentialGatewayToken: an MCP token issued by mcpgate itself
	// (prefix "mcpg_"), bound to one tenant and one creator.
	CredentialGatewayToken = "gateway_token"
)

// Principal is the verified caller, read from the credential only (never
// from the message). Without authentication it is {"authenticated": false}.
type Principal struct {
	Authenticated bool `json:"authenticated"`
	// Tenant is the tenant the credential is bound to ("" when the issuer
	// maps no tenant claim).
	Tenant string `json:"tenant,omitempty"`
	// Subject is the person or service the credential speaks for.
	Subject string `json:"subject,omitempty"`
	// Rights are the effective rights: TokenRights ∩ LiveRights when a
	// rights source is configured, else TokenRights. The default policy
	// checks tools against them.
	Rights []string `json:"rights,omitempty"`
	// TokenRights are the credential's own rights: an OAuth token's
	// scopes, a gateway token's rights as granted.
	TokenRights []string `json:"token_rights,omitempty"`
	// LiveRights are the subject's current rights from the rights source,
	// looked up for this message; nil (absent from the input) when no
	// rights source is configured, non-nil (possibly empty) otherwise.
	LiveRights []string `json:"live_rights,omitzero"`
	// CredentialKind is how the caller authenticated: CredentialOAuth or
	// CredentialGatewayToken.
	CredentialKind string `json:"credential_kind,omitempty"`
	// CredentialID identifies the credential: a gateway token's id, an
	// OAuth token's jti ("" when it has none).
	CredentialID string `json:"credential_id,omitempty"`
	// Issuer is the issuer identifier of an OAuth token.
	Issuer string `json:"issuer,omitempty"`
	// ClientID is the OAuth client the token was issued to ("" if the
	// token names none).
	ClientID string `json:"client_id,omitempty"`
	// Connection identifies the connection: a gateway
	// token's id; for OAuth a hash of (issuer, subject, client id,
	// tenant), stable across token refresh. Replay windows, limits and
	// audit key on it.
	Connection string `json:"connection,omitempty"`
	// Toolset is the named toolset the connection is bound to: a gateway
	// token's toolset, or
	// for OAuth the one configured for the client
	// (auth.issuers[].client_toolsets). "" (absent) and "full" mean every
	// tool. Only names the configuration defines reach the policy: a
	// credential naming another is refused before it (unknown_toolset).
	Toolset string `json:"toolset,omitempty"`
}

// Tool is a per-tool declaration (see ToolDeclaration) as the policy sees it.
type Tool struct {
	Name string `json:"name"`
	// CalledAs is the name the client called the tool by when it is not
	// Name: its exposed name (tools.<name>.expose.name) or, on a virtual
	// server, the name with its member's prefix. Texts an agent reads
	// name the tool so; everything else keys on Name.
	CalledAs string `json:"called_as,omitempty"`
	Declared bool   `json:"declared"`
	ToolDeclaration
	// Undeclared is, for a tool nobody declared (Declared false), what its
	// upstream's operator chose for such tools (upstreams[].undeclared_tools):
	// UndeclaredConfirm lists it and lets every call through a person's
	// confirmation; "" (refuse) hides it. Always "" for a declared tool.
	Undeclared string `json:"undeclared,omitempty"`
	// Catalog is what mcpgate's own listing of the upstream says of the
	// tool; nil when the catalog is off.
	Catalog *ToolCatalog `json:"catalog,omitempty"`
	// Toolsets are the names of the configured toolsets (config
	// toolsets.<name>) that hold the tool, sorted; absent when none does.
	// The built-in toolset "full" holds every tool and is never listed.
	// The default policy hides a tool outside principal.toolset
	// (tool_not_in_toolset) and names these in the refusal.
	Toolsets []string `json:"toolsets,omitempty"`
}

// Catalog states of a listed tool (ToolCatalog.State).
const (
	CatalogApproved = "approved" // pinned with this definition, or pinning off
	CatalogChanged  = "changed"  // definition differs from its pin (rug pull?)
	CatalogUnpinned = "unpinned" // listed, not pinned, unpinned tools refused
	// CatalogUnusable: the gateway cannot check calls to the tool (its
	// inputSchema does not compile, e.g. a $ref outside the schema).
	CatalogUnusable = "unusable"
)

// ToolCatalog is a tool's entry in mcpgate's catalog.
type ToolCatalog struct {
	// Listed: the upstream lists the tool now.
	Listed bool `json:"listed"`
	// State is CatalogApproved, CatalogChanged, CatalogUnpinned or
	// CatalogUnusable ("" when not listed).
	State string `json:"state,omitempty"`
	// Hash identifies the listed definition: "sha256:" and 64 hex digits
	// over the RFC 8785 form of its name, title, description, inputSchema,
	// outputSchema and annotations (internal/catalog); "" when not listed.
	Hash string `json:"hash,omitempty"`
	// Title is the tool's title as the upstream lists it ("" when none).
	Title string `json:"title,omitempty"`
	// Annotations is the raw JSON of the upstream's "annotations" member
	// (MCP ToolAnnotations: hints, untrusted; never a declaration); absent
	// when the upstream lists none.
	Annotations jsontext.Value `json:"annotations,omitempty"`
}

// Item is one entry of a list result.
type Item struct {
	// Name is the tool / prompt name, or the resource URI / URI template.
	Name string `json:"name"`
	// Tool is the declaration of a tools/list entry.
	Tool *Tool `json:"tool,omitempty"`
	// URITenants are the tenants a resources/list or
	// resources/templates/list entry's URI names (see
	// Message.URITenants); absent when none. The default policy hides an
	// entry naming another tenant than the caller's.
	URITenants []string `json:"uri_tenants,omitempty"`
}

// Effect classes of a tool: what a call may change, which sets its
// confirmation, replay protection and rate buckets.
const (
	EffectRead        = "read"
	EffectSilentWrite = "silent_write"
	EffectNotify      = "notify"
	EffectWake        = "wake"
	EffectAlerting    = "alerting"
	EffectDelete      = "delete"
)

// What an upstream does with tools nobody declared (Tool.Undeclared).
const (
	UndeclaredRefuse  = "refuse"  // hidden from tools/list, calls refused (tool_not_declared)
	UndeclaredConfirm = "confirm" // listed; every call waits for a person's confirmation
)

// Effects lists every effect class.
var Effects = []string{EffectRead, EffectSilentWrite, EffectNotify, EffectWake, EffectAlerting, EffectDelete}

// ToolDeclaration is what a platform team declares once per upstream tool,
// as policy data (data.mcpgate.upstreams[<upstream>].tools[<tool>]).
// Schema: declarations.schema.json.
type ToolDeclaration struct {
	// What calling the tool does to the world: `read` (only reads),
	// `silent_write` (changes data, nobody is told), `notify` (messages a
	// person), `wake` (interrupts a person now: page, call), `alerting`
	// (changes what alerts fire), `delete` (removes or cancels). Silent
	// writes get replay protection; `notify`, `wake`, `alerting` and
	// `delete` need a person's confirmation.
	//
	// Required.
	Effect string `json:"effect" yaml:"effect"`
	// The rights a caller needs, all of them. Non-empty, unique.
	//
	// Default: none.
	Rights []string `json:"rights,omitempty" yaml:"rights,omitempty"`
	// Where the tool's results carry third-party text: each string there is
	// wrapped as `{"untrusted_text": …, "notice": …}`, cleaned of control,
	// zero-width, bidi and tag characters and cut to 2000 bytes, in
	// `structuredContent` and the text block alike.
	//
	// Default: none.
	UntrustedText []string `json:"untrusted_text,omitempty" yaml:"untrusted_text,omitempty"`
	// The only result fields an agent sees; every other member of the tool's
	// results is dropped (in `structuredContent` and the mirroring text
	// block).
	//
	// Default: none (not yet minimised).
	ResultFields []string `json:"result_fields,omitempty" yaml:"result_fields,omitempty"`
	// Withdraw the tool: left out of `tools/list`, calls refused (reason
	// `tool_hidden`), e.g. during an incident.
	//
	// Default: `false`.
	Hidden bool `json:"hidden,omitempty" yaml:"hidden,omitempty"`
	// A read that costs the upstream much (a report, an export): the default
	// policy takes its calls from the rate bucket `expensive_reads` instead
	// of `reads`.
	//
	// Default: `false`.
	Expensive bool `json:"expensive,omitempty" yaml:"expensive,omitempty"`
	// The call moves money: a person confirms it on the approval page
	// (`confirm`, `approval: out_of_band`), whatever the policy answers.
	//
	// Default: `false`.
	MovesMoney bool `json:"moves_money,omitempty" yaml:"moves_money,omitempty"`
	// The call is legally binding; treated like `moves_money`.
	//
	// Default: `false`.
	LegallyBinding bool `json:"legally_binding,omitempty" yaml:"legally_binding,omitempty"`
	// For a notify tool: the top-level argument naming the object the
	// message goes to (e.g. `booking_id`); notify limits count per value of
	// it. Letters, digits, `_`, `-`, `@`.
	//
	// Default: none.
	NotifyObject string `json:"notify_object,omitempty" yaml:"notify_object,omitempty"`
	// Bound on one call of the tool, from the gateway's receipt to the
	// upstream's complete answer. 0–3600000. In milliseconds.
	//
	// Default: `0` (the gateway's default).
	DeadlineMS int `json:"deadline_ms,omitempty" yaml:"deadline_ms,omitempty"`
	// How clients see the tool: another name, title or description in
	// `tools/list`. The upstream still receives the tool's own name; the
	// policy, rights, toolsets, pinning, audit, metrics, replay protection
	// and confirmations keep naming the tool by its own name. A renamed
	// tool is not callable under its own name (refused like an undeclared
	// tool). See [renaming and overriding
	// tools](../guides/tool-contracts.md#renaming-and-overriding-tools).
	//
	// Default: none (the upstream's name and text).
	Expose *ToolExposure `json:"-" yaml:"expose,omitempty"`
}

// ToolExposure is what clients see of a declared tool instead of the
// upstream's own name and text. The policy never sees it.
type ToolExposure struct {
	// The name clients list and call the tool by: 1–128 characters of
	// `A-Z`, `a-z`, `0-9`, `_`, `-`, `.`. Unique among the names the
	// upstream's tools are exposed under: neither another declared tool's
	// name nor another tool's `expose.name`, nor one of mcpgate's own
	// tools (`confirm_action`, `reject_action`, `list_recent_changes`).
	//
	// Default: the tool's own name.
	Name string `json:"name,omitempty" yaml:"name,omitempty"`
	// The title `tools/list` shows instead of the upstream's. Linted like
	// the upstream's text (`mcpgate manifest lint`); invisible, bidi and
	// tag characters are refused.
	//
	// Default: the upstream's title.
	Title string `json:"title,omitempty" yaml:"title,omitempty"`
	// The description `tools/list` shows instead of the upstream's (a
	// toolset's `descriptions` still replace it for that toolset). Linted
	// like the upstream's text; invisible, bidi and tag characters are
	// refused.
	//
	// Default: the upstream's description.
	Description string `json:"description,omitempty" yaml:"description,omitempty"`
	// A narrowed inputSchema, as JSON text (a YAML block scalar): an
	// object schema (`"type": "object"`) whose properties are a subset of
	// the upstream's and whose required properties include the
	// upstream's, with tighter bounds where wanted. `tools/list` shows it
	// instead of the upstream's, and a call is checked against it and
	// against the upstream's; an argument outside it is refused
	// (`invalid_arguments`) before the call reaches the upstream. An
	// override that names a property the upstream's schema lacks, or
	// leaves out one it requires, makes the tool unusable (refused as
	// `tool_unusable`, a warning logged) until fixed.
	//
	// Default: the upstream's inputSchema.
	InputSchema string `json:"input_schema,omitempty" yaml:"input_schema,omitempty"`
}

// Reason explains one part of a decision, in the error contract's terms.
type Reason struct {
	// Code is a stable snake_case identifier, also a metric label value.
	Code string `json:"code"`
	// Cause says what is wrong, for the model.
	Cause string `json:"cause"`
	// Fix says what to do instead.
	Fix string `json:"fix,omitempty"`
	// NextTool names the tool to call next, with real handles, if any.
	NextTool string `json:"next_tool,omitempty"`
	// Rights, for missing_rights and insufficient_scope, are the rights
	// the caller lacks.
	Rights []string `json:"rights,omitempty"`
}

// Decision is the `decision` document a policy returns.
type Decision struct {
	// ID identifies this evaluation in logs and audit.
	ID    string `json:"id"`
	Allow bool   `json:"allow"`
	// Reasons explain a refusal (and may annotate an allow).
	Reasons []Reason `json:"reasons,omitempty"`
	// Effect is the effect class the policy assigns to a tools/call.
	Effect string `json:"effect,omitempty"`
	// Visible lists the names of list items the caller may see (phase "list").
	Visible []string `json:"visible,omitempty"`
	// Result says how the gateway shapes an allowed tools/call's result
	// before the client sees it: the paths to wrap as untrusted text, the
	// allowlist and the names to drop. nil when the decision has no
	// "result" member: the gateway then applies the tool's declaration
	// (untrusted_text, result_fields), so a policy written before this
	// field never turns shaping off; an empty ResultPaths shapes nothing
	// but the configured secret names.
	Result *ResultPaths `json:"result,omitempty"`
	// Confirm: the tools/call needs a person's confirmation before it is
	// forwarded (two-step: preview, then confirm_action). The default
	// policy sets it for notify, wake, alerting and delete, and for tools
	// declared moves_money or legally_binding.
	Confirm bool `json:"confirm,omitempty"`
	// Approval is where the person confirms when Confirm is set:
	// ApprovalClient (in the MCP client) or ApprovalOutOfBand (on the
	// approval page). For a tool declared moves_money or legally_binding
	// the engine forces ApprovalOutOfBand.
	Approval string `json:"approval,omitempty"`
	// Replay: replay protection applies (a repeat within the window
	// returns the first result, replayed: true). Default policy: silent
	// writes.
	Replay bool `json:"replay,omitempty"`
	// Buckets are the rate buckets the call takes one token from, each a
	// snake_case name, e.g. ["writes", "notify"] (the Bucket constants
	// name the default policy's).
	Buckets []string `json:"buckets,omitempty"`
}

// ResultPaths are the result shaping a decision asks for. Paths use the
// syntax of ToolDeclaration.UntrustedText (declarations.schema.json
// #/$defs/path: "notes", "items[*].comment", "[0].title").
type ResultPaths struct {
	// UntrustedText are the paths whose strings are wrapped as untrusted
	// third-party text.
	UntrustedText []string `json:"untrusted_text,omitempty"`
	// Fields is the allowlist of result paths an agent may see; empty
	// means not minimised.
	Fields []string `json:"fields,omitempty"`
	// Drop are further member names dropped at any depth of the result,
	// matched like policy.secret_names (case-insensitive, ignoring '_',
	// '-', '.' and spaces; '*' matches any run), e.g. ["email",
	// "*_token"].
	Drop []string `json:"drop,omitempty"`
}

// Approval modes (Decision.Approval): in the MCP client, or on the
// approval page, which steps that move money or are legally binding always
// use.
const (
	ApprovalClient    = "client"      // the MCP client asks the person (confirm_action, elicitation)
	ApprovalOutOfBand = "out_of_band" // a person approves on mcpgate's approval page
)

// Rate buckets the default policy names (Decision.Buckets), one set per
// effect class.
const (
	BucketReads          = "reads"
	BucketExpensiveReads = "expensive_reads"
	BucketWrites         = "writes"
	BucketNotify         = "notify"
	BucketWake           = "wake"
)

// Reason codes produced by mcpgate itself (policies add their own).
const (
	// CodeUndefinedDecision: the policy produced no decision document.
	CodeUndefinedDecision = "undefined_decision"
	// CodeInvalidDecision: the decision document has the wrong shape.
	CodeInvalidDecision = "invalid_decision"
	// CodePolicyError: evaluation failed (e.g. a runtime error in Rego).
	CodePolicyError = "policy_error"
	// CodeInvalidInput: the Input could not be turned into a policy input
	// (e.g. Arguments is not valid JSON), or the policy rejected its shape.
	CodeInvalidInput = "invalid_input"
)
