# METADATA
# title: mcpgate default policy
# description: |
#   Decides on every client message (phase "request") and chooses the visible
#   items of every list result (phase "list"). mcpgate evaluates
#   data.mcpgate.decision; its shape is policy/decision.schema.json and the
#   input's is policy/input.schema.json.
#
#   Defaults, all failing closed:
#   - only the MCP methods listed in _methods are allowed, each as the
#     kind (request or notification) it is listed with (responses a client
#     sends to server requests are not evaluated);
#   - a tool nobody declared is neither listed nor callable;
#   - a declared tool marked hidden is neither listed nor callable;
#   - an authenticated caller's effective rights (input.principal.rights:
#     the credential's rights ∩ the person's live rights) must hold every
#     right a tool declares, for the tool to be listed and to be called.
#     A right the OAuth access token's scopes lack
#     (input.principal.credential_kind "oauth", token_rights) is the
#     reason insufficient_scope: mcpgate answers HTTP 403 so the client
#     can re-authorise. A right the token carries but the person no longer
#     holds (live_rights), or any shortfall of a gateway token, is
#     missing_rights: a tool error, since re-authorising cannot fix it.
#     Both reasons list the missing rights.
#     Without authentication (input.principal.authenticated false: the
#     gateway runs with no auth section) the rights check is skipped: the
#     caller is the gateway's operator, and declaration still gates.
#
#   Visibility is one rule (_tool_visible) shared by both phases, so a tool
#   missing from tools/list is always refused on tools/call, with the reason.
#
#   Structure: _allowed decides, as positive conditions (an undefined part of
#   the input makes it undefined: a refusal). _deny only explains refusals,
#   for the model, and is evaluated only for them. Beware `not f(x)` with x
#   undefined: it is undefined, not true; hence _method, _kind and
#   _called_tool are always defined.
package mcpgate

# METADATA
# title: Known client methods
# description: |
#   The JSON-RPC methods a client may send (MCP up to 2026-07-28), each with
#   the kind it must be sent as. Responses a client sends to server requests
#   (sampling, elicitation, roots/list) are not evaluated.
_methods := {
	"initialize": "request",
	"ping": "request",
	"server/discover": "request",
	"subscriptions/listen": "request",
	"tools/list": "request",
	"tools/call": "request",
	"prompts/list": "request",
	"prompts/get": "request",
	"resources/list": "request",
	"resources/templates/list": "request",
	"resources/read": "request",
	"resources/subscribe": "request",
	"resources/unsubscribe": "request",
	"completion/complete": "request",
	"logging/setLevel": "request",
	"tasks/get": "request",
	"tasks/list": "request",
	"tasks/cancel": "request",
	"tasks/result": "request",
	"notifications/initialized": "notification",
	"notifications/cancelled": "notification",
	"notifications/progress": "notification",
	"notifications/roots/list_changed": "notification",
	"notifications/tasks/status": "notification",
}

# METADATA
# title: Required params
# description: method → [the param it needs, the list method that names valid values].
_required_params := {
	"tools/call": ["name", "tools/list"],
	"prompts/get": ["name", "prompts/list"],
	"resources/read": ["uri", "resources/list"],
	"resources/subscribe": ["uri", "resources/list"],
	"resources/unsubscribe": ["uri", "resources/list"],
}

# METADATA
# title: Methods with arguments
_argument_methods := {"tools/call", "prompts/get"}

# METADATA
# title: List methods
# description: Methods whose results are filtered in phase "list".
_list_methods := {"tools/list", "prompts/list", "resources/list", "resources/templates/list"}

# METADATA
# title: Effect classes
# description: The effect classes a tool declaration may name (policy.Effects).
_effects := {"read", "silent_write", "notify", "wake", "alerting", "delete"}

# METADATA
# title: decision
# description: |
#   The document mcpgate reads: allow, reasons (code, cause, fix,
#   next_tool), effect (tools/call) and visible (phase "list").
# scope: document
# entrypoint: true
decision := _request_decision if input.phase == "request"

decision := _list_decision if input.phase == "list"

default decision := {"allow": false, "reasons": [{
	"code": "invalid_input",
	"cause": "The gateway sent its policy an input it does not understand.",
	"fix": "Retry later; if it persists, report it to the server's administrators.",
}]}

# --- phase "request" ---------------------------------------------------------

# METADATA
# title: Request decision
# description: Allow exactly when _allowed; a refusal carries every reason that applies.
_request_decision := {"allow": true, "reasons": [], "effect": input.tool.effect} if {
	_allowed
	input.message.method == "tools/call"
} else := {"allow": true, "reasons": []} if {
	_allowed
} else := object.union({"allow": false, "reasons": _reasons}, _declared_effect)

# METADATA
# title: Whether a client message may proceed
# description: |
#   A known method sent as its kind, with the params it needs (see
#   _required_params), arguments (if any) an object, and for tools/call a
#   tool visible to the caller. tools/call, the hot path, is spelled out
#   in one body: fewer rule evaluations per call.
# scope: document
_allowed if {
	input.message.method == "tools/call"
	input.message.kind == "request"
	is_string(input.message.name)
	input.message.name != ""
	is_object(object.get(input.message, "arguments", {}))
	not input.message.tenant_arguments
	not input.message.argument_problems
	_tool_visible(input.tool)
}

_allowed if {
	input.message.method != "tools/call"
	_methods[input.message.method] == input.message.kind
	_has_required_param
	not _bad_arguments
}

_has_required_param if not _required_params[input.message.method]

_has_required_param if {
	[param, _] := _required_params[input.message.method]
	_has_param(param)
}

_has_param(param) if {
	value := input.message[param]
	is_string(value)
	value != ""
}

_bad_arguments if {
	_argument_methods[input.message.method]
	arguments := input.message.arguments
	not is_object(arguments)
}

# The effect class of a refused tools/call, when its declaration names a
# known one (for metrics and audit of refusals).
_declared_effect := {"effect": input.tool.effect} if {
	input.message.method == "tools/call"
	input.tool.declared == true
	_effects[input.tool.effect]
} else := {}

_reasons := [r | some r in _deny] if {
	count(_deny) > 0
} else := [_reason_not_allowed]

# _method and _kind are always defined, for use under `not`: with
# input.message.method missing, `not _methods[input.message.method]` would
# be undefined rather than true.
default _method := ""

_method := input.message.method

default _kind := ""

_kind := input.message.kind

# METADATA
# title: Reasons to refuse a client message
# description: Explanations of a refusal, for the model; they never decide.
# scope: document
_deny contains _reason_method_not_allowed if not _methods[_method]

_deny contains _reason_wrong_kind(kind) if {
	kind := _methods[_method]
	_kind != kind
}

_deny contains _reason_missing_param(param, list_method) if {
	[param, list_method] := _required_params[_method]
	not _has_param(param)
}

_deny contains _reason_arguments_not_object if _bad_arguments

_deny contains _reason_tenant_arguments(names) if {
	_method == "tools/call"
	names := _tenant_arguments
	count(names) > 0
}

# The tenant-like arguments of a tools/call, as the gateway found them
# (input.message.tenant_arguments: tenant, tenant_id, workspace_id, org_id
# and the configured policy.tenant_arguments, case-insensitive). The tenant
# comes from the verified credential, never from a tool argument (seed
# 002, tenant binding), so such a call is refused with the reason.
_tenant_arguments := {n | some n in input.message.tenant_arguments}

_deny contains _reason_invalid_arguments(input.message.argument_problems) if {
	_method == "tools/call"
	count(input.message.argument_problems) > 0
}

_deny contains reason if {
	_method == "tools/call"
	_has_param("name")
	not _tool_visible(_called_tool)
	some reason in _tool_refusals(_called_tool)
}

# input.tool, or an undeclared stand-in when it is missing (defined, for
# use under `not`).
_called_tool := object.get(input, "tool", {"name": input.message.name, "declared": false})

# --- visibility: one rule for both phases -----------------------------------

# METADATA
# title: Tool visibility
# description: |
#   THE visibility rule: tools/list shows a tool exactly when it holds, and
#   tools/call is allowed only when it holds. A tool is visible when it is
#   declared with a known effect class, not hidden, and (for an
#   authenticated principal) every right it declares is held. A missing
#   tool is not visible.
_tool_visible(tool) if {
	tool.declared == true
	_effects[tool.effect]
	not tool.hidden == true
	not _lacks_rights(tool)
	not _catalog_blocks(tool)
}

# METADATA
# title: Catalog
# description: |
#   With mcpgate's catalog on (input.tool.catalog present), a tool must be
#   listed by the upstream now and approved: not changed since it was
#   pinned, not an unpinned newcomer (rug-pull protection).
_catalog_blocks(tool) if {
	tool.catalog
	not tool.catalog.listed == true
}

_catalog_blocks(tool) if {
	tool.catalog.listed == true
	not tool.catalog.state == "approved"
}

# METADATA
# title: Rights
# description: |
#   An authenticated principal must hold every right the tool declares.
#   Unauthenticated callers skip this check until authentication ships.
_lacks_rights(tool) if {
	input.principal.authenticated == true
	held := object.get(input.principal, "rights", [])
	some right in tool.rights
	not right in held
}

# METADATA
# title: Why a tool is not visible
# description: |
#   Explains a refusal of _tool_visible, for the model. Never empty:
#   tool_hidden is the fallback.
_tool_refusals(tool) := reasons if {
	reasons := (((_refusals_undeclared(tool) | _refusals_declaration(tool)) | _refusals_hidden(tool)) | _refusals_rights(tool)) | _refusals_catalog(tool)
	count(reasons) > 0
} else := {_reason_tool_hidden(tool.name)}

_refusals_undeclared(tool) := {_reason_tool_not_declared(tool.name)} if {
	not tool.declared == true
} else := set()

_refusals_declaration(tool) := {_reason_invalid_tool_declaration(tool.name)} if {
	tool.declared == true
	not _effects[object.get(tool, "effect", "")]
} else := set()

_refusals_hidden(tool) := {_reason_tool_hidden(tool.name)} if {
	tool.declared == true
	tool.hidden == true
} else := set()

_refusals_catalog(tool) := {_reason_tool_not_listed(tool.name)} if {
	tool.catalog
	not tool.catalog.listed == true
} else := {_reason_tool_changed(tool.name)} if {
	tool.catalog.state == "changed"
} else := {_reason_tool_unusable(tool.name)} if {
	tool.catalog.state == "unusable"
} else := {_reason_tool_not_approved(tool.name)} if {
	tool.catalog.listed == true
	not tool.catalog.state == "approved"
} else := set()

_refusals_rights(tool) := _refusals_scope(tool) | _refusals_live(tool) if {
	tool.declared == true
	input.principal.authenticated == true
} else := set()

# The rights a tool declares that the credential itself lacks: for an
# OAuth token, its scopes (the client can ask for more: insufficient_scope).
_refusals_scope(tool) := {_reason_insufficient_scope(tool.name, sort(missing))} if {
	_credential_kind == "oauth"
	missing := _needed(tool) - _token_rights
	count(missing) > 0
} else := set()

# The rights a tool declares that the effective rights lack, beyond any
# scope shortfall: the person's live rights no longer hold them, or (for a
# gateway token) the token was never granted them. A tool error.
_refusals_live(tool) := {_reason_missing_rights(tool.name, sort(missing))} if {
	_credential_kind == "oauth"
	missing := (_needed(tool) & _token_rights) - _held
	count(missing) > 0
} else := {_reason_missing_rights(tool.name, sort(missing))} if {
	_credential_kind != "oauth"
	missing := _needed(tool) - _held
	count(missing) > 0
} else := set()

default _credential_kind := ""

_credential_kind := input.principal.credential_kind

_needed(tool) := {r | some r in object.get(tool, "rights", [])}

# The effective rights.
_held := {r | some r in object.get(input.principal, "rights", [])}

# The credential's own rights; inputs without token_rights (no live rights
# in play) carry them in rights.
_token_rights := {r | some r in input.principal.token_rights} if {
	input.principal.token_rights
} else := _held

# --- phase "list" ------------------------------------------------------------

# METADATA
# title: List decision
# description: Tools by the visibility rule; prompts and resources are visible by default.
_list_decision := {
	"allow": true,
	"visible": [item.name | some item in input.items; _tool_visible(item.tool)],
} if {
	input.message.method == "tools/list"
} else := {
	"allow": true,
	"visible": [item.name | some item in input.items],
} if {
	_list_methods[input.message.method]
} else := {"allow": false, "visible": [], "reasons": [_reason_method_not_allowed]}

# --- reasons -----------------------------------------------------------------

_reason_method_not_allowed := {
	"code": "method_not_allowed",
	"cause": sprintf("Method %q is not allowed on this server.", [_method]),
	"fix": "Use one of the MCP methods this server supports, such as tools/list and tools/call.",
}

# Fallback: a refusal _deny cannot explain (e.g. after a policy edit that
# adds a condition to _allowed without a reason).
_reason_not_allowed := {
	"code": "request_not_allowed",
	"cause": sprintf("The server's policy does not allow this %s request.", [_method]),
	"fix": "Call tools/list to see what you can do.",
	"next_tool": "tools/list",
}

_reason_wrong_kind(want) := {
	"code": "malformed_message",
	"cause": sprintf("Method %q must be sent as a %s.", [_method, want]),
	"fix": sprintf("Send %q as a JSON-RPC %s.", [_method, want]),
}

_reason_missing_param(param, list_method) := {
	"code": "malformed_message",
	"cause": sprintf("%s needs params.%s.", [_method, param]),
	"fix": sprintf("Call %s with params.%s set to an entry of %s.", [_method, param, list_method]),
	"next_tool": list_method,
}

_reason_tenant_arguments(names) := {
	"code": "tenant_argument",
	"cause": sprintf("The argument %s would choose a tenant; the tenant comes from your credential, not from tool arguments.", [concat(", ", sort(names))]),
	"fix": "Call the tool again without it.",
	"next_tool": input.message.name,
}

_reason_arguments_not_object := {
	"code": "malformed_message",
	"cause": sprintf("The arguments of %s must be a JSON object.", [_method]),
	"fix": "Pass params.arguments as an object of named arguments.",
}

_reason_tool_not_declared(name) := {
	"code": "tool_not_declared",
	"cause": sprintf("Tool %q is not available on this server.", [name]),
	"fix": "Call tools/list to see the tools you can use.",
	"next_tool": "tools/list",
}

_reason_invalid_tool_declaration(name) := {
	"code": "invalid_tool_declaration",
	"cause": sprintf("Tool %q is not correctly configured on this server.", [name]),
	"fix": "Use another tool from tools/list, or ask the server's administrators to fix the tool's declaration.",
	"next_tool": "tools/list",
}

_reason_invalid_arguments(problems) := {
	"code": "invalid_arguments",
	"cause": sprintf("The arguments of %q do not fit the tool: %s", [input.message.name, concat(" ", [p.message | some p in problems])]),
	"fix": sprintf("Call %s again with the arguments corrected%s.", [input.message.name, _allowed_hint(problems)]),
	"next_tool": input.message.name,
}

# The tool's argument names, from a refused top-level argument (the
# allowed lists of nested objects and enum values are not the tool's
# arguments).
_allowed_hint(problems) := sprintf(" (its arguments: %s)", [concat(", ", names)]) if {
	names := {a |
		some p in problems
		p.code == "unknown_argument"
		not contains(p.argument, ".")
		some a in object.get(p, "allowed", [])
	}
	count(names) > 0
} else := ""

_reason_tool_not_listed(name) := {
	"code": "tool_not_in_upstream",
	"cause": sprintf("Tool %q is not offered by the server right now.", [name]),
	"fix": "Call tools/list to see the tools you can use.",
	"next_tool": "tools/list",
}

_reason_tool_changed(name) := {
	"code": "tool_changed",
	"cause": sprintf("Tool %q changed since an administrator approved it and is unavailable until it is approved again.", [name]),
	"fix": "Use another tool from tools/list, or ask the server's administrators to review and approve the change.",
	"next_tool": "tools/list",
}

_reason_tool_unusable(name) := {
	"code": "tool_unusable",
	"cause": sprintf("Tool %q cannot be used through this server: the gateway cannot check its arguments against the tool's input schema.", [name]),
	"fix": "Use another tool from tools/list, or ask the server's administrators to fix the tool's input schema.",
	"next_tool": "tools/list",
}

_reason_tool_not_approved(name) := {
	"code": "tool_not_approved",
	"cause": sprintf("Tool %q is new on this server and not yet approved by an administrator.", [name]),
	"fix": "Use another tool from tools/list, or ask the server's administrators to approve it.",
	"next_tool": "tools/list",
}

_reason_tool_hidden(name) := {
	"code": "tool_hidden",
	"cause": sprintf("Tool %q is hidden on this server.", [name]),
	"fix": "Call tools/list to see the tools you can use.",
	"next_tool": "tools/list",
}

_reason_missing_rights(name, missing) := {
	"code": "missing_rights",
	"cause": sprintf("Tool %q needs the rights %s, which you do not hold.", [name, concat(", ", [sprintf("%q", [r]) | some r in missing])]),
	"fix": "Ask an administrator of your organisation for these rights, or call tools/list to see the tools you can use.",
	"next_tool": "tools/list",
	"rights": missing,
}

_reason_insufficient_scope(name, missing) := {
	"code": "insufficient_scope",
	"cause": sprintf("Tool %q needs the scopes %s, which your access token does not carry.", [name, concat(", ", [sprintf("%q", [r]) | some r in missing])]),
	"fix": "Ask the authorization server for a token with these scopes, then call the tool again.",
	"rights": missing,
}
