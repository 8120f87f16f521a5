package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/internal/tokens"
)

// Budgets of TestExtProcOverrideMessageTimeout. mcpgate keeps the default
// message_budget (150ms) and extends slow messages to 1s (lower than the
// default 5s, so that rights.http.timeout, 2s, does not end the work first
// and the extended deadline itself can be reached).
const (
	overrideMaxBudget      = time.Second
	overrideEnvoyTimeout   = 200 * time.Millisecond // Envoy's message_timeout, above message_budget
	overrideSlowRights     = 400 * time.Millisecond // above Envoy's message_timeout, below the max
	overrideTooSlowRights  = 1500 * time.Millisecond
	overrideEnvoyStrictMax = 500 * time.Millisecond // an Envoy max_message_timeout below the override
)

// overrideRights is the product's rights endpoint (the real
// rights.HTTPSource asks it on every call): it answers after delay.
type overrideRights struct {
	delay atomic.Int64 // time.Duration
	calls atomic.Int64
}

func (o *overrideRights) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.calls.Add(1)
	select {
	case <-time.After(time.Duration(o.delay.Load())):
	case <-r.Context().Done():
		return
	}
	if r.URL.Query().Get("tenant") != "acme" || r.URL.Query().Get("subject") != "alice" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"active": true, "rights": ["customers:read", "bookings:read", "technicians:read", "bookings:write"]}`)
}

// TestExtProcOverrideMessageTimeout: behind Envoy, a gateway-token call
// whose live-rights lookup (rights.http, a slow product endpoint) takes
// longer than Envoy's message_timeout succeeds, because mcpgate sends
// override_message_timeout (listeners.extproc.max_message_budget) and
// Envoy restarts its timer. A lookup slower than max_message_budget fails
// closed with mcpgate's own 503 and Retry-After, before Envoy's timer
// ends. An Envoy whose max_message_timeout is below the override ignores
// it and answers 504 at its message_timeout. Fast calls send no override.
func TestExtProcOverrideMessageTimeout(t *testing.T) {
	dir := t.TempDir()
	rs := &overrideRights{}
	rsrv := httptest.NewServer(rs)
	t.Cleanup(rsrv.Close)

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
	const base, audience = "https://mcp.example.com", "demo-upstream"
	v, err := assertion.NewVerifier(assertion.VerifierOptions{Issuer: base, Audience: audience, Keys: ks.PublicJWKS()})
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewServer(demo.New(demo.Options{Assertions: v}).Handler())
	t.Cleanup(up.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Disabled = true
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Listeners.ExtProc.MaxMessageBudget = config.DurationOf(overrideMaxBudget)
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	cfg.Upstreams[0].Audience = audience
	cfg.Auth = &config.Auth{ResourceBaseURL: base, GatewayTokens: &config.GatewayTokens{}}
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	cfg.Rights = &config.Rights{HTTP: &config.RightsHTTP{URL: rsrv.URL + "/rights"}}
	cfg.Assertion = config.Assertion{KeysFile: keysFile}
	cfg.Audit.Log = "off"
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := cfg.Listeners.ExtProc.MessageBudget.D(); got >= overrideEnvoyTimeout {
		t.Fatalf("message_budget %v is not below Envoy's message_timeout %v", got, overrideEnvoyTimeout)
	}
	a := startApp(t, cfg)
	c, err := a.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	token := c.Secret
	name := cfg.Upstreams[0].Name

	envoy, d := startEnvoy(t, a.ExtProcAddr, up.URL, name, overrideEnvoyTimeout) // max_message_timeout 5s
	strict, ds := startEnvoyMaxTimeout(t, a.ExtProcAddr, up.URL, name, overrideEnvoyTimeout, overrideEnvoyStrictMax)

	t.Run("slow rights: Envoy honours the override", func(t *testing.T) {
		rs.delay.Store(int64(overrideSlowRights))
		before, calls := d.Stats(), rs.calls.Load()
		start := time.Now()
		r := overrideCall(t, envoy.URL, token)
		took := time.Since(start)
		if r.status != 200 || strings.Contains(r.body, `"isError":true`) || !strings.Contains(r.body, "T-") {
			t.Fatalf("call: %+v", r)
		}
		if took < overrideSlowRights {
			t.Errorf("answered after %v: the rights lookup (%v) was not waited for", took, overrideSlowRights)
		}
		if rs.calls.Load() == calls {
			t.Error("the rights endpoint was not asked")
		}
		st := d.Stats()
		if n := st.OverrideTimeoutsReceived - before.OverrideTimeoutsReceived; n != 1 {
			t.Errorf("Envoy honoured %d overrides, want 1", n)
		}
		if n := st.MessageTimeouts - before.MessageTimeouts; n != 0 {
			t.Errorf("Envoy's message timer expired %d times", n)
		}
		if n := overrideCount(t, a); n != 1 {
			t.Errorf("%s = %v, want 1", gateway.MetricExtProcOverrides, n)
		}
	})

	t.Run("rights slower than max_message_budget: mcpgate's 503, before Envoy's timer", func(t *testing.T) {
		rs.delay.Store(int64(overrideTooSlowRights))
		before := d.Stats()
		start := time.Now()
		r := overrideCall(t, envoy.URL, token)
		took := time.Since(start)
		if r.status != 503 || r.retryAfter != gateway.RetryAfterSeconds || r.contentType != "application/json" || !strings.Contains(r.body, `"id":7`) {
			t.Fatalf("call: %+v", r)
		}
		if took < overrideMaxBudget || took >= overrideTooSlowRights {
			t.Errorf("answered after %v, want at the extended deadline %v", took, overrideMaxBudget)
		}
		st := d.Stats()
		if n := st.MessageTimeouts - before.MessageTimeouts; n != 0 {
			t.Errorf("Envoy's message timer expired %d times: Envoy answered, not mcpgate", n)
		}
		if n := st.OverrideTimeoutsReceived - before.OverrideTimeoutsReceived; n != 1 {
			t.Errorf("Envoy honoured %d overrides, want 1", n)
		}
	})

	t.Run("Envoy's max_message_timeout below the override: ignored, Envoy's 504", func(t *testing.T) {
		rs.delay.Store(int64(overrideSlowRights))
		before := ds.Stats()
		start := time.Now()
		r := overrideCall(t, strict.URL, token)
		took := time.Since(start)
		if r.status != http.StatusGatewayTimeout {
			t.Fatalf("call: %+v", r)
		}
		if took >= overrideSlowRights {
			t.Errorf("answered after %v: Envoy's timer (%v) was restarted", took, overrideEnvoyTimeout)
		}
		st := ds.Stats()
		if n := st.OverrideTimeoutsIgnored - before.OverrideTimeoutsIgnored; n != 1 {
			t.Errorf("Envoy ignored %d overrides, want 1", n)
		}
		if n := st.OverrideTimeoutsReceived - before.OverrideTimeoutsReceived; n != 0 {
			t.Errorf("Envoy honoured %d overrides", n)
		}
		if n := st.MessageTimeouts - before.MessageTimeouts; n != 1 {
			t.Errorf("Envoy's message timer expired %d times, want 1", n)
		}
		if n := st.UpstreamRequests - before.UpstreamRequests; n != 0 {
			t.Errorf("%d requests forwarded", n)
		}
	})

	t.Run("fast rights: no override", func(t *testing.T) {
		rs.delay.Store(0)
		before, count := d.Stats(), overrideCount(t, a)
		for range 5 {
			if r := overrideCall(t, envoy.URL, token); r.status != 200 || strings.Contains(r.body, `"isError":true`) {
				t.Fatalf("call: %+v", r)
			}
		}
		if n := d.Stats().OverrideTimeoutsReceived - before.OverrideTimeoutsReceived; n != 0 {
			t.Errorf("Envoy received %d overrides", n)
		}
		if n := overrideCount(t, a); n != count {
			t.Errorf("%s went from %v to %v", gateway.MetricExtProcOverrides, count, n)
		}
	})
}

// startEnvoyMaxTimeout is startEnvoy with max_message_timeout maxTimeout.
func startEnvoyMaxTimeout(t *testing.T, target, upstream, name string, messageTimeout, maxTimeout time.Duration) (*httptest.Server, *envoydriver.Driver) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	d, err := envoydriver.New(envoydriver.Config{
		Target:   target,
		Upstream: u,
		Mode: &extprocfilterv3.ProcessingMode{
			RequestHeaderMode: extprocfilterv3.ProcessingMode_SEND, RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			RequestTrailerMode: extprocfilterv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    messageTimeout,
		MaxMessageTimeout: maxTimeout,
		BufferLimit:       5 << 20,
		RequestAttributes: []string{"xds.route_metadata"},
		RouteMetadata:     map[string]map[string]any{"mcpgate": {"upstream": name}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() { srv.Close(); _ = d.Close() })
	return srv, d
}

type overrideReply struct {
	status                        int
	contentType, retryAfter, body string
}

// overrideCall calls list_technicians as acme's alice on /mcp.
func overrideCall(t *testing.T, base, token string) overrideReply {
	t.Helper()
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"e2e","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"list_technicians","arguments":{},` + meta + `}}`
	req, err := http.NewRequest("POST", base+"/mcp", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "list_technicians")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return overrideReply{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
}

// overrideCount is mcpgate's mcpgate_extproc_message_timeout_overrides_total
// for the request body.
func overrideCount(t *testing.T, a *app.App) float64 {
	t.Helper()
	mfs, err := a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != gateway.MetricExtProcOverrides {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "phase" && l.GetValue() == gateway.PhaseRequestBody {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("%s{phase=%q} not exported", gateway.MetricExtProcOverrides, gateway.PhaseRequestBody)
	return 0
}
