package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
)

// TestReloadAssertionKeys: SIGHUP (App.Reload) rereads the keys file; a
// rotated set is published and signs at once, a broken file keeps the keys
// in use, and both outcomes are counted.
func TestReloadAssertionKeys(t *testing.T) {
	dir := t.TempDir()
	ks, err := assertion.GenerateKeySet("")
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(dir, "keys.json")
	write := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(keysFile, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	priv, _ := ks.MarshalPrivate()
	write(priv)
	rightsFile := filepath.Join(dir, "rights.yaml")
	if err := os.WriteFile(rightsFile, []byte("tenants:\n  acme:\n    alice:\n      rights: [a]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`
listeners:
  proxy: {address: 127.0.0.1:0}
  admin: {address: 127.0.0.1:0}
upstreams:
  - {name: demo, url: "http://127.0.0.1:1/mcp"}
auth:
  resource_base_url: http://127.0.0.1:8080
  gateway_tokens: {}
store:
  bolt: {path: %q}
rights:
  file: {path: %q}
assertion:
  keys_file: %q
`, filepath.Join(dir, "state.db"), rightsFile, keysFile)), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = a.Shutdown(sctx)
	}()
	old := ks.SigningKeyID()
	if !strings.Contains(string(a.id.signer.JWKS()), old) {
		t.Fatal("initial key not published")
	}

	rotated, err := ks.Rotate("")
	if err != nil {
		t.Fatal(err)
	}
	priv, _ = rotated.MarshalPrivate()
	write(priv)
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if a.id.signer.SigningKeyID() != rotated.SigningKeyID() || !strings.Contains(string(a.id.signer.JWKS()), old) {
		t.Fatalf("after rotation: signing %s, jwks %s", a.id.signer.SigningKeyID(), a.id.signer.JWKS())
	}

	write([]byte("{not json"))
	if err := a.Reload(ctx); err == nil {
		t.Fatal("a broken keys file reloaded")
	}
	if a.id.signer.SigningKeyID() != rotated.SigningKeyID() {
		t.Error("a broken keys file replaced the keys in use")
	}
	for result, want := range map[string]float64{"success": 1, "failure": 1} {
		if got := counter(t, a, "mcpgate_assertion_key_reloads_total", result); got != want {
			t.Errorf("%s count %v, want %v", result, got, want)
		}
	}
}

// counter reads one series of a counter from the app's registry.
func counter(t *testing.T, a *App, name, result string) float64 {
	t.Helper()
	mfs, err := a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{result=%q} not found", name, result)
	return 0
}
