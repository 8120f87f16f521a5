package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/policy"
)

// clashUpstream is a small Go SDK server whose tool find_customers has the
// name of a demo tool: behind one federated route both are listed, each
// under its member's prefix. It records what each call it got named.
type clashUpstream struct {
	srv *sdk.Server
	url string
	mu  sync.Mutex
	got []clashRequest
}

type clashRequest struct {
	MCPName, UpstreamHeader, Body string
}

func startClash(t *testing.T) *clashUpstream {
	t.Helper()
	u := &clashUpstream{}
	u.srv = sdk.NewServer(&sdk.Implementation{Name: "clash", Version: "1"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}, Prompts: &sdk.PromptCapabilities{}, Resources: &sdk.ResourceCapabilities{}},
	})
	for _, name := range []string{demo.ToolFindCustomers, "echo", "undeclared_thing"} {
		u.srv.AddTool(&sdk.Tool{Name: name, Description: "clash " + name, InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)},
			func(_ context.Context, r *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "clash:" + r.Params.Name}}}, nil
			})
	}
	u.srv.AddPrompt(&sdk.Prompt{Name: "greet", Description: "a greeting"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hello from clash"}}}}, nil
	})
	u.srv.AddResource(&sdk.Resource{URI: "file:///notes.txt", Name: "notes", MIMEType: "text/plain"},
		func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
			return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: "file:///notes.txt", MIMEType: "text/plain", Text: "clash notes"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return u.srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		// Calls only: mcpgate lists its members in the background.
		if m := r.Header.Get("Mcp-Method"); m == "tools/call" || m == "prompts/get" || m == "resources/read" || strings.Contains(string(body), `"tools/call"`) {
			u.mu.Lock()
			u.got = append(u.got, clashRequest{r.Header.Get("Mcp-Name"), r.Header.Get("X-Mcpgate-Upstream"), string(body)})
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	u.url = s.URL + "/mcp"
	return u
}

func (u *clashUpstream) last() clashRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.got) == 0 {
		return clashRequest{}
	}
	return u.got[len(u.got)-1]
}

// startEverythingStateless builds and runs the Go SDK's conformance
// everything-server, stateless (revision 2026-07-28 needs no session).
func startEverythingStateless(t *testing.T) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "everything-server")
	build := exec.Command("go", "build", "-o", exe, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building everything-server: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	startProcess(t, exec.Command(exe, "-http", addr, "-stateless=true"), addr)
	return "http://" + addr + "/mcp"
}

// fedEnv is a gateway with one virtual server "work" on /mcp: the demo
// server (prefix bk), the conformance everything-server (ev), the clash
// server (cl), and a member that is down (gone).
type fedEnv struct {
	proxy, admin string
	clash        *clashUpstream
	demo         *demo.Server
	seen         *demoSeen
	// vias are the paths to the server: the standalone proxy, and the
	// Envoy driver in front of the ext_proc listener, routing each
	// request to the member mcpgate names in x-mcpgate-upstream.
	vias   []via
	driver *envoydriver.Driver
	// targets are the members' base URLs, by upstream name (an Envoy
	// cluster each).
	targets map[string]string
	extproc string
	server  string // the virtual server's name
}

// startDriver runs an Envoy driver in front of e's ext_proc listener
// with the routes config/envoy/federation.yaml has: one per member on
// x-mcpgate-upstream (removed before forwarding), then /mcp alone
// answered 421. action is the ext_proc filter's route_cache_action.
func (e *fedEnv) startDriver(t *testing.T, action extprocfilterv3.ExternalProcessor_RouteCacheAction) (*envoydriver.Driver, string) {
	t.Helper()
	md := map[string]map[string]any{"mcpgate": {"upstream": e.server}}
	var routes []envoydriver.Route
	for _, m := range slices.Sorted(maps.Keys(e.targets)) {
		target, err := url.Parse(e.targets[m])
		if err != nil {
			t.Fatal(err)
		}
		routes = append(routes, envoydriver.Route{Name: e.server + "_" + m, Path: "/mcp", Headers: map[string]string{gateway.UpstreamHeader: m},
			Metadata: md, Cluster: m, Upstream: target, RequestHeadersToRemove: []string{gateway.UpstreamHeader}})
	}
	routes = append(routes, envoydriver.Route{Name: e.server + "_unrouted", Path: "/mcp", Metadata: md, DirectResponse: &envoydriver.DirectResponse{Status: 421}})
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
	return d, srv.URL
}

func startFederation(t *testing.T) *fedEnv {
	t.Helper()
	d := demo.New(demo.Options{})
	seen := &demoSeen{}
	up := httptest.NewServer(seen.wrap(d.Handler()))
	t.Cleanup(up.Close)
	clash := startClash(t)
	every := startEverythingStateless(t)
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + down.Addr().String() + "/mcp"
	down.Close() // nothing listens there

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = up.URL + "/mcp"
	cfg.Upstreams[0].Route = "" // a member only
	delete(cfg.Upstreams[0].Tools, demo.ToolCancelBooking)
	read := policy.ToolDeclaration{Effect: policy.EffectRead}
	cfg.Upstreams = append(cfg.Upstreams,
		config.Upstream{Name: "everything", URL: every, Tools: map[string]policy.ToolDeclaration{"test_simple_text": read, "test_embedded_resource": read}},
		config.Upstream{Name: "clash", URL: clash.url, Tools: map[string]policy.ToolDeclaration{demo.ToolFindCustomers: read, "echo": read}},
		config.Upstream{Name: "gone", URL: downURL, Tools: map[string]policy.ToolDeclaration{"anything": read}},
	)
	cfg.Servers = []config.Server{{Name: "work", Route: "/mcp", Members: []config.Member{
		{Upstream: "demo", Prefix: "bk"}, {Upstream: "everything", Prefix: "ev"}, {Upstream: "clash", Prefix: "cl"}, {Upstream: "gone", Prefix: "gone"},
	}}}
	cfg.Catalog.Refresh = config.DurationOf(config.MinCatalogRefresh) // the drift case waits for a listing
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	e := &fedEnv{server: "work", seen: seen, proxy: "http://" + a.ProxyAddr + "/mcp", admin: "http://" + a.AdminAddr, clash: clash, demo: d, extproc: a.ExtProcAddr,
		targets: map[string]string{"demo": up.URL, "everything": strings.TrimSuffix(every, "/mcp"), "clash": strings.TrimSuffix(clash.url, "/mcp"), "gone": strings.TrimSuffix(downURL, "/mcp")}}
	driver, front := e.startDriver(t, extprocfilterv3.ExternalProcessor_DEFAULT)
	e.driver = driver
	e.vias = []via{{"proxy", e.proxy}, {"envoy", front + "/mcp"}}
	return e
}

// rpc sends one 2026-07-28 request to the federated route and decodes the
// JSON-RPC answer.
func (e *fedEnv) rpc(t *testing.T, method, name, params string, extra ...string) (int, map[string]any) {
	t.Helper()
	if params == "" {
		params = "{" + meta26 + "}"
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + params + `}`
	h := toHeader(v26(method, name))
	for i := 0; i+1 < len(extra); i += 2 {
		h.Set(extra[i], extra[i+1])
	}
	resp, b := roundTrip(t, "POST", e.proxy, h, []byte(body))
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer is the stream's last data line.
		for line := range strings.Lines(string(b)) {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				b = []byte(d)
			}
		}
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: not JSON (%d): %s", method, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

func (e *fedEnv) callTool(t *testing.T, name, args string, extra ...string) (isError bool, text string) {
	t.Helper()
	_, m := e.rpc(t, "tools/call", name, `{"name":"`+name+`","arguments":`+args+`,`+meta26+`}`, extra...)
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("tools/call %s: no result: %v", name, m)
	}
	isError, _ = res["isError"].(bool)
	for _, c := range res["content"].([]any) {
		if s, ok := c.(map[string]any)["text"].(string); ok {
			text += s
		}
	}
	return isError, text
}

func (e *fedEnv) list(t *testing.T, method, kind, key string) []string {
	t.Helper()
	_, m := e.rpc(t, method, "", "")
	res, ok := m["result"].(map[string]any)
	if !ok {
		t.Fatalf("%s: %v", method, m)
	}
	var names []string
	for _, it := range res[kind].([]any) {
		names = append(names, it.(map[string]any)[key].(string))
	}
	return names
}

// TestFederation: three real upstreams and one that is down behind one
// route, through the proxy and through the Envoy driver
// (federationCases, federationAlike), then sessions of an older
// revision, and a member whose tools and prompts change.
func TestFederation(t *testing.T) {
	env := startFederation(t)
	for _, v := range env.vias {
		t.Run(v.name, func(t *testing.T) {
			e := *env
			e.proxy = v.base
			federationCases(t, &e)
		})
	}
	e := env
	t.Run("alike through the proxy and through Envoy", func(t *testing.T) { federationAlike(t, e) })
	t.Run("older revision sessions", func(t *testing.T) { federationSessions(t, e) })
	t.Run("a member's tools and prompts change", func(t *testing.T) {
		// A subscriptions/listen stream on the server hears of it.
		listen := openListen(t, strings.TrimSuffix(e.proxy, "/mcp"), "")
		listen.expect(t, "federated", "notifications/subscriptions/acknowledged")
		// A prompt is added too: mcpgate lists the members' prompts
		// itself, so it announces prompts/list_changed (the stream asked).
		e.clash.srv.AddPrompt(&sdk.Prompt{Name: "farewell", Description: "a goodbye"}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
			return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "bye from clash"}}}}, nil
		})
		e.clash.srv.AddTool(&sdk.Tool{Name: "echo", Description: "changed", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "changed"}}}, nil
			})
		e.clash.srv.RemoveTools(demo.ToolFindCustomers)
		poll.Until(t, 3*config.MinCatalogRefresh, "the catalog lists the clash member again", func() bool {
			return !slices.Contains(e.list(t, "tools/list", "tools", "name"), "cl_"+demo.ToolFindCustomers)
		})
		if isErr, text := e.callTool(t, "cl_"+demo.ToolFindCustomers, `{}`); !isErr {
			t.Errorf("a removed tool was called: %q", text)
		}
		seen := map[string]bool{}
		for !seen["notifications/tools/list_changed"] || !seen["notifications/prompts/list_changed"] {
			m := listen.next(t, "tools/ and prompts/list_changed")
			if seen[m.Method] && m.Method == "notifications/prompts/list_changed" {
				t.Errorf("%s announced twice for one change", m.Method) // tools changed in two steps
			}
			seen[m.Method] = true
		}
		if prompts := e.list(t, "prompts/list", "prompts", "name"); !slices.Contains(prompts, "cl_farewell") {
			t.Errorf("prompts/list after the change: %v", prompts)
		}
		if isErr, text := e.callTool(t, "bk_"+demo.ToolFindCustomers, `{"query":"Ada"}`); isErr {
			t.Errorf("another member's tool failed: %q", text)
		}
	})
}

// federationAlike: what the proxy and the Envoy driver answer is the
// same (lists, results, refusals); each call through Envoy cleared the
// route cache so that Envoy chose the member's route; with the route
// cache retained no call reaches a member.
func federationAlike(t *testing.T, e *fedEnv) {
	at := func(base string) *fedEnv { c := *e; c.proxy = base; return &c }
	proxy, envoy := at(e.vias[0].base), at(e.vias[1].base)
	for _, l := range [][3]string{{"tools/list", "tools", "name"}, {"prompts/list", "prompts", "name"}, {"resources/list", "resources", "uri"}, {"resources/templates/list", "resourceTemplates", "uriTemplate"}} {
		p, v := proxy.list(t, l[0], l[1], l[2]), envoy.list(t, l[0], l[1], l[2])
		if !slices.Equal(p, v) || len(p) == 0 {
			t.Errorf("%s: proxy %v, Envoy %v", l[0], p, v)
		}
	}
	before := e.driver.Stats().ClearRouteCache
	calls := 0
	for _, c := range []struct{ tool, args string }{
		{"cl_" + demo.ToolFindCustomers, `{"q":"x"}`},
		{"bk_" + demo.ToolFindCustomers, `{"query":"Ada"}`},
		{"ev_test_simple_text", `{}`},
		// Refusals, with arguments of their own (the loop brake counts
		// the same call refused through either path).
		{"cl_find_customer", `{"alike":1}`},
		{"cl_undeclared_thing", `{"alike":1}`},
		{demo.ToolFindCustomers, `{"alike":1}`},
		{"gone_anything", `{"alike":1}`},
	} {
		pe, pt := proxy.callTool(t, c.tool, c.args)
		ve, vt := envoy.callTool(t, c.tool, c.args)
		if pe != ve || maskDecisionID([]byte(pt)) != maskDecisionID([]byte(vt)) {
			t.Errorf("%s: proxy (isError %v) %q\nEnvoy (isError %v) %q", c.tool, pe, pt, ve, vt)
		}
		if !pe {
			calls++
		}
	}
	if n := e.driver.Stats().ClearRouteCache - before; n < int64(calls) {
		t.Errorf("route cache cleared %d times for %d calls to members", n, calls)
	}

	t.Run("RETAIN: no call reaches a member", func(t *testing.T) {
		d, front := e.startDriver(t, extprocfilterv3.ExternalProcessor_RETAIN)
		before := clashCalls(e.clash)
		resp, body := roundTrip(t, "POST", front+"/mcp", toHeader(v26("tools/call", "cl_echo")), call("1", "cl_echo", `{"q":"x"}`))
		if after := clashCalls(e.clash); resp.StatusCode != http.StatusMisdirectedRequest || after != before {
			t.Errorf("status %d %s; clash calls %d → %d", resp.StatusCode, body, before, after)
		}
		if d.Stats().ClearRouteCacheDisabled == 0 {
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

// federationCases are the cases every path to the virtual server must
// pass alike.
func federationCases(t *testing.T, e *fedEnv) {
	tools := e.list(t, "tools/list", "tools", "name")
	t.Run("tools/list", func(t *testing.T) {
		want := []string{"bk_" + demo.ToolFindCustomers, "ev_test_simple_text", "ev_test_embedded_resource", "cl_" + demo.ToolFindCustomers, "cl_echo"}
		for _, w := range want {
			if !slices.Contains(tools, w) {
				t.Errorf("tools/list lacks %s: %v", w, tools)
			}
		}
		// Member order, each member's tools together.
		last := -1
		for _, prefix := range []string{"bk_", "ev_", "cl_"} {
			for i, n := range tools {
				if strings.HasPrefix(n, prefix) {
					if i < last {
						t.Errorf("%s listed after a later member's tool: %v", n, tools)
					}
					last = i
				}
			}
		}
		for _, n := range tools {
			if strings.HasPrefix(n, "gone_") || n == "cl_undeclared_thing" || n == "bk_"+demo.ToolCancelBooking || n == "ev_test_image_content" {
				t.Errorf("%s listed", n)
			}
		}
	})

	t.Run("call lands on the member under its own name", func(t *testing.T) {
		isErr, text := e.callTool(t, "cl_"+demo.ToolFindCustomers, `{"q":"x"}`, "X-Mcpgate-Upstream", "demo")
		if isErr || text != "clash:"+demo.ToolFindCustomers {
			t.Fatalf("cl_find_customers: isError %v, %q", isErr, text)
		}
		got := e.clash.last()
		if got.MCPName != demo.ToolFindCustomers || !strings.Contains(got.Body, `"name":"`+demo.ToolFindCustomers+`"`) {
			t.Errorf("clash got Mcp-Name %q, body %s", got.MCPName, got.Body)
		}
		if got.UpstreamHeader != "" {
			t.Errorf("the client's x-mcpgate-upstream reached the member: %q", got.UpstreamHeader)
		}
		isErr, text = e.callTool(t, "bk_"+demo.ToolFindCustomers, `{"query":"Ada"}`)
		if isErr || !strings.Contains(text, "Ada Lovelace") {
			t.Errorf("bk_find_customers: isError %v, %q", isErr, text)
		}
		isErr, text = e.callTool(t, "ev_test_simple_text", `{}`)
		if isErr || text == "" {
			t.Errorf("ev_test_simple_text: isError %v, %q", isErr, text)
		}
	})

	t.Run("unknown names", func(t *testing.T) {
		isErr, text := e.callTool(t, "cl_find_customer", `{}`)
		if !isErr || !strings.Contains(text, `"cl_find_customers"`) {
			t.Errorf("near miss: isError %v, %q (want the close match named)", isErr, text)
		}
		isErr, text = e.callTool(t, "zz_echo", `{}`)
		if !isErr || !strings.Contains(text, `"cl_echo"`) {
			t.Errorf("unknown prefix: isError %v, %q", isErr, text)
		}
		isErr, _ = e.callTool(t, demo.ToolFindCustomers, `{}`)
		if !isErr {
			t.Error("a name without prefix was called")
		}
	})

	t.Run("listed resolves, for every member", func(t *testing.T) {
		// An argument no schema has: mcpgate refuses it after resolving
		// the name (invalid_arguments), before anything is forwarded; a
		// tool whose schema allows any argument runs.
		for _, name := range tools {
			if name == "confirm_action" || name == "reject_action" || name == "list_recent_changes" {
				continue
			}
			isErr, text := e.callTool(t, name, `{"zz_probe":1}`)
			if isErr && !strings.Contains(text, "invalid_arguments") {
				t.Errorf("%s (listed): isError %v, %.200q", name, isErr, text)
			}
		}
	})

	t.Run("hidden is refused, for every member", func(t *testing.T) {
		for _, name := range []string{"cl_undeclared_thing", "bk_" + demo.ToolCancelBooking, "ev_test_image_content"} {
			before := len(e.clash.got)
			isErr, text := e.callTool(t, name, `{}`)
			if !isErr {
				t.Errorf("%s (not listed) was called: %q", name, text)
			}
			if !strings.Contains(text, `\"`+name+`\"`) && !strings.Contains(text, `"`+name+`"`) {
				t.Errorf("%s: the refusal does not name the tool as the client called it: %.300q", name, text)
			}
			if len(e.clash.got) != before {
				t.Errorf("%s reached an upstream", name)
			}
		}
	})

	t.Run("member down", func(t *testing.T) {
		isErr, text := e.callTool(t, "gone_anything", `{}`)
		if !isErr || !strings.Contains(text, "upstream_unavailable") {
			t.Errorf("gone_anything: isError %v, %q", isErr, text)
		}
		resp, b := roundTrip(t, "GET", e.admin+"/readyz", nil, nil)
		if resp.StatusCode != 200 || !strings.Contains(string(b), "server work: gone") {
			t.Errorf("/readyz %d: %s", resp.StatusCode, b)
		}
		_, metrics := roundTrip(t, "GET", e.admin+"/metrics", nil, nil)
		for _, w := range []string{`mcpgate_federation_members_ready{server="work",upstream="gone"} 0`, `mcpgate_federation_members_ready{server="work",upstream="clash"} 1`} {
			if !strings.Contains(string(metrics), w) {
				t.Errorf("metrics lack %s", w)
			}
		}
	})

	t.Run("prompts", func(t *testing.T) {
		prompts := e.list(t, "prompts/list", "prompts", "name")
		if !slices.Contains(prompts, "cl_greet") || !slices.Contains(prompts, "ev_test_simple_prompt") {
			t.Fatalf("prompts/list: %v", prompts)
		}
		_, m := e.rpc(t, "prompts/get", "cl_greet", `{"name":"cl_greet",`+meta26+`}`)
		if !strings.Contains(fmt.Sprint(m["result"]), "hello from clash") {
			t.Errorf("prompts/get cl_greet: %v", m)
		}
		_, m = e.rpc(t, "prompts/get", "xx_greet", `{"name":"xx_greet",`+meta26+`}`)
		if m["error"] == nil {
			t.Errorf("prompts/get xx_greet: %v", m)
		}
	})

	t.Run("resources", func(t *testing.T) {
		uris := e.list(t, "resources/list", "resources", "uri")
		if !slices.Contains(uris, "cl+file:///notes.txt") || !slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "ev+test://") }) {
			t.Fatalf("resources/list: %v", uris)
		}
		templates := e.list(t, "resources/templates/list", "resourceTemplates", "uriTemplate")
		if len(templates) == 0 || !strings.HasPrefix(templates[0], "ev+") {
			t.Errorf("resources/templates/list: %v", templates)
		}
		_, m := e.rpc(t, "resources/read", "cl+file:///notes.txt", `{"uri":"cl+file:///notes.txt",`+meta26+`}`)
		if res := fmt.Sprint(m["result"]); !strings.Contains(res, "clash notes") || !strings.Contains(res, "uri:cl+file:///notes.txt") {
			t.Errorf("resources/read: %v", m)
		}
		if got := e.clash.last(); got.MCPName != "file:///notes.txt" || !strings.Contains(got.Body, `"uri":"file:///notes.txt"`) {
			t.Errorf("the member got Mcp-Name %q, body %s", got.MCPName, got.Body)
		}
		// An embedded resource in a member's tool result carries the
		// member's prefix: a client can read it back through the route.
		_, m = e.rpc(t, "tools/call", "ev_test_embedded_resource", `{"name":"ev_test_embedded_resource","arguments":{},`+meta26+`}`)
		if res := fmt.Sprint(m["result"]); !strings.Contains(res, "uri:ev+") {
			t.Errorf("embedded resource URI not exposed: %s", res)
		}
		_, m = e.rpc(t, "resources/read", "zz+file:///notes.txt", `{"uri":"zz+file:///notes.txt",`+meta26+`}`)
		if m["error"] == nil {
			t.Errorf("resources/read of no member: %v", m)
		}
	})

	t.Run("server/discover", func(t *testing.T) {
		_, m := e.rpc(t, "server/discover", "", "")
		caps := fmt.Sprint(m["result"].(map[string]any)["capabilities"])
		for _, w := range []string{"tools", "prompts", "resources"} {
			if !strings.Contains(caps, w) {
				t.Errorf("capabilities lack %s: %s", w, caps)
			}
		}
	})

}

// demoSeen records the session ids and methods the demo member receives.
type demoSeen struct {
	mu   sync.Mutex
	reqs []demoReq
}

type demoReq struct{ httpMethod, method, session string }

func (s *demoSeen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		s.mu.Lock()
		s.reqs = append(s.reqs, demoReq{r.Method, m.Method, r.Header.Get("Mcp-Session-Id")})
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (s *demoSeen) since(n int) []demoReq {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs[n:])
}

func (s *demoSeen) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.reqs)
}

// federationSessions: an SDK client of revision 2025-11-25 on the virtual
// server. mcpgate answers initialize with its own session; the demo member
// gets one session of its own, opened once under parallel first calls
// (and the client's GET stream), never sees the client's session id, and
// is closed with the client's DELETE; stateless members are called
// without one.
func federationSessions(t *testing.T, e *fedEnv) {
	before := e.seen.len()
	cs := connectSDK(t, e.proxy, "", "2025-11-25")
	if cs.ID() == "" {
		t.Fatal("mcpgate issued no session")
	}
	names := toolNames(t, cs)
	if !slices.Contains(names, "bk_"+demo.ToolFindCustomers) || !slices.Contains(names, "cl_echo") {
		t.Fatalf("tools/list: %v", names)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "bk_" + demo.ToolFindCustomers, Arguments: map[string]any{"query": "Ada"}})
			if err == nil && res.IsError {
				err = fmt.Errorf("tool error: %v", res.Content)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("bk_find_customers: %v", err)
		}
	}
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "cl_echo", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Errorf("cl_echo: %v %+v", err, res)
	}
	var inits int
	memberSession := ""
	for _, r := range e.seen.since(before) {
		if r.session == cs.ID() {
			t.Errorf("the client's session id reached the member: %+v", r)
		}
		switch {
		case r.method == "initialize":
			inits++
		case r.method == "tools/call":
			if r.session == "" || (memberSession != "" && r.session != memberSession) {
				t.Errorf("tools/call with member session %q (first %q)", r.session, memberSession)
			}
			memberSession = r.session
		}
	}
	if inits != 1 {
		t.Errorf("the demo member got %d initialize requests for one client session, want 1", inits)
	}
	// The client's GET stream is held by the first member, in its session.
	poll.Until(t, 5*time.Second, "the client's GET stream at the demo member", func() bool {
		return slices.ContainsFunc(e.seen.since(before), func(r demoReq) bool { return r.httpMethod == "GET" && r.session == memberSession })
	})
	n := e.seen.len()
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	poll.Until(t, 5*time.Second, "the member session's DELETE", func() bool {
		return slices.ContainsFunc(e.seen.since(n), func(r demoReq) bool { return r.httpMethod == "DELETE" && r.session == memberSession })
	})
}

// TestFederationValidate: `mcpgate validate` refuses the ambiguous
// virtual servers, every problem at once with its key, and accepts the
// federation guide's example.
func TestFederationValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(`
upstreams:
  - {name: crm, url: "http://127.0.0.1:1/mcp"}
  - {name: crm-eu, url: "http://127.0.0.1:2/mcp"}
  - {name: files, url: "http://127.0.0.1:3/mcp"}
servers:
  - name: work
    members:
      - {upstream: crm, prefix: crm}
      - {upstream: crm-eu, prefix: crm-eu}
      - {upstream: files, prefix: my_files}
      - {upstream: wiki, prefix: wiki}
  - name: other
    route: /other
    members:
      - {upstream: files, prefix: files}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "validate", "--config", bad)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("validate accepted it:\n%s", out)
	}
	for _, want := range []string{
		`servers[0].members[1].prefix: "crm-eu" and the prefix of members[0] ("crm") start alike`,
		`servers[0].members[2].prefix: "my_files" holds the separator "_"`,
		`servers[0].members[3].upstream: "wiki" is not the name of an upstream`,
		`servers[1].members[0].upstream: upstream "files" is already a member at servers[0].members[2]`,
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("validate does not say %q:\n%s", want, out)
		}
	}
	src, err := os.ReadFile("../docs/guides/federation.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(src), "```yaml\n")
	example, _, _ = strings.Cut(example, "```")
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte(example), 0o600); err != nil {
		t.Fatal(err)
	}
	runBin(t, "validate", "--config", good)
}
