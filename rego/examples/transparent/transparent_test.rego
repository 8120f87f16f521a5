# METADATA
# title: Tests of the transparent example policy
# description: Run with `go test ./rego/` or `opa test rego/examples/transparent`.
package mcpgate_test

import data.mcpgate

_in(phase, message) := {
	"version": "mcpgate.policy/v1",
	"phase": phase,
	"transport": {"kind": "proxy", "http_method": "POST", "path": "/mcp", "upstream": "u", "protocol_version": "2026-07-28"},
	"message": message,
	"principal": {"authenticated": false},
}

test_any_method_allowed if {
	every method in ["ping", "tools/list", "sampling/createMessage", "x/y"] {
		d := mcpgate.decision with input as _in("request", {"kind": "request", "method": method})
		d == {"allow": true, "reasons": []}
	}
	d := mcpgate.decision with input as _in("request", {"kind": "notification", "method": "notifications/whatever"})
	d.allow == true
}

test_undeclared_tool_allowed if {
	inp := object.union(_in("request", {"kind": "request", "method": "tools/call", "name": "t"}), {"tool": {"name": "t", "declared": false, "effect": ""}})
	d := mcpgate.decision with input as inp
	d == {"allow": true, "reasons": []}
}

test_declared_effect_passes_through if {
	inp := object.union(_in("request", {"kind": "request", "method": "tools/call", "name": "t"}), {"tool": {"name": "t", "declared": true, "effect": "delete"}})
	d := mcpgate.decision with input as inp
	d == {"allow": true, "reasons": [], "effect": "delete"}
}

test_malformed_denied if {
	every message in [{"kind": "request"}, {"kind": "request", "method": ""}, {"kind": "response", "method": "ping"}, {"method": "ping"}] {
		d := mcpgate.decision with input as _in("request", message)
		d.allow == false
		d.reasons[0].code == "malformed_message"
	}
}

test_every_item_visible if {
	items := [{"name": "a", "tool": {"name": "a", "declared": false, "effect": ""}}, {"name": "b", "tool": {"name": "b", "declared": true, "effect": "read", "hidden": true}}, {"name": "c"}]
	d := mcpgate.decision with input as object.union(_in("list", {"kind": "request", "method": "tools/list"}), {"items": items})
	d == {"allow": true, "visible": ["a", "b", "c"]}
}

test_list_without_items if {
	d := mcpgate.decision with input as _in("list", {"kind": "request", "method": "resources/list"})
	d == {"allow": true, "visible": []}
}

test_unknown_phase_denied if {
	d := mcpgate.decision with input as _in("response", {"kind": "request", "method": "ping"})
	d.allow == false
	d.reasons[0].code == "invalid_input"
}
