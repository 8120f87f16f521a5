package gateway_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

const (
	testTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	testSpan  = "00f067aa0ba902b7"
)

// tracedPipeline is the benchmark's pipeline (real policy engine, default
// Rego) with the SDK's in-memory span recorder behind its tracer.
func tracedPipeline(t testing.TB) (*gateway.Pipeline, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), benchBounds, gatewaytest.With(gateway.Options{Tracer: tp.Tracer("test")}))
	return p, rec
}

func callHeader(tool, traceparent string) mcp.Header {
	h := mcp.Header{
		"content-type":         {"application/json"},
		"mcp-protocol-version": {"2026-07-28"},
		"mcp-method":           {"tools/call"},
		"mcp-name":             {tool},
	}
	if traceparent != "" {
		h["traceparent"] = []string{traceparent}
	}
	return h
}

func attrs(kvs []attribute.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// TestTraceAllowedCall: an allowed tools/call is one server span in the
// caller's trace, named after method and tool, with its phases as
// children; the verdict carries a traceparent naming the upstream span,
// which ends at the response headers. No attribute holds an argument.
func TestTraceAllowedCall(t *testing.T) {
	p, rec := tracedPipeline(t)
	x, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: callHeader("create_booking", "00-"+testTrace+"-"+testSpan+"-01"), Body: []byte(benchBody)})
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	tp := v.SetHeader.Get("traceparent")
	if !strings.HasPrefix(tp, "00-"+testTrace+"-") || !strings.HasSuffix(tp, "-01") {
		t.Fatalf("verdict traceparent %q is not in the caller's trace", tp)
	}
	if _, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil {
		t.Fatal(err)
	}
	x.Finish()

	var call sdktrace.ReadOnlySpan
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		byName[s.Name()] = s
		for _, kv := range s.Attributes() {
			if strings.Contains(kv.Value.String(), "4711") || strings.Contains(kv.Value.String(), "C-101") {
				t.Errorf("span %q attribute %s carries an argument: %q", s.Name(), kv.Key, kv.Value.String())
			}
		}
		if s.Name() == "tools/call create_booking" {
			call = s
		}
	}
	if call == nil {
		t.Fatalf("no call span; ended: %v", keysOf(byName))
	}
	if call.Parent().TraceID().String() != testTrace || call.Parent().SpanID().String() != testSpan || !call.Parent().IsRemote() {
		t.Errorf("call span parent %v, want the caller's span", call.Parent())
	}
	if call.SpanKind() != trace.SpanKindServer {
		t.Errorf("call span kind %v", call.SpanKind())
	}
	a := attrs(call.Attributes())
	for k, want := range map[string]string{gateway.AttrMCPMethod: "tools/call", gateway.AttrToolName: "create_booking", gateway.AttrDecision: gateway.OutcomeAllow,
		gateway.AttrMCPVersion: "2026-07-28", gateway.AttrTransport: gateway.TransportProxy, gateway.AttrUpstream: "demo", gateway.AttrEffect: policy.EffectSilentWrite} {
		if a[k] != want {
			t.Errorf("%s = %q, want %q", k, a[k], want)
		}
	}
	for _, name := range []string{gateway.SpanTransport, gateway.SpanAuth, gateway.SpanKillSwitch, gateway.SpanPolicy, gateway.SpanLimits, gateway.SpanWriteSafety, gateway.SpanForward, gateway.SpanUpstream, gateway.SpanResponse} {
		s := byName[name]
		if s == nil {
			t.Errorf("no %s span", name)
			continue
		}
		if s.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Errorf("%s is not a child of the call span", name)
		}
		if s.StartTime().Before(call.StartTime()) || s.EndTime().After(call.EndTime()) {
			t.Errorf("%s [%v, %v] lies outside the call span [%v, %v]", name, s.StartTime(), s.EndTime(), call.StartTime(), call.EndTime())
		}
	}
	if up := byName[gateway.SpanUpstream]; up != nil {
		if up.SpanKind() != trace.SpanKindClient || !strings.Contains(tp, "-"+up.SpanContext().SpanID().String()+"-") {
			t.Errorf("upstream span %v (kind %v) is not the traceparent's parent %q", up.SpanContext().SpanID(), up.SpanKind(), tp)
		}
		if attrs(up.Attributes())[gateway.AttrHTTPStatus] != "200" {
			t.Errorf("upstream span attributes %v", attrs(up.Attributes()))
		}
	}
}

// TestTraceRefusedCall: a refused call names its reason and status, and
// nothing is propagated (nothing goes upstream).
func TestTraceRefusedCall(t *testing.T) {
	p, rec := tracedPipeline(t)
	body := strings.Replace(benchBody, `"name":"create_booking"`, `"name":"drop_tables"`, 1)
	_, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportExtProc, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: callHeader("drop_tables", ""), Body: []byte(body)})
	if v.Local == nil || v.Local.Status != 200 {
		t.Fatalf("an undeclared tool was not refused with a tool error: %+v", v)
	}
	ended := rec.Ended()
	var call sdktrace.ReadOnlySpan
	for _, s := range ended {
		if s.Name() == "tools/call drop_tables" {
			call = s
		}
		if s.Name() == gateway.SpanUpstream {
			t.Error("a refused call has an upstream span")
		}
	}
	if call == nil {
		t.Fatalf("no call span among %d", len(ended))
	}
	if call.Parent().IsValid() {
		t.Errorf("a request without traceparent has parent %v", call.Parent())
	}
	a := attrs(call.Attributes())
	if a[gateway.AttrDecision] != gateway.OutcomeDeny || a[gateway.AttrReason] == "" || a[gateway.AttrHTTPStatus] != "200" || a[gateway.AttrDecisionID] == "" {
		t.Errorf("refused call attributes %v", a)
	}
}

// TestTraceUnsampledCaller: a caller that did not sample gets no spans
// recorded, and the upstream still learns the trace, unsampled.
func TestTraceUnsampledCaller(t *testing.T) {
	p, rec := tracedPipeline(t)
	x, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: callHeader("create_booking", "00-"+testTrace+"-"+testSpan+"-00"), Body: []byte(benchBody)})
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	x.Finish()
	if n := len(rec.Ended()); n != 0 {
		t.Errorf("%d spans recorded for an unsampled trace", n)
	}
	if tp := v.SetHeader.Get("traceparent"); !strings.HasPrefix(tp, "00-"+testTrace+"-") || !strings.HasSuffix(tp, "-00") {
		t.Errorf("verdict traceparent %q", tp)
	}
}

// TestNoTracerNoTraceparent: without a tracer the verdict adds no trace
// context (a caller's own traceparent passes as it came).
func TestNoTracerNoTraceparent(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecls(benchDecls), benchBounds)
	x, v := p.HandleRequest(context.Background(), &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: callHeader("create_booking", "00-"+testTrace+"-"+testSpan+"-01"), Body: []byte(benchBody)})
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	x.Finish()
	if v.SetHeader.Has("traceparent") || v.SetHeader.Has("tracestate") {
		t.Errorf("verdict sets trace context without a tracer: %v", v.SetHeader)
	}
}

// BenchmarkHandleToolsCallTraced is BenchmarkHandleToolsCall with every
// request sampled and recorded in memory: the cost of tracing on.
// Spans go to no processor, so memory stays flat however long it runs.
func BenchmarkHandleToolsCallTraced(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	p := gatewaytest.New(b, gatewaytest.WithDecls(benchDecls), benchBounds, gatewaytest.With(gateway.Options{Tracer: tp.Tracer("bench")}))
	hdr := callHeader("create_booking", "")
	body := []byte(benchBody)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		x, v := p.HandleRequest(ctx, &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Header: hdr, Body: body})
		if v.Local != nil {
			b.Fatal("refused")
		}
		x.Finish()
	}
}

func keysOf(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
