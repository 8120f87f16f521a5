package lint

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// MaxDepth is how deep arguments may nest: 1 for scalars, 2 for arrays of
// scalars and objects of scalars.
const MaxDepth = 2

// recursive is the depth reported for a schema that refers to itself.
const recursive = 1 << 20

// walkBudget bounds how many schema nodes one walk visits: local $refs can
// make a small schema expand exponentially.
const walkBudget = 20000

// schemaCtx resolves local references inside one inputSchema and counts
// the nodes a walk visits.
type schemaCtx struct {
	root      map[string]any
	budget    int
	exhausted bool
}

func newSchemaCtx(root map[string]any) *schemaCtx {
	return &schemaCtx{root: root, budget: walkBudget}
}

// visit spends one node of the budget; false once it is spent.
func (c *schemaCtx) visit() bool {
	if c.budget <= 0 {
		c.exhausted = true
		return false
	}
	c.budget--
	return true
}

// resolve follows local $refs ("#", "#/$defs/x", "#/definitions/x", any
// JSON pointer into the schema) and merges the referring schema's other
// members over the target. It returns the resolved schema and the last
// reference followed ("" when none). Remote and broken references resolve
// to the schema as it stands.
func (c *schemaCtx) resolve(m map[string]any) (map[string]any, string) {
	last := ""
	for range 16 {
		ref, ok := m["$ref"].(string)
		if !ok || !strings.HasPrefix(ref, "#") {
			break
		}
		target, ok := pointer(c.root, ref[1:]).(map[string]any)
		if !ok {
			break
		}
		merged := maps.Clone(target)
		for k, v := range m {
			if k != "$ref" {
				merged[k] = v
			}
		}
		m, last = merged, ref
	}
	return c.mergeAllOf(m), last
}

// mergeAllOf folds the members of m's allOf branches (resolved, one level)
// into a copy of m, m's own members first.
func (c *schemaCtx) mergeAllOf(m map[string]any) map[string]any {
	arr, ok := m["allOf"].([]any)
	if !ok {
		return m
	}
	out := maps.Clone(m)
	delete(out, "allOf")
	for _, b := range arr {
		bm, ok := b.(map[string]any)
		if !ok {
			continue
		}
		if ref, ok := bm["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
			if target, ok := pointer(c.root, ref[1:]).(map[string]any); ok {
				bm = target
			}
		}
		for k, v := range bm {
			switch cur, ok := out[k]; {
			case k == "$ref":
			case !ok:
				out[k] = v
			case k == "properties":
				a, aok := cur.(map[string]any)
				b, bok := v.(map[string]any)
				if aok && bok {
					u := maps.Clone(b)
					maps.Copy(u, a)
					out[k] = u
				}
			case k == "required":
				a, aok := cur.([]any)
				b, bok := v.([]any)
				if aok && bok {
					out[k] = append(slices.Clone(a), b...)
				}
			}
		}
	}
	return out
}

// pointer evaluates a JSON pointer (RFC 6901) against v.
func pointer(v any, p string) any {
	if p == "" {
		return v
	}
	if !strings.HasPrefix(p, "/") {
		return nil
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			v = x[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// typeSet returns the schema's "type" as a list.
func typeSet(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// effectiveTypes is typeSet, inferred from properties or items when the
// schema has no type.
func effectiveTypes(m map[string]any) []string {
	if ts := typeSet(m); len(ts) > 0 {
		return ts
	}
	if _, ok := m["properties"]; ok {
		return []string{"object"}
	}
	if _, ok := m["items"]; ok {
		return []string{"array"}
	}
	return nil
}

func hasAny(m map[string]any, keys ...string) bool {
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// branches returns the anyOf / oneOf / allOf subschemas of m with their
// path suffixes.
func branches(m map[string]any) (out []struct {
	suffix string
	s      any
}) {
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		arr, _ := m[k].([]any)
		for i, b := range arr {
			out = append(out, struct {
				suffix string
				s      any
			}{fmt.Sprintf("%s[%d]", k, i), b})
		}
	}
	return out
}

// prop is one argument found in an input schema.
type prop struct {
	name     string
	path     string
	s        map[string]any // resolved
	siblings map[string]any // the properties of the object that holds it
	required bool
	top      bool // a property of the arguments object itself
}

// props lists the arguments of an object schema, top-level first-come and
// nested ones after their parent, in name order.
func (c *schemaCtx) props(node map[string]any, path string, top bool, stack []string, out *[]prop) {
	if !c.visit() {
		return
	}
	node, ref := c.resolve(node)
	if ref != "" {
		if slices.Contains(stack, ref) {
			return
		}
		stack = append(stack, ref)
	}
	ps := obj(node, "properties")
	req := map[string]bool{}
	if arr, ok := node["required"].([]any); ok {
		for _, e := range arr {
			if s, ok := e.(string); ok {
				req[s] = true
			}
		}
	}
	for _, name := range sortedKeys(ps) {
		if !c.visit() {
			return
		}
		raw, ok := ps[name].(map[string]any)
		if !ok {
			continue
		}
		s, pref := c.resolve(raw)
		p := joinPath(path, "properties."+name)
		*out = append(*out, prop{name: name, path: p, s: s, siblings: ps, required: req[name], top: top})
		if pref != "" && slices.Contains(stack, pref) {
			continue
		}
		st := stack
		if pref != "" {
			st = append(slices.Clone(stack), pref)
		}
		c.nested(s, p, st, out)
	}
	for _, b := range branches(node) {
		if m, ok := b.s.(map[string]any); ok {
			c.props(m, joinPath(path, b.suffix), top, stack, out)
		}
	}
}

// nested lists the arguments inside one argument: its properties, its
// items' properties and those of its branches.
func (c *schemaCtx) nested(s map[string]any, path string, stack []string, out *[]prop) {
	if _, ok := s["properties"]; ok {
		c.props(s, path, false, stack, out)
	} else {
		for _, b := range branches(s) {
			if m, ok := b.s.(map[string]any); ok {
				c.nested(m, joinPath(path, b.suffix), stack, out)
			}
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		c.nested(items, joinPath(path, "items"), stack, out)
	}
}

// depth is how many levels a value of schema s nests: 0 for a scalar, 1 +
// the deepest member for an object or array; recursive for a schema that
// refers to itself.
func (c *schemaCtx) depth(v any, stack []string) int {
	m, ok := v.(map[string]any)
	if !ok || !c.visit() {
		return 0
	}
	m, ref := c.resolve(m)
	if ref != "" {
		if slices.Contains(stack, ref) {
			return recursive
		}
		stack = append(slices.Clone(stack), ref)
	}
	if hasAny(m, "enum", "const") {
		return 0
	}
	d := 0
	for _, b := range branches(m) {
		d = max(d, c.depth(b.s, stack))
	}
	ts := effectiveTypes(m)
	if ps := obj(m, "properties"); len(ps) > 0 {
		inner := 0
		for _, k := range sortedKeys(ps) {
			inner = max(inner, c.depth(ps[k], stack))
		}
		d = max(d, 1+inner)
	} else if slices.Contains(ts, "object") {
		d = max(d, 1+c.depth(m["additionalProperties"], stack))
	}
	if items, ok := m["items"]; ok {
		d = max(d, 1+c.depth(items, stack))
	} else if slices.Contains(ts, "array") {
		d = max(d, 1)
	}
	return min(d, recursive)
}

func (l *linter) checkSchema(t *tool) {
	v, present := t.obj["inputSchema"]
	if !present || v == nil {
		l.add(t, "schema-object", "inputSchema", `the tool has no inputSchema; MCP requires one: use {"type": "object", "properties": {}, "additionalProperties": false} for a tool without arguments`)
		return
	}
	root, ok := v.(map[string]any)
	if !ok {
		return // tool-shape
	}
	switch ty := root["type"]; {
	case ty == nil:
		l.add(t, "schema-object", "inputSchema.type", `inputSchema has no type; MCP wants "type": "object"`)
	case ty != "object":
		l.add(t, "schema-object", "inputSchema.type", `inputSchema has type %s; MCP wants "object": arguments are always a JSON object`, compact(ty))
	}
	l.checkRemoteRefs(t, "inputSchema", root)

	c := newSchemaCtx(root)
	l.checkObjectSchema(t, c, root, "inputSchema", nil)

	ps := obj(root, "properties")
	for _, name := range sortedKeys(ps) {
		d := 1 + c.depth(ps[name], nil)
		path := "inputSchema.properties." + name
		switch {
		case d >= recursive:
			l.add(t, "schema-depth", path, "argument %q refers to itself: a recursive argument has no depth bound; flatten it into top-level arguments and arrays of ids", name)
		case d > MaxDepth:
			l.add(t, "schema-depth", path, "argument %q nests %d levels deep, over %d: models fill flat arguments far more reliably; flatten it (top-level arguments, arrays of ids, objects of scalars)", name, d, MaxDepth)
		}
	}

	var all []prop
	c.props(root, "inputSchema", true, nil, &all)
	if c.exhausted {
		l.add(t, "schema-depth", "inputSchema", "inputSchema expands to more than %d nodes through its $refs, so lint stopped walking it (and so would any reviewer): flatten it", walkBudget)
	}
	for _, p := range all {
		if l.tenant[normName(p.name)] {
			l.add(t, "tenant-argument", p.path, "argument %q lets the caller choose the tenant: the tenant comes from the credential (mcpgate's identity assertion), never from an argument; remove it and resolve every handle inside the asserted tenant", p.name)
		}
	}
}

// checkObjectSchema checks an object schema's additionalProperties and
// the bounds of its properties.
func (l *linter) checkObjectSchema(t *tool, c *schemaCtx, m map[string]any, path string, stack []string) {
	if m["additionalProperties"] != false && m["unevaluatedProperties"] != false {
		what := "the arguments object"
		if path != "inputSchema" {
			what = fmt.Sprintf("object argument %q", argLabel(path))
		}
		l.add(t, "schema-additional-properties", path, "%s does not set additionalProperties: false, so unknown arguments pass and the model believes it set something that was ignored: add additionalProperties: false", what)
	}
	ps := obj(m, "properties")
	for _, name := range sortedKeys(ps) {
		l.checkBounds(t, c, ps[name], joinPath(path, "properties."+name), stack)
	}
}

// checkBounds checks that one argument schema has a type and bounds.
func (l *linter) checkBounds(t *tool, c *schemaCtx, v any, path string, stack []string) {
	if !c.visit() {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		if v == true {
			l.add(t, "schema-bounds", path, "argument %q has the schema true and accepts any JSON value: give it a type and bounds", argLabel(path))
		}
		return
	}
	m, ref := c.resolve(m)
	if ref != "" {
		if slices.Contains(stack, ref) {
			return // schema-depth reports recursion
		}
		stack = append(slices.Clone(stack), ref)
	}
	if hasAny(m, "enum", "const") {
		return
	}
	if bs := branches(m); len(bs) > 0 && len(typeSet(m)) == 0 && !hasAny(m, "properties", "items") {
		for _, b := range bs {
			l.checkBounds(t, c, b.s, joinPath(path, b.suffix), stack)
		}
		return
	}
	ts := effectiveTypes(m)
	if len(ts) == 0 {
		l.add(t, "schema-bounds", path, "argument %q has no type and accepts any JSON value: give it a type and bounds", argLabel(path))
		return
	}
	var missing []string
	for _, ty := range ts {
		switch ty {
		case "string":
			if !hasAny(m, "maxLength", "pattern", "format") {
				missing = append(missing, "maxLength, enum, pattern or format")
			}
		case "number", "integer":
			if !hasAny(m, "minimum", "exclusiveMinimum") {
				missing = append(missing, "minimum")
			}
			if !hasAny(m, "maximum", "exclusiveMaximum") {
				missing = append(missing, "maximum")
			}
		case "array":
			if !hasAny(m, "maxItems") {
				missing = append(missing, "maxItems")
			}
			if items, ok := m["items"]; ok {
				l.checkBounds(t, c, items, joinPath(path, "items"), stack)
			} else {
				missing = append(missing, "items schema")
			}
		case "object":
			l.checkObjectSchema(t, c, m, path, stack)
		}
	}
	if len(missing) > 0 {
		l.add(t, "schema-bounds", path, "argument %q (%s) has no %s: unbounded input reaches the upstream as sent; add the bounds the upstream actually accepts", argLabel(path), strings.Join(ts, " or "), joinAnd(missing))
	}
}

// checkRemoteRefs reports $ref, $dynamicRef and $recursiveRef values that
// leave the schema.
func (l *linter) checkRemoteRefs(t *tool, path string, v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			p := joinPath(path, k)
			if s, ok := v[k].(string); ok && (k == "$ref" || k == "$dynamicRef" || k == "$recursiveRef") && !strings.HasPrefix(s, "#") {
				l.add(t, "schema-remote-ref", p, "%s points outside the schema (%q): mcpgate never fetches schemas, so arguments cannot be validated; inline the definition under $defs", k, s)
				continue
			}
			l.checkRemoteRefs(t, p, v[k])
		}
	case []any:
		for i, e := range v {
			l.checkRemoteRefs(t, fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
}

// argLabel names an argument by its path below inputSchema:
// "inputSchema.properties.a.properties.b" → "a.b", array items as "a.items".
func argLabel(path string) string {
	s := strings.TrimPrefix(path, "inputSchema")
	s = strings.ReplaceAll(s, ".properties.", ".")
	return strings.TrimPrefix(s, ".")
}

func joinAnd(ss []string) string {
	switch len(ss) {
	case 0:
		return ""
	case 1:
		return ss[0]
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " and " + ss[len(ss)-1]
}

// compact renders a decoded JSON value briefly.
func compact(v any) string {
	switch v := v.(type) {
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = compact(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprint(v)
}
