package assertion

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSign measures the gateway's per-request cost: "cached" is the
// steady state (the same identity again within half the TTL), "uncached"
// signs every time (cache disabled).
func BenchmarkSign(b *testing.B) {
	for _, alg := range []string{AlgEdDSA, AlgES256} {
		for _, cached := range []bool{true, false} {
			name := fmt.Sprintf("%s/uncached", alg)
			size := -1
			if cached {
				name, size = fmt.Sprintf("%s/cached", alg), 0
			}
			b.Run(name, func(b *testing.B) {
				s, err := NewSigner(mustKeySet(b, alg), SignerOptions{Issuer: testIssuer, CacheSize: size})
				if err != nil {
					b.Fatal(err)
				}
				id := testIdentity()
				id.Rights = []string{"crm.contacts.read", "crm.contacts.write", "crm.deals.read", "crm.notes.write"}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Sign(id, testAudience); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkVerify is the upstream's per-request cost.
func BenchmarkVerify(b *testing.B) {
	for _, alg := range []string{AlgEdDSA, AlgES256} {
		b.Run(alg, func(b *testing.B) {
			s, _ := NewSigner(mustKeySet(b, alg), SignerOptions{Issuer: testIssuer})
			v := staticVerifier(b, s.JWKS(), nil)
			tok, _ := s.Sign(testIdentity(), testAudience)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(context.Background(), tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
