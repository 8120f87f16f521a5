package e2e

import (
	"bytes"
	"context"
	"fmt"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/tokens"
)

// tenantBase is the gateway's public origin in TestTenantInPath.
const tenantBase = "https://mcp.example.com"

// assertedUpstream records, for every request that reaches the demo
// upstream, its path and the tenant of mcpgate's identity assertion ("" if
// it has no valid one), then hands it to the demo, which requires one.
type assertedUpstream struct {
	next http.Handler
	v    *assertion.Verifier
	mu   sync.Mutex
	seen []string // "path tenant"
}

func (u *assertedUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tenant := ""
	if id, err := u.v.Verify(r.Context(), r.Header.Get(assertion.Header)); err == nil {
		tenant = id.Tenant
	}
	if tenant != catalog.Tenant { // mcpgate's own listing of the tools is not a client's call
		u.mu.Lock()
		u.seen = append(u.seen, r.URL.Path+" "+tenant)
		u.mu.Unlock()
	}
	u.next.ServeHTTP(w, r)
}

func (u *assertedUpstream) take() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	s := u.seen
	u.seen = nil
	return s
}

// tenantPathEnv is the gateway with the demo upstream on the route
// /t/{tenant}/mcp, gateway tokens for a person in acme and one in globex,
// and the demo upstream verifying mcpgate's identity assertions.
type tenantPathEnv struct {
	up          *assertedUpstream
	via         map[string]string // "proxy", "extproc" → base URL
	acme, globx string            // gateway tokens
}

func startTenantPathEnv(t *testing.T) *tenantPathEnv {
	t.Helper()
	dir := t.TempDir()
	rightsFile := filepath.Join(dir, "rights.yaml")
	all := `"customers:read", "bookings:read", "technicians:read", "bookings:write"`
	if err := os.WriteFile(rightsFile, []byte(fmt.Sprintf("tenants:\n  acme:\n    alice: {active: true, rights: [%s]}\n  globex:\n    gina: {active: true, rights: [%s]}\n", all, all)), 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ks.MarshalPrivate()
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(dir, "assertion-keys.json")
	if err := os.WriteFile(keysFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	const audience = "demo-upstream"
	v, err := assertion.NewVerifier(assertion.VerifierOptions{Issuer: tenantBase, Audience: audience, Keys: ks.PublicJWKS()})
	if err != nil {
		t.Fatal(err)
	}
	up := &assertedUpstream{next: demo.New(demo.Options{Assertions: v}).Handler(), v: v}
	us := httptest.NewServer(up)
	t.Cleanup(us.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = us.URL + "/mcp"
	cfg.Upstreams[0].Route = "/t/{tenant}/mcp"
	cfg.Upstreams[0].Audience = audience
	cfg.Auth = &config.Auth{ResourceBaseURL: tenantBase, GatewayTokens: &config.GatewayTokens{}, TenantHeader: "X-Tenant"}
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	cfg.Rights = &config.Rights{File: &config.RightsFile{Path: rightsFile}}
	cfg.Assertion = config.Assertion{KeysFile: keysFile}
	cfg.Audit.Log = "off"
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Assertion.Issuer != tenantBase {
		t.Fatalf("assertion issuer %q", cfg.Assertion.Issuer)
	}
	a := startApp(t, cfg)
	mint := func(tenant, subject string) string {
		c, err := a.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
			tokens.CreateRequest{Tenant: tenant, Subject: subject, Name: "e2e"})
		if err != nil {
			t.Fatal(err)
		}
		return c.Secret
	}
	envoy, _ := startEnvoy(t, a.ExtProcAddr, us.URL, cfg.Upstreams[0].Name, 2*time.Second)
	return &tenantPathEnv{up: up, via: map[string]string{"proxy": "http://" + a.ProxyAddr, "extproc": envoy.URL},
		acme: mint("acme", "alice"), globx: mint("globex", "gina")}
}

// tenantReply is what a client sees of one answer.
type tenantReply struct {
	Status          int
	ContentType     string
	WWWAuthenticate string
	Body            string
}

func tenantSend(t *testing.T, method, u, token string, hdr map[string]string, body []byte) tenantReply {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return tenantReply{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), WWWAuthenticate: resp.Header.Get("Www-Authenticate"), Body: string(b)}
}

const tenantMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`

var (
	tenantCallBody    = []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_technicians","arguments":{},` + tenantMeta + `}}`)
	tenantCallHeaders = map[string]string{"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"}
)

// TestTenantInPath: a route with {tenant} (/t/{tenant}/mcp) through the
// standalone proxy and through Envoy + ext_proc: the tenant in the path
// must be the gateway token's, the upstream acts in it (the identity
// assertion says so), another tenant's path is 403 tenant_mismatch with
// nothing forwarded, a percent-encoded path is on no route (404), and each
// tenant's protected resource metadata is served at its own path.
func TestTenantInPath(t *testing.T) {
	e := startTenantPathEnv(t)
	got := map[string]map[string]tenantReply{} // case → via → reply
	record := func(name, via string, r tenantReply) {
		if got[name] == nil {
			got[name] = map[string]tenantReply{}
		}
		got[name][via] = r
	}
	for via, base := range e.via {
		t.Run(via, func(t *testing.T) {
			upstreamPath := "/mcp" // the proxy forwards to the configured URL
			if via == "extproc" {
				upstreamPath = "/t/acme/mcp" // Envoy forwards the path it routed
			}

			r := tenantSend(t, "POST", base+"/t/acme/mcp", e.acme, tenantCallHeaders, tenantCallBody)
			if r.Status != 200 || strings.Contains(r.Body, `"isError":true`) || !strings.Contains(r.Body, "T-") {
				t.Fatalf("acme's token on /t/acme/mcp: %+v", r)
			}
			if seen := e.up.take(); len(seen) != 1 || seen[0] != upstreamPath+" acme" {
				t.Errorf("upstream saw %q, want [%q]", seen, upstreamPath+" acme")
			}

			// The same tenant in the header as well is fine; another is not.
			r = tenantSend(t, "POST", base+"/t/acme/mcp", e.acme, tenantWith(tenantCallHeaders, "X-Tenant", "acme"), tenantCallBody)
			if r.Status != 200 {
				t.Errorf("path and header agree: %+v", r)
			}
			e.up.take()
			r = tenantSend(t, "POST", base+"/t/acme/mcp", e.acme, tenantWith(tenantCallHeaders, "X-Tenant", "globex"), tenantCallBody)
			if r.Status != 403 || !strings.Contains(r.Body, `"tenant_mismatch"`) {
				t.Errorf("path and header disagree: %+v", r)
			}
			record("header disagrees", via, r)

			r = tenantSend(t, "POST", base+"/t/globex/mcp", e.acme, tenantCallHeaders, tenantCallBody)
			if r.Status != 403 || r.ContentType != "application/json" || !strings.Contains(r.Body, `"tenant_mismatch"`) || !strings.Contains(r.Body, `"id":7`) {
				t.Errorf("acme's token on /t/globex/mcp: %+v", r)
			}
			record("other tenant", via, r)

			r = tenantSend(t, "POST", base+"/t/globex/mcp", e.globx, tenantCallHeaders, tenantCallBody)
			if r.Status != 200 || strings.Contains(r.Body, `"isError":true`) {
				t.Errorf("globex's token on /t/globex/mcp: %+v", r)
			}
			globexPath := strings.Replace(upstreamPath, "acme", "globex", 1)
			if seen := e.up.take(); len(seen) != 1 || seen[0] != globexPath+" globex" {
				t.Errorf("upstream saw %q, want [%q]", seen, globexPath+" globex")
			}

			r = tenantSend(t, "POST", base+"/t/%61cme/mcp", e.acme, tenantCallHeaders, tenantCallBody)
			if r.Status != 404 {
				t.Errorf("/t/%%61cme/mcp: %+v", r)
			}
			record("encoded tenant", via, r)
			for _, path := range []string{"/t//mcp", "/t/acme/mcp/", "/t/a%2Fb/mcp"} {
				if r := tenantSend(t, "POST", base+path, e.acme, tenantCallHeaders, tenantCallBody); r.Status != 404 {
					t.Errorf("%s: %+v", path, r)
				}
			}

			// No token: the plain Bearer challenge. This environment takes
			// gateway tokens only (no OAuth issuer), so no protected
			// resource metadata is named or served: nothing sends the
			// client into an OAuth flow it cannot complete.
			r = tenantSend(t, "POST", base+"/t/acme/mcp", "", tenantCallHeaders, tenantCallBody)
			if r.Status != 401 || r.WWWAuthenticate != "Bearer" {
				t.Errorf("no token: %+v", r)
			}
			record("no token", via, r)

			r = tenantSend(t, "GET", base+"/.well-known/oauth-protected-resource/t/acme/mcp", "", nil, nil)
			if r.Status != 404 {
				t.Errorf("metadata: %+v", r)
			}
			record("metadata", via, r)
			if r := tenantSend(t, "GET", base+"/.well-known/oauth-protected-resource/t/%61cme/mcp", "", nil, nil); r.Status != 404 {
				t.Errorf("metadata at an encoded path: %+v", r)
			}

			if seen := e.up.take(); len(seen) != 0 {
				t.Errorf("refused requests reached the upstream: %q", seen)
			}
		})
	}
	for name, by := range got {
		if by["proxy"] != by["extproc"] {
			t.Errorf("%s: proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", name, by["proxy"], by["extproc"])
		}
	}
}

func tenantWith(h map[string]string, kv ...string) map[string]string {
	out := make(map[string]string, len(h)+len(kv)/2)
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}
