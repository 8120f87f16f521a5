package boltstore_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

var tokenBase = time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC)

func openTokens(t *testing.T) *boltstore.Store {
	t.Helper()
	s, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func putToken(t *testing.T, s *boltstore.Store, id string) store.Token {
	t.Helper()
	tok := store.Token{ID: id, Tenant: "acme", Creator: "alice", Hash: store.HashSecret("secret " + id),
		Rights: []string{"a:read", "b:write"}, CreatedAt: tokenBase, ExpiresAt: tokenBase.Add(time.Hour)}
	if err := s.PutToken(t.Context(), tok); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTokenCacheRevokeAfterCachedRead: a token read (and so cached) and
// then revoked is returned revoked by the next TokenByHash.
func TestTokenCacheRevokeAfterCachedRead(t *testing.T) {
	ctx := t.Context()
	s := openTokens(t)
	tok := putToken(t, s, "tok-a")
	other := putToken(t, s, "tok-b")
	for range 2 {
		for _, x := range []store.Token{tok, other} {
			got, err := s.TokenByHash(ctx, x.Hash)
			if err != nil || got.ID != x.ID || got.RevokedAt != nil || !slices.Equal(got.Rights, x.Rights) {
				t.Fatalf("TokenByHash(%s) = %+v, %v", x.ID, got, err)
			}
		}
	}
	if n := boltstore.CachedTokens(s); n != 2 {
		t.Fatalf("%d tokens cached after reading two, want 2 (the test needs the cache in use)", n)
	}
	at := tokenBase.Add(time.Minute)
	if err := s.RevokeToken(ctx, tok.ID, at); err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenByHash(ctx, tok.Hash)
	if err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		t.Fatalf("after RevokeToken: %+v, %v; want revoked at %s", got, err, at)
	}
	if got.Active(tokenBase) {
		t.Error("a revoked token is active")
	}
	// Revoking again keeps the first time, and the answer stays revoked.
	if err := s.RevokeToken(ctx, tok.ID, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.TokenByHash(ctx, tok.Hash); err != nil || got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
		t.Fatalf("after a second RevokeToken: %+v, %v", got, err)
	}
	// The other token is untouched.
	if got, err := s.TokenByHash(ctx, other.Hash); err != nil || got.RevokedAt != nil {
		t.Fatalf("other token: %+v, %v", got, err)
	}
	// A closed store answers ErrClosed even for a cached token.
	_ = s.Close()
	if _, err := s.TokenByHash(ctx, other.Hash); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("TokenByHash after Close = %v, want ErrClosed", err)
	}
}

// TestTokenCacheOnlyKnownHashes: the cache never answers for a hash the
// store does not hold, and a miss is not remembered: a token stored after
// a failed lookup of its hash is found by the next one.
func TestTokenCacheOnlyKnownHashes(t *testing.T) {
	ctx := t.Context()
	s := openTokens(t)
	tok := putToken(t, s, "tok-a")
	if _, err := s.TokenByHash(ctx, tok.Hash); err != nil {
		t.Fatal(err)
	}
	near := tok.Hash
	near[31] ^= 1
	for _, h := range [][32]byte{near, {}, store.HashSecret("secret tok-later")} {
		for range 2 {
			if got, err := s.TokenByHash(ctx, h); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("TokenByHash(%x) = %+v, %v; want ErrNotFound", h, got, err)
			}
		}
	}
	if n := boltstore.CachedTokens(s); n != 1 {
		t.Fatalf("%d tokens cached, want only the one found", n)
	}
	later := putToken(t, s, "tok-later")
	if got, err := s.TokenByHash(ctx, later.Hash); err != nil || got.ID != "tok-later" {
		t.Fatalf("token stored after a miss: %+v, %v", got, err)
	}
}

// TestTokenCacheReturnsCopies: changing a returned token's rights or
// revocation time does not change what the next lookup returns.
func TestTokenCacheReturnsCopies(t *testing.T) {
	ctx := t.Context()
	s := openTokens(t)
	tok := putToken(t, s, "tok-a")
	at := tokenBase.Add(time.Minute)
	if err := s.RevokeToken(ctx, tok.ID, at); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // the first read fills the cache; the others hit it
		got, err := s.TokenByHash(ctx, tok.Hash)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Rights, []string{"a:read", "b:write"}) || got.RevokedAt == nil || !got.RevokedAt.Equal(at) {
			t.Fatalf("read %d: %+v (a caller's change leaked into the cache)", i, got)
		}
		got.Rights[0] = "changed"
		got.Rights = append(got.Rights[:1], "added")
		*got.RevokedAt = time.Time{}
	}
}

// TestTokenCacheDropsReadRacingAWrite: a lookup whose read transaction
// ended before a revocation committed returns what it read, but does not
// cache it once the revocation has invalidated the cache; the next lookup
// sees the revocation. The hook runs the revocation exactly between the
// read and the caching, the window a generation check must close.
func TestTokenCacheDropsReadRacingAWrite(t *testing.T) {
	ctx := t.Context()
	s := openTokens(t)
	tok := putToken(t, s, "tok-a")
	at := tokenBase.Add(time.Minute)
	var once sync.Once
	boltstore.SetAfterTokenRead(s, func() {
		once.Do(func() {
			if err := s.RevokeToken(ctx, tok.ID, at); err != nil {
				t.Error(err)
			}
		})
	})
	got, err := s.TokenByHash(ctx, tok.Hash)
	if err != nil || got.RevokedAt != nil {
		t.Fatalf("racing read: %+v, %v; want the token as read, unrevoked", got, err)
	}
	if n := boltstore.CachedTokens(s); n != 0 {
		t.Fatalf("the read that raced the revocation was cached (%d entries)", n)
	}
	got, err = s.TokenByHash(ctx, tok.Hash)
	if err != nil || got.RevokedAt == nil {
		t.Fatalf("after the revocation: %+v, %v; want revoked", got, err)
	}

	if n := boltstore.CachedTokens(s); n != 1 {
		t.Fatalf("%d entries after a quiet read, want 1", n)
	}

	// A token created meanwhile also moves the generation (every token
	// write does): the read is not cached, the next one is.
	third := putToken(t, s, "tok-c")
	var once2 sync.Once
	boltstore.SetAfterTokenRead(s, func() { once2.Do(func() { putToken(t, s, "tok-b") }) })
	if got, err := s.TokenByHash(ctx, third.Hash); err != nil || got.ID != third.ID {
		t.Fatalf("%+v, %v", got, err)
	}
	boltstore.SetAfterTokenRead(s, nil)
	if n := boltstore.CachedTokens(s); n != 1 {
		t.Fatalf("cached across a token write: %d entries, want 1 (tok-a only)", n)
	}
	if _, err := s.TokenByHash(ctx, third.Hash); err != nil {
		t.Fatal(err)
	}
	if n := boltstore.CachedTokens(s); n != 2 {
		t.Fatalf("%d entries after a quiet read, want 2", n)
	}
}

// TestTokenCacheConcurrentRevoke hammers TokenByHash from several
// goroutines while tokens are revoked one by one (and others created):
// no lookup that starts after a RevokeToken returned may see that token
// unrevoked. Run with -race.
func TestTokenCacheConcurrentRevoke(t *testing.T) {
	ctx := t.Context()
	s := openTokens(t)
	const n = 24
	toks := make([]store.Token, n)
	revoked := make([]atomic.Bool, n)
	for i := range toks {
		toks[i] = putToken(t, s, fmt.Sprintf("tok-%02d", i))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	for r := range 4 {
		wg.Go(func() {
			for j := r; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				i := j % n
				after := revoked[i].Load()
				got, err := s.TokenByHash(ctx, toks[i].Hash)
				reads.Add(1)
				if err != nil || got.ID != toks[i].ID {
					t.Errorf("TokenByHash(%s) = %+v, %v", toks[i].ID, got, err)
					return
				}
				if after && got.RevokedAt == nil {
					t.Errorf("%s read unrevoked after its RevokeToken returned", got.ID)
					return
				}
				if !slices.Equal(got.Rights, []string{"a:read", "b:write"}) {
					t.Errorf("%s rights %v", got.ID, got.Rights)
					return
				}
				got.Rights[0] = "scribbled" // must not reach other readers
			}
		})
	}
	wg.Go(func() {
		for i := range 8 {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.PutToken(ctx, store.Token{ID: fmt.Sprintf("new-%d", i), Tenant: "acme", Creator: "bob",
				Hash: store.HashSecret(fmt.Sprintf("new %d", i)), CreatedAt: tokenBase}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	for i := range toks {
		if err := s.RevokeToken(ctx, toks[i].ID, tokenBase.Add(time.Duration(i+1)*time.Second)); err != nil {
			t.Fatal(err)
		}
		revoked[i].Store(true)
	}
	// Let the readers go round every token at least once more after the
	// last revocation, so each revoked token is looked up again.
	for target := reads.Load() + 4*n; reads.Load() < target && !t.Failed(); {
		time.Sleep(time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for i := range toks {
		got, err := s.TokenByHash(ctx, toks[i].Hash)
		if err != nil || got.RevokedAt == nil {
			t.Fatalf("%s at the end: %+v, %v", toks[i].ID, got, err)
		}
	}
}
