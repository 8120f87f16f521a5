package policy

// Reason codes of the default policy (rego/mcpgate.rego). Policies may add
// their own; every code is snake_case and bounded, so it can be a metric
// label value.
const (
	// CodeMethodNotAllowed: the JSON-RPC method is not one the policy knows
	// (and, in phase "list", not a list method).
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeMalformedMessage: a known method sent as the wrong kind, or
	// without the params it needs (name, uri), or with non-object arguments.
	CodeMalformedMessage = "malformed_message"
	// CodeToolNotDeclared: tools/call names a tool nobody declared.
	CodeToolNotDeclared = "tool_not_declared"
	// CodeToolHidden: tools/call names a declared tool marked hidden.
	CodeToolHidden = "tool_hidden"
	// CodeMissingRights: an authenticated principal lacks a right the tool
	// declares, and re-authorising cannot fix it (not an OAuth token's
	// scopes). The reason's rights list the missing ones. A tools/call gets
	// a tool error.
	CodeMissingRights = "missing_rights"
	// CodeInsufficientScope: the OAuth token's scopes lack a right the tool
	// declares; the reason's rights list the missing ones. The client can
	// ask its authorization server for more, so mcpgate answers HTTP 403
	// with WWW-Authenticate: Bearer error="insufficient_scope" and the
	// scopes the tool needs (RFC 6750 section 3.1), not a tool error.
	CodeInsufficientScope = "insufficient_scope"
	// CodeInvalidToolDeclaration: the tool is declared with an effect class
	// the policy does not know.
	CodeInvalidToolDeclaration = "invalid_tool_declaration"
	// CodeRequestNotAllowed: the fallback for a refusal no other reason
	// explains (not produced by the default policy as shipped; its tests
	// check that).
	CodeRequestNotAllowed = "request_not_allowed"
)
