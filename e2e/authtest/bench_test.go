package auth_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// BenchmarkVerify measures Verify of a token already in the cache (the hot
// path: hash, lookup, expiry and audience check) and of a token verified in
// full (header checks, key selection, signature, claims).
func BenchmarkVerify(b *testing.B) {
	p := oidctest.Start(b)
	ctx := context.Background()
	for _, alg := range []struct{ name, client, secret string }{
		{"RS256", provider.ClientGateway, provider.ClientGatewaySecret},
		{"ES256", provider.ClientES256, provider.TestSecret},
		{"EdDSA", provider.ClientEdDSA, provider.TestSecret},
	} {
		tok := p.MustClientCredentials(b, alg.client, alg.secret, route, "tools:read", "tools:write")
		b.Run("cached/"+alg.name, func(b *testing.B) {
			v := verifierFor(b, p, nil)
			if _, err := v.Verify(ctx, tok, route); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok, route); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("fresh/"+alg.name, func(b *testing.B) {
			v := verifierFor(b, p, nil, auth.WithTokenCacheSize(0))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tok, route); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
