# METADATA
# title: mcpgate default policy
# description: |
#   Decides on every client message (phase "request") and chooses the visible
#   items of every list result (phase "list"). mcpgate evaluates
#   data.mcpgate.decision; its shape is policy/decision.schema.json and the
#   input's is policy/input.schema.json.
#
#   Defaults, all failing closed:
#   - only the MCP methods listed in _request_methods and
#     _notification_methods are allowed (responses a client sends to server
#     requests are not evaluated);
#   - a tool nobody declared is neither listed nor callable;
#   - a declared tool marked hidden is neither listed nor callable;
#   - an authenticated caller must hold every right a tool declares, for
#     the tool to be listed and to be called. Until authentication exists
#     (input.principal.authenticated is false) the rights check is skipped:
#     the caller is the gateway's operator, and declaration still gates.
#
#   Visibility is one rule (_tool_refusals) shared by both phases, so a tool
#   missing from tools/list is always refused on tools/call, with the reason.
package mcpgate

# METADATA
# title: Known client requests
# description: JSON-RPC requests a client may send (MCP up to 2026-07-28).
_request_methods := {
	"initialize",
	"ping",
	"server/discover",
	"subscriptions/listen",
	"tools/list",
	"tools/call",
	"prompts/list",
	"prompts/get",
	"resources/list",
	"resources/templates/list",
	"resources/read",
	"resources/subscribe",
	"resources/unsubscribe",
	"completion/complete",
	"logging/setLevel",
	"tasks/get",
	"tasks/list",
	"tasks/cancel",
	"tasks/result",
}

# METADATA
# title: Known client notifications
_notification_methods := {
	"notifications/initialized",
	"notifications/cancelled",
	"notifications/progress",
	"notifications/roots/list_changed",
	"notifications/tasks/status",
}

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

decision := {"allow": false, "reasons": [_reason_invalid_phase]} if not _known_phase

_known_phase if input.phase in {"request", "list"}

# --- phase "request" ---------------------------------------------------------

_request_decision := object.union(
	{"allow": count(_deny) == 0, "reasons": [r | some r in _deny]},
	_effect,
)

# METADATA
# title: Effect class of a tools/call
# description: The declared effect class, only for a declared tool with a known class.
_effect := {"effect": input.tool.effect} if {
	_is_tool_call
	input.tool.declared == true
	input.tool.effect in _effects
} else := {}

_method := object.get(input, ["message", "method"], "")

_kind := object.get(input, ["message", "kind"], "")

_is_tool_call if {
	_method == "tools/call"
	_kind == "request"
	_message_has("name")
}

_message_has(field) if {
	is_string(input.message[field])
	input.message[field] != ""
}

# METADATA
# title: Reasons to refuse a client message
# scope: document
_deny contains _reason_method_not_allowed if {
	not _method in _request_methods
	not _method in _notification_methods
}

_deny contains _reason_wrong_kind("request") if {
	_method in _request_methods
	_kind != "request"
}

_deny contains _reason_wrong_kind("notification") if {
	_method in _notification_methods
	_kind != "notification"
}

_deny contains _reason_missing_param("name", "tools/list") if {
	_method == "tools/call"
	not _message_has("name")
}

_deny contains _reason_missing_param("name", "prompts/list") if {
	_method == "prompts/get"
	not _message_has("name")
}

_deny contains _reason_missing_param("uri", "resources/list") if {
	_method in {"resources/read", "resources/subscribe", "resources/unsubscribe"}
	not _message_has("uri")
}

_deny contains _reason_arguments_not_object if {
	_method in {"tools/call", "prompts/get"}
	"arguments" in object.keys(input.message)
	not is_object(input.message.arguments)
}

_deny contains reason if {
	_is_tool_call
	some reason in _tool_refusals(_called_tool)
}

# METADATA
# title: The tool a tools/call names
# description: Its declaration from input.tool; a missing input.tool counts as undeclared.
_called_tool := object.get(input, "tool", {"name": input.message.name, "declared": false})

# --- visibility: one rule for both phases -----------------------------------

# METADATA
# title: Why a tool is hidden from the caller
# description: |
#   The set of reasons the caller may neither see nor call tool; empty means
#   visible. tools/list shows a tool exactly when this set is empty, and
#   tools/call refuses with these reasons.
_tool_refusals(tool) := ((_refusals_undeclared(tool) | _refusals_declaration(tool)) | _refusals_hidden(tool)) | _refusals_rights(tool)

_tool_visible(tool) if count(_tool_refusals(tool)) == 0

_refusals_undeclared(tool) := {_reason_tool_not_declared(tool.name)} if {
	not tool.declared == true
} else := set()

_refusals_declaration(tool) := {_reason_invalid_tool_declaration(tool.name)} if {
	tool.declared == true
	not object.get(tool, "effect", "") in _effects
} else := set()

_refusals_hidden(tool) := {_reason_tool_hidden(tool.name)} if {
	tool.declared == true
	tool.hidden == true
} else := set()

# METADATA
# title: Rights
# description: |
#   An authenticated principal must hold every right the tool declares.
#   Unauthenticated callers skip this check until authentication ships.
_refusals_rights(tool) := {_reason_missing_rights(tool.name, missing)} if {
	tool.declared == true
	input.principal.authenticated == true
	missing := {r | some r in object.get(tool, "rights", [])} - {r | some r in object.get(input.principal, "rights", [])}
	count(missing) > 0
} else := set()

# --- phase "list" ------------------------------------------------------------

_list_decision := {
	"allow": true,
	"visible": [item.name | some item in object.get(input, "items", []); _item_visible(item)],
} if {
	_method in _list_methods
}

_list_decision := {"allow": false, "visible": [], "reasons": [_reason_method_not_allowed]} if {
	not _method in _list_methods
}

# METADATA
# title: Visible list items
# description: Tools by the visibility rule; prompts and resources are visible by default.
_item_visible(item) if {
	_method == "tools/list"
	_tool_visible(object.get(item, "tool", {"name": item.name, "declared": false}))
}

_item_visible(_) if _method != "tools/list"

# --- reasons -----------------------------------------------------------------

_reason_method_not_allowed := {
	"code": "method_not_allowed",
	"cause": sprintf("Method %q is not allowed on this server.", [_method]),
	"fix": "Use one of the MCP methods this server supports, such as tools/list and tools/call.",
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
}

_reason_invalid_phase := {
	"code": "invalid_input",
	"cause": "The gateway sent its policy an input it does not understand.",
	"fix": "Retry later; if it persists, report it to the server's administrators.",
}
