package assertion

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
)

func TestGenerateKeySetRoundTrip(t *testing.T) {
	for _, alg := range []string{AlgEdDSA, AlgES256, ""} {
		t.Run("alg="+alg, func(t *testing.T) {
			ks := mustKeySet(t, alg)
			wantAlg := alg
			if alg == "" {
				wantAlg = DefaultAlgorithm
			}
			if got := ks.SigningAlgorithm(); got != wantAlg {
				t.Fatalf("alg = %s, want %s", got, wantAlg)
			}
			if kid := ks.SigningKeyID(); len(kid) != 16 {
				t.Fatalf("kid %q: want 16 base64url chars (12 random bytes)", kid)
			}
			priv, err := ks.MarshalPrivate()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseKeySet(priv)
			if err != nil {
				t.Fatalf("ParseKeySet(MarshalPrivate()) = %v", err)
			}
			if !bytes.Equal(back.PublicJWKS(), ks.PublicJWKS()) {
				t.Fatalf("public JWKS changed across marshal/parse")
			}

			var pub struct {
				Keys []map[string]any `json:"keys"`
			}
			if err := json.Unmarshal(ks.PublicJWKS(), &pub); err != nil {
				t.Fatal(err)
			}
			if len(pub.Keys) != 1 {
				t.Fatalf("public JWKS has %d keys", len(pub.Keys))
			}
			k := pub.Keys[0]
			if _, ok := k["d"]; ok {
				t.Fatal("public JWKS contains the private parameter d")
			}
			if k["kid"] != ks.SigningKeyID() || k["alg"] != wantAlg || k["use"] != "sig" {
				t.Fatalf("public key members: %v", k)
			}
		})
	}
	if a, b := mustKeySet(t, ""), mustKeySet(t, ""); a.SigningKeyID() == b.SigningKeyID() {
		t.Fatal("two generated keys share a kid")
	}
}

func TestGenerateKeySetRejectsOtherAlgorithms(t *testing.T) {
	for _, alg := range []string{"RS256", "HS256", "none", "ES384", "eddsa"} {
		if _, err := GenerateKeySet(alg); err == nil {
			t.Errorf("GenerateKeySet(%q) succeeded", alg)
		}
	}
}

func TestRotateStagePromoteRemove(t *testing.T) {
	ks := mustKeySet(t, AlgEdDSA)
	old := ks.SigningKeyID()

	rot, err := ks.Rotate(AlgES256)
	if err != nil {
		t.Fatal(err)
	}
	ids := rot.KeyIDs()
	if len(ids) != 2 || ids[1] != old || ids[0] == old || rot.SigningAlgorithm() != AlgES256 {
		t.Fatalf("after Rotate: kids %v alg %s; want new ES256 key first, %s kept", ids, rot.SigningAlgorithm(), old)
	}
	if got := ks.KeyIDs(); len(got) != 1 {
		t.Fatalf("Rotate changed its receiver: %v", got)
	}

	staged, kid, err := ks.Stage("")
	if err != nil {
		t.Fatal(err)
	}
	if ids := staged.KeyIDs(); len(ids) != 2 || ids[0] != old || ids[1] != kid {
		t.Fatalf("after Stage: %v; want [%s %s]", ids, old, kid)
	}
	if !strings.Contains(string(staged.PublicJWKS()), kid) {
		t.Fatal("staged key not published")
	}
	promoted, err := staged.Promote(kid)
	if err != nil {
		t.Fatal(err)
	}
	if ids := promoted.KeyIDs(); ids[0] != kid || ids[1] != old {
		t.Fatalf("after Promote: %v", ids)
	}
	if _, err := promoted.Promote("nope"); err == nil {
		t.Fatal("Promote of an unknown kid succeeded")
	}

	if _, err := promoted.Remove(kid); err == nil || !strings.Contains(err.Error(), "signing key") {
		t.Fatalf("Remove(signing key) = %v; want refusal", err)
	}
	if _, err := promoted.Remove("nope"); err == nil {
		t.Fatal("Remove of an unknown kid succeeded")
	}
	pruned, err := promoted.Remove(old)
	if err != nil {
		t.Fatal(err)
	}
	if ids := pruned.KeyIDs(); len(ids) != 1 || ids[0] != kid {
		t.Fatalf("after Remove: %v", ids)
	}
	if _, err := ks.Rotate("RS256"); err == nil {
		t.Fatal("Rotate with RS256 succeeded")
	}
}

func TestRotateKeepsAtMostMaxKeys(t *testing.T) {
	ks := mustKeySet(t, "")
	var err error
	for i := 1; i < maxKeys; i++ {
		if ks, err = ks.Rotate(""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ks.Rotate(""); err == nil {
		t.Fatalf("set grew past %d keys", maxKeys)
	}
}

// jwkJSON marshals one JWK with the given members overridden (nil deletes).
func jwkJSON(t *testing.T, k jose.JSONWebKey, set map[string]any) json.RawMessage {
	t.Helper()
	b, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for name, v := range set {
		if v == nil {
			delete(m, name)
		} else {
			m[name] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func jwks(t *testing.T, keys ...json.RawMessage) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseKeySetRejects(t *testing.T) {
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	_, edPriv2, _ := ed25519.GenerateKey(rand.Reader)
	ecPriv, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecPriv2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaPriv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ed := jose.JSONWebKey{Key: edPriv, KeyID: "a", Algorithm: AlgEdDSA, Use: "sig"}
	ec := jose.JSONWebKey{Key: ecPriv, KeyID: "b", Algorithm: AlgES256}

	// An EC key whose d belongs to another key than x and y.
	ecMixed := jwkJSON(t, ec, nil)
	var m map[string]any
	_ = json.Unmarshal(ecMixed, &m)
	var other map[string]any
	_ = json.Unmarshal(jwkJSON(t, jose.JSONWebKey{Key: ecPriv2, KeyID: "b", Algorithm: AlgES256}, nil), &other)
	m["d"] = other["d"]
	ecMixed, _ = json.Marshal(m)
	// An Ed25519 key whose d belongs to another key than x.
	edMixed := jwkJSON(t, ed, map[string]any{"x": mustMap(t, jose.JSONWebKey{Key: edPriv2.Public()})["x"]})

	cases := []struct {
		name string
		data []byte
		want string // substring of the error
	}{
		{"garbage", []byte("not json"), "not a JSON JWK Set"},
		{"empty input", nil, "not a JSON JWK Set"},
		{"array", []byte(`[]`), "not a JSON JWK Set"},
		{"keys not an array", []byte(`{"keys":{}}`), `"keys" is not an array`},
		{"no keys member", []byte(`{}`), `no "keys"`},
		{"no keys", []byte(`{"keys":[]}`), "empty"},
		{"key not an object", []byte(`{"keys":[42]}`), "keys[0]"},
		{"duplicate kid", jwks(t, jwkJSON(t, ed, nil), jwkJSON(t, ec, map[string]any{"kid": "a"})), `keys[1] (kid "a"): kid is also used by keys[0]`},
		{"missing kid", jwks(t, jwkJSON(t, ed, nil), jwkJSON(t, ec, map[string]any{"kid": nil})), `keys[1]: missing "kid"`},
		{"RSA key", jwks(t, jwkJSON(t, jose.JSONWebKey{Key: rsaPriv, KeyID: "r", Algorithm: "RS256"}, nil)), "keys[0] (kid \"r\"): RSA keys are not supported"},
		{"public Ed25519 key only", jwks(t, jwkJSON(t, jose.JSONWebKey{Key: edPriv.Public(), KeyID: "p", Algorithm: AlgEdDSA}, nil)), "public key only"},
		{"public EC key only", jwks(t, jwkJSON(t, ed, nil), jwkJSON(t, ec, map[string]any{"d": nil})), "keys[1] (kid \"b\"): public key only"},
		{"symmetric key", jwks(t, jwkJSON(t, jose.JSONWebKey{Key: bytes.Repeat([]byte{7}, 32), KeyID: "s", Algorithm: "HS256"}, nil)), "symmetric"},
		{"P-384 key", jwks(t, jwkJSON(t, jose.JSONWebKey{Key: p384, KeyID: "c", Algorithm: "ES384"}, nil)), "P-384"},
		{"missing alg", jwks(t, jwkJSON(t, ed, map[string]any{"alg": nil})), `missing "alg"`},
		{"alg does not fit the key", jwks(t, jwkJSON(t, ed, map[string]any{"alg": "ES256"})), "key is for EdDSA"},
		{"encryption use", jwks(t, jwkJSON(t, ec, map[string]any{"use": "enc"})), `"use"`},
		{"EC halves from two keys", jwks(t, ecMixed), "keys[0] (kid \"b\"): private and public parts of the key do not match"},
		{"Ed25519 halves from two keys", jwks(t, edMixed), "keys[0]: not a valid JWK"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ks, err := ParseKeySet(c.data)
			if err == nil {
				t.Fatalf("accepted: %v", ks.KeyIDs())
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
			if strings.Contains(err.Error(), `"d"`) && strings.Contains(err.Error(), "d\":\"") {
				t.Fatalf("error leaks key material: %v", err)
			}
		})
	}

	ok := jwks(t, jwkJSON(t, ed, nil), jwkJSON(t, ec, map[string]any{"use": nil}))
	ks, err := ParseKeySet(ok)
	if err != nil {
		t.Fatalf("valid two-key set refused: %v", err)
	}
	if ids := ks.KeyIDs(); len(ids) != 2 || ids[0] != "a" || ks.SigningAlgorithm() != AlgEdDSA {
		t.Fatalf("kids %v", ids)
	}
}

func mustMap(t *testing.T, k jose.JSONWebKey) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(jwkJSON(t, k, nil), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestLoadKeySet(t *testing.T) {
	dir := t.TempDir()
	ks := mustKeySet(t, AlgES256)
	priv, _ := ks.MarshalPrivate()
	path := filepath.Join(dir, "keys.json")
	if err := os.WriteFile(path, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadKeySet(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.SigningKeyID() != ks.SigningKeyID() {
		t.Fatal("loaded a different key")
	}
	if _, err := LoadKeySet(filepath.Join(dir, "missing.json")); err == nil {
		t.Fatal("missing file accepted")
	}
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"keys":[]}`), 0o600)
	if _, err := LoadKeySet(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("bad file: %v (want the path in the error)", err)
	}
}
