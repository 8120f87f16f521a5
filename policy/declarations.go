package policy

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schemas holds the JSON Schemas (draft 2020-12) of the policy documents:
// input.schema.json, decision.schema.json and declarations.schema.json.
//
//go:embed *.schema.json
var Schemas embed.FS

// schemaBase is the $id prefix of the schemas in Schemas.
const schemaBase = "https://schemas.mcpgate.dev/policy/v1/"

// noRemote refuses every URL: schemas resolve only among Schemas.
type noRemote struct{}

func (noRemote) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s refused: only the embedded policy schemas are available", url)
}

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Schema // file name → compiled schema
	schemasErr  error
)

// declarationDef locates the schema of one tool declaration.
const declarationDef = "declarations.schema.json#/$defs/declaration"

// compiledSchema returns the compiled schema at loc: a file of Schemas, or
// declarationDef.
func compiledSchema(loc string) (*jsonschema.Schema, error) {
	schemasOnce.Do(func() {
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.UseLoader(noRemote{})
		entries, err := Schemas.ReadDir(".")
		if err != nil {
			schemasErr = err
			return
		}
		for _, e := range entries {
			b, err := Schemas.ReadFile(e.Name())
			if err != nil {
				schemasErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemasErr = fmt.Errorf("%s: %w", e.Name(), err)
				return
			}
			if err := c.AddResource(schemaBase+e.Name(), doc); err != nil {
				schemasErr = err
				return
			}
		}
		schemas = map[string]*jsonschema.Schema{}
		locs := []string{declarationDef}
		for _, e := range entries {
			locs = append(locs, e.Name())
		}
		for _, loc := range locs {
			s, err := c.Compile(schemaBase + loc)
			if err != nil {
				schemasErr = err
				return
			}
			schemas[loc] = s
		}
	})
	if schemasErr != nil {
		return nil, fmt.Errorf("policy schemas: %w", schemasErr)
	}
	s, ok := schemas[loc]
	if !ok {
		return nil, fmt.Errorf("policy schemas: no %s", loc)
	}
	return s, nil
}

// validateJSON checks the JSON document b against the schema at loc and
// returns one error per failed leaf, naming its location.
func validateJSON(loc string, b []byte) []error {
	s, err := compiledSchema(loc)
	if err != nil {
		return []error{err}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return []error{err}
	}
	return schemaErrors(s.Validate(doc))
}

// schemaErrors flattens a validation error to its leaves, each named by
// its JSON pointer in the document.
func schemaErrors(err error) []error {
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []error{err}
	}
	var out []error
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		for _, c := range e.Causes {
			walk(c)
		}
		if len(e.Causes) > 0 {
			return
		}
		// A leaf's own basic output carries its message.
		msg := err.Error()
		if u := e.BasicOutput(); u.Error != nil {
			msg = u.Error.String()
		}
		loc := "/"
		if len(e.InstanceLocation) > 0 {
			loc = ""
			for _, tok := range e.InstanceLocation {
				loc += "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
			}
		}
		out = append(out, fmt.Errorf("%s: %s", loc, msg))
	}
	walk(verr)
	slices.SortFunc(out, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return out
}

// ValidateDeclarations checks one upstream's tool declarations against
// declarations.schema.json (remote $ref loading disabled): tool names are
// non-empty, effect is one of Effects, rights are non-empty and unique, and
// untrusted_text and result_fields are well-formed paths ("notes",
// "items[*].comment"). It returns every problem, each naming the upstream
// and the tool, in a stable order; nil means valid.
func ValidateDeclarations(upstream string, tools map[string]ToolDeclaration) []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(tools)) {
		prefix := fmt.Sprintf("upstream %q: tool %q", upstream, name)
		if name == "" {
			errs = append(errs, fmt.Errorf("upstream %q: a tool name is empty", upstream))
			continue
		}
		b, err := json.Marshal(tools[name])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
			continue
		}
		for _, err := range validateDeclaration(b) {
			errs = append(errs, fmt.Errorf("%s: %w", prefix, err))
		}
	}
	return errs
}

// validateDeclaration checks one declaration (JSON) against
// declarations.schema.json#/$defs/declaration.
func validateDeclaration(b []byte) []error {
	return validateJSON(declarationDef, b)
}
