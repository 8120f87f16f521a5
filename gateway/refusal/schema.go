package refusal

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// DetailsSchema is the JSON Schema (draft 2020-12) of Details: the
// structuredContent of every tool error mcpgate writes (ToolError, and
// gateway/shape's result_too_large), the last line of its text, and the
// data of its JSON-RPC errors. An object with one member "error" holding
// code (snake_case), cause and optionally fix, next_tool, decision_id,
// more_codes and rights; further members are allowed, so later versions
// can add details without breaking a client that validates.
//
// A declared outputSchema must cover every structured result, errors
// included: OutputSchema puts this schema beside an upstream's.
const DetailsSchema = `{"type":"object","required":["error"],"properties":{"error":{"type":"object","required":["code","cause"],` +
	`"properties":{"code":{"type":"string","pattern":"^[a-z][a-z0-9_]*$"},"cause":{"type":"string","minLength":1},` +
	`"fix":{"type":"string"},"next_tool":{"type":"string"},"decision_id":{"type":"string"},` +
	`"more_codes":{"type":"array","items":{"type":"string"}},"rights":{"type":"array","items":{"type":"string"}}}}}}`

// upstreamSchemaID is the $id given to an upstream's outputSchema inside
// OutputSchema when it has none, so that its own "#/$defs/..." references
// still resolve inside it (JSON Schema 2020-12 section 8.2.1: an embedded
// $id starts a new schema resource) rather than against the wrapper.
const upstreamSchemaID = "urn:mcpgate:upstream-output-schema"

// OutputSchema returns the outputSchema mcpgate lists for a tool whose
// upstream declares upstream (a JSON object schema, MCP Tool.outputSchema):
//
//	{"type":"object","anyOf":[<upstream>,<DetailsSchema>]}
//
// so that both the upstream's structured results and mcpgate's own tool
// errors for the tool validate against what the client was shown (MCP
// tools spec: clients SHOULD validate structured results against the
// outputSchema). The upstream's schema keeps every member; when it has no
// "$id", one (upstreamSchemaID) is added so its local references resolve
// within it. It returns upstream unchanged when it is not a JSON object.
func OutputSchema(upstream jsontext.Value) jsontext.Value {
	up := bytes.TrimSpace(upstream)
	if len(up) < 2 || up[0] != '{' || !jsontext.Value(up).IsValid() {
		return upstream
	}
	if !hasMember(up, "$id") {
		rest := bytes.TrimSpace(up[1:])
		sep := ","
		if len(rest) > 0 && rest[0] == '}' {
			sep = ""
		}
		up = append([]byte(`{"$id":"`+upstreamSchemaID+`"`+sep), rest...)
	}
	out := make([]byte, 0, len(up)+len(DetailsSchema)+32)
	out = append(out, `{"type":"object","anyOf":[`...)
	out = append(out, up...)
	out = append(out, ',')
	out = append(out, DetailsSchema...)
	return append(out, "]}"...)
}

// hasMember reports whether the JSON object obj has a top-level member
// named name.
func hasMember(obj []byte, name string) bool {
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if tok.String() == name {
			return true
		}
		if err := dec.SkipValue(); err != nil {
			return false
		}
	}
	return false
}
