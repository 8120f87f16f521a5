package gateway

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/policy"
)

func TestResolveTool(t *testing.T) {
	decls := map[string]map[string]policy.ToolDeclaration{
		"crm": {
			"create_event": {Effect: policy.EffectSilentWrite, Expose: &policy.ToolExposure{Name: "book_room", Title: "Book a room"}},
			"find_rooms":   {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Description: "Rooms free now."}},
			"same_name":    {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "same_name"}},
			"a":            {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "twice"}},
			"b":            {Effect: policy.EffectRead, Expose: &policy.ToolExposure{Name: "twice"}},
		},
		"plain": {"create_event": {Effect: policy.EffectSilentWrite}},
	}
	e := newExposure(decls)
	for _, tc := range []struct {
		name, upstream, called, want string
		ok                           bool
	}{
		{"exposed name resolves to the original", "crm", "book_room", "create_event", true},
		{"renamed original is not callable", "crm", "create_event", "", false},
		{"text-only override keeps its name", "crm", "find_rooms", "find_rooms", true},
		{"rename onto its own name is no rename", "crm", "same_name", "same_name", true},
		{"undeclared name passes as it is", "crm", "other", "other", true},
		{"a name exposed twice resolves to neither", "crm", "twice", "", false},
		{"other upstream unaffected", "plain", "create_event", "create_event", true},
		{"unknown upstream", "none", "book_room", "book_room", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := e.resolveTool(tc.upstream, tc.called)
			if got != tc.want || ok != tc.ok {
				t.Errorf("resolveTool(%q, %q) = %q, %v; want %q, %v", tc.upstream, tc.called, got, ok, tc.want, tc.ok)
			}
		})
	}
	if n := e.exposedName("crm", "create_event"); n != "book_room" {
		t.Errorf("exposedName = %q", n)
	}
	if !e.shadowed("crm", "book_room") || e.shadowed("crm", "create_event") || e.shadowed("crm", "find_rooms") {
		t.Error("shadowed: wrong answer")
	}
	if newExposure(map[string]map[string]policy.ToolDeclaration{"x": {"t": {Effect: policy.EffectRead}}}) != nil {
		t.Error("no renames: want a nil exposure (nothing to do per call)")
	}
}

func TestNarrows(t *testing.T) {
	const upstream = `{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"},"id":{"type":"string"}},"required":["id"]}`
	u, err := args.Compile([]byte(upstream))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, narrowed, err string }{
		{"fewer optional properties, tighter bounds", `{"type":"object","properties":{"id":{"type":"string","maxLength":8},"limit":{"type":"integer","maximum":10}},"required":["id"]}`, ""},
		{"an optional property made required", `{"type":"object","properties":{"id":{},"q":{}},"required":["id","q"]}`, ""},
		{"a property the upstream lacks", `{"type":"object","properties":{"id":{},"colour":{}},"required":["id"]}`, `"colour" is not in the upstream's`},
		{"a required property dropped", `{"type":"object","properties":{"q":{}}}`, `"id" is required by the upstream's`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := args.Compile([]byte(tc.narrowed))
			if err != nil {
				t.Fatal(err)
			}
			err = narrows(n, u)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("narrows = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestCheckNarrowed(t *testing.T) {
	u, err1 := args.Compile([]byte(`{"type":"object","properties":{"q":{"type":"string"},"limit":{"type":"integer"},"deep":{"type":"boolean"}}}`))
	n, err2 := args.Compile([]byte(`{"type":"object","properties":{"q":{"type":"string","maxLength":3},"limit":{"type":"integer","maximum":10}},"additionalProperties":false}`))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	codes := func(r args.Result) []string {
		var out []string
		for _, p := range r.Problems {
			out = append(out, p.Argument+":"+p.Code)
		}
		return out
	}
	for _, tc := range []struct {
		name, args, coerced string
		problems            []string
	}{
		{"inside both", `{"q":"abc","limit":5}`, "", nil},
		{"coerced by the narrowed schema, then checked by the upstream's", `{"limit":"5"}`, `{"limit":5}`, nil},
		{"outside the narrowed bounds", `{"q":"abcd","limit":50}`, "", []string{"limit:invalid_value", "q:invalid_value"}},
		{"a property the narrowing leaves out", `{"deep":true}`, "", []string{"deep:unknown_argument"}},
		{"reported once when both refuse it", `{"q":1}`, "", []string{"q:wrong_type"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := checkNarrowed(n, u, []byte(tc.args), args.Options{})
			if got := codes(r); !slices.Equal(got, tc.problems) {
				t.Errorf("problems %v, want %v (%+v)", got, tc.problems, r.Problems)
			}
			if string(r.Arguments) != tc.coerced {
				t.Errorf("arguments %s, want %s", r.Arguments, tc.coerced)
			}
		})
	}
}

func TestNarrowingUnusable(t *testing.T) {
	decls := map[string]map[string]policy.ToolDeclaration{"crm": {
		"find":  {Effect: policy.EffectRead, Expose: &policy.ToolExposure{InputSchema: `{"type":"object","properties":{"q":{"maxLength":3}}}`}},
		"wrong": {Effect: policy.EffectRead, Expose: &policy.ToolExposure{InputSchema: `{"type":"object","properties":{"colour":{}}}`}},
		"plain": {Effect: policy.EffectRead},
	}}
	p := &Pipeline{opts: Options{Declarations: decls}, log: slog.New(slog.DiscardHandler)}
	schema := jsontext.Value(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	for _, tc := range []struct {
		tool           string
		narrowed, fail bool
	}{{"find", true, false}, {"wrong", false, true}, {"plain", false, false}} {
		ct := &CatalogTool{Name: tc.tool, InputSchema: schema, Hash: "h-" + tc.tool}
		s, ns, err := p.toolSchemas("crm", ct)
		if (err != nil) != tc.fail || (ns != nil) != tc.narrowed || (err == nil && s == nil) {
			t.Errorf("%s: schema %v, narrowed %v, err %v", tc.tool, s != nil, ns != nil, err)
		}
	}
	ct := &CatalogTool{Name: "find", InputSchema: schema, Hash: "h-find"}
	if n := p.narrowing("crm", ct); n == nil || !strings.Contains(string(n.listed), `"additionalProperties":false`) {
		t.Errorf("listed narrowing %v: want the schema closed", n)
	}
}
