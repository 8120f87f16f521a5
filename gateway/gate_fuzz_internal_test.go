package gateway

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzTenantQueryName: the tenant-like query check reads a name the same
// whether it arrives plain or percent-encoded once more, and a tenant name
// followed by a framework's nesting ("[", "."), plain or encoded, or a NUL is always
// read as the tenant name, whatever follows.
func FuzzTenantQueryName(f *testing.F) {
	names := map[string]bool{}
	for _, n := range DefaultTenantArguments {
		names[foldName(n)] = true
	}
	for _, s := range []string{"tenant", "tenant[]", "tenant[x]", "tenant.id", "org.id", "%74enant", "%2574enant", "tenant%00", "TENANT",
		"tenant%5B%5D", "ten%zzant", "work\u017fpace_id", "a", "", "+tenant+", "tenant\x00x", "org id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := isTenantParam(s, names)
		if !strings.ContainsAny(s, "%+") {
			if enc := url.QueryEscape(s); isTenantParam(enc, names) != got {
				t.Fatalf("%q read as tenant-like: %v, its encoding %q: %v", s, got, enc, !got)
			}
		}
		for _, n := range []string{"tenant", "Org_ID"} {
			for _, sep := range []string{"[", ".", "%00", "%5B", "%2E", " "} {
				if p := n + sep + s; !isTenantParam(p, names) && sep != " " {
					t.Fatalf("%q not read as tenant-like", p)
				}
			}
		}
		if q := "a=1&" + url.QueryEscape(s) + "=x"; got && tenantQueryName(q, names) == "" && !strings.ContainsAny(s, "&;=") {
			t.Fatalf("query %q: not refused", q)
		}
	})
}
