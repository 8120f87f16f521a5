// Package lint checks the tool definitions an upstream MCP server lists
// (tools/list: name, title, description, inputSchema, outputSchema,
// annotations) for what a model needs to use them safely, and for the
// visible signs of the rules only the upstream can keep: mcpgate enforces
// tenants, rights, confirmations and argument validation at the gateway,
// but duplicate guards, versions on update, batch counts, time zones and
// money are the upstream's job, and lint can only see whether its schemas
// make room for them.
//
// It backs `mcpgate manifest lint`. Lint is pure (no I/O); ParseDump reads
// a saved tools/list answer.
//
// # Severities
//
// An error breaks an invariant the gateway cannot repair on the upstream's
// behalf, or is a safety risk in text the model reads. A warning is a
// convention, something mcpgate also covers at the gateway (titles and
// hints it derives from the declared effect class, unknown arguments it
// refuses), or a heuristic that can misfire. The severity is fixed per
// rule.
//
// # Rules
//
//	rule                          severity  checks
//	tool-shape                    error     the definition is an object; name/title/description strings; schemas and annotations objects
//	name-missing                  error     the tool has a name
//	name-snake-case               error     lowercase a-z, 0-9 and single underscores, starting with a letter
//	name-length                   error     at most 64 characters
//	name-unique                   error     no two tools share a name
//	name-verb-object              warning   verb_object: not one word, not object_verb (booking_create)
//	title-missing                 warning   a title (title or annotations.title)
//	hints-explicit                warning   readOnlyHint: true, or destructiveHint given (true or false)
//	hints-conflict                warning   readOnlyHint with destructiveHint: true, or on a write-named tool
//	description-missing           error     a description
//	description-length            warning   at most Options.MaxDescription characters (default 1024)
//	description-instructions      error     no orders to the model ("you must", "always call", "do not tell the user")
//	description-injection         error     no injection patterns ("ignore previous instructions", "system prompt", <|im_start|>, <IMPORTANT>, exfiltration links)
//	invisible-characters          error     no control, zero-width, bidi, tag, variation-selector or filler characters in any string or member name
//	schema-object                 error     inputSchema present with type "object"
//	schema-remote-ref             error     no $ref leaving the schema
//	schema-additional-properties  warning   additionalProperties: false on every object
//	schema-depth                  warning   arguments nest at most 2 levels
//	schema-bounds                 warning   a type; strings maxLength/enum/pattern/format; numbers minimum and maximum; arrays maxItems
//	tenant-argument               error     no tenant argument (Options.TenantArguments, any case, any depth)
//	list-order                    warning   the list is sorted by name
//	create-has-update             error     create_X has update_X (or edit_X, patch_X, modify_X)
//	update-version                error     update/edit/patch/modify tools take version, expected_version, etag, if_match or revision
//	update-version-optional       warning   that argument is required
//	batch-expected-count          error     batch tools take explicit handles; a filter only with a required expected_count
//	time-zone                     error     time arguments demand an offset or IANA zone (format date-time, an offset pattern, a timezone argument)
//	time-zone-unenforced          warning   a time argument asks for an offset only in its description
//	money-number                  error     money arguments are never JSON numbers
//	money-unit                    warning   money strings have a decimal pattern; money integers are named *_minor / *_cents
//	list-pagination               error     live mode: cursors advance and end within the page cap
//
// RULES.md explains each rule, its heuristics and its limits.
//
// # What lint cannot see
//
// Order: one dump cannot show whether the order is stable between calls, so
// list-order checks the stand-in, sorted by name. Duplicate guards on
// create, version checks and expected_count comparisons happen in the
// upstream's code; lint sees only that the arguments exist. Names, words
// and patterns are matched heuristically (lists of verbs, time and money
// words, injection phrases): a clean report is not a review.
package lint
