package approval

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// After sign-in the browser goes to next: on this site and under Prefix,
// however next spells its dot segments (http.Redirect cleans "..", a
// browser resolves "%2e%2e" as "..").
func TestAttackSafeNextStaysUnderPrefix(t *testing.T) {
	base, _ := url.Parse("https://gw.example/approvals/callback")
	for _, n := range []string{
		"/approvals/a/x", "/approvals/?x=1", "/approvals/a/x?next=//evil",
		"/approvals/../evil", "/approvals/../../evil", "/approvals/a/../../v1/x", "/approvals/./../evil",
		"/approvals/%2e%2e/evil", "/approvals/%2E%2E/%2e%2e/evil", "/approvals/.%2e/evil", "/approvals/%2e./evil",
		"/approvals/..%2f..%2fevil", "/approvals/..", "/approvals/%2e%2e", "/approvals/a/%2e%2e/%2e%2e",
		"//evil.example/", "/\\evil.example/", "/approvals/\\..\\evil", "/approvals/%5c..%5cevil",
		"https://evil.example/approvals/", "javascript:alert(1)//approvals/",
	} {
		s := safeNext(n)
		w := httptest.NewRecorder()
		http.Redirect(w, httptest.NewRequest("GET", "/approvals/callback", nil), s, http.StatusSeeOther)
		loc := w.Header().Get("Location")
		u, err := url.Parse(strings.ReplaceAll(loc, "\\", "/"))
		if err != nil {
			t.Errorf("next %q: Location %q: %v", n, loc, err)
			continue
		}
		// A browser resolves percent-encoded dot segments too.
		got := base.ResolveReference(u)
		p := strings.NewReplacer("%2e", ".", "%2E", ".").Replace(got.EscapedPath())
		got = base.ResolveReference(&url.URL{Path: p})
		if got.Host != "gw.example" || !strings.HasPrefix(got.Path, Prefix) {
			t.Errorf("next %q: safeNext %q, Location %q: the browser goes to %s", n, s, loc, got)
		}
	}
}
