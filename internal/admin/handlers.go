package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store"
)

// WhoAmI is the answer of GET /v1/whoami.
type WhoAmI struct {
	// Role is tokens.RolePlatformAdmin, tokens.RoleTenantAdmin or
	// tokens.RolePerson.
	Role    string `json:"role"`
	Tenant  string `json:"tenant"`
	Subject string `json:"subject"`
	// Name is the static admin token's name or the OIDC client.
	Name string `json:"name,omitempty"`
}

// CreateTokenRequest is the body of POST /v1/tokens.
type CreateTokenRequest struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject"`
	Name    string   `json:"name"`
	Rights  []string `json:"rights"`
	// ExpiresIn is a Go duration ("720h"); absent: the default lifetime.
	ExpiresIn *string `json:"expires_in"`
	// Toolset binds the token's connection to a configured toolset;
	// absent or "full": every tool.
	Toolset string `json:"toolset"`
}

// Token is a token as the admin API shows it: never its hash; its secret
// only in the answer of the create that made it.
type Token struct {
	ID string `json:"id"`
	// Secret is the token itself, shown once.
	Secret    string     `json:"token,omitempty"`
	Tenant    string     `json:"tenant"`
	Creator   string     `json:"creator"`
	Name      string     `json:"name"`
	Rights    []string   `json:"rights"`
	Toolset   string     `json:"toolset"` // "full" when the token names none
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Active    bool       `json:"active"`
}

// TokenList is the answer of GET /v1/tokens.
type TokenList struct {
	Tokens []Token `json:"tokens"`
}

// AuditRecord is an audit record as the admin API shows it.
type AuditRecord struct {
	ID         string            `json:"id"`
	Time       time.Time         `json:"time"`
	Channel    string            `json:"channel"`
	Tenant     string            `json:"tenant,omitempty"`
	Connection string            `json:"connection,omitempty"`
	Client     string            `json:"client,omitempty"`
	Subject    string            `json:"subject,omitempty"`
	Action     string            `json:"action"`
	Outcome    string            `json:"outcome"`
	DecisionID string            `json:"decision_id,omitempty"`
	PublicIDs  map[string]string `json:"public_ids,omitempty"`
}

// AuditList is the answer of GET /v1/audit.
type AuditList struct {
	Records []AuditRecord `json:"records"`
}

func (a *API) whoami(w http.ResponseWriter, actor tokens.Actor) {
	writeJSON(w, http.StatusOK, WhoAmI{Role: actor.Role, Tenant: actor.Tenant, Subject: actor.Subject, Name: actor.Name})
}

func (a *API) createToken(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	var req CreateTokenRequest
	if !decodeBody(w, r, &req) {
		return
	}
	var ttl time.Duration
	if req.ExpiresIn != nil {
		d, err := time.ParseDuration(*req.ExpiresIn)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, apiError{Code: "invalid_expiry",
				Message: fmt.Sprintf("expires_in %q is not a positive duration in h, m or s (there is no day unit)", *req.ExpiresIn),
				Fix: fmt.Sprintf("give a duration such as \"720h\" (between %s and %s), or leave expires_in out for %s",
					tokens.MinTTL, a.tokens.MaxTTL(), a.tokens.DefaultTTL())})
			return
		}
		ttl = d
	}
	c, err := a.tokens.Create(r.Context(), actor, tokens.CreateRequest{
		Tenant: req.Tenant, Subject: req.Subject, Name: req.Name, Rights: req.Rights, TTL: ttl, Toolset: req.Toolset,
	})
	if err != nil {
		a.tokensError(w, r, err)
		return
	}
	out := a.tokenJSON(c.Token)
	out.Secret = c.Secret
	writeJSON(w, http.StatusCreated, out)
}

func (a *API) listTokens(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	q, ok := queryParams(w, r, "tenant", "creator")
	if !ok {
		return
	}
	ts, err := a.tokens.List(r.Context(), actor, store.TokenFilter{Tenant: q["tenant"], Creator: q["creator"]})
	if err != nil {
		a.tokensError(w, r, err)
		return
	}
	out := TokenList{Tokens: make([]Token, 0, len(ts))}
	for _, t := range ts {
		out.Tokens = append(out.Tokens, a.tokenJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) revokeToken(w http.ResponseWriter, r *http.Request, actor tokens.Actor, id string) {
	t, err := a.tokens.Revoke(r.Context(), actor, id)
	if err != nil {
		a.tokensError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, a.tokenJSON(t))
}

func (a *API) queryAudit(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	q, ok := queryParams(w, r, "tenant", "since", "until", "limit")
	if !ok {
		return
	}
	aq := store.AuditQuery{Tenant: q["tenant"]}
	switch actor.Role {
	case tokens.RolePlatformAdmin:
	case tokens.RoleTenantAdmin:
		if aq.Tenant != "" && aq.Tenant != actor.Tenant {
			a.deny(r, actor, "audit.query", "other_tenant")
			writeError(w, http.StatusForbidden, apiError{Code: "other_tenant",
				Message: "a tenant admin may read only the audit records of their own tenant",
				Fix:     "leave the tenant parameter out"})
			return
		}
		aq.Tenant = actor.Tenant
	default:
		a.deny(r, actor, "audit.query", "forbidden")
		writeError(w, http.StatusForbidden, apiError{Code: "forbidden",
			Message: "only platform and tenant admins may read the audit log",
			Fix:     "ask an admin of your tenant"})
		return
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{"since", &aq.Since}, {"until", &aq.Until}} {
		v, ok := q[p.name]
		if !ok {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: "invalid_time",
				Message: fmt.Sprintf("%s %q is not an RFC 3339 time", p.name, v),
				Fix:     "give a time such as 2026-05-01T12:00:00Z"})
			return
		}
		*p.dst = t
	}
	if !aq.Since.IsZero() && !aq.Until.IsZero() && !aq.Since.Before(aq.Until) {
		writeError(w, http.StatusBadRequest, apiError{Code: "invalid_time",
			Message: "since is not before until", Fix: "give since before until"})
		return
	}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxAuditLimit {
			writeError(w, http.StatusBadRequest, apiError{Code: "invalid_limit",
				Message: fmt.Sprintf("limit %q is not a number from 1 to %d", v, store.MaxAuditLimit),
				Fix:     fmt.Sprintf("give a limit from 1 to %d (default %d)", store.MaxAuditLimit, store.DefaultAuditLimit)})
			return
		}
		aq.Limit = n
	}
	recs, err := a.audit.QueryAudit(r.Context(), aq)
	if err != nil {
		a.log.WarnContext(r.Context(), "admin API: audit query failed", "error", err)
		w.Header().Set("Retry-After", a.retryAfterSec)
		writeError(w, http.StatusServiceUnavailable, apiError{Code: "unavailable",
			Message: "the audit store cannot be reached now", Fix: "retry shortly"})
		return
	}
	out := AuditList{Records: make([]AuditRecord, 0, len(recs))}
	for _, rec := range recs {
		out.Records = append(out.Records, AuditRecord{
			ID: rec.ID, Time: rec.Time, Channel: rec.Channel, Tenant: rec.Tenant, Connection: rec.Connection,
			Client: rec.Client, Subject: rec.Subject, Action: rec.Action, Outcome: rec.Outcome,
			DecisionID: rec.DecisionID, PublicIDs: rec.PublicIDs,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// deny audits a request the admin API refused for lack of rights.
func (a *API) deny(r *http.Request, actor tokens.Actor, action, reason string) {
	if a.auditor == nil {
		return
	}
	rec := store.AuditRecord{
		Channel: store.ChannelAdmin, Tenant: actor.Tenant, Subject: actor.Subject, Client: actor.Name,
		Action: action, Outcome: "denied", PublicIDs: map[string]string{"role": actor.Role, "reason": reason},
	}
	if actor.Subject == "" {
		rec.Subject, rec.Client = actor.Name, ""
	}
	_, _ = a.auditor.Record(r.Context(), rec)
}

func (a *API) tokenJSON(t store.Token) Token {
	out := Token{
		ID: t.ID, Tenant: t.Tenant, Creator: t.Creator, Name: t.Name, Rights: t.Rights, Toolset: t.Toolset,
		CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt, Active: a.tokens.Active(t),
	}
	if out.Toolset == "" {
		out.Toolset = tokens.ToolsetFull
	}
	if out.Rights == nil {
		out.Rights = []string{}
	}
	if !t.ExpiresAt.IsZero() {
		exp := t.ExpiresAt
		out.ExpiresAt = &exp
	}
	return out
}

// tokensError answers an error of the token service.
func (a *API) tokensError(w http.ResponseWriter, r *http.Request, err error) {
	var e *tokens.Error
	if !errors.As(err, &e) {
		a.log.ErrorContext(r.Context(), "admin API: unexpected error", "error", err)
		writeError(w, http.StatusInternalServerError, apiError{Code: "internal",
			Message: "the request failed unexpectedly", Fix: "retry; report the problem if it persists"})
		return
	}
	status := http.StatusInternalServerError
	switch {
	case errors.Is(err, tokens.ErrInvalid):
		status = http.StatusBadRequest
	case errors.Is(err, tokens.ErrForbidden):
		status = http.StatusForbidden
	case errors.Is(err, tokens.ErrNotFound):
		status = http.StatusNotFound
	case errors.Is(err, tokens.ErrUnavailable):
		status = http.StatusServiceUnavailable
		w.Header().Set("Retry-After", a.retryAfterSec)
		a.log.WarnContext(r.Context(), "admin API: token service unavailable", "error", err)
	default:
		a.log.ErrorContext(r.Context(), "admin API: unexpected error", "error", err)
	}
	writeError(w, status, apiError{Code: e.Code, Message: e.Message, Fix: e.Fix, Missing: e.Missing})
}
