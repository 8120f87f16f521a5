package args

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

func mustCompile(t testing.TB, schema string) *Schema {
	t.Helper()
	s, err := Compile([]byte(schema))
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

// only returns the single problem of r, failing otherwise.
func only(t *testing.T, r Result) Problem {
	t.Helper()
	if len(r.Problems) != 1 {
		t.Fatalf("want 1 problem, got %d: %+v", len(r.Problems), r.Problems)
	}
	return r.Problems[0]
}

func valid(t *testing.T, r Result) {
	t.Helper()
	if len(r.Problems) != 0 {
		t.Fatalf("want no problems, got %+v", r.Problems)
	}
}

const bookingSchema = `{
  "type": "object",
  "properties": {
    "booking_id": {"type": "string", "pattern": "^B-[0-9]+$"},
    "minutes":    {"type": "integer", "minimum": 1},
    "ratio":      {"type": "number"},
    "notify":     {"type": "boolean"},
    "status":     {"type": "string", "enum": ["scheduled", "in_progress", "cancelled"]},
    "ids":        {"type": "array", "items": {"type": "integer"}},
    "filter":     {"type": "object", "properties": {"limit": {"type": "integer"}, "q": {"type": "string"}}, "additionalProperties": false},
    "meta":       {"type": "object", "properties": {"source": {"type": "string"}}},
    "note":       {"type": ["string", "null"]}
  },
  "required": ["booking_id"]
}`

func TestUnknownArgumentListsAllowed(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	p := only(t, s.Check([]byte(`{"booking_id":"B-1","limitt":5}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "limitt" {
		t.Fatalf("got %+v", p)
	}
	want := []string{"booking_id", "minutes", "ratio", "notify", "status", "ids", "filter", "meta", "note"}
	if !slices.Equal(p.Allowed, want) {
		t.Errorf("Allowed = %v, want %v (schema order)", p.Allowed, want)
	}
	if !strings.HasPrefix(p.Message, `Argument "limitt" is not accepted by this tool.`) {
		t.Errorf("Message = %q", p.Message)
	}

	// A near miss gets a suggestion, and the required argument it meant is
	// reported missing too.
	r := s.Check([]byte(`{"Booking_ID":"B-1"}`), Options{})
	if len(r.Problems) != 2 || r.Problems[0].Code != CodeUnknownArgument || r.Problems[1].Code != CodeMissingArgument {
		t.Fatalf("got %+v", r.Problems)
	}
	if !strings.Contains(r.Problems[0].Message, `Did you mean "booking_id"?`) {
		t.Errorf("no suggestion: %q", r.Problems[0].Message)
	}
}

func TestUnknownArgumentRefusedEvenWithAdditionalPropertiesTrue(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":true}`)
	p := only(t, s.Check([]byte(`{"a":"x","tenant":"globex"}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "tenant" || !slices.Equal(p.Allowed, []string{"a"}) {
		t.Fatalf("got %+v", p)
	}
	// With additionalProperties false the validator reports it as well:
	// still one problem.
	s = mustCompile(t, `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`)
	p = only(t, s.Check([]byte(`{"a":"x","tenant":"globex"}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "tenant" {
		t.Fatalf("got %+v", p)
	}
}

func TestSchemaWithoutPropertiesFollowsJSONSchema(t *testing.T) {
	s := mustCompile(t, `{"type":"object","additionalProperties":{"type":"integer"}}`)
	r := s.Check([]byte(`{"anything":"5","else":7}`), Options{})
	valid(t, r)
	if string(r.Arguments) != `{"anything":5,"else":7}` {
		t.Errorf("Arguments = %s", r.Arguments)
	}
	if len(s.Properties()) != 0 {
		t.Errorf("Properties = %v", s.Properties())
	}
	// patternProperties at the top count as declared names.
	s = mustCompile(t, `{"type":"object","properties":{"a":{}},"patternProperties":{"^x-":{"type":"string"}}}`)
	valid(t, s.Check([]byte(`{"a":1,"x-trace":"t"}`), Options{}))
	if p := only(t, s.Check([]byte(`{"a":1,"y":"t"}`), Options{})); p.Code != CodeUnknownArgument {
		t.Fatalf("got %+v", p)
	}
}

func TestWrongType(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, tc := range []struct{ args, arg, expected, msg string }{
		{`{"booking_id":"B-1","minutes":true}`, "minutes", "integer", `Argument "minutes" must be an integer, got the boolean true.`},
		{`{"booking_id":"B-1","minutes":"ten"}`, "minutes", "integer", `Argument "minutes" must be an integer, got a string "ten".`},
		{`{"booking_id":"B-1","minutes":2.5}`, "minutes", "integer", `Argument "minutes" must be an integer, got the number 2.5.`},
		{`{"booking_id":7}`, "booking_id", "string", `Argument "booking_id" must be a string, got the number 7.`},
		{`{"booking_id":"B-1","note":5}`, "note", "string or null", `Argument "note" must be a string or null, got the number 5.`},
		{`{"booking_id":"B-1","filter":{"limit":"x"}}`, "filter.limit", "integer", `Argument "filter.limit" must be an integer, got a string "x".`},
		{`{"booking_id":"B-1","ids":[1,"two"]}`, "ids[1]", "integer", `Argument "ids[1]" must be an integer, got a string "two".`},
	} {
		r := s.Check([]byte(tc.args), Options{})
		p := only(t, r)
		if p.Code != CodeWrongType || p.Argument != tc.arg || p.Expected != tc.expected || p.Message != tc.msg {
			t.Errorf("%s: got %+v", tc.args, p)
		}
		if len(r.Warnings) != 0 || r.Arguments != nil {
			t.Errorf("%s: warnings %+v, arguments %s", tc.args, r.Warnings, r.Arguments)
		}
	}
}

func TestMissingRequired(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{},"b":{},"c":{"type":"object","properties":{"d":{}},"required":["d"]}},"required":["a","b"]}`)
	r := s.Check([]byte(`{"c":{}}`), Options{})
	var got []string
	for _, p := range r.Problems {
		if p.Code != CodeMissingArgument {
			t.Errorf("got %+v", p)
		}
		got = append(got, p.Argument+": "+p.Message)
	}
	want := []string{`a: Argument "a" is required.`, `b: Argument "b" is required.`, `c.d: Argument "c.d" is required.`}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if !slices.Equal(s.Required(), []string{"a", "b"}) {
		t.Errorf("Required = %v", s.Required())
	}
}

func TestEnumViolation(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	p := only(t, s.Check([]byte(`{"booking_id":"B-1","status":"done"}`), Options{}))
	if p.Code != CodeInvalidValue || p.Argument != "status" || !slices.Equal(p.Allowed, []string{"scheduled", "in_progress", "cancelled"}) {
		t.Fatalf("got %+v", p)
	}
	if p.Message != `Argument "status" must be one of "scheduled", "in_progress", "cancelled"; got a string "done".` {
		t.Errorf("Message = %q", p.Message)
	}
}

func TestOtherInvalidValues(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, tc := range []struct{ args, arg, msg string }{
		{`{"booking_id":"1001"}`, "booking_id", `Argument "booking_id" must match the pattern ^B-[0-9]+$; got "1001".`},
		{`{"booking_id":"B-1","minutes":0}`, "minutes", `Argument "minutes" must be at least 1; got 0.`},
	} {
		p := only(t, s.Check([]byte(tc.args), Options{}))
		if p.Code != CodeInvalidValue || p.Argument != tc.arg || p.Message != tc.msg {
			t.Errorf("%s: got %+v", tc.args, p)
		}
	}
}

func TestCoercions(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, tc := range []struct {
		name, args, want, code, arg string
	}{
		{"boolean true", `{"booking_id":"B-1","notify":"true"}`, `{"booking_id":"B-1","notify":true}`, CodeCoercedBoolean, "notify"},
		{"boolean false", `{"booking_id":"B-1","notify":"false"}`, `{"booking_id":"B-1","notify":false}`, CodeCoercedBoolean, "notify"},
		{"integer", `{"booking_id":"B-1","minutes":"5"}`, `{"booking_id":"B-1","minutes":5}`, CodeCoercedInteger, "minutes"},
		{"integer with zero fraction", `{"booking_id":"B-1","minutes":"5.00"}`, `{"booking_id":"B-1","minutes":5}`, CodeCoercedInteger, "minutes"},
		{"number", `{"booking_id":"B-1","ratio":"-0.25"}`, `{"booking_id":"B-1","ratio":-0.25}`, CodeCoercedNumber, "ratio"},
		{"number with exponent", `{"booking_id":"B-1","ratio":"1e-3"}`, `{"booking_id":"B-1","ratio":1e-3}`, CodeCoercedNumber, "ratio"},
		{"array", `{"booking_id":"B-1","ids":"[1, 2, 3]"}`, `{"booking_id":"B-1","ids":[1,2,3]}`, CodeParsedArray, "ids"},
		{"object", `{"booking_id":"B-1","meta":" {\"source\": \"chat\"} "}`, `{"booking_id":"B-1","meta":{"source":"chat"}}`, CodeParsedObject, "meta"},
		{"enum synonym case", `{"booking_id":"B-1","status":"Cancelled"}`, `{"booking_id":"B-1","status":"cancelled"}`, CodeEnumSynonym, "status"},
		{"enum synonym separator", `{"booking_id":"B-1","status":" In Progress "}`, `{"booking_id":"B-1","status":"in_progress"}`, CodeEnumSynonym, "status"},
		{"enum synonym dash", `{"booking_id":"B-1","status":"in-progress"}`, `{"booking_id":"B-1","status":"in_progress"}`, CodeEnumSynonym, "status"},
		{"nested integer", `{"booking_id":"B-1","filter":{"limit":"10","q":"x"}}`, `{"booking_id":"B-1","filter":{"limit":10,"q":"x"}}`, CodeCoercedInteger, "filter.limit"},
		{"array item", `{"booking_id":"B-1","ids":[1,"2"]}`, `{"booking_id":"B-1","ids":[1,2]}`, CodeCoercedInteger, "ids[1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.Check([]byte(tc.args), Options{})
			valid(t, r)
			if string(r.Arguments) != tc.want {
				t.Errorf("Arguments = %s, want %s", r.Arguments, tc.want)
			}
			if len(r.Warnings) != 1 || r.Warnings[0].Code != tc.code || r.Warnings[0].Argument != tc.arg || r.Warnings[0].Message == "" {
				t.Errorf("Warnings = %+v", r.Warnings)
			}
		})
	}
}

func TestCoercionWarningText(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	r := s.Check([]byte(`{"booking_id":"B-1","minutes":"5"}`), Options{})
	want := `Argument "minutes" was sent as the string "5" and read as the integer 5; send numbers without quotes.`
	if len(r.Warnings) != 1 || r.Warnings[0].Message != want {
		t.Errorf("Warnings = %+v", r.Warnings)
	}
}

func TestParsedArrayIsCoercedAndValidatedInside(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	r := s.Check([]byte(`{"booking_id":"B-1","ids":"[\"1\",2]"}`), Options{})
	valid(t, r)
	if string(r.Arguments) != `{"booking_id":"B-1","ids":[1,2]}` {
		t.Errorf("Arguments = %s", r.Arguments)
	}
	if len(r.Warnings) != 2 || r.Warnings[0].Code != CodeParsedArray || r.Warnings[1].Code != CodeCoercedInteger || r.Warnings[1].Argument != "ids[0]" {
		t.Errorf("Warnings = %+v", r.Warnings)
	}
	// The parsed value must itself validate.
	p := only(t, s.Check([]byte(`{"booking_id":"B-1","ids":"[1,\"x\"]"}`), Options{}))
	if p.Code != CodeWrongType || p.Argument != "ids[1]" {
		t.Errorf("got %+v", p)
	}
	// Nested unknown member inside a parsed object under additionalProperties: false.
	p = only(t, s.Check([]byte(`{"booking_id":"B-1","filter":"{\"limit\":1,\"colour\":\"red\"}"}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "filter.colour" {
		t.Errorf("got %+v", p)
	}
}

func TestEnumSynonymNotForWrites(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	r := s.Check([]byte(`{"booking_id":"B-1","status":"Cancelled"}`), Options{Write: true})
	p := only(t, r)
	if p.Code != CodeInvalidValue || p.Argument != "status" {
		t.Fatalf("got %+v", p)
	}
	if !strings.Contains(p.Message, `Did you mean "cancelled"?`) {
		t.Errorf("Message = %q", p.Message)
	}
	if r.Arguments != nil || len(r.Warnings) != 0 {
		t.Errorf("coerced for a write: %s %+v", r.Arguments, r.Warnings)
	}
	// Type coercions do not change meaning and still apply to writes.
	r = s.Check([]byte(`{"booking_id":"B-1","minutes":"5","notify":"true"}`), Options{Write: true})
	valid(t, r)
	if string(r.Arguments) != `{"booking_id":"B-1","minutes":5,"notify":true}` {
		t.Errorf("Arguments = %s", r.Arguments)
	}
}

func TestCoercionThatWouldStillBeInvalid(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, tc := range []struct{ arg, value, expected string }{
		{"minutes", `"abc"`, "integer"},
		{"minutes", `"5.5"`, "integer"},
		{"minutes", `"1e3"`, "integer"},
		{"minutes", `"+5"`, "integer"},
		{"minutes", `" 5"`, "integer"},
		{"minutes", `"05"`, "integer"},
		{"minutes", `""`, "integer"},
		{"ratio", `"NaN"`, "number"},
		{"ratio", `"Infinity"`, "number"},
		{"ratio", `"0x10"`, "number"},
		{"ratio", `"1."`, "number"},
		{"notify", `"True"`, "boolean"},
		{"notify", `"yes"`, "boolean"},
		{"notify", `"1"`, "boolean"},
		{"ids", `"1,2"`, "array"},
		{"ids", `"[1,2"`, "array"},
		{"ids", `"{\"a\":1}"`, "array"},
		{"meta", `"[1]"`, "object"},
		{"meta", `"{\"a\":1,\"a\":2}"`, "object"}, // duplicate names stay refused
	} {
		args := fmt.Sprintf(`{"booking_id":"B-1",%q:%s}`, tc.arg, tc.value)
		r := s.Check([]byte(args), Options{})
		p := only(t, r)
		if p.Code != CodeWrongType || p.Argument != tc.arg || p.Expected != tc.expected {
			t.Errorf("%s: got %+v", args, p)
		}
		if len(r.Warnings) != 0 || r.Arguments != nil {
			t.Errorf("%s: warnings %+v, arguments %s", args, r.Warnings, r.Arguments)
		}
	}
	// A number is never turned into a string.
	p := only(t, s.Check([]byte(`{"booking_id":1001}`), Options{}))
	if p.Code != CodeWrongType {
		t.Errorf("got %+v", p)
	}
	// Ambiguous types are not coerced: "5" may be meant as the string.
	s = mustCompile(t, `{"type":"object","properties":{"x":{"anyOf":[{"type":"integer"},{"type":"boolean"}]},"y":{"type":["integer","boolean"]}}}`)
	r := s.Check([]byte(`{"x":"5","y":"true"}`), Options{})
	if len(r.Warnings) != 0 || len(r.Problems) != 2 {
		t.Errorf("got %+v", r)
	}
	// An enum value two synonyms away is not guessed.
	s = mustCompile(t, `{"type":"object","properties":{"m":{"enum":["a_b","a-b"]}}}`)
	r = s.Check([]byte(`{"m":"A B"}`), Options{})
	if len(r.Warnings) != 0 || len(r.Problems) != 1 {
		t.Errorf("got %+v", r)
	}
}

func TestNotAnObject(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, args := range []string{`null`, `[]`, `[{"booking_id":"B-1"}]`, `"x"`, `5`, `true`} {
		p := only(t, s.Check([]byte(args), Options{}))
		if p.Code != CodeNotAnObject || p.Argument != "" || !strings.HasPrefix(p.Message, "The arguments must be a JSON object") {
			t.Errorf("%s: got %+v", args, p)
		}
	}
	for _, args := range []string{`{"a":`, `{"booking_id":"B-1","booking_id":"B-2"}`, "{\"booking_id\":\"\xff\"}", `{} {}`} {
		p := only(t, s.Check([]byte(args), Options{}))
		if p.Code != CodeInvalid || !strings.HasPrefix(p.Message, "The arguments are not valid JSON") {
			t.Errorf("%q: got %+v", args, p)
		}
	}
	// Absent arguments are an empty object.
	p := only(t, s.Check(nil, Options{}))
	if p.Code != CodeMissingArgument || p.Argument != "booking_id" {
		t.Errorf("got %+v", p)
	}
}

func TestNestedUnknownField(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	p := only(t, s.Check([]byte(`{"booking_id":"B-1","filter":{"limit":1,"colour":"red"}}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "filter.colour" || !slices.Equal(p.Allowed, []string{"limit", "q"}) {
		t.Errorf("got %+v", p)
	}
	// "meta" has no additionalProperties: nested extras follow the schema.
	valid(t, s.Check([]byte(`{"booking_id":"B-1","meta":{"source":"chat","extra":1}}`), Options{}))
	// unevaluatedProperties: false closes an object too.
	s = mustCompile(t, `{"type":"object","properties":{"o":{"type":"object","allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}}}`)
	p = only(t, s.Check([]byte(`{"o":{"a":1,"b":2}}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "o.b" {
		t.Errorf("got %+v", p)
	}
}

// countingServer counts every request it gets.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/schema+json")
		fmt.Fprint(w, `{"type":"string"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestRemoteRefRefused(t *testing.T) {
	srv, hits := countingServer(t)
	tls := httptest.NewTLSServer(srv.Config.Handler)
	t.Cleanup(tls.Close)

	// A real schema file that would make compilation succeed if read.
	dir := t.TempDir()
	file := filepath.Join(dir, "defs.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)

	prop := func(ref string) string {
		return fmt.Sprintf(`{"type":"object","properties":{"x":{"$ref":%q}}}`, ref)
	}
	for _, tc := range []struct{ name, schema, ref string }{
		{"http", prop(srv.URL + "/s.json"), srv.URL + "/s.json"},
		{"https", prop(tls.URL + "/s.json#/defs/a"), tls.URL + "/s.json"},
		{"file URL", prop("file://" + file), "file://" + file},
		{"relative file", prop("defs.json"), "defs.json"},
		{"relative with fragment", prop("./defs.json#/x"), "defs.json"},
		{"parent path", prop("../etc/passwd"), "etc/passwd"},
		{"undefined urn", prop("urn:example:nothing"), "urn:example:nothing"},
		{"$schema", fmt.Sprintf(`{"$schema":%q,"type":"object","properties":{}}`, srv.URL+"/meta"), srv.URL + "/meta"},
		{"relative to $id", `{"$id":"` + srv.URL + `/root.json","type":"object","properties":{"x":{"$ref":"other.json"}}}`, srv.URL + "/other.json"},
		{"in $defs, referenced", `{"type":"object","$defs":{"a":{"$ref":"` + srv.URL + `"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`, srv.URL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Compile([]byte(tc.schema))
			if !errors.Is(err, ErrExternalRef) {
				t.Fatalf("err = %v, want ErrExternalRef", err)
			}
			var ce *CompileError
			if !errors.As(err, &ce) || !strings.HasPrefix(ce.Ref, tc.ref) {
				t.Errorf("Ref = %q, want %q…", ce.Ref, tc.ref)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the test servers got %d requests", n)
	}
}

func TestLocalRefs(t *testing.T) {
	s := mustCompile(t, `{
	  "type": "object",
	  "$defs": {
	    "count": {"type": "integer", "minimum": 0},
	    "window": {"type": "object", "properties": {"from": {"$ref": "#/$defs/count"}, "to": {"$ref": "#count"}}, "additionalProperties": false},
	    "anchored": {"$anchor": "count", "type": "integer"},
	    "byURN": {"$id": "urn:example:level", "enum": ["low", "high"]}
	  },
	  "properties": {
	    "limit": {"$ref": "#/$defs/count"},
	    "window": {"$ref": "#/$defs/window"},
	    "level": {"$ref": "urn:example:level"},
	    "tags": {"type": "array", "items": {"allOf": [{"$ref": "#/$defs/count"}]}}
	  }
	}`)
	r := s.Check([]byte(`{"limit":"3","window":{"from":"1","to":"2"},"level":"HIGH","tags":["4"]}`), Options{})
	valid(t, r)
	if string(r.Arguments) != `{"limit":3,"window":{"from":1,"to":2},"level":"high","tags":[4]}` {
		t.Errorf("Arguments = %s", r.Arguments)
	}
	p := only(t, s.Check([]byte(`{"limit":-1}`), Options{}))
	if p.Code != CodeInvalidValue || p.Argument != "limit" {
		t.Errorf("got %+v", p)
	}
	p = only(t, s.Check([]byte(`{"window":{"from":1,"until":2}}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "window.until" || !slices.Equal(p.Allowed, []string{"from", "to"}) {
		t.Errorf("got %+v", p)
	}
}

func TestRecursiveSchema(t *testing.T) {
	s := mustCompile(t, `{
	  "type": "object",
	  "$defs": {"node": {"type": "object", "properties": {"name": {"type": "string"}, "size": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "additionalProperties": false}},
	  "properties": {"tree": {"$ref": "#/$defs/node"}}
	}`)
	r := s.Check([]byte(`{"tree":{"name":"a","children":[{"name":"b","size":"2","children":[{"name":"c","colour":1}]}]}}`), Options{})
	p := only(t, r)
	if p.Code != CodeUnknownArgument || p.Argument != "tree.children[0].children[0].colour" {
		t.Errorf("got %+v", p)
	}
	if len(r.Warnings) != 1 || r.Warnings[0].Argument != "tree.children[0].size" {
		t.Errorf("Warnings = %+v", r.Warnings)
	}
}

func TestEarlierDrafts(t *testing.T) {
	s := mustCompile(t, `{
	  "$schema": "http://json-schema.org/draft-07/schema#",
	  "type": "object",
	  "definitions": {"n": {"type": "integer", "exclusiveMinimum": 0}},
	  "properties": {
	    "n": {"$ref": "#/definitions/n", "type": "string"},
	    "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}], "additionalItems": false}
	  }
	}`)
	// Draft 7 ignores keywords beside $ref: "n" is an integer.
	r := s.Check([]byte(`{"n":"4","pair":["a","2"]}`), Options{})
	valid(t, r)
	if string(r.Arguments) != `{"n":4,"pair":["a",2]}` {
		t.Errorf("Arguments = %s", r.Arguments)
	}
	p := only(t, s.Check([]byte(`{"n":0}`), Options{}))
	if p.Code != CodeInvalidValue || p.Message != `Argument "n" must be greater than 0; got 0.` {
		t.Errorf("got %+v", p)
	}
	p = only(t, s.Check([]byte(`{"pair":["a",1,true]}`), Options{}))
	if p.Code != CodeInvalidValue || p.Argument != "pair" {
		t.Errorf("got %+v", p)
	}
	// Draft 4: boolean exclusiveMaximum.
	s = mustCompile(t, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"p":{"type":"integer","maximum":10,"exclusiveMaximum":true}}}`)
	if p := only(t, s.Check([]byte(`{"p":10}`), Options{})); p.Code != CodeInvalidValue {
		t.Errorf("got %+v", p)
	}
	// Draft 7 asserts format; 2020-12 treats it as an annotation.
	s = mustCompile(t, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"at":{"type":"string","format":"date-time"}}}`)
	if p := only(t, s.Check([]byte(`{"at":"tomorrow"}`), Options{})); p.Code != CodeInvalidValue || p.Message != `Argument "at" must be a valid date-time; got a string "tomorrow".` {
		t.Errorf("got %+v", p)
	}
	s = mustCompile(t, `{"type":"object","properties":{"at":{"type":"string","format":"date-time"}}}`)
	valid(t, s.Check([]byte(`{"at":"tomorrow"}`), Options{}))
}

func TestHugeSchemaRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; b.Len() <= MaxSchemaBytes; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","description":"%s"}`, i, strings.Repeat("x", 200))
	}
	b.WriteString(`}}`)
	if _, err := Compile([]byte(b.String())); !errors.Is(err, ErrSchemaTooLarge) {
		t.Errorf("err = %v", err)
	}

	// Under the byte cap, but too many subschemas.
	b.Reset()
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; i <= MaxSubschemas; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%d":{}`, i)
	}
	b.WriteString(`}}`)
	start := time.Now()
	if _, err := Compile([]byte(b.String())); !errors.Is(err, ErrSchemaTooComplex) {
		t.Errorf("err = %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
}

func TestLargeButAllowedSchemaCompilesQuickly(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := 0; i < MaxSubschemas-10; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"integer"}`, i)
	}
	b.WriteString(`}}`)
	start := time.Now()
	s := mustCompile(t, b.String())
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Compile took %v", d)
	}
	r := s.Check([]byte(`{"p7":"7"}`), Options{})
	valid(t, r)
}

func nested(depth int) string {
	return `{"type":"object","properties":{"x":` + strings.Repeat(`{"type":"object","properties":{"x":`, depth) + `{}` + strings.Repeat(`}}`, depth) + `}}`
}

func TestDeepSchema(t *testing.T) {
	if _, err := Compile([]byte(nested(10))); err != nil {
		t.Errorf("10 levels: %v", err)
	}
	_, err := Compile([]byte(nested(40)))
	if !errors.Is(err, ErrSchemaTooDeep) {
		t.Errorf("40 levels: err = %v", err)
	}
	_, err = Compile([]byte(strings.Repeat("[", 100000) + strings.Repeat("]", 100000)))
	if !errors.Is(err, ErrSchemaTooDeep) {
		t.Errorf("deep array: err = %v", err)
	}
}

func TestDeepArguments(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"x":{}}}`)
	args := `{"x":` + strings.Repeat("[", MaxArgumentDepth+5) + strings.Repeat("]", MaxArgumentDepth+5) + `}`
	p := only(t, s.Check([]byte(args), Options{}))
	if p.Code != CodeInvalid || !strings.Contains(p.Message, "nested more than") {
		t.Errorf("got %+v", p)
	}
	ok := `{"x":` + strings.Repeat("[", MaxArgumentDepth-1) + strings.Repeat("]", MaxArgumentDepth-1) + `}`
	valid(t, s.Check([]byte(ok), Options{}))
}

func TestHugeNumbers(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"n":{"type":"number","minimum":0,"multipleOf":0.5}}}`)
	// Beyond float64's range: an upstream would read infinity (or fail).
	for _, n := range []string{"1e999999", "1e-1001", strings.Repeat("9", 100000), "1e400", "9e308", "-2e308"} {
		start := time.Now()
		p := only(t, s.Check([]byte(`{"n":`+n+`}`), Options{}))
		if p.Code != CodeInvalidValue || p.Argument != "n" {
			t.Errorf("%.20s: got %+v", n, p)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%.20s: took %v", n, d)
		}
	}
	valid(t, s.Check([]byte(`{"n":1e3}`), Options{}))
	valid(t, s.Check([]byte(`{"n":1.5e308}`), Options{}))
	if _, err := Compile([]byte(`{"type":"object","properties":{"n":{"maximum":1e99999}}}`)); !errors.Is(err, ErrInvalidSchema) {
		t.Errorf("schema number: err = %v", err)
	}
}

func TestInvalidPattern(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"a":{"type":"string","pattern":"(?<=x)y"}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"["}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":"(a)\\1"}}}`,
		`{"type":"object","properties":{"a":{}},"patternProperties":{"(?!x)":{}}}`,
		`{"type":"object","properties":{"a":{"type":"string","pattern":5}}}`,
	} {
		_, err := Compile([]byte(schema))
		if !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: err = %v", schema, err)
		}
	}
}

func TestRefCycleRefused(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		`{"type":"object","properties":{"x":{}},"allOf":[{"$ref":"#"}]}`,
		`{"type":"object","properties":{"x":{"anyOf":[{"$ref":"#/properties/x"}]}}}`,
	} {
		done := make(chan error, 1)
		go func() { _, err := Compile([]byte(schema)); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrRefCycle) {
				t.Errorf("%s: err = %v", schema, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: Compile hangs", schema)
		}
	}
}

func TestExponentialSchemaRefused(t *testing.T) {
	// Each level applies the next one twice to the same value: 2^30 checks.
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{"x":{"$ref":"#/$defs/d0"}},"$defs":{`)
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, `"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]},`, i, i+1, i+1)
	}
	b.WriteString(`"d30":{"type":"string"}}}`)
	if _, err := Compile([]byte(b.String())); !errors.Is(err, ErrSchemaTooComplex) {
		t.Errorf("same-level blow-up: err = %v", err)
	}
	// Two subschemas per level on a recursive schema: 2^depth checks.
	schema := `{"type":"object","properties":{"x":{"$ref":"#/$defs/n"}},"$defs":{"n":{"allOf":[{"properties":{"x":{"$ref":"#/$defs/n"}}},{"properties":{"x":{"$ref":"#/$defs/n"}}}]}}}`
	if _, err := Compile([]byte(schema)); !errors.Is(err, ErrSchemaTooComplex) {
		t.Errorf("per-level blow-up: err = %v", err)
	}
}

func TestNotObjectSchema(t *testing.T) {
	for _, schema := range []string{`true`, `[]`, `"object"`, `{"type":"string"}`, `{"type":["object","null"]}`, `{"type":null,"properties":{}}`, `{"$ref":"#/$defs/a","$defs":{"a":{"type":"object"}}}`, `{}`} {
		if _, err := Compile([]byte(schema)); !errors.Is(err, ErrNotObjectSchema) {
			t.Errorf("%s: err = %v", schema, err)
		}
	}
	for _, schema := range []string{`{"type":"object"}`, `{"properties":{"a":{}}}`, `{"type":["object"]}`} {
		if _, err := Compile([]byte(schema)); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
	for _, schema := range []string{`{"type":"object",}`, `{"type":"object","type":"object"}`, "{\"type\":\"object\",\"description\":\"\xff\"}"} {
		if _, err := Compile([]byte(schema)); !errors.Is(err, ErrSchemaJSON) {
			t.Errorf("%s: err = %v", schema, err)
		}
	}
}

func TestHeaderParams(t *testing.T) {
	s := mustCompile(t, `{
	  "type": "object",
	  "properties": {
	    "region": {"type": "string", "x-mcp-header": "Region"},
	    "priority": {"type": "integer", "x-mcp-header": "Priority"},
	    "target": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}},
	    "x-mcp-header": {"type": "string", "enum": [{"x-mcp-header": "data"}]},
	    "query": {"type": "string"}
	  }
	}`)
	want := map[string]string{"Region": "region", "Priority": "priority"}
	got := s.HeaderParams()
	if len(got) != len(want) || got["Region"] != "region" || got["Priority"] != "priority" {
		t.Errorf("HeaderParams = %v", got)
	}
	if paths := s.HeaderParamPaths(); !slices.Equal(paths["Zone"], []string{"target", "zone"}) || len(paths) != 3 {
		t.Errorf("HeaderParamPaths = %v", paths)
	}
	for _, tc := range []struct{ name, schema string }{
		{"not a token", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Bad Name"}}}`},
		{"empty", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`},
		{"not a string", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":5}}}`},
		{"duplicate ignoring case", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"region"}}}`},
		{"object property", `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`},
		{"untyped property", `{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}`},
		{"under items", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`},
		{"under anyOf", `{"type":"object","properties":{"a":{"anyOf":[{"type":"string","x-mcp-header":"A"}]}}}`},
		{"under $defs", `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"type":"string","x-mcp-header":"A"}}}`},
		{"on the root", `{"type":"object","x-mcp-header":"A","properties":{}}`},
	} {
		if _, err := Compile([]byte(tc.schema)); !errors.Is(err, ErrHeaderAnnotation) {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
}

func TestPropertiesKeepSchemaOrder(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"zeta":{},"alpha":{},"mid":{}},"allOf":[{"properties":{"beta":{},"alpha":{}}}],"anyOf":[{"properties":{"gamma":{}}},{}]}`)
	if got, want := s.Properties(), []string{"zeta", "alpha", "mid", "beta", "gamma"}; !slices.Equal(got, want) {
		t.Errorf("Properties = %v, want %v", got, want)
	}
	// Properties returns a copy.
	s.Properties()[0] = "changed"
	if s.Properties()[0] != "zeta" {
		t.Error("Properties shares its slice")
	}
}

func TestMemberOrderPreserved(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"object","properties":{"y":{"type":"boolean"},"b":{}}},"m":{},"z":{"type":"integer"}}}`)
	args := `{ "z" : "1", "m" : {"k2": 1, "k1": [3, 2, 1], "s": "\u00e9\u2028"}, "a" : {"y":"true","b":2.50} }`
	r := s.Check([]byte(args), Options{})
	valid(t, r)
	want := `{"z":1,"m":{"k2":1,"k1":[3,2,1],"s":"\u00e9\u2028"},"a":{"y":true,"b":2.50}}`
	if string(r.Arguments) != want {
		t.Errorf("Arguments =\n%s\nwant\n%s", r.Arguments, want)
	}
}

func TestUnchangedArgumentsAreNil(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	for _, args := range []string{`{"booking_id":"B-1","minutes":5,"status":"in_progress"}`, `{"booking_id":"B-1","notify":true}`, `{"booking_id":"B-1","minutes":"x"}`} {
		r := s.Check([]byte(args), Options{})
		if r.Arguments != nil || len(r.Warnings) != 0 {
			t.Errorf("%s: Arguments = %s, Warnings = %+v", args, r.Arguments, r.Warnings)
		}
	}
}

func TestProblemsSortedAndCapped(t *testing.T) {
	var props, req []string
	for i := 0; i < 30; i++ {
		props = append(props, fmt.Sprintf(`"p%02d":{}`, i))
		req = append(req, fmt.Sprintf(`"p%02d"`, i))
	}
	s := mustCompile(t, `{"type":"object","properties":{`+strings.Join(props, ",")+`},"required":[`+strings.Join(req, ",")+`]}`)
	r := s.Check([]byte(`{"zz":1,"aa":2}`), Options{})
	if len(r.Problems) != MaxProblems {
		t.Fatalf("%d problems", len(r.Problems))
	}
	last := r.Problems[MaxProblems-1]
	if last.Code != CodeInvalid || last.Message != "13 more problems are not listed; fix these first." {
		t.Errorf("last = %+v", last)
	}
	for i := 1; i < MaxProblems-1; i++ {
		if r.Problems[i-1].Argument > r.Problems[i].Argument {
			t.Errorf("not sorted: %q before %q", r.Problems[i-1].Argument, r.Problems[i].Argument)
		}
	}
	if r.Problems[0].Argument != "aa" || r.Problems[0].Code != CodeUnknownArgument {
		t.Errorf("first = %+v", r.Problems[0])
	}
}

func TestAlternatives(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
	  "id": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
	  "target": {"oneOf": [
	    {"type": "object", "properties": {"kind": {"const": "user"}, "user_id": {"type": "string"}}, "required": ["kind", "user_id"]},
	    {"type": "string", "pattern": "^team:"}
	  ]}
	}}`)
	p := only(t, s.Check([]byte(`{"id":true}`), Options{}))
	if p.Code != CodeWrongType || p.Expected != "string or integer" || p.Message != `Argument "id" must be a string or an integer, got the boolean true.` {
		t.Errorf("got %+v", p)
	}
	// The value is an object: only the object alternative fits its type, so
	// its own problem is the one reported.
	p = only(t, s.Check([]byte(`{"target":{"kind":"user"}}`), Options{}))
	if p.Code != CodeMissingArgument || p.Argument != "target.user_id" {
		t.Errorf("got %+v", p)
	}
	p = only(t, s.Check([]byte(`{"target":5}`), Options{}))
	if p.Code != CodeWrongType || p.Expected != "object or string" {
		t.Errorf("got %+v", p)
	}
}

func TestConcurrentCheck(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{
	  "n": {"type": "integer"},
	  "status": {"enum": ["open", "closed"]},
	  "labels": {"type": "object", "patternProperties": {"^l_": {"type": "boolean"}}, "additionalProperties": {"type": "number"}},
	  "rows": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "integer"}}}}
	}}`)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				args := fmt.Sprintf(`{"n":"%d","status":"Open","labels":{"l_%d":"true","w%d":"1.5"},"rows":"[{\"k\":\"%d\"}]"}`, i, g, i, g)
				r := s.Check([]byte(args), Options{})
				if len(r.Problems) != 0 || len(r.Warnings) != 6 {
					t.Errorf("got %+v", r)
					return
				}
				want := fmt.Sprintf(`{"n":%d,"status":"open","labels":{"l_%d":true,"w%d":1.5},"rows":[{"k":%d}]}`, i, g, i, g)
				if string(r.Arguments) != want {
					t.Errorf("Arguments = %s, want %s", r.Arguments, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestCompileErrorText(t *testing.T) {
	_, err := Compile([]byte(`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json"}}}`))
	if err == nil || !strings.Contains(err.Error(), `"https://example.com/s.json"`) {
		t.Errorf("err = %v", err)
	}
}

func TestToolWithoutArguments(t *testing.T) {
	s := mustCompile(t, `{"type":"object","additionalProperties":false}`)
	valid(t, s.Check([]byte(`{}`), Options{}))
	p := only(t, s.Check([]byte(`{"verbose":true}`), Options{}))
	if p.Code != CodeUnknownArgument || p.Argument != "verbose" || len(p.Allowed) != 0 ||
		p.Message != `Argument "verbose" is not accepted by this tool. Remove it.` {
		t.Errorf("got %+v", p)
	}
}

func TestWorkBound(t *testing.T) {
	var alts []string
	for i := 0; i < 100; i++ {
		alts = append(alts, fmt.Sprintf(`{"type":"integer","minimum":%d}`, i))
	}
	heavy := mustCompile(t, `{"type":"object","properties":{"rows":{"type":"array","items":{"anyOf":[`+strings.Join(alts, ",")+`]}}}}`)
	light := mustCompile(t, `{"type":"object","properties":{"rows":{"type":"array","items":{"type":"integer"}}}}`)
	rows := strings.Repeat("1,", 60000) + "1"
	args := []byte(`{"rows":[` + rows + `]}`)
	start := time.Now()
	p := only(t, heavy.Check(args, Options{}))
	if p.Code != CodeInvalid || !strings.Contains(p.Message, "too many to check") {
		t.Errorf("got %+v", p)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusing took %v", d)
	}
	valid(t, light.Check(args, Options{}))
}

func TestDynamicRefSchema(t *testing.T) {
	s := mustCompile(t, `{
	  "type": "object",
	  "$dynamicAnchor": "node",
	  "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$dynamicRef": "#node"}}}
	}`)
	valid(t, s.Check([]byte(`{"name":"a","kids":[{"name":"b","kids":[]}]}`), Options{}))
	p := only(t, s.Check([]byte(`{"kids":[{"name":5}]}`), Options{}))
	if p.Code != CodeWrongType || p.Argument != "kids[0].name" {
		t.Errorf("got %+v", p)
	}
}

func TestInvalidSchema(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","properties":{"x":{"$ref":"#/$defs/nope"}}}`,
		`{"type":"object","properties":{"x":{"type":"strin"}}}`,
		`{"type":"object","properties":{"x":{"minLength":-1}}}`,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"x":{"type":"string","pattern":"(?<=x)"}}}`,
	} {
		_, err := Compile([]byte(schema))
		if !errors.Is(err, ErrInvalidSchema) {
			t.Errorf("%s: err = %v", schema, err)
		} else if !strings.Contains(err.Error(), "/properties/x") && !strings.Contains(err.Error(), "nope") {
			t.Errorf("%s: error does not say where: %v", schema, err)
		}
	}
}

func TestUnknownArgumentIsNotCoerced(t *testing.T) {
	s := mustCompile(t, `{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`)
	r := s.Check([]byte(`{"a":"1","b":"2"}`), Options{})
	p := only(t, r)
	if p.Code != CodeUnknownArgument || p.Argument != "b" {
		t.Errorf("got %+v", p)
	}
	if len(r.Warnings) != 1 || r.Warnings[0].Argument != "a" {
		t.Errorf("Warnings = %+v", r.Warnings)
	}
}

func TestWorkBoundCountsParsedStrings(t *testing.T) {
	var alts []string
	for i := 0; i < 100; i++ {
		alts = append(alts, fmt.Sprintf(`{"type":"integer","minimum":%d}`, i))
	}
	heavy := mustCompile(t, `{"type":"object","properties":{"rows":{"type":"array","items":{"anyOf":[`+strings.Join(alts, ",")+`]}}}}`)
	args := []byte(`{"rows":"[` + strings.Repeat("1,", 60000) + `1]"}`)
	p := only(t, heavy.Check(args, Options{}))
	if p.Code != CodeInvalid || !strings.Contains(p.Message, "too many to check") {
		t.Errorf("got %+v", p)
	}
}

// TestEchoedNamesCutOnRunes: an unknown argument's long name is repeated
// cut before a multi-byte character, never inside it.
func TestEchoedNamesCutOnRunes(t *testing.T) {
	s := mustCompile(t, bookingSchema)
	name := strings.Repeat("a", 63) + "é" + strings.Repeat("b", 20)
	r := s.Check([]byte(`{"booking_id":"B-1","`+name+`":1}`), Options{})
	if len(r.Problems) == 0 {
		t.Fatal("accepted")
	}
	msg := r.Problems[0].Message
	if !strings.Contains(msg, `"`+strings.Repeat("a", 63)+`…"`) || !utf8.ValidString(msg) || strings.ContainsRune(msg, utf8.RuneError) {
		t.Errorf("message %q", msg)
	}
}
