package auth_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// TestRolesAndTenants reads the roles claim (a string or an array of
// strings, under the default or a configured name) and a tenant claim that
// names one or several tenants, from tokens the real provider mints.
func TestRolesAndTenants(t *testing.T) {
	cfg := provider.DefaultConfig()
	client := func(id string, tenant string, roles []string, claims map[string]any) provider.Client {
		return provider.Client{ID: id, Secret: provider.TestSecret, Tenant: tenant, Roles: roles, Claims: claims}
	}
	cfg.Clients = append(cfg.Clients,
		client("roles-array", "acme", []string{"mcpgate.tenant_admin", "viewer"}, nil),
		client("roles-string", "acme", nil, map[string]any{"roles": "mcpgate.platform_admin"}),
		client("roles-groups", "acme", nil, map[string]any{"groups": []string{"ops"}}),
		client("no-roles", "acme", nil, nil),
		client("roles-number", "acme", nil, map[string]any{"roles": 7}),
		client("roles-mixed", "acme", nil, map[string]any{"roles": []any{"a", 1}}),
		client("tenants-two", "", nil, map[string]any{"tenant": []string{"acme", "globex"}}),
		client("tenants-dup", "", nil, map[string]any{"tenant": []string{"acme", "", "acme"}}),
		client("tenants-empty", "", nil, map[string]any{"tenant": []string{}}),
		client("tenants-object", "", nil, map[string]any{"tenant": map[string]any{"id": "acme"}}),
	)
	p := oidctest.Start(t, oidctest.WithConfig(cfg))
	ctx := context.Background()
	v := verifierFor(t, p, nil)
	verify := func(t *testing.T, v *auth.Verifier, client string) (*auth.Claims, error) {
		t.Helper()
		return v.Verify(ctx, p.MustClientCredentials(t, client, provider.TestSecret, route), route)
	}

	valid := []struct {
		client  string
		roles   []string
		tenant  string
		tenants []string
	}{
		{"roles-array", []string{"mcpgate.tenant_admin", "viewer"}, "acme", []string{"acme"}},
		{"roles-string", []string{"mcpgate.platform_admin"}, "acme", []string{"acme"}},
		{"no-roles", nil, "acme", []string{"acme"}},
		{"roles-groups", nil, "acme", []string{"acme"}}, // "groups" is not the roles claim by default
		{"tenants-two", nil, "", []string{"acme", "globex"}},
		{"tenants-dup", nil, "acme", []string{"acme"}},
		{"tenants-empty", nil, "", nil},
	}
	for _, tc := range valid {
		t.Run(tc.client, func(t *testing.T) {
			c, err := verify(t, v, tc.client)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !slices.Equal(c.Roles, tc.roles) || c.Tenant != tc.tenant || !slices.Equal(c.Tenants, tc.tenants) {
				t.Errorf("roles %q tenant %q tenants %q, want %q %q %q", c.Roles, c.Tenant, c.Tenants, tc.roles, tc.tenant, tc.tenants)
			}
			if tc.roles == nil && c.Roles != nil {
				t.Errorf("roles = %#v, want nil", c.Roles)
			}
			// The caller owns the claims: changing them must not change
			// what the cache answers next time.
			if len(c.Roles) > 0 {
				c.Roles[0] = "changed"
			}
			if len(c.Tenants) > 0 {
				c.Tenants[0] = "changed"
			}
		})
	}
	t.Run("cached claims are copies", func(t *testing.T) {
		tok := p.MustClientCredentials(t, "roles-array", provider.TestSecret, route)
		c1, err := v.Verify(ctx, tok, route)
		if err != nil {
			t.Fatal(err)
		}
		c1.Roles[0], c1.Tenants[0] = "x", "y"
		c2, err := v.Verify(ctx, tok, route)
		if err != nil {
			t.Fatal(err)
		}
		if c2.Roles[0] != "mcpgate.tenant_admin" || c2.Tenants[0] != "acme" {
			t.Errorf("cached claims changed: %+v", c2)
		}
	})
	t.Run("configured roles claim", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.RolesClaim = "groups" })
		c, err := verify(t, v, "roles-groups")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Roles, []string{"ops"}) {
			t.Errorf("roles = %q, want [ops]", c.Roles)
		}
		c, err = verify(t, v, "roles-array") // its "roles" claim is not read now
		if err != nil {
			t.Fatal(err)
		}
		if c.Roles != nil {
			t.Errorf("roles = %q, want none", c.Roles)
		}
	})
	t.Run("no tenant claim configured ignores tenant arrays", func(t *testing.T) {
		v, err := auth.NewVerifier(ctx, []auth.IssuerConfig{{Issuer: p.Issuer}})
		if err != nil {
			t.Fatal(err)
		}
		c, err := verify(t, v, "tenants-two")
		if err != nil {
			t.Fatal(err)
		}
		if c.Tenant != "" || c.Tenants != nil {
			t.Errorf("tenant %q tenants %q, want none", c.Tenant, c.Tenants)
		}
	})
	for _, client := range []string{"roles-number", "roles-mixed", "tenants-object"} {
		t.Run("malformed/"+client, func(t *testing.T) {
			_, err := verify(t, v, client)
			wantReason(t, err, auth.ReasonMalformed, auth.ErrInvalidToken)
		})
	}
}
