package gateway_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// countingCatalog counts the lookups of a staticCatalog (the pipeline's
// use of the catalog is what is tested; internal/catalog is tested there).
type countingCatalog struct {
	*staticCatalog
	tool, tools atomic.Int32
}

func (c *countingCatalog) Tools(u string) ([]gateway.CatalogTool, bool) {
	c.tools.Add(1)
	return c.staticCatalog.Tools(u)
}

func (c *countingCatalog) Tool(u, name string) (gateway.CatalogTool, bool, bool) {
	c.tool.Add(1)
	return c.staticCatalog.Tool(u, name)
}

// exchangeRequest is a tools/call of get_status as an adapter hands it
// over, with a fresh header map each time (as each HTTP request has).
func exchangeRequest(token string, body []byte) *gateway.Request {
	return &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Body: body, Header: mcp.Header{
		"content-type": {"application/json"}, "accept": {"application/json, text/event-stream"}, "authorization": {"Bearer " + token},
		"mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"get_status"}}}
}

// The catalog is asked once per request: a tools/call looks its tool up
// once (the loaded check, the policy input and the argument check share
// the answer), a tools/list reads the list once.
func TestCatalogLookedUpOncePerRequest(t *testing.T) {
	ctx := context.Background()
	cat := &countingCatalog{staticCatalog: exchangeCatalog()}
	p := gatewaytest.New(t, exchangeOpts(cat, nil)...)
	x, v := p.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(exchangeCall)))
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	x.Finish()
	if tool, tools := cat.tool.Load(), cat.tools.Load(); tool != 1 || tools != 0 {
		t.Errorf("tools/call: %d Tool and %d Tools lookups, want 1 and 0", tool, tools)
	}
	// The one lookup is what the policy judges: a changed definition is
	// refused.
	changed := &countingCatalog{staticCatalog: exchangeCatalog()}
	changed.staticCatalog.tools[0].State = policy.CatalogChanged
	cp := gatewaytest.New(t, exchangeOpts(changed, nil)...)
	if _, v := cp.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(exchangeCall))); v.Local == nil || !strings.Contains(string(v.Local.Body), `"isError":true`) {
		t.Fatalf("a changed tool was not refused: %+v", v)
	} else if tool := changed.tool.Load(); tool != 1 {
		t.Errorf("refused call: %d Tool lookups, want 1", tool)
	}
	cat.tool.Store(0)
	list := exchangeRequest("good-status:read", []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{`+meta2026+`}}`))
	list.Header.Set("mcp-method", "tools/list")
	delete(list.Header, "mcp-name")
	x, v = p.HandleRequest(ctx, list)
	if v.Local == nil || !strings.Contains(string(v.Local.Body), `"get_status"`) {
		t.Fatalf("tools/list: %+v", v)
	}
	if tool, tools := cat.tool.Load(), cat.tools.Load(); tool != 0 || tools != 1 {
		t.Errorf("tools/list: %d Tool and %d Tools lookups, want 0 and 1", tool, tools)
	}
	_ = x
}

// requestSeries reads mcpgate_requests_total and the request duration
// histogram's sample count for one label set.
func requestSeries(t *testing.T, reg *prometheus.Registry, transport, method, outcome string) (count float64, samples uint64) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	has := func(m *dto.Metric, want map[string]string) bool {
		n := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok {
				if v != l.GetValue() {
					return false
				}
				n++
			}
		}
		return n == len(want)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case gateway.MetricRequests:
				if has(m, map[string]string{"transport": transport, "mcp_method": method, "decision": outcome}) {
					count = m.GetCounter().GetValue()
				}
			case gateway.MetricRequestDuration:
				if has(m, map[string]string{"transport": transport, "mcp_method": method}) {
					samples = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return count, samples
}

// The request metrics, whose series are resolved once per label set,
// count each label set apart and keep counting: allowed, refused and
// invalid calls each land in their own series, every time.
func TestRequestMetricsPerLabelSet(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	p := gatewaytest.New(t, exchangeOpts(exchangeCatalog(), reg)...)
	for range 3 {
		x, v := p.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(exchangeCall)))
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		if _, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := x.ResponseBody(ctx, []byte(exchangeAnswer)); err != nil {
			t.Fatal(err)
		}
		x.Finish()
		x.Finish() // recorded once
	}
	for range 2 { // no status:read right: refused by the policy
		if _, v := p.HandleRequest(ctx, exchangeRequest("good-other:read", []byte(exchangeCall))); v.Local == nil {
			t.Fatal("a call without the right was forwarded")
		}
	}
	if _, v := p.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(`{"jsonrpc":`))); v.Local == nil || v.Local.Status != 400 {
		t.Fatalf("invalid JSON: %+v", v.Local)
	}
	for _, c := range []struct {
		method, outcome string
		count           float64
	}{
		{"tools/call", gateway.OutcomeAllow, 3},
		{"tools/call", gateway.OutcomeDeny, 2},
		{gateway.LabelNone, gateway.OutcomeInvalid, 1},
	} {
		if got, _ := requestSeries(t, reg, gateway.TransportProxy, c.method, c.outcome); got != c.count {
			t.Errorf("%s %s: %v requests, want %v", c.method, c.outcome, got, c.count)
		}
	}
	if _, samples := requestSeries(t, reg, gateway.TransportProxy, "tools/call", ""); samples != 5 {
		t.Errorf("tools/call durations: %d samples, want 5", samples)
	}
}

// resultKeepPolicy lets every call through with the result allowlist the
// call's "keep" argument names: each decision asks for its own shaping.
const resultKeepPolicy = `package mcpgate

decision := {"allow": true, "result": {"fields": [input.message.arguments.keep]}}
`

// The shaper of a decision's result paths is looked up by those paths
// (a compiled-shaper cache): a call whose decision asks for other paths
// gets its own shaping, never the previous call's.
func TestResultShapingFollowsEachDecision(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte(resultKeepPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	p := gatewaytest.New(t, gatewaytest.WithDecls(exchangeDecls), gatewaytest.WithPolicyDirs(dir))
	for _, keep := range []string{"service", "state", "service", "region", "state"} {
		call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_status","arguments":{"keep":"` + keep + `"},` + meta2026 + `}}`
		req := exchangeRequest("", []byte(call))
		delete(req.Header, "authorization")
		x, v := p.HandleRequest(ctx, req)
		if v.Local != nil {
			t.Fatalf("keep %s refused: %s", keep, v.Local.Body)
		}
		x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}})
		out, _, err := x.ResponseBody(ctx, []byte(exchangeAnswer))
		if err != nil {
			t.Fatal(err)
		}
		x.Finish()
		for _, f := range []string{"service", "state", "region"} {
			if got := strings.Contains(string(out), `"`+f+`":`); got != (f == keep) {
				t.Errorf("keep %s: field %s present %v in %s", keep, f, got, out)
			}
		}
	}
}
