package provider

import (
	"html/template"
	"net/http"
	"net/url"
	"strings"
)

// Element IDs of the sign-in page (Config.LoginForm), for browser tests.
const (
	// LoginFormID is the sign-in form; it posts to PathLogin.
	LoginFormID = "login-form"
	// LoginSubjectField is the name (and id) of the field holding the
	// subject of the user who signs in.
	LoginSubjectField = "subject"
	// LoginSubmitID is the form's submit button.
	LoginSubmitID = "sign-in"
)

// loginPage is the sign-in page: one field for a configured user's
// subject (suggestions from a datalist) and a submit button. html/template
// escapes every value; nothing on it runs script.
var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in — test OpenID provider</title>
<style>
body{font-family:system-ui,sans-serif;background:#f3f4f6;margin:0;color:#111827}
main{max-width:26rem;margin:4rem auto;background:#fff;border:1px solid #d1d5db;border-radius:.5rem;padding:1.5rem 2rem}
h1{font-size:1.4rem;margin:0 0 .5rem}
p{color:#4b5563;font-size:.9rem}
label{display:block;font-weight:600;margin:1rem 0 .3rem}
input{width:100%;box-sizing:border-box;padding:.5rem;font-size:1rem;border:1px solid #9ca3af;border-radius:.3rem}
button{margin-top:1rem;padding:.55rem 1.2rem;font-size:1rem;background:#1d4ed8;color:#fff;border:0;border-radius:.3rem}
.error{color:#b91c1c;font-weight:600}
</style>
</head>
<body>
<main>
<h1>Sign in</h1>
<p>Test OpenID provider <code>{{.Issuer}}</code>. The application <strong>{{.Client}}</strong> asks you to sign in.</p>
{{if .Error}}<p class="error" id="login-error" role="alert">{{.Error}}</p>{{end}}
<form id="login-form" method="post" action="{{.Action}}">
<input type="hidden" name="id" value="{{.ID}}">
<label for="subject">User</label>
<input id="subject" name="subject" list="users" value="{{.Subject}}" autocomplete="username" required autofocus>
<datalist id="users">{{range .Users}}<option value="{{.Subject}}">{{.Tenant}}</option>{{end}}</datalist>
<button id="sign-in" type="submit">Sign in</button>
</form>
</main>
</body>
</html>
`))

// loginView is what loginPage shows.
type loginView struct {
	Issuer, Client, Action, ID, Subject, Error string
	Users                                      []User
}

// showLoginForm renders the sign-in page for auth request ar, with the
// field filled with subject and an error line when problem is set.
func (p *Provider) showLoginForm(w http.ResponseWriter, ar *authRequest, subject, problem string, status int) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	// No form-action: browsers apply it to the redirects after the POST
	// too, and those lead to the client's redirect URI on another origin.
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = loginPage.Execute(w, loginView{
		Issuer: p.cfg.Issuer, Client: ar.clientID, Action: PathLogin, ID: ar.id,
		Subject: subject, Error: problem, Users: p.cfg.Users,
	})
}

// loginSubmit takes the sign-in form (POST PathLogin, fields id and
// subject): a configured user's subject approves the auth request and the
// browser goes on to the authorization callback, which issues the code;
// an unknown subject shows the form again with an error (400). Without
// Config.LoginForm the form does not exist (404).
func (p *Provider) loginSubmit(w http.ResponseWriter, r *http.Request) {
	if !p.cfg.LoginForm {
		http.NotFound(w, r)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "the sign-in form could not be read", http.StatusBadRequest)
		return
	}
	id := r.PostForm.Get("id")
	found, err := p.store.AuthRequestByID(r.Context(), id)
	if err != nil {
		http.Error(w, "unknown or finished sign-in request; start again from the application", http.StatusBadRequest)
		return
	}
	ar := found.(*authRequest)
	if ar.done {
		http.Error(w, "this sign-in request was already completed; start again from the application", http.StatusBadRequest)
		return
	}
	subject := strings.TrimSpace(r.PostForm.Get(LoginSubjectField))
	if p.cfg.user(subject) == nil {
		p.showLoginForm(w, ar, subject, "No user \""+subject+"\" here; type the subject of a configured user.", http.StatusBadRequest)
		return
	}
	if _, err := p.store.approve(id, subject); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	callback := p.cfg.Issuer + p.server.Endpoints().Authorization.Relative() + "/callback?id=" + url.QueryEscape(id)
	http.Redirect(w, r, callback, http.StatusFound)
}
