package gateway

import (
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

var testServer = Server{Name: "work", Members: []Member{{"crm", "crm"}, {"files", "files"}, {"wiki", "wiki-2"}}}

func TestFederationResolve(t *testing.T) {
	f := newFederations([]Server{testServer})["work"]
	e := newExposure(map[string]map[string]policy.ToolDeclaration{
		"crm": {"create_event": {Effect: policy.EffectSilentWrite, Expose: &policy.ToolExposure{Name: "book_room"}}},
	})
	for _, tc := range []struct {
		name, exposed, upstream, original string
		ok                                bool
	}{
		{"prefix and name", "files_read_file", "files", "read_file", true},
		{"split at the first separator", "crm_find_all_customers", "crm", "find_all_customers", true},
		{"prefix with a dash", "wiki-2_search", "wiki", "search", true},
		{"a member's rename", "crm_book_room", "crm", "create_event", true},
		{"a renamed tool by its own name", "crm_create_event", "", "", false},
		{"unknown prefix", "erp_find", "", "", false},
		{"a prefix's start is no prefix", "wiki_search", "", "", false},
		{"no separator", "crmfind", "", "", false},
		{"empty prefix", "_find", "", "", false},
		{"upper case prefix", "CRM_find", "", "", false},
		{"nothing after the prefix", "crm_", "crm", "", true},
		{"longer than MCP allows", "crm_" + strings.Repeat("a", 125), "", "", false},
		{"as long as MCP allows", "crm_" + strings.Repeat("a", 124), "crm", strings.Repeat("a", 124), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, orig, ok := f.resolveTool(e, tc.exposed)
			if ok != tc.ok || (ok && (up != tc.upstream || orig != tc.original)) {
				t.Errorf("resolveTool(%q) = %q, %q, %v; want %q, %q, %v", tc.exposed, up, orig, ok, tc.upstream, tc.original, tc.ok)
			}
		})
	}
	for _, tc := range []struct {
		name, exposed, upstream, original string
		ok                                bool
	}{
		{"file URI", "crm+file:///a", "crm", "file:///a", true},
		{"a scheme with +", "files+git+ssh://host/repo", "files", "git+ssh://host/repo", true},
		{"a URI template", "wiki-2+wiki://{space}/{page}", "wiki", "wiki://{space}/{page}", true},
		{"unknown prefix", "erp+file:///a", "", "", false},
		{"an original URI", "file:///a", "", "", false},
		{"nothing after the prefix", "crm+", "", "", false},
		{"tool separator in a URI", "crm_file:///a", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, orig, ok := f.resolveURI(tc.exposed)
			if ok != tc.ok || (ok && (up != tc.upstream || orig != tc.original)) {
				t.Errorf("resolveURI(%q) = %q, %q, %v; want %q, %q, %v", tc.exposed, up, orig, ok, tc.upstream, tc.original, tc.ok)
			}
		})
	}
	if up, orig, ok := f.resolvePrompt("files_summarise"); !ok || up != "files" || orig != "summarise" {
		t.Errorf("resolvePrompt = %q, %q, %v", up, orig, ok)
	}
	if _, _, ok := f.resolvePrompt("files_"); ok {
		t.Error("an empty prompt name resolved")
	}
}

// withUnprefixed is testServer with an unprefixed member.
var withUnprefixed = Server{Name: "mixed", Members: []Member{{"crm", "crm"}, {"everything", ""}, {"wiki", "wiki-2"}}}

// TestFederationResolveUnprefixed: a name is the unprefixed member's
// unless it starts with another member's prefix and separator; the
// unprefixed member's names that do are shadowed (hidden).
func TestFederationResolveUnprefixed(t *testing.T) {
	f := newFederations([]Server{withUnprefixed})["mixed"]
	for _, tc := range []struct {
		name, exposed, upstream, original string
		ok, shadowed                      bool
	}{
		{"a prefixed member's name", "crm_find", "crm", "find", true, true},
		{"a name without separator", "echo", "everything", "echo", true, false},
		{"a name with an unknown prefix", "test_simple_text", "everything", "test_simple_text", true, false},
		{"a prefix's start is no prefix", "wiki_search", "everything", "wiki_search", true, false},
		{"a dashed prefix", "wiki-2_search", "wiki", "search", true, true},
		{"a leading separator", "_x", "everything", "_x", true, false},
		{"the prefix alone", "crm", "everything", "crm", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, orig, ok := f.resolveTool(nil, tc.exposed)
			if ok != tc.ok || up != tc.upstream || orig != tc.original {
				t.Errorf("resolveTool(%q) = %q, %q, %v; want %q, %q, %v", tc.exposed, up, orig, ok, tc.upstream, tc.original, tc.ok)
			}
			if got := f.shadowed(tc.exposed, federationSeparator); got != tc.shadowed {
				t.Errorf("shadowed(%q) = %v", tc.exposed, got)
			}
		})
	}
	for _, tc := range []struct{ exposed, upstream, original string }{
		{"crm+file:///a", "crm", "file:///a"},
		{"file:///a", "everything", "file:///a"},
		{"test://static/resource/1", "everything", "test://static/resource/1"},
		{"git+ssh://host/repo", "everything", "git+ssh://host/repo"},
		{"crm_file:///a", "everything", "crm_file:///a"},
	} {
		if up, orig, ok := f.resolveURI(tc.exposed); !ok || up != tc.upstream || orig != tc.original {
			t.Errorf("resolveURI(%q) = %q, %q, %v", tc.exposed, up, orig, ok)
		}
	}
	if up, orig, ok := f.resolvePrompt("test_simple_prompt"); !ok || up != "everything" || orig != "test_simple_prompt" {
		t.Errorf("resolvePrompt = %q, %q, %v", up, orig, ok)
	}
	if !f.has("everything") || f.has("nobody") || f.prefixOf("everything") != "" {
		t.Error("has/prefixOf of the unprefixed member")
	}
	// Two unprefixed members (validation refuses them): neither resolves.
	two := newFederations([]Server{{Name: "s", Members: []Member{{"a", ""}, {"b", ""}, {"c", "c"}}}})["s"]
	if up, _, ok := two.resolveTool(nil, "echo"); ok {
		t.Errorf("two unprefixed members: echo resolved to %q", up)
	}
	if up, _, ok := two.resolveTool(nil, "c_echo"); !ok || up != "c" {
		t.Errorf("two unprefixed members: c_echo resolved to %q, %v", up, ok)
	}
}

// TestFederationDuplicatePrefix: a prefix that slips past validation twice
// resolves to neither member.
func TestFederationDuplicatePrefix(t *testing.T) {
	f := newFederations([]Server{{Name: "s", Members: []Member{{"a", "p"}, {"b", "p"}, {"c", "q_r"}}}})["s"]
	for _, n := range []string{"p_tool", "q_r_tool", "q_tool"} {
		if up, _, ok := f.resolveTool(nil, n); ok {
			t.Errorf("%q resolved to %q", n, up)
		}
	}
}

func TestCloseNames(t *testing.T) {
	names := []string{"crm_find_customers", "files_find_customers", "files_read_file", "wiki-2_search"}
	for _, tc := range []struct {
		called string
		want   string // the first suggestion
	}{
		{"crm_find_customer", `"crm_find_customers"`},
		{"erp_read_file", `"files_read_file"`},
		{"search", `"wiki-2_search"`},
	} {
		got := closeNames(tc.called, names, 3)
		if len(got) == 0 || got[0] != tc.want {
			t.Errorf("closeNames(%q) = %v, want %s first", tc.called, got, tc.want)
		}
	}
	if got := closeNames("delete_everything", names, 3); len(got) != 0 {
		t.Errorf("closeNames of a stranger = %v", got)
	}
}

// FuzzFederationResolve: every name a member exposes resolves back to
// that member and name, and a name that resolves is the exposed form of
// what it resolves to (nothing else resolves).
func FuzzFederationResolve(f *testing.F) {
	for _, s := range []string{"find", "a_b", "", "git+ssh://x", "crm_x", "+", "_", "wiki-2_x"} {
		f.Add(uint8(0), s)
	}
	fed := newFederations([]Server{testServer})["work"]
	f.Fuzz(func(t *testing.T, i uint8, s string) {
		m := testServer.Members[int(i)%len(testServer.Members)]
		if up, orig, ok := fed.resolveTool(nil, exposedTool(m.Prefix, s)); (!ok || up != m.Upstream || orig != s) && len(exposedTool(m.Prefix, s)) <= maxToolName {
			t.Fatalf("tool %q of %s resolved to %q, %q, %v", s, m.Upstream, up, orig, ok)
		}
		if s != "" {
			if up, orig, ok := fed.resolveURI(exposedURI(m.Prefix, s)); !ok || up != m.Upstream || orig != s {
				t.Fatalf("URI %q of %s resolved to %q, %q, %v", s, m.Upstream, up, orig, ok)
			}
		}
		if up, orig, ok := fed.resolveTool(nil, s); ok && exposedTool(fed.prefixOf(up), orig) != s {
			t.Fatalf("%q resolved to %q, %q, which is exposed as %q", s, up, orig, exposedTool(fed.prefixOf(up), orig))
		}
		if up, orig, ok := fed.resolveURI(s); ok && exposedURI(fed.prefixOf(up), orig) != s {
			t.Fatalf("URI %q resolved to %q, %q", s, up, orig)
		}
		if up, _, ok := fed.resolveTool(nil, s); ok && !strings.HasPrefix(s, fed.prefixOf(up)+"_") {
			t.Fatalf("%q resolved to %s without its prefix", s, up)
		}
		// With an unprefixed member: a name resolves to it exactly when
		// it is not shadowed, and every name resolves to one member.
		mixed := newFederations([]Server{withUnprefixed})["mixed"]
		for _, sep := range []byte{federationSeparator, federationURISeparator} {
			resolve := mixed.resolveTool
			if sep == federationURISeparator {
				resolve = func(_ exposure, n string) (string, string, bool) { return mixed.resolveURI(n) }
			}
			up, orig, ok := resolve(nil, s)
			if !ok {
				if len(s) <= maxToolName && s != "" && !strings.HasSuffix(s, string(sep)) {
					t.Fatalf("%q (sep %q) resolved to no member", s, sep)
				}
				continue
			}
			if (up == "everything") == mixed.shadowed(s, sep) {
				t.Fatalf("%q (sep %q) resolved to %s, shadowed %v", s, sep, up, mixed.shadowed(s, sep))
			}
			exposed := exposedTool(mixed.prefixOf(up), orig)
			if sep == federationURISeparator {
				exposed = exposedURI(mixed.prefixOf(up), orig)
			}
			if exposed != s {
				t.Fatalf("%q resolved to %q, %q, which is exposed as %q", s, up, orig, exposed)
			}
		}
	})
}

// carrierCatalog lists the upstreams in listed; failing ones failed their
// latest listing.
type carrierCatalog struct {
	ToolCatalog
	listed, failing map[string]bool
}

func (c carrierCatalog) Tools(upstream string) ([]CatalogTool, bool) { return nil, c.listed[upstream] }
func (c carrierCatalog) Failing(upstream string) bool                { return c.failing[upstream] }

// The member holding a federated route's listen streams is one that
// answers: listed and not failing its latest listing, else listed, else
// the first.
func TestFederationCarrier(t *testing.T) {
	f := newFederations([]Server{testServer})["work"]
	for _, tc := range []struct {
		name            string
		listed, failing []string
		want            string
	}{
		{"the first listed", []string{"files", "wiki"}, nil, "files"},
		{"a failing member is passed over", []string{"crm", "files", "wiki"}, []string{"crm"}, "files"},
		{"all failing: the first listed", []string{"files", "wiki"}, []string{"files", "wiki"}, "files"},
		{"none listed: the first", nil, nil, "crm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := carrierCatalog{listed: map[string]bool{}, failing: map[string]bool{}}
			for _, u := range tc.listed {
				c.listed[u] = true
			}
			for _, u := range tc.failing {
				c.failing[u] = true
			}
			p := &Pipeline{opts: Options{Catalog: c}}
			if got := p.carrier(f); got != tc.want {
				t.Errorf("carrier = %q, want %q", got, tc.want)
			}
		})
	}
}
