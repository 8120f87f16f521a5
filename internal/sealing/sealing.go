// Package sealing seals small values the gateway hands to a client and
// must get back unchanged: authenticated encryption (AES-256-GCM, NIST SP
// 800-38D) under a key set that every replica shares and that rotates like
// the assertion keys.
//
// A sealed value is the text
//
//	mcpgs1.<kid>.<base64url(nonce ‖ ciphertext ‖ tag)>
//
// where kid names the key that sealed it, the nonce is 12 random bytes,
// and the additional authenticated data binds the format version, the kid
// and a purpose string, so a value sealed for one purpose never opens for
// another. The client learns nothing from it and cannot change a bit of it
// without Open failing.
//
// Random 96-bit nonces keep AES-GCM safe for about 2^32 seals per key (SP
// 800-38D section 8.3); the gateway seals once per previewed write that a
// person must approve, so a key rotated yearly stays far below that.
package sealing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
)

// Prefix starts every sealed value (format version 1).
const Prefix = "mcpgs1."

// KeySize is the size of a sealing key in bytes (AES-256).
const KeySize = 32

// maxKeys bounds the keys in one set; rotation keeps a handful.
const maxKeys = 32

// maxSealed bounds a sealed value Open accepts (64 KiB of text).
const maxSealed = 64 << 10

var kidPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Errors of Open. None carries key material or the sealed text.
var (
	// ErrNotSealed: the value does not have the form of a sealed value.
	ErrNotSealed = errors.New("sealing: not a sealed value")
	// ErrUnknownKey: the key that sealed the value is not in the set (a
	// key removed since, another deployment's key, or a made-up kid).
	ErrUnknownKey = errors.New("sealing: sealed with a key this gateway does not hold")
	// ErrForged: the value does not authenticate under its key (edited,
	// forged, or sealed for another purpose).
	ErrForged = errors.New("sealing: the sealed value does not authenticate")
)

type key struct {
	kid  string
	aead cipher.AEAD
	raw  []byte
}

// KeySet is an immutable set of sealing keys, as kept in the keys file
// every replica mounts. The first key seals; every key opens, so values
// sealed before a rotation keep opening while they live. Methods that
// change the set return a new KeySet.
type KeySet struct {
	keys []key
}

// fileKey is one key in the keys file: a JWK of key type "oct" (RFC 7517
// section 4, RFC 7518 section 6.4) with the key in "k" (base64url, 32
// bytes) and a "kid". "alg", when present, must be "A256GCM".
type fileKey struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	K   string `json:"k"`
}

// Algorithm is the "alg" of the keys in a keys file.
const Algorithm = "A256GCM"

// ParseKeySet reads a keys file: a JSON object {"keys":[...]} of one to 32
// symmetric JWKs ({"kty":"oct","kid":"...","alg":"A256GCM","k":"..."}),
// each with a unique kid of 1–64 characters [A-Za-z0-9_-] and a 32-byte
// key. The first key seals. Errors name a key by its index and kid, never
// its material.
func ParseKeySet(data []byte) (*KeySet, error) {
	var doc struct {
		Keys []fileKey `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, errors.New(`sealing: keys file is not a JSON object {"keys":[...]}`)
	}
	if len(doc.Keys) == 0 {
		return nil, errors.New("sealing: keys file holds no key; it needs at least one")
	}
	if len(doc.Keys) > maxKeys {
		return nil, fmt.Errorf("sealing: keys file holds %d keys; at most %d are allowed", len(doc.Keys), maxKeys)
	}
	ks := &KeySet{}
	seen := map[string]bool{}
	for i, fk := range doc.Keys {
		name := fmt.Sprintf("keys[%d]", i)
		if fk.Kid != "" {
			name += fmt.Sprintf(" (kid %q)", fk.Kid)
		}
		switch {
		case fk.Kty != "oct":
			return nil, fmt.Errorf("sealing: %s: kty must be \"oct\"", name)
		case fk.Alg != "" && fk.Alg != Algorithm:
			return nil, fmt.Errorf("sealing: %s: alg must be %q", name, Algorithm)
		case fk.Use != "" && fk.Use != "enc":
			return nil, fmt.Errorf("sealing: %s: use must be \"enc\"", name)
		case !kidPattern.MatchString(fk.Kid):
			return nil, fmt.Errorf("sealing: %s: kid must be 1 to 64 characters of A-Z, a-z, 0-9, _ and -", name)
		case seen[fk.Kid]:
			return nil, fmt.Errorf("sealing: %s: kid is used by an earlier key", name)
		}
		seen[fk.Kid] = true
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(fk.K, "="))
		if err != nil || len(raw) != KeySize {
			return nil, fmt.Errorf("sealing: %s: k must be %d bytes in base64url", name, KeySize)
		}
		k, err := newKey(fk.Kid, raw)
		if err != nil {
			return nil, fmt.Errorf("sealing: %s: %w", name, err)
		}
		ks.keys = append(ks.keys, k)
	}
	return ks, nil
}

// LoadKeySet reads and parses the keys file at path.
func LoadKeySet(path string) (*KeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sealing: %w", err)
	}
	return ParseKeySet(data)
}

func newKey(kid string, raw []byte) (key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return key{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return key{}, err
	}
	return key{kid: kid, aead: aead, raw: slices.Clone(raw)}, nil
}

func freshKey() (key, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return key{}, err
	}
	id := make([]byte, 9)
	if _, err := rand.Read(id); err != nil {
		return key{}, err
	}
	return newKey("s-"+base64.RawURLEncoding.EncodeToString(id), raw)
}

// GenerateKeySet returns a set of one fresh random key.
func GenerateKeySet() (*KeySet, error) {
	k, err := freshKey()
	if err != nil {
		return nil, err
	}
	return &KeySet{keys: []key{k}}, nil
}

// Rotate returns the set with a fresh key first (it seals from now on);
// the older keys still open. With several replicas, prefer Stage then
// Promote: a replica that has not reloaded yet cannot open what a fresh
// key sealed.
func (ks *KeySet) Rotate() (*KeySet, error) {
	if len(ks.keys) >= maxKeys {
		return nil, fmt.Errorf("sealing: the set already holds %d keys; remove an old one first", maxKeys)
	}
	k, err := freshKey()
	if err != nil {
		return nil, err
	}
	return &KeySet{keys: append([]key{k}, ks.keys...)}, nil
}

// Stage returns the set with a fresh key last (it opens, it does not seal
// yet) and its kid; Promote makes it the sealing key once every replica
// has reloaded the file.
func (ks *KeySet) Stage() (*KeySet, string, error) {
	if len(ks.keys) >= maxKeys {
		return nil, "", fmt.Errorf("sealing: the set already holds %d keys; remove an old one first", maxKeys)
	}
	k, err := freshKey()
	if err != nil {
		return nil, "", err
	}
	return &KeySet{keys: append(slices.Clone(ks.keys), k)}, k.kid, nil
}

// Promote returns the set with key kid moved first (the sealing key).
func (ks *KeySet) Promote(kid string) (*KeySet, error) {
	i := ks.index(kid)
	if i < 0 {
		return nil, fmt.Errorf("sealing: no key %q in the set", kid)
	}
	keys := []key{ks.keys[i]}
	keys = append(keys, slices.Delete(slices.Clone(ks.keys), i, i+1)...)
	return &KeySet{keys: keys}, nil
}

// Remove returns the set without key kid. The sealing key cannot be
// removed (promote another first); what kid sealed no longer opens.
func (ks *KeySet) Remove(kid string) (*KeySet, error) {
	i := ks.index(kid)
	switch {
	case i < 0:
		return nil, fmt.Errorf("sealing: no key %q in the set", kid)
	case i == 0:
		return nil, fmt.Errorf("sealing: %q is the sealing key; promote another key first", kid)
	}
	return &KeySet{keys: slices.Delete(slices.Clone(ks.keys), i, i+1)}, nil
}

func (ks *KeySet) index(kid string) int {
	return slices.IndexFunc(ks.keys, func(k key) bool { return k.kid == kid })
}

// SealingKeyID is the kid of the key that seals.
func (ks *KeySet) SealingKeyID() string { return ks.keys[0].kid }

// KeyIDs are the kids of the set, the sealing key first.
func (ks *KeySet) KeyIDs() []string {
	out := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.kid
	}
	return out
}

// Marshal returns the set as a keys file (JSON, the sealing key first).
func (ks *KeySet) Marshal() ([]byte, error) {
	doc := struct {
		Keys []fileKey `json:"keys"`
	}{}
	for _, k := range ks.keys {
		doc.Keys = append(doc.Keys, fileKey{Kty: "oct", Kid: k.kid, Alg: Algorithm, Use: "enc", K: base64.RawURLEncoding.EncodeToString(k.raw)})
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func aad(kid, purpose string) []byte {
	return []byte(Prefix + kid + "\x00" + purpose)
}

// Seal encrypts and authenticates plaintext for purpose under the
// sealing key and returns the sealed text (see the package comment).
func (ks *KeySet) Seal(purpose string, plaintext []byte) (string, error) {
	k := ks.keys[0]
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := k.aead.Seal(nonce, nonce, plaintext, aad(k.kid, purpose))
	return Prefix + k.kid + "." + base64.RawURLEncoding.EncodeToString(out), nil
}

// Open authenticates and decrypts a value Seal made for purpose with any
// key of the set. It returns ErrNotSealed for text of another form,
// ErrUnknownKey when no key of the set has its kid, ErrForged when it
// does not authenticate.
func (ks *KeySet) Open(purpose, sealed string) ([]byte, error) {
	if len(sealed) > maxSealed {
		return nil, ErrNotSealed
	}
	rest, ok := strings.CutPrefix(sealed, Prefix)
	if !ok {
		return nil, ErrNotSealed
	}
	kid, body, ok := strings.Cut(rest, ".")
	if !ok || !kidPattern.MatchString(kid) {
		return nil, ErrNotSealed
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		return nil, ErrNotSealed
	}
	i := ks.index(kid)
	if i < 0 {
		return nil, ErrUnknownKey
	}
	k := ks.keys[i]
	if len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, ErrForged
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], aad(kid, purpose))
	if err != nil {
		return nil, ErrForged
	}
	return plain, nil
}

// IsSealed reports whether s has the form of a sealed value (its prefix);
// it says nothing of whether it opens.
func IsSealed(s string) bool { return strings.HasPrefix(s, Prefix) }

// Sealer seals with a key set that can be swapped while it is in use (a
// reloaded keys file). It is safe for concurrent use.
type Sealer struct {
	ks atomic.Pointer[KeySet]
}

// NewSealer returns a Sealer with ks.
func NewSealer(ks *KeySet) *Sealer {
	s := &Sealer{}
	s.ks.Store(ks)
	return s
}

// SetKeys swaps the key set (the next Seal and Open use it).
func (s *Sealer) SetKeys(ks *KeySet) { s.ks.Store(ks) }

// Keys returns the current key set.
func (s *Sealer) Keys() *KeySet { return s.ks.Load() }

// Seal: see KeySet.Seal.
func (s *Sealer) Seal(purpose string, plaintext []byte) (string, error) {
	return s.ks.Load().Seal(purpose, plaintext)
}

// Open: see KeySet.Open.
func (s *Sealer) Open(purpose, sealed string) ([]byte, error) {
	return s.ks.Load().Open(purpose, sealed)
}
