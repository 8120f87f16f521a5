package approval

import (
	"html"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// The pages are written by the functions below rather than by html/template:
// its executor looks fields up with reflect.Value.MethodByName, and that call
// being reachable makes the Go linker keep every exported method of every
// type converted to an interface, binary-wide (about 16 MB more of
// mcpgate's binary). The pages are small and fixed; every value that is not
// markup of this file goes through htmlWriter.text (element content and
// quoted attribute values) or htmlWriter.url (href and action attributes).

// htmlWriter builds one page.
type htmlWriter struct{ strings.Builder }

// raw writes markup of this file, never data.
func (w *htmlWriter) raw(s string) { w.WriteString(s) }

// text writes s escaped for element content or a double-quoted attribute
// value. A NUL becomes U+FFFD, as html/template writes it: in element
// content the browser drops a NUL, and the person would not see that the
// value holds one.
func (w *htmlWriter) text(s string) {
	s = html.EscapeString(s)
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	w.WriteString(s)
}

// pre writes s as the content of a <pre> just opened: the browser drops
// one line feed right after the tag, so a value that starts with one gets
// one more, to be shown as it is.
func (w *htmlWriter) pre(s string) {
	if strings.HasPrefix(s, "\n") || strings.HasPrefix(s, "\r") {
		w.raw("\n")
	}
	w.text(s)
}

// time writes t as RFC 3339 in UTC, escaped; nothing for the zero time.
func (w *htmlWriter) time(t time.Time) { w.text(fmtTime(t)) }

// url writes s for an href or action attribute: a URL with a scheme other
// than http or https (javascript:, data:, …) becomes "#ZgotmplZ", as
// html/template writes it; the rest is escaped.
func (w *htmlWriter) url(s string) {
	if u, err := url.Parse(s); err != nil || (u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https") {
		s = "#ZgotmplZ"
	}
	w.text(s)
}

func (w *htmlWriter) head(title string) {
	w.raw(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>`)
	w.text(title)
	w.raw(` — mcpgate approvals</title>
<link rel="stylesheet" href="/approvals/static/style.css">
</head>
<body>
<header><a class="brand" href="/approvals/">mcpgate approvals</a></header>
<main>
`)
}

func (w *htmlWriter) foot() {
	w.raw(`
</main>
</body>
</html>
`)
}

func (w *htmlWriter) whoami(s *session) {
	if s == nil {
		return
	}
	w.raw(`<p class="whoami">Signed in as <strong>`)
	w.text(s.Subject)
	w.raw(`</strong>`)
	if s.Name != "" {
		w.raw(` (`)
		w.text(s.Name)
		w.raw(`)`)
	}
	w.raw(`, tenant <strong>`)
	w.text(s.Tenant)
	w.raw(`</strong>`)
	if s.Demo {
		w.raw(` <span class="demo">demo sign-in</span>`)
	}
	w.raw("</p>\n")
}

// errorHTML is the page of a refusal.
func errorHTML(e errorPage) string {
	var w htmlWriter
	w.head("Refused")
	w.raw(`<h1>Refused</h1>
<p id="error" class="refusal" data-code="`)
	w.text(e.Code)
	w.raw(`"><strong>`)
	w.text(e.Code)
	w.raw(`</strong>: `)
	w.text(e.Cause)
	w.raw("</p>\n")
	if e.Fix != "" {
		w.raw(`<p id="fix">`)
		w.text(e.Fix)
		w.raw("</p>\n")
	}
	if e.SignIn != "" {
		w.raw(`<p><a id="sign-in" href="`)
		w.url(e.SignIn)
		w.raw("\">Sign in</a></p>\n")
	}
	if e.Back != "" {
		w.raw(`<p><a id="back" href="`)
		w.url(e.Back)
		w.raw("\">Back to the action</a></p>\n")
	}
	w.foot()
	return w.String()
}

// continueHTML sends the browser on to next in one same-site step; next
// must be a path of this page (safeNext).
func continueHTML(next string) string {
	var w htmlWriter
	w.raw(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="refresh" content="0;url=`)
	w.url(next)
	w.raw(`">
<title>Continue — mcpgate approvals</title>
<link rel="stylesheet" href="/approvals/static/style.css">
</head>
<body><main><p><a id="continue" href="`)
	w.url(next)
	w.raw(`">Continue to the approval page</a></p></main></body>
</html>
`)
	return w.String()
}

// listHTML lists the pending actions the approver may decide on; hidden
// counts those of the tenant they may not.
func listHTML(s *session, items []listItem, hidden int) string {
	var w htmlWriter
	w.head("Pending actions")
	w.whoami(s)
	w.raw("<h1>Pending actions</h1>\n")
	if len(items) > 0 {
		w.raw("<ul id=\"pending\" class=\"pending\">\n")
		for _, it := range items {
			w.raw(`<li class="item"><a href="`)
			w.url(it.Link)
			w.raw(`"><strong>`)
			w.text(it.Tool)
			w.raw(`</strong></a> — asked by `)
			w.text(it.Subject)
			if it.Client != "" {
				w.raw(` via `)
				w.text(it.Client)
			}
			w.raw(`, expires `)
			w.time(it.ExpiresAt)
			w.raw("\n<div class=\"untrusted summary\">")
			w.text(it.Summary)
			w.raw("</div></li>\n")
		}
		w.raw("</ul>\n")
	} else {
		w.raw("<p id=\"empty\">Nothing waits for your approval.</p>\n")
	}
	if hidden > 0 {
		w.raw(`<p class="note">`)
		w.text(strconv.Itoa(hidden))
		w.raw(" pending action(s) of your tenant need a right you do not hold (or another person's approval) and are not listed.</p>\n")
	}
	w.foot()
	return w.String()
}

// actionHTML shows one action with the forms to approve or reject it.
func actionHTML(v viewPage) string {
	a := v.Action
	var w htmlWriter
	w.head("Approve or reject")
	w.whoami(v.Session)
	w.raw(`<h1>`)
	w.text(a.Tool)
	w.raw(`</h1>
<section>
<h2>Summary</h2>
<p id="summary" class="summary">`)
	w.text(a.Summary)
	w.raw(`</p>
</section>
<section>
<h2>What will go out</h2>
<p class="note">Exactly these arguments are sent to <code>`)
	w.text(a.Tool)
	w.raw(`</code> when the agent confirms. Text came through the agent and may quote anyone: it is shown as plain text.</p>
<dl id="content" class="content">
`)
	for _, arg := range v.Arguments {
		w.raw(`<dt>`)
		w.text(arg.Name)
		w.raw(`</dt>` + "\n<dd>")
		if arg.IsText {
			w.raw(`<pre class="untrusted">`)
			w.pre(arg.Text)
		} else {
			w.raw(`<pre class="value">`)
			w.pre(arg.JSON)
		}
		w.raw("</pre></dd>\n")
	}
	w.raw(`</dl>
</section>
<section>
<h2>Who asked</h2>
<dl id="requester" class="requester">
<dt>Person</dt><dd class="person">`)
	if a.Subject != "" {
		w.text(a.Subject)
	} else {
		w.raw(`(no person: a service credential)`)
	}
	w.raw(`</dd>` + "\n" + `<dt>Client</dt><dd class="client">`)
	if a.Client != "" {
		w.raw(`<span class="untrusted">`)
		w.text(a.Client)
		w.raw(`</span>`)
	} else {
		w.raw(`(not named)`)
	}
	w.raw(`</dd>` + "\n" + `<dt>Connection</dt><dd class="connection"><code>`)
	w.text(a.Connection)
	w.raw(`</code></dd>` + "\n<dt>Asked at</dt><dd>")
	w.time(a.CreatedAt)
	w.raw("</dd>\n</dl>\n" + `<p>Expires: <time id="expires" datetime="`)
	w.time(a.ExpiresAt)
	w.raw(`">`)
	w.time(a.ExpiresAt)
	w.raw("</time></p>\n</section>\n")
	if v.Refusal != nil {
		w.raw(`<p id="notice" class="refusal"><strong>`)
		w.text(v.Refusal.Code)
		w.raw(`</strong>: `)
		w.text(v.Refusal.Cause)
		w.raw(` `)
		w.text(v.Refusal.Fix)
		w.raw("</p>\n")
	}
	w.raw(`<section class="decide">
<form id="approve-form" method="post" action="`)
	w.url(v.Approve)
	w.raw(`">
<input type="hidden" name="csrf" value="`)
	w.text(v.CSRF)
	w.raw(`">
<button id="approve" type="submit"`)
	if v.Refusal != nil {
		w.raw(` disabled`)
	}
	w.raw(`>Approve</button>
</form>
<form id="reject-form" method="post" action="`)
	w.url(v.Reject)
	w.raw(`">
<input type="hidden" name="csrf" value="`)
	w.text(v.CSRF)
	w.raw(`">
<label for="reason">Reason for rejecting (optional)</label>
<textarea id="reason" name="reason" maxlength="500" rows="3"></textarea>
<button id="reject" type="submit"`)
	if v.Refusal != nil && v.Refusal.Code != "own_action" {
		w.raw(` disabled`)
	}
	w.raw(`>Reject</button>
</form>
</section>`)
	w.foot()
	return w.String()
}

// resultHTML reports a decision just taken on a.
func resultHTML(s *session, a *store.Action, approved bool) string {
	var w htmlWriter
	w.head("Decision")
	w.whoami(s)
	if approved {
		w.raw(`<p id="result" class="result approved">Approved: `)
		w.text(a.Tool)
		w.raw(` will run once, when the agent confirms it (before `)
		w.time(a.ExpiresAt)
		w.raw(").</p>\n")
	} else {
		w.raw(`<p id="result" class="result rejected">Rejected: `)
		w.text(a.Tool)
		w.raw(` will never run. Reason: `)
		w.text(a.Reason)
		w.raw("</p>\n")
	}
	w.raw(`<p id="summary" class="summary">`)
	w.text(a.Summary)
	w.raw("</p>\n" + `<p><a href="/approvals/">Back to the pending actions</a></p>`)
	w.foot()
	return w.String()
}
