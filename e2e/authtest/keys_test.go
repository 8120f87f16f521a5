package auth_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/mcpgate/mcpgate/auth"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
)

func randomKid(t testing.TB) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "kid-" + hex.EncodeToString(b)
}

// TestUnknownKidFlood: tokens with random kids (signed by an attacker key)
// make the verifier fetch the JWKS at most once per MinJWKSRefresh,
// counted by the provider itself.
func TestUnknownKidFlood(t *testing.T) {
	p := oidctest.Start(t)
	clk := newClock()
	v := verifierFor(t, p, func(c *auth.IssuerConfig) { c.MinJWKSRefresh = time.Minute }, auth.WithClock(clk.Now))
	ctx := context.Background()
	valid := gatewayToken(t, p, route)

	const n = 200
	tokens := make([]string, 0, 2*n)
	for range 2 * n {
		tokens = append(tokens, signWith(t, jose.RS256, attackerRSA(t), randomKid(t), "at+jwt", forgedClaims(p)))
	}
	flood := func(batch []string) {
		var wg sync.WaitGroup
		for _, tok := range batch {
			wg.Go(func() {
				_, err := v.Verify(ctx, tok, route)
				wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken)
			})
		}
		wg.Wait()
	}

	before := p.Stats(t).JWKSRequests
	// Within MinJWKSRefresh of the fetch NewVerifier made: no fetch at all.
	flood(tokens[:n])
	if got := p.Stats(t).JWKSRequests - before; got != 0 {
		t.Errorf("JWKS fetched %d times within the minimum interval, want 0", got)
	}
	// The interval has passed: the whole flood costs one fetch.
	clk.Advance(time.Minute + time.Second)
	flood(tokens[n:])
	if got := p.Stats(t).JWKSRequests - before; got != 1 {
		t.Errorf("JWKS fetched %d times for %d unknown kids, want 1", got, n)
	}
	// Known keys keep working without any fetch.
	if _, err := v.Verify(ctx, valid, route); err != nil {
		t.Fatalf("valid token during the flood: %v", err)
	}
	if got := p.Stats(t).JWKSRequests - before; got != 1 {
		t.Errorf("JWKS fetched %d times, want 1", got)
	}
}

// TestKeyRotation: a token stays valid (from the cache, without its
// signature being checked again) while its key is published, and is
// refused once a JWKS refresh shows the key is gone.
func TestKeyRotation(t *testing.T) {
	p := oidctest.Start(t)
	clk := newClock()
	v := verifierFor(t, p, func(c *auth.IssuerConfig) {
		c.MinJWKSRefresh = time.Minute
		c.JWKSMaxAge = 2 * time.Minute
	}, auth.WithClock(clk.Now))
	ctx := context.Background()
	verify := func(tok string) error { _, err := v.Verify(ctx, tok, route); return err }

	tok1 := gatewayToken(t, p, route)
	if err := verify(tok1); err != nil {
		t.Fatal(err)
	}

	// Rotation with a grace period: the old key stays published.
	p.Rotate(t, false)
	tok2 := gatewayToken(t, p, route)
	err := verify(tok2)
	wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken) // refresh not allowed yet
	clk.Advance(time.Minute + time.Second)
	if err := verify(tok2); err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if err := verify(tok1); err != nil {
		t.Fatalf("token of the previous key during the grace period: %v", err)
	}

	// Rotation that retires generation 2: tok2's key (and tok1's, gone
	// already) leave the JWKS.
	p.Rotate(t, true)
	if err := verify(tok2); err != nil {
		t.Fatalf("cached token before the verifier refreshed: %v", err)
	}
	clk.Advance(time.Minute + time.Second)
	tok3 := gatewayToken(t, p, route)
	if err := verify(tok3); err != nil { // unknown kid: refresh
		t.Fatalf("token of the newest key: %v", err)
	}
	err = verify(tok2)
	wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken)
	err = verify(tok1)
	wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken)

	// Without any unknown kid, an old JWKS is refreshed in the background.
	p.Rotate(t, true)
	if err := verify(tok3); err != nil {
		t.Fatalf("cached: %v", err)
	}
	clk.Advance(2*time.Minute + time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := verify(tok3)
		if err != nil {
			wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("token of a retired key still accepted after the JWKS max age")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestProviderDown: with the provider gone, cached tokens keep working, and
// an unknown kid is "unavailable" (503), not "invalid".
func TestProviderDown(t *testing.T) {
	p := oidctest.Start(t)
	clk := newClock()
	v := verifierFor(t, p, nil, auth.WithClock(clk.Now))
	ctx := context.Background()
	tok := gatewayToken(t, p, route)
	if _, err := v.Verify(ctx, tok, route); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if _, err := v.Verify(ctx, tok, route); err != nil {
		t.Fatalf("cached token with the provider down: %v", err)
	}
	clk.Advance(auth.DefaultMinJWKSRefresh + time.Second)
	forged := signWith(t, jose.RS256, attackerRSA(t), randomKid(t), "at+jwt", forgedClaims(p))
	_, err := v.Verify(ctx, forged, route)
	ae := wantReason(t, err, auth.ReasonUnavailable, auth.ErrUnavailable)
	if ae.StatusCode() != 503 {
		t.Errorf("status = %d, want 503", ae.StatusCode())
	}
	// The failed fetch counts against the interval: no retry storm.
	_, err = v.Verify(ctx, signWith(t, jose.RS256, attackerRSA(t), randomKid(t), "at+jwt", forgedClaims(p)), route)
	wantReason(t, err, auth.ReasonUnknownKey, auth.ErrInvalidToken)
}
