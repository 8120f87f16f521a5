package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// The identity tests' set-up (see startIdentityEnv).
const (
	// upstreamAudience is the aud of the assertions the demo upstream
	// accepts (upstreams[].audience).
	upstreamAudience = "demo-upstream"
	// adminAudience is the aud of OIDC tokens for the admin API.
	adminAudience = authBase + "/admin"
	// tenantHeaderName is auth.tenant_header.
	tenantHeaderName = "X-Tenant"
)

// allDemoRights are the rights the quickstart's tools declare.
var allDemoRights = []string{"customers:read", "bookings:read", "technicians:read", "bookings:write",
	"customers:notify", "technicians:page", "alerts:manage", "bookings:delete"}

// livePerson is one person of the rights file.
type livePerson struct {
	active bool
	rights []string
}

// liveRights is the content of the rights file: tenant → subject → person.
type liveRights map[string]map[string]livePerson

// defaultLiveRights: alice may do everything in acme and gina reads and
// books in globex (as in `mcpgate demo`); dave, carol and gateway (the
// subject of the OpenID provider's client_credentials tokens) are acme
// people the tests change.
func defaultLiveRights() liveRights {
	return liveRights{
		"acme": {
			"alice":   {true, allDemoRights},
			"dave":    {true, []string{"customers:read", "technicians:read"}},
			"carol":   {true, []string{"customers:read"}},
			"gateway": {true, []string{"customers:read", "technicians:read"}},
		},
		"globex": {
			"gina": {true, []string{"customers:read", "bookings:read", "technicians:read", "bookings:write"}},
		},
	}
}

// yaml is the rights file format (package rights, FileSource).
func (lr liveRights) yaml() string {
	var b strings.Builder
	b.WriteString("tenants:\n")
	for _, tenant := range sortedKeys(lr) {
		fmt.Fprintf(&b, "  %s:\n", tenant)
		for _, subject := range sortedKeys(lr[tenant]) {
			p := lr[tenant][subject]
			quoted := make([]string, len(p.rights))
			for i, r := range p.rights {
				quoted[i] = fmt.Sprintf("%q", r)
			}
			fmt.Fprintf(&b, "    %s:\n      active: %t\n      rights: [%s]\n", subject, p.active, strings.Join(quoted, ", "))
		}
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// idOptions choose the parts of an identity environment.
type idOptions struct {
	// provider starts a real OpenID provider (with these options) and
	// trusts it for MCP routes and the admin API.
	provider     bool
	providerOpts []oidctest.Option
	// rightsURL is an HTTP rights source; "" uses the rights file.
	rightsURL string
	// redisURL is a Redis store; "" uses bbolt in a temporary directory.
	redisURL string
	// minJWKSRefresh is the provider's min_jwks_refresh (0: the default).
	minJWKSRefresh time.Duration
}

// idEnv is a gateway with every identity part real: gateway-issued tokens
// in a bbolt (or Redis) store, live rights from a rights file (or an HTTP
// source), OAuth with a real OpenID provider (optional), the admin API
// with a static platform-admin token, signed assertions with a keys file,
// the tenant header — in front of the real demo upstream, which verifies
// every assertion against the gateway's JWKS (served on the admin
// listener). Clients reach it through the standalone proxy and through
// Envoy (the driver) + ext_proc.
type idEnv struct {
	p          *oidctest.Provider
	app        *app.App
	cfg        *config.Config
	proxy      string // proxy base URL
	envoy      string // Envoy stand-in base URL
	admin      string // admin listener base URL
	upstream   string // the demo upstream's MCP endpoint, reached directly
	adminToken string // static platform-admin token
	rightsFile string
	demo       *demo.Server
	rec        *recorder           // every request that reached the demo upstream
	verifier   *assertion.Verifier // the demo upstream's
	keys       *assertion.KeySet   // the gateway's signing keys
	started    time.Time           // when the gateway had started (and fetched the provider's JWKS)
}

func startIdentityEnv(t *testing.T, o idOptions) *idEnv {
	t.Helper()
	dir := t.TempDir()
	e := &idEnv{rightsFile: filepath.Join(dir, "rights.yaml")}
	if o.provider {
		e.p = oidctest.Start(t, o.providerOpts...)
	}

	ks, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	e.keys = ks
	priv, err := ks.MarshalPrivate()
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(dir, "assertion-keys.json")
	if err := os.WriteFile(keysFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	e.adminToken = "mcpgadm_" + rand.Text()
	sum := sha256.Sum256([]byte(e.adminToken))

	// The upstream's address is needed for the configuration; it serves
	// once the gateway (whose JWKS it verifies with) runs.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstreamBase := "http://" + ln.Addr().String()
	e.upstream = upstreamBase + "/mcp"
	// It answers 503 until then (the gateway's first listing of its tools
	// fails fast and is retried by RefreshCatalog below).
	var serving atomic.Pointer[http.Handler]
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := serving.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}))
	_ = up.Listener.Close()
	up.Listener = ln
	up.Start()
	t.Cleanup(up.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = e.upstream
	cfg.Upstreams[0].Audience = upstreamAudience
	cfg.Auth = &config.Auth{ResourceBaseURL: authBase, GatewayTokens: &config.GatewayTokens{}, TenantHeader: tenantHeaderName}
	cfg.AdminAPI = &config.AdminAPI{StaticTokens: []config.StaticToken{{Name: "e2e-admin", SHA256: hex.EncodeToString(sum[:]), Role: config.RolePlatformAdmin}}}
	if e.p != nil {
		cfg.Auth.Issuers = []config.Issuer{{Issuer: e.p.Issuer, TenantClaim: "tenant", MinJWKSRefresh: optDuration(o.minJWKSRefresh)}}
		cfg.AdminAPI.Audience = adminAudience
	}
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	if o.redisURL != "" {
		cfg.Store = &config.Store{Redis: &config.RedisStore{URL: o.redisURL}}
	}
	if o.rightsURL != "" {
		cfg.Rights = &config.Rights{HTTP: &config.RightsHTTP{URL: o.rightsURL}}
	} else {
		e.writeRights(t, defaultLiveRights())
		cfg.Rights = &config.Rights{File: &config.RightsFile{Path: e.rightsFile}}
	}
	cfg.Assertion = config.Assertion{KeysFile: keysFile}
	cfg.Audit.Log = config.AuditLogOff
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	e.app = startApp(t, cfg)
	e.started = time.Now()
	e.proxy = "http://" + e.app.ProxyAddr
	e.admin = "http://" + e.app.AdminAddr

	e.verifier, err = assertion.NewVerifier(assertion.VerifierOptions{
		Issuer: cfg.Assertion.Issuer, Audience: upstreamAudience,
		JWKSURL: e.admin + assertion.JWKSPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.demo = demo.New(demo.Options{Assertions: e.verifier})
	e.rec = &recorder{next: e.demo.Handler(), skip: func(r *http.Request) bool {
		id, err := e.verifier.Verify(context.Background(), r.Header.Get(assertion.Header))
		return err == nil && id.Tenant == catalog.Tenant
	}}
	mux := http.NewServeMux()
	mux.Handle("/mcp", e.rec)
	var h http.Handler = mux
	serving.Store(&h)
	// The upstream serves only now: the gateway lists its tools again.
	if err := e.app.RefreshCatalog(context.Background()); err != nil {
		t.Fatal(err)
	}

	srv, _ := startEnvoy(t, e.app.ExtProcAddr, upstreamBase, "demo", 2*time.Second)
	e.envoy = srv.URL
	return e
}

// writeRights replaces the rights file the way an editor or a config
// management tool does: a temporary file renamed over it.
func (e *idEnv) writeRights(t *testing.T, lr liveRights) {
	t.Helper()
	tmp := e.rightsFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(lr.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, e.rightsFile); err != nil {
		t.Fatal(err)
	}
}

// via is one way to the gateway's MCP route.
type via struct{ name, base string }

// vias: the standalone proxy and Envoy (the driver) + ext_proc, in that
// order.
func (e *idEnv) vias() []via { return []via{{"proxy", e.proxy}, {"extproc", e.envoy}} }

// idAnswer is what a client sees of one answer: answer plus Retry-After.
type idAnswer struct {
	answer
	RetryAfter string
}

// exchange sends one request and returns what the client sees, and the
// answer's header.
func exchange(t *testing.T, method, u string, hdr http.Header, body []byte) (idAnswer, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultTransport.RoundTrip(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return idAnswer{
		answer: answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"),
			WWWAuthenticate: resp.Header.Get("Www-Authenticate"), Body: decisionID.ReplaceAllString(string(b), `decision_id$1":$2"…`)},
		RetryAfter: resp.Header.Get("Retry-After"),
	}, resp.Header
}

// want is what an answer must be.
type want struct {
	status   int
	www      string // exact WWW-Authenticate; "-": none; "": not checked
	retry    string // exact Retry-After ("" none)
	contains []string
	absent   []string
}

func (w want) check(t *testing.T, where string, a idAnswer) {
	t.Helper()
	if a.Status != w.status {
		t.Errorf("%s: status %d, want %d (%.500s)", where, a.Status, w.status, a.Body)
	}
	switch {
	case w.www == "-" && a.WWWAuthenticate != "":
		t.Errorf("%s: WWW-Authenticate %q, want none", where, a.WWWAuthenticate)
	case w.www != "-" && w.www != "" && a.WWWAuthenticate != w.www:
		t.Errorf("%s: WWW-Authenticate\n got %q\nwant %q", where, a.WWWAuthenticate, w.www)
	}
	if a.RetryAfter != w.retry {
		t.Errorf("%s: Retry-After %q, want %q", where, a.RetryAfter, w.retry)
	}
	for _, s := range w.contains {
		if !strings.Contains(a.Body, s) {
			t.Errorf("%s: body lacks %s: %.800s", where, s, a.Body)
		}
	}
	for _, s := range w.absent {
		if strings.Contains(a.Body, s) {
			t.Errorf("%s: body has %s: %.800s", where, s, a.Body)
		}
	}
}

// both sends one request to the MCP route (plus suffix, e.g. a query)
// through the proxy and through Envoy + ext_proc, checks each answer
// against w and that the client sees the same through both, and returns
// the proxy's answer.
func (e *idEnv) both(t *testing.T, method, suffix string, hdr http.Header, body []byte, w want) idAnswer {
	t.Helper()
	var got []idAnswer
	for _, v := range e.vias() {
		a, _ := exchange(t, method, v.base+"/mcp"+suffix, hdr, body)
		w.check(t, v.name, a)
		got = append(got, a)
	}
	if got[0] != got[1] {
		t.Errorf("proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", got[0], got[1])
	}
	return got[0]
}

// nothingReached fails the test when the demo upstream got a request
// since mark (rec.count()).
func (e *idEnv) nothingReached(t *testing.T, mark int, what string) {
	t.Helper()
	if seen := e.rec.since(mark); len(seen) > 0 {
		t.Errorf("%s: %d request(s) reached the upstream", what, len(seen))
	}
}

// identity verifies, as the demo upstream does, the one assertion a
// forwarded request carried.
func (e *idEnv) identity(t *testing.T, h http.Header) *assertion.Identity {
	t.Helper()
	vals := h.Values(assertion.Header)
	if len(vals) != 1 {
		t.Fatalf("the upstream got %d %s fields, want 1", len(vals), assertion.Header)
	}
	id, err := e.verifier.Verify(context.Background(), vals[0])
	if err != nil {
		t.Fatalf("the upstream's assertion does not verify: %v", err)
	}
	return id
}

// adminCall calls the admin API with a bearer token ("" none).
func (e *idEnv) adminCall(t *testing.T, method, path, token string, body any) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// mint creates a gateway token through the admin API with the static
// admin token; rights nil means all the person's live rights, expiresIn
// "" the default lifetime.
func (e *idEnv) mint(t *testing.T, tenant, subject string, rights []string, expiresIn string) (secret, id string) {
	t.Helper()
	req := admin.CreateTokenRequest{Tenant: tenant, Subject: subject, Name: "e2e", Rights: rights}
	if expiresIn != "" {
		req.ExpiresIn = &expiresIn
	}
	status, _, body := e.adminCall(t, "POST", "/v1/tokens", e.adminToken, req)
	if status != http.StatusCreated {
		t.Fatalf("mint a token for %s/%s: %d %s", tenant, subject, status, body)
	}
	var tok admin.Token
	if err := json.Unmarshal(body, &tok); err != nil || tok.Secret == "" || tok.ID == "" {
		t.Fatalf("mint: %v %s", err, body)
	}
	return tok.Secret, tok.ID
}

// count is how many requests reached the upstream.
func (rc *recorder) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.seen)
}

// since returns the headers of the requests after the first mark ones.
func (rc *recorder) since(mark int) []http.Header {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.seen[mark:])
}

// challenges of the demo route (authBase).
var (
	missingChallenge = `Bearer resource_metadata="` + demoMetadata + `"`
)

func invalidChallenge(desc string) string {
	return missingChallenge + `, error="invalid_token", error_description="` + desc + `"`
}
