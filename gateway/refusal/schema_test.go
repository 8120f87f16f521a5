package refusal

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpgate/mcpgate/policy"
)

// noRemote refuses every URL: a listed schema must be self-contained.
type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("remote schema %s refused", url)
}

func compile(t *testing.T, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatalf("%v: %s", err, schema)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noRemote{})
	if err := c.AddResource("mem:///listed.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("mem:///listed.json")
	if err != nil {
		t.Fatalf("compile %s: %v", schema, err)
	}
	return s
}

func validate(s *jsonschema.Schema, instance []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// structuredContent returns the structuredContent of a ToolError body.
func structuredContent(t *testing.T, body []byte) []byte {
	t.Helper()
	var r struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Result.StructuredContent == nil {
		t.Fatalf("%v: %s", err, body)
	}
	return r.Result.StructuredContent
}

// Every tool error validates against DetailsSchema and against the
// outputSchema mcpgate lists for any upstream schema; the upstream's own
// results still validate, local $refs included; what fits neither does
// not.
func TestOutputSchemaCoversErrors(t *testing.T) {
	errs := [][]byte{
		ToolError([]byte("1"), nil, ""),
		ToolError([]byte("1"), []policy.Reason{{Code: "tool_not_declared", Cause: "c", Fix: "f", NextTool: "find_x"}}, "d1"),
		ToolError([]byte("1"), []policy.Reason{{Code: "missing_rights", Cause: "c", Rights: []string{"a"}}, {Code: "tool_hidden", Cause: "h"}}, "d2"),
	}
	upstreams := []struct {
		name, schema, result string
	}{
		{"closed object", `{"type":"object","properties":{"id":{"type":"string"}},"required":["id"],"additionalProperties":false}`, `{"id":"B-1"}`},
		{"local refs", `{"type":"object","$defs":{"item":{"type":"object","required":["n"],"properties":{"n":{"type":"integer"}}}},"properties":{"items":{"type":"array","items":{"$ref":"#/$defs/item"}}},"required":["items"],"additionalProperties":false}`, `{"items":[{"n":1}]}`},
		{"own $id", `{"$id":"https://crm.example/out.json","type":"object","$defs":{"s":{"type":"string"}},"properties":{"s":{"$ref":"#/$defs/s"}},"required":["s"],"additionalProperties":false}`, `{"s":"x"}`},
		{"with $schema", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"]}`, `{"ok":true}`},
		{"empty", `{}`, `{"anything":1}`},
		{"spaced", " {\n \"type\" : \"object\" }", `{"a":1}`},
	}
	details := compile(t, []byte(DetailsSchema))
	for _, body := range errs {
		if err := validate(details, structuredContent(t, body)); err != nil {
			t.Errorf("DetailsSchema refuses %s: %v", structuredContent(t, body), err)
		}
	}
	for _, u := range upstreams {
		t.Run(u.name, func(t *testing.T) {
			listed := OutputSchema([]byte(u.schema))
			if !json.Valid(listed) || !strings.HasPrefix(string(listed), `{"type":"object","anyOf":[`) {
				t.Fatalf("listed %s", listed)
			}
			s := compile(t, listed)
			for _, body := range errs {
				if err := validate(s, structuredContent(t, body)); err != nil {
					t.Errorf("the listed schema refuses a tool error: %v", err)
				}
			}
			if err := validate(s, []byte(u.result)); err != nil {
				t.Errorf("the listed schema refuses the upstream's result %s: %v", u.result, err)
			}
			if u.name != "empty" && u.name != "spaced" { // those accept any object
				if err := validate(s, []byte(`{"error":"boom"}`)); err == nil {
					t.Errorf("the listed schema accepts a result that fits neither")
				}
			}
		})
	}
	// Not an object: left as it is.
	if got := OutputSchema([]byte(`true`)); string(got) != `true` {
		t.Errorf("OutputSchema(true) = %s", got)
	}
}
