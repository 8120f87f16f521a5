package lint

import (
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/policy"
)

// Exposed returns tools as clients see them through the gateway, given
// the upstream's declarations: a tool whose declaration has an expose
// section is renamed and gets its title and description, so the operator's
// text is linted like the upstream's. Other definitions are returned as
// they are; a definition that is not a JSON object too (Lint reports it).
func Exposed(tools []jsontext.Value, decls map[string]policy.ToolDeclaration) []jsontext.Value {
	out := make([]jsontext.Value, len(tools))
	for i, raw := range tools {
		out[i] = raw
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil {
			continue
		}
		name, _ := obj["name"].(string)
		d, ok := decls[name]
		if !ok || d.Expose == nil {
			continue
		}
		for k, v := range map[string]string{"name": d.Expose.Name, "title": d.Expose.Title, "description": d.Expose.Description} {
			if v != "" {
				obj[k] = v
			}
		}
		if b, err := json.Marshal(obj, json.Deterministic(true)); err == nil {
			out[i] = b
		}
	}
	return out
}
