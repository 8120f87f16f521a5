package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// offlineVerifier is a Verifier over a key set filled by hand, for fuzzing
// the parsing and checking paths without a provider (its JWKS URL answers
// nothing, and the refresh interval is never reached).
func offlineVerifier(t testing.TB, key jose.JSONWebKey) *Verifier {
	t.Helper()
	now := time.Now()
	s := settings{
		client: &http.Client{Timeout: time.Millisecond},
		now:    func() time.Time { return now },
		log:    slog.New(slog.DiscardHandler),
	}
	v := &Verifier{byIss: map[string]*issuer{}, algs: map[string]bool{}, cache: newTokenCache(100), now: s.now, log: s.log}
	cfg := IssuerConfig{Issuer: "https://idp.example.com", TenantClaim: "tenant", MinJWKSRefresh: time.Hour}.withDefaults()
	iss, err := v.newIssuer(cfg, "http://127.0.0.1:1/keys", "", s)
	if err != nil {
		t.Fatal(err)
	}
	iss.keys.keys = []jose.JSONWebKey{key.Public()}
	iss.keys.kids = map[string]bool{key.KeyID: true}
	iss.keys.lastAttempt.Store(now.UnixNano())
	iss.keys.fetchedAt.Store(now.UnixNano())
	v.issuers = []*issuer{iss}
	v.byIss[cfg.Issuer] = iss
	for a := range iss.algs {
		v.algs[a] = true
	}
	return v
}

func FuzzVerify(f *testing.F) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	key := jose.JSONWebKey{Key: priv, KeyID: "k1", Algorithm: "ES256", Use: "sig"}
	v := offlineVerifier(f, key)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		f.Fatal(err)
	}
	now := time.Now().Unix()
	payload, _ := json.Marshal(map[string]any{
		"iss": "https://idp.example.com", "sub": "fuzz", "aud": "https://mcp.example.com/mcp",
		"exp": now + 600, "iat": now, "nbf": now, "scope": "a b", "tenant": "t", "client_id": "c",
	})
	jws, err := signer.Sign(payload)
	if err != nil {
		f.Fatal(err)
	}
	valid, _ := jws.CompactSerialize()
	if _, err := v.Verify(context.Background(), valid, "https://mcp.example.com/mcp"); err != nil {
		f.Fatalf("seed token: %v", err)
	}
	for _, s := range []string{valid, valid[:len(valid)-2], "a.b.c", "eyJhbGciOiJub25lIn0.e30.", "e30.e30.e30", "..", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		c, err := v.Verify(context.Background(), raw, "https://mcp.example.com/mcp")
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) || c != nil {
				t.Fatalf("Verify(%q) = %v, %v", raw, c, err)
			}
			if ae.Reason == ReasonUnavailable {
				t.Fatalf("Verify(%q) went to the network: %v", raw, err)
			}
			return
		}
		if c.Subject != "fuzz" || c.Tenant != "t" {
			t.Fatalf("Verify(%q) accepted claims %+v", raw, c)
		}
	})
}
