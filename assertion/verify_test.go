package assertion

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
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
)

func TestRotationWithRemoteJWKS(t *testing.T) {
	clk := newClock()
	ks := mustKeySet(t, AlgEdDSA)
	s := mustSigner(t, ks, clk.Now)
	srv := newJWKSServer(t, s.JWKS)
	v, err := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL(), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	oldTok, _ := s.Sign(testIdentity(), testAudience)
	if _, err := v.Verify(ctx, oldTok); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times for the first token, want 1", n)
	}

	clk.Add(DefaultMinRefreshInterval) // the verifier may fetch again
	rot, err := ks.Rotate(AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	s.SetKeys(rot)
	newTok, _ := s.Sign(testIdentity(), testAudience)
	if newTok == oldTok {
		t.Fatal("same assertion after rotation")
	}
	id, err := v.Verify(ctx, newTok)
	if err != nil {
		t.Fatalf("token of the new key: %v", err)
	}
	if id.Tenant != "acme" {
		t.Fatalf("identity %+v", id)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (one refresh for the new kid)", n)
	}
	if _, err := v.Verify(ctx, oldTok); err != nil {
		t.Fatalf("token of the old key after rotation: %v", err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("known kid caused a fetch (%d)", n)
	}
}

func TestStagedRotationNeedsNoRefresh(t *testing.T) {
	clk := newClock()
	ks := mustKeySet(t, AlgEdDSA)
	staged, kid, err := ks.Stage(AlgEdDSA)
	if err != nil {
		t.Fatal(err)
	}
	s := mustSigner(t, staged, clk.Now)
	srv := newJWKSServer(t, s.JWKS)
	v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL(), Now: clk.Now})
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	promoted, _ := staged.Promote(kid)
	s.SetKeys(promoted)
	tok, _ := s.Sign(testIdentity(), testAudience)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("promoted key needed a JWKS fetch (%d)", n)
	}
}

func TestUnknownKeyFloodIsRateLimited(t *testing.T) {
	clk := newClock()
	ks := mustKeySet(t, AlgEdDSA)
	s := mustSigner(t, ks, clk.Now)
	srv := newJWKSServer(t, s.JWKS)
	v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL(), Now: clk.Now})
	if err := v.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Tokens signed by a key the gateway never published, each with its own kid.
	stranger := signingJWK(mustKeySet(t, AlgEdDSA))
	tokenWithKID := func(kid string) string {
		k := stranger
		k.KeyID = kid
		return forge(t, jose.EdDSA, k, map[jose.HeaderKey]any{jose.HeaderType: TokenType}, validClaims(clk.Now()))
	}
	verifyReason(t, v, tokenWithKID(stranger.KeyID), ReasonUnknownKey)
	if n := srv.hits.Load(); n != 1 {
		t.Fatalf("unknown kid right after a fetch caused a fetch (%d)", n)
	}

	clk.Add(DefaultMinRefreshInterval)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := v.Verify(context.Background(), tokenWithKID(randomID(8)+string(rune('a'+i%26))))
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != ReasonUnknownKey {
				t.Errorf("concurrent unknown kid: %v", err)
			}
		})
	}
	wg.Wait()
	for range 50 {
		verifyReason(t, v, tokenWithKID(randomID(8)), ReasonUnknownKey)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("100 unknown kids in one interval caused %d fetches in all, want 2", n)
	}
	clk.Add(DefaultMinRefreshInterval - time.Second)
	verifyReason(t, v, tokenWithKID("x"), ReasonUnknownKey)
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("fetch before the interval ended (%d)", n)
	}
	clk.Add(time.Second)
	verifyReason(t, v, tokenWithKID("y"), ReasonUnknownKey)
	if n := srv.hits.Load(); n != 3 {
		t.Fatalf("no fetch once the interval ended (%d)", n)
	}

	// Legitimate tokens are unaffected by the flood.
	tok, _ := s.Sign(testIdentity(), testAudience)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}

func TestJWKSMaxAgeAndOutage(t *testing.T) {
	clk := newClock()
	ks := mustKeySet(t, AlgES256)
	s := mustSigner(t, ks, clk.Now)
	srv := newJWKSServer(t, s.JWKS)
	v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL(), Now: clk.Now})
	ctx := context.Background()
	verify := func() error {
		tok, err := s.Sign(testIdentity(), testAudience)
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(ctx, tok)
		return err
	}
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	clk.Add(DefaultMaxAge)
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Fatalf("JWKS older than MaxAge not fetched again (%d fetches)", n)
	}

	// The JWKS endpoint goes down: the last good set serves until it is
	// twice MaxAge old, then verification fails closed.
	srv.status.Store(http.StatusBadGateway)
	clk.Add(DefaultMaxAge)
	if err := verify(); err != nil {
		t.Fatalf("stale set not used during an outage: %v", err)
	}
	clk.Add(DefaultMaxAge)
	err := verify()
	wantReason(t, err, ReasonKeysUnavailable)
	var ae *Error
	if !errors.As(err, &ae) || !strings.Contains(ae.Err.Error(), "502") {
		t.Fatalf("cause of %v does not name the HTTP status", err)
	}

	srv.status.Store(0)
	clk.Add(DefaultMinRefreshInterval)
	if err := verify(); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
}

func TestJWKSUnavailable(t *testing.T) {
	clk := newClock()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	tok, _ := s.Sign(testIdentity(), testAudience)
	ctx := context.Background()

	for name, body := range map[string]func() []byte{
		"not JSON":            func() []byte { return []byte("<html>") },
		"no usable key":       func() []byte { return []byte(`{"keys":[{"kty":"RSA","kid":"r","n":"AQAB","e":"AQAB"}]}`) },
		"private key exposed": func() []byte { b, _ := mustKeySet(t, "").MarshalPrivate(); return b },
	} {
		t.Run(name, func(t *testing.T) {
			srv := newJWKSServer(t, body)
			v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL(), Now: clk.Now})
			if err := v.Refresh(ctx); err == nil {
				t.Fatal("Refresh succeeded")
			}
			verifyReason(t, v, tok, ReasonKeysUnavailable)
		})
	}
	t.Run("404", func(t *testing.T) {
		srv := newJWKSServer(t, s.JWKS)
		v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.Server.URL + "/elsewhere", Now: clk.Now})
		verifyReason(t, v, tok, ReasonKeysUnavailable)
		verifyReason(t, v, tok, ReasonKeysUnavailable)
		if n := srv.hits.Load(); n != 1 {
			t.Fatalf("failed fetch retried within the interval (%d)", n)
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		srv := newJWKSServer(t, s.JWKS)
		url := srv.URL()
		srv.Close()
		v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: url, Now: clk.Now})
		verifyReason(t, v, tok, ReasonKeysUnavailable)
	})
}

func TestVerifyTimes(t *testing.T) {
	clk := newClock()
	t0 := clk.Now()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	tok, _ := s.Sign(testIdentity(), testAudience) // iat = nbf = t0, exp = t0 + 60s
	v := staticVerifier(t, s.JWKS(), clk.Now)
	ctx := context.Background()
	at := func(tm time.Time) error {
		clk.Set(tm)
		_, err := v.Verify(ctx, tok)
		return err
	}
	exp := t0.Add(DefaultTTL)
	if err := at(exp.Add(DefaultLeeway)); err != nil {
		t.Fatalf("at exp + leeway: %v", err)
	}
	wantReason(t, at(exp.Add(DefaultLeeway+time.Second)), ReasonExpired)
	if err := at(t0.Add(-DefaultLeeway)); err != nil {
		t.Fatalf("at nbf - leeway: %v", err)
	}
	wantReason(t, at(t0.Add(-DefaultLeeway-time.Second)), ReasonNotYetValid)

	// iat in the future beyond the leeway, without nbf.
	clk.Set(t0)
	c := validClaims(t0)
	delete(c, "nbf")
	c["iat"] = t0.Add(DefaultLeeway + 5*time.Second).Unix()
	c["exp"] = t0.Add(2 * time.Minute).Unix()
	verifyReason(t, v, forge(t, jose.EdDSA, signingJWK(s.state.Load().ks), map[jose.HeaderKey]any{jose.HeaderType: TokenType}, c), ReasonNotYetValid)

	// A custom leeway; a negative one means none.
	strict, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, Keys: s.JWKS(), Now: clk.Now, Leeway: -1})
	clk.Set(exp.Add(time.Second))
	verifyReason(t, strict, tok, ReasonExpired)
}

func TestVerifyRejects(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	ks := mustKeySet(t, AlgEdDSA)
	key := signingJWK(ks)
	s := mustSigner(t, ks, clk.Now)
	v := staticVerifier(t, s.JWKS(), clk.Now)
	good, _ := s.Sign(testIdentity(), testAudience)
	typ := map[jose.HeaderKey]any{jose.HeaderType: TokenType}
	sign := func(c any) string { return forge(t, jose.EdDSA, key, typ, c) }
	with := func(name string, val any) map[string]any {
		c := validClaims(now)
		if val == nil {
			delete(c, name)
		} else {
			c[name] = val
		}
		return c
	}
	b64 := base64.RawURLEncoding.EncodeToString
	parts := strings.Split(good, ".")

	// alg confusion: HS256 keyed with the public key as the gateway publishes it.
	pub := key.Public()
	pubJSON, _ := pub.MarshalJSON()
	hsRaw := forge(t, jose.HS256, []byte(pub.Key.(ed25519.PublicKey)), map[jose.HeaderKey]any{jose.HeaderType: TokenType, "kid": key.KeyID}, validClaims(now))
	hsJSON := forge(t, jose.HS256, pubJSON, map[jose.HeaderKey]any{jose.HeaderType: TokenType, "kid": key.KeyID}, validClaims(now))
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	rs := forge(t, jose.RS256, jose.JSONWebKey{Key: rsaKey, KeyID: key.KeyID}, typ, validClaims(now))
	none := b64([]byte(`{"alg":"none","typ":"`+TokenType+`","kid":"`+key.KeyID+`"}`)) + "." + parts[1] + "."

	// A signature by another key under the right kid, with that key embedded.
	attacker := signingJWK(mustKeySet(t, AlgEdDSA))
	attackerPub := attacker.Public()
	impostor := attacker
	impostor.KeyID = key.KeyID
	embedded := forge(t, jose.EdDSA, impostor, map[jose.HeaderKey]any{jose.HeaderType: TokenType, "jwk": attackerPub}, validClaims(now))
	if !strings.Contains(embedded, ".") {
		t.Fatal("forge")
	}

	// Tampering.
	var payload map[string]any
	raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(raw, &payload)
	payload["tenant"] = "victim"
	forged, _ := json.Marshal(payload)
	tamperedPayload := parts[0] + "." + b64(forged) + "." + parts[2]
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sig[0] ^= 1
	tamperedSig := parts[0] + "." + parts[1] + "." + b64(sig)
	noKid := forge(t, jose.EdDSA, jose.JSONWebKey{Key: key.Key}, typ, validClaims(now))

	cases := []struct {
		name string
		raw  string
		want Reason
	}{
		{"empty", "", ReasonMissing},
		{"garbage", "garbage", ReasonMalformed},
		{"two parts", "a.b", ReasonMalformed},
		{"four parts", good + ".x", ReasonMalformed},
		{"bad base64", "!!!." + parts[1] + "." + parts[2], ReasonMalformed},
		{"JSON serialization", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, ReasonMalformed},
		{"too large", parts[0] + "." + strings.Repeat("A", MaxTokenSize) + "." + parts[2], ReasonMalformed},
		{"alg none", none, ReasonWrongAlgorithm},
		{"alg none, no signature part", strings.TrimSuffix(none, "."), ReasonMalformed},
		{"HS256 keyed with the raw public key", hsRaw, ReasonWrongAlgorithm},
		{"HS256 keyed with the public JWK", hsJSON, ReasonWrongAlgorithm},
		{"RS256", rs, ReasonWrongAlgorithm},
		{"typ JWT", forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: "JWT"}, validClaims(now)), ReasonWrongType},
		{"typ at+jwt", forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: "at+jwt"}, validClaims(now)), ReasonWrongType},
		{"typ missing", forge(t, jose.EdDSA, key, nil, validClaims(now)), ReasonWrongType},
		{"typ not a string", forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: 1}, validClaims(now)), ReasonWrongType},
		{"typ with a suffix", forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: TokenType + "x"}, validClaims(now)), ReasonWrongType},
		{"no kid", noKid, ReasonUnknownKey},
		{"kid not published", forge(t, jose.EdDSA, attacker, typ, validClaims(now)), ReasonUnknownKey},
		{"embedded jwk ignored", embedded, ReasonBadSignature},
		{"tampered payload", tamperedPayload, ReasonBadSignature},
		{"tampered signature", tamperedSig, ReasonBadSignature},
		{"wrong issuer", sign(with("iss", "https://evil.example")), ReasonWrongIssuer},
		{"no issuer", sign(with("iss", nil)), ReasonWrongIssuer},
		{"wrong audience", sign(with("aud", "billing")), ReasonWrongAudience},
		{"audience list without us", sign(with("aud", []string{"billing", "hr"})), ReasonWrongAudience},
		{"no audience", sign(with("aud", nil)), ReasonWrongAudience},
		{"expired", sign(with("exp", now.Add(-time.Hour).Unix())), ReasonExpired},
		{"not yet valid", sign(with("nbf", now.Add(time.Hour).Unix())), ReasonNotYetValid},
		{"no exp", sign(with("exp", nil)), ReasonInvalidClaims},
		{"no iat", sign(with("iat", nil)), ReasonInvalidClaims},
		{"no tenant", sign(with("tenant", "")), ReasonInvalidClaims},
		{"no subject", sign(with("sub", nil)), ReasonInvalidClaims},
		{"no connection", sign(with("connection", nil)), ReasonInvalidClaims},
		{"rights not an array", sign(with("rights", "crm.read")), ReasonMalformed},
		{"exp not a number", sign(with("exp", "tomorrow")), ReasonMalformed},
		{"payload not JSON", sign([]byte("hello")), ReasonMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { verifyReason(t, v, c.raw, c.want) })
	}

	// Accepted variants.
	for name, raw := range map[string]string{
		"audience list with us": sign(with("aud", []string{"billing", testAudience})),
		"typ with application/": forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: "application/" + TokenType}, validClaims(now)),
		"typ in upper case":     forge(t, jose.EdDSA, key, map[jose.HeaderKey]any{jose.HeaderType: strings.ToUpper(TokenType)}, validClaims(now)),
		"no rights":             sign(with("rights", nil)),
	} {
		if _, err := v.Verify(context.Background(), raw); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A JWKS whose key for a kid is EC while the token says EdDSA (or the key's
// own alg disagrees with its type) must not verify anything.
func TestVerifyAlgorithmMustFitKey(t *testing.T) {
	clk := newClock()
	now := clk.Now()
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	ecPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPub, _ := jose.JSONWebKey{Key: ecPriv.Public(), KeyID: "k1", Algorithm: AlgES256}.MarshalJSON()
	v := staticVerifier(t, []byte(`{"keys":[`+string(ecPub)+`]}`), clk.Now)
	typ := map[jose.HeaderKey]any{jose.HeaderType: TokenType}
	tok := forge(t, jose.EdDSA, jose.JSONWebKey{Key: edPriv, KeyID: "k1"}, typ, validClaims(now))
	verifyReason(t, v, tok, ReasonWrongAlgorithm)

	good := forge(t, jose.ES256, jose.JSONWebKey{Key: ecPriv, KeyID: "k1"}, typ, validClaims(now))
	if _, err := v.Verify(context.Background(), good); err != nil {
		t.Fatal(err)
	}

	// A published key without "alg" takes the one its type implies.
	edPub, _ := jose.JSONWebKey{Key: edPriv.Public(), KeyID: "k2"}.MarshalJSON()
	v2 := staticVerifier(t, []byte(`{"keys":[`+string(edPub)+`]}`), clk.Now)
	if _, err := v2.Verify(context.Background(), forge(t, jose.EdDSA, jose.JSONWebKey{Key: edPriv, KeyID: "k2"}, typ, validClaims(now))); err != nil {
		t.Fatal(err)
	}
}

func TestNewVerifierRejects(t *testing.T) {
	pub := mustKeySet(t, "").PublicJWKS()
	priv, _ := mustKeySet(t, "").MarshalPrivate()
	ecPub, _ := jose.JSONWebKey{Key: must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)).Public(), KeyID: "d"}.MarshalJSON()
	for name, o := range map[string]VerifierOptions{
		"no issuer":             {Audience: testAudience, Keys: pub},
		"no audience":           {Issuer: testIssuer, Keys: pub},
		"no keys":               {Issuer: testIssuer, Audience: testAudience},
		"both keys and URL":     {Issuer: testIssuer, Audience: testAudience, Keys: pub, JWKSURL: "https://gw/.well-known/jwks.json"},
		"URL not http":          {Issuer: testIssuer, Audience: testAudience, JWKSURL: "file:///etc/jwks.json"},
		"URL without host":      {Issuer: testIssuer, Audience: testAudience, JWKSURL: "https:///jwks"},
		"negative refresh":      {Issuer: testIssuer, Audience: testAudience, JWKSURL: "https://gw/jwks", MinRefreshInterval: -1},
		"private keys":          {Issuer: testIssuer, Audience: testAudience, Keys: priv},
		"garbage keys":          {Issuer: testIssuer, Audience: testAudience, Keys: []byte("nope")},
		"no usable key":         {Issuer: testIssuer, Audience: testAudience, Keys: []byte(`{"keys":[{"kty":"oct-ish"}]}`)},
		"duplicate kid":         {Issuer: testIssuer, Audience: testAudience, Keys: []byte(`{"keys":[` + string(ecPub) + `,` + string(ecPub) + `]}`)},
		"symmetric key exposed": {Issuer: testIssuer, Audience: testAudience, Keys: []byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`)},
	} {
		if _, err := NewVerifier(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestErrorMessageNeverEchoesToken(t *testing.T) {
	clk := newClock()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	tok, _ := s.Sign(testIdentity(), testAudience)
	other := staticVerifier(t, mustKeySet(t, "").PublicJWKS(), clk.Now)
	_, err := other.Verify(context.Background(), tok)
	wantReason(t, err, ReasonUnknownKey)
	if strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), strings.Split(tok, ".")[1]) {
		t.Fatalf("message echoes the token: %v", err)
	}
	long := strings.Repeat("k", 500)
	k := signingJWK(mustKeySet(t, ""))
	k.KeyID = long
	_, err = other.Verify(context.Background(), forge(t, jose.EdDSA, k, map[jose.HeaderKey]any{jose.HeaderType: TokenType}, validClaims(clk.Now())))
	if len(err.Error()) > 200 {
		t.Fatalf("attacker-chosen kid not cut: %d bytes", len(err.Error()))
	}
}

func FuzzVerify(f *testing.F) {
	clk := newClock()
	s := mustSigner(f, mustKeySet(f, AlgEdDSA), clk.Now)
	v := staticVerifier(f, s.JWKS(), clk.Now)
	tok, _ := s.Sign(testIdentity(), testAudience)
	f.Add(tok)
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := v.Verify(context.Background(), raw)
		if err == nil {
			if raw != tok {
				// A different string that verifies must carry the same claims
				// (e.g. an equivalent encoding); it must never be a forgery.
				if id.Tenant != "acme" || id.Subject != "user-42" {
					t.Fatalf("forged identity %+v from %q", id, raw)
				}
			}
			return
		}
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("error is not *Error: %v", err)
		}
	})
}
