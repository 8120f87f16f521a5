package envoydriver

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

const routeHeader = "x-member"

// members is a route table as a federated endpoint has it: one route per
// member matching the routing header, then the path alone answered
// directly (no member was named).
func members(a, b *url.URL) []Route {
	return []Route{
		{Name: "member_a", Path: "/mcp", Headers: map[string]string{routeHeader: "a"}, Cluster: "a", Upstream: a},
		{Name: "member_b", Path: "/mcp", Headers: map[string]string{routeHeader: "b"}, Cluster: "b", Upstream: b},
		{Name: "unrouted", Path: "/mcp", DirectResponse: &DirectResponse{Status: 502, Body: `{"error":"unrouted"}`, ContentType: "application/json"}},
	}
}

// routing answers each request message with what answer returns for its
// phase (nil: continue unchanged).
func routing(answer func(p phase, req *extprocv3.ProcessingRequest) *extprocv3.CommonResponse) processFunc {
	return eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(reply(req, answer(phaseOf(req), req)))
	})
}

// setMember is a header mutation that names member (removing the header
// when member is "").
func setMember(member string) *extprocv3.HeaderMutation {
	if member == "" {
		return &extprocv3.HeaderMutation{RemoveHeaders: []string{routeHeader}}
	}
	return &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw(routeHeader, member)}}
}

// TestRouteCacheClearing: the route is chosen on the client's headers
// before the ext_proc filter runs and is chosen again on the mutated
// headers only when an answer clears the route cache the way Envoy honours
// it: a request answer with a header mutation, clear_route_cache under
// DEFAULT, any header mutation under CLEAR, never under RETAIN (or
// disable_clear_route_cache), and never a clear without a header mutation
// or in the response direction. With the request body BUFFERED the body
// answer decides; with it STREAMED the router has chosen the route before
// the body answer arrives (TestStreamedBodyAnswerTooLate; a body complete
// when the headers are answered goes in one message handled as buffered,
// whatever the mode, so routing on it there works only by chance).
func TestRouteCacheClearing(t *testing.T) {
	// in the body answer unless the case says otherwise
	type answer struct {
		member string // "" leaves the header alone; "-" removes it
		clear  bool
	}
	for _, tt := range []struct {
		name                       string
		cfg                        Config
		client                     string // the client's own routing header
		headers                    answer // answer to the request headers
		body                       answer
		response                   answer // answer to the response headers
		get                        bool   // no body: decided on the headers
		want                       string // "a", "b", "unrouted"
		cleared, ignored, disabled int64
	}{
		{name: "body answer routes with clear", body: answer{"b", true}, want: "b", cleared: 1},
		{name: "missing clear misroutes", body: answer{"b", false}, want: "unrouted"},
		{name: "clear without a header mutation ignored", body: answer{"", true}, client: "a", want: "a", ignored: 1},
		{name: "RETAIN ignores clear", cfg: Config{RouteCacheAction: extprocfilterv3.ExternalProcessor_RETAIN}, body: answer{"b", true}, want: "unrouted", disabled: 1},
		{name: "disable_clear_route_cache is RETAIN", cfg: Config{DisableClearRouteCache: true}, body: answer{"b", true}, want: "unrouted", disabled: 1},
		{name: "CLEAR clears on any header mutation", cfg: Config{RouteCacheAction: extprocfilterv3.ExternalProcessor_CLEAR}, body: answer{"b", false}, want: "b", cleared: 1},
		{name: "client's header chooses the route unless cleared", client: "a", want: "a"},
		{name: "client's header overwritten and cleared", client: "a", body: answer{"b", true}, want: "b", cleared: 1},
		{name: "client's header removed and cleared", client: "a", body: answer{"-", true}, want: "unrouted", cleared: 1},
		{name: "client's header removed, not cleared", client: "a", body: answer{"-", false}, want: "a"},
		{name: "headers answer of a buffered request routes too", headers: answer{"b", true}, want: "b", cleared: 1},
		{name: "body answer overrides the headers answer", headers: answer{"a", true}, body: answer{"b", true}, want: "b", cleared: 2},
		{name: "request without body routed by the headers answer", get: true, headers: answer{"b", true}, want: "b", cleared: 1},
		{name: "response answer never clears", client: "a", response: answer{"b", true}, want: "a"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cr := func(a answer) *extprocv3.CommonResponse {
				switch a.member {
				case "":
					return &extprocv3.CommonResponse{ClearRouteCache: a.clear}
				case "-":
					return &extprocv3.CommonResponse{HeaderMutation: setMember(""), ClearRouteCache: a.clear}
				}
				return &extprocv3.CommonResponse{HeaderMutation: setMember(a.member), ClearRouteCache: a.clear}
			}
			cfg := tt.cfg
			cfg.Target = startProcessor(t, routing(func(p phase, _ *extprocv3.ProcessingRequest) *extprocv3.CommonResponse {
				switch p {
				case phaseRequestHeaders:
					return cr(tt.headers)
				case phaseRequestBody:
					return cr(tt.body)
				case phaseResponseHeaders:
					return cr(tt.response)
				}
				return nil
			}))
			a, seenA := startUpstream(t, echo)
			b, seenB := startUpstream(t, echo)
			cfg.Routes = members(a, b)
			d, front := startDriver(t, cfg)
			var hdr []string
			if tt.client != "" {
				hdr = []string{routeHeader, tt.client}
			}
			method, body := "POST", `{"call":1}`
			if tt.get {
				method, body = "GET", ""
			}
			resp, got := do(t, method, front+"/mcp", body, hdr...)
			na, _, _ := seenA.get()
			nb, _, _ := seenB.get()
			landed := map[[2]int]string{{1, 0}: "a", {0, 1}: "b", {0, 0}: "unrouted"}[[2]int{na, nb}]
			if landed != tt.want {
				t.Fatalf("landed on %q (a %d, b %d; %d %s), want %q", landed, na, nb, resp.StatusCode, got, tt.want)
			}
			if tt.want == "unrouted" && (resp.StatusCode != 502 || got != `{"error":"unrouted"}` || resp.Header.Get("Content-Type") != "application/json") {
				t.Errorf("direct response %d %q %v", resp.StatusCode, got, resp.Header)
			}
			st := d.Stats()
			if st.ClearRouteCache != tt.cleared || st.ClearRouteCacheIgnored != tt.ignored || st.ClearRouteCacheDisabled != tt.disabled {
				t.Errorf("cleared %d ignored %d disabled %d, want %d %d %d", st.ClearRouteCache, st.ClearRouteCacheIgnored, st.ClearRouteCacheDisabled, tt.cleared, tt.ignored, tt.disabled)
			}
		})
	}
}

// TestStreamedBodyAnswerTooLate: with the request body STREAMED the
// headers answer lets the headers through to the router, which forwards
// on the route it has; a body answer that arrives later clears the cache
// in vain.
func TestStreamedBodyAnswerTooLate(t *testing.T) {
	target := startProcessor(t, routing(func(p phase, _ *extprocv3.ProcessingRequest) *extprocv3.CommonResponse {
		if p == phaseRequestBody {
			return &extprocv3.CommonResponse{HeaderMutation: setMember("b"), ClearRouteCache: true}
		}
		return nil
	}))
	forwarded := make(chan struct{})
	seenA := &upstreamSeen{}
	srvA := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(forwarded) // the router forwarded before the body arrived
		body, _ := io.ReadAll(r.Body)
		seenA.record(r, body)
		echo(w, r, body)
	}))
	t.Cleanup(srvA.Close)
	a, _ := url.Parse(srvA.URL)
	b, seenB := startUpstream(t, echo)
	d, front := startDriver(t, Config{Target: target, Routes: members(a, b),
		Mode: &extprocfilterv3.ProcessingMode{RequestBodyMode: extprocfilterv3.ProcessingMode_STREAMED}})
	pr, pw := io.Pipe()
	go func() {
		<-forwarded
		_, _ = io.WriteString(pw, `{"call":1}`)
		pw.Close()
	}()
	req, _ := http.NewRequest("POST", front+"/mcp", pr)
	req.Header.Set(routeHeader, "a")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	na, _, body := seenA.get()
	nb, _, _ := seenB.get()
	if na != 1 || nb != 0 || string(body) != `{"call":1}` || string(got) != `{"call":1}` {
		t.Fatalf("a %d (%q), b %d, client %q", na, body, nb, got)
	}
	if st := d.Stats(); st.ClearRouteCache == 0 {
		t.Error("route cache never cleared (Envoy clears it; the route was used already)")
	}
}

// TestRouteAttributes: request attributes describe the route chosen on
// the client's headers (sent with the first message), response attributes
// the route the router used; the router removes the route's
// request_headers_to_remove from what it forwards.
func TestRouteAttributes(t *testing.T) {
	var rec recorder
	target := startProcessor(t, rec.wrap(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		if req.GetRequestBody() != nil {
			return one(reply(req, &extprocv3.CommonResponse{HeaderMutation: setMember("b"), ClearRouteCache: true}))
		}
		return passThrough(req)
	}))
	a, _ := startUpstream(t, echo)
	b, seenB := startUpstream(t, echo)
	routes := members(a, b)
	routes[1].Metadata = map[string]map[string]any{"mcpgate": {"member": "b"}}
	routes[1].RequestHeadersToRemove = []string{routeHeader}
	_, front := startDriver(t, Config{Target: target, Routes: routes,
		RequestAttributes: []string{"xds.route_name"}, ResponseAttributes: []string{"xds.route_name", "xds.cluster_name", "xds.route_metadata"}})
	if resp, _ := do(t, "POST", front+"/mcp", "{}"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, r, _ := seenB.get(); r.Header.Get(routeHeader) != "" {
		t.Errorf("request_headers_to_remove: b got %s %q", routeHeader, r.Header.Get(routeHeader))
	}
	reqs := rec.all()
	if got := reqs[0].GetAttributes()[filterName].GetFields()["xds.route_name"].GetStringValue(); got != "unrouted" {
		t.Errorf("request xds.route_name %q", got)
	}
	f := reqs[2].GetAttributes()[filterName].GetFields()
	if f["xds.route_name"].GetStringValue() != "member_b" || f["xds.cluster_name"].GetStringValue() != "b" || !strings.Contains(f["xds.route_metadata"].GetStringValue(), `string_value: "b"`) {
		t.Errorf("response attributes %v", f)
	}
}

// TestNoRoute: a request no route matches is answered 404 by the router,
// after the ext_proc filter saw it.
func TestNoRoute(t *testing.T) {
	var rec recorder
	target := startProcessor(t, rec.wrap(passThrough))
	a, seen := startUpstream(t, echo)
	_, front := startDriver(t, Config{Target: target, Routes: []Route{{Name: "only", Path: "/mcp", Upstream: a}}})
	resp, _ := do(t, "POST", front+"/other", "{}")
	if n, _, _ := seen.get(); resp.StatusCode != http.StatusNotFound || n != 0 {
		t.Fatalf("status %d, upstream saw %d", resp.StatusCode, n)
	}
	if len(rec.all()) == 0 {
		t.Error("the ext_proc filter runs before the router answers")
	}
}

// TestRouteConfigValidated: New refuses route tables and route cache
// settings Envoy would refuse, or that are ambiguous here.
func TestRouteConfigValidated(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"disable_clear_route_cache with CLEAR", Config{Upstream: u, DisableClearRouteCache: true, RouteCacheAction: extprocfilterv3.ExternalProcessor_CLEAR}, "can not be set to none-default"},
		{"Routes and Upstream", Config{Upstream: u, Routes: []Route{{Upstream: u}}}, "Routes replaces Upstream"},
		{"route without target", Config{Routes: []Route{{Name: "r"}}}, "exactly one of Upstream and DirectResponse"},
		{"route with both", Config{Routes: []Route{{Upstream: u, DirectResponse: &DirectResponse{Status: 404}}}}, "exactly one"},
		{"relative upstream", Config{Routes: []Route{{Upstream: &url.URL{Path: "/x"}}}}, "absolute URL"},
		{"bad status", Config{Routes: []Route{{DirectResponse: &DirectResponse{Status: 99}}}}, "direct response status"},
		{"no upstream", Config{}, "Upstream must be an absolute URL"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Target = "127.0.0.1:1"
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}
