package gateway_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/internal/killswitch"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// ksEnv is a pipeline whose kill switches are a real watcher over a
// real bbolt store; authentication is fakeAuth (auth_test.go): "good-"
// tokens are tenant acme, "other" is tenant globex.
type ksEnv struct {
	p   *gateway.Pipeline
	w   *killswitch.Watcher
	reg *prometheus.Registry
}

func newKSEnv(t *testing.T) *ksEnv {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	w, err := killswitch.New(t.Context(), killswitch.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), gatewaytest.WithAuth(&fakeAuth{}), gatewaytest.WithMetrics(reg),
		gatewaytest.With(gateway.Options{Switches: w,
			JWKS:             func() []byte { return []byte(`{"keys":[]}`) },
			ResourceMetadata: gateway.StaticMetadata(map[string][]byte{"/.well-known/oauth-protected-resource/mcp": prm})}))
	return &ksEnv{p: p, w: w, reg: reg}
}

func (e *ksEnv) set(t *testing.T, tenant string, on bool, reason string) {
	t.Helper()
	if err := e.w.SetSwitch(t.Context(), store.Switch{Tenant: tenant, On: on, Reason: reason, SetBy: "ops", At: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

func (e *ksEnv) counter(t *testing.T, name, label string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s}", name, label)
	return 0
}

var ksListCall = []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"}

func ksToolsCall(tool string) []string {
	return []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool}
}

const ksListReq = `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta2026 + `}}`

// rpcError decodes a JSON-RPC error answer.
func ksRPCError(t *testing.T, body []byte) (id json.RawMessage, code int, msg string, details map[string]any) {
	t.Helper()
	var r struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
			Data    struct {
				Error map[string]any `json:"error"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("not a JSON-RPC error: %v: %s", err, body)
	}
	return r.ID, r.Error.Code, r.Error.Message, r.Error.Data.Error
}

func TestKillSwitchGlobal(t *testing.T) {
	e := newKSEnv(t)
	ctx := context.Background()
	// Off (the default): the request goes on to the policy and upstream.
	if _, v := e.p.HandleRequest(ctx, authReq("POST", "good-tickets.read", ksListReq, ksListCall...)); v.Local != nil {
		t.Fatalf("switch off: answered locally %d %s", v.Local.Status, v.Local.Body)
	}

	e.set(t, "", true, "Incident 42: agents are paging everyone")
	for _, c := range []struct {
		name, token, body string
		hdr               []string
		id                string
	}{
		{"tools/list", "good-tickets.read", ksListReq, ksListCall, "7"},
		{"tools/call", "good-tickets.read", callBody("8", "get_ticket"), ksToolsCall("get_ticket"), "8"},
		{"another tenant", "other", callBody(`"s"`, "get_ticket"), ksToolsCall("get_ticket"), `"s"`},
	} {
		x, v := e.p.HandleRequest(ctx, authReq("POST", c.token, c.body, c.hdr...))
		l := v.Local
		if l == nil || l.Status != 503 || l.Header.Get("retry-after") != gateway.KillSwitchRetryAfter || l.Header.Get("content-type") != "application/json" {
			t.Fatalf("%s: %+v, want 503 with Retry-After and JSON", c.name, l)
		}
		id, code, msg, det := ksRPCError(t, l.Body)
		if string(id) != c.id || code != gateway.CodeKillSwitch || det["code"] != gateway.ReasonKillSwitch {
			t.Errorf("%s: id %s code %d details %v", c.name, id, code, det)
		}
		for _, want := range []string{"kill switch is on for every tenant", "Incident 42: agents are paging everyone.", "Nothing is forwarded", "Retry later", "ask the operator"} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: message lacks %q: %s", c.name, want, msg)
			}
		}
		if x.Outcome() != gateway.OutcomeDeny || x.Decision() != nil {
			t.Errorf("%s: outcome %q, decision %v; want deny without a policy decision", c.name, x.Outcome(), x.Decision())
		}
	}
	// A notification: 503 without a body; GET (no message): id null.
	_, v := e.p.HandleRequest(ctx, authReq("POST", "good-x", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "mcp-method", "notifications/initialized"))
	if v.Local == nil || v.Local.Status != 503 || v.Local.Body != nil || v.Local.Header.Get("retry-after") == "" {
		t.Errorf("notification: %+v", v.Local)
	}
	_, v = e.p.HandleRequest(ctx, authReq("GET", "good-x", ""))
	if v.Local == nil || v.Local.Status != 503 {
		t.Fatalf("GET: %+v", v.Local)
	}
	if id, code, _, _ := ksRPCError(t, v.Local.Body); string(id) != "null" || code != gateway.CodeKillSwitch {
		t.Errorf("GET: id %s code %d", id, code)
	}
	// Authentication still comes first: no credential is 401, not 503.
	if _, v := e.p.HandleRequest(ctx, authReq("POST", "", ksListReq, ksListCall...)); v.Local == nil || v.Local.Status != 401 {
		t.Errorf("no token: %+v, want 401", v.Local)
	}
	// The documents the gateway serves itself stay served.
	for _, path := range []string{"/.well-known/oauth-protected-resource/mcp", gateway.JWKSPath} {
		r := authReq("GET", "", "")
		r.Path = path
		if _, v := e.p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 200 {
			t.Errorf("%s: %+v, want 200", path, v.Local)
		}
	}
	if got := e.counter(t, gateway.MetricKillSwitchRefusals, gateway.ScopeGlobal); got != 5 {
		t.Errorf("refusals{global} = %v, want 5", got)
	}

	// Off again: requests go on at once.
	e.set(t, "", false, "")
	if _, v := e.p.HandleRequest(ctx, authReq("POST", "good-tickets.read", ksListReq, ksListCall...)); v.Local != nil {
		t.Errorf("switch off again: %d %s", v.Local.Status, v.Local.Body)
	}
}

func TestKillSwitchTenant(t *testing.T) {
	e := newKSEnv(t)
	ctx := context.Background()
	e.set(t, "acme", true, "acme's CRM migration")
	// The credential's tenant (acme) is refused ...
	_, v := e.p.HandleRequest(ctx, authReq("POST", "good-tickets.read", ksListReq, ksListCall...))
	if v.Local == nil || v.Local.Status != 503 {
		t.Fatalf("acme: %+v", v.Local)
	}
	if _, _, msg, _ := ksRPCError(t, v.Local.Body); !strings.Contains(msg, `for tenant "acme". The operator's reason: acme's CRM migration.`) {
		t.Errorf("acme: %s", msg)
	}
	// ... another tenant (globex) is not.
	if _, v := e.p.HandleRequest(ctx, authReq("POST", "other", ksListReq, ksListCall...)); v.Local != nil {
		t.Errorf("globex: %d %s", v.Local.Status, v.Local.Body)
	}
	// The tenant a path names counts too (routes with {tenant}).
	r := authReq("POST", "other", ksListReq, ksListCall...)
	r.Tenant = "acme"
	if _, v := e.p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 503 {
		t.Errorf("path tenant acme: %+v", v.Local)
	}
	if got := e.counter(t, gateway.MetricKillSwitchRefusals, gateway.ScopeTenant); got != 2 {
		t.Errorf("refusals{tenant} = %v, want 2", got)
	}
}

// TestKillSwitchStream: a stream whose request was allowed is ended once a
// switch covers it: KillableStream makes a pass-through SSE answer a
// StreamSSE one (only with switches), StreamStop gives the JSON-RPC error
// event for the request id.
func TestKillSwitchStream(t *testing.T) {
	e := newKSEnv(t)
	ctx := context.Background()
	x, v := e.p.HandleRequest(ctx, authReq("POST", "good-tickets.read", `{"jsonrpc":"2.0","id":"c-1","method":"prompts/list","params":{`+meta2026+`}}`,
		"mcp-protocol-version", "2026-07-28", "mcp-method", "prompts/list"))
	if v.Local != nil {
		t.Fatalf("forwarded request answered locally: %s", v.Local.Body)
	}
	sseHdr := mcp.Header{"content-type": {"text/event-stream"}}
	for _, c := range []struct {
		mode gateway.ResponseMode
		h    mcp.Header
		want gateway.ResponseMode
	}{
		{gateway.PassThrough, sseHdr, gateway.StreamSSE},
		{gateway.PassThrough, mcp.Header{"content-type": {"text/event-stream; charset=utf-8"}, "content-encoding": {"identity"}}, gateway.StreamSSE},
		{gateway.PassThrough, mcp.Header{"content-type": {"text/event-stream"}, "content-encoding": {"gzip"}}, gateway.PassThrough},
		{gateway.PassThrough, mcp.Header{"content-type": {"application/json"}}, gateway.PassThrough},
		{gateway.BufferJSON, mcp.Header{"content-type": {"application/json"}}, gateway.BufferJSON},
	} {
		if got := x.KillableStream(c.mode, c.h); got != c.want {
			t.Errorf("KillableStream(%v, %v) = %v, want %v", c.mode, c.h, got, c.want)
		}
	}
	if ev := x.StreamStop(); ev != nil {
		t.Fatalf("StreamStop with every switch off = %q", ev)
	}
	watched := make(chan []byte, 1)
	cancel := x.WatchSwitches(ctx, func(last []byte) { watched <- last })
	defer cancel()

	e.set(t, "acme", true, "stop now")
	ev := x.StreamStop()
	if !strings.HasPrefix(string(ev), "event: message\ndata: ") || !strings.HasSuffix(string(ev), "\n\n") {
		t.Fatalf("StreamStop = %q, want one complete SSE event", ev)
	}
	data := strings.TrimSuffix(strings.TrimPrefix(string(ev), "event: message\ndata: "), "\n\n")
	if id, code, msg, _ := ksRPCError(t, []byte(data)); string(id) != `"c-1"` || code != gateway.CodeKillSwitch || !strings.Contains(msg, "stop now") {
		t.Errorf("stream's last event: id %s code %d %s", id, code, msg)
	}
	select {
	case last := <-watched:
		if string(last) != string(ev) {
			t.Errorf("WatchSwitches gave %q, want %q", last, ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WatchSwitches did not call stop after the switch turned on")
	}
	if got := e.counter(t, gateway.MetricKillSwitchStreams, gateway.TransportProxy); got != 2 {
		t.Errorf("streams ended = %v, want 2 (two StreamStop answers)", got)
	}

	// Without switches the adapters' hooks do nothing.
	plain := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls))
	px, _ := plain.HandleRequest(ctx, authReq("POST", "", ksListReq, ksListCall...))
	if got := px.KillableStream(gateway.PassThrough, sseHdr); got != gateway.PassThrough {
		t.Errorf("without switches: KillableStream = %v", got)
	}
	if px.StreamStop() != nil {
		t.Error("without switches: StreamStop answered")
	}
	px.WatchSwitches(ctx, func([]byte) { t.Error("without switches: stop called") })()
}
