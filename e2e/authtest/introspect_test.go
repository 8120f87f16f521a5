package auth_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// TestIntrospection verifies opaque tokens with RFC 7662 at the provider.
func TestIntrospection(t *testing.T) {
	p := oidctest.Start(t)
	clk := newClock()
	v := verifierFor(t, p, func(c *auth.IssuerConfig) {
		c.Introspection = &auth.IntrospectionConfig{
			ClientID:     provider.ClientGateway,
			ClientSecret: provider.ClientGatewaySecret,
			CacheTTL:     time.Minute,
		}
	}, auth.WithClock(clk.Now))
	ctx := context.Background()
	opaque := func(t *testing.T, resource string) string {
		return p.MustClientCredentials(t, provider.ClientOpaque, provider.ClientOpaqueSecret, resource, "tools:read")
	}

	t.Run("active", func(t *testing.T) {
		tok := opaque(t, route)
		before := p.Stats(t).IntrospectionRequests
		c, err := v.Verify(ctx, tok, route)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Introspected || c.Subject != provider.ClientOpaque || c.ClientID != provider.ClientOpaque ||
			c.Tenant != provider.TenantService || !slices.Equal(c.Scopes, []string{"tools:read"}) || c.Issuer != p.Issuer {
			t.Errorf("claims = %+v", c)
		}
		// Cached: no second introspection.
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatal(err)
		}
		if got := p.Stats(t).IntrospectionRequests - before; got != 1 {
			t.Errorf("introspected %d times, want 1", got)
		}
	})
	t.Run("revoked: refused once the cache TTL lapses", func(t *testing.T) {
		tok := opaque(t, route)
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatal(err)
		}
		if err := p.Revoke(ctx, provider.ClientOpaque, provider.ClientOpaqueSecret, tok); err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatalf("within the cache TTL: %v", err)
		}
		clk.Advance(time.Minute + time.Second)
		_, err := v.Verify(ctx, tok, route)
		wantReason(t, err, auth.ReasonInactive, auth.ErrInvalidToken)
	})
	t.Run("unknown token is inactive", func(t *testing.T) {
		_, err := v.Verify(ctx, "bm90LWEtdG9rZW4tdGhpcy1wcm92aWRlci1pc3N1ZWQ", route)
		wantReason(t, err, auth.ReasonInactive, auth.ErrInvalidToken)
	})
	t.Run("other audience", func(t *testing.T) {
		_, err := v.Verify(ctx, opaque(t, otherRoute), route)
		wantReason(t, err, auth.ReasonWrongAudience, auth.ErrInvalidToken)
	})
	t.Run("JWTs are still verified locally", func(t *testing.T) {
		before := p.Stats(t).IntrospectionRequests
		if _, err := v.Verify(ctx, gatewayToken(t, p, route), route); err != nil {
			t.Fatal(err)
		}
		if got := p.Stats(t).IntrospectionRequests - before; got != 0 {
			t.Errorf("introspected a JWT %d times", got)
		}
	})
	t.Run("bad gateway credentials: unavailable, not invalid", func(t *testing.T) {
		bad := verifierFor(t, p, func(c *auth.IssuerConfig) {
			c.Introspection = &auth.IntrospectionConfig{ClientID: provider.ClientGateway, ClientSecret: "wrong"}
		})
		_, err := bad.Verify(ctx, opaque(t, route), route)
		wantReason(t, err, auth.ReasonUnavailable, auth.ErrUnavailable)
	})
}

// TestClaimMapping reads subject, tenant, client and scopes through
// configured claim names.
func TestClaimMapping(t *testing.T) {
	cfg := provider.DefaultConfig()
	cfg.Clients = append(cfg.Clients,
		provider.Client{
			ID: "mapped", Secret: provider.TestSecret,
			Claims: map[string]any{
				"org": "org-7", "uid": "user-9", "azp": "agent-x",
				"scp": []string{"tools:read", "tools:admin"},
			},
		},
		provider.Client{ID: "numeric-org", Secret: provider.TestSecret, Claims: map[string]any{"org": 7}},
	)
	p := oidctest.Start(t, oidctest.WithConfig(cfg))
	ctx := context.Background()

	t.Run("configured names", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) {
			c.TenantClaim, c.SubjectClaim, c.ScopeClaim, c.ClientIDClaim = "org", "uid", "scp", "azp"
		})
		tok := p.MustClientCredentials(t, "mapped", provider.TestSecret, route, "ignored")
		c, err := v.Verify(ctx, tok, route)
		if err != nil {
			t.Fatal(err)
		}
		if c.Tenant != "org-7" || c.Subject != "user-9" || c.ClientID != "agent-x" ||
			!slices.Equal(c.Scopes, []string{"tools:read", "tools:admin"}) {
			t.Errorf("claims = %+v", c)
		}
	})
	t.Run("defaults: scope, then scp; client_id, then azp", func(t *testing.T) {
		v := verifierFor(t, p, nil)
		tok := p.MustClientCredentials(t, "mapped", provider.TestSecret, route)
		c, err := v.Verify(ctx, tok, route)
		if err != nil {
			t.Fatal(err)
		}
		// No scope requested: the provider sets no "scope" claim, so "scp" counts.
		if c.ClientID != "mapped" || c.Subject != "mapped" || c.Tenant != "" ||
			!slices.Equal(c.Scopes, []string{"tools:read", "tools:admin"}) {
			t.Errorf("claims = %+v", c)
		}
	})
	t.Run("no tenant claim configured", func(t *testing.T) {
		v, err := auth.NewVerifier(ctx, []auth.IssuerConfig{{Issuer: p.Issuer}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := v.Verify(ctx, gatewayToken(t, p, route), route)
		if err != nil {
			t.Fatal(err)
		}
		if c.Tenant != "" {
			t.Errorf("tenant = %q, want none", c.Tenant)
		}
	})
	t.Run("tenant claim of the wrong type", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.TenantClaim = "org" })
		tok := p.MustClientCredentials(t, "numeric-org", provider.TestSecret, route)
		_, err := v.Verify(ctx, tok, route)
		wantReason(t, err, auth.ReasonMalformed, auth.ErrInvalidToken)
	})
	t.Run("missing subject claim", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.SubjectClaim = "uid" })
		_, err := v.Verify(ctx, gatewayToken(t, p, route), route)
		wantReason(t, err, auth.ReasonMalformed, auth.ErrInvalidToken)
	})
	t.Run("insufficient scope", func(t *testing.T) {
		v := verifierFor(t, p, nil)
		c, err := v.Verify(ctx, gatewayToken(t, p, route, "tools:read"), route)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RequireScopes("tools:read"); err != nil {
			t.Fatalf("RequireScopes(tools:read): %v", err)
		}
		err = c.RequireScopes("tools:read", "tools:write")
		ae := wantReason(t, err, auth.ReasonInsufficientScope, auth.ErrInsufficientScope)
		if ae.StatusCode() != 403 {
			t.Errorf("status = %d, want 403", ae.StatusCode())
		}
		want := `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", error="insufficient_scope", scope="tools:read tools:write", error_description="token scope does not cover this request"`
		if got := ae.WWWAuthenticate("https://mcp.example.com/.well-known/oauth-protected-resource/mcp"); got != want {
			t.Errorf("WWW-Authenticate:\n got %s\nwant %s", got, want)
		}
	})
}
