package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/policy"
)

// TestInitDemo: init against the demo upstream writes a draft that
// validate accepts unchanged, with a declaration per listed tool, the
// guesses the demo's names call for, and a manifest pinning every tool.
func TestInitDemo(t *testing.T) {
	endpoint := serveMCP(t, demo.New(demo.Options{}).Handler())
	dir := t.TempDir()
	out := filepath.Join(dir, "crm.yaml")
	stdout, stderr, err := runCmd("init", "--upstream", endpoint, "--out", out, "--name", "crm")
	if err != nil {
		t.Fatalf("init: %v\n%s", err, stderr)
	}
	if stdout != "" {
		t.Errorf("stdout with --out: %q", stdout)
	}
	if !strings.Contains(stderr, "9 tools of") || !strings.Contains(stderr, "mcpgate validate --config "+out) {
		t.Errorf("stderr: %s", stderr)
	}
	if vout, verr, err := runCmd("validate", "--config", out); err != nil {
		t.Fatalf("validate: %v\n%s%s", err, vout, verr)
	}
	cfg, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Upstreams[0]
	if u.Name != "crm" || u.URL != endpoint || u.Route != "/mcp" {
		t.Errorf("upstream %+v", u)
	}
	want := map[string]string{
		demo.ToolFindCustomers:           policy.EffectRead,
		demo.ToolGetBooking:              policy.EffectRead,
		demo.ToolListTechnicians:         policy.EffectRead,
		demo.ToolCreateBooking:           policy.EffectSilentWrite,
		demo.ToolUpdateBooking:           policy.EffectSilentWrite,
		demo.ToolSendBookingConfirmation: policy.EffectNotify,
		demo.ToolPageTechnician:          policy.EffectWake,
		demo.ToolMuteBookingAlerts:       policy.EffectAlerting,
		demo.ToolCancelBooking:           policy.EffectDelete,
	}
	for name, effect := range want {
		d, ok := u.Tools[name]
		if !ok || d.Effect != effect || len(d.Rights) != 1 {
			t.Errorf("%s: %+v (declared %t), want effect %s", name, d, ok, effect)
		}
	}
	if len(u.Tools) != len(want) {
		t.Errorf("%d tools declared", len(u.Tools))
	}
	m, err := catalog.LoadManifest(cfg.Catalog.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.Upstreams["crm"].Tools); got != len(want) {
		t.Errorf("%d tools pinned", got)
	}
	if filepath.Dir(cfg.Catalog.Manifest) != dir || filepath.Base(cfg.Catalog.Manifest) != "crm.manifest.json" {
		t.Errorf("catalog.manifest %q", cfg.Catalog.Manifest)
	}
	text, _ := os.ReadFile(out)
	for _, w := range []string{"lint (", `verb "find" suggests read`, "catalog:\n  manifest: \"crm.manifest.json\""} {
		if !strings.Contains(string(text), w) {
			t.Errorf("draft lacks %q", w)
		}
	}

	// Neither file is overwritten without --force.
	before, _ := os.ReadFile(out)
	_, _, err = runCmd("init", "--upstream", endpoint, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "exists") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("existing --out: %v", err)
	}
	if after, _ := os.ReadFile(out); string(after) != string(before) {
		t.Error("--out was changed")
	}
	os.Rename(out, out+".bak")
	_, _, err = runCmd("init", "--upstream", endpoint, "--out", out)
	if err == nil || !strings.Contains(err.Error(), "crm.manifest.json exists") {
		t.Errorf("existing manifest: %v", err)
	}
	if _, _, err := runCmd("init", "--upstream", endpoint, "--out", out, "--name", "crm2", "--force"); err != nil {
		t.Fatalf("--force: %v", err)
	}
	if cfg, err := config.Load(out); err != nil || cfg.Upstreams[0].Name != "crm2" {
		t.Errorf("after --force: %v", err)
	}
}

// TestInitStdout: without --out the draft goes to stdout and names the
// manifest by its absolute path, so it loads wherever it is saved.
func TestInitStdout(t *testing.T) {
	endpoint := serveMCP(t, demo.New(demo.Options{}).Handler())
	dir := t.TempDir()
	manifest := filepath.Join(dir, "pins.json")
	stdout, stderr, err := runCmd("init", "--upstream", endpoint, "--manifest", manifest, "--route", "/crm/mcp")
	if err != nil {
		t.Fatalf("init: %v\n%s", err, stderr)
	}
	elsewhere := filepath.Join(t.TempDir(), "draft.yaml")
	if err := os.WriteFile(elsewhere, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(elsewhere)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Catalog.Manifest != manifest || cfg.Upstreams[0].Route != "/crm/mcp" || cfg.Upstreams[0].Name != "default" {
		t.Errorf("manifest %q, upstream %+v", cfg.Catalog.Manifest, cfg.Upstreams[0])
	}
	if _, err := os.Stat(manifest); err != nil {
		t.Error(err)
	}
}

func TestInitBadInput(t *testing.T) {
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/mcp"
	down.Close()
	notMCP := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<html><body>Welcome</body></html>"))
	}))
	t.Cleanup(notMCP.Close)
	locked := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))

	tests := []struct {
		name  string
		args  []string
		usage bool
		want  string
	}{
		{"no upstream", nil, true, "give exactly one of --upstream and --upstream-command"},
		{"not a URL", []string{"--upstream", "ftp://x/mcp"}, true, "http or https URL"},
		{"bad name", []string{"--upstream", "http://127.0.0.1:1/mcp", "--name", "Bad Name"}, true, "name"},
		{"bad route", []string{"--upstream", "http://127.0.0.1:1/mcp", "--route", "mcp"}, true, "route"},
		{"bad header", []string{"--upstream", "http://127.0.0.1:1/mcp", "--header", "nocolon"}, true, "--header #1"},
		{"unreachable", []string{"--upstream", downURL, "--timeout", "10s"}, false, "nothing listens there"},
		{"not MCP", []string{"--upstream", notMCP.URL + "/", "--timeout", "10s"}, false, "is it an MCP server's streamable HTTP endpoint"},
		{"needs credentials", []string{"--upstream", locked, "--timeout", "10s"}, false, "--header"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "draft.yaml")
			_, stderr, err := runCmd(append([]string{"init", "--out", out}, tt.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			if errors.Is(err, errUsage) != tt.usage {
				t.Errorf("usage error %t, want %t: %v", errors.Is(err, errUsage), tt.usage, err)
			}
			if msg := err.Error() + stderr; !strings.Contains(msg, tt.want) {
				t.Errorf("error lacks %q:\n%v\n%s", tt.want, err, stderr)
			}
			if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
				var names []string
				for _, e := range entries {
					names = append(names, e.Name())
				}
				t.Errorf("files written: %q", names)
			}
		})
	}
}

// TestInitHeader: --header reaches the upstream and never the draft.
func TestInitHeader(t *testing.T) {
	h := demo.New(demo.Options{}).Handler()
	endpoint := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "s3cret" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	out := filepath.Join(t.TempDir(), "d.yaml")
	if _, stderr, err := runCmd("init", "--upstream", endpoint, "--out", out, "--header", "X-Api-Key: s3cret"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	text, _ := os.ReadFile(out)
	if strings.Contains(string(text), "s3cret") {
		t.Error("the draft holds the header's value")
	}
	cfg, err := config.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if names := slices.Sorted(func(yield func(string) bool) {
		for n := range cfg.Upstreams[0].Tools {
			if !yield(n) {
				return
			}
		}
	}); len(names) != 9 {
		t.Errorf("tools %q", names)
	}
}
