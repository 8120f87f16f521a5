package approval

import (
	"bufio"
	"bytes"
	htmltemplate "html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/mcpgate/mcpgate/store"
)

// hostile are values an agent, a person or a provider could put in any
// field the pages show.
var hostile = []string{
	``,
	`plain`,
	`"><script>alert(1)</script>`,
	`'><img src=x onerror=alert(1)>`,
	`</pre><script>alert(1)</script>`,
	`</textarea><script>alert(1)</script>`,
	`</title><script>alert(1)</script>`,
	`<!--`, `-->`, `<![CDATA[`, `<?xml`, `<!doctype html>`,
	"`onmouseover=alert(1)`",
	"a\u2028b\u2029c",
	"bad\xff\xfeutf8\xc3",
	"\xc3<script>",
	"nul\x00<b>x\x00</b>",
	"\x00",
	"cr\rlf\nx",
	"\nleading newline",
	"\n\ntwo leading newlines",
	"\r\nleading CR LF",
	"\rleading CR",
	"&amp; &lt; &#60; &#x3c; &#0; &",
	"javascript:alert(1)",
	"JaVaScRiPt:alert(1)",
	" javascript:alert(1)",
	"\tjavascript:alert(1)",
	"\x01javascript:alert(1)",
	"java\tscript:alert(1)",
	"java\nscript:alert(1)",
	"javascript&#58;alert(1)",
	"javascript&colon;alert(1)",
	"&#106;avascript:alert(1)",
	"jav&#x09;ascript:alert(1)",
	"'javascript:alert(1)'",
	`"javascript:alert(1)"`,
	"data:text/html,<script>alert(1)</script>",
	"DATA:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==",
	"vbscript:msgbox(1)",
	"//evil.example/",
	"/\\evil.example/",
	"\\\\evil.example/",
	"/approvals/..%2f..%2fevil",
	"/approvals/../../evil",
	"/approvals/%2e%2e/%2e%2e/evil",
	"http://evil.example/",
	"http:javascript:alert(1)",
	"0;url=javascript:alert(1)",
	";url='//evil.example/'",
	"\u202egnp.exe",
	"\ufeff\u200b",
}

// urlAttr are the attributes whose values a browser follows.
var urlAttr = map[string]bool{"href": true, "action": true, "src": true, "formaction": true, "srcdoc": true}

type pageSet struct {
	name  string
	build func(v string) string
}

// pages renders every page with v in every field that takes data.
func pages() []pageSet {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	sess := func(v string) *session { return &session{Tenant: v, Subject: v, Name: v, Demo: true} }
	act := func(v string) *store.Action {
		return &store.Action{ID: v, Tool: v, Summary: v, Subject: v, Client: v, Connection: v, Reason: v, Tenant: v, DecidedBy: v, CreatedAt: at, ExpiresAt: at}
	}
	link := func(v string) string { return Prefix + "a/" + url.PathEscape(v) }
	return []pageSet{
		{"error", func(v string) string {
			return errorHTML(errorPage{Code: v, Cause: v, Fix: v, SignIn: loginURL(link(v)), Back: link(v)})
		}},
		{"error-url-sinks", func(v string) string {
			// Not a path the server builds: the sinks themselves.
			return errorHTML(errorPage{Code: "c", Cause: "c", Fix: "f", SignIn: v + "x", Back: v + "x"})
		}},
		{"list", func(v string) string {
			return listHTML(sess(v), []listItem{{ID: v, Tool: v, Summary: v, Subject: v, Client: v, ExpiresAt: at, Link: link(v)}}, 3)
		}},
		{"action", func(v string) string {
			a := act(v)
			return actionHTML(viewPage{Session: sess(v), Action: a, CSRF: v, Approve: link(v) + "/approve", Reject: link(v) + "/reject",
				Arguments: []argument{{Name: v, Text: v, IsText: true}, {Name: v + "j", JSON: v}},
				Refusal:   &refusal{Code: v, Cause: v, Fix: v}})
		}},
		{"result-approved", func(v string) string { return resultHTML(sess(v), act(v), true) }},
		{"result-rejected", func(v string) string { return resultHTML(sess(v), act(v), false) }},
	}
}

// parsePage is doc as a browser parses it.
func parsePage(t *testing.T, doc string) *html.Node {
	t.Helper()
	root, err := html.Parse(strings.NewReader(decoded(doc)))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// skeleton is the page's elements in order, each with its attribute names
// and the values of its non-data attributes.
func skeleton(t *testing.T, doc string) []string {
	t.Helper()
	var out []string
	for n := range parsePage(t, doc).Descendants() {
		switch n.Type {
		case html.ElementNode:
			var attrs []string
			for _, a := range n.Attr {
				attrs = append(attrs, a.Namespace+":"+a.Key)
			}
			out = append(out, n.Data+"["+strings.Join(attrs, ",")+"]")
		case html.CommentNode:
			out = append(out, "<!--comment-->")
		case html.DoctypeNode:
			out = append(out, "<!doctype "+n.Data+">")
		}
	}
	return out
}

// scriptScheme reports whether a browser would follow u into a script or
// data scheme: leading C0 controls and spaces trimmed, tabs and newlines
// removed, as the URL parser does.
func scriptScheme(u string) bool {
	u = strings.TrimLeft(u, "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f ")
	u = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(u)
	u = strings.ToLower(u)
	for _, s := range []string{"javascript:", "data:", "vbscript:", "blob:", "file:"} {
		if strings.HasPrefix(u, s) {
			return true
		}
	}
	return false
}

// refreshURL is the URL of a meta refresh content value, as the HTML
// spec's declarative refresh steps read it.
func refreshURL(content string) string {
	s := strings.TrimLeft(content, " \t\n\f\r")
	s = strings.TrimLeft(s, "0123456789.")
	s = strings.TrimLeft(s, " \t\n\f\r")
	if strings.HasPrefix(s, ";") || strings.HasPrefix(s, ",") {
		s = s[1:]
	}
	s = strings.TrimLeft(s, " \t\n\f\r")
	if len(s) >= 3 && strings.EqualFold(s[:3], "url") {
		r := strings.TrimLeft(s[3:], " \t\n\f\r")
		if strings.HasPrefix(r, "=") {
			s = strings.TrimLeft(r[1:], " \t\n\f\r")
		}
	}
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		q := s[0]
		s = s[1:]
		if i := strings.IndexByte(s, q); i >= 0 {
			s = s[:i]
		}
	}
	return s
}

// urls are the followed URLs of a page, after HTML unescaping.
func urls(t *testing.T, doc string) []string {
	t.Helper()
	var out []string
	for n := range parsePage(t, doc).Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		refresh := false
		for _, a := range n.Attr {
			if a.Key == "http-equiv" && strings.EqualFold(a.Val, "refresh") {
				refresh = true
			}
		}
		for _, a := range n.Attr {
			if urlAttr[a.Key] {
				out = append(out, a.Val)
			}
			if refresh && a.Key == "content" {
				out = append(out, refreshURL(a.Val))
			}
		}
	}
	return out
}

// sameSite reports whether u, followed from a page of this site, stays
// on it and under Prefix (or is the inert "#ZgotmplZ").
func sameSite(u string) bool {
	if u == "#ZgotmplZ" {
		return true
	}
	base, _ := url.Parse("https://gw.example/approvals/a/x")
	// Browsers read a backslash as a slash in http(s) URLs.
	ref, err := url.Parse(strings.ReplaceAll(u, "\\", "/"))
	if err != nil {
		return false
	}
	got := base.ResolveReference(ref)
	return got.Scheme == "https" && got.Host == "gw.example" && strings.HasPrefix(got.Path, Prefix)
}

// No data value adds an element, an attribute or a comment, and no URL a
// browser follows on any page carries a script scheme or leaves the page.
func TestAttackPagesStructure(t *testing.T) {
	for _, p := range pages() {
		want := skeleton(t, p.build("benign"))
		for _, v := range hostile {
			doc := p.build(v)
			if v == "" {
				continue // optional parts left out
			}
			if got := skeleton(t, doc); !slices.Equal(got, want) {
				t.Errorf("%s with %q: structure changed\n got %v\nwant %v\n%s", p.name, v, got, want, doc)
			}
			for _, u := range urls(t, doc) {
				if scriptScheme(u) {
					t.Errorf("%s with %q: script URL %q", p.name, v, u)
				}
				if p.name != "error-url-sinks" && !sameSite(u) {
					t.Errorf("%s with %q: URL %q leaves the page", p.name, v, u)
				}
			}
		}
	}
}

// The url sink itself: nothing it lets through is a script URL.
func TestAttackURLSink(t *testing.T) {
	for _, v := range hostile {
		for _, s := range []string{v, v + "x", "  " + v, strings.ToUpper(v)} {
			for _, u := range urls(t, continueHTML(s)) {
				if scriptScheme(u) {
					t.Errorf("continueHTML(%q): script URL %q", s, u)
				}
			}
		}
	}
}

// textOf is the text content a browser shows for the first element with
// the given tag and class.
func textOf(t *testing.T, doc string, tag atom.Atom, class string) (string, bool) {
	t.Helper()
	for n := range parsePage(t, doc).Descendants() {
		if n.Type != html.ElementNode || n.DataAtom != tag || !slices.ContainsFunc(n.Attr, func(a html.Attribute) bool {
			return a.Key == "class" && a.Val == class
		}) {
			continue
		}
		var b strings.Builder
		for c := range n.Descendants() {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return b.String(), true
	}
	return "", false
}

// What will go out is what the approver reads: an argument's text, as the
// browser shows it, is the argument (CR LF and lone CR aside, which the
// HTML parser turns into LF). Invalid UTF-8 reads as U+FFFD.
func TestAttackArgumentShownAsSent(t *testing.T) {
	for _, v := range hostile {
		doc := actionHTML(viewPage{Action: &store.Action{Tool: "t"}, Arguments: []argument{{Name: "n", Text: v, IsText: true}}})
		got, ok := textOf(t, doc, atom.Pre, "untrusted")
		if !ok {
			t.Fatalf("no <pre class=untrusted> for %q\n%s", v, doc)
		}
		want := strings.ToValidUTF8(strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(v), "\uFFFD")
		// A NUL cannot be shown; the page must at least show that
		// something is there, as html/template did (U+FFFD).
		want = strings.ReplaceAll(want, "\x00", "\uFFFD")
		if got != want {
			t.Errorf("argument %q is shown as %q\n%s", v, got, doc)
		}
	}
}

// The pages as the templates before html.go wrote them (the templates
// are kept in testdata): the same document tree for every hostile value,
// but for the refresh URL, which html.go filters and html/template did
// not, and NUL, which html/template wrote as U+FFFD.
func TestAttackSameAsHTMLTemplate(t *testing.T) {
	tmpl := htmltemplate.Must(htmltemplate.New("").Funcs(htmltemplate.FuncMap{"fmtTime": fmtTime}).
		ParseGlob(filepath.Join("testdata", "templates-before-7c00137", "*.html")))
	exec := func(name string, data any) string {
		var b bytes.Buffer
		if err := tmpl.ExecuteTemplate(&b, name, data); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, v := range hostile {
		s := &session{Tenant: v, Subject: v, Name: v, Demo: true}
		a := &store.Action{ID: v, Tool: v, Summary: v, Subject: v, Client: v, Connection: v, Reason: v, CreatedAt: at, ExpiresAt: at}
		items := []listItem{{ID: v, Tool: v, Summary: v, Subject: v, Client: v, ExpiresAt: at, Link: v}}
		ep := errorPage{Code: v, Cause: v, Fix: v, SignIn: v, Back: v}
		vp := viewPage{Session: s, Action: a, CSRF: v, Approve: v, Reject: v,
			Arguments: []argument{{Name: v, Text: v, IsText: true}, {Name: v, JSON: v}}, Refusal: &refusal{Code: v, Cause: v, Fix: v}}
		cases := []struct{ name, old, new string }{
			{"error", exec("error.html", ep), errorHTML(ep)},
			{"list", exec("list.html", map[string]any{"Session": s, "Items": items, "Hidden": 2}), listHTML(s, items, 2)},
			{"action", exec("action.html", vp), actionHTML(vp)},
			{"approved", exec("result.html", map[string]any{"Session": s, "Action": a, "Approved": true}), resultHTML(s, a, true)},
			{"rejected", exec("result.html", map[string]any{"Session": s, "Action": a, "Approved": false}), resultHTML(s, a, false)},
			{"continue", exec("continue.html", map[string]string{"Next": v}), continueHTML(v)},
		}
		for _, c := range cases {
			o, n := tree(t, c.old), tree(t, c.new)
			if o != n {
				t.Errorf("%s with %q: the page differs from html/template's\nold: %s\nnew: %s", c.name, v, o, n)
			}
			// html.go may refuse more URLs (control characters) than
			// html/template did; where it lets one through that
			// html/template refused, it is a same-site relative one.
			ou, nu := urls(t, c.old), urls(t, c.new)
			if len(ou) != len(nu) {
				t.Errorf("%s with %q: URLs %q, html/template's %q", c.name, v, nu, ou)
				continue
			}
			for i := range ou {
				if ou[i] == "#ZgotmplZ" && nu[i] != "#ZgotmplZ" {
					// html/template refuses any colon before the
					// first slash; url.Parse cuts the fragment
					// first ("&#106;avascript:" is "&" and a
					// fragment, to a browser too).
					if scriptScheme(nu[i]) || !sameSite(nu[i]) {
						t.Errorf("%s with %q: URL %q, html/template refused it", c.name, v, nu[i])
					}
				}
			}
		}
	}
}

// tree renders the parsed document, whitespace-only text dropped (the
// templates' blank lines), the refresh content and URL values left
// out.
func tree(t *testing.T, doc string) string {
	t.Helper()
	root := parsePage(t, doc)
	var b strings.Builder
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			b.WriteString("<" + n.Data)
			for _, a := range n.Attr {
				if a.Key == "content" && n.DataAtom == atom.Meta {
					continue
				}
				val := a.Val
				if urlAttr[a.Key] {
					// html/template percent-encodes what html.go
					// entity-escapes: the same URL, spelt otherwise
					// (compared apart).
					val = "(a URL)"
				}
				b.WriteString(" " + a.Key + "=" + strconvQuote(val))
			}
			b.WriteString(">")
		case html.TextNode:
			if strings.TrimSpace(n.Data) != "" {
				b.WriteString(strconvQuote(strings.TrimSpace(n.Data)))
			}
		case html.CommentNode:
			b.WriteString("<!--" + n.Data + "-->")
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
		if n.Type == html.ElementNode {
			b.WriteString("</" + n.Data + ">")
		}
	}
	walk(root)
	return b.String()
}

func strconvQuote(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u202e' || r == '\ufeff' || r == '\u200b' || r == '\ufffd':
			b.WriteString(`\u`)
			const hex = "0123456789abcdef"
			b.WriteByte(hex[r>>12&0xf])
			b.WriteByte(hex[r>>8&0xf])
			b.WriteByte(hex[r>>4&0xf])
			b.WriteByte(hex[r&0xf])
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// The only URL of a request that reaches a page is the continue page's,
// from the request's own URI: through the gateway's muxes, whatever the
// request line, it stays under Prefix on this site.
func TestAttackContinueFromRequestLine(t *testing.T) {
	outer := http.NewServeMux()
	outer.Handle(Prefix, (&Page{}).Handler())
	srv := httptest.NewServer(outer)
	defer srv.Close()
	targets := []string{
		"/approvals/", "/approvals/?next=//evil.example/", "/approvals/?%0d%0aSet-Cookie:x=1",
		"/approvals/a/x", "/approvals/a/%2F%2Fevil.example", "/approvals/a/..%2f..%2fevil", "/approvals/a/%2e%2e",
		"/approvals/a/%5Cevil.example", "/approvals/a/x?';url=javascript:alert(1)", "/approvals/a/x?\"><script>",
		"//evil.example/approvals/", "/approvals//evil.example/", "/approvals/a/\\evil.example", "/approvals/..//evil.example/",
		"https://evil.example/approvals/", "http://evil.example/approvals/a/x", "/approvals/a/javascript:alert(1)",
		"/approvals/a/x#frag", "/approvals/./a/x", "/approvals/a/%00", "/approvals/a/%09evil",
	}
	for _, target := range targets {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte("GET " + target + " HTTP/1.1\r\nHost: gw.example\r\nSec-Fetch-Site: cross-site\r\nConnection: close\r\n\r\n"))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Errorf("%s: %v", target, err)
			continue
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		c.Close()
		if loc := resp.Header.Get("Location"); loc != "" {
			// The muxes' own redirect to the cleaned path.
			if !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.Contains(loc, "\\") {
				t.Errorf("%s: redirect to %q", target, loc)
			}
			continue
		}
		for _, u := range urls(t, body.String()) {
			if scriptScheme(u) || !sameSite(u) {
				t.Errorf("%s: the page links to %q\n%s", target, u, body.String())
			}
		}
		t.Logf("%-45q %d loc=%q urls=%q", target, resp.StatusCode, resp.Header.Get("Location"), urls(t, body.String()))
	}
}

// decoded is doc as a browser decodes it from UTF-8: invalid bytes read
// as U+FFFD (the parser of x/net/html works on the bytes).
func decoded(doc string) string { return strings.ToValidUTF8(doc, "\uFFFD") }
