package args

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcpgate/mcpgate/gateway/clip"
)

// Compile errors. Every error Compile returns is a *CompileError whose Err
// is one of these, so callers can test with errors.Is.
var (
	// ErrSchemaTooLarge: the inputSchema is over MaxSchemaBytes.
	ErrSchemaTooLarge = errors.New("inputSchema is too large")
	// ErrSchemaJSON: the inputSchema is not strict JSON (syntax, duplicate
	// member names, invalid UTF-8).
	ErrSchemaJSON = errors.New("inputSchema is not valid JSON")
	// ErrSchemaTooDeep: the inputSchema nests deeper than MaxSchemaDepth.
	ErrSchemaTooDeep = errors.New("inputSchema is nested too deeply")
	// ErrNotObjectSchema: the top of the inputSchema is not a JSON object
	// whose "type" is "object" (or absent, with "properties" present).
	ErrNotObjectSchema = errors.New("inputSchema is not an object schema")
	// ErrExternalRef: a $ref (or $schema) names a schema outside the
	// inputSchema: an http(s), file or other URL, a relative path, or a
	// URN no $id inside the schema defines. Nothing is ever fetched or read;
	// CompileError.Ref names the reference.
	ErrExternalRef = errors.New("inputSchema refers to a schema outside itself")
	// ErrInvalidSchema: the inputSchema breaks its dialect's meta-schema,
	// holds a pattern Go's RE2 engine cannot compile, names an unknown
	// draft, or has a number over MaxNumberLength / MaxExponent.
	ErrInvalidSchema = errors.New("inputSchema is not a valid JSON Schema")
	// ErrRefCycle: $ref (or allOf, anyOf, ...) chains loop back to a schema
	// without descending into the value, so no value could ever be checked.
	ErrRefCycle = errors.New("inputSchema has a reference cycle")
	// ErrSchemaTooComplex: more than MaxSubschemas schema objects, or the
	// schema would apply more than MaxEvaluations subschemas to one value.
	ErrSchemaTooComplex = errors.New("inputSchema is too complex to check")
	// ErrHeaderAnnotation: an "x-mcp-header" annotation breaks the rules of
	// MCP 2026-07-28 (not an RFC 9110 token, a name used twice ignoring
	// case, a property that is not a string, integer, number or boolean,
	// or a place not reachable through "properties" alone). Clients must
	// reject such a tool, so mcpgate does too.
	ErrHeaderAnnotation = errors.New(`inputSchema has an invalid "x-mcp-header" annotation`)
)

// MaxEvaluations bounds how many subschemas the schema may apply to any
// single value of the arguments, counted at compile time over every path
// down to MaxArgumentDepth ($ref, allOf, anyOf, oneOf, not, if/then/else
// and dependent schemas at one value; properties, items and the like one
// level down). It stops schemas built to make validation exponential.
const MaxEvaluations = 256

// CompileError is the error of Compile.
type CompileError struct {
	Err    error  // one of the Err… values above
	Ref    string // ErrExternalRef: the reference, as resolved
	Detail string // what exactly is wrong, for logs and operators
}

func (e *CompileError) Error() string {
	msg := e.Err.Error()
	if e.Ref != "" {
		msg += fmt.Sprintf(" (%q)", e.Ref)
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

func (e *CompileError) Unwrap() error { return e.Err }

func compileErr(err error, detail string, args ...any) *CompileError {
	if len(args) > 0 {
		detail = fmt.Sprintf(detail, args...)
	}
	return &CompileError{Err: err, Detail: detail}
}

// Schema is a compiled inputSchema. It is immutable after Compile, apart
// from caches guarded for concurrent use, and safe for concurrent Check.
type Schema struct {
	sch         *jsonschema.Schema
	props       []string            // top-level argument names, schema order
	propSet     map[string]struct{} // the same, for lookups
	patterns    []jsonschema.Regexp // top-level patternProperties
	required    []string
	headers     map[string]string   // header suffix → top-level argument
	headerPaths map[string][]string // header suffix → property path
	byLocation  map[string]*jsonschema.Schema
	orders      map[string][]string // JSON pointer of a "properties" object → member order
	names       map[string]string   // every property name, to intern argument names
	evaluations int                 // most subschemas applied to one value
	// simple is the schema's simple form (simple.go), nil when it uses
	// keywords only the validator checks.
	simple *simpleNode
	views  *viewCache
	root   *view
}

// baseURL is where the inputSchema is registered. A relative reference
// resolves against it to another mcpgate:/// URL, which the loader
// refuses like any other.
const baseURL = "mcpgate:///input-schema.json"

// refuseLoader is the compiler's only URL loader: it loads nothing and
// remembers the first URL it was asked for.
type refuseLoader struct{ first *string }

func (l refuseLoader) Load(u string) (any, error) {
	if *l.first == "" {
		*l.first = u
	}
	return nil, errors.New("mcpgate never loads schemas from outside the inputSchema")
}

// Compile compiles a tool's inputSchema (JSON Schema; draft 2020-12 when
// "$schema" is absent, the named draft — 4, 6, 7, 2019-09, 2020-12 — when
// present). The errors are *CompileError values wrapping ErrSchemaTooLarge,
// ErrSchemaJSON, ErrSchemaTooDeep, ErrNotObjectSchema, ErrExternalRef,
// ErrInvalidSchema, ErrRefCycle, ErrSchemaTooComplex or
// ErrHeaderAnnotation. Compile does no I/O: remote and file references are
// refused, never fetched.
//
// "format" is asserted as the dialect says (draft 7 and earlier: yes;
// 2019-09 and 2020-12: only when the meta-schema requires the
// format-assertion vocabulary); content keywords are never asserted.
func Compile(inputSchema []byte) (s *Schema, err error) {
	if len(inputSchema) > MaxSchemaBytes {
		return nil, compileErr(ErrSchemaTooLarge, "%d bytes, at most %d", len(inputSchema), MaxSchemaBytes)
	}
	orders := map[string][]string{}
	doc, err := parseValue(inputSchema, MaxSchemaDepth, orders)
	if err != nil {
		switch {
		case errors.Is(err, errTooDeep):
			return nil, compileErr(ErrSchemaTooDeep, "more than %d levels", MaxSchemaDepth)
		case errors.Is(err, errNumber):
			return nil, compileErr(ErrInvalidSchema, "a number is longer than %d characters or has an exponent over %d", MaxNumberLength, MaxExponent)
		}
		return nil, compileErr(ErrSchemaJSON, "%v", err)
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, compileErr(ErrNotObjectSchema, "the top is not a JSON object")
	}
	if err := checkObjectType(top); err != nil {
		return nil, err
	}
	hs, err := scanDoc(top)
	if err != nil {
		return nil, err
	}

	sch, err := compileLibrary(top)
	if err != nil {
		return nil, err
	}

	g, err := analyse(sch)
	if err != nil {
		return nil, err
	}

	s = &Schema{
		sch:         sch,
		propSet:     map[string]struct{}{},
		headers:     map[string]string{},
		headerPaths: hs,
		byLocation:  g.byLocation,
		orders:      orders,
		names:       map[string]string{},
		evaluations: max(1, g.evaluations),
	}
	for x := range g.ids {
		for name := range x.Properties {
			s.names[name] = name
		}
	}
	for name, path := range hs {
		if len(path) == 1 {
			s.headers[name] = path[0]
		}
	}
	s.summarise()
	s.simple = compileSimple(sch, 0)
	s.views = newViewCache(g.ids)
	s.root = s.views.get(conjuncts(sch))
	return s, nil
}

// checkObjectType enforces an object schema at the top: MCP tool arguments
// are always a JSON object.
func checkObjectType(top map[string]any) error {
	switch t := top["type"].(type) {
	case nil:
		if _, ok := top["type"]; ok {
			return compileErr(ErrNotObjectSchema, `"type" is null`)
		}
		if _, ok := top["properties"].(map[string]any); !ok {
			return compileErr(ErrNotObjectSchema, `no "type" and no "properties"`)
		}
	case string:
		if t != "object" {
			return compileErr(ErrNotObjectSchema, `"type" is %q, not "object"`, t)
		}
	case []any:
		if len(t) != 1 || t[0] != "object" {
			return compileErr(ErrNotObjectSchema, `"type" must be "object"`)
		}
	default:
		return compileErr(ErrNotObjectSchema, `"type" must be "object"`)
	}
	return nil
}

// compileLibrary compiles the parsed document with santhosh-tekuri's
// compiler, loading nothing from outside.
func compileLibrary(top map[string]any) (sch *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			sch, err = nil, compileErr(ErrInvalidSchema, "the schema compiler failed: %v", r)
		}
	}()
	var first string
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{first: &first})
	c.UseRegexpEngine(func(s string) (jsonschema.Regexp, error) { return regexp.Compile(s) })
	if err := c.AddResource(baseURL, top); err != nil {
		return nil, compileErr(ErrInvalidSchema, "%v", err)
	}
	sch, err = c.Compile(baseURL)
	if err != nil {
		var le *jsonschema.LoadURLError
		if first != "" || errors.As(err, &le) {
			ref := first
			if ref == "" {
				ref = le.URL
			}
			return nil, &CompileError{Err: ErrExternalRef, Ref: displayRef(ref), Detail: "mcpgate never fetches or reads a referenced schema; inline it under $defs"}
		}
		return nil, compileErr(ErrInvalidSchema, "%s", schemaDetail(err))
	}
	return sch, nil
}

// schemaDetail names what breaks the meta-schema: up to three of the
// innermost failures, each at its place in the inputSchema.
func schemaDetail(err error) string {
	var se *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if !errors.As(err, &se) || !errors.As(se.Err, &ve) {
		return oneLine(err.Error())
	}
	var parts []string
	var leaves func(e *jsonschema.ValidationError)
	leaves = func(e *jsonschema.ValidationError) {
		if len(parts) == 3 {
			return
		}
		if len(e.Causes) == 0 {
			parts = append(parts, e.Error())
			return
		}
		for _, c := range e.Causes {
			leaves(c)
		}
	}
	leaves(ve)
	if len(parts) == 0 {
		return oneLine(err.Error())
	}
	return oneLine(strings.Join(parts, "; "))
}

// displayRef turns a reference resolved against baseURL back into what the
// schema wrote.
func displayRef(u string) string {
	if rest, ok := strings.CutPrefix(u, "mcpgate:///"); ok {
		return rest
	}
	return u
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return clip.To(s, 300)
}

// Keywords whose value is a schema, an array of schemas or an object of
// schemas; scanDoc walks only these, so "x-mcp-header" in data (enum,
// const, default, examples) or a property named "x-mcp-header" is not
// mistaken for an annotation.
var (
	schemaKeywords    = []string{"additionalProperties", "unevaluatedProperties", "propertyNames", "contains", "not", "if", "then", "else", "items", "additionalItems", "unevaluatedItems", "contentSchema"}
	schemaArrays      = []string{"allOf", "anyOf", "oneOf", "prefixItems", "items"}
	schemaMaps        = []string{"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
	headerToken       = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
	headerParamTypes  = []string{"string", "integer", "number", "boolean"}
	errHeaderNotToken = "is not an RFC 9110 token"
)

// scanDoc counts the schema objects of the document (MaxSubschemas) and
// collects the x-mcp-header annotations: header suffix → property path.
func scanDoc(top map[string]any) (map[string][]string, error) {
	headers := map[string][]string{}
	lower := map[string]string{}
	count := 0
	var walk func(node any, path []string, reachable bool) error
	walk = func(node any, path []string, reachable bool) error {
		obj, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		count++
		if count > MaxSubschemas {
			return compileErr(ErrSchemaTooComplex, "more than %d schema objects", MaxSubschemas)
		}
		if h, ok := obj["x-mcp-header"]; ok {
			name, _ := h.(string)
			where := "/" + strings.Join(path, "/")
			switch {
			case !headerToken.MatchString(name):
				return compileErr(ErrHeaderAnnotation, "%q at %s %s", h, where, errHeaderNotToken)
			case !reachable || len(path) == 0:
				return compileErr(ErrHeaderAnnotation, "%q is not on a property reachable through \"properties\" alone", name)
			case !primitiveType(obj["type"]):
				return compileErr(ErrHeaderAnnotation, "%q is on a property whose type is not string, integer, number or boolean", name)
			}
			key := strings.ToLower(name)
			if other, dup := lower[key]; dup {
				return compileErr(ErrHeaderAnnotation, "%q and %q name the same header", other, name)
			}
			lower[key] = name
			headers[name] = slices.Clone(path)
		}
		for _, kw := range schemaKeywords {
			if err := walk(obj[kw], path, false); err != nil {
				return err
			}
		}
		for _, kw := range schemaArrays {
			if arr, ok := obj[kw].([]any); ok {
				for _, item := range arr {
					if err := walk(item, path, false); err != nil {
						return err
					}
				}
			}
		}
		for _, kw := range schemaMaps {
			m, ok := obj[kw].(map[string]any)
			if !ok {
				continue
			}
			for _, name := range sortedKeys(m) {
				var err error
				if kw == "properties" {
					err = walk(m[name], append(path[:len(path):len(path)], name), reachable)
				} else {
					err = walk(m[name], path, false)
				}
				if err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(top, nil, true); err != nil {
		return nil, err
	}
	return headers, nil
}

func primitiveType(t any) bool {
	switch t := t.(type) {
	case string:
		return slices.Contains(headerParamTypes, t)
	case []any:
		// One primitive type, optionally with "null" (a null argument
		// sends no header).
		n := 0
		for _, x := range t {
			s, _ := x.(string)
			switch {
			case s == "null":
			case slices.Contains(headerParamTypes, s):
				n++
			default:
				return false
			}
		}
		return n == 1
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// summarise fills the top-level facts: property names in schema order,
// patternProperties, required names.
func (s *Schema) summarise() {
	// Every schema that applies to the arguments object itself, except
	// under "not": the root, what it references, and the branches of
	// allOf, anyOf, oneOf, if/then/else and dependent schemas. A name any
	// of them declares is a known argument.
	seen := map[*jsonschema.Schema]bool{}
	queue := []*jsonschema.Schema{s.sch}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		if x == nil || seen[x] {
			continue
		}
		seen[x] = true
		for _, name := range s.propertyOrder(x) {
			if _, dup := s.propSet[name]; !dup {
				s.propSet[name] = struct{}{}
				s.props = append(s.props, name)
			}
		}
		for re := range x.PatternProperties {
			s.patterns = append(s.patterns, re)
		}
		queue = append(queue, x.Ref, x.RecursiveRef, x.If, x.Then, x.Else)
		if x.DynamicRef != nil {
			queue = append(queue, x.DynamicRef.Ref)
		}
		queue = append(queue, x.AllOf...)
		queue = append(queue, x.AnyOf...)
		queue = append(queue, x.OneOf...)
		for _, name := range sortedKeys(anyMap(x.DependentSchemas)) {
			queue = append(queue, x.DependentSchemas[name])
		}
	}
	for _, c := range conjuncts(s.sch) {
		for _, r := range c.Required {
			if !slices.Contains(s.required, r) {
				s.required = append(s.required, r)
			}
		}
	}
}

func anyMap[V any](m map[string]V) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// propertyOrder returns the names of x.Properties in the order the schema
// wrote them, or sorted when that order cannot be recovered (a subschema
// inside an embedded $id resource).
func (s *Schema) propertyOrder(x *jsonschema.Schema) []string {
	if len(x.Properties) == 0 {
		return nil
	}
	if i := strings.IndexByte(x.Location, '#'); i >= 0 {
		frag := x.Location[i+1:]
		if u, err := url.PathUnescape(frag); err == nil {
			frag = u
		}
		if order, ok := s.orders[frag+"/properties"]; ok && len(order) == len(x.Properties) {
			all := true
			for _, name := range order {
				if _, ok := x.Properties[name]; !ok {
					all = false
					break
				}
			}
			if all {
				return order
			}
		}
	}
	return sortedKeys(anyMap(x.Properties))
}

// Properties returns the top-level argument names in schema order: those of
// the root's "properties" first, then those declared by what the root
// references or combines (allOf, anyOf, oneOf, if/then/else). Use it as the
// "allowed" list of a refusal.
func (s *Schema) Properties() []string { return slices.Clone(s.props) }

// Required returns the top-level arguments every call must give: "required"
// of the root and of the schemas it references or lists in allOf.
func (s *Schema) Required() []string { return slices.Clone(s.required) }

// HeaderParams returns the top-level arguments marked "x-mcp-header":
// header suffix (as written, compare ignoring case) → argument name. The
// client sends the argument's value as Mcp-Param-<suffix>. nil when there
// are none.
func (s *Schema) HeaderParams() map[string]string {
	if len(s.headers) == 0 {
		return nil
	}
	out := make(map[string]string, len(s.headers))
	for k, v := range s.headers {
		out[k] = v
	}
	return out
}

// HeaderParamPaths is HeaderParams for every annotated property, nested ones
// included: header suffix → property names from the top, e.g.
// {"Region": ["target", "region"]}.
func (s *Schema) HeaderParamPaths() map[string][]string {
	out := make(map[string][]string, len(s.headerPaths))
	for k, v := range s.headerPaths {
		out[k] = slices.Clone(v)
	}
	return out
}
