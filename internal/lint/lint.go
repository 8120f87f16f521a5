package lint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Severities of a Finding.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Finding is one problem of one tool (or of the list as a whole, with an
// empty Tool).
type Finding struct {
	// Tool is the tool's name, "tools[i]" for a tool without a usable name,
	// or "" for a finding about the whole list.
	Tool string `json:"tool"`
	// Rule is the stable id of the rule (see Rules).
	Rule string `json:"rule"`
	// Severity is SeverityError or SeverityWarning; it is fixed per rule.
	Severity string `json:"severity"`
	// Message says what is wrong and how to fix it, in plain words.
	Message string `json:"message"`
	// Path locates the problem inside the tool definition, e.g.
	// "inputSchema.properties.tenant"; "tools" for list findings.
	Path string `json:"path,omitempty"`
}

// Report is the result of Lint.
type Report struct {
	// Tools is the number of tool definitions linted.
	Tools int `json:"tools"`
	// Findings are ordered by tool (in input order, list findings last),
	// then rule id, then path.
	Findings []Finding `json:"findings"`
}

// Errors counts the findings of severity error.
func (r Report) Errors() int { return r.count(SeverityError) }

// Warnings counts the findings of severity warning.
func (r Report) Warnings() int { return r.count(SeverityWarning) }

func (r Report) count(sev string) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == sev {
			n++
		}
	}
	return n
}

// AtOrAbove counts the findings at or above severity sev: errors for
// SeverityError, errors and warnings for SeverityWarning.
func (r Report) AtOrAbove(sev string) int {
	if sev == SeverityWarning {
		return len(r.Findings)
	}
	return r.Errors()
}

// MarshalJSON encodes the report with its counts:
// {"tools":N,"errors":E,"warnings":W,"findings":[...]}. Findings is never
// null. Decoding that JSON back into a Report ignores the counts.
func (r Report) MarshalJSON() ([]byte, error) {
	findings := r.Findings
	if findings == nil {
		findings = []Finding{}
	}
	return json.Marshal(struct {
		Tools    int       `json:"tools"`
		Errors   int       `json:"errors"`
		Warnings int       `json:"warnings"`
		Findings []Finding `json:"findings"`
	}{r.Tools, r.Errors(), r.Warnings(), findings})
}

// Default option values.
const DefaultMaxDescription = 1024

// DefaultTenantArguments are the argument names Options.TenantArguments
// defaults to.
var DefaultTenantArguments = []string{"tenant", "tenant_id", "workspace_id", "org_id"}

// Options tune Lint. The zero value uses the defaults.
type Options struct {
	// MaxDescription bounds a tool description, in characters (Unicode
	// code points). Zero means DefaultMaxDescription.
	MaxDescription int
	// TenantArguments are argument names that let a caller choose the
	// tenant. They match at any depth of an input schema, ignoring case,
	// "_" and "-" (so tenant_id also catches tenantId and Tenant-ID). Nil
	// means DefaultTenantArguments; an empty non-nil slice turns the rule
	// off.
	TenantArguments []string
}

func (o Options) withDefaults() Options {
	if o.MaxDescription <= 0 {
		o.MaxDescription = DefaultMaxDescription
	}
	if o.TenantArguments == nil {
		o.TenantArguments = DefaultTenantArguments
	}
	return o
}

// tool is one decoded tool definition.
type tool struct {
	index int
	label string         // name, or tools[i]
	name  string         // "" when absent or not a string
	obj   map[string]any // nil when the definition is not an object
}

// linter collects findings.
type linter struct {
	o        Options
	tenant   map[string]bool // normalised tenant argument names
	findings []finding
}

type finding struct {
	Finding
	index int
}

// add records a finding of rule for t (nil: the list) at path.
func (l *linter) add(t *tool, rule, path, format string, args ...any) {
	r, ok := ruleByID[rule]
	if !ok {
		panic("lint: unknown rule " + rule)
	}
	f := finding{Finding: Finding{Rule: rule, Severity: r.Severity, Message: fmt.Sprintf(format, args...), Path: path}, index: -1}
	if t != nil {
		f.Tool = t.label
		f.index = t.index
	}
	l.findings = append(l.findings, f)
}

// Lint checks tool definitions, as tools/list returns them (name, title,
// description, inputSchema, outputSchema, annotations), against the rules
// in Rules. The result does not depend on map order: findings are sorted
// by tool (in input order, list findings last), rule id, path and message.
func Lint(tools []jsontext.Value, o Options) Report {
	l := &linter{o: o.withDefaults(), tenant: map[string]bool{}}
	for _, n := range l.o.TenantArguments {
		l.tenant[normName(n)] = true
	}
	ts := make([]*tool, len(tools))
	for i, raw := range tools {
		t := &tool{index: i, label: fmt.Sprintf("tools[%d]", i)}
		ts[i] = t
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			l.add(t, "tool-shape", "", "the definition is not valid JSON (%v); dump tools/list again", err)
			continue
		}
		obj, ok := v.(map[string]any)
		if !ok {
			l.add(t, "tool-shape", "", "the definition is %s, not an object", kindOf(v))
			continue
		}
		t.obj = obj
		if s, ok := obj["name"].(string); ok && s != "" {
			t.name = s
			t.label = s
		}
	}
	for _, t := range ts {
		if t.obj != nil {
			l.checkTool(t)
		}
	}
	l.checkList(ts)

	end := len(tools)
	slices.SortStableFunc(l.findings, func(a, b finding) int {
		ai, bi := a.index, b.index
		if ai < 0 {
			ai = end
		}
		if bi < 0 {
			bi = end
		}
		return cmp.Or(cmp.Compare(ai, bi), strings.Compare(a.Rule, b.Rule),
			strings.Compare(a.Path, b.Path), strings.Compare(a.Message, b.Message))
	})
	out := Report{Tools: len(tools), Findings: make([]Finding, len(l.findings))}
	for i, f := range l.findings {
		out.Findings[i] = f.Finding
	}
	return out
}

// checkTool runs the per-tool rules.
func (l *linter) checkTool(t *tool) {
	l.checkShape(t)
	l.checkName(t)
	l.checkTitleAndHints(t)
	l.checkDescription(t)
	l.checkTexts(t)
	l.checkInvisible(t, "", t.obj)
	l.checkSchema(t)
	l.checkUpstreamRuleSigns(t)
}

// checkShape reports members of the wrong JSON type.
func (l *linter) checkShape(t *tool) {
	want := map[string]string{
		"name": "string", "title": "string", "description": "string",
		"inputSchema": "object", "outputSchema": "object", "annotations": "object",
	}
	for _, k := range sortedKeys(want) {
		v, ok := t.obj[k]
		if !ok || v == nil {
			continue
		}
		if got := kindName(v); got != want[k] {
			l.add(t, "tool-shape", k, "%s is %s; MCP wants %s", k, article(got), article(want[k]))
		}
	}
}

// article puts "a" or "an" before a kind name ("null" stays bare).
func article(kind string) string {
	switch kind {
	case "null":
		return kind
	case "object", "array":
		return "an " + kind
	}
	return "a " + kind
}

// kindName names the JSON kind of a decoded value.
func kindName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// kindOf is kindName with its article.
func kindOf(v any) string { return article(kindName(v)) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// str returns m[k] when it is a string.
func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// obj returns m[k] when it is an object.
func obj(m map[string]any, k string) map[string]any {
	o, _ := m[k].(map[string]any)
	return o
}

// joinPath appends a member to a dotted path.
func joinPath(base, k string) string {
	if base == "" {
		return k
	}
	return base + "." + k
}
