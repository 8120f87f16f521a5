package tokens

import (
	"encoding/base64"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/store"
)

// referenceWellFormed is the plain definition wellFormed must agree with:
// Prefix and a strict unpadded base64url decoding to exactly 32 bytes.
func referenceWellFormed(raw string) bool {
	rest, ok := strings.CutPrefix(raw, Prefix)
	if !ok {
		return false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	return err == nil && len(b) == secretBytes
}

// TestWellFormedAndHashAgree: wellFormed accepts exactly what a strict
// base64url decoding accepts, and hashSecret is store.HashSecret, over
// fresh secrets, every one-character change of them, and odd lengths.
func TestWellFormedAndHashAgree(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/=. \n\x00é"
	r := rand.New(rand.NewPCG(1, 2))
	var inputs []string
	for range 50 {
		s := newSecret()
		inputs = append(inputs, s, s[:len(s)-1], s+"A", strings.ToUpper(s[:5])+s[5:])
		i := len(Prefix) + r.IntN(len(s)-len(Prefix))
		for _, c := range alphabet {
			inputs = append(inputs, s[:i]+string(c)+s[i+1:])
		}
		// The last character carries 2 unused bits: every value of it.
		for _, c := range alphabet[:64] {
			inputs = append(inputs, s[:len(s)-1]+string(c))
		}
	}
	inputs = append(inputs, "", Prefix, Prefix+strings.Repeat("A", 43), Prefix+strings.Repeat("_", 43), Prefix+strings.Repeat("A", 42)+"=")
	accepted := 0
	for _, raw := range inputs {
		if got, want := wellFormed(raw), referenceWellFormed(raw); got != want {
			t.Errorf("wellFormed(%q) = %v, the strict decoder says %v", raw, got, want)
		}
		if wellFormed(raw) {
			accepted++
		}
		if hashSecret(raw) != store.HashSecret(raw) {
			t.Errorf("hashSecret(%q) differs from store.HashSecret", raw)
		}
	}
	long := strings.Repeat("x", 3*SecretLen)
	if hashSecret(long) != store.HashSecret(long) {
		t.Error("hashSecret of a long input differs from store.HashSecret")
	}
	if accepted < 50 || accepted == len(inputs) {
		t.Fatalf("%d of %d inputs accepted: the inputs do not exercise both answers", accepted, len(inputs))
	}
}

// TestWellFormedAndHashAllocateNothing: the checks Verify runs on every
// call before the store lookup make no heap allocation.
func TestWellFormedAndHashAllocateNothing(t *testing.T) {
	s := newSecret()
	var sink [32]byte
	if n := testing.AllocsPerRun(100, func() {
		if !wellFormed(s) {
			t.Fatal("a fresh secret is not well formed")
		}
		sink = hashSecret(s)
	}); n > 0 {
		t.Errorf("%v allocations per call, want none", n)
	}
	_ = sink
}

// FuzzWellFormed: wellFormed agrees with the strict decoder, and
// hashSecret with store.HashSecret, on any input.
func FuzzWellFormed(f *testing.F) {
	f.Add(newSecret())
	f.Add(Prefix + strings.Repeat("A", 42) + "B")
	f.Add(Prefix + strings.Repeat("_", 43))
	f.Add("")
	f.Fuzz(func(t *testing.T, raw string) {
		if got, want := wellFormed(raw), referenceWellFormed(raw); got != want {
			t.Fatalf("wellFormed(%q) = %v, the strict decoder says %v", raw, got, want)
		}
		if hashSecret(raw) != store.HashSecret(raw) {
			t.Fatalf("hashSecret(%q) differs from store.HashSecret", raw)
		}
	})
}
