package assertion

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	testIssuer   = "https://gw.example.test"
	testAudience = "crm"
)

// clock is a settable time source for tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func testIdentity() Identity {
	return Identity{
		Tenant:         "acme",
		Subject:        "user-42",
		Rights:         []string{"crm.write", "crm.read"},
		Connection:     "gt_7f3a",
		Client:         "claude-desktop",
		CredentialKind: "gateway_token",
	}
}

func mustKeySet(t testing.TB, alg string) *KeySet {
	t.Helper()
	ks, err := GenerateKeySet(alg)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func mustSigner(t testing.TB, ks *KeySet, now func() time.Time) *Signer {
	t.Helper()
	s, err := NewSigner(ks, SignerOptions{Issuer: testIssuer, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func staticVerifier(t testing.TB, jwks []byte, now func() time.Time) *Verifier {
	t.Helper()
	v, err := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, Keys: jwks, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// jwksServer serves whatever body() returns at JWKSPath and counts requests.
type jwksServer struct {
	*httptest.Server
	hits   atomic.Int64
	status atomic.Int64 // 0 means 200
}

func newJWKSServer(t testing.TB, body func() []byte) *jwksServer {
	t.Helper()
	js := &jwksServer{}
	js.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		js.hits.Add(1)
		if r.URL.Path != JWKSPath {
			http.NotFound(w, r)
			return
		}
		if st := js.status.Load(); st != 0 {
			http.Error(w, "down", int(st))
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body())
	}))
	t.Cleanup(js.Close)
	return js
}

func (js *jwksServer) URL() string { return js.Server.URL + JWKSPath }

// forge signs an arbitrary claims object with key under alg, with the given
// extra protected headers (typ, kid overrides, jwk...). It is how the tests
// build tokens the Signer would never produce.
func forge(t testing.TB, alg jose.SignatureAlgorithm, key any, headers map[jose.HeaderKey]any, payload any) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	for k, v := range headers {
		opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	switch p := payload.(type) {
	case []byte:
		b = p
	default:
		if b, err = json.Marshal(p); err != nil {
			t.Fatal(err)
		}
	}
	jws, err := s.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// validClaims is a claims object that verifies at now for testIssuer and
// testAudience.
func validClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": testIssuer, "sub": "user-42", "aud": testAudience,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Minute).Unix(),
		"jti": "j1", "tenant": "acme", "rights": []string{"crm.read"},
		"connection": "gt_1", "credential_kind": "gateway_token",
	}
}

// signingJWK returns the private signing key of ks (first key).
func signingJWK(ks *KeySet) jose.JSONWebKey { return ks.keys[0] }

func wantReason(t testing.TB, err error, want Reason) {
	t.Helper()
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("want *Error with reason %s, got %v", want, err)
	}
	if ae.Reason != want {
		t.Fatalf("reason = %s (%v), want %s", ae.Reason, err, want)
	}
}

func verifyReason(t testing.TB, v *Verifier, raw string, want Reason) {
	t.Helper()
	id, err := v.Verify(context.Background(), raw)
	if err == nil {
		t.Fatalf("token accepted (identity %+v); want %s", id, want)
	}
	wantReason(t, err, want)
	if raw != "" {
		for _, part := range strings.Split(raw, ".") {
			if len(part) > 8 && strings.Contains(err.Error(), part) {
				t.Fatalf("error message echoes the token: %v", err)
			}
		}
	}
}
