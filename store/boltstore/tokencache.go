package boltstore

import (
	"slices"
	"sync"

	"github.com/mcpgate/mcpgate/store"
)

// tokenCacheSize bounds the entries of a tokenCache. Only tokens found in
// the store are cached, so the bound is reached only with more tokens in
// use at once than this; then an arbitrary entry makes room.
const tokenCacheSize = 4096

// tokenCache holds decoded tokens by the SHA-256 of their secret, so that
// TokenByHash — run on every call made with a gateway token — need not
// open a read transaction and decode the record's JSON each time.
//
// It is exact, never stale, for these reasons:
//
//   - bbolt holds an exclusive lock on the file (Open), so no other
//     process writes it, and in this process every write to the tokens and
//     token_hash buckets goes through a Store method (PutToken and
//     RevokeToken; any new writer must call invalidate too). Each calls
//     invalidate after its transaction has ended, so a TokenByHash that
//     begins after the write returned finds no entry the write changed
//     and reads the store.
//   - A reader that missed records the generation before it opens its
//     read transaction and adds what it read only if the generation is
//     still the same (add). A write whose invalidate comes between the two
//     may have committed after the reader's snapshot was taken: the
//     generation has moved, so that possibly old copy is dropped instead
//     of being cached after the invalidation.
//   - Misses are not cached: a hash the store does not know is looked up
//     in the store every time, so a token created later is found at once.
//   - Expiry needs no invalidation: the cached token carries ExpiresAt and
//     callers check Token.Active against their clock on every use.
//
// Entries are never handed out: get returns a copy whose Rights and
// RevokedAt the caller may change.
type tokenCache struct {
	mu  sync.RWMutex
	gen uint64 // incremented by every invalidate
	m   map[[32]byte]store.Token
}

func newTokenCache() *tokenCache {
	return &tokenCache{m: make(map[[32]byte]store.Token)}
}

// get returns a copy of the cached token for hash, if any, and the
// current generation, to be passed to add after a miss.
func (c *tokenCache) get(hash [32]byte) (store.Token, bool, uint64) {
	c.mu.RLock()
	t, ok := c.m[hash]
	gen := c.gen
	c.mu.RUnlock()
	if !ok {
		return store.Token{}, false, gen
	}
	return cloneToken(t), true, gen
}

// add caches t, read from the store under hash, unless a write has
// invalidated the cache since get returned gen. t must not be used by
// anyone else afterwards (pass a copy).
func (c *tokenCache) add(hash [32]byte, t store.Token, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return
	}
	if _, ok := c.m[hash]; !ok && len(c.m) >= tokenCacheSize {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[hash] = t
}

// invalidate drops the entry for *hash (every entry when hash is nil) and
// moves the generation, so that reads begun before it cache nothing.
// Writers call it after their transaction ended, committed or not.
func (c *tokenCache) invalidate(hash *[32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if hash == nil {
		clear(c.m)
		return
	}
	delete(c.m, *hash)
}

// size is the number of cached tokens.
func (c *tokenCache) size() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.m)
}

// cloneToken copies t's slice and pointer so that the copy shares nothing
// mutable with t (strings are immutable).
func cloneToken(t store.Token) store.Token {
	t.Rights = slices.Clone(t.Rights)
	if t.RevokedAt != nil {
		at := *t.RevokedAt
		t.RevokedAt = &at
	}
	return t
}
