package provider

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// signingKey is one private key of one generation. It is the op.SigningKey
// handed to zitadel for ID tokens.
type signingKey struct {
	id   string
	alg  jose.SignatureAlgorithm
	priv crypto.Signer
}

var _ op.SigningKey = (*signingKey)(nil)

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return k.alg }
func (k *signingKey) Key() any                                    { return k.priv }
func (k *signingKey) ID() string                                  { return k.id }

// publicKey is the published half of a signingKey (op.Key, one JWKS entry).
type publicKey struct{ k *signingKey }

var _ op.Key = publicKey{}

func (p publicKey) ID() string                         { return p.k.id }
func (p publicKey) Algorithm() jose.SignatureAlgorithm { return p.k.alg }
func (p publicKey) Use() string                        { return "sig" }
func (p publicKey) Key() any                           { return p.k.priv.Public() }

// keyring holds one key per algorithm per generation. Rotation creates a new
// generation and makes it active; the previous generation stays published
// (so tokens it signed still verify) unless the rotation retires it.
type keyring struct {
	mu        sync.RWMutex
	gen       int
	active    map[jose.SignatureAlgorithm]*signingKey
	published []*signingKey
}

func newKeyring() (*keyring, error) {
	k := &keyring{}
	if err := k.rotate(true); err != nil {
		return nil, err
	}
	return k, nil
}

// rotate creates a new generation of keys. With retire, the JWKS afterwards
// holds only the new generation; otherwise it also keeps the previous one.
func (k *keyring) rotate(retire bool) error {
	k.mu.Lock()
	gen := k.gen + 1
	k.mu.Unlock()

	next := make(map[jose.SignatureAlgorithm]*signingKey, len(SigningAlgs))
	for _, alg := range SigningAlgs {
		key, err := generateKey(jose.SignatureAlgorithm(alg), gen)
		if err != nil {
			return err
		}
		next[key.alg] = key
	}

	k.mu.Lock()
	defer k.mu.Unlock()
	var published []*signingKey
	for _, alg := range SigningAlgs {
		published = append(published, next[jose.SignatureAlgorithm(alg)])
	}
	if !retire {
		for _, old := range k.active {
			published = append(published, old)
		}
	}
	k.gen = gen
	k.active = next
	k.published = published
	return nil
}

func generateKey(alg jose.SignatureAlgorithm, gen int) (*signingKey, error) {
	var (
		priv crypto.Signer
		err  error
	)
	switch alg {
	case jose.RS256, jose.PS256:
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	case jose.ES256:
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case jose.EdDSA:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	default:
		return nil, fmt.Errorf("unsupported signing algorithm %q", alg)
	}
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", alg, err)
	}
	var suffix [4]byte
	if _, err := rand.Read(suffix[:]); err != nil {
		return nil, err
	}
	id := fmt.Sprintf("%s-g%d-%s", alg, gen, hex.EncodeToString(suffix[:]))
	return &signingKey{id: id, alg: alg, priv: priv}, nil
}

// signer returns the active key for alg.
func (k *keyring) signer(alg string) (*signingKey, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	key, ok := k.active[jose.SignatureAlgorithm(alg)]
	if !ok {
		return nil, fmt.Errorf("no key for algorithm %q", alg)
	}
	return key, nil
}

// keys returns the published keys (the JWKS).
func (k *keyring) keys() []op.Key {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]op.Key, len(k.published))
	for i, key := range k.published {
		out[i] = publicKey{key}
	}
	return out
}

// lookup returns the published key with the given ID.
func (k *keyring) lookup(kid string) (*signingKey, bool) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range k.published {
		if key.id == kid {
			return key, true
		}
	}
	return nil, false
}

// state describes the keyring for the admin API.
func (k *keyring) state() (gen int, active, published []string) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, alg := range SigningAlgs {
		active = append(active, k.active[jose.SignatureAlgorithm(alg)].id)
	}
	for _, key := range k.published {
		published = append(published, key.id)
	}
	return k.gen, active, published
}
