package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store/redistest"
)

// The kill switch's answers as a client sees them.
const (
	killRPCError = `"code":-32031`
	killRetry    = "30"
)

// jobsUpstream is a real MCP server (the official SDK, streamable HTTP,
// SSE answers) with two tools: ping answers at once; watch_job streams a
// progress notification every 50ms for up to a minute (until its request
// is cancelled or a notification cannot be delivered), then answers. It counts the tools/call requests
// that reach it and records how each watch_job ended.
type jobsUpstream struct {
	url   string
	mu    sync.Mutex
	calls int
	ends  []string // how each watch_job ended: "finished", "cancelled" or "undeliverable: ..."
}

func startJobsUpstream(t *testing.T) *jobsUpstream {
	t.Helper()
	u := &jobsUpstream{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "jobs", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "ping", Description: "Check that the jobs service answers.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"pong":true}`}}, StructuredContent: map[string]any{"pong": true}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "watch_job", Description: "Follow a job until it ends, with progress.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"job":{"type":"string"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			end := "finished"
			defer func() { u.mu.Lock(); u.ends = append(u.ends, end); u.mu.Unlock() }()
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			for i := range 1200 {
				if tok := req.Params.GetProgressToken(); tok != nil {
					if err := req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Message: "working"}); err != nil {
						end = "undeliverable: " + err.Error()
						return nil, err
					}
				}
				select {
				case <-ctx.Done():
					end = "cancelled"
					return nil, ctx.Err()
				case <-tick.C:
				}
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"done":true}`}}, StructuredContent: map[string]any{"done": true}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			u.mu.Lock()
			u.calls++
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	u.url = s.URL
	return u
}

func (u *jobsUpstream) callCount() int { u.mu.Lock(); defer u.mu.Unlock(); return u.calls }

func (u *jobsUpstream) endsOf() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.ends...)
}

// ksEnv is a gateway in front of the jobs upstream with everything real:
// gateway tokens in a bbolt (or Redis) store, live rights from a file, the
// admin API with a static platform-admin token and OIDC tokens from a real
// OpenID provider (acme's tenant admin "ada", alice a person of acme),
// Envoy (the driver) + ext_proc beside the standalone proxy.
type ksEnv struct {
	app        *app.App
	p          *oidctest.Provider
	up         *jobsUpstream
	proxy      string
	envoy      string
	admin      string
	adminToken string
}

// ksProvider is an OpenID provider with acme's tenant admin, globex's
// tenant admin and alice (a person of acme) as client_credentials clients.
func ksProvider(t *testing.T) *oidctest.Provider {
	pcfg := provider.DefaultConfig()
	pcfg.Clients = append(pcfg.Clients,
		provider.Client{ID: "acme-admin", Secret: "s", Subject: "ada", Tenant: "acme", Roles: []string{admin.DefaultTenantAdminRole}},
		provider.Client{ID: "globex-admin", Secret: "s", Subject: "gus", Tenant: "globex", Roles: []string{admin.DefaultTenantAdminRole}},
		provider.Client{ID: "alice-person", Secret: "s", Subject: "alice", Tenant: "acme"},
	)
	return oidctest.Start(t, oidctest.WithConfig(pcfg))
}

func startKSEnv(t *testing.T, p *oidctest.Provider, redisURL string) *ksEnv {
	t.Helper()
	dir := t.TempDir()
	e := &ksEnv{p: p, up: startJobsUpstream(t)}
	rightsFile := filepath.Join(dir, "rights.yaml")
	writeFile(t, rightsFile, `tenants:
  acme:
    alice: {active: true, rights: ["jobs:read"]}
  globex:
    gina: {active: true, rights: ["jobs:read"]}
`)
	e.adminToken = "mcpgadm_" + rand.Text()
	sum := sha256.Sum256([]byte(e.adminToken))
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = e.up.url + "/mcp"
	cfg.Upstreams[0].Tools = map[string]policy.ToolDeclaration{
		"ping":      {Effect: policy.EffectRead, Rights: []string{"jobs:read"}},
		"watch_job": {Effect: policy.EffectRead, Rights: []string{"jobs:read"}},
	}
	cfg.Auth = &config.Auth{ResourceBaseURL: authBase, GatewayTokens: &config.GatewayTokens{},
		Issuers: []config.Issuer{{Issuer: p.Issuer, TenantClaim: "tenant"}}}
	cfg.AdminAPI = &config.AdminAPI{Audience: adminAudience,
		StaticTokens: []config.StaticToken{{Name: "e2e-admin", SHA256: hex.EncodeToString(sum[:]), Role: config.RolePlatformAdmin}}}
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	if redisURL != "" {
		cfg.Store = &config.Store{Redis: &config.RedisStore{URL: redisURL}}
	}
	cfg.Rights = &config.Rights{File: &config.RightsFile{Path: rightsFile}}
	cfg.Audit.Log = config.AuditLogOff
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e.app = startApp(t, cfg)
	e.proxy = "http://" + e.app.ProxyAddr
	e.admin = "http://" + e.app.AdminAddr
	srv, _ := startEnvoy(t, e.app.ExtProcAddr, e.up.url, "demo", 2*time.Second)
	e.envoy = srv.URL
	return e
}

func (e *ksEnv) vias() []via { return []via{{"proxy", e.proxy}, {"extproc", e.envoy}} }

// adminCall calls e's admin API.
func (e *ksEnv) adminCall(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	ie := &idEnv{admin: e.admin}
	status, _, b := ie.adminCall(t, method, path, token, body)
	return status, b
}

func (e *ksEnv) oidc(t *testing.T, client string) string {
	t.Helper()
	return e.p.MustClientCredentials(t, client, "s", adminAudience)
}

// mint creates a gateway token for tenant/subject with jobs:read.
func (e *ksEnv) mint(t *testing.T, tenant, subject string) string {
	t.Helper()
	status, body := e.adminCall(t, "POST", "/v1/tokens", e.adminToken,
		admin.CreateTokenRequest{Tenant: tenant, Subject: subject, Name: "e2e", Rights: []string{"jobs:read"}})
	var tok admin.Token
	if status != http.StatusCreated || json.Unmarshal(body, &tok) != nil || tok.Secret == "" {
		t.Fatalf("mint %s/%s: %d %s", tenant, subject, status, body)
	}
	return tok.Secret
}

// setSwitch turns a switch on or off through the admin API.
func (e *ksEnv) setSwitch(t *testing.T, token, tenant string, on bool, reason string) {
	t.Helper()
	status, body := e.adminCall(t, "PUT", "/v1/killswitch", token, map[string]any{"tenant": tenant, "on": on, "reason": reason})
	if status != 200 {
		t.Fatalf("set switch %q on=%t: %d %s", tenant, on, status, body)
	}
}

// both sends one request through the proxy and through Envoy + ext_proc,
// checks each answer and that the client sees the same through both.
func (e *ksEnv) both(t *testing.T, hdr http.Header, body []byte, w want) idAnswer {
	t.Helper()
	var got []idAnswer
	for _, v := range e.vias() {
		a, _ := exchange(t, "POST", v.base+"/mcp", hdr, body)
		w.check(t, v.name, a)
		got = append(got, a)
	}
	if got[0] != got[1] {
		t.Errorf("proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", got[0], got[1])
	}
	return got[0]
}

func ping(id string) []byte { return call(id, "ping", `{}`) }

// TestKillSwitch: the admin API's switches through both adapters — who may
// flip what, a tenant's switch refuses only that tenant, the global switch
// every tenant, the refusal is 503 + Retry-After + a JSON-RPC error with
// the reason, nothing reaches the upstream, the documents the gateway
// serves itself and health stay served, turning off lets traffic through
// at once, every change is audited and counted.
func TestKillSwitch(t *testing.T) {
	e := startKSEnv(t, ksProvider(t), "")
	alice, gina := e.mint(t, "acme", "alice"), e.mint(t, "globex", "gina")
	ok := want{status: 200, www: "-", contains: []string{`"pong":true`}}
	e.both(t, bearer(alice, "tools/call", "ping"), ping("1"), ok)

	acmeAdmin, person := e.oidc(t, "acme-admin"), e.oidc(t, "alice-person")
	for _, c := range []struct {
		name, token string
		body        map[string]any
		status      int
		code        string
	}{
		{"a person", person, map[string]any{"tenant": "acme", "on": true, "reason": "x"}, 403, "forbidden"},
		{"a tenant admin, global", acmeAdmin, map[string]any{"on": true, "reason": "x"}, 403, "global_switch_forbidden"},
		{"a tenant admin, another tenant", acmeAdmin, map[string]any{"tenant": "globex", "on": true, "reason": "x"}, 403, "other_tenant"},
		{"no reason", e.adminToken, map[string]any{"on": true}, 400, "reason_required"},
		{"an MCP token", alice, map[string]any{"on": true, "reason": "x"}, 401, "mcp_token_not_accepted"},
	} {
		status, body := e.adminCall(t, "PUT", "/v1/killswitch", c.token, c.body)
		if status != c.status || !strings.Contains(string(body), `"code":"`+c.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", c.name, status, body, c.status, c.code)
		}
	}
	e.both(t, bearer(alice, "tools/call", "ping"), ping("2"), ok)

	// acme's admin stops acme: alice is refused, globex goes on.
	e.setSwitch(t, acmeAdmin, "acme", true, "acme CRM migration")
	mark := e.up.callCount()
	refused := want{status: 503, www: "-", retry: killRetry, contains: []string{killRPCError, `"id":3`,
		`kill switch is on for tenant \"acme\". The operator's reason: acme CRM migration.`, `"code":"kill_switch"`}, absent: []string{`"pong"`}}
	e.both(t, bearer(alice, "tools/call", "ping"), ping("3"), refused)
	e.both(t, bearer(alice, "tools/list", ""), listBody, want{status: 503, www: "-", retry: killRetry, contains: []string{killRPCError, `"id":1`}})
	if n := e.up.callCount() - mark; n != 0 {
		t.Errorf("%d refused call(s) reached the upstream", n)
	}
	e.both(t, bearer(gina, "tools/call", "ping"), ping("4"), ok)

	// The platform admin stops everyone.
	e.setSwitch(t, e.adminToken, "", true, "Incident 42: agents are paging everyone")
	mark = e.up.callCount()
	e.both(t, bearer(gina, "tools/call", "ping"), ping("5"), want{status: 503, www: "-", retry: killRetry,
		contains: []string{killRPCError, "for every tenant. The operator's reason: Incident 42: agents are paging everyone.", "ask the operator"}})
	if n := e.up.callCount() - mark; n != 0 {
		t.Errorf("%d refused call(s) reached the upstream", n)
	}
	// Still served: the protected resource metadata, health, readiness,
	// the JWKS; an invalid credential is still 401 (authentication first).
	for _, v := range e.vias() {
		if a, _ := exchange(t, "GET", v.base+"/.well-known/oauth-protected-resource/mcp", nil, nil); a.Status != 200 {
			t.Errorf("%s: metadata: %d", v.name, a.Status)
		}
		if a, _ := exchange(t, "POST", v.base+"/mcp", bearer("mcpg_nope", "tools/call", "ping"), ping("6")); a.Status != 401 {
			t.Errorf("%s: invalid token: %d", v.name, a.Status)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/.well-known/jwks.json"} {
		if status, b := e.adminCall(t, "GET", path, "", nil); status != 200 {
			t.Errorf("%s with the kill switch on: %d %s", path, status, b)
		}
	}
	metrics := scrape(t, e.admin)
	for _, m := range []string{`mcpgate_killswitch_active{scope="global"} 1`, `mcpgate_killswitch_active{scope="tenant"} 1`,
		`mcpgate_killswitch_refusals_total{scope="global"} 2`, `mcpgate_killswitch_refusals_total{scope="tenant"} 4`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	status, body := e.adminCall(t, "GET", "/v1/killswitch", acmeAdmin, nil)
	if status != 200 || !strings.Contains(string(body), `{"tenant":"","on":true,"reason":"Incident 42: agents are paging everyone","set_by":"e2e-admin"`) ||
		!strings.Contains(string(body), `{"tenant":"acme","on":true,"reason":"acme CRM migration","set_by":"ada"`) {
		t.Errorf("GET /v1/killswitch as acme's admin: %d %s", status, body)
	}

	// Off again: through at once.
	e.setSwitch(t, e.adminToken, "", false, "")
	e.both(t, bearer(gina, "tools/call", "ping"), ping("7"), ok)
	e.both(t, bearer(alice, "tools/call", "ping"), ping("8"), want{status: 503, www: "-", retry: killRetry, contains: []string{killRPCError}})
	e.setSwitch(t, acmeAdmin, "acme", false, "migration done")
	e.both(t, bearer(alice, "tools/call", "ping"), ping("9"), ok)

	// Audited, refused attempts included.
	status, body = e.adminCall(t, "GET", "/v1/audit", e.adminToken, nil)
	audit := string(body)
	if status != 200 || strings.Count(audit, `"action":"killswitch.on","outcome":"ok"`) != 2 ||
		strings.Count(audit, `"action":"killswitch.off","outcome":"ok"`) != 2 ||
		strings.Count(audit, `"action":"killswitch.on","outcome":"denied"`) != 3 {
		t.Errorf("audit: %d %s", status, body)
	}
}

// sseEvent is one event a client read from a stream.
type sseEvent struct{ data string }

// readStream reads an SSE response event by event into a channel, closed
// at the stream's end (EOF, or an error such as a reset).
func readStream(t *testing.T, ctx context.Context, url string, hdr http.Header, body []byte) (int, <-chan sseEvent) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan sseEvent, 1024)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			case line == "" && data != nil:
				events <- sseEvent{data: strings.Join(data, "\n")}
				data = nil
			}
		}
	}()
	return resp.StatusCode, events
}

// TestKillSwitchEndsStreams: a tool call streaming progress through each
// adapter is ended when the global switch turns on: the client gets a
// JSON-RPC error event for its request id (nothing after it), then the
// stream closes, and so does the upstream's (its next notification cannot
// be delivered). The proxy ends the
// stream at once; ext_proc on the next chunk Envoy sends (the upstream
// sends one every 50ms).
func TestKillSwitchEndsStreams(t *testing.T) {
	e := startKSEnv(t, ksProvider(t), "")
	alice := e.mint(t, "acme", "alice")
	for i, v := range e.vias() {
		t.Run(v.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			id := fmt.Sprintf(`"job-%d"`, i)
			body := []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"watch_job","arguments":{"job":"J-1"},` +
				`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p-1"}}}`)
			status, events := readStream(t, ctx, v.base+"/mcp", bearer(alice, "tools/call", "watch_job"), body)
			if status != 200 {
				t.Fatalf("status %d", status)
			}
			progress := 0
			for progress < 2 {
				ev, ok := <-events
				if !ok {
					t.Fatalf("the stream ended after %d progress events", progress)
				}
				if strings.Contains(ev.data, `"notifications/progress"`) {
					progress++
				}
			}
			e.setSwitch(t, e.adminToken, "", true, "stop the jobs")
			defer e.setSwitch(t, e.adminToken, "", false, "")
			var last string
			for ev := range events {
				if last != "" {
					t.Errorf("an event after the kill switch's error: %s", ev.data)
				}
				if strings.Contains(ev.data, killRPCError) {
					last = ev.data
				}
			}
			// The channel closed: the stream ended (EOF through the proxy,
			// a reset through Envoy) without waiting for the job.
			if last == "" {
				t.Fatal("the stream ended without the kill switch's error event")
			}
			var msg struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(last), &msg); err != nil || string(msg.ID) != id || msg.Error.Code != -32031 ||
				!strings.Contains(msg.Error.Message, "stop the jobs") {
				t.Errorf("the last event: %v %s", err, last)
			}
			// The upstream's stream was closed with the client's: its
			// next progress notification cannot be delivered.
			poll.Until(t, 10*time.Second, "the upstream's call ends", func() bool { return len(e.up.endsOf()) == i+1 })
			if end := e.up.endsOf()[i]; end == "finished" {
				t.Errorf("the upstream's call ran to its end: %s", end)
			}
		})
	}
	metrics := scrape(t, e.admin)
	for _, m := range []string{`mcpgate_killswitch_streams_ended_total{transport="proxy"} 1`, `mcpgate_killswitch_streams_ended_total{transport="extproc"} 1`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}
}

// TestKillSwitchReplicas: two gateways on one real redis-server; the
// global switch set through A's admin API refuses calls on B (both
// adapters) within a second — B polls the store every 250ms; the wait is
// bounded by a generous deadline, the observed delay is logged — and
// turned off through B it lets A's calls through again.
func TestKillSwitchReplicas(t *testing.T) {
	rs := redistest.Start(t)
	p := ksProvider(t)
	a, b := startKSEnv(t, p, rs.URL), startKSEnv(t, p, rs.URL)
	alice := a.mint(t, "acme", "alice") // the token lives in Redis: B knows it
	ok := want{status: 200, www: "-", contains: []string{`"pong":true`}}
	b.both(t, bearer(alice, "tools/call", "ping"), ping("1"), ok)

	a.setSwitch(t, a.adminToken, "", true, "replica test")
	set := time.Now()
	deadline := set.Add(10 * time.Second)
	for {
		got, _ := exchange(t, "POST", b.proxy+"/mcp", bearer(alice, "tools/call", "ping"), ping("2"))
		if got.Status == 503 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica B still answers %d 10s after the switch was set on A", got.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("replica B refused calls %s after the switch was set on replica A", time.Since(set).Round(time.Millisecond))
	mark := b.up.callCount()
	b.both(t, bearer(alice, "tools/call", "ping"), ping("3"), want{status: 503, www: "-", retry: killRetry,
		contains: []string{killRPCError, "replica test"}})
	if n := b.up.callCount() - mark; n != 0 {
		t.Errorf("%d refused call(s) reached B's upstream", n)
	}

	b.setSwitch(t, b.adminToken, "", false, "")
	poll.Until(t, 10*time.Second, "replica A lets calls through again", func() bool {
		got, _ := exchange(t, "POST", a.proxy+"/mcp", bearer(alice, "tools/call", "ping"), ping("4"))
		return got.Status == 200
	})
	a.both(t, bearer(alice, "tools/call", "ping"), ping("5"), ok)
}

// TestDemoKillSwitchCLI: `mcpgate killswitch on|status|off` against a
// running `mcpgate demo` with the admin token it printed.
func TestDemoKillSwitchCLI(t *testing.T) {
	d := startDemo(t)
	admin := []string{"--admin", d.Admin, "--token", d.AdminToken}
	alice := d.Tokens["alice"]
	call1 := func(id string) answer {
		return send(t, "POST", d.Endpoint, bearer(alice, "tools/call", "find_customers"), call(id, "find_customers", `{"query":"a"}`))
	}
	if a := call1("1"); a.Status != 200 {
		t.Fatalf("before: %+v", a)
	}
	if out, errOut, err := runCLI(t, nil, append([]string{"killswitch", "on"}, admin...)...); err == nil || !strings.Contains(errOut, "needs --reason") {
		t.Errorf("on without a reason: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err := runCLI(t, nil, append([]string{"killswitch", "on", "--reason", "e2e incident"}, admin...)...)
	if err != nil || !strings.HasPrefix(out, "kill switch ON: MCP requests of every tenant are refused") {
		t.Fatalf("killswitch on: %v\n%s%s", err, out, errOut)
	}
	if a := call1("2"); a.Status != 503 || !strings.Contains(a.Body, killRPCError) || !strings.Contains(a.Body, "e2e incident") {
		t.Errorf("with the switch on: %+v", a)
	}
	env := []string{"MCPGATE_ADMIN_URL=" + d.Admin, "MCPGATE_ADMIN_TOKEN=" + d.AdminToken}
	out, errOut, err = runCLI(t, env, "killswitch", "status")
	if err != nil || !strings.Contains(out, "global") || !strings.Contains(out, "ON") || !strings.Contains(out, "e2e incident") {
		t.Errorf("killswitch status: %v\n%s%s", err, out, errOut)
	}
	out, errOut, err = runCLI(t, env, "killswitch", "off", "--reason", "resolved")
	if err != nil || !strings.HasPrefix(out, "kill switch OFF") {
		t.Fatalf("killswitch off: %v\n%s%s", err, out, errOut)
	}
	if a := call1("3"); a.Status != 200 {
		t.Errorf("after off: %+v", a)
	}
}
