package auth

import (
	"sync"
	"time"
)

// cacheEntry is a verified token: what Verify returns for it, and until when.
type cacheEntry struct {
	claims     *Claims
	audiences  []string  // canonical aud values
	validUntil time.Time // the entry is served while now is before this
	issuer     *issuer
	kid        string // key that signed a JWT; "" for introspection answers
	jwt        bool
}

// tokenCache maps the SHA-256 of a token to its verification. It is bounded:
// when full, expired entries go first, then arbitrary ones.
type tokenCache struct {
	max int

	mu sync.RWMutex
	m  map[[32]byte]*cacheEntry
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, m: make(map[[32]byte]*cacheEntry)}
}

func (c *tokenCache) get(key [32]byte) *cacheEntry {
	if c.max <= 0 {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[key]
}

func (c *tokenCache) delete(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, key)
}

// put stores e unless its signing key has already left the JWKS (checked
// under the cache lock, so a concurrent drop cannot miss the entry).
func (c *tokenCache) put(key [32]byte, e *cacheEntry, now time.Time) {
	if c.max <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.jwt && !e.issuer.keys.has(e.kid) {
		return
	}
	if len(c.m) >= c.max {
		for k, old := range c.m {
			if !now.Before(old.validUntil) {
				delete(c.m, k)
			}
		}
		for k := range c.m {
			if len(c.m) < c.max*9/10 {
				break
			}
			delete(c.m, k)
		}
	}
	c.m[key] = e
}

// dropKeys removes the JWT entries of iss whose key is not in kids.
func (c *tokenCache) dropKeys(iss *issuer, kids map[string]bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, e := range c.m {
		if e.jwt && e.issuer == iss && !kids[e.kid] {
			delete(c.m, k)
			n++
		}
	}
	return n
}
