package auth_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// TestVerify runs valid and refused tokens, all minted by the real provider
// through the client_credentials grant (or forged here, for the attacks),
// through one verifier.
func TestVerify(t *testing.T) {
	p := oidctest.Start(t)
	other := oidctest.Start(t) // another issuer, not trusted
	v := verifierFor(t, p, nil)
	ctx := context.Background()

	cc := func(client, resource string, scopes ...string) func(t *testing.T) string {
		return func(t *testing.T) string {
			return p.MustClientCredentials(t, client, provider.TestSecret, resource, scopes...)
		}
	}
	gateway := func(t *testing.T) string { return gatewayToken(t, p, route, "tools:read", "tools:write") }
	realKey := func(t *testing.T, alg string) jose.JSONWebKey {
		for _, k := range jwks(t, p).Keys {
			if k.Algorithm == alg {
				return k
			}
		}
		t.Fatalf("no %s key in the JWKS", alg)
		return jose.JSONWebKey{}
	}

	valid := []struct {
		name  string
		token func(t *testing.T) string
		alg   string
	}{
		{"RS256", gateway, "RS256"},
		{"ES256", cc(provider.ClientES256, route), "ES256"},
		{"PS256", cc(provider.ClientPS256, route), "PS256"},
		{"EdDSA", cc(provider.ClientEdDSA, route), "EdDSA"},
		{"expired within the clock skew", cc(provider.ClientSlightlyExpired, route), "RS256"},
		{"nbf within the clock skew", cc(provider.ClientSlightlyFuture, route), "RS256"},
	}
	for _, tc := range valid {
		t.Run("valid/"+tc.name, func(t *testing.T) {
			tok := tc.token(t)
			c, err := v.Verify(ctx, tok, route)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if c.Issuer != p.Issuer || c.Subject == "" || c.ClientID == "" || c.TokenID == "" {
				t.Errorf("claims = %+v", c)
			}
			if !slices.Equal(c.Audience, []string{route}) {
				t.Errorf("audience = %v, want [%s]", c.Audience, route)
			}
			if c.Expiry.IsZero() {
				t.Error("no expiry")
			}
		})
	}

	t.Run("valid/claims", func(t *testing.T) {
		c, err := v.Verify(ctx, gateway(t), route)
		if err != nil {
			t.Fatal(err)
		}
		want := auth.Claims{
			Issuer: p.Issuer, Subject: provider.ClientGateway, Tenant: provider.TenantService,
			ClientID: provider.ClientGateway, Scopes: []string{"tools:read", "tools:write"},
			Audience: []string{route},
		}
		if c.Issuer != want.Issuer || c.Subject != want.Subject || c.Tenant != want.Tenant ||
			c.ClientID != want.ClientID || !slices.Equal(c.Scopes, want.Scopes) || c.Introspected {
			t.Errorf("claims = %+v, want %+v", c, want)
		}
		if d := time.Until(c.Expiry); d < 4*time.Minute || d > 5*time.Minute+time.Second {
			t.Errorf("expiry in %s, want about 5m", d)
		}
	})

	refused := []struct {
		name   string
		token  func(t *testing.T) string
		reason auth.Reason
	}{
		{"garbled JWT", func(*testing.T) string { return "abc.def.ghi" }, auth.ReasonMalformed},
		{"not a JWT", func(*testing.T) string { return "not-a-jwt-and-no-introspection" }, auth.ReasonMalformed},
		{"five segments (JWE)", func(*testing.T) string { return "a.b.c.d.e" }, auth.ReasonMalformed},
		{"expired", cc(provider.ClientExpired, route), auth.ReasonExpired},
		{"not yet valid", cc(provider.ClientFuture, route), auth.ReasonNotYetValid},
		{"typ JWT, not at+jwt", cc(provider.ClientPlainJWT, route), auth.ReasonTypNotAllowed},
		{"wrong audience", func(t *testing.T) string { return gatewayToken(t, p, otherRoute) }, auth.ReasonWrongAudience},
		{"no resource requested (aud = client id)", func(t *testing.T) string { return gatewayToken(t, p, "") }, auth.ReasonWrongAudience},
		{"wrong issuer", func(t *testing.T) string {
			return other.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, route)
		}, auth.ReasonWrongIssuer},
		{"tampered payload", func(t *testing.T) string {
			parts := strings.Split(gateway(t), ".")
			claims := payloadOf(t, strings.Join(parts, "."))
			claims["tenant"] = "globex"
			return parts[0] + "." + segment(t, claims) + "." + parts[2]
		}, auth.ReasonBadSignature},
		{"tampered signature", func(t *testing.T) string {
			parts := strings.Split(gateway(t), ".")
			sig := []byte(parts[2])
			if sig[10] == 'A' {
				sig[10] = 'B'
			} else {
				sig[10] = 'A'
			}
			return parts[0] + "." + parts[1] + "." + string(sig)
		}, auth.ReasonBadSignature},
		{"ID token presented as access token", func(t *testing.T) string {
			tr, err := p.RunCodeFlow(ctx, oidctest.CodeFlow{
				ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI,
				Scopes: []string{"openid"}, Resources: []string{route},
			})
			if err != nil || tr.IDToken == "" {
				t.Fatalf("code flow: %v (id token %q)", err, tr.IDToken)
			}
			return tr.IDToken
		}, auth.ReasonTypNotAllowed},
		{"alg none", func(t *testing.T) string {
			kid := realKey(t, "RS256").KeyID
			hdr := map[string]any{"alg": "none", "typ": "at+jwt", "kid": kid}
			return segment(t, hdr) + "." + segment(t, forgedClaims(p)) + "."
		}, auth.ReasonAlgNotAllowed},
		{"alg None (case variant)", func(t *testing.T) string {
			hdr := map[string]any{"alg": "None", "typ": "at+jwt"}
			return segment(t, hdr) + "." + segment(t, forgedClaims(p)) + "."
		}, auth.ReasonAlgNotAllowed},
		{"HS256 keyed with the provider's RSA public key", func(t *testing.T) string {
			k := realKey(t, "RS256")
			der, err := x509.MarshalPKIXPublicKey(k.Key)
			if err != nil {
				t.Fatal(err)
			}
			secret := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
			return signWith(t, jose.HS256, secret, k.KeyID, "at+jwt", forgedClaims(p))
		}, auth.ReasonAlgNotAllowed},
		{"RS256 under the kid of the EC key", func(t *testing.T) string {
			k := realKey(t, "ES256")
			return signWith(t, jose.RS256, attackerRSA(t), k.KeyID, "at+jwt", forgedClaims(p))
		}, auth.ReasonUnknownKey},
		{"signed by an attacker key under a real kid", func(t *testing.T) string {
			k := realKey(t, "RS256")
			return signWith(t, jose.RS256, attackerRSA(t), k.KeyID, "at+jwt", forgedClaims(p))
		}, auth.ReasonBadSignature},
	}
	for _, tc := range refused {
		t.Run("refused/"+tc.name, func(t *testing.T) {
			c, err := v.Verify(ctx, tc.token(t), route)
			if c != nil {
				t.Fatalf("got claims %+v", c)
			}
			ae := wantReason(t, err, tc.reason, auth.ErrInvalidToken)
			if ae.StatusCode() != http.StatusUnauthorized {
				t.Errorf("status = %d, want 401", ae.StatusCode())
			}
			h := ae.WWWAuthenticate("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
			if !strings.Contains(h, `error="invalid_token"`) || !strings.HasPrefix(h, `Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`) {
				t.Errorf("WWW-Authenticate = %s", h)
			}
		})
	}

	t.Run("refused/missing", func(t *testing.T) {
		_, err := v.Verify(ctx, "", route)
		ae := wantReason(t, err, auth.ReasonMissing, auth.ErrMissingToken)
		if errors.Is(err, auth.ErrInvalidToken) {
			t.Error("a missing token is not an invalid one")
		}
		if got, want := ae.WWWAuthenticate("https://x/.well-known/oauth-protected-resource"), `Bearer resource_metadata="https://x/.well-known/oauth-protected-resource"`; got != want {
			t.Errorf("WWW-Authenticate = %s, want %s", got, want)
		}
	})

	t.Run("valid token, cached, for another route", func(t *testing.T) {
		tok := gateway(t)
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatal(err)
		}
		_, err := v.Verify(ctx, tok, otherRoute)
		wantReason(t, err, auth.ReasonWrongAudience, auth.ErrInvalidToken)
	})
}

// TestVerifyIssuerPolicy checks the per-issuer allowlists and audiences.
func TestVerifyIssuerPolicy(t *testing.T) {
	p := oidctest.Start(t)
	ctx := context.Background()

	t.Run("alg outside the issuer's allowlist", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.Algorithms = []string{"ES256"} })
		_, err := v.Verify(ctx, gatewayToken(t, p, route), route)
		wantReason(t, err, auth.ReasonAlgNotAllowed, auth.ErrInvalidToken)
		tok := p.MustClientCredentials(t, provider.ClientES256, provider.TestSecret, route)
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatalf("ES256: %v", err)
		}
	})
	t.Run("typ JWT admitted when configured", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.Types = []string{"JWT"} })
		tok := p.MustClientCredentials(t, provider.ClientPlainJWT, provider.TestSecret, route)
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatal(err)
		}
		_, err := v.Verify(ctx, gatewayToken(t, p, route), route)
		wantReason(t, err, auth.ReasonTypNotAllowed, auth.ErrInvalidToken)
	})
	t.Run("zero skew refuses slightly expired tokens", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.ClockSkew = time.Nanosecond })
		tok := p.MustClientCredentials(t, provider.ClientSlightlyExpired, provider.TestSecret, route)
		_, err := v.Verify(ctx, tok, route)
		wantReason(t, err, auth.ReasonExpired, auth.ErrInvalidToken)
		tok = p.MustClientCredentials(t, provider.ClientSlightlyFuture, provider.TestSecret, route)
		_, err = v.Verify(ctx, tok, route)
		wantReason(t, err, auth.ReasonNotYetValid, auth.ErrInvalidToken)
	})
	t.Run("route not among the issuer's audiences", func(t *testing.T) {
		v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.Audiences = []string{otherRoute} })
		_, err := v.Verify(ctx, gatewayToken(t, p, route), route)
		wantReason(t, err, auth.ReasonWrongAudience, auth.ErrInvalidToken)
		if _, err := v.Verify(ctx, gatewayToken(t, p, otherRoute), otherRoute); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("two trusted issuers", func(t *testing.T) {
		p2 := oidctest.Start(t)
		v, err := auth.NewVerifier(ctx, []auth.IssuerConfig{{Issuer: p.Issuer}, {Issuer: p2.Issuer}})
		if err != nil {
			t.Fatal(err)
		}
		for _, pp := range []*oidctest.Provider{p, p2} {
			c, err := v.Verify(ctx, gatewayToken(t, pp, route), route)
			if err != nil {
				t.Fatal(err)
			}
			if c.Issuer != pp.Issuer {
				t.Errorf("issuer = %s, want %s", c.Issuer, pp.Issuer)
			}
		}
	})
	t.Run("token cached until it expires", func(t *testing.T) {
		clk := newClock()
		v := verifierFor(t, p, nil, auth.WithClock(clk.Now))
		tok := gatewayToken(t, p, route)
		if _, err := v.Verify(ctx, tok, route); err != nil {
			t.Fatal(err)
		}
		clk.Advance(5*time.Minute + auth.DefaultClockSkew)
		_, err := v.Verify(ctx, tok, route)
		wantReason(t, err, auth.ReasonExpired, auth.ErrInvalidToken)
	})
}

func TestNewVerifierConfigErrors(t *testing.T) {
	ctx := context.Background()
	_, err := auth.NewVerifier(ctx, []auth.IssuerConfig{
		{Issuer: "http://idp.example.com", Algorithms: []string{"HS256", "none", "RS256"}},
		{Issuer: "https://idp2.example.com", Audiences: []string{"HTTPS://MCP.example.com:443/mcp", "urn:x"}, ClockSkew: -time.Second,
			Introspection: &auth.IntrospectionConfig{ClientID: "gw", ClientSecret: "s"}},
		{Issuer: "https://idp3.example.com", Introspection: &auth.IntrospectionConfig{ClientID: "gw"}},
		{Issuer: "https://idp3.example.com"},
	})
	if err == nil {
		t.Fatal("NewVerifier accepted a bad config")
	}
	for _, want := range []string{
		`issuer "http://idp.example.com": https is required`,
		`algorithm "HS256": not allowed`,
		`algorithm "none": not allowed`,
		`not canonical, use "https://mcp.example.com/mcp"`,
		`"urn:x": must be absolute`,
		"clock skew: must not be negative",
		"client ID and client secret are required",
		`issuer "https://idp3.example.com": configured twice`,
		"at most one issuer may introspect",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), `"s"`) {
		t.Error("error shows a secret")
	}

	if _, err := auth.NewVerifier(ctx, nil); err == nil {
		t.Error("no issuers accepted")
	}
	if err := auth.ValidateIssuers([]auth.IssuerConfig{{Issuer: "https://idp.example.com", Algorithms: []string{"HS512"}}}); err == nil || !strings.Contains(err.Error(), "HS512") {
		t.Errorf("ValidateIssuers: %v", err)
	}
	if err := auth.ValidateIssuers([]auth.IssuerConfig{{Issuer: "https://idp.example.com", Audiences: []string{"https://mcp.example.com/mcp"}}}); err != nil {
		t.Errorf("ValidateIssuers(valid): %v", err)
	}
	// An issuer nobody answers for.
	_, err = auth.NewVerifier(ctx, []auth.IssuerConfig{{Issuer: "http://127.0.0.1:1"}},
		auth.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}))
	if err == nil || !strings.Contains(err.Error(), "discovery") {
		t.Errorf("unreachable issuer: %v", err)
	}
}
