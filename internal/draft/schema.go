package draft

import (
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/mcpgate/mcpgate/internal/lint"
)

// TextPaths are the string fields of a tool's outputSchema, as
// untrusted_text paths ("notes", "items[*].comment").
type TextPaths struct {
	// Proposed are free-text fields (no enum, const, format or pattern)
	// whose name says they hold prose: notes, description, body, ...
	Proposed []string
	// Other are the remaining free-text string fields, not proposed: names,
	// addresses, labels. Third parties may write them too.
	Other []string
}

// maxSchemaDepth bounds the walk through nested schemas and $refs.
const maxSchemaDepth = 12

// proseWords in a field's name mark it as prose written by someone.
var proseWords = set("note", "notes", "description", "desc", "body", "text", "content", "contents",
	"message", "messages", "comment", "comments", "summary", "subject", "bio", "about", "details",
	"remarks", "reason", "feedback", "review", "answer", "question", "prompt", "instructions",
	"snippet", "excerpt", "caption", "html", "markdown", "title", "reply", "memo", "transcript")

// idWords in a field's name mark it as an identifier or code, never
// listed.
var idWords = set("id", "ids", "uuid", "url", "uri", "href", "status", "state", "type", "kind",
	"at", "date", "time", "timestamp", "version", "currency", "code", "locale", "language",
	"mime", "etag", "hash", "sha", "token", "cursor", "email", "phone")

// pathField is a field name an untrusted_text path can hold.
var pathField = regexp.MustCompile(`^[A-Za-z0-9_@-]+$`)

// OutputTextPaths walks an outputSchema (raw JSON; nil gives nothing) and
// returns its free-text string fields as paths: properties of objects,
// "[*]" for array items, local $refs ("#/$defs/…", "#/definitions/…")
// followed, anyOf/oneOf/allOf branches merged. Fields whose names a path
// cannot spell are skipped.
func OutputTextPaths(schema jsontext.Value) TextPaths {
	var root any
	if len(schema) == 0 || json.Unmarshal(schema, &root) != nil {
		return TextPaths{}
	}
	w := &textWalker{root: root}
	w.walk(root, "", "", 0)
	slices.Sort(w.out.Proposed)
	slices.Sort(w.out.Other)
	w.out.Proposed = slices.Compact(w.out.Proposed)
	w.out.Other = slices.Compact(w.out.Other)
	w.out.Other = slices.DeleteFunc(w.out.Other, func(p string) bool { return slices.Contains(w.out.Proposed, p) })
	return w.out
}

type textWalker struct {
	root any
	out  TextPaths
}

func (w *textWalker) walk(v any, path, field string, depth int) {
	m, ok := v.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return
	}
	if ref, ok := m["$ref"].(string); ok {
		w.walk(w.resolve(ref), path, field, depth+1)
	}
	for _, k := range []string{"anyOf", "oneOf", "allOf"} {
		if bs, ok := m[k].([]any); ok {
			for _, b := range bs {
				w.walk(b, path, field, depth+1)
			}
		}
	}
	types := schemaTypes(m)
	if props, ok := m["properties"].(map[string]any); ok {
		for name, p := range props {
			if !pathField.MatchString(name) {
				continue
			}
			child := name
			if path != "" {
				child = path + "." + name
			}
			w.walk(p, child, name, depth+1)
		}
	}
	if items, ok := m["items"]; ok && (slices.Contains(types, "array") || len(types) == 0) && path != "" {
		w.walk(items, path+"[*]", field, depth+1)
	}
	if path == "" || !slices.Contains(types, "string") {
		return
	}
	for _, k := range []string{"enum", "const", "format", "pattern", "contentEncoding"} {
		if _, ok := m[k]; ok {
			return
		}
	}
	ws := lint.Words(field)
	switch {
	case slices.ContainsFunc(ws, func(s string) bool { return idWords[s] }):
	case slices.ContainsFunc(ws, func(s string) bool { return proseWords[s] }):
		w.out.Proposed = append(w.out.Proposed, path)
	default:
		w.out.Other = append(w.out.Other, path)
	}
}

// resolve follows a local JSON pointer ("#/$defs/Booking"); nil otherwise.
func (w *textWalker) resolve(ref string) any {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil
	}
	v := w.root
	for tok := range strings.SplitSeq(strings.TrimPrefix(p, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[tok]
	}
	return v
}

// schemaTypes returns a schema's "type" as a list.
func schemaTypes(m map[string]any) []string {
	switch t := m["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
