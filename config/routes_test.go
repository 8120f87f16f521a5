package config

import "testing"

// TestTenantRouteURIs: a route with {tenant} has a resource URI template,
// and each tenant's resource URI is recognised as the route's.
func TestTenantRouteURIs(t *testing.T) {
	a := &Auth{ResourceBaseURL: "https://MCP.example.com:443/"}
	if got, err := a.ResourceURI("/t/{tenant}/mcp"); err != nil || got != "https://mcp.example.com/t/{tenant}/mcp" {
		t.Errorf("ResourceURI = %q, %v", got, err)
	}
	if got, err := a.ResourceURI("/mcp"); err != nil || got != "https://mcp.example.com/mcp" {
		t.Errorf("ResourceURI = %q, %v", got, err)
	}
	for uri, want := range map[string]string{
		"https://mcp.example.com/t/acme/mcp":     "acme",
		"https://mcp.example.com/t/%61cme/mcp":   "",
		"https://mcp.example.com/t//mcp":         "",
		"https://other.example.com/t/acme/mcp":   "",
		"https://mcp.example.com/t/acme/mcp/":    "",
		"https://mcp.example.com/x/t/acme/mcp":   "",
		"https://mcp.example.com/t/{tenant}/mcp": "",
	} {
		tenant, ok := a.TenantResource("/t/{tenant}/mcp", uri)
		if ok != (want != "") || tenant != want {
			t.Errorf("TenantResource(%q) = %q, %v", uri, tenant, ok)
		}
	}
	if _, ok := a.TenantResource("/mcp", "https://mcp.example.com/mcp"); ok {
		t.Error("an exact route has no tenant resources")
	}
}
