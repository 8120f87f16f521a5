package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCommandEnvironAndRedaction(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u := Upstream{Name: "files", Route: "/mcp", Command: &Command{Argv: []string{"server"},
		Env: map[string]string{"LOG_LEVEL": "info"}, EnvFiles: map[string]string{"TOKEN": secret}}}
	parent := map[string]string{"PATH": "/bin", "HOME": "/home/m", "MCPGATE_SECRET": "not for the child"}
	env, err := u.Command.Environ(func(k string) string { return parent[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=/bin", "HOME=/home/m", "LOG_LEVEL=info", "TOKEN=s3cret"}
	if !slices.Equal(env, want) {
		t.Errorf("Environ = %q, want %q", env, want)
	}
	// Nothing of mcpgate's environment beyond the base list, even when
	// nothing is set: an empty environment, never nil (exec's "inherit").
	if env, _ := (&Command{}).Environ(func(string) string { return "" }); env == nil || len(env) != 0 {
		t.Errorf("empty Environ = %#v", env)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("upstream", "upstream", u)
	if out := buf.String(); strings.Contains(out, "s3cret") || strings.Contains(out, "info\"") || !strings.Contains(out, "TOKEN") {
		t.Errorf("log: %s", out)
	}
	if _, err := (&Command{EnvFiles: map[string]string{"X": filepath.Join(dir, "missing")}}).Environ(os.Getenv); err == nil || !strings.Contains(err.Error(), "env_files.X") {
		t.Errorf("missing env file: %v", err)
	}
}
