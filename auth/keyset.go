package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// errRefreshLimited: a JWKS fetch was skipped because the previous one is
// more recent than the minimum refresh interval.
var errRefreshLimited = errors.New("JWKS refresh skipped: minimum refresh interval not elapsed")

// keySet is a remote JWKS with what go-oidc's RemoteKeySet lacks: that one
// refetches on every unknown kid (only concurrent fetches are merged), so a
// flood of tokens with random kids becomes a flood of JWKS requests. Here a
// fetch is attempted at most once per minRefresh whatever happens, callers
// share the fetch in flight, and a set older than maxAge is refreshed in the
// background so a key that left the JWKS is noticed.
type keySet struct {
	url        string
	client     *http.Client
	minRefresh time.Duration
	maxAge     time.Duration
	now        func() time.Time
	log        *slog.Logger
	// onUpdate is called after each successful fetch with the key IDs now
	// published.
	onUpdate func(kids map[string]bool)

	mu       sync.Mutex
	keys     []jose.JSONWebKey
	kids     map[string]bool
	inflight chan struct{} // closed when the fetch in flight ends
	lastErr  error         // result of the last fetch

	lastAttempt atomic.Int64 // unix nanos of the last fetch attempt
	fetchedAt   atomic.Int64 // unix nanos of the last successful fetch
	background  atomic.Bool  // a background refresh is running
	fetches     atomic.Int64
}

// find returns the keys that may have signed a token with this kid and alg,
// fetching the JWKS (rate-limited) when none is known. The error is an
// *Error: unknown_key, or unavailable when a fetch was attempted and failed.
func (k *keySet) find(ctx context.Context, kid, alg string) ([]jose.JSONWebKey, *Error) {
	if c := k.candidates(kid, alg); len(c) > 0 {
		return c, nil
	}
	err := k.refresh(ctx)
	if c := k.candidates(kid, alg); len(c) > 0 {
		return c, nil
	}
	if err != nil && !errors.Is(err, errRefreshLimited) {
		return nil, newError(ReasonUnavailable, fmt.Errorf("fetch JWKS: %w", err))
	}
	return nil, newError(ReasonUnknownKey, fmt.Errorf("no key with kid %q for %s", kid, alg))
}

// candidates returns the cached keys matching kid (any key if kid is empty)
// whose type fits alg and whose alg, if published, is alg.
func (k *keySet) candidates(kid, alg string) []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if kid != "" && key.KeyID != kid {
			continue
		}
		if key.Algorithm != "" && key.Algorithm != alg {
			continue
		}
		if !keyFitsAlg(key.Key, alg) {
			continue
		}
		out = append(out, key)
	}
	return out
}

// has reports whether kid is in the cached set.
func (k *keySet) has(kid string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.kids[kid]
}

func keyFitsAlg(key any, alg string) bool {
	switch key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	default:
		return false
	}
}

// refresh fetches the JWKS unless an attempt was made less than minRefresh
// ago (errRefreshLimited). Concurrent callers wait for the same fetch.
func (k *keySet) refresh(ctx context.Context) error {
	k.mu.Lock()
	if ch := k.inflight; ch != nil {
		k.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.lastErr
	}
	now := k.now()
	if last := k.lastAttempt.Load(); last != 0 && now.Sub(time.Unix(0, last)) < k.minRefresh {
		k.mu.Unlock()
		return errRefreshLimited
	}
	k.lastAttempt.Store(now.UnixNano())
	ch := make(chan struct{})
	k.inflight = ch
	k.mu.Unlock()

	// The fetch outlives a cancelled caller: others may be waiting on it.
	keys, err := k.fetch(context.WithoutCancel(ctx))
	k.fetches.Add(1)

	k.mu.Lock()
	k.lastErr = err
	var kids map[string]bool
	if err == nil {
		kids = make(map[string]bool, len(keys))
		for _, key := range keys {
			kids[key.KeyID] = true
		}
		k.keys, k.kids = keys, kids
		k.fetchedAt.Store(k.now().UnixNano())
	}
	k.inflight = nil
	k.mu.Unlock()
	close(ch)

	if err != nil {
		k.log.Warn("JWKS fetch failed", "jwks_uri", k.url, "error", err)
		return err
	}
	k.log.Debug("JWKS fetched", "jwks_uri", k.url, "keys", len(keys))
	if k.onUpdate != nil {
		k.onUpdate(kids)
	}
	return nil
}

// refreshIfStale starts a background refresh when the set is older than
// maxAge. It never blocks.
func (k *keySet) refreshIfStale() {
	fetched := k.fetchedAt.Load()
	if fetched != 0 && k.now().Sub(time.Unix(0, fetched)) < k.maxAge {
		return
	}
	if last := k.lastAttempt.Load(); last != 0 && k.now().Sub(time.Unix(0, last)) < k.minRefresh {
		return
	}
	if !k.background.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer k.background.Store(false)
		_ = k.refresh(context.Background())
	}()
}

// fetch downloads and decodes the JWKS. Keys that do not decode, that are
// not for signatures, or that are symmetric are skipped, so one odd key
// does not take the whole set down.
func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, DefaultHTTPTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderResponseBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS answered %s", resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("decode JWKS: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil {
			k.log.Warn("JWKS key skipped", "jwks_uri", k.url, "error", err)
			continue
		}
		if key.Use != "" && key.Use != "sig" {
			continue
		}
		if !key.Valid() {
			continue
		}
		pub := key.Public()
		if !pub.Valid() || !keyFitsAlg(pub.Key, algFamily(pub.Key)) {
			continue // symmetric or unsupported key
		}
		if rk, ok := pub.Key.(*rsa.PublicKey); ok && rk.N.BitLen() < minRSABits {
			continue
		}
		keys = append(keys, pub)
	}
	return keys, nil
}

// minRSABits is the smallest RSA modulus accepted from a JWKS.
const minRSABits = 2048

// algFamily returns one algorithm the key type can verify, for filtering.
func algFamily(key any) string {
	switch key.(type) {
	case *rsa.PublicKey:
		return "RS256"
	case *ecdsa.PublicKey:
		return "ES256"
	case ed25519.PublicKey:
		return "EdDSA"
	default:
		return ""
	}
}
