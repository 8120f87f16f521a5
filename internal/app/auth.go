package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/authn"
)

// newAuthenticator discovers every configured issuer (an unreachable one is
// an error: mcpgate does not start half-blind) and builds the
// authenticator with each route's protected resource metadata.
func newAuthenticator(ctx context.Context, cfg *config.Config, log *slog.Logger) (*authn.Authenticator, error) {
	issuers := cfg.Auth.IssuerConfigs()
	v, err := auth.NewVerifier(ctx, issuers, auth.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("auth: %w", err)
	}
	var routes []authn.Route
	for _, u := range cfg.Upstreams {
		routes = append(routes, authn.Route{Upstream: u.Name, Path: u.Route, Scopes: routeScopes(cfg.Auth, u)})
	}
	an, err := authn.New(authn.Options{
		Verifier:        v,
		Issuers:         issuers,
		ResourceBaseURL: cfg.Auth.ResourceBaseURL,
		Routes:          routes,
		Logger:          log,
	})
	if err != nil {
		return nil, err
	}
	for _, u := range cfg.Upstreams {
		log.Info("route is an OAuth protected resource", "upstream", u.Name, "resource", an.ResourceURI(u.Name),
			"metadata", auth.ResourceMetadataPath(u.Route))
	}
	return an, nil
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
