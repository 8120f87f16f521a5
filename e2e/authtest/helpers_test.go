package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

const (
	route      = "https://mcp.example.com/mcp"
	otherRoute = "https://other.example.com/mcp"
)

// clock is a settable clock for the verifier, starting at the real time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// verifierFor builds a verifier for one provider; mutate adjusts the issuer
// config.
func verifierFor(t testing.TB, p *oidctest.Provider, mutate func(*auth.IssuerConfig), opts ...auth.Option) *auth.Verifier {
	t.Helper()
	cfg := auth.IssuerConfig{Issuer: p.Issuer, TenantClaim: "tenant"}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := auth.NewVerifier(context.Background(), []auth.IssuerConfig{cfg}, opts...)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

// gatewayToken mints a client_credentials token of the gateway client.
func gatewayToken(t testing.TB, p *oidctest.Provider, resource string, scopes ...string) string {
	t.Helper()
	return p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, resource, scopes...)
}

// wantReason asserts err is an *auth.Error with the reason, wrapping the
// sentinel.
func wantReason(t testing.TB, err error, reason auth.Reason, sentinel error) *auth.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", reason)
	}
	var ae *auth.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *auth.Error", err)
	}
	if ae.Reason != reason {
		t.Fatalf("reason = %s, want %s (error: %v)", ae.Reason, reason, err)
	}
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not wrap %v", err, sentinel)
	}
	return ae
}

// jwks fetches the provider's published keys.
func jwks(t testing.TB, p *oidctest.Provider) jose.JSONWebKeySet {
	t.Helper()
	resp, err := http.Get(p.JWKSURI())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		t.Fatal(err)
	}
	return set
}

// payloadOf decodes the claims of a JWT without verifying it.
func payloadOf(t testing.TB, token string) map[string]any {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func segment(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// forgedClaims are valid-looking claims for the provider, for attack tokens.
func forgedClaims(p *oidctest.Provider) map[string]any {
	now := time.Now().Unix()
	return map[string]any{
		"iss": p.Issuer, "sub": "mallory", "aud": route, "client_id": "mallory",
		"scope": "tools:read tools:write", "tenant": "acme",
		"iat": now, "nbf": now, "exp": now + 300, "jti": "forged",
	}
}

// signWith signs claims with a key the attacker holds, under any header.
func signWith(t testing.TB, alg jose.SignatureAlgorithm, key any, kid, typ string, claims map[string]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType(jose.ContentType(typ))
	if kid != "" {
		opts = opts.WithHeader(jose.HeaderKey("kid"), kid)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	attackerKeyOnce sync.Once
	attackerKey     *rsa.PrivateKey
)

func attackerRSA(t testing.TB) *rsa.PrivateKey {
	attackerKeyOnce.Do(func() {
		var err error
		attackerKey, err = rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
	})
	return attackerKey
}
