package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// benchTokens is the number of tokens stored before TokenByHash runs.
const benchTokens = 1000

// Bench runs the shared benchmarks against the backend open opens:
//
//	AppendAudit           one caller at a time
//	AppendAudit/parallel  GOMAXPROCS×b.SetParallelism callers
//	TokenByHash           one caller, benchTokens tokens stored
//	TokenByHash/parallel
func Bench(b *testing.B, open OpenFunc) {
	var n atomic.Int64
	fresh := func(b *testing.B) store.Store { return open(b, fmt.Sprintf("bench%d", n.Add(1))) }

	appendAudit := func(b *testing.B, par bool) {
		st := fresh(b)
		var seq atomic.Int64
		rec := func() store.AuditRecord {
			i := seq.Add(1)
			return record(fmt.Sprintf("bench-%012d", i), fmt.Sprintf("tenant-%d", i%8), base.Add(time.Duration(i)*time.Microsecond))
		}
		b.ReportAllocs()
		b.ResetTimer()
		if !par {
			for b.Loop() {
				if err := st.AppendAudit(b.Context(), rec()); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := st.AppendAudit(b.Context(), rec()); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("AppendAudit", func(b *testing.B) { appendAudit(b, false) })
	b.Run("AppendAudit/parallel", func(b *testing.B) { appendAudit(b, true) })

	tokenByHash := func(b *testing.B, par bool) {
		st := fresh(b)
		hashes := make([][32]byte, benchTokens)
		for i := range hashes {
			tok := newToken(fmt.Sprintf("tok-%d", i), fmt.Sprintf("tenant-%d", i%8), "alice", base.Add(time.Duration(i)*time.Second))
			hashes[i] = tok.Hash
			if err := st.PutToken(b.Context(), tok); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		b.ResetTimer()
		if !par {
			i := 0
			for b.Loop() {
				if _, err := st.TokenByHash(b.Context(), hashes[i%benchTokens]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			return
		}
		var seq atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := st.TokenByHash(b.Context(), hashes[seq.Add(1)%benchTokens]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	b.Run("TokenByHash", func(b *testing.B) { tokenByHash(b, false) })
	b.Run("TokenByHash/parallel", func(b *testing.B) { tokenByHash(b, true) })
	benchWrites(b, fresh)
}

// benchWrites measures what the store adds to a silent write:
//
//	ReplayWrite           ClaimReplay + FinishReplay of a new fingerprint
//	                      with a 1 KiB result, one caller at a time
//	ReplayWrite/parallel  the same, GOMAXPROCS×16 callers
//	ReplayHit             ClaimReplay of a finished fingerprint (a repeat)
func benchWrites(b *testing.B, fresh func(*testing.B) store.Store) {
	result := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("x", 1000) + `"}]}`)
	write := func(b *testing.B, st store.Store, i int64) error {
		key, claim := fmt.Sprintf("fp-%012d", i), fmt.Sprintf("claim-%d", i)
		e := store.ReplayEntry{Claim: claim, State: store.ReplayRunning, Digest: "d"}
		if _, won, err := st.ClaimReplay(b.Context(), key, e, time.Hour); err != nil || !won {
			return fmt.Errorf("claim %s: won %v, %v", key, won, err)
		}
		return st.FinishReplay(b.Context(), key, claim, store.ReplayDone, result, time.Hour)
	}
	b.Run("ReplayWrite", func(b *testing.B) {
		st := fresh(b)
		var i int64
		b.ReportAllocs()
		for b.Loop() {
			i++
			if err := write(b, st, i); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ReplayWrite/parallel", func(b *testing.B) {
		st := fresh(b)
		var seq atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := write(b, st, seq.Add(1)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("ReplayHit", func(b *testing.B) {
		st := fresh(b)
		if err := write(b, st, 0); err != nil {
			b.Fatal(err)
		}
		e := store.ReplayEntry{Claim: "repeat", State: store.ReplayRunning}
		b.ReportAllocs()
		for b.Loop() {
			if cur, won, err := st.ClaimReplay(b.Context(), fmt.Sprintf("fp-%012d", 0), e, time.Hour); err != nil || won || cur.State != store.ReplayDone {
				b.Fatalf("repeat: %+v, won %v, %v", cur, won, err)
			}
		}
	})
}
