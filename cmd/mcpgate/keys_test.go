package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/assertion"
)

func runKeys(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"keys"}, args...), &out, &errOut)
	return out.String(), errOut.String(), err
}

func TestKeysGenerate(t *testing.T) {
	dir := t.TempDir()

	t.Run("stdout", func(t *testing.T) {
		out, _, err := runKeys(t, "generate")
		if err != nil {
			t.Fatal(err)
		}
		ks, err := assertion.ParseKeySet([]byte(out))
		if err != nil {
			t.Fatalf("stdout is not a key file: %v\n%s", err, out)
		}
		if ks.SigningAlgorithm() != assertion.AlgEdDSA || len(ks.KeyIDs()) != 1 {
			t.Fatalf("default: alg %s, kids %v", ks.SigningAlgorithm(), ks.KeyIDs())
		}
	})

	t.Run("file", func(t *testing.T) {
		path := filepath.Join(dir, "keys.json")
		out, _, err := runKeys(t, "generate", "--alg", "ES256", "--out", path)
		if err != nil {
			t.Fatal(err)
		}
		ks, err := assertion.LoadKeySet(path)
		if err != nil {
			t.Fatal(err)
		}
		if ks.SigningAlgorithm() != assertion.AlgES256 || !strings.Contains(out, ks.SigningKeyID()) {
			t.Fatalf("alg %s; output %q", ks.SigningAlgorithm(), out)
		}
		if strings.Contains(out, `"d"`) {
			t.Fatal("private key printed")
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
		}

		before, _ := os.ReadFile(path)
		_, _, err = runKeys(t, "generate", "--out", path)
		if err == nil || !strings.Contains(err.Error(), "already exists") || !strings.Contains(err.Error(), "use keys rotate") {
			t.Fatalf("overwrite: %v", err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.Equal(before, after) {
			t.Fatal("existing key file changed")
		}
	})

	t.Run("bad input", func(t *testing.T) {
		if _, _, err := runKeys(t, "generate", "--alg", "RS256"); err == nil || !strings.Contains(err.Error(), "RS256") {
			t.Fatalf("RS256: %v", err)
		}
		if _, _, err := runKeys(t, "generate", "extra"); !errors.Is(err, errUsage) {
			t.Fatalf("stray argument: %v", err)
		}
		if _, _, err := runKeys(t, "generate", "--out", filepath.Join(dir, "no", "such", "dir.json")); err == nil {
			t.Fatal("write into a missing directory succeeded")
		}
		if _, errOut, err := runKeys(t); !errors.Is(err, errUsage) || !strings.Contains(errOut, "keys generate") {
			t.Fatalf("no subcommand: %v %q", err, errOut)
		}
		if _, _, err := runKeys(t, "shred"); !errors.Is(err, errUsage) {
			t.Fatalf("unknown subcommand: %v", err)
		}
	})
}

func TestKeysRotateLifecycle(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	if _, _, err := runKeys(t, "generate", "--out", path); err != nil {
		t.Fatal(err)
	}
	orig, _ := assertion.LoadKeySet(path)
	first := orig.SigningKeyID()

	// rotate: a new signing key in front, the old one kept.
	out, _, err := runKeys(t, "rotate", "--in", path, "--alg", "ES256")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := assertion.LoadKeySet(path)
	if err != nil {
		t.Fatal(err)
	}
	ids := ks.KeyIDs()
	if len(ids) != 2 || ids[1] != first || ks.SigningAlgorithm() != assertion.AlgES256 {
		t.Fatalf("after rotate: %v (%s)", ids, ks.SigningAlgorithm())
	}
	if !strings.Contains(out, ids[0]) || !strings.Contains(out, "remove") {
		t.Fatalf("rotate output %q", out)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode after rotate %v", fi.Mode().Perm())
	}
	second := ids[0]

	// An assertion signed by the original key still verifies against the
	// rotated set's public JWKS.
	signer, _ := assertion.NewSigner(orig, assertion.SignerOptions{Issuer: "gw"})
	tok, _ := signer.Sign(assertion.Identity{Tenant: "t", Subject: "s", Connection: "c"}, "crm")
	pubOut, _, err := runKeys(t, "public", "--in", path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pubOut, `"d"`) {
		t.Fatal("public JWKS has private keys")
	}
	v, err := assertion.NewVerifier(assertion.VerifierOptions{Issuer: "gw", Audience: "crm", Keys: []byte(pubOut)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("old key's assertion after rotate: %v", err)
	}

	// stage, then promote.
	out, _, err = runKeys(t, "rotate", "--in", path, "--stage")
	if err != nil {
		t.Fatal(err)
	}
	ks, _ = assertion.LoadKeySet(path)
	ids = ks.KeyIDs()
	if len(ids) != 3 || ids[0] != second || !strings.Contains(out, "keys promote --in "+path+" --kid "+ids[2]) {
		t.Fatalf("after stage: %v\n%s", ids, out)
	}
	staged := ids[2]
	if _, _, err := runKeys(t, "promote", "--in", path, "--kid", staged); err != nil {
		t.Fatal(err)
	}
	ks, _ = assertion.LoadKeySet(path)
	if ks.SigningKeyID() != staged {
		t.Fatalf("after promote: %v", ks.KeyIDs())
	}

	// remove the oldest; the signing key cannot go.
	if _, _, err := runKeys(t, "remove", "--in", path, "--kid", first); err != nil {
		t.Fatal(err)
	}
	ks, _ = assertion.LoadKeySet(path)
	if ids := ks.KeyIDs(); len(ids) != 2 || ids[0] != staged || ids[1] != second {
		t.Fatalf("after remove: %v", ids)
	}
	if _, _, err := runKeys(t, "remove", "--in", path, "--kid", staged); err == nil {
		t.Fatal("removed the signing key")
	}

	// No temporary files left behind.
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries", len(entries))
	}
	var doc map[string]any
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
}

func TestKeysRotateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"keys":[{"kty":"oct","kid":"x","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`), 0o600)
	good := filepath.Join(dir, "good.json")
	if _, _, err := runKeys(t, "generate", "--out", good); err != nil {
		t.Fatal(err)
	}
	goodBytes, _ := os.ReadFile(good)

	for name, args := range map[string][]string{
		"rotate without --in":   {"rotate"},
		"promote without --kid": {"promote", "--in", good},
		"remove without --kid":  {"remove", "--in", good},
		"public without --in":   {"public"},
	} {
		if _, _, err := runKeys(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want usage error", name, err)
		}
	}
	for name, args := range map[string][]string{
		"missing file":      {"rotate", "--in", filepath.Join(dir, "missing.json")},
		"symmetric key":     {"rotate", "--in", bad},
		"unsupported alg":   {"rotate", "--in", good, "--alg", "HS256"},
		"promote unknown":   {"promote", "--in", good, "--kid", "nope"},
		"remove unknown":    {"remove", "--in", good, "--kid", "nope"},
		"public of garbage": {"public", "--in", bad},
	} {
		if _, _, err := runKeys(t, args...); err == nil || errors.Is(err, errUsage) {
			t.Errorf("%s: %v, want an error", name, err)
		}
	}
	if after, _ := os.ReadFile(good); !bytes.Equal(after, goodBytes) {
		t.Fatal("a failed command changed the key file")
	}
}
