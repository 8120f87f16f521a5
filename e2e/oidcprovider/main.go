// Command oidcprovider is a real OpenID provider for end-to-end tests, built
// on github.com/zitadel/oidc/v3/pkg/op with in-memory storage. It listens on
// loopback, prints one ready line to stdout and serves until SIGINT/SIGTERM:
//
//	oidcprovider ready issuer=http://127.0.0.1:40123 addr=127.0.0.1:40123
//
// Endpoints: /.well-known/openid-configuration, /.well-known/oauth-authorization-server,
// /keys (JWKS), /authorize (code + PKCE S256, auto-approved through /login),
// /oauth/token (authorization_code, client_credentials; RFC 8707 resource),
// /oauth/introspect (RFC 7662), /revoke (RFC 7009), /userinfo,
// POST /admin/rotate[?retire=true], GET /admin/stats.
//
// The admin endpoints have no authentication: this is a test provider, and
// it listens on loopback by default.
//
// Usage:
//
//	oidcprovider [-addr 127.0.0.1:0] [-issuer URL] [-config file.json]
//	             [-token-lifetime 5m] [-signing-alg RS256] [-log-level warn]
//
// Without -config a built-in configuration is used (see provider.DefaultConfig).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := provider.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oidcprovider:", err)
		os.Exit(1)
	}
}
