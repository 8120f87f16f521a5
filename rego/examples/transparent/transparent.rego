# METADATA
# title: mcpgate transparent policy (protocol testing only)
# description: |
#   Allows every well-formed message and shows every list item. Use it to
#   test the protocol path through mcpgate without policy in the way; never
#   in production. Same package and decision shape as the default policy.
package mcpgate

# METADATA
# title: decision
# description: allow, reasons, effect (tools/call) and visible (phase "list").
# scope: document
# entrypoint: true
decision := object.union({"allow": count(_deny) == 0, "reasons": [r | some r in _deny]}, _effect) if {
	input.phase == "request"
}

decision := {"allow": true, "visible": [item.name | some item in object.get(input, "items", [])]} if {
	input.phase == "list"
}

decision := {"allow": false, "reasons": [_reason_invalid_phase]} if not _known_phase

_known_phase if input.phase in {"request", "list"}

# METADATA
# title: Well-formedness
# description: A method name and a JSON-RPC kind; nothing else is checked.
_deny contains _reason_malformed if not _well_formed

_well_formed if {
	is_string(input.message.method)
	input.message.method != ""
	input.message.kind in {"request", "notification"}
}

# The declared effect class passes through when there is one.
_effect := {"effect": input.tool.effect} if {
	input.message.method == "tools/call"
	input.tool.declared == true
	is_string(input.tool.effect)
	input.tool.effect != ""
} else := {}

_reason_malformed := {
	"code": "malformed_message",
	"cause": "The message has no method or is neither a request nor a notification.",
	"fix": "Send a JSON-RPC request or notification with a method.",
}

_reason_invalid_phase := {
	"code": "invalid_input",
	"cause": "The gateway sent its policy an input it does not understand.",
	"fix": "Retry later; if it persists, report it to the server's administrators.",
}
