package assertion

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	jose "github.com/go-jose/go-jose/v4"
)

// Signature algorithms an assertion may use (RFC 7518 section 3.4 for ES256,
// RFC 8037 section 3.1 for EdDSA with Ed25519). Nothing else is ever signed or
// accepted: no "none", no HMAC, no RSA (RFC 8725 section 3.1).
const (
	AlgEdDSA = "EdDSA" // Ed25519 (JWK kty "OKP", crv "Ed25519")
	AlgES256 = "ES256" // ECDSA P-256 with SHA-256 (JWK kty "EC", crv "P-256")

	// DefaultAlgorithm is what GenerateKeySet, Rotate and Stage use when
	// given "".
	DefaultAlgorithm = AlgEdDSA
)

// maxKeys bounds the keys in one set (private or public). Rotation keeps a
// handful at most; a larger set is a mistake or an attack on the verifier.
const maxKeys = 32

// KeySet is an immutable set of private signing keys, as kept in the key file
// that every gateway replica mounts (a JWK Set, RFC 7517 section 5, with the
// private parameters). The first key signs; every key is published in the
// public JWKS so assertions signed by an older key keep verifying while they
// live.
//
// Methods that change the set (Rotate, Stage, Promote, Remove) return a new
// KeySet and leave the receiver as it was, so a KeySet can be shared between
// goroutines freely.
type KeySet struct {
	keys   []jose.JSONWebKey // private keys; keys[0] signs
	public []byte            // public JWKS JSON, computed once
}

// ParseKeySet reads a private JWK Set (RFC 7517 section 5): a JSON object
// {"keys":[...]} holding one to 32 keys. Every key must be
//
//   - an Ed25519 private key (kty "OKP", crv "Ed25519", with "d") whose
//     "alg" is "EdDSA", or a P-256 private key (kty "EC", crv "P-256", with
//     "d") whose "alg" is "ES256" — RSA, symmetric and other curves are
//     refused;
//   - identified by a non-empty "kid" that no other key in the set uses;
//   - meant for signatures: "use" is "sig" or absent.
//
// Each key signs and verifies a probe at load time, so a key whose private
// and public halves do not belong together is refused here rather than
// producing assertions nobody can verify. Errors name the key by its index
// in "keys" (and its kid when it has one) and never contain key material.
func ParseKeySet(data []byte) (*KeySet, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil || doc == nil {
		return nil, errors.New("assertion: key set is not a JSON JWK Set object ({\"keys\":[...]})")
	}
	member, ok := doc["keys"]
	if !ok {
		return nil, errors.New(`assertion: key set has no "keys" member`)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(member, &raw); err != nil {
		return nil, errors.New(`assertion: "keys" is not an array`)
	}
	if len(raw) == 0 {
		return nil, errors.New("assertion: key set is empty; it needs at least one signing key")
	}
	if len(raw) > maxKeys {
		return nil, fmt.Errorf("assertion: key set holds %d keys; at most %d are allowed", len(raw), maxKeys)
	}
	keys := make([]jose.JSONWebKey, 0, len(raw))
	seen := make(map[string]int, len(raw))
	for i, r := range raw {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(r); err != nil {
			return nil, fmt.Errorf("assertion: keys[%d]: not a valid JWK: %w", i, err)
		}
		name := keyName(i, k.KeyID)
		if k.KeyID == "" {
			return nil, fmt.Errorf("assertion: %s: missing \"kid\"", name)
		}
		if j, dup := seen[k.KeyID]; dup {
			return nil, fmt.Errorf("assertion: %s: kid is also used by keys[%d]; every kid must be unique", name, j)
		}
		seen[k.KeyID] = i
		if err := checkPrivateKey(&k); err != nil {
			return nil, fmt.Errorf("assertion: %s: %w", name, err)
		}
		if err := selfTest(k); err != nil {
			return nil, fmt.Errorf("assertion: %s: %w", name, err)
		}
		keys = append(keys, k)
	}
	return newKeySet(keys)
}

// LoadKeySet reads and parses the key file at path (see ParseKeySet). The
// file holds private keys: keep it readable by the gateway only (mode 0600,
// or a Kubernetes Secret mounted read-only).
func LoadKeySet(path string) (*KeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("assertion: read key file: %w", err)
	}
	ks, err := ParseKeySet(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return ks, nil
}

// GenerateKeySet returns a set holding one fresh key for alg ("EdDSA" or
// "ES256"; "" means DefaultAlgorithm) with a random kid: the base64url form
// of 12 bytes from crypto/rand.
func GenerateKeySet(alg string) (*KeySet, error) {
	k, err := generateKey(alg, nil)
	if err != nil {
		return nil, err
	}
	return newKeySet([]jose.JSONWebKey{k})
}

// Rotate returns a new set with a fresh key for alg in first place, so it
// signs from now on, followed by every key of k, which stay published.
//
// A replica that loads the rotated set signs with the new key at once. An
// upstream verifier that does not know the new kid yet fetches the JWKS
// again (at most once per its MinRefreshInterval), so with one replica the
// switch is seamless. With several replicas that reload at different times,
// an upstream may fetch the JWKS from a replica that has not reloaded yet
// and then refuse the new kid until its next allowed fetch; use Stage and
// Promote for those.
//
// Remove an old key only when no assertion it signed can still be in use and
// no verifier still needs it: after the assertion TTL plus the verifiers'
// JWKS MaxAge plus their leeway (with the defaults, 10m + 10m + 30s; waiting
// 30 minutes is safe).
func (k *KeySet) Rotate(alg string) (*KeySet, error) {
	nk, err := generateKey(alg, k.kids())
	if err != nil {
		return nil, err
	}
	return newKeySet(append([]jose.JSONWebKey{nk}, k.keys...))
}

// Stage is the first half of a rotation across several replicas: it returns
// a new set with a fresh key for alg appended at the end, so the key is
// published in the JWKS but does not sign yet, and its kid. Once every
// replica serves the staged set and the verifiers' JWKS MaxAge has passed,
// Promote the key.
func (k *KeySet) Stage(alg string) (*KeySet, string, error) {
	nk, err := generateKey(alg, k.kids())
	if err != nil {
		return nil, "", err
	}
	ns, err := newKeySet(append(slices.Clone(k.keys), nk))
	if err != nil {
		return nil, "", err
	}
	return ns, nk.KeyID, nil
}

// Promote returns a new set in which the key kid comes first and therefore
// signs; the order of the others is kept. It fails if no key has that kid.
func (k *KeySet) Promote(kid string) (*KeySet, error) {
	i := k.index(kid)
	if i < 0 {
		return nil, fmt.Errorf("assertion: no key with kid %q in the set", kid)
	}
	keys := make([]jose.JSONWebKey, 0, len(k.keys))
	keys = append(keys, k.keys[i])
	keys = append(keys, k.keys[:i]...)
	keys = append(keys, k.keys[i+1:]...)
	return newKeySet(keys)
}

// Remove returns a new set without the key kid. It refuses to remove the
// signing key (the first one: Promote another key first) and fails if no key
// has that kid. See Rotate for when an old key may go.
func (k *KeySet) Remove(kid string) (*KeySet, error) {
	i := k.index(kid)
	switch {
	case i < 0:
		return nil, fmt.Errorf("assertion: no key with kid %q in the set", kid)
	case i == 0:
		return nil, fmt.Errorf("assertion: key %q is the signing key; promote another key before removing it", kid)
	}
	return newKeySet(slices.Delete(slices.Clone(k.keys), i, i+1))
}

// KeyIDs returns the kids of the set in order; the first is the signing key.
func (k *KeySet) KeyIDs() []string { return k.kids() }

// SigningKeyID returns the kid of the key that signs (the first).
func (k *KeySet) SigningKeyID() string { return k.keys[0].KeyID }

// SigningAlgorithm returns the alg of the key that signs: "EdDSA" or "ES256".
func (k *KeySet) SigningAlgorithm() string { return k.keys[0].Algorithm }

// MarshalPrivate returns the set as an indented private JWK Set, the format
// ParseKeySet reads. The result contains private keys: write it with mode
// 0600 and never log it.
func (k *KeySet) MarshalPrivate() ([]byte, error) {
	b, err := json.MarshalIndent(jose.JSONWebKeySet{Keys: k.keys}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("assertion: encode key set: %w", err)
	}
	return append(b, '\n'), nil
}

// PublicJWKS returns the public half of every key as a JWK Set (RFC 7517
// section 5): {"keys":[{"kty":..., "crv":..., "x":..., ["y":...,] "kid":...,
// "alg":..., "use":"sig"}, ...]}, in the order of the set. This is what the
// gateway serves at JWKSPath. The slice is a fresh copy.
func (k *KeySet) PublicJWKS() []byte { return slices.Clone(k.public) }

func newKeySet(keys []jose.JSONWebKey) (*KeySet, error) {
	if len(keys) > maxKeys {
		return nil, fmt.Errorf("assertion: a key set holds at most %d keys; remove old keys first", maxKeys)
	}
	pub := make([]jose.JSONWebKey, len(keys))
	for i := range keys {
		pub[i] = keys[i].Public()
		pub[i].Use = "sig"
	}
	b, err := json.Marshal(jose.JSONWebKeySet{Keys: pub})
	if err != nil {
		return nil, fmt.Errorf("assertion: encode public key set: %w", err)
	}
	return &KeySet{keys: keys, public: b}, nil
}

func (k *KeySet) kids() []string {
	out := make([]string, len(k.keys))
	for i, key := range k.keys {
		out[i] = key.KeyID
	}
	return out
}

func (k *KeySet) index(kid string) int {
	for i, key := range k.keys {
		if key.KeyID == kid {
			return i
		}
	}
	return -1
}

func keyName(i int, kid string) string {
	if kid == "" {
		return fmt.Sprintf("keys[%d]", i)
	}
	return fmt.Sprintf("keys[%d] (kid %.64q)", i, kid)
}

// checkPrivateKey enforces the rules of ParseKeySet on one parsed key.
func checkPrivateKey(k *jose.JSONWebKey) error {
	if k.Use != "" && k.Use != "sig" {
		return fmt.Errorf("\"use\" is %.32q; a signing key needs \"sig\" or no \"use\"", k.Use)
	}
	if k.Algorithm == "" {
		return errors.New(`missing "alg"; set "EdDSA" for an Ed25519 key or "ES256" for a P-256 key`)
	}
	var want string
	switch key := k.Key.(type) {
	case ed25519.PrivateKey:
		want = AlgEdDSA
	case *ecdsa.PrivateKey:
		if key.Curve != elliptic.P256() {
			return fmt.Errorf("unsupported EC curve %s; only P-256 (ES256) is accepted", key.Curve.Params().Name)
		}
		want = AlgES256
	case ed25519.PublicKey, *ecdsa.PublicKey:
		return errors.New(`public key only (no "d"); a signing key set needs the private keys`)
	case *rsa.PrivateKey, *rsa.PublicKey:
		return errors.New("RSA keys are not supported; use an Ed25519 (EdDSA) or P-256 (ES256) key")
	case []byte:
		return errors.New("symmetric (oct) keys are not supported; use an Ed25519 (EdDSA) or P-256 (ES256) key")
	default:
		return fmt.Errorf("unsupported key type %T; use an Ed25519 (EdDSA) or P-256 (ES256) key", k.Key)
	}
	if k.Algorithm != want {
		return fmt.Errorf("\"alg\" is %.32q but the key is for %s", k.Algorithm, want)
	}
	if !k.Valid() {
		return errors.New("key parameters are incomplete")
	}
	return nil
}

// selfTest signs a probe with the key and verifies it with the public half.
func selfTest(k jose.JSONWebKey) error {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.Algorithm), Key: k}, nil)
	if err != nil {
		return fmt.Errorf("cannot sign with this key: %w", err)
	}
	probe := []byte("mcpgate key self-test")
	jws, err := s.Sign(probe)
	if err != nil {
		return fmt.Errorf("cannot sign with this key: %w", err)
	}
	got, err := jws.Verify(k.Public())
	if err != nil || string(got) != string(probe) {
		return errors.New("private and public parts of the key do not match")
	}
	return nil
}

// generateKey makes a fresh private key for alg with a random kid not in
// taken.
func generateKey(alg string, taken []string) (jose.JSONWebKey, error) {
	if alg == "" {
		alg = DefaultAlgorithm
	}
	var priv any
	switch alg {
	case AlgEdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return jose.JSONWebKey{}, fmt.Errorf("assertion: generate Ed25519 key: %w", err)
		}
		priv = k
	case AlgES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return jose.JSONWebKey{}, fmt.Errorf("assertion: generate P-256 key: %w", err)
		}
		priv = k
	default:
		return jose.JSONWebKey{}, fmt.Errorf("assertion: unsupported algorithm %.32q; use %s or %s", alg, AlgEdDSA, AlgES256)
	}
	for {
		kid := randomID(12)
		if !slices.Contains(taken, kid) {
			return jose.JSONWebKey{Key: priv, KeyID: kid, Algorithm: alg, Use: "sig"}, nil
		}
	}
}

// randomID returns n random bytes from crypto/rand in unpadded base64url.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+); it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}
