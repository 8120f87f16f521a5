package boltstore

import (
	"testing"

	"github.com/mcpgate/mcpgate/store"
)

// TestTokenCacheBound: the cache holds at most tokenCacheSize tokens; a
// stale generation adds nothing; invalidate(nil) empties it.
func TestTokenCacheBound(t *testing.T) {
	c := newTokenCache()
	_, _, gen := c.get([32]byte{})
	for i := range tokenCacheSize + 10 {
		h := [32]byte{byte(i), byte(i >> 8), 1}
		c.add(h, store.Token{ID: "t"}, gen)
		if got, ok, _ := c.get(h); !ok || got.ID != "t" {
			t.Fatalf("entry %d missing right after add", i)
		}
	}
	if n := c.size(); n != tokenCacheSize {
		t.Fatalf("%d entries, want the bound %d", n, tokenCacheSize)
	}
	c.invalidate(nil)
	if n := c.size(); n != 0 {
		t.Fatalf("%d entries after invalidate(nil)", n)
	}
	c.add([32]byte{9}, store.Token{ID: "stale"}, gen)
	if _, ok, _ := c.get([32]byte{9}); ok {
		t.Fatal("an add with a generation from before invalidate was cached")
	}
}
