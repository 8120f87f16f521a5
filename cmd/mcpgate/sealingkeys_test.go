package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sealing"
)

// TestSealingKeysCommands: generate, rotate --stage, promote and remove
// rewrite the keys file so that what the old key sealed keeps opening
// until it is removed.
func TestSealingKeysCommands(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sealing-keys.json")
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"sealing-keys", "generate", "--out", path}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	if err := run(ctx, []string{"sealing-keys", "generate", "--out", path}, &out, &errb); err == nil || !strings.Contains(err.Error(), "use sealing-keys rotate") {
		t.Errorf("generate over a keys file: %v (want a refusal naming sealing-keys rotate)", err)
	}
	first, err := sealing.LoadKeySet(path)
	if err != nil {
		t.Fatal(err)
	}
	old := first.SealingKeyID()
	sealed, _ := first.Seal("p", []byte("x"))
	if err := run(ctx, []string{"sealing-keys", "rotate", "--in", path, "--stage"}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	staged, _ := sealing.LoadKeySet(path)
	ids := staged.KeyIDs()
	if len(ids) != 2 || ids[0] != old {
		t.Fatalf("staged keys %v", ids)
	}
	if err := run(ctx, []string{"sealing-keys", "promote", "--in", path, "--kid", ids[1]}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	promoted, _ := sealing.LoadKeySet(path)
	if promoted.SealingKeyID() != ids[1] {
		t.Fatalf("promoted: %v", promoted.KeyIDs())
	}
	if _, err := promoted.Open("p", sealed); err != nil {
		t.Errorf("the old key no longer opens before removal: %v", err)
	}
	if err := run(ctx, []string{"sealing-keys", "remove", "--in", path, "--kid", old}, &out, &errb); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	trimmed, _ := sealing.LoadKeySet(path)
	if _, err := trimmed.Open("p", sealed); err == nil {
		t.Error("a removed key still opens")
	}
	if err := run(ctx, []string{"sealing-keys", "remove", "--in", path, "--kid", trimmed.SealingKeyID()}, &out, &errb); err == nil {
		t.Error("removed the sealing key")
	}
}
