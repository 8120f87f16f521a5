package gateway

import (
	"mime"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/policy"
)

// member (which makes no strings of the names it passes over) finds what
// eachMember finds: the first member of that name, names compared after
// unescaping, nothing for an absent name, an error for a non-object.
func TestMemberAgreesWithEachMember(t *testing.T) {
	byEach := func(obj []byte, key string) (jsontext.Value, bool, error) {
		var found jsontext.Value
		err := eachMember(obj, func(name string, v jsontext.Value) bool {
			if name == key {
				found = v
				return true
			}
			return false
		})
		return found, found != nil, err
	}
	objs := []string{
		`{"isError":true,"content":[]}`,
		`{"content":[{"isError":false}],"isError":false}`,
		`{"is\u0045rror":true}`,
		`{"\u0074ask":{"ttl":1},"name":"x"}`,
		`{"a\"b":1,"isError":2}`,
		`{}`,
		` { "isError" : true } `,
		`[1,2]`,
		`"isError"`,
		``,
	}
	for _, o := range objs {
		for _, key := range []string{"isError", "task", "name", `a"b`, "content", "missing"} {
			gv, gok, gerr := member([]byte(o), key)
			wv, wok, werr := byEach([]byte(o), key)
			if string(gv) != string(wv) || gok != wok || (gerr == nil) != (werr == nil) {
				t.Errorf("member(%s, %q) = %s %v %v, eachMember finds %s %v %v", o, key, gv, gok, gerr, wv, wok, werr)
			}
		}
	}
	if v, ok, _ := member([]byte(`{"a":[1],"b":2}`), "a"); !ok || cap(v) != len(v) {
		t.Errorf("member value %s has spare capacity %d (appending would write into the body)", v, cap(v)-len(v))
	}
}

// plainMediaType recognises only what mime.ParseMediaType parses to the
// same type without parameters.
func TestPlainMediaTypeAgreesWithMime(t *testing.T) {
	for _, mt := range []string{"application/json", "text/event-stream"} {
		for _, v := range []string{mt, "Application/JSON", "TEXT/EVENT-STREAM", mt + ";charset=utf-8", " " + mt, mt + " ",
			"text/event-ſtream", "application/jſon", "application/json5", "application/jso", "", "application/xml"} {
			got := plainMediaType(v, mt)
			pm, params, err := mime.ParseMediaType(v)
			if got && (err != nil || pm != mt || len(params) != 0) {
				t.Errorf("plainMediaType(%q, %q) = true; mime says %q %v %v", v, mt, pm, params, err)
			}
			if !got && v == mt {
				t.Errorf("plainMediaType(%q) = false", v)
			}
		}
	}
	if !isJSON("APPLICATION/json") || isJSON("application/json;charset=latin1") || !isJSON("application/json; charset=UTF-8") || isJSON("application/jſon") {
		t.Error("isJSON changed")
	}
}

// Two different result shapings never share a compiled shaper: their
// keys differ, whatever the entries hold (a nil list and an empty one
// shape alike and may share one).
func TestRulesKeyIsInjective(t *testing.T) {
	cases := []policy.ResultPaths{
		{},
		{Fields: []string{"a"}},
		{Drop: []string{"a"}},
		{UntrustedText: []string{"a"}},
		{Fields: []string{"a", "b"}},
		{Fields: []string{"ab"}},
		{Fields: []string{"a\x00b"}},
		{Fields: []string{"a"}, Drop: []string{"b"}},
		{Fields: []string{"a"}, Drop: []string{"b", ""}},
		{Fields: []string{"\x01"}, Drop: []string{""}},
		{Fields: []string{"", "\x01"}},
	}
	seen := map[string]int{}
	for i := range cases {
		k := string(appendRulesKey(nil, &cases[i]))
		if j, dup := seen[k]; dup {
			t.Errorf("%+v and %+v share a key", cases[i], cases[j])
		}
		seen[k] = i
	}
}
