package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// TestUpstreamTokenExchangeProvider runs the RFC 8693 exchange Source
// against the e2e OpenID provider process: the exchanged token is the
// caller's (sub), for the upstream (aud), never another user's, cached per
// principal, refetched after expiry and refused without fallback.
func TestUpstreamTokenExchangeProvider(t *testing.T) {
	const upstream = "https://upstream.example.com/mcp"
	pc := provider.DefaultConfig()
	pc.Clients = append(pc.Clients,
		provider.Client{ID: "short", Secret: "short-secret", TokenLifetime: provider.DurationPtr(3 * time.Second),
			GrantTypes: []string{provider.GrantTokenExchange}},
		provider.Client{ID: "narrow", Secret: "narrow-secret", Resources: []string{"https://other.example.com/mcp"},
			GrantTypes: []string{provider.GrantTokenExchange}},
	)
	p := oidctest.Start(t, oidctest.WithConfig(pc))
	ctx := context.Background()

	userToken := func(user string) string {
		tr, err := p.RunCodeFlow(ctx, oidctest.CodeFlow{
			ClientID: provider.ClientPublic, RedirectURI: provider.RedirectURI, LoginHint: user,
			Scopes: []string{"tools:read"}, Resources: []string{"https://mcp.example.com/mcp"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return tr.AccessToken
	}
	newExchange := func(client, secret string) *upstreamauth.Exchange {
		e, err := upstreamauth.NewExchange(upstreamauth.ExchangeConfig{
			TokenURL: p.TokenEndpoint(), ClientID: client, ClientSecret: secret,
			Audience: "upstream-a", Resource: upstream, Scopes: []string{"tools:read"},
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	header := func(e *upstreamauth.Exchange, c *upstreamauth.Caller) string {
		t.Helper()
		h, err := e.Header(ctx, c)
		if err != nil {
			t.Fatalf("Header(%s): %v", c.Subject, err)
		}
		return strings.TrimPrefix(h["authorization"][0], "Bearer ")
	}
	// introspect checks the token the upstream would receive.
	introspect := func(tok, wantSub string) {
		t.Helper()
		in, err := p.Introspect(ctx, provider.ClientGateway, provider.ClientGatewaySecret, tok)
		if err != nil {
			t.Fatal(err)
		}
		aud, _ := in["aud"].([]any)
		if in["active"] != true || in["sub"] != wantSub || len(aud) != 2 || aud[0] != "upstream-a" || aud[1] != upstream {
			t.Errorf("exchanged token of %s: %v", wantSub, in)
		}
	}
	exchanges := func() int64 { return p.Stats(t).TokenExchanges }

	aliceTok, bobTok := userToken(provider.UserAlice), userToken(provider.UserBob)
	alice := &upstreamauth.Caller{Tenant: provider.TenantAlice, Subject: provider.UserAlice, Rights: []string{"tools:read"}, AccessToken: aliceTok}
	bob := &upstreamauth.Caller{Tenant: provider.TenantBob, Subject: provider.UserBob, Rights: []string{"tools:read"}, AccessToken: bobTok}

	e := newExchange(provider.ClientExchanger, provider.ClientExchangerSecret)
	a, b := header(e, alice), header(e, bob)
	if a == b || a == aliceTok || b == bobTok {
		t.Fatalf("alice and bob share a token, or a subject token was passed through")
	}
	introspect(a, provider.UserAlice)
	introspect(b, provider.UserBob)

	t.Run("same user reuses, concurrently one exchange", func(t *testing.T) {
		before := exchanges()
		if header(e, alice) != a {
			t.Errorf("alice's second call exchanged again")
		}
		carol := &upstreamauth.Caller{Tenant: provider.TenantAlice, Subject: provider.UserAlice, Rights: []string{"tools:read", "tools:write"}, AccessToken: aliceTok}
		var wg sync.WaitGroup
		got := make([]string, 16)
		for i := range got {
			wg.Go(func() {
				if h, err := e.Header(ctx, carol); err == nil {
					got[i] = h["authorization"][0]
				}
			})
		}
		wg.Wait()
		for _, g := range got {
			if g == "" || g != got[0] || g == "Bearer "+a {
				t.Fatalf("concurrent callers of one key got different tokens, or other rights reused alice's")
			}
		}
		if n := exchanges() - before; n != 1 {
			t.Errorf("exchanges = %d, want 1", n)
		}
	})

	t.Run("refused token is exchanged again once", func(t *testing.T) {
		before := exchanges()
		if !e.Refused(alice) {
			t.Fatal("Refused = false")
		}
		if again := header(e, alice); again == a {
			t.Errorf("the refused token came back")
		} else {
			introspect(again, provider.UserAlice)
		}
		if n := exchanges() - before; n != 1 {
			t.Errorf("exchanges = %d, want 1", n)
		}
	})

	t.Run("expiry", func(t *testing.T) {
		short := newExchange("short", "short-secret")
		first := header(short, alice)
		if header(short, alice) != first {
			t.Errorf("not reused within its lifetime")
		}
		time.Sleep(3 * time.Second)
		if header(short, alice) == first {
			t.Errorf("reused after expiry")
		}
	})

	t.Run("provider refusal", func(t *testing.T) {
		for _, tc := range []struct {
			name, client, secret, code string
		}{
			{"client without the grant", provider.ClientGateway, provider.ClientGatewaySecret, "unauthorized_client"},
			{"audience not allowed", "narrow", "narrow-secret", "invalid_target"},
			{"wrong secret", provider.ClientExchanger, "nope", "invalid_client"},
		} {
			h, err := newExchange(tc.client, tc.secret).Header(ctx, alice)
			if h != nil || !errors.Is(err, upstreamauth.ErrRefused) || !strings.Contains(err.Error(), tc.code) {
				t.Errorf("%s: Header = %v, %v; want ErrRefused with %s", tc.name, h, err, tc.code)
			}
			if err != nil && (strings.Contains(err.Error(), aliceTok) || strings.Contains(err.Error(), tc.secret)) {
				t.Errorf("%s: the error leaks a token or the secret: %v", tc.name, err)
			}
		}
		expired := &upstreamauth.Caller{Tenant: "acme", Subject: "x",
			AccessToken: p.MustClientCredentials(t, provider.ClientExpired, provider.TestSecret, "")}
		if _, err := e.Header(ctx, expired); !errors.Is(err, upstreamauth.ErrRefused) || !strings.Contains(err.Error(), "invalid_grant") {
			t.Errorf("expired subject token: %v", err)
		}
	})
}
