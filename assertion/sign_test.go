package assertion

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	for _, alg := range []string{AlgEdDSA, AlgES256} {
		t.Run(alg, func(t *testing.T) {
			clk := newClock()
			ks := mustKeySet(t, alg)
			s := mustSigner(t, ks, clk.Now)
			v := staticVerifier(t, s.JWKS(), clk.Now)

			in := testIdentity()
			in.Rights = []string{"crm.write", "crm.read", "crm.write"}
			tok, err := s.Sign(in, testAudience)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Verify(context.Background(), tok)
			if err != nil {
				t.Fatal(err)
			}
			want := Identity{
				Issuer: testIssuer, Audience: testAudience,
				Tenant: "acme", Subject: "user-42", Rights: []string{"crm.read", "crm.write"},
				Connection: "gt_7f3a", Client: "claude-desktop", CredentialKind: "gateway_token",
				ID: got.ID, IssuedAt: clk.Now(), Expiry: clk.Now().Add(DefaultTTL),
			}
			if got.ID == "" || !identityEqual(*got, want) {
				t.Fatalf("got  %+v\nwant %+v", *got, want)
			}

			// The wire format: protected header and claim names.
			jws, err := jose.ParseSignedCompact(tok, allowedAlgs)
			if err != nil {
				t.Fatal(err)
			}
			h := jws.Signatures[0].Header
			if h.Algorithm != alg || h.KeyID != ks.SigningKeyID() || h.ExtraHeaders[jose.HeaderType] != TokenType || h.JSONWebKey != nil {
				t.Fatalf("header: alg %s kid %s typ %v jwk %v", h.Algorithm, h.KeyID, h.ExtraHeaders[jose.HeaderType], h.JSONWebKey)
			}
			var m map[string]any
			if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &m); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"iss", "sub", "aud", "iat", "nbf", "exp", "jti", "tenant", "rights", "connection", "client", "credential_kind"} {
				if _, ok := m[name]; !ok {
					t.Errorf("claim %s missing", name)
				}
			}
			if aud, ok := m["aud"].(string); !ok || aud != testAudience {
				t.Errorf("aud = %#v; want the single string %q", m["aud"], testAudience)
			}
			if len(m) != 12 {
				t.Errorf("unexpected claims: %v", m)
			}
		})
	}
}

func identityEqual(a, b Identity) bool {
	return a.Issuer == b.Issuer && a.Audience == b.Audience && a.Tenant == b.Tenant &&
		a.Subject == b.Subject && slices.Equal(a.Rights, b.Rights) && a.Connection == b.Connection &&
		a.Client == b.Client && a.CredentialKind == b.CredentialKind && a.ID == b.ID &&
		a.IssuedAt.Equal(b.IssuedAt) && a.Expiry.Equal(b.Expiry)
}

func TestSignOmitsEmptyClientAndKeepsEmptyRights(t *testing.T) {
	clk := newClock()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	in := testIdentity()
	in.Client, in.Rights = "", nil
	tok, err := s.Sign(in, testAudience)
	if err != nil {
		t.Fatal(err)
	}
	jws, _ := jose.ParseSignedCompact(tok, allowedAlgs)
	payload := string(jws.UnsafePayloadWithoutVerification())
	if strings.Contains(payload, `"client"`) || !strings.Contains(payload, `"rights":[]`) {
		t.Fatalf("payload %s: want no client and rights []", payload)
	}
	id, err := staticVerifier(t, s.JWKS(), clk.Now).Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.Client != "" || id.Rights == nil || len(id.Rights) != 0 {
		t.Fatalf("identity %+v", id)
	}
}

func TestSignRefusesIncompleteIdentity(t *testing.T) {
	s := mustSigner(t, mustKeySet(t, ""), nil)
	for name, mutate := range map[string]func(*Identity, *string){
		"audience":   func(_ *Identity, aud *string) { *aud = "" },
		"tenant":     func(id *Identity, _ *string) { id.Tenant = "" },
		"subject":    func(id *Identity, _ *string) { id.Subject = "" },
		"connection": func(id *Identity, _ *string) { id.Connection = "" },
	} {
		id, aud := testIdentity(), testAudience
		mutate(&id, &aud)
		if _, err := s.Sign(id, aud); !errors.Is(err, ErrIncompleteIdentity) {
			t.Errorf("empty %s: err = %v, want ErrIncompleteIdentity", name, err)
		}
	}
}

func TestNewSignerRejects(t *testing.T) {
	ks := mustKeySet(t, "")
	for name, c := range map[string]struct {
		ks *KeySet
		o  SignerOptions
	}{
		"nil key set":  {nil, SignerOptions{Issuer: testIssuer}},
		"no issuer":    {ks, SignerOptions{}},
		"TTL too long": {ks, SignerOptions{Issuer: testIssuer, TTL: 11 * time.Minute}},
		"negative TTL": {ks, SignerOptions{Issuer: testIssuer, TTL: -time.Second}},
		"TTL under 1s": {ks, SignerOptions{Issuer: testIssuer, TTL: time.Millisecond}},
	} {
		if _, err := NewSigner(c.ks, c.o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := NewSigner(ks, SignerOptions{Issuer: testIssuer, TTL: MaxTTL})
	if err != nil || s.ttl != MaxTTL {
		t.Fatalf("TTL = MaxTTL refused: %v", err)
	}
}

func TestSignCache(t *testing.T) {
	clk := newClock()
	ks := mustKeySet(t, AlgEdDSA)
	s := mustSigner(t, ks, clk.Now)
	sign := func(id Identity, aud string) string {
		t.Helper()
		tok, err := s.Sign(id, aud)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	id := testIdentity()
	first := sign(id, testAudience)
	if again := sign(id, testAudience); again != first {
		t.Fatal("identical identity signed twice: want the cached assertion")
	}
	reordered := id
	reordered.Rights = []string{"crm.read", "crm.write", "crm.read"}
	if sign(reordered, testAudience) != first {
		t.Fatal("the same rights in another order missed the cache")
	}

	// Every field of the identity and the audience is part of the key.
	variants := map[string]func(*Identity, *string){
		"audience":        func(_ *Identity, a *string) { *a = "billing" },
		"tenant":          func(i *Identity, _ *string) { i.Tenant = "other" },
		"subject":         func(i *Identity, _ *string) { i.Subject = "user-43" },
		"rights":          func(i *Identity, _ *string) { i.Rights = []string{"crm.read"} },
		"no rights":       func(i *Identity, _ *string) { i.Rights = nil },
		"connection":      func(i *Identity, _ *string) { i.Connection = "gt_other" },
		"client":          func(i *Identity, _ *string) { i.Client = "" },
		"credential kind": func(i *Identity, _ *string) { i.CredentialKind = "oauth" },
		"field boundary":  func(i *Identity, _ *string) { i.Tenant, i.Subject = "acmeu", "ser-42" },
	}
	for name, mutate := range variants {
		other, aud := testIdentity(), testAudience
		mutate(&other, &aud)
		if sign(other, aud) == first {
			t.Errorf("%s changed but the cached assertion came back", name)
		}
	}
	cacheKey := func(kid, aud, tenant, subject, conn, client, kind string, rights []string) string {
		return string(appendCacheKey(nil, kid, aud, tenant, subject, conn, client, kind, rights))
	}
	if cacheKey("k", "a", "ab", "c", "d", "", "", nil) == cacheKey("k", "a", "a", "bc", "d", "", "", nil) {
		t.Error("cache keys of distinct identities collide")
	}
	if cacheKey("k", "a", "t", "s", "c", "", "", []string{"a,b"}) == cacheKey("k", "a", "t", "s", "c", "", "", []string{"a", "b"}) {
		t.Error("cache keys of distinct rights collide")
	}

	// Reused while more than half the lifetime remains, then signed again.
	clk.Add(DefaultTTL/2 - time.Second)
	if sign(id, testAudience) != first {
		t.Fatal("assertion with more than half its lifetime left was not reused")
	}
	clk.Add(time.Second)
	fresh := sign(id, testAudience)
	if fresh == first {
		t.Fatal("assertion at half its lifetime was reused")
	}

	// A new key set: never the old assertion, and the new kid signs.
	rot, err := ks.Rotate("")
	if err != nil {
		t.Fatal(err)
	}
	s.SetKeys(rot)
	afterSwap := sign(id, testAudience)
	if afterSwap == fresh {
		t.Fatal("cached assertion survived SetKeys")
	}
	jws, _ := jose.ParseSignedCompact(afterSwap, allowedAlgs)
	if kid := jws.Signatures[0].Header.KeyID; kid != rot.SigningKeyID() || s.SigningKeyID() != kid {
		t.Fatalf("kid after SetKeys = %s, want %s", kid, rot.SigningKeyID())
	}
	if _, err := staticVerifier(t, s.JWKS(), clk.Now).Verify(context.Background(), fresh); err != nil {
		t.Fatalf("assertion of the old key no longer verifies with the new JWKS: %v", err)
	}
	s.SetKeys(nil) // ignored
	if s.SigningKeyID() != rot.SigningKeyID() {
		t.Fatal("SetKeys(nil) changed the keys")
	}
}

func TestSignCacheClockGoingBack(t *testing.T) {
	clk := newClock()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	first, _ := s.Sign(testIdentity(), testAudience)
	clk.Add(-time.Hour)
	again, _ := s.Sign(testIdentity(), testAudience)
	if again == first {
		t.Fatal("assertion issued in the future (after a clock step back) was reused")
	}
}

func TestSignCacheBounded(t *testing.T) {
	clk := newClock()
	s, err := NewSigner(mustKeySet(t, ""), SignerOptions{Issuer: testIssuer, Now: clk.Now, CacheSize: 16})
	if err != nil {
		t.Fatal(err)
	}
	id := testIdentity()
	for i := range 200 {
		id.Subject = fmt.Sprint("user-", i)
		if _, err := s.Sign(id, testAudience); err != nil {
			t.Fatal(err)
		}
		s.mu.RLock()
		n := len(s.cache)
		s.mu.RUnlock()
		if n > 16 {
			t.Fatalf("cache holds %d entries, cap 16", n)
		}
	}
	// Entries past their reuse window go first.
	clk.Add(DefaultTTL)
	id.Subject = "late"
	_, _ = s.Sign(id, testAudience)
	s.mu.RLock()
	n := len(s.cache)
	s.mu.RUnlock()
	if n != 1 {
		t.Fatalf("after expiry sweep the cache holds %d entries, want 1", n)
	}

	off, err := NewSigner(mustKeySet(t, ""), SignerOptions{Issuer: testIssuer, Now: clk.Now, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := off.Sign(testIdentity(), testAudience)
	b, _ := off.Sign(testIdentity(), testAudience)
	if a == b {
		t.Fatal("cache disabled but the assertion was reused")
	}
}

// TestSignConcurrent runs Sign, SetKeys and JWKS together; run with -race.
func TestSignConcurrent(t *testing.T) {
	ks := mustKeySet(t, AlgEdDSA)
	s, err := NewSigner(ks, SignerOptions{Issuer: testIssuer, CacheSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	// Every key that will ever sign, so the verifier knows them all.
	sets := []*KeySet{ks}
	for range 3 {
		next, err := sets[len(sets)-1].Rotate(AlgES256)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, next)
	}
	v := staticVerifier(t, sets[len(sets)-1].PublicJWKS(), nil)

	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 16 {
		wg.Go(func() {
			id := testIdentity()
			for i := range 200 {
				id.Subject = fmt.Sprint("user-", (g*7+i)%100)
				tok, err := s.Sign(id, testAudience)
				if err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					if _, err := v.Verify(context.Background(), tok); err != nil {
						errs <- err
						return
					}
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 20 {
			s.SetKeys(sets[i%len(sets)])
			_ = s.JWKS()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
