package args

import (
	"encoding/json"
	"testing"
)

// FuzzCheck: no panic; re-encoded arguments are JSON, and checking them
// again changes nothing more (coercions converge in one pass).
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		`{"booking_id":"B-1","minutes":"5","status":"In Progress","ids":"[\"1\",2]","filter":{"limit":"3"}}`,
		`{"booking_id":"B-1","meta":"{\"source\":\"x\"}","note":null}`,
		`{"a":{"b":[1,{"c":"true"}]}}`,
		`null`, `[]`, `{"x":1e999}`, `{"\u00e9":"\u2028"}`,
	} {
		f.Add([]byte(seed), false)
	}
	s := mustCompile(f, bookingSchema)
	f.Fuzz(func(t *testing.T, args []byte, write bool) {
		r := s.Check(args, Options{Write: write})
		if r.Arguments == nil {
			return
		}
		if !json.Valid(r.Arguments) {
			t.Fatalf("Arguments not JSON: %s", r.Arguments)
		}
		again := s.Check(r.Arguments, Options{Write: write})
		if again.Arguments != nil || len(again.Warnings) != 0 {
			t.Fatalf("second pass changed %s: %s %+v", r.Arguments, again.Arguments, again.Warnings)
		}
	})
}

// FuzzCompile: no panic on any schema.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		bookingSchema,
		`{"type":"object","$defs":{"a":{"$ref":"#/$defs/a"}},"properties":{"x":{"$ref":"#/$defs/a"}}}`,
		`{"type":"object","properties":{"x":{"$dynamicRef":"#m","$dynamicAnchor":"m"}}}`,
		`{"$schema":"http://json-schema.org/draft-04/schema#","properties":{"a":{"items":[{}],"additionalItems":{"$ref":"#"}}}}`,
		`{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A","pattern":"[a-"}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		s, err := Compile(schema)
		if err != nil {
			return
		}
		s.Check([]byte(`{"a":"1","x":{"y":["2"]}}`), Options{})
	})
}
