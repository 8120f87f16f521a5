package auth_test

import (
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/auth"
)

// The shape of a refusal: what the pipeline answers a request to
// https://gw.example.com/mcp that carries no usable bearer token.
func Example_challenge() {
	resource, _ := auth.CanonicalResourceURI("HTTPS://GW.example.com:443/mcp")
	metadataURL, _ := auth.ResourceMetadataURL(resource)

	for _, header := range []string{"", "Basic dXNlcjpwYXNz", "Bearer two tokens"} {
		_, err := auth.BearerToken(header)
		var ae *auth.Error
		if errors.As(err, &ae) {
			fmt.Println(ae.StatusCode(), ae.Reason, "|", ae.WWWAuthenticate(metadataURL))
		}
	}
	// Output:
	// 401 missing | Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	// 401 missing | Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	// 401 malformed | Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="token is malformed"
}

// A token whose scopes do not cover the call: 403 with the scopes to ask for.
func ExampleClaims_RequireScopes() {
	c := &auth.Claims{Subject: "alice", Tenant: "acme", Scopes: []string{"tools:read"}}
	err := c.RequireScopes("tools:read", "tools:write")
	var ae *auth.Error
	if errors.As(err, &ae) {
		fmt.Println(ae.StatusCode(), errors.Is(err, auth.ErrInsufficientScope))
		fmt.Println(ae.WWWAuthenticate("https://gw.example.com/.well-known/oauth-protected-resource/mcp"))
	}
	// Output:
	// 403 true
	// Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp", error="insufficient_scope", scope="tools:read tools:write", error_description="token scope does not cover this request"
}
