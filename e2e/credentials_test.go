package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/policy"
)

// credUpstream is an MCP server that demands a credential of its own. It
// answers tools/call with a text result, and records the credential
// fields of every request it got.
type credUpstream struct {
	name  string
	check func(r *http.Request) bool // the credential is good
	mu    sync.Mutex
	seen  []http.Header
}

func (u *credUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.seen = append(u.seen, r.Header.Clone())
	u.mu.Unlock()
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	if !u.check(r) {
		// What a real server answers: a challenge, a cookie, an error
		// body; none of it may reach mcpgate's client.
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+u.name+`", error="invalid_token", resource_metadata="http://upstream.invalid/.well-known/oauth-protected-resource"`)
		w.Header().Set("Set-Cookie", "upstream_session=leak; Path=/")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(401)
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"upstream says: bad credential"}}`, req.ID)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok from %s"}]}}`, req.ID, u.name)
}

// last returns the header of the last request the upstream got.
func (u *credUpstream) last(t *testing.T) http.Header {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.seen) == 0 {
		t.Fatalf("upstream %s got no request", u.name)
	}
	return u.seen[len(u.seen)-1]
}

// introspect asks the provider whether tok is an active token whose
// audience holds aud (RFC 7662).
func introspect(p *oidctest.Provider, tok, aud string) bool {
	form := url.Values{"token": {tok}}
	req, _ := http.NewRequest("POST", p.IntrospectionEndpoint(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(provider.ClientGateway, provider.ClientGatewaySecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var out struct {
		Active bool `json:"active"`
		Aud    any  `json:"aud"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || !out.Active {
		return false
	}
	switch a := out.Aud.(type) {
	case string:
		return a == aud
	case []any:
		for _, x := range a {
			if x == aud {
				return true
			}
		}
	}
	return false
}

// credSend posts body to u and returns the answer with its body.
func credSend(t *testing.T, u string, hdr http.Header, body []byte) (*http.Response, string) {
	t.Helper()
	resp, b := roundTrip(t, "POST", u, hdr, body)
	return resp, string(b)
}

// TestUpstreamCredentials fronts two servers that demand credentials of
// their own, through the standalone proxy and through Envoy (the driver)
// + ext_proc: one wants an API key (a static secret read from a file),
// the other an OAuth access token of its own audience, which mcpgate
// gets from the e2e OpenID provider with the client-credentials grant and
// the upstream checks by introspection at that provider. The client's
// Authorization, Cookie and its own copy of the API key never arrive;
// a rotated key file is picked up; an upstream 401 drops the cached token
// (the next call gets a new one) and its challenge and cookie never reach
// the client.
func TestUpstreamCredentials(t *testing.T) {
	p := oidctest.Start(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "api-key")
	if err := os.WriteFile(keyFile, []byte("key-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var keyMu sync.Mutex
	wantKey := "key-1"
	apikey := &credUpstream{name: "apikey", check: func(r *http.Request) bool {
		keyMu.Lock()
		defer keyMu.Unlock()
		return r.Header.Get("X-Api-Key") == wantKey && len(r.Header.Values("X-Api-Key")) == 1
	}}
	var ccMu sync.Mutex
	revoked := map[string]bool{}
	var ccAud string
	cc := &credUpstream{name: "cc", check: func(r *http.Request) bool {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		ccMu.Lock()
		bad := revoked[tok]
		ccMu.Unlock()
		return ok && !bad && introspect(p, tok, ccAud)
	}}
	apiSrv := httptest.NewServer(apikey)
	t.Cleanup(apiSrv.Close)
	ccSrv := httptest.NewServer(cc)
	t.Cleanup(ccSrv.Close)
	ccAud = ccSrv.URL + "/mcp"
	t.Setenv("MCPGATE_E2E_CC_SECRET", provider.ClientGatewaySecret)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Catalog.Disabled = true // hand-written upstreams the catalog does not list
	lookup := map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}}
	cfg.Upstreams = []config.Upstream{
		{Name: "apikey", URL: apiSrv.URL + "/mcp", Route: "/apikey/mcp", Tools: lookup,
			Credential: &config.Credential{Kind: config.CredentialStatic, Header: "X-Api-Key", ValueFile: keyFile}},
		{Name: "cc", URL: ccSrv.URL + "/mcp", Route: "/cc/mcp", Tools: lookup,
			Credential: &config.Credential{Kind: config.CredentialClientCredentials, TokenURL: p.TokenEndpoint(),
				ClientID: provider.ClientGateway, ClientSecretEnv: "MCPGATE_E2E_CC_SECRET", Resource: ccAud}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	paths := map[string]map[string]string{"proxy": {}, "envoy": {}}
	for _, name := range []string{"apikey", "cc"} {
		target := apiSrv.URL
		if name == "cc" {
			target = ccSrv.URL
		}
		srv, _ := startEnvoy(t, a.ExtProcAddr, target, name, 2*time.Second)
		paths["proxy"][name] = "http://" + a.ProxyAddr + "/" + name + "/mcp"
		paths["envoy"][name] = srv.URL + "/" + name + "/mcp"
	}
	client := toHeader(v26("tools/call", "lookup"))
	client.Set("Authorization", "Bearer client-token")
	client.Set("Cookie", "client_session=c1")
	client.Set("X-Api-Key", "client-copy")
	body := call("1", "lookup", "{}")
	ok := func(t *testing.T, via, upstream string) {
		t.Helper()
		resp, b := credSend(t, paths[via][upstream], client, body)
		if resp.StatusCode != 200 || !strings.Contains(b, "ok from "+upstream) {
			t.Fatalf("%s → %s: %d %s", via, upstream, resp.StatusCode, b)
		}
	}
	for _, via := range []string{"proxy", "envoy"} {
		t.Run(via, func(t *testing.T) {
			ok(t, via, "apikey")
			h := apikey.last(t)
			if h.Get("Authorization") != "" || h.Get("Cookie") != "" || h.Values("X-Api-Key")[0] != wantKey {
				t.Fatalf("the API key upstream got Authorization %q, Cookie %q, X-Api-Key %q", h.Get("Authorization"), h.Get("Cookie"), h.Values("X-Api-Key"))
			}
			ok(t, via, "cc")
			h = cc.last(t)
			tok := strings.TrimPrefix(h.Get("Authorization"), "Bearer ")
			if tok == "" || tok == "client-token" || h.Get("Cookie") != "" || h.Get("X-Api-Key") != "" {
				t.Fatalf("the client-credentials upstream got Authorization %q, Cookie %q, X-Api-Key %q", h.Get("Authorization"), h.Get("Cookie"), h.Get("X-Api-Key"))
			}
			// Cached: the next call carries the same token.
			ok(t, via, "cc")
			if got := cc.last(t).Get("Authorization"); got != "Bearer "+tok {
				t.Fatalf("token not cached: %q then %q", tok, got)
			}
			// The upstream refuses the token: the client gets an error
			// naming the upstream, without its challenge or cookie; the
			// next call gets a new token.
			ccMu.Lock()
			revoked[tok] = true
			ccMu.Unlock()
			resp, b := credSend(t, paths[via]["cc"], client, body)
			if resp.Header.Get("WWW-Authenticate") != "" || resp.Header.Get("Set-Cookie") != "" || strings.Contains(b, "upstream says") || strings.Contains(b, "upstream.invalid") {
				t.Fatalf("the upstream's refusal reached the client: %d %v %s", resp.StatusCode, resp.Header, b)
			}
			if !strings.Contains(b, `\"cc\"`) && !strings.Contains(b, `"cc"`) || !strings.Contains(b, "upstream_refused_credential") {
				t.Fatalf("refusal answer does not name the upstream: %d %s", resp.StatusCode, b)
			}
			ok(t, via, "cc")
			if got := cc.last(t).Get("Authorization"); got == "Bearer "+tok || got == "" {
				t.Fatalf("no new token after the refusal: %q", got)
			}
		})
	}
	// A rotated key file is reread (watched), through both paths.
	keyMu.Lock()
	wantKey = "key-2"
	keyMu.Unlock()
	if err := os.WriteFile(keyFile, []byte("key-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, b := credSend(t, paths["proxy"]["apikey"], client, body); strings.Contains(b, "ok from apikey") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the rotated API key was not picked up")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ok(t, "proxy", "apikey")
	ok(t, "envoy", "apikey")
}
