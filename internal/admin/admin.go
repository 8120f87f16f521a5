// Package admin is mcpgate's admin API: JSON over HTTP under /v1/, served
// on the admin listener next to /healthz, /readyz and /metrics.
//
// # Authentication
//
// Every request needs "Authorization: Bearer <token>" (nothing else is
// read: no query string, no cookie). The token is one of:
//
//   - a static admin token from the configuration (stored there only as
//     SHA-256 hex), compared in constant time; it has the role and tenant
//     the configuration gives it. For bootstrap and the demo.
//   - an OIDC access token for Options.Audience, verified by
//     Options.Verifier. Its roles claim decides the role: the platform admin
//     role value makes a platform admin; the tenant admin role value plus a
//     single tenant makes that tenant's admin; otherwise a token with a
//     single tenant is that person of that tenant; anything else is 403.
//
// A gateway-issued MCP token (tokens.Prefix) is refused with 401: MCP
// tokens work only at the MCP endpoint. Missing or invalid tokens get 401
// with `WWW-Authenticate: Bearer realm="mcpgate-admin"` (plus
// error="invalid_token" when a token was presented); when the identity
// provider cannot be reached the answer is 503 with Retry-After.
//
// # Endpoints
//
//	GET    /v1/whoami                 → {role, tenant, subject, name?}
//	POST   /v1/tokens                 {tenant?, subject?, name?, rights?, expires_in?}
//	                                  → 201 {id, token, tenant, creator, name, rights, created_at, expires_at, active}
//	GET    /v1/tokens?tenant=&creator= → {tokens: [{id, tenant, creator, name, rights, created_at, expires_at, revoked_at?, active}]}
//	DELETE /v1/tokens/{id}            → the revoked token
//	GET    /v1/audit?tenant=&since=&until=&limit= → {records: [...]}
//	GET    /v1/killswitch             → {switches: [{tenant, on, reason?, set_by?, at?}]}
//	PUT    /v1/killswitch             {tenant?, on, reason?} → the switch as set (killswitch.go)
//
// Who may do what follows the tokens package (a person: own tokens; a
// tenant admin: its tenant's tokens and audit; a platform admin:
// everything); people may not read the audit log.
//
// Request bodies must be application/json, at most MaxBodyBytes, one JSON
// object with only the documented members, no duplicate names and valid
// UTF-8. Every answer is JSON with Cache-Control: no-store (token secrets
// travel in bodies); errors are
//
//	{"error": {"code": "snake_case", "message": "...", "fix": "..."}}
//
// with status 400, 401, 403, 404, 405, 413, 415 or 503 (and 500 for a bug).
// Without a token service (gateway tokens off) the token endpoints answer
// 404 with code tokens_disabled.
package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store"
)

// Defaults of Options.
const (
	DefaultPlatformAdminRole = "mcpgate.platform_admin"
	DefaultTenantAdminRole   = "mcpgate.tenant_admin"
)

// MaxBodyBytes bounds request bodies.
const MaxBodyBytes = 64 << 10

// Realm is the realm of the admin API's WWW-Authenticate challenges.
const Realm = "mcpgate-admin"

// Verifier verifies OIDC access tokens; *auth.Verifier implements it.
type Verifier interface {
	Verify(ctx context.Context, raw, audience string) (*auth.Claims, error)
}

var _ Verifier = (*auth.Verifier)(nil)

// StaticToken is an admin token from the configuration.
type StaticToken struct {
	// Name identifies the token in audit records and logs; required and
	// unique.
	Name string
	// SHA256 is the SHA-256 of the token (see ParseSHA256Hex); required
	// and unique.
	SHA256 [32]byte
	// Role is tokens.RolePlatformAdmin or tokens.RoleTenantAdmin.
	Role string
	// Tenant is the tenant of a tenant admin token (required then) and
	// must be empty for a platform admin token.
	Tenant string
}

// ParseSHA256Hex reads a SHA-256 written as 64 hex digits (either case),
// as static admin tokens are stored in the configuration.
func ParseSHA256Hex(s string) ([32]byte, error) {
	var h [32]byte
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("admin token hash: want 64 hex digits (the SHA-256 of the token)")
	}
	copy(h[:], b)
	return h, nil
}

// Options configure New.
type Options struct {
	// Tokens is the token service; nil when gateway-issued MCP tokens are
	// off (the token endpoints then answer 404 tokens_disabled).
	Tokens *tokens.Service
	// Audit answers GET /v1/audit. Required.
	Audit store.AuditStore
	// Auditor, if set, records requests the admin API itself refuses for
	// lack of rights (a person reading the audit log, ...). Token changes
	// are audited by the token service.
	Auditor *store.Auditor
	// Verifier verifies OIDC access tokens; nil turns OIDC off (static
	// tokens only).
	Verifier Verifier
	// Audience is the aud admin OIDC tokens must carry, e.g.
	// https://gw.example.com/admin; required with a Verifier. It is
	// compared in canonical form (auth.CanonicalResourceURI). If the
	// issuer's configuration lists audiences, it must list this one too.
	Audience string
	// PlatformAdminRole and TenantAdminRole are the role claim values of
	// the two admin roles. Defaults DefaultPlatformAdminRole and
	// DefaultTenantAdminRole.
	PlatformAdminRole, TenantAdminRole string
	// StaticTokens are the configured admin tokens.
	StaticTokens []StaticToken
	// Logger logs refused and failed requests (never tokens). Default
	// slog.Default().
	Logger *slog.Logger
}

// API is the admin API handler.
type API struct {
	tokens        *tokens.Service
	audit         store.AuditStore
	auditor       *store.Auditor
	verifier      Verifier
	audience      string
	platformRole  string
	tenantRole    string
	static        []StaticToken
	log           *slog.Logger
	retryAfterSec string
	killSwitch    KillSwitch // killswitch.go; nil: no kill switch
}

// New checks o, reporting every problem at once, and returns the API.
func New(o Options) (*API, error) {
	var errs []error
	if o.Audit == nil {
		errs = append(errs, errors.New("audit store is required"))
	}
	if v, ok := o.Verifier.(*auth.Verifier); ok && v == nil {
		o.Verifier = nil
	}
	audience := ""
	if o.Verifier != nil {
		c, err := auth.CanonicalResourceURI(o.Audience)
		if err != nil {
			errs = append(errs, fmt.Errorf("audience: %w (OIDC tokens for the admin API need their own audience)", err))
		}
		audience = c
	}
	if o.PlatformAdminRole == "" {
		o.PlatformAdminRole = DefaultPlatformAdminRole
	}
	if o.TenantAdminRole == "" {
		o.TenantAdminRole = DefaultTenantAdminRole
	}
	if o.PlatformAdminRole == o.TenantAdminRole {
		errs = append(errs, fmt.Errorf("platform admin and tenant admin roles are both %q", o.PlatformAdminRole))
	}
	names := map[string]bool{}
	hashes := map[[32]byte]bool{}
	for i, st := range o.StaticTokens {
		where := fmt.Sprintf("static token %d (%q)", i, st.Name)
		if err := store.CheckID("name", st.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s: name must be non-empty, short and without NUL", where))
		} else if names[st.Name] {
			errs = append(errs, fmt.Errorf("%s: name used twice", where))
		}
		names[st.Name] = true
		if st.SHA256 == ([32]byte{}) {
			errs = append(errs, fmt.Errorf("%s: hash is missing", where))
		} else if hashes[st.SHA256] {
			errs = append(errs, fmt.Errorf("%s: the same token is configured twice", where))
		}
		hashes[st.SHA256] = true
		switch st.Role {
		case tokens.RolePlatformAdmin:
			if st.Tenant != "" {
				errs = append(errs, fmt.Errorf("%s: a platform admin token has no tenant", where))
			}
		case tokens.RoleTenantAdmin:
			if err := store.CheckID("tenant", st.Tenant); err != nil {
				errs = append(errs, fmt.Errorf("%s: a tenant admin token needs its tenant", where))
			}
		default:
			errs = append(errs, fmt.Errorf("%s: role %q: want %q or %q (people log in with OIDC)",
				where, st.Role, tokens.RolePlatformAdmin, tokens.RoleTenantAdmin))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("admin API: %w", err)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &API{
		tokens:        o.Tokens,
		audit:         o.Audit,
		auditor:       o.Auditor,
		verifier:      o.Verifier,
		audience:      audience,
		platformRole:  o.PlatformAdminRole,
		tenantRole:    o.TenantAdminRole,
		static:        append([]StaticToken(nil), o.StaticTokens...),
		log:           o.Logger,
		retryAfterSec: "5",
	}, nil
}

// Handler serves the paths starting /v1/ (mount it at "/v1/" without
// stripping the prefix); anything else is 404.
func (a *API) Handler() http.Handler { return http.HandlerFunc(a.serve) }

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	actor, ok := a.authenticate(w, r)
	if !ok {
		return
	}
	path := r.URL.Path
	switch {
	case path == "/v1/whoami":
		if allow(w, r, http.MethodGet) {
			a.whoami(w, actor)
		}
	case (path == "/v1/tokens" || strings.HasPrefix(path, "/v1/tokens/")) && a.tokens == nil:
		writeError(w, http.StatusNotFound, apiError{Code: "tokens_disabled",
			Message: "gateway-issued MCP tokens are not enabled on this gateway",
			Fix:     "enable gateway tokens in the configuration, or use OAuth at the MCP endpoint"})
	case path == "/v1/tokens":
		switch r.Method {
		case http.MethodGet:
			a.listTokens(w, r, actor)
		case http.MethodPost:
			a.createToken(w, r, actor)
		default:
			allow(w, r, http.MethodGet, http.MethodPost)
		}
	case strings.HasPrefix(path, "/v1/tokens/") && !strings.Contains(path[len("/v1/tokens/"):], "/"):
		if allow(w, r, http.MethodDelete) {
			a.revokeToken(w, r, actor, path[len("/v1/tokens/"):])
		}
	case path == "/v1/killswitch":
		a.serveKillSwitch(w, r, actor) // killswitch.go
	case path == "/v1/audit":
		if allow(w, r, http.MethodGet) {
			a.queryAudit(w, r, actor)
		}
	default:
		writeError(w, http.StatusNotFound, apiError{Code: "not_found",
			Message: fmt.Sprintf("no admin API endpoint at %s", path),
			Fix:     "use /v1/whoami, /v1/tokens, /v1/tokens/{id}, /v1/audit or /v1/killswitch"})
	}
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, apiError{Code: "method_not_allowed",
		Message: fmt.Sprintf("%s is not allowed here", r.Method),
		Fix:     "use " + strings.Join(methods, " or ")})
	return false
}

// staticDigest hashes a presented token for comparison with the
// configured static tokens.
func staticDigest(raw string) [32]byte { return sha256.Sum256([]byte(raw)) }
