package extproc_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
	"github.com/mcpgate/mcpgate/policy"
)

// member is an upstream that answers every request with a JSON-RPC result
// naming itself, and counts what it got (a stand-in for an MCP server:
// the routing, not the server, is under test).
type member struct {
	name string
	url  *url.URL
	hits atomic.Int64
	// upstreamHeader is the x-mcpgate-upstream the last request carried.
	upstreamHeader atomic.Value
}

func startMember(t *testing.T, name string) *member {
	m := &member{name: name}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		m.hits.Add(1)
		m.upstreamHeader.Store(r.Header.Get(gateway.UpstreamHeader))
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"`+name+`"}]}}`)
	}))
	t.Cleanup(srv.Close)
	m.url, _ = url.Parse(srv.URL)
	return m
}

// TestMemberRoutingThroughEnvoy: mcpgate's ext_proc server behind the
// Envoy driver with a route per member matching x-mcpgate-upstream and a
// default route that answers itself. A call lands on the member the
// verdict names (a test seam names it: "member-" + the route's upstream),
// whatever x-mcpgate-upstream the client sent; with route_cache_action
// RETAIN Envoy keeps the route it chose on the client's headers, so the
// call never reaches the member.
func TestMemberRoutingThroughEnvoy(t *testing.T) {
	crm, tickets := startMember(t, "member-crm"), startMember(t, "member-tickets")
	// One upstream, "team", stands for the federated route; the seam
	// names the member by tool, as the resolver would by prefix.
	logs := &unroutedLog{}
	s, err := extproc.New(extproc.Options{
		Pipeline: gatewaytest.New(t, serverBounds, gatewaytest.WithDecls(map[string]map[string]policy.ToolDeclaration{
			"crm": {"get_booking": {Effect: policy.EffectRead}, "open_ticket": {Effect: policy.EffectRead}},
		})),
		Upstreams: []extproc.Upstream{{Name: "crm", Route: "/crm/mcp"}},
		Logger:    slog.New(logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	toolMember := map[string]string{"get_booking": "member-crm", "open_ticket": "member-tickets"}
	extproc.RouteTo(s, func(r *gateway.Request) string { return toolMember[r.Header.Get("mcp-name")] })
	target := serveTarget(t, s)
	// Every route of the endpoint names the same mcpgate upstream in its
	// metadata, so mcpgate serves the request alike whichever route Envoy
	// chose on the client's headers.
	md := map[string]map[string]any{"mcpgate": {"upstream": "crm"}}
	routes := func(fallback envoydriver.Route) []envoydriver.Route {
		return []envoydriver.Route{
			{Name: "member_crm", Headers: map[string]string{gateway.UpstreamHeader: "member-crm"}, Metadata: md, Cluster: "crm", Upstream: crm.url},
			{Name: "member_tickets", Headers: map[string]string{gateway.UpstreamHeader: "member-tickets"}, Metadata: md, Cluster: "tickets", Upstream: tickets.url},
			fallback,
		}
	}
	unrouted := envoydriver.Route{Name: "unrouted", Metadata: md, DirectResponse: &envoydriver.DirectResponse{Status: 421, Body: "unrouted"}}
	toTickets := envoydriver.Route{Name: "default", Metadata: md, Cluster: "tickets", Upstream: tickets.url}
	for _, tt := range []struct {
		name     string
		action   extprocfilterv3.ExternalProcessor_RouteCacheAction
		fallback envoydriver.Route
		path     string
		tool     string
		client   string // the client's x-mcpgate-upstream
		want     string // the member that answers, or "unrouted"
	}{
		{"crm call", extprocfilterv3.ExternalProcessor_DEFAULT, unrouted, "/crm/mcp", "get_booking", "", "member-crm"},
		{"tickets call", extprocfilterv3.ExternalProcessor_DEFAULT, unrouted, "/crm/mcp", "open_ticket", "", "member-tickets"},
		{"client's header overruled", extprocfilterv3.ExternalProcessor_DEFAULT, unrouted, "/crm/mcp", "get_booking", "member-tickets", "member-crm"},
		{"CLEAR routes too", extprocfilterv3.ExternalProcessor_CLEAR, unrouted, "/crm/mcp", "get_booking", "", "member-crm"},
		{"RETAIN: the default route answers", extprocfilterv3.ExternalProcessor_RETAIN, unrouted, "/crm/mcp", "get_booking", "", "unrouted"},
		{"RETAIN: a default route to a member misroutes", extprocfilterv3.ExternalProcessor_RETAIN, toTickets, "/crm/mcp", "get_booking", "", "member-tickets"},
		{"RETAIN: the client's header chooses", extprocfilterv3.ExternalProcessor_RETAIN, unrouted, "/crm/mcp", "get_booking", "member-tickets", "member-tickets"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, err := envoydriver.New(envoydriver.Config{Target: target, Routes: routes(tt.fallback), RouteCacheAction: tt.action,
				RequestAttributes: []string{"xds.route_metadata"},
				AllowModeOverride: true, MessageTimeout: extproc.DefaultMaxMessageBudget, Logf: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			front := httptest.NewServer(d)
			t.Cleanup(func() { front.Close(); d.Close() })
			before := map[*member]int64{crm: crm.hits.Load(), tickets: tickets.hits.Load()}
			req, _ := http.NewRequest("POST", front.URL+tt.path, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tt.tool+`","arguments":{},`+meta+`}}`))
			for k, v := range map[string]string{"content-type": "application/json", "accept": "application/json, text/event-stream",
				"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tt.tool} {
				req.Header.Set(k, v)
			}
			if tt.client != "" {
				req.Header.Set(gateway.UpstreamHeader, tt.client)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			landed := "unrouted"
			for _, m := range []*member{crm, tickets} {
				if m.hits.Load() > before[m] {
					landed = m.name
					if got := m.upstreamHeader.Load(); got != m.name && tt.action != extprocfilterv3.ExternalProcessor_RETAIN {
						t.Errorf("%s got %s %q", m.name, gateway.UpstreamHeader, got)
					}
				}
			}
			if landed != tt.want || !strings.Contains(string(body), tt.want) {
				t.Fatalf("landed on %s, answer %d %s; want %s", landed, resp.StatusCode, body, tt.want)
			}
			// mcpgate tells the operator when Envoy answered from the
			// endpoint's own route instead of the member's.
			if reported := logs.seen.Swap(false); reported != (landed == "unrouted") {
				t.Errorf("unrouted request reported: %v, landed on %s", reported, landed)
			}
		})
	}
}

// serveTarget serves s on a loopback port and returns its gRPC target.
func serveTarget(t *testing.T, s *extproc.Server) string {
	t.Helper()
	srv := grpc.NewServer(extproc.GRPCServerOptions(2 << 20)...)
	extprocv3.RegisterExternalProcessorServer(srv, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// unroutedLog is a slog.Handler that remembers whether the server reported
// a request Envoy did not route to its member.
type unroutedLog struct{ seen atomic.Bool }

func (l *unroutedLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *unroutedLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *unroutedLog) WithGroup(string) slog.Handler            { return l }
func (l *unroutedLog) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "Envoy did not route the request to its member") {
		l.seen.Store(true)
	}
	return nil
}
