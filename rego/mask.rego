# Default decision-log mask policy of mcpgate.
#
# OPA's decision-log plugin evaluates data.system.log.mask for every event
# before it leaves the process and removes each JSON pointer in the set
# (OPA docs, "Decision Logs", masking sensitive data). Logs hold the tool
# name, the outcome and public IDs, never arguments, results or
# credentials. mcpgate runs this policy beside, not inside, the decision
# policy: a bundle cannot switch it off.
package system.log

# What the model sent: arguments, and what checks on them may echo.
mask contains "/input/message/arguments"

mask contains "/input/message/argument_problems"

# Resource URIs name records (resources/read and subscriptions).
mask contains "/input/message/uri"

# The credential's own id (an OAuth jti or a gateway token id).
mask contains "/input/principal/credential_id"

# Anything in the input whose name looks like a secret, wherever the
# input schema grows one.
secret_name := `(?i)(token|secret|password|passwd|authorization|cookie|api[_-]?key|private[_-]?key|credential)`

mask contains pointer if {
	walk(input.input, [path, _])
	count(path) > 0
	name := path[count(path) - 1]
	is_string(name)
	name != "credential_kind"
	name != "token_rights"
	regex.match(secret_name, name)
	not under_masked(path)
	pointer := concat("/", array.concat(["", "input"], [escape(p) | some p in path]))
}

# Paths under arguments are masked as a whole already.
under_masked(path) if {
	path[0] == "message"
	path[1] in {"arguments", "argument_problems"}
}

escape(p) := replace(replace(sprintf("%v", [p]), "~", "~0"), "/", "~1")
