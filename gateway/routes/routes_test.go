package routes

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, ok := range []string{
		"/", "/mcp", "/mcp/", "/t/{tenant}/mcp", "/{tenant}/mcp", "/t/{tenant}", "/t/{tenant}/", "/a//{tenant}/b",
		"/a-b.c_d~e!$&'()*+,;=:@/x",
	} {
		if _, err := Parse(ok); err != nil {
			t.Errorf("Parse(%q): %v", ok, err)
		}
	}
	for route, want := range map[string]error{
		"mcp":                  ErrNotAbsolute,
		"/m%63p":               ErrCharacter,
		"/café":                ErrCharacter,
		"/a b":                 ErrCharacter,
		"/a?b":                 ErrCharacter,
		"/a#b":                 ErrCharacter,
		"/a\"b":                ErrCharacter,
		"/a\\b":                ErrCharacter,
		"/t/{org}/mcp":         ErrBraces,
		"/t/{tenant/mcp":       ErrBraces,
		"/t/tenant}/mcp":       ErrBraces,
		"/t/{{tenant}}/mcp":    ErrBraces,
		"/t/{tenant}/{tenant}": ErrSeveralTenants,
		"/t/x{tenant}/mcp":     ErrPartialSegment,
		"/t/{tenant}x/mcp":     ErrPartialSegment,
		"/{tenant}":            ErrOnlyTenant,
		"/{tenant}/":           ErrOnlyTenant,
		"//{tenant}//":         ErrOnlyTenant,
	} {
		if _, err := Parse(route); !errors.Is(err, want) {
			t.Errorf("Parse(%q) = %v, want %v", route, err, want)
		}
	}
	if _, err := Parse(""); err == nil {
		t.Error("empty route accepted")
	}
}

func TestValidTenant(t *testing.T) {
	for _, ok := range []string{"acme", "a", "A-Z_0.9~x", "...", ".acme", strings.Repeat("x", MaxTenantLength)} {
		if !ValidTenant(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a%62", "a b", "é", "a+b", "a@b", "{tenant}", strings.Repeat("x", MaxTenantLength+1), "a\x00"} {
		if ValidTenant(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPatternMatch(t *testing.T) {
	p, err := Parse("/t/{tenant}/mcp")
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/t/acme/mcp":       "acme",
		"/t/Acme-1.x~_/mcp": "Acme-1.x~_",
		"/t/%61cme/mcp":     "", // never decoded: '%' is no tenant character
		"/t/ac%2Fme/mcp":    "",
		"/t//mcp":           "", // empty segment
		"/t/acme/mcp/":      "", // trailing slash is another path
		"/t/acme/mcpx":      "",
		"/t/a/b/mcp":        "",
		"/t/../mcp":         "",
		"/t/./mcp":          "",
		"/t/acme":           "",
		"/t/mcp":            "",
		"/x/acme/mcp":       "",
		"t/acme/mcp":        "",
		"/t/" + strings.Repeat("a", MaxTenantLength+1) + "/mcp": "",
	} {
		tenant, ok := p.Match(path)
		if ok != (want != "") || tenant != want {
			t.Errorf("Match(%q) = %q, %v; want %q", path, tenant, ok, want)
		}
	}
	if got := p.Expand("acme"); got != "/t/acme/mcp" {
		t.Errorf("Expand = %q", got)
	}
	if !p.HasTenant() || p.String() != "/t/{tenant}/mcp" {
		t.Errorf("%v %q", p.HasTenant(), p)
	}
	last, _ := Parse("/t/{tenant}")
	if tenant, ok := last.Match("/t/acme"); !ok || tenant != "acme" {
		t.Errorf("last segment: %q %v", tenant, ok)
	}
	if _, ok := last.Match("/t/acme/"); ok {
		t.Error("/t/acme/ matched /t/{tenant}")
	}
	exact, _ := Parse("/mcp")
	if tenant, ok := exact.Match("/mcp"); !ok || tenant != "" || exact.Expand("acme") != "/mcp" || exact.HasTenant() {
		t.Error("exact route")
	}
	if _, ok := exact.Match("/mcp/"); ok {
		t.Error("exact route matched with a trailing slash")
	}
}

func TestOverlap(t *testing.T) {
	for _, tt := range []struct {
		a, b    string
		example string // "" no overlap
	}{
		{"/t/{tenant}/mcp", "/t/{tenant}/mcp", "/t/example/mcp"},
		{"/t/{tenant}/mcp", "/{tenant}/x/mcp", "/t/x/mcp"},
		{"/t/{tenant}/mcp", "/t/x/{tenant}", "/t/x/mcp"},
		{"/t/{tenant}/mcp", "/u/{tenant}/mcp", ""},
		{"/t/{tenant}/mcp", "/t/{tenant}/mcp/", ""},
		{"/t/{tenant}/mcp", "/t/{tenant}", ""},
		{"/a/{tenant}", "/{tenant}/b", "/a/b"},
		{"/a//{tenant}", "/a/{tenant}/x", ""},  // an empty segment is no tenant
		{"/t/{tenant}/mcp", "/t/acme/mcp", ""}, // exact routes win: no overlap
		{"/t/{tenant}/mcp", "/{tenant}/a%b/mcp", ""},
	} {
		a, err := Parse(tt.a)
		if err != nil {
			t.Fatalf("%s: %v", tt.a, err)
		}
		b, err := Parse(tt.b)
		if err != nil {
			b = Pattern{path: tt.b, tenant: true} // a segment no tenant can fill
		}
		for _, pair := range [][2]Pattern{{a, b}, {b, a}} {
			ex, ok := Overlap(pair[0], pair[1])
			if ok != (tt.example != "") || ex != tt.example {
				t.Errorf("Overlap(%q, %q) = %q, %v; want %q", pair[0], pair[1], ex, ok, tt.example)
			}
			if !ok {
				continue
			}
			for _, p := range pair {
				if _, ok := p.Match(ex); !ok {
					t.Errorf("example %q does not match %q", ex, p)
				}
			}
		}
	}
}

func TestTable(t *testing.T) {
	tab, err := New([]Route{
		{Path: "/mcp", Upstream: "default"},
		{Path: "/t/{tenant}/mcp", Upstream: "crm"},
		{Path: "/t/admin/mcp", Upstream: "admin"}, // exact beats the pattern
		{Path: "/{tenant}/tickets", Upstream: "tickets"},
		{Path: "/r/{tenant}/x", Upstream: "reports"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string][2]string{
		"/mcp":            {"default", ""},
		"/t/acme/mcp":     {"crm", "acme"},
		"/t/admin/mcp":    {"admin", ""},
		"/t/admin2/mcp":   {"crm", "admin2"},
		"/globex/tickets": {"tickets", "globex"},
		"/r/acme/x":       {"reports", "acme"},
		"/mcp/":           {},
		"/t/%61cme/mcp":   {},
		"/t//mcp":         {},
		"/t/acme/mcp/":    {},
		"/r/acme/":        {},
		"/r/tickets":      {"tickets", "r"},
		"/r//x":           {},
		"/r/":             {},
		"/":               {},
		"":                {},
	} {
		u, tenant, ok := tab.Match(path)
		if ok != (want[0] != "") || u != want[0] || tenant != want[1] {
			t.Errorf("Match(%q) = %q, %q, %v; want %q", path, u, tenant, ok, want)
		}
	}
	if p, ok := tab.Pattern("crm"); !ok || !p.HasTenant() || p.String() != "/t/{tenant}/mcp" {
		t.Errorf("Pattern(crm) = %v, %v", p, ok)
	}
	if _, ok := tab.Pattern("nope"); ok {
		t.Error("Pattern(nope)")
	}

	for name, rs := range map[string][]Route{
		"bad route":           {{Path: "/t/{x}", Upstream: "a"}},
		"duplicate exact":     {{Path: "/mcp", Upstream: "a"}, {Path: "/mcp", Upstream: "b"}},
		"duplicate pattern":   {{Path: "/t/{tenant}", Upstream: "a"}, {Path: "/t/{tenant}", Upstream: "b"}},
		"overlapping pattern": {{Path: "/t/{tenant}/mcp", Upstream: "a"}, {Path: "/{tenant}/x/mcp", Upstream: "b"}},
		"duplicate upstream":  {{Path: "/a", Upstream: "a"}, {Path: "/b", Upstream: "a"}},
	} {
		if _, err := New(rs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	empty, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := empty.Match("/mcp"); ok {
		t.Error("empty table matched")
	}
}

// manyRoutes is a table of n exact routes and n patterns.
func manyRoutes(tb testing.TB, n int) *Table {
	var rs []Route
	for i := range n {
		rs = append(rs, Route{Path: fmt.Sprintf("/u%d/mcp", i), Upstream: fmt.Sprintf("exact%d", i)},
			Route{Path: fmt.Sprintf("/p%d/{tenant}/mcp", i), Upstream: fmt.Sprintf("pattern%d", i)})
	}
	tab, err := New(rs)
	if err != nil {
		tb.Fatal(err)
	}
	return tab
}

func TestManyRoutes(t *testing.T) {
	tab := manyRoutes(t, 200)
	for _, i := range []int{0, 57, 199} {
		if u, tenant, ok := tab.Match(fmt.Sprintf("/p%d/acme/mcp", i)); !ok || u != fmt.Sprintf("pattern%d", i) || tenant != "acme" {
			t.Errorf("pattern %d: %q %q %v", i, u, tenant, ok)
		}
		if u, tenant, ok := tab.Match(fmt.Sprintf("/u%d/mcp", i)); !ok || u != fmt.Sprintf("exact%d", i) || tenant != "" {
			t.Errorf("exact %d: %q %q %v", i, u, tenant, ok)
		}
	}
	if _, _, ok := tab.Match("/p200/acme/mcp"); ok {
		t.Error("unknown route matched")
	}
}

// BenchmarkMatch: the route lookup every request makes, with one pattern
// and with 50 exact routes and 50 patterns (the last pattern matching).
func BenchmarkMatch(b *testing.B) {
	one, err := New([]Route{{Path: "/mcp", Upstream: "a"}, {Path: "/t/{tenant}/mcp", Upstream: "b"}})
	if err != nil {
		b.Fatal(err)
	}
	many := manyRoutes(b, 50)
	for _, bb := range []struct {
		name string
		tab  *Table
		path string
	}{
		{"exact", one, "/mcp"},
		{"pattern", one, "/t/acme-corporation/mcp"},
		{"miss", one, "/t/%61cme/mcp"},
		{"many/exact", many, "/u49/mcp"},
		{"many/last-pattern", many, "/p49/acme-corporation/mcp"},
		{"many/miss", many, "/nowhere/acme/mcp"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _ = bb.tab.Match(bb.path)
			}
		})
	}
}
