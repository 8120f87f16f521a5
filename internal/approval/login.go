package approval

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/mcpgate/mcpgate/store"
)

// oidcClient signs approvers in: discovery on first use (retried after a
// failure), authorization code with PKCE S256, ID token verified by
// go-oidc.
type oidcClient struct {
	cfg      OIDC
	redirect string
	client   *http.Client

	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDCClient(cfg OIDC, redirect string, client *http.Client) *oidcClient {
	if cfg.SubjectClaim == "" {
		cfg.SubjectClaim = "sub"
	}
	return &oidcClient{cfg: cfg, redirect: redirect, client: client}
}

func (c *oidcClient) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, c.client)
}

// discover returns the provider, fetching its discovery document once.
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	dctx, cancel := context.WithTimeout(c.ctx(ctx), 10*time.Second)
	defer cancel()
	p, err := oidc.NewProvider(dctx, c.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	c.provider = p
	return p, nil
}

func (c *oidcClient) oauth2(p *oidc.Provider) *oauth2.Config {
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInHeader // client_secret_basic
	if c.cfg.ClientSecret == "" {
		ep.AuthStyle = oauth2.AuthStyleInParams // a public client sends only its id
	}
	scopes := append([]string{oidc.ScopeOpenID}, slices.DeleteFunc(slices.Clone(c.cfg.Scopes), func(s string) bool { return s == oidc.ScopeOpenID })...)
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: ep, RedirectURL: c.redirect, Scopes: scopes}
}

// login sends the browser to the provider: GET /approvals/login?next=&login_hint=.
func (p *Page) login(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.URL.Query().Get("next"))
	if p.oidc == nil {
		p.fail(w, r, http.StatusNotFound, "no_provider", "This gateway has no OpenID provider for approvers (demo sign-in only).",
			"Use a sign-in link the demo printed.", nil)
		return
	}
	prov, err := p.oidc.discover(r.Context())
	if err != nil {
		p.log.WarnContext(r.Context(), "approval page: OpenID provider discovery failed", "issuer", p.oidc.cfg.Issuer, "error", err)
		p.m.refusal("provider_unavailable")
		p.fail(w, r, http.StatusServiceUnavailable, "provider_unavailable", "The OpenID provider cannot be reached, so nobody can sign in right now.",
			"Try again in a minute.", nil)
		return
	}
	st := loginState{State: randomText(), Nonce: randomText(), Verifier: oauth2.GenerateVerifier(), Next: next,
		Expires: p.now().Add(loginTTL).Unix()}
	plain, _ := json.Marshal(st)
	sealed, err := p.o.Sealer.Seal(loginPurpose, plain)
	if err != nil {
		p.fail(w, r, http.StatusInternalServerError, "internal", "The sign-in could not be started.", "Try again.", nil)
		return
	}
	// Lax, not Strict: the provider's redirect back is a cross-site
	// navigation, and this cookie must come with it.
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: sealed, Path: Prefix, MaxAge: int(loginTTL / time.Second),
		HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode})
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(st.Verifier), oidc.Nonce(st.Nonce)}
	if hint := r.URL.Query().Get("login_hint"); hint != "" && len(hint) <= 256 {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", hint))
	}
	http.Redirect(w, r, p.oidc.oauth2(prov).AuthCodeURL(st.State, opts...), http.StatusFound)
}

// callback finishes the sign-in: GET /approvals/callback?code=&state=.
func (p *Page) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	again := "Sign in again from the approval page."
	if p.oidc == nil {
		p.fail(w, r, http.StatusNotFound, "no_provider", "This gateway has no OpenID provider for approvers.", "", nil)
		return
	}
	c, err := r.Cookie(loginCookie)
	var st loginState
	ok := err == nil
	if ok {
		plain, err := p.o.Sealer.Open(loginPurpose, c.Value)
		ok = err == nil && json.Unmarshal(plain, &st) == nil && p.now().Unix() < st.Expires
	}
	// The login cookie is for one callback only.
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true, Secure: p.secure, SameSite: http.SameSiteLaxMode})
	if !ok || subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(st.State)) != 1 {
		p.signInRefused(w, r, "sign_in_state_invalid", "This sign-in answer does not belong to a sign-in started here, or it is older than 10 minutes.", again, "", "")
		return
	}
	if e := q.Get("error"); e != "" {
		p.signInRefused(w, r, "sign_in_refused", "The OpenID provider refused the sign-in ("+e+").", again, "", "")
		return
	}
	prov, err := p.oidc.discover(r.Context())
	if err != nil {
		p.fail(w, r, http.StatusServiceUnavailable, "provider_unavailable", "The OpenID provider cannot be reached.", "Try again in a minute.", nil)
		return
	}
	ctx := p.oidc.ctx(r.Context())
	tok, err := p.oidc.oauth2(prov).Exchange(ctx, q.Get("code"), oauth2.VerifierOption(st.Verifier))
	if err != nil {
		p.log.InfoContext(r.Context(), "approval page: code exchange failed", "error", err)
		p.signInRefused(w, r, "sign_in_failed", "The OpenID provider did not accept the sign-in code.", again, "", "")
		return
	}
	tenant, subject, name, err := p.oidc.identity(ctx, prov, tok, st.Nonce)
	if err != nil {
		p.log.InfoContext(r.Context(), "approval page: sign-in refused", "error", err)
		p.signInRefused(w, r, "sign_in_invalid", "The sign-in cannot be used: "+err.Error()+".", again, tenant, subject)
		return
	}
	if err := p.startSession(w, tenant, subject, name, false); err != nil {
		p.fail(w, r, http.StatusInternalServerError, "internal", "The session could not be created.", again, nil)
		return
	}
	p.audit(r.Context(), store.AuditRecord{Tenant: tenant, Subject: subject, Action: "approval.sign_in", Outcome: "ok"})
	http.Redirect(w, r, safeNext(st.Next), http.StatusSeeOther)
}

// identity verifies the ID token (and, for the tenant, the access token)
// of an exchange and returns who signed in.
func (c *oidcClient) identity(ctx context.Context, prov *oidc.Provider, tok *oauth2.Token, nonce string) (tenant, subject, name string, err error) {
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", "", "", errors.New("the provider returned no ID token")
	}
	idt, err := prov.Verifier(&oidc.Config{ClientID: c.cfg.ClientID}).Verify(ctx, raw)
	if err != nil {
		return "", "", "", fmt.Errorf("the ID token is not valid (%v)", err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return "", "", "", errors.New("the ID token's nonce does not match this sign-in")
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return "", "", "", errors.New("the ID token's claims cannot be read")
	}
	subject = strClaim(claims, c.cfg.SubjectClaim)
	if subject == "" {
		return "", "", "", fmt.Errorf("the ID token has no %q claim", c.cfg.SubjectClaim)
	}
	name = strClaim(claims, "email")
	tenants, found := tenantClaim(claims, c.cfg.TenantClaim)
	if !found && tok.AccessToken != "" {
		// The tenant is often only in the access token (RFC 9068 style):
		// verify it the same way, and that it was issued to this page's
		// client for the same person.
		at, err := prov.Verifier(&oidc.Config{SkipClientIDCheck: true}).Verify(ctx, tok.AccessToken)
		if err == nil {
			var ac map[string]json.RawMessage
			if at.Claims(&ac) == nil && strClaim(ac, c.cfg.SubjectClaim) == subject &&
				(strClaim(ac, "client_id") == c.cfg.ClientID || strClaim(ac, "azp") == c.cfg.ClientID) {
				tenants, found = tenantClaim(ac, c.cfg.TenantClaim)
			}
		}
	}
	switch {
	case !found || len(tenants) == 0:
		return "", subject, name, fmt.Errorf("the provider names no tenant (claim %q) for %s", c.cfg.TenantClaim, subject)
	case len(tenants) > 1:
		return "", subject, name, fmt.Errorf("%s belongs to %d tenants; an approver signs in for exactly one", subject, len(tenants))
	}
	return tenants[0], subject, name, nil
}

func strClaim(m map[string]json.RawMessage, name string) string {
	var s string
	if raw, ok := m[name]; ok && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}

// tenantClaim reads a tenant claim that is a string or an array of
// strings.
func tenantClaim(m map[string]json.RawMessage, name string) ([]string, bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return nil, false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, true
		}
		return []string{s}, true
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return slices.DeleteFunc(slices.Compact(list), func(v string) bool { return v == "" }), true
	}
	return nil, true
}

// DemoLogin registers a demo sign-in for (tenant, subject) and returns its
// link. Only with Options.DemoSignIn (mcpgate demo); the link signs the
// person in as often as it is opened while the process runs.
func (p *Page) DemoLogin(tenant, subject string) (string, error) {
	if !p.o.DemoSignIn {
		return "", errors.New("demo sign-in is off")
	}
	secret := randomText()
	p.demoMu.Lock()
	p.demoIDs[secret] = demoPerson{tenant, subject}
	p.demoMu.Unlock()
	return p.base.String() + Prefix + "demo-login?t=" + url.QueryEscape(secret), nil
}

// demoLogin signs a demo person in: GET /approvals/demo-login?t=.
func (p *Page) demoLogin(w http.ResponseWriter, r *http.Request) {
	if !p.o.DemoSignIn {
		p.fail(w, r, http.StatusNotFound, "not_found", "There is no such page.", "Sign in with your OpenID provider.", nil)
		return
	}
	t := r.URL.Query().Get("t")
	var who demoPerson
	found := false
	p.demoMu.Lock()
	for secret, person := range p.demoIDs {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(t)) == 1 {
			who, found = person, true
		}
	}
	p.demoMu.Unlock()
	if !found {
		p.signInRefused(w, r, "sign_in_invalid", "This demo sign-in link is not one this demo printed.", "Use a link from the demo's output.", "", "")
		return
	}
	if err := p.startSession(w, who.tenant, who.subject, "", true); err != nil {
		p.fail(w, r, http.StatusInternalServerError, "internal", "The session could not be created.", "", nil)
		return
	}
	p.audit(r.Context(), store.AuditRecord{Tenant: who.tenant, Subject: who.subject, Action: "approval.sign_in", Outcome: "ok",
		PublicIDs: map[string]string{"method": "demo"}})
	http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
}

// signInRefused answers a failed sign-in (400), audited.
func (p *Page) signInRefused(w http.ResponseWriter, r *http.Request, code, cause, fix, tenant, subject string) {
	p.m.refusal(code)
	p.audit(r.Context(), store.AuditRecord{Tenant: tenant, Subject: subject, Action: "approval.sign_in", Outcome: "denied",
		PublicIDs: map[string]string{"reason": code}})
	p.render(w, http.StatusBadRequest, errorHTML(errorPage{Code: code, Cause: cause, Fix: fix, SignIn: loginURL(Prefix)}))
}
