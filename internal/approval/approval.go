// Package approval is mcpgate's approval page: where a person
// who holds the right approves or rejects the pending actions the policy
// sends out of band (decision approval "out_of_band"; always for tools
// declared moves_money or legally_binding), for clients that never ask
// their user. It is served on the admin listener under /approvals/.
//
// # URLs (a contract: the browser test drives them)
//
//	GET  /approvals/                  the signed-in approver's pending actions
//	GET  /approvals/login?next=&login_hint=   → the provider's authorize endpoint
//	GET  /approvals/callback          ← the provider; sets the session, → next
//	GET  /approvals/a/{id}            one action: #summary, #content, #requester,
//	                                  #expires, #approve-form, #reject-form
//	POST /approvals/a/{id}/approve    form: csrf         → a page with #result
//	POST /approvals/a/{id}/reject     form: csrf, reason → a page with #result
//	GET  /approvals/static/style.css  the only style sheet
//
// {id} is the action's store id (the hex SHA-256 of the confirm_token):
// the token itself never appears in a URL.
//
// # Who may approve
//
// Approvers sign in with the configured OpenID provider: authorization
// code with PKCE S256, state and nonce (OpenID Connect Core 1.0 section
// 3.1; RFC 7636). The ID token is verified with go-oidc (signature,
// issuer, audience = the page's client, expiry, nonce); the tenant comes
// from the configured claim of the ID token, else of the access token of
// the same exchange (verified the same way and issued to the page's
// client). The session is a sealed cookie (AES-256-GCM under the keys the
// replicas share, internal/sealing) named mcpgate_approval: HttpOnly,
// SameSite=Strict, Secure when the base URL is https.
//
// At the moment of a decision the approver must be signed in, be of the
// action's tenant, be active in the rights source and hold every right the
// tool declares (live rights); under the two-person rule the
// person who asked for the action cannot approve it. The page never reads
// bearer tokens: an agent's MCP token or OAuth token gets a refusal, never
// a session. Every form carries a CSRF token bound to the session and the
// action (HMAC-SHA256 under a secret kept in the sealed session). Every
// view, decision and refusal is audited on channel "approval".
//
// Pages carry a strict Content-Security-Policy (no script at all; styles
// from this origin only), no-store caching and no referrer. Third-party
// text (every string argument of the call, which the model may have copied
// from anywhere) is escaped (html.go) and marked class="untrusted".
package approval

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
)

// Paths and names of the page.
const (
	// Prefix is the path the page is mounted at.
	Prefix = "/approvals/"
	// SessionCookie is the session cookie's name.
	SessionCookie = "mcpgate_approval"
	// loginCookie carries state, nonce and PKCE verifier between login
	// and callback (SameSite=Lax: it must survive the provider's redirect).
	loginCookie = "mcpgate_approval_login"
	// AuditChannel is the audit channel of the page's records.
	AuditChannel = "approval"
	// AuditClient is the client name of the page's audit records.
	AuditClient = "approval-page"
	// MaxReasonBytes bounds a rejection reason.
	MaxReasonBytes = 500
	// maxFormBytes bounds a form body.
	maxFormBytes = 8 << 10
	// loginTTL bounds the time between login and callback.
	loginTTL = 10 * time.Minute
	// DefaultSessionTTL applies when Options.SessionTTL is zero.
	DefaultSessionTTL = time.Hour
)

// ContentSecurityPolicy is the CSP of every page: nothing but this origin's
// style sheet and same-origin form posts.
const ContentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Sealer seals and opens small values (internal/sealing.Sealer).
type Sealer interface {
	Seal(purpose string, plaintext []byte) (string, error)
	Open(purpose, sealed string) ([]byte, error)
}

// OIDC is the approvers' OpenID provider.
type OIDC struct {
	// Issuer is the issuer identifier (discovery document at
	// Issuer/.well-known/openid-configuration).
	Issuer string
	// ClientID and ClientSecret are the page's own client; an empty
	// secret makes a public client (PKCE only).
	ClientID, ClientSecret string
	// Scopes are asked for besides "openid".
	Scopes []string
	// TenantClaim and SubjectClaim name the claims with the person's
	// tenant and subject (SubjectClaim default "sub").
	TenantClaim, SubjectClaim string
}

// Options configure New.
type Options struct {
	// BaseURL is the origin browsers reach the page at (no path).
	// Required.
	BaseURL string
	// OIDC is the provider; nil only with DemoSignIn.
	OIDC *OIDC
	// DemoSignIn turns on sign-in links (DemoLogin) instead of a
	// provider. For `mcpgate demo` only.
	DemoSignIn bool
	// Actions are the pending actions. Required.
	Actions store.ActionStore
	// Rights is the live rights source. Required: without it nobody
	// could be checked, so nobody could approve.
	Rights rights.Source
	// ToolRights returns the rights an upstream's tool declares; false
	// when the tool is not declared (then nobody may approve it here).
	ToolRights func(upstream, tool string) ([]string, bool)
	// Sealer seals sessions and login state. Required.
	Sealer Sealer
	// Audit records what happens on the page. Required.
	Audit func(context.Context, store.AuditRecord)
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// RequireSecondPerson forbids a requester to approve their own
	// action; SecondPersonEffects does so for these effect classes only.
	RequireSecondPerson bool
	SecondPersonEffects []string
	// Webhook announces new actions; nil: off.
	Webhook *WebhookOptions
	// HTTPClient talks to the provider; nil: a client with a 10s timeout.
	HTTPClient *http.Client
	// Registerer takes the page's metrics; nil: not registered.
	Registerer prometheus.Registerer
	// Logger; nil: slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Page is the approval page.
type Page struct {
	o       Options
	base    *url.URL
	secure  bool
	log     *slog.Logger
	now     func() time.Time
	m       *metrics
	hook    *notifier
	oidc    *oidcClient
	demoMu  sync.Mutex
	demoIDs map[string]demoPerson // demo sign-in secret → person
}

type demoPerson struct{ tenant, subject string }

//go:embed static/style.css
var files embed.FS

// New checks o and returns the page. Nothing is fetched yet: the provider
// is discovered on the first sign-in (and again after a failure).
func New(o Options) (*Page, error) {
	var errs []error
	base, err := url.Parse(strings.TrimSuffix(o.BaseURL, "/"))
	if err != nil || (base.Scheme != "https" && base.Scheme != "http") || base.Host == "" || (base.Path != "" && base.Path != "/") {
		errs = append(errs, fmt.Errorf("base URL %q is not an http(s) origin", o.BaseURL))
	}
	if o.Actions == nil {
		errs = append(errs, errors.New("the action store is required"))
	}
	if o.Rights == nil {
		errs = append(errs, errors.New("a rights source is required: approvers' live rights are checked at approval time"))
	}
	if o.ToolRights == nil {
		errs = append(errs, errors.New("the tool declarations are required"))
	}
	if o.Sealer == nil {
		errs = append(errs, errors.New("a sealer is required"))
	}
	if o.Audit == nil {
		errs = append(errs, errors.New("an audit sink is required"))
	}
	if o.OIDC == nil && !o.DemoSignIn {
		errs = append(errs, errors.New("an OpenID provider is required"))
	}
	if o.OIDC != nil && (o.OIDC.Issuer == "" || o.OIDC.ClientID == "" || o.OIDC.TenantClaim == "") {
		errs = append(errs, errors.New("the OpenID provider needs an issuer, a client id and a tenant claim"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("approval page: %w", err)
	}
	base.Path = ""
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Page{o: o, base: base, secure: base.Scheme == "https", log: o.Logger, now: o.Now, demoIDs: map[string]demoPerson{}}
	p.m = newMetrics(o.Registerer, o.Actions, o.Now)
	if o.OIDC != nil {
		p.oidc = newOIDCClient(*o.OIDC, p.base.String()+Prefix+"callback", o.HTTPClient)
	}
	if o.Webhook != nil {
		h, err := newNotifier(*o.Webhook, p.m, p.log)
		if err != nil {
			return nil, fmt.Errorf("approval webhook: %w", err)
		}
		p.hook = h
	}
	return p, nil
}

// Link is the approval link of an action id: <base>/approvals/a/<id>.
func (p *Page) Link(id string) string {
	return p.base.String() + Prefix + "a/" + url.PathEscape(id)
}

// Announce tells the webhook (if any) of a new out-of-band action; it never
// blocks (gateway.WriteSafety.OnPending).
func (p *Page) Announce(ctx context.Context, a store.Action) {
	if p.hook != nil {
		p.hook.enqueue(announcement{ActionID: a.ID, Tenant: a.Tenant, Tool: a.Tool, Summary: a.Summary,
			Link: p.Link(a.ID), ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339)})
	}
}

// Close stops the webhook sender; announcements still queued are dropped
// (counted).
func (p *Page) Close() {
	if p.hook != nil {
		p.hook.close()
	}
}

// Handler serves the page; mount it at Prefix.
func (p *Page) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", p.list)
	mux.HandleFunc("GET "+Prefix+"login", p.login)
	mux.HandleFunc("GET "+Prefix+"callback", p.callback)
	mux.HandleFunc("GET "+Prefix+"demo-login", p.demoLogin)
	mux.HandleFunc("GET "+Prefix+"a/{id}", p.view)
	mux.HandleFunc("POST "+Prefix+"a/{id}/approve", p.approve)
	mux.HandleFunc("POST "+Prefix+"a/{id}/reject", p.reject)
	mux.HandleFunc("GET "+Prefix+"static/style.css", p.style)
	mux.HandleFunc(Prefix, func(w http.ResponseWriter, r *http.Request) {
		p.fail(w, r, http.StatusNotFound, "not_found", "There is no such page.", "Open the list of pending actions.", nil)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		if len(r.Header.Values("Authorization")) > 0 {
			// An agent's credential (MCP token, OAuth access token) never
			// signs anyone in here.
			p.refuseBearer(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

func (p *Page) style(w http.ResponseWriter, _ *http.Request) {
	b, _ := files.ReadFile("static/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	_, _ = w.Write(b)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
