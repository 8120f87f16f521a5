package extproc_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/policy"
)

// seenAuth accepts every request and records the upstream and tenant the
// adapter gave the pipeline.
type seenAuth struct {
	mu   sync.Mutex
	seen []string
}

func (a *seenAuth) Authenticate(_ context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	a.mu.Lock()
	a.seen = append(a.seen, r.Upstream+"|"+r.Tenant)
	a.mu.Unlock()
	return &policy.Principal{Authenticated: true, Subject: "alice", Tenant: r.Tenant}, nil
}

func (a *seenAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

func (a *seenAuth) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.seen
	a.seen = nil
	return s
}

func routeMetadata(t *testing.T, upstream string) map[string]*structpb.Struct {
	return map[string]*structpb.Struct{"envoy.filters.http.ext_proc": mustStruct(t, map[string]any{
		"xds.route_metadata": `filter_metadata { key: "mcpgate" value { fields { key: "upstream" value { string_value: "` + upstream + `" } } } }`,
	})}
}

// TestTenantRoutes: the tenant comes from the path matched against the
// upstream's route, whichever way the upstream was chosen (route metadata,
// header, path); a path not on a route with {tenant} is 404 and never
// reaches authentication.
func TestTenantRoutes(t *testing.T) {
	auth := &seenAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(auth))
	srv, err := extproc.New(extproc.Options{Pipeline: p, Upstreams: []extproc.Upstream{
		{Name: "crm", Route: "/t/{tenant}/mcp"},
		{Name: "admin", Route: "/t/admin/mcp"},
		{Name: "tickets", Route: "/tickets/mcp"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := serveServer(t, srv)
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta + `}}`
	for _, tt := range []struct {
		name   string
		attrs  map[string]*structpb.Struct
		path   string
		header []string
		want   string // "upstream|tenant", or "404"
	}{
		{"path on the tenant route", nil, "/t/acme/mcp", nil, "crm|acme"},
		{"query is not part of the path", nil, "/t/acme/mcp?x=1", nil, "crm|acme"},
		{"exact route beats the pattern", nil, "/t/admin/mcp", nil, "admin|"},
		{"exact route", nil, "/tickets/mcp", nil, "tickets|"},
		{"metadata names crm: tenant from its route", routeMetadata(t, "crm"), "/t/globex/mcp", nil, "crm|globex"},
		{"header names crm: tenant from its route", nil, "/t/globex/mcp", []string{"x-mcpgate-upstream", "crm"}, "crm|globex"},
		{"metadata names crm, path not on its route", routeMetadata(t, "crm"), "/crm/mcp", nil, "404"},
		{"metadata names crm, encoded tenant", routeMetadata(t, "crm"), "/t/%61cme/mcp", nil, "404"},
		{"header names crm, empty tenant", nil, "/t//mcp", []string{"x-mcpgate-upstream", "crm"}, "404"},
		{"metadata names an exact route: any path", routeMetadata(t, "tickets"), "/t/acme/mcp", nil, "tickets|"},
		{"encoded tenant, nothing names the upstream", nil, "/t/%61cme/mcp", nil, "404"},
		{"trailing slash", nil, "/t/acme/mcp/", nil, "404"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kv := append([]string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"}, tt.header...)
			r := exchange(t, s, reqHeaders(tt.path, tt.attrs, kv...))
			if tt.want == "404" {
				ir := r.GetImmediateResponse()
				if ir.GetStatus().GetCode() != 404 || string(ir.GetBody()) != "404 page not found\n" {
					t.Fatalf("want 404, got %v", r)
				}
				if ct, _ := header(ir.GetHeaders(), "content-type"); ct != "text/plain; charset=utf-8" {
					t.Errorf("content-type %q", ct)
				}
				if seen := auth.take(); len(seen) != 0 {
					t.Errorf("authenticated: %q", seen)
				}
				return
			}
			if r.GetRequestHeaders() == nil {
				t.Fatalf("want a headers response, got %v", r)
			}
			if r := exchange(t, s, reqBody(list)); r.GetRequestBody() == nil {
				t.Fatalf("refused: %v", r)
			}
			if seen := auth.take(); len(seen) != 1 || seen[0] != tt.want {
				t.Errorf("pipeline saw %q, want %q", seen, tt.want)
			}
		})
	}
	t.Run("an unknown upstream named is still a configuration error", func(t *testing.T) {
		s, _ := c.Process(context.Background())
		r := exchange(t, s, reqHeaders("/t/acme/mcp", routeMetadata(t, "nope")))
		if r.GetImmediateResponse().GetStatus().GetCode() != 500 {
			t.Fatalf("want 500, got %v", r)
		}
	})
}

// TestOnlyUpstreamWithTenant: a single upstream serves every path Envoy
// sends, but with {tenant} only the paths on its route.
func TestOnlyUpstreamWithTenant(t *testing.T) {
	auth := &seenAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(auth))
	srv, err := extproc.New(extproc.Options{Pipeline: p, Upstreams: []extproc.Upstream{{Name: "crm", Route: "/t/{tenant}/mcp"}}})
	if err != nil {
		t.Fatal(err)
	}
	c := serveServer(t, srv)
	for path, code := range map[string]int{"/t/acme/mcp": 0, "/mcp": 404, "/t/%61cme/mcp": 404} {
		s, _ := c.Process(context.Background())
		r := exchange(t, s, reqHeaders(path, nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"))
		if got := int(r.GetImmediateResponse().GetStatus().GetCode()); got != code {
			t.Errorf("%s: %d, want %d", path, got, code)
		}
	}
}

func TestNewRefusesBadRoutes(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}))
	for _, ups := range [][]extproc.Upstream{
		{{Name: "a", Route: "/t/{tenant}/mcp"}, {Name: "b", Route: "/{tenant}/t/mcp"}},
		{{Name: "a", Route: "/t/{x}/mcp"}},
		{{Name: "a", Route: "/mcp"}, {Name: "b", Route: "/mcp"}},
	} {
		if _, err := extproc.New(extproc.Options{Pipeline: p, Upstreams: ups}); err == nil || !strings.HasPrefix(err.Error(), "extproc:") {
			t.Errorf("%v: %v", ups, err)
		}
	}
}
