package lint

import (
	"regexp"
	"slices"
	"strings"
)

// Argument names (normalised with normName) that carry the version a
// caller read.
var versionArgs = set("version", "expectedversion", "etag", "ifmatch", "revision", "expectedrevision", "baseversion", "currentversion")

// Argument names (normalised) that select objects by a condition.
var filterArgs = set("filter", "filters", "query", "q", "where", "match", "matching", "selector", "criteria", "all")

// Words that make an argument a point in time.
var timeWords = set("time", "times", "date", "dates", "datetime", "timestamp", "start", "starts", "end", "ends",
	"at", "until", "since", "deadline", "due", "begin", "begins", "expiry", "expires", "expiration", "when")

// Words that make a time-sounding argument something else: a cursor, an
// index, an id (since_id, start_index, end_cursor).
var notTimeWords = set("id", "ids", "cursor", "token", "version", "count", "index", "number", "num", "seq",
	"page", "pages", "limit", "size", "amount", "line", "row", "offset")

// Words that make an argument a time zone rather than a time.
var zoneWords = set("zone", "timezone", "tz", "tzid", "offset")

// Words that make an argument an amount of money, and words that say it is
// something else (a count, a rate, a currency code).
var (
	moneyWords    = set("amount", "amounts", "price", "prices", "cost", "costs", "total", "totals", "fee", "fees", "tax", "taxes", "subtotal", "balance")
	notMoneyWords = set("count", "counts", "items", "pages", "results", "number", "num", "percent", "percentage",
		"pct", "rate", "ratio", "currency", "id", "ids", "type", "kind", "code", "mode", "status", "hours",
		"minutes", "seconds", "days", "weight", "quantity", "qty", "tokens", "bytes", "size", "length")
	minorUnitWords = set("minor", "cents", "cent", "pence", "micros")
)

// zoneMention finds a description that asks for an offset or a zone.
var zoneMention = regexp.MustCompile(`(?i)\b(?:offset|time ?zone|iana|utc|gmt|rfc ?3339)\b|[+-]\d{2}:\d{2}\b|\dZ\b`)

// offsetPattern reports whether a regular expression seems to demand an
// offset ("Z", "[+-]hh:mm").
func offsetPattern(p string) bool {
	for _, s := range []string{"Z", "[+-]", "[-+]", `[+\-]`, `\+`, "±"} {
		if strings.Contains(p, s) {
			return true
		}
	}
	return false
}

func anyWord(ws []string, m map[string]bool) bool {
	return slices.ContainsFunc(ws, func(w string) bool { return m[w] })
}

// checkUpstreamRuleSigns looks in a tool's schema for the visible signs of
// rules the upstream must keep in its own code (versions on update,
// expected_count on batch tools, time zones, money).
func (l *linter) checkUpstreamRuleSigns(t *tool) {
	var all []prop
	if root := obj(t.obj, "inputSchema"); root != nil {
		c := newSchemaCtx(root)
		c.props(root, "inputSchema", true, nil, &all)
	}
	var top []prop
	for _, p := range all {
		if p.top {
			top = append(top, p)
		}
	}
	if t.name != "" {
		l.checkUpdateVersion(t, top)
		l.checkBatch(t, top)
	}
	for _, p := range all {
		l.checkTime(t, p, top)
		l.checkMoney(t, p)
	}
}

func (l *linter) checkUpdateVersion(t *tool, top []prop) {
	verb, _, _ := verbObject(t.name)
	if !updateVerbs[verb] {
		return
	}
	for _, p := range top {
		if versionArgs[normName(p.name)] {
			if !p.required {
				l.add(t, "update-version-optional", p.path, "%q takes %q but does not require it, so a call without it overwrites whatever is there now: add it to required", t.name, p.name)
			}
			return
		}
	}
	l.add(t, "update-version", "inputSchema.properties", "%q changes an existing object but takes no version argument, so an agent working from an old read overwrites a newer change: take the version the caller read (version, expected_version or etag), required, and answer a stale one with a conflict and the current state", t.name)
}

// isHandleArray reports whether an argument is a list of ids or handles.
func isHandleArray(p prop) bool {
	if !slices.Contains(effectiveTypes(p.s), "array") {
		return false
	}
	ws := Words(p.name)
	if len(ws) == 0 {
		return false
	}
	last := ws[len(ws)-1]
	return last == "ids" || last == "handles" || last == "keys" || strings.HasSuffix(normName(p.name), "ids")
}

func (l *linter) checkBatch(t *tool, top []prop) {
	verb, _, batchName := verbObject(t.name)
	if verb == "" || readVerbs[verb] {
		return // reads: a wide filter costs tokens, not data
	}
	var handles, filters []string
	var expected *prop
	for i, p := range top {
		switch n := normName(p.name); {
		case n == "expectedcount":
			expected = &top[i]
		case filterArgs[n]:
			filters = append(filters, p.name)
		case isHandleArray(p):
			handles = append(handles, p.name)
		}
	}
	switch {
	case len(filters) > 0 && expected == nil:
		l.add(t, "batch-expected-count", "inputSchema.properties", "%q acts on whatever its filter (%s) matches but takes no expected_count, so a filter wider than the model thought multiplies one mistake: add a required expected_count and, when the match count differs, return the matches and change nothing", t.name, strings.Join(filters, ", "))
	case len(filters) > 0 && !expected.required:
		l.add(t, "batch-expected-count", expected.path, "%q takes expected_count but does not require it, so a call without it skips the guard: add it to required", t.name)
	case batchName && len(handles) == 0 && len(filters) == 0:
		l.add(t, "batch-expected-count", "inputSchema.properties", "%q is a batch tool but takes neither explicit handles (an array of ids) nor a filter with expected_count: say exactly what it acts on", t.name)
	}
}

func (l *linter) checkTime(t *tool, p prop, top []prop) {
	if hasAny(p.s, "enum", "const") {
		return
	}
	ws := Words(p.name)
	format := str(p.s, "format")
	if anyWord(ws, zoneWords) || !(anyWord(ws, timeWords) && !anyWord(ws, notTimeWords) || format == "date-time") {
		return
	}
	if ts := effectiveTypes(p.s); len(ts) > 0 && !slices.Contains(ts, "string") {
		return // numbers: epoch times carry no zone question
	}
	switch format {
	case "date-time", "time", "date":
		return // RFC 3339 date-time and full-time carry an offset; a date has no time of day
	}
	if offsetPattern(str(p.s, "pattern")) {
		return
	}
	for _, sibs := range []map[string]any{p.siblings, nil} {
		names := sortedKeys(sibs)
		if sibs == nil {
			for _, q := range top {
				names = append(names, q.name)
			}
		}
		for _, n := range names {
			if anyWord(Words(n), zoneWords) && n != p.name {
				return
			}
		}
	}
	if zoneMention.MatchString(str(p.s, "description")) {
		l.add(t, "time-zone-unenforced", p.path, "time argument %q asks for an offset or zone only in its description; the schema accepts \"2026-03-29 02:30\" with neither: add format: date-time (RFC 3339, offset required) or a required timezone argument (IANA name)", p.name)
		return
	}
	l.add(t, "time-zone", p.path, "time argument %q demands neither an offset nor a zone, so \"09:00\" is read in whatever zone the server runs in: add format: date-time (RFC 3339, offset required) or a required timezone argument (IANA name, e.g. Europe/Berlin)", p.name)
}

func (l *linter) checkMoney(t *tool, p prop) {
	ws := Words(p.name)
	if !anyWord(ws, moneyWords) || anyWord(ws, notMoneyWords) || hasAny(p.s, "enum", "const") {
		return
	}
	ts := effectiveTypes(p.s)
	switch {
	case slices.Contains(ts, "number"):
		l.add(t, "money-number", p.path, "money argument %q is a JSON number, which cannot hold 0.10 exactly and rounds differently per client: send a decimal string with a pattern (\"19.99\", pattern ^-?[0-9]+([.][0-9]{1,2})?$) or integer minor units named %s_minor", p.name, strings.Join(ws, "_"))
	case slices.Contains(ts, "integer") && !anyWord(ws, minorUnitWords):
		l.add(t, "money-unit", p.path, "money argument %q is an integer that does not name its unit (is 1999 cents or euros?): call it %s_minor or %s_cents", p.name, strings.Join(ws, "_"), strings.Join(ws, "_"))
	case slices.Contains(ts, "string") && !hasAny(p.s, "pattern"):
		l.add(t, "money-unit", p.path, "money argument %q is a string without a decimal pattern, so \"19,99\" or \"$20\" pass: add pattern ^-?[0-9]+([.][0-9]{1,2})?$ (and a currency argument if it can vary)", p.name)
	case len(ts) == 0:
		l.add(t, "money-unit", p.path, "money argument %q has no type: make it a decimal string with a pattern or integer minor units", p.name)
	}
}

// checkList runs the rules that look at several tools.
func (l *linter) checkList(ts []*tool) {
	first := map[string]*tool{}
	updates := map[string]bool{}
	var names []string
	for _, t := range ts {
		if t.name == "" {
			continue
		}
		names = append(names, t.name)
		if f, dup := first[t.name]; dup {
			l.add(t, "name-unique", "name", "the name %q is also used by tools[%d]: clients call tools by name, so one of them is unreachable; rename one", t.name, f.index)
			continue
		}
		first[t.name] = t
		if verb, object, _ := verbObject(t.name); updateVerbs[verb] && object != "" {
			updates[object] = true
		}
	}
	for _, t := range ts {
		if t.name == "" || first[t.name] != t {
			continue
		}
		verb, object, _ := verbObject(t.name)
		if verb != "create" || object == "" {
			continue
		}
		if updates[object] || updates[object+"s"] || updates[strings.TrimSuffix(object, "s")] {
			continue
		}
		l.add(t, "create-has-update", "name", "%q has no sibling update_%s: asked to change what it made, an agent can only create another one; add update_%s (taking the handle and the version the caller read)", t.name, object, object)
	}
	for i := 1; i < len(names); i++ {
		if names[i] < names[i-1] {
			l.add(nil, "list-order", "tools", "the tools are not sorted by name (%q comes after %q): MCP asks for a deterministic order, and one dump cannot show whether the order is stable between calls, so lint checks the visible stand-in: sort the list by name (ignore this if the order is fixed some other way)", names[i], names[i-1])
			return
		}
	}
}
