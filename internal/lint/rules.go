package lint

// Rule describes one lint rule.
type Rule struct {
	ID       string
	Severity string
	Summary  string
}

// Rules lists every rule Lint applies, in documentation order. The package
// documentation and RULES.md carry the same table; a test keeps them in
// step.
var Rules = []Rule{
	{"tool-shape", SeverityError, "the definition is a JSON object whose name, title and description are strings and whose inputSchema, outputSchema and annotations are objects"},
	{"name-missing", SeverityError, "the tool has a name"},
	{"name-snake-case", SeverityError, "the name is snake_case: lowercase letters, digits, single underscores, starting with a letter"},
	{"name-length", SeverityError, "the name is at most 64 characters"},
	{"name-unique", SeverityError, "no two tools share a name"},
	{"name-verb-object", SeverityWarning, "the name reads verb_object (get_booking, list_technicians): not a single word, not object_verb"},
	{"title-missing", SeverityWarning, "the tool has a title (title, or annotations.title)"},
	{"hints-explicit", SeverityWarning, "annotations say readOnlyHint: true or give destructiveHint explicitly (true or false)"},
	{"hints-conflict", SeverityWarning, "hints do not contradict each other or the name (readOnlyHint with destructiveHint: true, or on a create_/update_/delete_... tool)"},
	{"description-missing", SeverityError, "the tool has a description"},
	{"description-length", SeverityWarning, "the description is at most Options.MaxDescription characters (default 1024)"},
	{"description-instructions", SeverityError, "no description or title tells the model how to behave (\"you must\", \"always call\", \"do not tell the user\")"},
	{"description-injection", SeverityError, "no description or title carries a prompt-injection pattern (\"ignore previous instructions\", \"system prompt\", chat-template tokens, <IMPORTANT> blocks, exfiltration links)"},
	{"invisible-characters", SeverityError, "no string of the definition (names, titles, descriptions, enum values, property names) holds control, zero-width, bidi, tag or other invisible characters"},
	{"schema-object", SeverityError, "inputSchema is present and has type \"object\""},
	{"schema-remote-ref", SeverityError, "no $ref in inputSchema points outside the schema (mcpgate never fetches one, so validation would fail)"},
	{"schema-additional-properties", SeverityWarning, "every object of inputSchema sets additionalProperties: false"},
	{"schema-depth", SeverityWarning, "arguments nest at most 2 levels (scalars, arrays of scalars, objects of scalars)"},
	{"schema-bounds", SeverityWarning, "every argument has a type and bounds: strings maxLength, enum, const, pattern or format; numbers minimum and maximum; arrays maxItems"},
	{"tenant-argument", SeverityError, "no argument, at any depth, names the tenant (Options.TenantArguments, any case)"},
	{"list-order", SeverityWarning, "the list is sorted by name (the checkable stand-in for a stable order)"},
	{"create-has-update", SeverityError, "every create_X has a sibling update_X (or edit_X, patch_X, modify_X)"},
	{"update-version", SeverityError, "update, edit, patch and modify tools take the version the caller read: version, expected_version, etag, if_match or revision"},
	{"update-version-optional", SeverityWarning, "that version argument is required"},
	{"batch-expected-count", SeverityError, "batch tools (batch/bulk in the name, a write taking an array of ids, or a write taking a filter) take explicit handles, and a filter only with a required expected_count"},
	{"time-zone", SeverityError, "time arguments (start, end, date, time, at, until, ...) demand an offset or an IANA zone: format date-time, a pattern with an offset, or a timezone argument"},
	{"time-zone-unenforced", SeverityWarning, "a time argument whose description asks for an offset or zone also enforces it in the schema"},
	{"money-number", SeverityError, "money arguments (amount, price, cost, total, fee, tax, subtotal, balance) are never JSON numbers"},
	{"money-unit", SeverityWarning, "money strings have a decimal pattern; money integers say their minor unit in the name (amount_minor, price_cents)"},
	{"list-pagination", SeverityError, "live mode only: the upstream's tools/list cursors advance and end within the page cap"},
}

var ruleByID = func() map[string]Rule {
	m := make(map[string]Rule, len(Rules))
	for _, r := range Rules {
		m[r.ID] = r
	}
	return m
}()

// Severity returns the severity of a rule id, "" for an unknown one.
func Severity(rule string) string { return ruleByID[rule].Severity }

// ListFinding returns a finding about the whole list (an empty Tool, path
// "tools") for a rule of Rules, e.g. list-pagination, which only a caller
// that fetched the list can tell. It panics on an unknown rule.
func ListFinding(rule, message string) Finding {
	r, ok := ruleByID[rule]
	if !ok {
		panic("lint: unknown rule " + rule)
	}
	return Finding{Rule: rule, Severity: r.Severity, Message: message, Path: "tools"}
}
