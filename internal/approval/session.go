package approval

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Sealing purposes: a value sealed for one never opens as the other.
const (
	sessionPurpose = "io.mcpgate/approval-session/v1"
	loginPurpose   = "io.mcpgate/approval-login/v1"
)

// session is the content of the sealed session cookie.
type session struct {
	V       int    `json:"v"`
	Tenant  string `json:"ten"`
	Subject string `json:"sub"`
	// Name is a display name (email) when the provider gave one.
	Name string `json:"name,omitempty"`
	// CSRF is the session's secret for form tokens (32 random bytes,
	// base64url).
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"` // Unix seconds
	// Demo marks a demo sign-in (shown on the page).
	Demo bool `json:"demo,omitempty"`
}

// loginState is the content of the sealed login cookie.
type loginState struct {
	State    string `json:"st"`
	Nonce    string `json:"n"`
	Verifier string `json:"pkce"`
	Next     string `json:"next"`
	Expires  int64  `json:"exp"`
}

func randomText() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// newSession seals a session for (tenant, subject) into the cookie.
func (p *Page) startSession(w http.ResponseWriter, tenant, subject, name string, demo bool) error {
	s := session{V: 1, Tenant: tenant, Subject: subject, Name: name, CSRF: randomText(),
		Expires: p.now().Add(p.o.SessionTTL).Unix(), Demo: demo}
	plain, _ := json.Marshal(s)
	sealed, err := p.o.Sealer.Seal(sessionPurpose, plain)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: sealed, Path: Prefix, MaxAge: int(p.o.SessionTTL / time.Second),
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteStrictMode})
	return nil
}

// session opens the session cookie; nil when absent, forged or expired.
func (p *Page) session(r *http.Request) *session {
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return nil
	}
	plain, err := p.o.Sealer.Open(sessionPurpose, c.Value)
	if err != nil {
		return nil
	}
	var s session
	if json.Unmarshal(plain, &s) != nil || s.V != 1 || s.Subject == "" || s.CSRF == "" || p.now().Unix() >= s.Expires {
		return nil
	}
	return &s
}

// csrfToken is the form token of one action in one session:
// base64url(HMAC-SHA256(session secret, purpose ‖ 0 ‖ action id)).
func csrfToken(s *session, actionID string) string {
	m := hmac.New(sha256.New, []byte(s.CSRF))
	m.Write([]byte("approval-form\x00"))
	m.Write([]byte(actionID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// validCSRF compares a form's token with the session's, in constant time.
func validCSRF(s *session, actionID, token string) bool {
	return token != "" && hmac.Equal([]byte(token), []byte(csrfToken(s, actionID)))
}

// safeNext keeps next only when it is a path of this page (no scheme, no
// host, no // or backslash tricks, no dot segments); else the list.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "//") {
		return Prefix
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || !strings.HasPrefix(u.Path, Prefix) {
		return Prefix
	}
	// A dot segment would lead out of Prefix: http.Redirect cleans "..",
	// and a browser reads "%2e%2e" (u.Path has it decoded) as "..".
	for seg := range strings.SplitSeq(u.Path, "/") {
		if seg == "." || seg == ".." {
			return Prefix
		}
	}
	return u.RequestURI()
}

// loginURL is the page's login path with next.
func loginURL(next string) string {
	return Prefix + "login?next=" + url.QueryEscape(next)
}
