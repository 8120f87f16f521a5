package args

import (
	"reflect"
	"testing"
)

// simpleSchemas use only keywords simple.go checks (each must compile to
// a simple form); otherSchemas use at least one it does not.
var simpleSchemas = []string{
	`{"type":"object","properties":{"service":{"type":"string"}},"required":["service"]}`,
	`{"type":"object","properties":{"service":{"type":"string"}},"required":["service"],"additionalProperties":false}`,
	benchSchema,
	`{"type":"object","properties":{
		"n":{"type":"integer","minimum":-3,"exclusiveMaximum":10},
		"x":{"type":"number","maximum":5,"exclusiveMinimum":-5},
		"b":{"type":["boolean","null"]},
		"tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":3},"minItems":1,"maxItems":2},
		"filter":{"type":"object","properties":{"limit":{"type":"integer"}},"required":["limit"],"additionalProperties":false,"minProperties":1,"maxProperties":2},
		"meta":{"type":"object","additionalProperties":{"type":"string","enum":["a","b"]}},
		"any":{"description":"anything"},
		"day":{"type":"string","format":"date"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"ids":{"type":"array","items":{"type":"integer"}},"email":{"type":"string","format":"email"}},"required":["ids"]}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"n":{"type":"integer","minimum":0,"exclusiveMinimum":true}}}`,
}

var otherSchemas = []string{
	`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.5}}}`,
	`{"type":"object","properties":{"n":{"type":"integer","minimum":0.5}}}`,
	`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"integer"}]}}}`,
	`{"type":"object","$defs":{"s":{"type":"string"}},"properties":{"a":{"$ref":"#/$defs/s"}}}`,
	`{"type":"object","properties":{"l":{"type":"array","uniqueItems":true}}}`,
	`{"type":"object","properties":{"l":{"type":"array","prefixItems":[{"type":"string"}]}}}`,
	`{"type":"object","properties":{"c":{"const":"x"}}}`,
	`{"type":"object","properties":{"e":{"enum":["a",1]}}}`,
	`{"type":"object","properties":{"a":true}}`,
	`{"type":"object","patternProperties":{"^x-":{"type":"string"}}}`,
	`{"type":"object","properties":{"a":{"type":"string"}},"dependentRequired":{"a":["b"]}}`,
	`{"type":"object","properties":{"a":{"type":"object","unevaluatedProperties":false}}}`,
}

// simpleValues are arguments for the schemas above, valid and invalid,
// with the values coercion can make (strings of numbers and booleans).
var simpleValues = []string{
	`{}`,
	`{"service":"db"}`, `{"service":5}`, `{"service":"db","extra":1}`, `{"service":null}`,
	`{"booking_id":"B-1001","start":"x","notes":"Ring twice.","status":"confirmed","minutes":30}`,
	`{"booking_id":"B-1001","minutes":0}`, `{"booking_id":"B-1001","minutes":1441}`, `{"booking_id":"B-1001","minutes":30.0}`,
	`{"booking_id":"1001"}`, `{"booking_id":"B-1","status":"done"}`, `{"booking_id":"B-1","minutes":"30"}`,
	`{"n":-3}`, `{"n":-4}`, `{"n":9}`, `{"n":10}`, `{"n":1e1}`, `{"n":2.0}`, `{"n":"5"}`, `{"n":0}`, `{"n":-0}`,
	`{"n":99999999999999999999}`, `{"n":-9223372036854775808}`,
	`{"x":4.5}`, `{"x":5}`, `{"x":-5}`, `{"x":1e0}`, `{"b":true}`, `{"b":null}`, `{"b":"true"}`,
	`{"tags":["a"]}`, `{"tags":[]}`, `{"tags":["a","b","c"]}`, `{"tags":[""]}`, `{"tags":["abcd"]}`, `{"tags":["äöü"]}`, `{"tags":[1]}`,
	`{"filter":{"limit":3}}`, `{"filter":{}}`, `{"filter":{"limit":3,"other":1}}`, `{"filter":{"limit":"3"}}`,
	`{"meta":{"k":"a"}}`, `{"meta":{"k":"c"}}`, `{"meta":{"k":1}}`,
	`{"any":[1,{"a":null}]}`, `{"day":"2026-01-31"}`, `{"day":"2026-02-31"}`, `{"day":5}`,
	`{"ids":[1,2]}`, `{"ids":[1.5]}`, `{"ids":"[1]"}`, `{"email":"a@b.c","ids":[]}`, `{"email":"nope","ids":[]}`,
	`{"a":"x"}`, `{"a":1}`, `{"a":{"z":1}}`, `{"l":[1,1]}`, `{"c":"x"}`, `{"e":1}`, `{"x-a":"1"}`,
}

// The simple form says "valid" only where the validator agrees, says it
// for valid arguments of simple schemas (so the shortcut is taken), and
// Check's result is the same with and without it.
func TestSimpleMatchesValidator(t *testing.T) {
	shortcuts := 0
	for i, src := range append(append([]string{}, simpleSchemas...), otherSchemas...) {
		s := mustCompile(t, src)
		if wantSimple := i < len(simpleSchemas); (s.simple != nil) != wantSimple {
			t.Errorf("schema %d: simple form %v, want %v: %s", i, s.simple != nil, wantSimple, src)
		}
		slow := *s
		slow.simple = nil
		for _, a := range simpleValues {
			for _, write := range []bool{false, true} {
				fast, ref := s.Check([]byte(a), Options{Write: write}), slow.Check([]byte(a), Options{Write: write})
				if !reflect.DeepEqual(fast, ref) {
					t.Errorf("schema %d, %s: Check with the simple form\n%+v\nwithout\n%+v", i, a, fast, ref)
				}
			}
			if s.simple == nil {
				continue
			}
			v, _, err := parseInterned([]byte(a), MaxArgumentDepth, nil, s.names)
			if err != nil {
				t.Fatal(err)
			}
			if s.simple.valid(v) {
				shortcuts++
				if err := s.sch.Validate(v); err != nil {
					t.Errorf("schema %d, %s: simple form says valid, validator says %v", i, a, err)
				}
			}
		}
	}
	if shortcuts < 10 {
		t.Errorf("the shortcut was taken %d times, want at least 10", shortcuts)
	}
}

// The validator is not run for valid arguments of a simple schema: a
// Check costs a handful of allocations (parse, result), not the
// validator's dozen.
func TestSimpleCheckAllocations(t *testing.T) {
	s := mustCompile(t, simpleSchemas[1])
	args := []byte(`{"service":"db"}`)
	if r := s.Check(args, Options{}); len(r.Problems) != 0 {
		t.Fatal(r.Problems)
	}
	fast := testing.AllocsPerRun(100, func() { s.Check(args, Options{}) })
	slow := *s
	slow.simple = nil
	full := testing.AllocsPerRun(100, func() { slow.Check(args, Options{}) })
	if fast+5 > full {
		t.Errorf("Check allocates %v times with the simple form, %v without: the validator still runs", fast, full)
	}
}

// FuzzSimpleValid: on any arguments, the simple form never says "valid"
// where the validator refuses, and Check gives the same result with and
// without it.
func FuzzSimpleValid(f *testing.F) {
	for i, a := range simpleValues {
		f.Add(uint8(i), []byte(a))
	}
	schemas := make([]*Schema, len(simpleSchemas))
	for i, src := range simpleSchemas {
		schemas[i] = mustCompile(f, src)
	}
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		s := schemas[int(which)%len(schemas)]
		slow := *s
		slow.simple = nil
		if fast, ref := s.Check(args, Options{}), slow.Check(args, Options{}); !reflect.DeepEqual(fast, ref) {
			t.Fatalf("%s: Check with the simple form\n%+v\nwithout\n%+v", args, fast, ref)
		}
		v, _, err := parseInterned(args, MaxArgumentDepth, nil, s.names)
		if err != nil {
			return
		}
		if s.simple.valid(v) {
			if err := s.sch.Validate(v); err != nil {
				t.Fatalf("%s: simple form says valid, validator says %v", args, err)
			}
		}
	})
}
