package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/policy"
)

// fedEnvoyEnv is one virtual server "team" on /mcp (the demo server as bk,
// the conformance everything-server as ev, the clash server as cl, a member
// that is down as gone) served by the standalone proxy and, through the
// Envoy driver, by the ext_proc listener of the same mcpgate. The driver
// has the routes config/envoy/federation.yaml has: one per member on
// x-mcpgate-upstream (removing it before forwarding), then /mcp alone
// answered 421.
type fedEnvoyEnv struct {
	proxy, envoy *fedEnv
	driver       *envoydriver.Driver
	members      map[string]*url.URL // member → its base URL
	extproc      string
}

func startFederationEnvoy(t *testing.T) *fedEnvoyEnv {
	t.Helper()
	d := demo.New(demo.Options{})
	up := httptest.NewServer(d.Handler())
	t.Cleanup(up.Close)
	clash := startClash(t)
	every := startEverythingStateless(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String() + "/mcp"
	ln.Close()

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Disabled = true
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL, cfg.Upstreams[0].Route = up.URL+"/mcp", ""
	read := policy.ToolDeclaration{Effect: policy.EffectRead}
	cfg.Upstreams = append(cfg.Upstreams,
		config.Upstream{Name: "everything", URL: every, Tools: map[string]policy.ToolDeclaration{"test_simple_text": read}},
		config.Upstream{Name: "clash", URL: clash.url, Tools: map[string]policy.ToolDeclaration{demo.ToolFindCustomers: read, "echo": read}},
		config.Upstream{Name: "gone", URL: gone, Tools: map[string]policy.ToolDeclaration{"anything": read}},
	)
	cfg.Servers = []config.Server{{Name: "team", Route: "/mcp", Members: []config.Member{
		{Upstream: "demo", Prefix: "bk"}, {Upstream: "everything", Prefix: "ev"}, {Upstream: "clash", Prefix: "cl"}, {Upstream: "gone", Prefix: "gone"},
	}}}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	e := &fedEnvoyEnv{extproc: a.ExtProcAddr, members: map[string]*url.URL{}}
	for _, u := range cfg.Upstreams {
		base, err := url.Parse(u.URL)
		if err != nil {
			t.Fatal(err)
		}
		e.members[u.Name] = &url.URL{Scheme: base.Scheme, Host: base.Host}
	}
	e.proxy = &fedEnv{proxy: "http://" + a.ProxyAddr + "/mcp", clash: clash, demo: d}
	front := e.startDriver(t, extprocfilterv3.ExternalProcessor_DEFAULT)
	e.envoy = &fedEnv{proxy: front + "/mcp", clash: clash, demo: d}
	return e
}

// startDriver runs an Envoy driver with the federation routes and the
// route cache action given, and returns its base URL.
func (e *fedEnvoyEnv) startDriver(t *testing.T, action extprocfilterv3.ExternalProcessor_RouteCacheAction) string {
	t.Helper()
	md := map[string]map[string]any{"mcpgate": {"upstream": "team"}}
	var routes []envoydriver.Route
	for _, m := range []string{"demo", "everything", "clash", "gone"} {
		routes = append(routes, envoydriver.Route{Name: "team_" + m, Path: "/mcp", Headers: map[string]string{gateway.UpstreamHeader: m},
			Metadata: md, Cluster: m, Upstream: e.members[m], RequestHeadersToRemove: []string{gateway.UpstreamHeader}})
	}
	routes = append(routes, envoydriver.Route{Name: "team_unrouted", Path: "/mcp", Metadata: md, DirectResponse: &envoydriver.DirectResponse{Status: 421}})
	d, err := envoydriver.New(envoydriver.Config{
		Target: e.extproc, Routes: routes, RouteCacheAction: action,
		AllowModeOverride: true, MessageTimeout: 5 * time.Second, MaxMessageTimeout: 5 * time.Second,
		BufferLimit: 5 << 20, RequestAttributes: []string{"xds.route_metadata"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() { srv.Close(); _ = d.Close() })
	e.driver = d
	return srv.URL
}

// TestFederationThroughEnvoy: the federated route answers alike through
// the standalone proxy and through Envoy, and every call reaches its member
// under its own name: mcpgate names the member in x-mcpgate-upstream with
// clear_route_cache, Envoy chooses the member's route.
func TestFederationThroughEnvoy(t *testing.T) {
	e := startFederationEnvoy(t)

	t.Run("lists", func(t *testing.T) {
		for _, l := range [][3]string{{"tools/list", "tools", "name"}, {"prompts/list", "prompts", "name"}, {"resources/list", "resources", "uri"}} {
			p, v := e.proxy.list(t, l[0], l[1], l[2]), e.envoy.list(t, l[0], l[1], l[2])
			if strings.Join(p, ",") != strings.Join(v, ",") || len(p) == 0 {
				t.Errorf("%s: proxy %v, Envoy %v", l[0], p, v)
			}
		}
	})

	t.Run("calls land on their member", func(t *testing.T) {
		before := e.driver.Stats().ClearRouteCache
		for _, c := range []struct{ tool, args, want string }{
			{"cl_" + demo.ToolFindCustomers, `{"q":"x"}`, "clash:" + demo.ToolFindCustomers},
			{"bk_" + demo.ToolFindCustomers, `{"query":"Ada"}`, "Ada Lovelace"},
			{"ev_test_simple_text", `{}`, ""},
		} {
			for _, via := range []*fedEnv{e.proxy, e.envoy} {
				// The client's own header never chooses the member.
				isErr, text := via.callTool(t, c.tool, c.args, "X-Mcpgate-Upstream", "demo")
				if isErr || !strings.Contains(text, c.want) || text == "" {
					t.Errorf("%s via %s: isError %v, %q", c.tool, via.proxy, isErr, text)
				}
			}
		}
		got := e.envoy.clash.last()
		if got.MCPName != demo.ToolFindCustomers || got.UpstreamHeader != "" {
			t.Errorf("clash got Mcp-Name %q, x-mcpgate-upstream %q", got.MCPName, got.UpstreamHeader)
		}
		if n := e.driver.Stats().ClearRouteCache - before; n < 3 {
			t.Errorf("route cache cleared %d times for 3 calls", n)
		}
	})

	t.Run("refusals alike", func(t *testing.T) {
		for _, tool := range []string{"cl_find_customer", "cl_undeclared_thing", demo.ToolFindCustomers, "gone_anything"} {
			pe, pt := e.proxy.callTool(t, tool, `{}`)
			ve, vt := e.envoy.callTool(t, tool, `{}`)
			if !pe || !ve || maskDecisionID([]byte(pt)) != maskDecisionID([]byte(vt)) {
				t.Errorf("%s: proxy (%v) %q\nEnvoy (%v) %q", tool, pe, pt, ve, vt)
			}
		}
	})

	t.Run("RETAIN: no call reaches a member", func(t *testing.T) {
		front := e.startDriver(t, extprocfilterv3.ExternalProcessor_RETAIN)
		before := clashCalls(e.envoy.clash)
		resp, body := roundTrip(t, "POST", front+"/mcp", toHeader(v26("tools/call", "cl_echo")), call("1", "cl_echo", `{"q":"x"}`))
		if after := clashCalls(e.envoy.clash); resp.StatusCode != http.StatusMisdirectedRequest || after != before {
			t.Errorf("status %d %s; clash calls %d → %d", resp.StatusCode, body, before, after)
		}
		if e.driver.Stats().ClearRouteCacheDisabled == 0 {
			t.Error("Envoy saw no clear to ignore")
		}
	})
}

// clashCalls counts the calls the clash server got.
func clashCalls(u *clashUpstream) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.got)
}
