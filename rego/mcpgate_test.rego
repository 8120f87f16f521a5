# METADATA
# title: Tests of the mcpgate default policy
# description: Run with `go test ./rego/` or `opa test rego/ --ignore examples`.
package mcpgate_test

import data.mcpgate

# --- fixtures ----------------------------------------------------------------

_transport := {
	"kind": "proxy",
	"http_method": "POST",
	"path": "/mcp",
	"upstream": "crm",
	"protocol_version": "2026-07-28",
}

_anonymous := {"authenticated": false}

_alice := {"authenticated": true, "tenant": "acme", "subject": "alice", "rights": ["crm.read", "crm.write"]}

# An OAuth access token: its scopes are the rights.
_token := {
	"authenticated": true, "tenant": "acme", "subject": "svc-1", "rights": ["crm.read", "crm.write"],
	"credential_kind": "oauth", "issuer": "https://idp.example.com", "client_id": "agent",
	"connection": "oauth_0123456789abcdef0123456789abcdef",
}

_request(method) := {
	"version": "mcpgate.policy/v1",
	"phase": "request",
	"transport": _transport,
	"message": {"kind": "request", "method": method},
	"principal": _anonymous,
}

_notification(method) := object.union(_request(method), {"message": {"kind": "notification", "method": method}})

_call(tool, principal) := {
	"version": "mcpgate.policy/v1",
	"phase": "request",
	"transport": _transport,
	"message": {"kind": "request", "method": "tools/call", "name": tool.name, "arguments": {"id": 42}},
	"tool": tool,
	"principal": principal,
}

_list(method, items, principal) := {
	"version": "mcpgate.policy/v1",
	"phase": "list",
	"transport": _transport,
	"message": {"kind": "request", "method": method},
	"items": items,
	"principal": principal,
}

_search := {"name": "search", "declared": true, "effect": "read", "rights": ["crm.read"]}

_update := {"name": "update", "declared": true, "effect": "silent_write", "rights": ["crm.write"]}

_purge := {"name": "purge", "declared": true, "effect": "delete", "rights": ["crm.admin"]}

_retired := {"name": "retired", "declared": true, "effect": "read", "hidden": true}

_unknown := {"name": "unknown", "declared": false, "effect": ""}

_broken := {"name": "broken", "declared": true, "effect": "readonly"}

_codes(d) := {r.code | some r in d.reasons}

_allowed(inp) if {
	d := mcpgate.decision with input as inp
	d.allow == true
	count(d.reasons) == 0
}

_denied_with(inp, code) if {
	d := mcpgate.decision with input as inp
	d.allow == false
	code in _codes(d)
}

# --- methods -----------------------------------------------------------------

test_known_requests_allowed if {
	requests := {m | mcpgate._methods[m] == "request"}
	count(requests) == 19
	every method in requests - object.keys(mcpgate._required_params) {
		_allowed(_request(method))
	}
}

test_known_notifications_allowed if {
	notifications := {m | mcpgate._methods[m] == "notification"}
	count(notifications) == 5
	every method in notifications {
		_allowed(_notification(method))
	}
}

test_named_requests_allowed if {
	_allowed(object.union(_request("prompts/get"), {"message": {"name": "summary", "arguments": {"topic": "q3"}}}))
	every method in {"resources/read", "resources/subscribe", "resources/unsubscribe"} {
		_allowed(object.union(_request(method), {"message": {"uri": "file:///notes.txt"}}))
	}
}

test_unknown_method_denied if {
	_denied_with(_request("sampling/createMessage"), "method_not_allowed")
	_denied_with(_request("tools/delete"), "method_not_allowed")
	_denied_with(_request(""), "method_not_allowed")
	_denied_with(_notification("notifications/message"), "method_not_allowed")
}

test_missing_method_denied if {
	_denied_with(json.remove(_request("ping"), ["message/method"]), "method_not_allowed")
}

test_method_not_allowed_reason if {
	d := mcpgate.decision with input as _request("admin/shutdown")
	d == {"allow": false, "reasons": [{
		"code": "method_not_allowed",
		"cause": "Method \"admin/shutdown\" is not allowed on this server.",
		"fix": "Use one of the MCP methods this server supports, such as tools/list and tools/call.",
	}]}
}

test_wrong_kind_denied if {
	_denied_with(_notification("tools/list"), "malformed_message")
	_denied_with(_request("notifications/initialized"), "malformed_message")
	_denied_with(json.remove(_request("ping"), ["message/kind"]), "malformed_message")
}

test_missing_params_denied if {
	_denied_with(_request("tools/call"), "malformed_message")
	_denied_with(object.union(_request("tools/call"), {"message": {"name": ""}}), "malformed_message")
	_denied_with(_request("prompts/get"), "malformed_message")
	_denied_with(object.union(_request("prompts/get"), {"message": {"name": 7}}), "malformed_message")
	every method in {"resources/read", "resources/subscribe", "resources/unsubscribe"} {
		_denied_with(_request(method), "malformed_message")
	}
}

test_missing_name_reason_names_list_tool if {
	d := mcpgate.decision with input as _request("tools/call")
	d.reasons == [{
		"code": "malformed_message",
		"cause": "tools/call needs params.name.",
		"fix": "Call tools/call with params.name set to an entry of tools/list.",
		"next_tool": "tools/list",
	}]
	not "effect" in object.keys(d)
}

test_arguments_must_be_object if {
	_denied_with(json.patch(_call(_search, _anonymous), [{"op": "replace", "path": "/message/arguments", "value": [1, 2]}]), "malformed_message")
	_denied_with(object.union(_request("prompts/get"), {"message": {"name": "summary", "arguments": "x"}}), "malformed_message")
	_allowed(json.remove(_call(_search, _anonymous), ["message/arguments"]))
}

test_tenant_arguments_refused if {
	input_ := json.patch(_call(_search, _anonymous), [
		{"op": "add", "path": "/message/arguments/Tenant_ID", "value": "globex"},
		{"op": "add", "path": "/message/tenant_arguments", "value": ["Tenant_ID"]},
	])
	d := mcpgate.decision with input as input_
	not d.allow
	d.reasons[0].code == "tenant_argument"
	d.reasons[0].next_tool == "search"
	contains(d.reasons[0].cause, "Tenant_ID")
	_allowed(json.remove(input_, ["message/tenant_arguments"]))
}

# --- tools/call ----------------------------------------------------------------

test_declared_tool_allowed_with_effect if {
	d := mcpgate.decision with input as _call(_search, _anonymous)
	d == {"allow": true, "reasons": [], "effect": "read", "confirm": false, "replay": false, "buckets": ["reads"]}
}

test_effect_is_declared_class if {
	every tool in [_search, _update, _purge] {
		d := mcpgate.decision with input as _call(tool, _anonymous)
		d.effect == tool.effect
	}
}

test_undeclared_tool_denied if {
	d := mcpgate.decision with input as _call(_unknown, _anonymous)
	d == {"allow": false, "reasons": [{
		"code": "tool_not_declared",
		"cause": "Tool \"unknown\" is not available on this server: the gateway's operator has not declared what it does, and undeclared tools are refused.",
		"fix": "Call tools/list to see the tools you can use. If the user needs unknown, tell them to ask the gateway's operator to declare it in the gateway configuration, under the upstream \"crm\": `tools: {\"unknown\": {effect: <effect>}}`, where <effect> is what the tool really does: read, silent_write, notify, wake, alerting or delete; or to set `undeclared_tools: confirm` on that upstream so every call of an undeclared tool waits for a person's confirmation.",
		"next_tool": "tools/list",
	}]}
}

# A tool called by another name than its own (a virtual server's prefix,
# an exposed name): the agent reads the name it called; the operator's
# declaration key stays the tool's own.
test_undeclared_tool_called_as if {
	d := mcpgate.decision with input as _call(object.union(_unknown, {"called_as": "crm_unknown"}), _anonymous)
	r := d.reasons[0]
	r.code == "tool_not_declared"
	startswith(r.cause, "Tool \"crm_unknown\" is not available")
	contains(r.fix, "If the user needs crm_unknown,")
	contains(r.fix, "`tools: {\"unknown\": {effect: <effect>}}`")
}

test_hidden_tool_called_as if {
	d := mcpgate.decision with input as _call(object.union(_search, {"hidden": true, "called_as": "crm_search"}), _alice)
	some r in d.reasons
	r.code == "tool_hidden"
	contains(r.cause, "\"crm_search\"")
}

# An upstream with undeclared_tools: confirm: its undeclared tools are
# listed, and every call is the guarded class a person confirms.
_unknown_confirm := object.union(_unknown, {"undeclared": "confirm"})

test_undeclared_confirm_listed if {
	d := mcpgate.decision with input as _list("tools/list", [{"name": "unknown", "tool": _unknown_confirm}, {"name": "other", "tool": _unknown}], _anonymous)
	d.visible == ["unknown"]
}

test_undeclared_confirm_call_needs_confirmation if {
	d := mcpgate.decision with input as _call(_unknown_confirm, _anonymous)
	d == {"allow": true, "reasons": [], "effect": "delete", "confirm": true, "approval": "client", "replay": false, "buckets": ["writes"]}
}

test_undeclared_confirm_approval_follows_delete if {
	d := mcpgate.decision with input as _call(_unknown_confirm, _anonymous) with data.mcpgate.approval as {"delete": "out_of_band"}
	d.approval == "out_of_band"
	d.confirm == true
}

test_undeclared_confirm_outside_toolset if {
	inp := _call(_unknown_confirm, object.union(_alice, {"toolset": "support"}))
	d := mcpgate.decision with input as inp
	d.allow == false
	_codes(d) == {"tool_not_in_toolset"}
}

test_undeclared_confirm_not_listed_by_catalog if {
	inp := _call(object.union(_unknown_confirm, {"catalog": {"listed": false}}), _anonymous)
	d := mcpgate.decision with input as inp
	d.allow == false
	_codes(d) == {"tool_not_in_upstream"}
}

test_declared_tool_ignores_undeclared_member if {
	d := mcpgate.decision with input as _call(object.union(_search, {"undeclared": "confirm"}), _anonymous)
	d.effect == "read"
	d.confirm == false
}

test_missing_tool_input_fails_closed if {
	inp := json.remove(_call(_search, _anonymous), ["tool"])
	_denied_with(inp, "tool_not_declared")
	d := mcpgate.decision with input as inp
	not "effect" in object.keys(d)
}

test_declared_flag_must_be_true if {
	_denied_with(_call(json.remove(_search, ["declared"]), _anonymous), "tool_not_declared")
	_denied_with(_call(object.union(_search, {"declared": "true"}), _anonymous), "tool_not_declared")
}

test_invalid_declaration_denied if {
	d := mcpgate.decision with input as _call(_broken, _anonymous)
	d.allow == false
	_codes(d) == {"invalid_tool_declaration"}
	not "effect" in object.keys(d)
	_denied_with(_call(json.remove(_search, ["effect"]), _anonymous), "invalid_tool_declaration")
}

test_hidden_tool_denied if {
	d := mcpgate.decision with input as _call(_retired, _anonymous)
	d.allow == false
	d.reasons == [{
		"code": "tool_hidden",
		"cause": "Tool \"retired\" is hidden on this server.",
		"fix": "Call tools/list to see the tools you can use.",
		"next_tool": "tools/list",
	}]
}

test_rights_held_allowed if {
	_allowed(_call(_search, _alice))
	_allowed(_call(_update, _alice))
	_allowed(_call(object.union(_search, {"rights": []}), _alice))
	_allowed(_call(json.remove(_search, ["rights"]), _alice))
}

test_missing_rights_denied if {
	d := mcpgate.decision with input as _call(_purge, _alice)
	d.reasons == [{
		"code": "missing_rights",
		"cause": "Tool \"purge\" needs the rights \"crm.admin\", which you do not hold.",
		"fix": "Ask an administrator of your organisation for these rights, or call tools/list to see the tools you can use.",
		"next_tool": "tools/list",
		"rights": ["crm.admin"],
	}]
	d.allow == false
}

test_missing_rights_lists_every_missing_right if {
	tool := object.union(_purge, {"rights": ["crm.read", "crm.export", "crm.admin"]})
	d := mcpgate.decision with input as _call(tool, _alice)
	d.reasons[0].cause == "Tool \"purge\" needs the rights \"crm.admin\", \"crm.export\", which you do not hold."
	d.reasons[0].rights == ["crm.admin", "crm.export"]
}

test_token_scopes_shortfall_is_insufficient_scope if {
	d := mcpgate.decision with input as _call(object.union(_purge, {"rights": ["crm.read", "crm.admin", "crm.export"]}), _token)
	d.allow == false
	d.effect == "delete"
	d.reasons == [{
		"code": "insufficient_scope",
		"cause": "Tool \"purge\" needs the scopes \"crm.admin\", \"crm.export\", which your access token does not carry.",
		"fix": "Ask the authorization server for a token with these scopes, then call the tool again.",
		"rights": ["crm.admin", "crm.export"],
	}]
}

# An OAuth token whose scopes cover crm.admin, for a person whose live
# rights no longer include it: effective rights lack it.
_token_live := object.union(_token, {
	"token_rights": ["crm.read", "crm.write", "crm.admin"],
	"live_rights": ["crm.read", "crm.write"],
	"rights": ["crm.read", "crm.write"],
})

test_live_rights_shortfall_is_missing_rights_not_scope if {
	d := mcpgate.decision with input as _call(_purge, _token_live)
	d.allow == false
	d.reasons == [{
		"code": "missing_rights",
		"cause": "Tool \"purge\" needs the rights \"crm.admin\", which you do not hold.",
		"fix": "Ask an administrator of your organisation for these rights, or call tools/list to see the tools you can use.",
		"next_tool": "tools/list",
		"rights": ["crm.admin"],
	}]
}

test_scope_and_live_shortfalls_both_reported if {
	tool := object.union(_purge, {"rights": ["crm.admin", "crm.export"]})
	d := mcpgate.decision with input as _call(tool, _token_live)
	{[r.code, r.rights] | some r in d.reasons} == {["insufficient_scope", ["crm.export"]], ["missing_rights", ["crm.admin"]]}
}

test_live_rights_cover_the_tool if {
	_allowed(_call(_search, _token_live))
	_allowed(_call(_update, _token_live))
}

test_list_filters_by_effective_rights if {
	d := mcpgate.decision with input as _list("tools/list", _tool_items, _token_live)
	not "purge" in d.visible
	"search" in d.visible
}

# A gateway-issued MCP token: every shortfall is a tool error.
_gateway_token := {
	"authenticated": true, "tenant": "acme", "subject": "alice", "credential_kind": "gateway_token",
	"credential_id": "tok_0123", "connection": "tok_0123",
	"token_rights": ["crm.read", "crm.admin"], "live_rights": ["crm.read"], "rights": ["crm.read"],
}

test_gateway_token_shortfall_is_missing_rights if {
	d := mcpgate.decision with input as _call(_purge, _gateway_token)
	_codes(d) == {"missing_rights"}
	d.reasons[0].rights == ["crm.admin"]
	d2 := mcpgate.decision with input as _call(_update, _gateway_token)
	_codes(d2) == {"missing_rights"}
	_allowed(_call(_search, _gateway_token))
}

test_token_scopes_cover_the_tool if {
	_allowed(_call(_search, _token))
	_allowed(_call(_update, _token))
}

test_token_without_scopes_denied if {
	_denied_with(_call(_search, json.remove(_token, ["rights"])), "insufficient_scope")
}

test_token_hidden_and_scope_both_reported if {
	d := mcpgate.decision with input as _call(object.union(_retired, {"rights": ["crm.admin"]}), _token)
	_codes(d) == {"tool_hidden", "insufficient_scope"}
}

test_list_filters_by_token_scopes if {
	d := mcpgate.decision with input as _list("tools/list", _tool_items, object.union(_token, {"rights": ["crm.read"]}))
	d.visible == ["search"]
}

test_authenticated_without_rights_denied if {
	_denied_with(_call(_search, json.remove(_alice, ["rights"])), "missing_rights")
}

test_unauthenticated_skips_rights if {
	_allowed(_call(_purge, _anonymous))
	_allowed(_call(_purge, json.remove(_anonymous, ["authenticated"])))
}

test_several_reasons_reported if {
	d := mcpgate.decision with input as _call(object.union(_retired, {"rights": ["crm.admin"]}), _alice)
	_codes(d) == {"tool_hidden", "missing_rights"}
}

# --- phase "list" --------------------------------------------------------------

_tool_items := [{"name": t.name, "tool": t} | some t in [_search, _update, _purge, _retired, _unknown, _broken]]

test_list_shows_declared_tools_in_order if {
	d := mcpgate.decision with input as _list("tools/list", _tool_items, _anonymous)
	d == {"allow": true, "visible": ["search", "update", "purge"]}
}

test_list_filters_by_rights if {
	d := mcpgate.decision with input as _list("tools/list", _tool_items, _alice)
	d.visible == ["search", "update"]
}

test_list_item_without_tool_hidden if {
	d := mcpgate.decision with input as _list("tools/list", [{"name": "search"}], _anonymous)
	d.visible == []
}

test_list_prompts_and_resources_visible if {
	items := [{"name": "summary"}, {"name": "file:///a.txt"}]
	every method in {"prompts/list", "resources/list", "resources/templates/list"} {
		d := mcpgate.decision with input as _list(method, items, _alice)
		d == {"allow": true, "visible": ["summary", "file:///a.txt"]}
	}
}

test_list_without_items if {
	d := mcpgate.decision with input as json.remove(_list("tools/list", [], _anonymous), ["items"])
	d == {"allow": true, "visible": []}
}

test_list_unknown_method_denied if {
	d := mcpgate.decision with input as _list("tasks/list", [{"name": "t1"}], _anonymous)
	d.allow == false
	d.visible == []
	_codes(d) == {"method_not_allowed"}
}

# One visibility rule: a tool is listed exactly when a call to it is allowed.
test_list_and_call_agree if {
	every principal in [_anonymous, _alice] {
		d := mcpgate.decision with input as _list("tools/list", _tool_items, principal)
		every item in _tool_items {
			c := mcpgate.decision with input as _call(item.tool, principal)
			c.allow == (item.name in d.visible)
		}
	}
}

# --- phase -----------------------------------------------------------------------

test_unknown_phase_denied if {
	_denied_with(object.union(_request("ping"), {"phase": "response"}), "invalid_input")
	_denied_with(json.remove(_request("ping"), ["phase"]), "invalid_input")
}

# --- allow and reasons agree ----------------------------------------------------

_fixtures := [
	_request("ping"),
	_request("tools/list"),
	_request("admin/shutdown"),
	_request("notifications/initialized"),
	_notification("notifications/progress"),
	_notification("ping"),
	_request("tools/call"),
	_request("prompts/get"),
	object.union(_request("prompts/get"), {"message": {"name": "summary", "arguments": 1}}),
	_request("resources/read"),
	object.union(_request("resources/read"), {"message": {"uri": "file:///a"}}),
	json.remove(_request("ping"), ["message"]),
	json.remove(_call(_search, _alice), ["tool"]),
	json.patch(_call(_search, _alice), [{"op": "replace", "path": "/message/arguments", "value": "x"}]),
	json.patch(_call(_search, _alice), [{"op": "replace", "path": "/message/kind", "value": "notification"}]),
	_call(_search, _alice),
	_call(_update, _alice),
	_call(_purge, _alice),
	_call(_purge, _anonymous),
	_call(_retired, _alice),
	_call(_unknown, _alice),
	_call(_broken, _alice),
]

# Allowed exactly when no reason applies; a refusal is always explained by
# a specific reason, never the fallback.
test_allow_iff_no_reasons if {
	every inp in _fixtures {
		d := mcpgate.decision with input as inp
		reasons := mcpgate._deny with input as inp
		d.allow == (count(reasons) == 0)
		not "request_not_allowed" in _codes(d)
	}
}

test_unexplained_refusal_falls_back if {
	d := mcpgate.decision with input as _call(_unknown, _alice) with mcpgate._deny as set()
	d.allow == false
	d.reasons == [{
		"code": "request_not_allowed",
		"cause": "The server's policy does not allow this tools/call request.",
		"fix": "Call tools/list to see what you can do.",
		"next_tool": "tools/list",
	}]
}

test_refused_call_keeps_declared_effect if {
	d := mcpgate.decision with input as _call(_purge, _alice)
	d.effect == "delete"
	d2 := mcpgate.decision with input as _call(_unknown, _alice)
	not "effect" in object.keys(d2)
}

# --- catalog and arguments ----------------------------------------------------

_listed(tool, state) := object.union(tool, {"catalog": {"listed": true, "state": state}})

test_catalog_approved_tool_allowed if {
	_allowed(_call(_listed(_search, "approved"), _alice))
}

test_catalog_changed_tool_refused if {
	_denied_with(_call(_listed(_search, "changed"), _alice), "tool_changed")
	d := mcpgate.decision with input as _list("tools/list", [{"name": "search", "tool": _listed(_search, "changed")}], _alice)
	d.visible == []
}

test_catalog_unpinned_tool_refused if {
	_denied_with(_call(_listed(_search, "unpinned"), _alice), "tool_not_approved")
}

test_catalog_unlisted_tool_refused if {
	_denied_with(_call(object.union(_search, {"catalog": {"listed": false}}), _alice), "tool_not_in_upstream")
}

test_argument_problems_refused_with_the_allowed_names if {
	problems := [
		{"argument": "limitt", "code": "unknown_argument", "message": "Argument \"limitt\" is not accepted by this tool.", "allowed": ["query", "limit"]},
		{"argument": "query", "code": "wrong_type", "message": "Argument \"query\" must be a string.", "expected": "string"},
	]
	call := _call(_search, _alice)
	inp := object.union(call, {"message": object.union(call.message, {"argument_problems": problems})})
	d := mcpgate.decision with input as inp
	d.allow == false
	[r] := d.reasons
	r.code == "invalid_arguments"
	r.next_tool == "search"
	contains(r.cause, "\"limitt\" is not accepted")
	contains(r.cause, "\"query\" must be a string")
	contains(r.fix, "its arguments: limit, query")
}

test_catalog_unusable_tool_refused if {
	_denied_with(_call(_listed(_search, "unusable"), _alice), "tool_unusable")
}

test_allowed_hint_only_from_top_level_unknown_arguments if {
	problems := [
		{"argument": "status", "code": "invalid_value", "message": "Argument \"status\" must be one of open, closed.", "allowed": ["open", "closed"]},
		{"argument": "filter.evil", "code": "unknown_argument", "message": "Argument \"filter.evil\" is not accepted.", "allowed": ["kind"]},
	]
	call := _call(_search, _alice)
	inp := object.union(call, {"message": object.union(call.message, {"argument_problems": problems})})
	d := mcpgate.decision with input as inp
	[r] := d.reasons
	not contains(r.fix, "its arguments")
}

# --- an allowed tools/call: shaping and write safety ------------------------

_tool(effect, extra) := object.union({"name": sprintf("t_%s", [effect]), "declared": true, "effect": effect}, extra)

test_write_safety_per_effect_class if {
	every effect, want in {
		"read": {"confirm": false, "replay": false, "buckets": ["reads"]},
		"silent_write": {"confirm": false, "replay": true, "buckets": ["writes"]},
		"delete": {"confirm": true, "replay": false, "buckets": ["writes"], "approval": "client"},
		"notify": {"confirm": true, "replay": false, "buckets": ["writes", "notify"], "approval": "client"},
		"wake": {"confirm": true, "replay": false, "buckets": ["writes", "wake"], "approval": "client"},
		"alerting": {"confirm": true, "replay": false, "buckets": ["writes"], "approval": "client"},
	} {
		d := mcpgate.decision with input as _call(_tool(effect, {}), _anonymous)
		d == object.union({"allow": true, "reasons": [], "effect": effect}, want)
	}
}

test_expensive_read_takes_its_own_bucket if {
	d := mcpgate.decision with input as _call(_tool("read", {"expensive": true}), _anonymous)
	d.buckets == ["expensive_reads"]
	not d.confirm
}

test_money_and_legal_steps_are_confirmed_out_of_band if {
	every extra in [{"moves_money": true}, {"legally_binding": true}] {
		every effect in ["read", "silent_write", "notify", "delete"] {
			d := mcpgate.decision with input as _call(_tool(effect, extra), _anonymous)
			d.allow
			d.confirm == true
			d.approval == "out_of_band"
		}
	}
}

test_approval_per_effect_and_tenant if {
	conf := {"approval": {"wake": "out_of_band", "notify": "client"}, "tenants": {"acme": {"approval": {"notify": "out_of_band"}}}}
	bob := object.union(_alice, {"tenant": "globex"})

	# deployment-wide: wake out of band, notify in the client
	wake := mcpgate.decision with input as _call(_tool("wake", {}), bob) with data.mcpgate.approval as conf.approval with data.mcpgate.tenants as conf.tenants
	wake.approval == "out_of_band"
	globex := mcpgate.decision with input as _call(_tool("notify", {}), bob) with data.mcpgate.approval as conf.approval with data.mcpgate.tenants as conf.tenants
	globex.approval == "client"

	# the tenant's own choice wins over the deployment's
	acme := mcpgate.decision with input as _call(_tool("notify", {}), _alice) with data.mcpgate.approval as conf.approval with data.mcpgate.tenants as conf.tenants
	acme.approval == "out_of_band"

	# ... but never over moves_money
	money := mcpgate.decision with input as _call(_tool("notify", {"moves_money": true}), bob) with data.mcpgate.approval as {"notify": "client"}
	money.approval == "out_of_band"

	# no approval without confirmation
	read := mcpgate.decision with input as _call(_tool("read", {}), _alice) with data.mcpgate.approval as {"read": "out_of_band"}
	not read.approval
}

test_result_paths_copied_from_the_declaration if {
	both := mcpgate.decision with input as _call(_tool("read", {"untrusted_text": ["notes"], "result_fields": ["id", "notes"]}), _anonymous)
	both.result == {"untrusted_text": ["notes"], "fields": ["id", "notes"]}
	wrap := mcpgate.decision with input as _call(_tool("read", {"untrusted_text": ["items[*].body"]}), _anonymous)
	wrap.result == {"untrusted_text": ["items[*].body"]}
	keep := mcpgate.decision with input as _call(_tool("silent_write", {"result_fields": ["id"]}), _anonymous)
	keep.result == {"fields": ["id"]}
	none := mcpgate.decision with input as _call(_tool("read", {}), _anonymous)
	not none.result
}

test_refusal_carries_no_write_safety if {
	d := mcpgate.decision with input as _call(_purge, _alice)
	not d.allow
	not d.confirm
	not d.buckets
	not d.result
}

# --- "not found" points to a finder -----------------------------------------

_finder(name, extra) := object.union({"name": name, "declared": true, "effect": "read"}, extra)

_call_with_finders(tool, principal, finders) := object.union(_call(tool, principal), {"finders": finders})

test_not_found_points_to_a_visible_finder if {
	finders := [
		_finder("get_contact", {}),
		_finder("list_contacts", {}),
		_finder("find_contacts", {"rights": ["crm.admin"]}), # not held by alice
		_finder("search_contacts", {}),
	]
	every tool in [_unknown, _retired] {
		d := mcpgate.decision with input as _call_with_finders(tool, _alice, finders)
		not d.allow
		d.reasons[0].next_tool == "search_contacts"
		contains(d.reasons[0].fix, "search_contacts")
	}
	unlisted := object.union(_search, {"catalog": {"listed": false}})
	d := mcpgate.decision with input as _call_with_finders(unlisted, _alice, finders)
	d.reasons[0].code == "tool_not_in_upstream"
	d.reasons[0].next_tool == "search_contacts"
}

test_not_found_never_points_to_create_or_hidden_finders if {
	finders := [
		_finder("create_contact", {"effect": "silent_write"}),
		_finder("find_contacts", {"hidden": true}),
		_finder("list_contacts", {"catalog": {"listed": true, "state": "changed"}}),
	]
	d := mcpgate.decision with input as _call_with_finders(_unknown, _alice, finders)
	d.reasons[0].next_tool == "tools/list"
	startswith(d.reasons[0].fix, "Call tools/list to see the tools you can use. If the user needs")
	not contains(d.reasons[0].fix, "_contact")
}

test_not_found_prefers_find_over_get if {
	finders := [_finder("get_contact", {}), _finder("find_contacts", {})]
	d := mcpgate.decision with input as _call_with_finders(_unknown, _alice, finders)
	d.reasons[0].next_tool == "find_contacts"
}

test_hidden_by_rights_or_pinning_keeps_its_reason if {
	finders := [_finder("find_contacts", {})]
	rights := mcpgate.decision with input as _call_with_finders(_purge, _alice, finders)
	rights.reasons[0].code == "missing_rights"
	rights.reasons[0].next_tool == "tools/list"
	every state_code in [["changed", "tool_changed"], ["unpinned", "tool_not_approved"], ["unusable", "tool_unusable"]] {
		[state, code] := state_code
		d := mcpgate.decision with input as _call_with_finders(_listed(_search, state), _alice, finders)
		d.reasons[0].code == code
		d.reasons[0].cause != ""
		d.reasons[0].fix != ""
		d.reasons[0].next_tool == "tools/list"
	}
}

# --- toolsets ------------------------------------------------------------------

_core_alice := object.union(_alice, {"toolset": "core"})

_search_core := object.union(_search, {"toolsets": ["core", "standard"]})

_update_standard := object.union(_update, {"toolsets": ["standard"]})

test_toolset_hides_tools_outside_it if {
	d := mcpgate.decision with input as _list("tools/list", [
		{"name": "search", "tool": _search_core},
		{"name": "update", "tool": _update_standard},
	], _core_alice)
	d.visible == ["search"]
}

test_toolset_call_outside_refused_naming_the_toolsets if {
	d := mcpgate.decision with input as _call(_update_standard, _core_alice)
	not d.allow
	[r] := d.reasons
	r.code == "tool_not_in_toolset"
	contains(r.cause, `"core"`)
	contains(r.cause, "standard")
	r.next_tool == "tools/list"
}

test_toolset_call_inside_allowed if {
	mcpgate.decision.allow with input as _call(_search_core, _core_alice)
}

test_toolset_full_or_none_sees_every_tool if {
	every p in [_alice, object.union(_alice, {"toolset": "full"})] {
		d := mcpgate.decision with input as _list("tools/list", [
			{"name": "search", "tool": _search_core},
			{"name": "update", "tool": _update_standard},
		], p)
		d.visible == ["search", "update"]
	}
}

test_toolset_tool_in_no_toolset_says_full if {
	d := mcpgate.decision with input as _call(_update, _core_alice)
	[r] := d.reasons
	r.code == "tool_not_in_toolset"
	contains(r.cause, "only in the toolset full")
}

# --- resource URIs and the tenant -------------------------------------------------

_read(uri_tenants, principal) := {
	"version": "mcpgate.policy/v1",
	"phase": "request",
	"transport": _transport,
	"message": {"kind": "request", "method": "resources/read", "uri": "crm://x/y", "uri_tenants": uri_tenants},
	"principal": principal,
}

test_resource_uri_of_own_tenant_allowed if {
	mcpgate.decision.allow with input as _read(["acme"], _alice)
}

test_resource_uri_of_another_tenant_refused if {
	d := mcpgate.decision with input as _read(["globex"], _alice)
	not d.allow
	[r] := d.reasons
	r.code == "tenant_mismatch"
	contains(r.cause, `"globex"`)
}

test_resource_uri_naming_two_tenants_refused if {
	d := mcpgate.decision with input as _read(["acme", "globex"], _alice)
	not d.allow
}

test_resource_uri_tenant_without_caller_tenant_refused if {
	not mcpgate.decision.allow with input as _read(["acme"], _anonymous)
}

test_resource_uri_tenant_matches_path_tenant if {
	inp := object.union(_read(["acme"], _anonymous), {"transport": object.union(_transport, {"tenant": "acme"})})
	mcpgate.decision.allow with input as inp
}

test_resource_uri_problem_refused if {
	inp := object.union(_read([], _alice), {"message": {"kind": "request", "method": "resources/read", "uri": "crm://%zz", "uri_problem": "The resource URI cannot be parsed."}})
	d := mcpgate.decision with input as inp
	not d.allow
	[r] := d.reasons
	r.code == "invalid_resource_uri"
}

test_resource_list_hides_other_tenants if {
	d := mcpgate.decision with input as _list("resources/list", [
		{"name": "crm://acme/a", "uri_tenants": ["acme"]},
		{"name": "crm://globex/b", "uri_tenants": ["globex"]},
		{"name": "file:///readme"},
	], _alice)
	d.visible == ["crm://acme/a", "file:///readme"]
}
