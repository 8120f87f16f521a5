package admin

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/internal/tokens"
)

// authenticate turns the request's bearer token into an actor, or answers
// the refusal and returns false.
func (a *API) authenticate(w http.ResponseWriter, r *http.Request) (tokens.Actor, bool) {
	raw, err := auth.BearerTokenFromValues(r.Header.Values("Authorization"))
	if err != nil {
		if errors.Is(err, auth.ErrMissingToken) {
			a.unauthorized(w, false, apiError{Code: "missing_token",
				Message: "the admin API needs a bearer token",
				Fix:     "send Authorization: Bearer <token>: " + a.adminCredentials()})
		} else {
			a.unauthorized(w, true, apiError{Code: "invalid_token",
				Message: "the Authorization header is not one well-formed bearer token",
				Fix:     "send exactly one Authorization: Bearer <token> header"})
		}
		return tokens.Actor{}, false
	}
	if tokens.HasPrefix(raw) {
		a.unauthorized(w, true, apiError{Code: "mcp_token_not_accepted",
			Message: "MCP tokens work only at the MCP endpoint, not at the admin API",
			Fix:     a.adminCredentials()})
		return tokens.Actor{}, false
	}
	if actor, ok := a.staticActor(raw); ok {
		return actor, true
	}
	if a.verifier == nil {
		a.unauthorized(w, true, apiError{Code: "invalid_token",
			Message: "the token is not a known admin token",
			Fix:     "use an admin token from the configuration"})
		return tokens.Actor{}, false
	}
	claims, err := a.verifier.Verify(r.Context(), raw, a.audience)
	if err != nil {
		if errors.Is(err, auth.ErrUnavailable) {
			a.log.WarnContext(r.Context(), "admin API: identity provider unavailable", "error", err)
			w.Header().Set("Retry-After", a.retryAfterSec)
			writeError(w, http.StatusServiceUnavailable, apiError{Code: "auth_unavailable",
				Message: "the token cannot be verified now: the identity provider does not answer",
				Fix:     "retry shortly"})
			return tokens.Actor{}, false
		}
		msg := "the token is invalid"
		var ae *auth.Error
		if errors.As(err, &ae) {
			msg = ae.Description()
			if ae.Reason == auth.ReasonWrongAudience {
				msg += " (the admin API needs tokens for " + a.audience + ")"
			}
		}
		a.log.InfoContext(r.Context(), "admin API: token refused", "error", err)
		a.unauthorized(w, true, apiError{Code: "invalid_token", Message: msg,
			Fix: "get a new access token for the admin API from your identity provider"})
		return tokens.Actor{}, false
	}
	actor := tokens.Actor{Tenant: claims.Tenant, Subject: claims.Subject, Name: claims.ClientID}
	switch {
	case slices.Contains(claims.Roles, a.platformRole):
		actor.Role = tokens.RolePlatformAdmin
	case slices.Contains(claims.Roles, a.tenantRole) && claims.Tenant != "":
		actor.Role = tokens.RoleTenantAdmin
	case claims.Tenant != "" && claims.Subject != "":
		actor.Role = tokens.RolePerson
	default:
		a.log.InfoContext(r.Context(), "admin API: token without role or tenant", "subject", claims.Subject,
			"tenants", len(claims.Tenants))
		msg := "the token carries no admin role and does not name exactly one tenant"
		if slices.Contains(claims.Roles, a.tenantRole) {
			msg = "the token carries the tenant admin role but names " + strconv.Itoa(len(claims.Tenants)) + " tenants; a tenant admin acts in exactly one"
		}
		writeError(w, http.StatusForbidden, apiError{Code: "no_role", Message: msg,
			Fix: "log in as a person or tenant admin of one tenant, or ask for the platform admin role"})
		return tokens.Actor{}, false
	}
	return actor, true
}

// adminCredentials says which tokens the admin API takes, as configured.
func (a *API) adminCredentials() string {
	switch {
	case a.verifier == nil:
		return "use an admin token from the configuration (admin_api.static_tokens)"
	case len(a.static) == 0:
		return "use an OIDC access token for the admin API (audience " + a.audience + ")"
	}
	return "use an OIDC access token for the admin API (audience " + a.audience + ") or an admin token from the configuration"
}

// staticActor finds the static admin token raw is, comparing its hash with
// every configured hash in constant time.
func (a *API) staticActor(raw string) (tokens.Actor, bool) {
	if len(a.static) == 0 {
		return tokens.Actor{}, false
	}
	d := staticDigest(raw)
	found := -1
	for i := range a.static {
		if subtle.ConstantTimeCompare(d[:], a.static[i].SHA256[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return tokens.Actor{}, false
	}
	st := a.static[found]
	return tokens.Actor{Role: st.Role, Tenant: st.Tenant, Name: st.Name}, true
}

// unauthorized answers 401 with the realm challenge; withError adds
// error="invalid_token" (a token was presented).
func (a *API) unauthorized(w http.ResponseWriter, withError bool, e apiError) {
	challenge := `Bearer realm="` + Realm + `"`
	if withError {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeError(w, http.StatusUnauthorized, e)
}
