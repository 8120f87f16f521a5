package sealing_test

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sealing"
)

func mustGenerate(t *testing.T) *sealing.KeySet {
	t.Helper()
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestSealOpen(t *testing.T) {
	ks := mustGenerate(t)
	// A marker long enough never to appear in random base64url by chance.
	plain := []byte(`{"act":"plaintext-marker","exp":1}`)
	s1, err := ks.Seal("requestState", plain)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := ks.Seal("requestState", plain)
	if s1 == s2 {
		t.Error("two seals of the same value are equal (nonce reused)")
	}
	if !sealing.IsSealed(s1) || !strings.HasPrefix(s1, sealing.Prefix+ks.SealingKeyID()+".") {
		t.Errorf("sealed value %q lacks its prefix and kid", s1)
	}
	if strings.Contains(s1, "plaintext-marker") || strings.Contains(s1, base64.RawURLEncoding.EncodeToString(plain)[:12]) {
		t.Errorf("sealed value shows its plaintext: %q", s1)
	}
	got, err := ks.Open("requestState", s1)
	if err != nil || string(got) != string(plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Another purpose never opens it.
	if _, err := ks.Open("other", s1); !errors.Is(err, sealing.ErrForged) {
		t.Errorf("opened for another purpose: %v", err)
	}
}

func TestOpenRefusesTampering(t *testing.T) {
	ks := mustGenerate(t)
	s, _ := ks.Seal("p", []byte("approve B-1001"))
	prefix := sealing.Prefix + ks.SealingKeyID() + "."
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(s, prefix))
	if err != nil {
		t.Fatal(err)
	}
	// Flip every bit position's byte in turn: nonce, ciphertext, tag.
	for i := range raw {
		b := append([]byte(nil), raw...)
		b[i] ^= 0x01
		if _, err := ks.Open("p", prefix+base64.RawURLEncoding.EncodeToString(b)); !errors.Is(err, sealing.ErrForged) {
			t.Fatalf("byte %d flipped: Open err = %v, want ErrForged", i, err)
		}
	}
	// Truncated, extended.
	if _, err := ks.Open("p", prefix+base64.RawURLEncoding.EncodeToString(raw[:10])); !errors.Is(err, sealing.ErrForged) {
		t.Errorf("truncated: %v", err)
	}
	if _, err := ks.Open("p", prefix+base64.RawURLEncoding.EncodeToString(append(raw, 0))); !errors.Is(err, sealing.ErrForged) {
		t.Errorf("extended: %v", err)
	}
	for _, bad := range []string{"", "upstream-state", sealing.Prefix, sealing.Prefix + "kid", sealing.Prefix + "k!d.AAAA", prefix + "not base64!"} {
		if _, err := ks.Open("p", bad); !errors.Is(err, sealing.ErrNotSealed) {
			t.Errorf("Open(%q) = %v, want ErrNotSealed", bad, err)
		}
	}
	// A made-up value under the real kid does not authenticate.
	if _, err := ks.Open("p", prefix+base64.RawURLEncoding.EncodeToString(make([]byte, 60))); !errors.Is(err, sealing.ErrForged) {
		t.Errorf("forged value: %v", err)
	}
}

func TestOpenRefusesOtherKeys(t *testing.T) {
	a, b := mustGenerate(t), mustGenerate(t)
	s, _ := a.Seal("p", []byte("x"))
	if _, err := b.Open("p", s); !errors.Is(err, sealing.ErrUnknownKey) {
		t.Errorf("another set opened it: %v", err)
	}
	// Same kid, other key material: forged.
	fa, _ := a.Marshal()
	fb, _ := b.Marshal()
	kidA, kidB := a.SealingKeyID(), b.SealingKeyID()
	sameKid, err := sealing.ParseKeySet([]byte(strings.Replace(string(fb), kidB, kidA, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sameKid.Open("p", s); !errors.Is(err, sealing.ErrForged) {
		t.Errorf("a key of the same kid and other material opened it: %v", err)
	}
	if string(fa) == string(fb) {
		t.Error("two generated sets are equal")
	}
}

func TestRotation(t *testing.T) {
	old := mustGenerate(t)
	sealedOld, _ := old.Seal("p", []byte("before"))

	// Stage: the new key opens but does not seal yet.
	staged, kid, err := old.Stage()
	if err != nil {
		t.Fatal(err)
	}
	if staged.SealingKeyID() != old.SealingKeyID() || len(staged.KeyIDs()) != 2 {
		t.Fatalf("staged set: %v", staged.KeyIDs())
	}
	// Promote: the new key seals; the old one still opens.
	promoted, err := staged.Promote(kid)
	if err != nil {
		t.Fatal(err)
	}
	if promoted.SealingKeyID() != kid {
		t.Fatalf("promoted sealing key %s, want %s", promoted.SealingKeyID(), kid)
	}
	if got, err := promoted.Open("p", sealedOld); err != nil || string(got) != "before" {
		t.Errorf("a value sealed before the rotation: %q, %v", got, err)
	}
	sealedNew, _ := promoted.Seal("p", []byte("after"))
	// A replica still on the staged set opens what the promoted set sealed.
	if got, err := staged.Open("p", sealedNew); err != nil || string(got) != "after" {
		t.Errorf("staged replica: %q, %v", got, err)
	}
	// The keys file round-trips.
	file, err := promoted.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sealing-keys.json")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := sealing.LoadKeySet(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loaded.Open("p", sealedOld); err != nil || string(got) != "before" {
		t.Errorf("loaded set: %q, %v", got, err)
	}
	// Remove the old key: what it sealed no longer opens.
	if _, err := loaded.Remove(kid); err == nil {
		t.Error("removed the sealing key")
	}
	trimmed, err := loaded.Remove(old.SealingKeyID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trimmed.Open("p", sealedOld); !errors.Is(err, sealing.ErrUnknownKey) {
		t.Errorf("a removed key still opens: %v", err)
	}
	if got, err := trimmed.Open("p", sealedNew); err != nil || string(got) != "after" {
		t.Errorf("after removal: %q, %v", got, err)
	}
	// Rotate puts a fresh key first at once.
	rotated, err := trimmed.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if rotated.SealingKeyID() == kid || rotated.KeyIDs()[1] != kid {
		t.Errorf("rotated keys %v", rotated.KeyIDs())
	}
	// A Sealer swaps sets in place.
	s := sealing.NewSealer(old)
	v, _ := s.Seal("p", []byte("x"))
	s.SetKeys(trimmed)
	if _, err := s.Open("p", v); !errors.Is(err, sealing.ErrUnknownKey) {
		t.Errorf("Sealer kept the old keys: %v", err)
	}
}

func TestParseKeySetRefuses(t *testing.T) {
	k32 := base64.RawURLEncoding.EncodeToString(make([]byte, 32))
	for name, doc := range map[string]string{
		"not json":      `nope`,
		"no keys":       `{"keys":[]}`,
		"kty":           `{"keys":[{"kty":"RSA","kid":"a","k":"` + k32 + `"}]}`,
		"alg":           `{"keys":[{"kty":"oct","kid":"a","alg":"HS256","k":"` + k32 + `"}]}`,
		"use":           `{"keys":[{"kty":"oct","kid":"a","use":"sig","k":"` + k32 + `"}]}`,
		"kid missing":   `{"keys":[{"kty":"oct","k":"` + k32 + `"}]}`,
		"kid with dot":  `{"keys":[{"kty":"oct","kid":"a.b","k":"` + k32 + `"}]}`,
		"duplicate kid": `{"keys":[{"kty":"oct","kid":"a","k":"` + k32 + `"},{"kty":"oct","kid":"a","k":"` + k32 + `"}]}`,
		"short key":     `{"keys":[{"kty":"oct","kid":"a","k":"AAAA"}]}`,
	} {
		if _, err := sealing.ParseKeySet([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), k32) {
			t.Errorf("%s: error shows key material: %v", name, err)
		}
	}
}
