package approval

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// Every value that is not the page's own markup is escaped, wherever it
// lands (element content, attribute values), and a URL with a script
// scheme never reaches an href or form action.
func TestPagesEscapeData(t *testing.T) {
	const evil = `"><script>alert(1)</script><img src=x onerror='y'>&`
	const escaped = `&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=&#39;y&#39;&gt;&amp;`
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &session{Tenant: evil, Subject: evil, Name: evil, Demo: true}
	a := &store.Action{ID: "a1", Tool: evil, Summary: evil, Subject: evil, Client: evil, Connection: evil, Reason: evil, CreatedAt: at, ExpiresAt: at}
	pages := []struct {
		name string
		html string
		// want are fragments the page must hold.
		want []string
	}{
		{"error", errorHTML(errorPage{Code: evil, Cause: evil, Fix: evil, SignIn: "javascript:alert(1)", Back: "/approvals/a/a1"}),
			[]string{`data-code="` + escaped + `"`, `<p id="fix">` + escaped + `</p>`, `id="sign-in" href="#ZgotmplZ"`, `id="back" href="/approvals/a/a1"`}},
		{"continue", continueHTML(`/approvals/a/x"y`),
			[]string{`content="0;url=/approvals/a/x&#34;y"`, `id="continue" href="/approvals/a/x&#34;y"`}},
		{"continue to a script", continueHTML(`JavaScript:alert(1)`),
			[]string{`content="0;url=#ZgotmplZ"`, `href="#ZgotmplZ"`}},
		{"list", listHTML(s, []listItem{{Tool: evil, Summary: evil, Subject: evil, Client: evil, ExpiresAt: at, Link: "data:text/html,x"}}, 2),
			[]string{`<strong>` + escaped + `</strong></a> — asked by ` + escaped + ` via ` + escaped + `, expires 2026-01-02T03:04:05Z`,
				`<div class="untrusted summary">` + escaped + `</div>`, `href="#ZgotmplZ"`, `<p class="note">2 pending action(s)`,
				`Signed in as <strong>` + escaped + `</strong> (` + escaped + `), tenant <strong>` + escaped + `</strong> <span class="demo">`}},
		{"empty list", listHTML(nil, nil, 0), []string{`<p id="empty">`}},
		{"action", actionHTML(viewPage{Session: s, Action: a, CSRF: evil, Approve: "/approvals/a/a1/approve", Reject: "/approvals/a/a1/reject",
			Arguments: []argument{{Name: evil, Text: evil, IsText: true}, {Name: "n", JSON: `{"k":"<b>"}`}},
			Refusal:   &refusal{Code: "own_action", Cause: evil, Fix: evil}}),
			[]string{`<h1>` + escaped + `</h1>`, `<dt>` + escaped + `</dt>`, `<pre class="untrusted">` + escaped + `</pre>`,
				`<pre class="value">{&#34;k&#34;:&#34;&lt;b&gt;&#34;}</pre>`, `name="csrf" value="` + escaped + `"`,
				`<span class="untrusted">` + escaped + `</span>`, `<code>` + escaped + `</code>`, `datetime="2026-01-02T03:04:05Z"`,
				`action="/approvals/a/a1/approve"`, `<button id="approve" type="submit" disabled>`, `<button id="reject" type="submit">`}},
		{"result", resultHTML(s, a, false), []string{`Rejected: ` + escaped + ` will never run. Reason: ` + escaped}},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			if strings.Contains(p.html, "<script") || strings.Contains(p.html, "<img") || strings.Contains(p.html, "javascript:") ||
				strings.Contains(strings.ToLower(p.html), `href="javascript`) || strings.Contains(p.html, "data:text") {
				t.Errorf("unescaped data in the page:\n%s", p.html)
			}
			for _, w := range p.want {
				if !strings.Contains(p.html, w) {
					t.Errorf("page lacks %s\n%s", w, p.html)
				}
			}
		})
	}
}
