package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/redisstore"
	"github.com/mcpgate/mcpgate/store/redistest"
	"github.com/mcpgate/mcpgate/store/storetest"
)

// opener gives each name its own key prefix on srv, and a new client per
// open (a reopen is a restarted replica).
func opener(srv *redistest.Server) storetest.OpenFunc {
	return func(tb testing.TB, name string) store.Store {
		tb.Helper()
		s, err := redisstore.Open(tb.Context(), srv.URL, redisstore.Options{Prefix: "test:" + name + ":"})
		if err != nil {
			tb.Fatalf("open: %v", err)
		}
		tb.Cleanup(func() { _ = s.Close() })
		return s
	}
}

func TestSuite(t *testing.T) {
	storetest.Run(t, opener(redistest.Start(t)))
}

func BenchmarkStore(b *testing.B) {
	storetest.Bench(b, opener(redistest.Start(b)))
}

func TestEvictionPolicy(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := t.Context()
	for _, policy := range []string{"allkeys-lru", "volatile-ttl", "allkeys-random", "volatile-lfu"} {
		if err := rdb.ConfigSet(ctx, "maxmemory-policy", policy).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := redisstore.Open(ctx, srv.URL, redisstore.Options{})
		if !errors.Is(err, redisstore.ErrEvictingRedis) || !strings.Contains(err.Error(), policy) {
			t.Errorf("Open with %s: err = %v, want ErrEvictingRedis naming the policy", policy, err)
		}
		s, err := redisstore.Open(ctx, srv.URL, redisstore.Options{AllowEviction: true})
		if err != nil {
			t.Errorf("Open with %s and AllowEviction: %v", policy, err)
		} else {
			s.Close()
		}
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.Open(ctx, srv.URL, redisstore.Options{})
	if err != nil {
		t.Fatalf("Open with noeviction: %v", err)
	}
	s.Close()
}

func TestKeysUnderPrefix(t *testing.T) {
	srv := redistest.Start(t)
	ctx := t.Context()
	s, err := redisstore.Open(ctx, srv.URL, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != redisstore.DefaultPrefix {
		t.Errorf("Prefix = %q, want %q", s.Prefix(), redisstore.DefaultPrefix)
	}
	now := time.Now()
	tok := store.Token{ID: "tok", Tenant: "acme", Creator: "alice", Hash: store.HashSecret("x"), CreatedAt: now}
	if err := s.PutToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := s.BindSession(ctx, "sess", store.SessionBinding{Connection: "tok"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, store.AuditRecord{ID: "r", Time: now, Channel: store.ChannelMCP, Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	keys, err := srv.Client(t).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 8 {
		t.Errorf("only %d keys: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, redisstore.DefaultPrefix) {
			t.Errorf("key %q is outside the prefix", k)
		}
	}
	// The session key expires; nothing else does.
	for _, k := range keys {
		ttl, err := srv.Client(t).PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if isSession := strings.HasPrefix(k, redisstore.DefaultPrefix+"session:"); isSession != (ttl > 0) {
			t.Errorf("key %q has ttl %v", k, ttl)
		}
	}
}

func TestCallerOwnsClient(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	s, err := redisstore.New(t.Context(), rdb, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Ping after Close: %v", err)
	}
	if err := rdb.Ping(t.Context()).Err(); err != nil {
		t.Errorf("the caller's client was closed: %v", err)
	}
}

func TestSchemaVersion(t *testing.T) {
	srv := redistest.Start(t)
	if err := srv.Client(t).Set(t.Context(), "x:schema", "99", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := redisstore.Open(t.Context(), srv.URL, redisstore.Options{Prefix: "x:"})
	if err == nil || !strings.Contains(err.Error(), `"99"`) {
		t.Fatalf("Open of a newer schema: err = %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := redisstore.Open(ctx, "unix://"+t.TempDir()+"/none.sock", redisstore.Options{})
	if err == nil {
		t.Fatal("Open of a missing socket succeeded")
	}
	_, err = redisstore.Open(t.Context(), "http://x", redisstore.Options{})
	if err == nil {
		t.Fatal("Open of a bad URL succeeded")
	}
}
