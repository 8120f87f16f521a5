package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/policy"
)

// Defaults and bounds of the approvals section.
const (
	// DefaultApprovalSessionTTL is how long an approver stays signed in.
	DefaultApprovalSessionTTL = time.Hour
	// MaxApprovalSessionTTL bounds approvals.session_ttl.
	MaxApprovalSessionTTL = 24 * time.Hour
	// DefaultApprovalSubjectClaim is the ID token claim naming the person.
	DefaultApprovalSubjectClaim = "sub"
	// DefaultWebhookAttempts is how often one announcement is tried.
	DefaultWebhookAttempts = 5
	// MaxWebhookAttempts bounds approvals.webhook.max_attempts.
	MaxWebhookAttempts = 10
	// DefaultWebhookTimeout bounds one delivery attempt.
	DefaultWebhookTimeout = 5 * time.Second
	// MinWebhookSecretLen is the shortest HMAC key accepted (32 bytes, the
	// size of the SHA-256 output, RFC 2104 section 3).
	MinWebhookSecretLen = 32
)

// Approvals turns on mcpgate's approval page: the page on the
// admin listener, under /approvals/, where a person who holds the right
// approves or rejects the pending actions the policy sends out of band
// (decision approval "out_of_band"; always for tools declared moves_money
// or legally_binding). It needs the store (pending actions), the rights
// section (the approver's live rights are checked at approval time) and
// the admin listener.
type Approvals struct {
	// Origin browsers reach the admin listener at (`https://gw.example.com`;
	// no path). `http` only on loopback hosts. Under `https` the session
	// cookie is `Secure`.
	//
	// Required.
	BaseURL string `yaml:"base_url"`
	// The approvers' OpenID provider. Register the redirect URI
	// `<base_url>/approvals/callback`.
	//
	// Required.
	OIDC *ApprovalOIDC `yaml:"oidc"`
	// How long a sign-in lasts (1m–24h).
	//
	// Default: `1h`.
	SessionTTL Duration `yaml:"session_ttl"`
	// The requester of an action can never approve it (two-person rule).
	RequireSecondPerson bool `yaml:"require_second_person"`
	// The two-person rule for these effect classes only.
	//
	// Default: `[]`.
	SecondPersonEffects []string `yaml:"second_person_effects"`
	// Announce each new out-of-band action.
	//
	// Default: off.
	Webhook *ApprovalWebhook `yaml:"webhook"`

	// DemoSignIn lets `mcpgate demo` print sign-in links instead of
	// using an OpenID provider. Never read from a file.
	DemoSignIn bool `yaml:"-" json:"-"`
}

// ApprovalOIDC is the approvers' OpenID provider.
type ApprovalOIDC struct {
	// Issuer identifier (discovery).
	//
	// Required.
	Issuer string `yaml:"issuer"`
	// The page's own OAuth client — never an agent's.
	//
	// Required.
	ClientID string `yaml:"client_id"`
	// Secret of a confidential client (sent with `client_secret_basic`).
	//
	// Default: none (public client).
	ClientSecret string `yaml:"client_secret"`
	// Scopes asked for besides `openid`.
	//
	// Default: `[]`.
	Scopes []string `yaml:"scopes"`
	// Claim with the approver's tenant (ID token, else the access token of
	// the same exchange).
	//
	// Default: the `auth.issuers[]` entry's with the same issuer.
	TenantClaim string `yaml:"tenant_claim"`
	// Claim with the approver's subject (as rights are keyed).
	//
	// Default: `sub`.
	SubjectClaim string `yaml:"subject_claim"`
}

// LogValue keeps the client secret out of logs.
func (o ApprovalOIDC) LogValue() slog.Value {
	return slog.GroupValue(slog.String("issuer", o.Issuer), slog.String("client_id", o.ClientID),
		slog.String("client_secret", redacted(o.ClientSecret)))
}

// String keeps the client secret out of formatted output.
func (o ApprovalOIDC) String() string {
	return fmt.Sprintf("{Issuer:%s ClientID:%s ClientSecret:%s}", o.Issuer, o.ClientID, redacted(o.ClientSecret))
}

// ApprovalWebhook is where new out-of-band actions are announced: a JSON
// POST signed with HMAC-SHA256 (header X-Mcpgate-Signature), retried with
// backoff.
type ApprovalWebhook struct {
	// Receives a JSON POST `{action_id, tenant, tool, summary, link,
	// expires_at}` with header `X-Mcpgate-Signature: sha256=<hex HMAC-SHA256
	// of the body>`.
	//
	// Required.
	URL string `yaml:"url"`
	// The HMAC key, at least 32 bytes.
	//
	// Required.
	Secret string `yaml:"secret"`
	// Tries per announcement (1–10), with exponential backoff from 1s.
	//
	// Default: `5`.
	MaxAttempts int `yaml:"max_attempts"`
	// Bound of one try (at most 1m).
	//
	// Default: `5s`.
	Timeout Duration `yaml:"timeout"`
}

// LogValue keeps the secret out of logs.
func (w ApprovalWebhook) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", w.URL), slog.String("secret", redacted(w.Secret)))
}

// String keeps the secret out of formatted output.
func (w ApprovalWebhook) String() string {
	return fmt.Sprintf("{URL:%s Secret:%s}", w.URL, redacted(w.Secret))
}

// MaxAttemptsOrDefault is max_attempts, or DefaultWebhookAttempts.
func (w *ApprovalWebhook) MaxAttemptsOrDefault() int {
	if w.MaxAttempts <= 0 {
		return DefaultWebhookAttempts
	}
	return w.MaxAttempts
}

func (c *Config) applyApprovalDefaults() {
	a := c.Approvals
	if a == nil {
		return
	}
	a.SessionTTL.orDefault(DefaultApprovalSessionTTL)
	if a.Webhook != nil {
		a.Webhook.Timeout.orDefault(DefaultWebhookTimeout)
	}
}

// ApprovalTenantClaim is the tenant claim approvers' tokens are read
// with: approvals.oidc.tenant_claim, else that of the auth.issuers entry
// with the same issuer; "" when neither names one.
func (c *Config) ApprovalTenantClaim() string {
	a := c.Approvals
	if a == nil || a.OIDC == nil {
		return ""
	}
	if a.OIDC.TenantClaim != "" {
		return a.OIDC.TenantClaim
	}
	if c.Auth != nil {
		for _, is := range c.Auth.Issuers {
			if strings.TrimSuffix(is.Issuer, "/") == strings.TrimSuffix(a.OIDC.Issuer, "/") && is.TenantClaim != "" {
				return is.TenantClaim
			}
		}
	}
	return ""
}

// SubjectClaimOrDefault is subject_claim, or DefaultApprovalSubjectClaim.
func (o *ApprovalOIDC) SubjectClaimOrDefault() string {
	if o.SubjectClaim == "" {
		return DefaultApprovalSubjectClaim
	}
	return o.SubjectClaim
}

var approvalEffects = []string{policy.EffectRead, policy.EffectSilentWrite, policy.EffectNotify, policy.EffectWake, policy.EffectAlerting, policy.EffectDelete}

func (c *Config) validateApprovals(p *problems) {
	a := c.Approvals
	if a == nil {
		return
	}
	checkPageURL(p, "approvals.base_url", a.BaseURL, true)
	if c.Store == nil {
		p.add("approvals", "the approval page needs the store section: pending actions live there")
	}
	if c.Rights == nil {
		p.add("approvals", "the approval page needs the rights section: an approver's live rights are checked when they approve")
	}
	if c.Listeners.Admin.Disabled {
		p.add("approvals", "the approval page is served on the admin listener, which is disabled")
	}
	switch {
	case a.OIDC == nil && !a.DemoSignIn:
		p.add("approvals.oidc", "required: approvers sign in with an OpenID provider (issuer, client_id)")
	case a.OIDC != nil:
		o := a.OIDC
		checkPageURL(p, "approvals.oidc.issuer", o.Issuer, false)
		if o.ClientID == "" {
			p.add("approvals.oidc.client_id", "required: the approval page's own OAuth client")
		}
		if c.ApprovalTenantClaim() == "" {
			p.add("approvals.oidc.tenant_claim", "required: no auth.issuers entry for %q names a tenant_claim", o.Issuer)
		}
		for i, s := range o.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
				p.add(fmt.Sprintf("approvals.oidc.scopes[%d]", i), "%q is not a scope token (RFC 6749 section 3.3)", s)
			}
		}
	}
	if s := a.SessionTTL; s.IsSet() && (s.D() < time.Minute || s.D() > MaxApprovalSessionTTL) {
		p.add("approvals.session_ttl", "%q is not a duration from 1m to %s", s, DurationOf(MaxApprovalSessionTTL))
	}
	for i, e := range a.SecondPersonEffects {
		if !slices.Contains(approvalEffects, e) {
			p.add(fmt.Sprintf("approvals.second_person_effects[%d]", i), "%q is not an effect class (one of %s)", e, strings.Join(approvalEffects, ", "))
		}
	}
	if w := a.Webhook; w != nil {
		checkPageURL(p, "approvals.webhook.url", w.URL, false)
		if len(w.Secret) < MinWebhookSecretLen {
			p.add("approvals.webhook.secret", "required: an HMAC key of at least %d bytes (e.g. openssl rand -hex 32)", MinWebhookSecretLen)
		}
		if w.MaxAttempts < 0 || w.MaxAttempts > MaxWebhookAttempts {
			p.add("approvals.webhook.max_attempts", "%d is not from 1 to %d", w.MaxAttempts, MaxWebhookAttempts)
		}
		if s := w.Timeout; s.IsSet() && (s.D() <= 0 || s.D() > time.Minute) {
			p.add("approvals.webhook.timeout", "%q is not a duration above 0s and at most 1m", s)
		}
	}
}

// checkPageURL checks an http(s) URL: https unless the host is loopback,
// no credentials, query or fragment; originOnly also refuses a path.
func checkPageURL(p *problems, path, s string, originOnly bool) {
	if s == "" {
		p.add(path, "required")
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		p.add(path, "%q is not a URL", s)
	case u.Scheme != "https" && u.Scheme != "http":
		p.add(path, "%q must start with https://", s)
	case u.Host == "":
		p.add(path, "%q has no host", s)
	case u.User != nil:
		p.add(path, "the URL must not carry credentials")
	case u.RawQuery != "" || u.Fragment != "":
		p.add(path, "%q must have no query or fragment", s)
	case originOnly && u.Path != "" && u.Path != "/":
		p.add(path, "%q must be an origin (scheme, host, port) without a path", s)
	case u.Scheme == "http" && !loopbackHost(u.Hostname()):
		p.add(path, "%q: http is allowed on loopback hosts only; use https", s)
	}
}

func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil {
		return ip.IsLoopback()
	}
	return false
}
