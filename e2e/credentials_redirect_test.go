package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/policy"
)

// TestUpstreamCredentialRedirect: an upstream with an API key answers
// tools/call with 307 or 308 to another host. Through the standalone
// proxy and through Envoy (the driver) + ext_proc, the other host gets no
// request at all (with or without the credential), and the client gets
// the same 502 JSON-RPC error for its id, without the Location.
func TestUpstreamCredentialRedirect(t *testing.T) {
	var mu sync.Mutex
	var elsewhere []http.Header
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		elsewhere = append(elsewhere, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok from elsewhere"}]}}`)
	}))
	t.Cleanup(other.Close)
	var status int
	var statusMu sync.Mutex
	var seenKeys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statusMu.Lock()
		s := status
		seenKeys = append(seenKeys, r.Header.Get("X-Api-Key"))
		statusMu.Unlock()
		w.Header().Set("Location", other.URL+"/mcp")
		w.WriteHeader(s)
	}))
	t.Cleanup(up.Close)

	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte("key-r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Catalog.Disabled = true
	cfg.Upstreams = []config.Upstream{{Name: "moved", URL: up.URL + "/mcp", Route: "/moved/mcp",
		Tools:      map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}},
		Credential: &config.Credential{Kind: config.CredentialStatic, Header: "X-Api-Key", ValueFile: keyFile}}}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	srv, _ := startEnvoy(t, a.ExtProcAddr, up.URL, "moved", 2*time.Second)
	paths := map[string]string{"proxy": "http://" + a.ProxyAddr + "/moved/mcp", "envoy": srv.URL + "/moved/mcp"}

	client := toHeader(v26("tools/call", "lookup"))
	client.Set("Authorization", "Bearer client-token")
	answers := map[string]string{}
	for _, code := range []int{307, 308} {
		statusMu.Lock()
		status = code
		statusMu.Unlock()
		for _, via := range []string{"proxy", "envoy"} {
			resp, b := credSend(t, paths[via], client, call("1", "lookup", "{}"))
			if resp.StatusCode != 502 || resp.Header.Get("Location") != "" || !strings.Contains(b, "The upstream answered with a redirect") ||
				!strings.Contains(b, `"id":1`) || strings.Contains(b, other.URL) {
				t.Fatalf("%d via %s: %d %v %s", code, via, resp.StatusCode, resp.Header, b)
			}
			answers[via] = fmt.Sprint(resp.StatusCode, " ", b)
		}
		if answers["proxy"] != answers["envoy"] {
			t.Errorf("%d: the adapters answer differently:\nproxy %s\nenvoy %s", code, answers["proxy"], answers["envoy"])
		}
	}
	statusMu.Lock()
	if len(seenKeys) != 4 || seenKeys[0] != "key-r" {
		t.Errorf("the upstream got %q; want the key on each of 4 calls", seenKeys)
	}
	statusMu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if len(elsewhere) != 0 {
		t.Fatalf("the redirect's target got %d requests: %v", len(elsewhere), elsewhere)
	}
}
