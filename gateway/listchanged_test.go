package gateway_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// mutableCatalog is a catalog whose tools a test changes while streams
// are open (the pipeline reads it from its recheck goroutine). A test
// double for internal/catalog, which the e2e tests run for real.
type mutableCatalog struct {
	mu    sync.Mutex
	tools []gateway.CatalogTool
}

func (c *mutableCatalog) Tools(string) ([]gateway.CatalogTool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]gateway.CatalogTool(nil), c.tools...), true
}

func (c *mutableCatalog) Tool(_, name string) (gateway.CatalogTool, bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.tools {
		if t.Name == name {
			return t, true, true
		}
	}
	return gateway.CatalogTool{}, false, true
}

func (c *mutableCatalog) setState(name, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.tools {
		if c.tools[i].Name == name {
			c.tools[i].State = state
		}
	}
}

func listChangedPipeline(t *testing.T) (*gateway.Pipeline, *mutableCatalog, *principalAuth) {
	t.Helper()
	cat := &mutableCatalog{tools: newCatalog().tools}
	auth := &principalAuth{principals: map[string]policy.Principal{
		"alice": {Authenticated: true, Tenant: "acme", Subject: "alice", Rights: everyRight, CredentialKind: policy.CredentialGatewayToken, Connection: "tok_a"},
	}}
	p := gatewaytest.New(t, gatewaytest.WithDecls(catalogDecls), gatewaytest.WithAuth(auth), gatewaytest.WithCatalog(cat))
	return p, cat, auth
}

const ackEvent = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"notifications\":{},\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"L1\"}}}\n\n"

func openListen(t *testing.T, p *gateway.Pipeline, filter string) (*gateway.Exchange, *gateway.EventRewriter) {
	t.Helper()
	ctx := context.Background()
	body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":` + filter + `,` + meta2026 + `}}`
	x, v := p.HandleRequest(ctx, authReq("POST", "alice", body, "mcp-protocol-version", "2026-07-28", "mcp-method", "subscriptions/listen"))
	if v.Local != nil {
		t.Fatalf("listen refused: %s", v.Local.Body)
	}
	if mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"text/event-stream"}}); err != nil || mode != gateway.StreamSSE {
		t.Fatalf("mode %v %v", mode, err)
	}
	return x, x.NewEventRewriter(ctx)
}

// relay writes upstream bytes through w and returns what the client gets.
func relay(t *testing.T, w *gateway.EventRewriter, upstream string) string {
	t.Helper()
	var out strings.Builder
	emit := func(b []byte) error { out.Write(b); return nil }
	if err := w.Write([]byte(upstream), emit); err != nil {
		t.Fatal(err)
	}
	if err := w.Pending(emit); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// waitWake waits for the rewriter's wake-up (a recheck found a change).
func waitWake(t *testing.T, w *gateway.EventRewriter) {
	t.Helper()
	select {
	case <-w.Wake():
	case <-time.After(10 * time.Second):
		t.Fatal("no announcement became pending")
	}
}

func TestListChangedPushedOnListenStream(t *testing.T) {
	p, cat, _ := listChangedPipeline(t)
	x, w := openListen(t, p, `{"toolsListChanged":true}`)
	defer x.Finish()
	if p.OpenStreams() != 1 {
		t.Fatalf("open streams %d", p.OpenStreams())
	}
	// The acknowledgement is relayed first, with toolsListChanged: mcpgate
	// answers tools/list and honours it whatever the upstream agreed to.
	got := relay(t, w, ackEvent)
	if !strings.Contains(got, `"toolsListChanged":true`) || !strings.Contains(got, "acknowledged") {
		t.Fatalf("ack: %q", got)
	}
	// A pin changes: get_booking is no longer approved.
	cat.setState("get_booking", policy.CatalogChanged)
	p.ToolsChanged("demo")
	waitWake(t, w)
	got = relay(t, w, "")
	want := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L1"}}}`
	if !strings.Contains(got, want) {
		t.Fatalf("announcement %q, want data %s", got, want)
	}
	// The upstream's own list_changed right after ours is not relayed
	// twice back to back.
	upstreamLC := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/subscriptionId\":\"L1\"}}}\n\n"
	if got := relay(t, w, upstreamLC); got != "" {
		t.Errorf("duplicate relayed: %q", got)
	}
	// Nothing changed since: a recheck announces nothing.
	p.ToolsChanged("demo")
	other := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"crm://acme/a\"}}\n\n"
	if got := relay(t, w, other); got != other {
		t.Errorf("unexpected events: %q", got)
	}
	x.Finish()
	if p.OpenStreams() != 0 {
		t.Errorf("stream not forgotten: %d", p.OpenStreams())
	}
}

func TestListChangedAfterRightsChange(t *testing.T) {
	p, _, auth := listChangedPipeline(t)
	x, w := openListen(t, p, `{"toolsListChanged":true}`)
	defer x.Finish()
	relay(t, w, ackEvent)
	// The person loses bookings:read at the rights source: the periodic
	// check re-authenticates the stream's request and sees get_booking go.
	auth.set("alice", policy.Principal{Authenticated: true, Tenant: "acme", Subject: "alice", Rights: []string{"bookings:write"},
		CredentialKind: policy.CredentialGatewayToken, Connection: "tok_a"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.WatchToolLists(ctx, 10*time.Millisecond)
	waitWake(t, w)
	if got := relay(t, w, ""); !strings.Contains(got, "notifications/tools/list_changed") {
		t.Fatalf("no announcement: %q", got)
	}
}

func TestListChangedWaitsForTheAcknowledgement(t *testing.T) {
	p, cat, _ := listChangedPipeline(t)
	x, w := openListen(t, p, `{"toolsListChanged":true}`)
	defer x.Finish()
	cat.setState("get_booking", policy.CatalogChanged)
	p.ToolsChanged("demo")
	waitWake(t, w)
	if got := relay(t, w, ""); got != "" {
		t.Fatalf("announced before the acknowledgement: %q", got)
	}
	got := relay(t, w, ackEvent)
	if i, j := strings.Index(got, "acknowledged"), strings.Index(got, "tools/list_changed"); i < 0 || j < i {
		t.Errorf("want the acknowledgement, then the announcement: %q", got)
	}
}

func TestListChangedOnlyWhenAskedFor(t *testing.T) {
	p, _, _ := listChangedPipeline(t)
	x, _ := openListen(t, p, `{"resourcesListChanged":true}`)
	defer x.Finish()
	if n := p.OpenStreams(); n != 0 {
		t.Errorf("a stream without toolsListChanged is watched (%d): MCP forbids sending it", n)
	}
}

func TestListChangedOnOlderGETStream(t *testing.T) {
	p, cat, _ := listChangedPipeline(t)
	ctx := context.Background()
	get := authReq("GET", "alice", "", "mcp-protocol-version", "2025-11-25")
	get.Body = nil
	x, v := p.HandleRequest(ctx, get)
	if v.Local != nil {
		t.Fatalf("GET refused: %s", v.Local.Body)
	}
	defer x.Finish()
	if mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"text/event-stream"}}); err != nil || mode != gateway.StreamSSE {
		t.Fatalf("mode %v %v", mode, err)
	}
	w := x.NewEventRewriter(ctx)
	cat.setState("create_booking", policy.CatalogUnpinned)
	p.ToolsChanged("")
	waitWake(t, w)
	if got := relay(t, w, ""); got != "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n" {
		t.Errorf("announcement %q", got)
	}
}

// mutableMembers lists members' prompts and resources, changed by the
// test while streams are open. A test double for internal/app's member
// lister, which the e2e tests run against real servers.
type mutableMembers struct {
	mu    sync.Mutex
	items map[string][]jsontext.Value // "<upstream> <kind>" → items
}

func (m *mutableMembers) Items(_ context.Context, upstream, kind string) ([]jsontext.Value, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items[upstream+" "+kind], nil
}

func (m *mutableMembers) Capabilities(context.Context, string) (jsontext.Value, bool) {
	return jsontext.Value(`{"prompts":{},"resources":{}}`), true
}

func (m *mutableMembers) set(upstream, kind string, items ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var v []jsontext.Value
	for _, it := range items {
		v = append(v, jsontext.Value(it))
	}
	m.items[upstream+" "+kind] = v
}

// TestListChangedFederatedPromptsAndResources: on a federated route
// mcpgate answers prompts/list and resources/list, so it announces their
// changes on the streams that asked (and only those), as it does the
// tools'; initialize and server/discover offer listChanged for them.
func TestListChangedFederatedPromptsAndResources(t *testing.T) {
	members := &mutableMembers{items: map[string][]jsontext.Value{}}
	members.set("m0", "prompts", `{"name":"greet"}`)
	members.set("m1", "resources", `{"uri":"file:///a","name":"a"}`)
	p := federatedPipeline(t, 2, 1, gatewaytest.With(gateway.Options{Members: members}))
	ctx := context.Background()
	listen := func(filter string) (*gateway.Exchange, *gateway.EventRewriter) {
		body := `{"jsonrpc":"2.0","id":"L1","method":"subscriptions/listen","params":{"notifications":` + filter + `,` + meta26 + `}}`
		x, v := p.HandleRequest(ctx, federatedRequest("subscriptions/listen", "", []byte(body)))
		if v.Local != nil {
			t.Fatalf("listen refused: %s", v.Local.Body)
		}
		if mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"text/event-stream"}}); err != nil || mode != gateway.StreamSSE {
			t.Fatalf("mode %v %v", mode, err)
		}
		return x, x.NewEventRewriter(ctx)
	}
	both, wb := listen(`{"promptsListChanged":true,"resourcesListChanged":true}`)
	defer both.Finish()
	tools, wt := listen(`{"toolsListChanged":true}`)
	defer tools.Finish()

	if got := relay(t, wb, ackEvent); !strings.Contains(got, `"promptsListChanged":true`) || !strings.Contains(got, `"resourcesListChanged":true`) || strings.Contains(got, "toolsListChanged") {
		t.Fatalf("ack: %q", got)
	}
	if got := relay(t, wt, ackEvent); strings.Contains(got, "promptsListChanged") {
		t.Fatalf("ack of a tools-only stream: %q", got)
	}

	members.set("m0", "prompts", `{"name":"greet"}`, `{"name":"bye"}`)
	p.ToolsChanged("")
	waitWake(t, wb)
	got := relay(t, wb, "")
	if !strings.Contains(got, `"method":"notifications/prompts/list_changed"`) || strings.Contains(got, "resources/list_changed") {
		t.Fatalf("after a prompt change: %q", got)
	}
	members.set("m1", "resources", `{"uri":"file:///b","name":"b"}`)
	p.ToolsChanged("")
	waitWake(t, wb)
	if got := relay(t, wb, ""); !strings.Contains(got, `"method":"notifications/resources/list_changed"`) || !strings.Contains(got, `"io.modelcontextprotocol/subscriptionId":"L1"`) {
		t.Fatalf("after a resource change: %q", got)
	}
	// The member's own prompts/list_changed right after is not relayed
	// twice back to back; other events pass.
	memberLC := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/list_changed\"}\n\n"
	if got := relay(t, wb, memberLC); got != "" {
		t.Errorf("duplicate relayed: %q", got)
	}
	// The tools-only stream heard of none of it.
	if got := relay(t, wt, ""); got != "" {
		t.Errorf("tools-only stream got %q", got)
	}

	_, v := p.HandleRequest(ctx, federatedRequest("server/discover", "", []byte(`{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{`+meta26+`}}`)))
	if v.Local == nil || !bytes.Contains(v.Local.Body, []byte(`"prompts":{"listChanged":true}`)) || !bytes.Contains(v.Local.Body, []byte(`"resources":{"listChanged":true}`)) {
		t.Errorf("server/discover: %+v", v.Local)
	}
}
