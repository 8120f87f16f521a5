package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/authn"
)

// newAuthenticator discovers every configured issuer (an unreachable one is
// an error: mcpgate does not start half-blind) and builds the
// authenticator with each route's protected resource metadata, gateway
// tokens and live rights as configured. It also returns the OAuth
// verifier (nil without issuers) for the admin API.
func newAuthenticator(ctx context.Context, cfg *config.Config, id *identity, log *slog.Logger) (*authn.Authenticator, *auth.Verifier, error) {
	issuers := cfg.Auth.IssuerConfigs()
	var v *auth.Verifier
	o := authn.Options{
		Issuers:         issuers,
		ResourceBaseURL: cfg.Auth.ResourceBaseURL,
		Rights:          id.rights,
		TenantHeader:    cfg.Auth.TenantHeader,
		ClientToolsets:  cfg.ClientToolsets(),
		Logger:          log,
	}
	if len(issuers) > 0 {
		var err error
		if v, err = auth.NewVerifier(ctx, issuers, auth.WithLogger(log)); err != nil {
			return nil, nil, fmt.Errorf("auth: %w", err)
		}
		o.Verifier = v
	}
	if id.tokens != nil {
		o.Tokens = id.tokens
	}
	for _, u := range cfg.Upstreams {
		if u.Route != "" {
			o.Routes = append(o.Routes, authn.Route{Upstream: u.Name, Path: u.Route, Scopes: routeScopes(cfg.Auth, u)})
		}
	}
	for _, s := range cfg.Servers {
		// A virtual server asks for the rights of every member's tools.
		var scopes []string
		for _, m := range s.Members {
			for _, u := range cfg.Upstreams {
				if u.Name == m.Upstream {
					scopes = append(scopes, routeScopes(cfg.Auth, u)...)
				}
			}
		}
		slices.Sort(scopes)
		o.Routes = append(o.Routes, authn.Route{Upstream: s.Name, Path: s.Route, Scopes: slices.Compact(scopes)})
	}
	an, err := authn.New(o)
	if err != nil {
		return nil, nil, err
	}
	for _, u := range cfg.Upstreams {
		if u.Route == "" {
			continue // a member of a server, reached through it
		}
		if len(issuers) == 0 {
			// No protected resource metadata: clients are not sent into
			// an OAuth flow (authn.Authenticator).
			log.Info("route takes gateway tokens only (no OAuth issuer: no protected resource metadata)", "upstream", u.Name, "resource", an.ResourceURI(u.Name))
			continue
		}
		log.Info("route is an OAuth protected resource", "upstream", u.Name, "resource", an.ResourceURI(u.Name),
			"metadata", auth.ResourceMetadataPath(u.Route))
	}
	return an, v, nil
}

// newAdmin builds the admin API (served under /v1/ on the admin listener).
func (id *identity) newAdmin(cfg *config.Config, v *auth.Verifier, log *slog.Logger) error {
	c := cfg.AdminAPI
	o := admin.Options{
		Tokens: id.tokens, Audit: id.store, Auditor: id.auditor,
		Audience: c.Audience, PlatformAdminRole: c.PlatformAdminRole, TenantAdminRole: c.TenantAdminRole,
		Logger: log,
	}
	if v != nil && c.Audience != "" {
		o.Verifier = v
	}
	for _, t := range c.StaticTokens {
		o.StaticTokens = append(o.StaticTokens, admin.StaticToken{Name: t.Name, SHA256: t.Hash(), Role: t.Role, Tenant: t.Tenant})
	}
	api, err := admin.New(o)
	if err != nil {
		return fmt.Errorf("admin API: %w", err)
	}
	id.admin = api
	return nil
}

// sessionTTL is how long a session id stays bound (auth.session_ttl).
func sessionTTL(cfg *config.Config) time.Duration {
	if cfg.Auth == nil {
		return 0
	}
	return cfg.Auth.SessionTTL.D()
}

// routeScopes is scopes_supported of a route's metadata: the configured
// list, else every right the route's tools declare (sorted).
func routeScopes(a *config.Auth, u config.Upstream) []string {
	if len(a.ScopesSupported) > 0 {
		return a.ScopesSupported
	}
	set := map[string]bool{}
	for _, d := range u.Tools {
		for _, r := range d.Rights {
			set[r] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
