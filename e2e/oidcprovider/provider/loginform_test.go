package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// startLoginForm serves a provider (the default config, with login_form
// set to form) and returns its URL and the provider.
func startLoginForm(t *testing.T, form bool) (string, *Provider) {
	t.Helper()
	var p *Provider
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	cfg := DefaultConfig()
	cfg.Issuer = srv.URL
	cfg.LoginForm = form
	var err error
	if p, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return srv.URL, p
}

// noFollow is a client that stops at the first redirect.
var noFollow = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// testVerifier is the PKCE code verifier of authorizeURL.
const testVerifier = "verifier-verifier-verifier-verifier-verifier-0"

// authorizeURL is an authorization request of the public client with PKCE.
func authorizeURL(issuer, hint string) string {
	sum := sha256.Sum256([]byte(testVerifier))
	q := url.Values{"response_type": {"code"}, "client_id": {ClientPublic}, "redirect_uri": {RedirectURI},
		"scope": {"openid"}, "state": {"st-1"}, "code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"}}
	if hint != "" {
		q.Set("login_hint", hint)
	}
	return issuer + "/authorize?" + q.Encode()
}

// follow follows redirects from u until an answer that is not one, or one to
// the client's redirect URI, and returns it with its body.
func follow(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	for range 10 {
		resp, err := noFollow.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		loc, _ := resp.Location()
		if resp.StatusCode != http.StatusFound || loc == nil || strings.HasPrefix(loc.String(), RedirectURI) {
			return resp, string(b)
		}
		u = loc.String()
	}
	t.Fatal("too many redirects")
	return nil, ""
}

var hiddenID = regexp.MustCompile(`name="id" value="([^"]+)"`)

// TestLoginForm: with login_form the authorization endpoint shows a
// sign-in page (login_hint filled in, users suggested, values escaped);
// submitting a configured subject issues a code for that user, an
// unknown one shows the page again with an error, a finished request
// cannot be signed in again. Without login_form the request is approved
// without a page and the form does not exist.
func TestLoginForm(t *testing.T) {
	issuer, p := startLoginForm(t, true)
	resp, page := follow(t, authorizeURL(issuer, "bob"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("sign-in page: %s %s", resp.Status, page)
	}
	for _, want := range []string{`id="login-form"`, `id="subject" name="subject"`, `value="bob"`, `<option value="alice">acme</option>`, `id="sign-in"`} {
		if !strings.Contains(page, want) {
			t.Errorf("sign-in page lacks %s:\n%s", want, page)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
	m := hiddenID.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no auth request id in the form:\n%s", page)
	}
	id := m[1]
	post := func(subject string) (*http.Response, string) {
		resp, err := noFollow.PostForm(issuer+PathLogin, url.Values{"id": {id}, "subject": {subject}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	// An unknown subject, with markup in it: the page again, escaped.
	resp, body := post(`<b>mallory</b>`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="login-error"`) || strings.Contains(body, "<b>mallory") ||
		!strings.Contains(body, "&lt;b&gt;mallory") {
		t.Errorf("unknown subject: %s\n%s", resp.Status, body)
	}

	// A configured subject: on to the callback, which issues the code.
	resp, body = post("alice")
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("sign in: %s %s", resp.Status, body)
	}
	loc, _ := resp.Location()
	resp, body = follow(t, loc.String())
	to, _ := resp.Location()
	if resp.StatusCode != http.StatusFound || to == nil || to.Query().Get("code") == "" || to.Query().Get("state") != "st-1" {
		t.Fatalf("callback: %s %v %s", resp.Status, to, body)
	}

	// The code is alice's: the token endpoint says so.
	tr, err := http.PostForm(issuer+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {ClientPublic},
		"code": {to.Query().Get("code")}, "redirect_uri": {RedirectURI}, "code_verifier": {testVerifier}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	err = json.NewDecoder(tr.Body).Decode(&tok)
	tr.Body.Close()
	if err != nil || tok.AccessToken == "" {
		t.Fatalf("token: %s %v", tr.Status, err)
	}
	if rec, ok := p.lookup(tok.AccessToken); !ok || rec.Subject != UserAlice {
		t.Errorf("the code's token is not alice's: %+v", rec)
	}

	// The same request cannot be signed in again.
	if resp, body := post("bob"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("second sign-in of one request: %s %s", resp.Status, body)
	}

	// Without login_form: no page, a code at once; POST /login is absent.
	plain, _ := startLoginForm(t, false)
	resp, body = follow(t, authorizeURL(plain, ""))
	if to, _ := resp.Location(); resp.StatusCode != http.StatusFound || to == nil || to.Query().Get("code") == "" {
		t.Errorf("auto-approve: %s %s", resp.Status, body)
	}
	if resp, err := noFollow.PostForm(plain+PathLogin, url.Values{"id": {"x"}, "subject": {"alice"}}); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST /login without login_form: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}
