package gateway_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

var benchDecls = map[string]map[string]policy.ToolDeclaration{
	"demo": {
		"create_booking": {Effect: policy.EffectSilentWrite, Rights: []string{"bookings:write"}, UntrustedText: []string{"notes"}, ResultFields: []string{"booking.id", "booking.start"}},
		"get_booking":    {Effect: policy.EffectRead, Rights: []string{"bookings:read"}},
	},
}

const benchBody = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"create_booking","arguments":{"customer_id":"C-101","technician_id":"T-11","start":"2026-12-01T09:00:00+01:00","notes":"Gate code 4711, dog in the yard","duration_minutes":90},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1.0.0"},"io.modelcontextprotocol/clientCapabilities":{}}}}`

func newBenchPipeline(b *testing.B) *gateway.Pipeline {
	eng, err := policy.New(context.Background(), policy.Options{Declarations: benchDecls})
	if err != nil {
		b.Fatal(err)
	}
	return gateway.New(eng, gateway.Options{Declarations: benchDecls, MaxBodyBytes: 4 << 20, MaxJSONDepth: 64, MaxSSEEventBytes: 16 << 20})
}

// BenchmarkHandleToolsCall measures the request side of a tools/call:
// transport gate, strict parse, header checks and the default policy's
// decision (target ≤ 40 µs on a 2-core machine).
func BenchmarkHandleToolsCall(b *testing.B) {
	p := newBenchPipeline(b)
	hdr := mcp.Header{
		"content-type":         {"application/json"},
		"mcp-protocol-version": {"2026-07-28"},
		"mcp-method":           {"tools/call"},
		"mcp-name":             {"create_booking"},
	}
	body := []byte(benchBody)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		x, v := p.HandleRequest(ctx, &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Header: hdr, Body: body})
		if v.Local != nil || x.Decision() == nil || !x.Decision().Allow {
			b.Fatalf("refused: %+v", v.Local)
		}
	}
}

// fixedDecider allows everything without evaluating Rego. It exists only to
// separate mcpgate's own cost from OPA's in BenchmarkHandleToolsCallOwnCost.
type fixedDecider struct{ d policy.Decision }

func (f *fixedDecider) Decide(context.Context, *policy.Input) (*policy.Decision, error) {
	return &f.d, nil
}

// BenchmarkHandleToolsCallOwnCost is BenchmarkHandleToolsCall with the Rego
// evaluation taken out: what is left is mcpgate's own work and allocations
// (gate, parse, headers, input building).
func BenchmarkHandleToolsCallOwnCost(b *testing.B) {
	p := gateway.New(&fixedDecider{policy.Decision{Allow: true}}, gateway.Options{Declarations: benchDecls, MaxBodyBytes: 4 << 20, MaxJSONDepth: 64})
	hdr := mcp.Header{
		"content-type":         {"application/json"},
		"mcp-protocol-version": {"2026-07-28"},
		"mcp-method":           {"tools/call"},
		"mcp-name":             {"create_booking"},
	}
	body := []byte(benchBody)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, v := p.HandleRequest(ctx, &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Header: hdr, Body: body}); v.Local != nil {
			b.Fatal("refused")
		}
	}
}
