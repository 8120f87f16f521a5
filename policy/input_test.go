package policy

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// viaJSON is the input document the slow way: encoding/json, then OPA's own
// conversion.
func viaJSON(t testing.TB, v any) ast.Value {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := util.UnmarshalJSON(b, &x); err != nil {
		t.Fatal(err)
	}
	val, err := ast.InterfaceToValue(x)
	if err != nil {
		t.Fatal(err)
	}
	return val
}

func sampleInputs() map[string]*Input {
	full := callInput("search_contacts", alice)
	full.Transport.Origin = "https://app.example.com"
	full.Transport.Path, full.Transport.Tenant = "/t/acme/mcp", "acme"
	full.Tool.Hidden = true // differs from the declaration: not the cached term
	changed := callInput("search_contacts", alice)
	changed.Tool.Rights = []string{"crm.read", "crm.export"}
	noClient := requestInput("ping")
	noClient.Message.Client = &Client{Name: "bare"}
	// A catalog entry (hash, title, the upstream's annotations), the
	// write-safety declaration keys and the finders of a refused call.
	catalogued := callInput("send_email", alice)
	catalogued.Tool.MovesMoney, catalogued.Tool.NotifyObject, catalogued.Tool.DeadlineMS = true, "contact_id", 2500
	catalogued.Tool.Catalog = &ToolCatalog{Listed: true, State: CatalogApproved, Hash: "sha256:" + strings.Repeat("ab", 32), Title: "Send e-mail",
		Annotations: jsontext.Value(`{"title":"Send","destructiveHint":true,"x":[1,2.50,null]}`)}
	unlisted := callInput("find_orders", alice)
	unlisted.Tool.Catalog = &ToolCatalog{Listed: false}
	unlisted.Finders = []Tool{
		{Name: "search_contacts", Declared: true, ToolDeclaration: testDeclarations["crm"]["search_contacts"]},
		{Name: "list_exports", Declared: true, ToolDeclaration: ToolDeclaration{Effect: EffectRead, Expensive: true, LegallyBinding: true},
			Catalog: &ToolCatalog{Listed: true, State: CatalogChanged, Hash: "sha256:" + strings.Repeat("01", 32)}},
	}
	resource := requestInput("resources/read")
	resource.Message.URI = "crm://contacts/42"
	resource.Message.Client = nil
	return map[string]*Input{
		"ping":                    requestInput("ping"),
		"client without version":  noClient,
		"resources/read":          resource,
		"tools/call full":         full,
		"tools/call undeclared":   callInput("undeclared_tool", anonymous),
		"tools/call catalogued":   catalogued,
		"tools/call with finders": unlisted,
		"tools/list items":        listInput("tools/list", alice, allTools...),
		"tools/call oauth":        callInput("send_email", oauthToken("crm.read")),
		"tools/list oauth":        listInput("tools/list", oauthToken("crm.read", "crm.write"), allTools...),
		"prompts/list items":      listInput("prompts/list", anonymous, "a", "b"),
		"empty":                   {Version: SchemaVersion},
	}
}

// The direct conversion equals what encoding/json and OPA make of an Input.
func TestInputValueMatchesJSON(t *testing.T) {
	for name, in := range sampleInputs() {
		t.Run(name, func(t *testing.T) {
			want := viaJSON(t, in)
			// Without caches, then with them, cold and warm.
			c := newTermCaches(testDeclarations)
			for i, caches := range []*termCaches{nil, c, c} {
				got, err := inputValue(in, caches)
				if err != nil {
					t.Fatal(err)
				}
				if got.Compare(want) != 0 {
					t.Errorf("run %d: got  %v\nwant %v", i, got, want)
				}
			}
		})
	}
}

func TestJSONValueNumbersExact(t *testing.T) {
	for _, lit := range []string{"0", "7", "-0", "12345678901234567890123", "1e400", "0.1000", "-2.5E-7", "1.0"} {
		v, err := jsonValue(jsontext.Value(`{"n":` + lit + `}`))
		if err != nil {
			t.Fatal(err)
		}
		n, ok := v.(ast.Object).Get(ast.StringTerm("n")).Value.(ast.Number)
		if !ok || string(n) != lit {
			t.Errorf("%s became %v", lit, v)
		}
	}
}

func FuzzJSONValue(f *testing.F) {
	for _, s := range []string{
		`{"query":"acme","limit":25,"tags":["a","b"],"f":{"x":null,"y":true,"z":false}}`,
		`[]`, `{}`, `"\u00e9\ud83d\ude00"`, `1.5e3`, `0E10000000000000000000`, `[[[{"a":[1,2,{"b":"c"}]}]]]`, `{"a":1,"a":2}`, ` {"a" : 1 } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := jsonValue(jsontext.Value(b))
		if !jsontext.Value(b).IsValid() {
			if err == nil {
				t.Fatalf("jsonValue accepted invalid JSON %q", b)
			}
			return
		}
		// Valid JSON: the result is OPA's own conversion, or an error
		// where OPA's conversion fails too.
		var x any
		if err := util.UnmarshalJSON(b, &x); err != nil {
			t.Fatalf("util.UnmarshalJSON: %v for %q", err, b)
		}
		want, werr := ast.InterfaceToValue(x)
		if (err == nil) != (werr == nil) {
			t.Fatalf("jsonValue err=%v, OPA err=%v for %q", err, werr, b)
		}
		if err != nil {
			return
		}
		if got.Compare(want) != 0 {
			t.Fatalf("got %v, want %v for %q", got, want, b)
		}
	})
}
