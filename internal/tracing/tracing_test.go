package tracing_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracev1 "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
)

// collector is an OTLP/HTTP trace receiver: it decodes the protobuf
// ExportTraceServiceRequest bodies the real exporter POSTs (OTLP
// specification, "OTLP/HTTP"). No OpenTelemetry Collector binary can run
// in the test; this receiver plays its part over real HTTP and the real
// wire format.
type collector struct {
	mu    sync.Mutex
	spans []*tracev1.Span
	names map[string]string // service.name per batch seen
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, kv := range rs.GetResource().GetAttributes() {
			if c.names == nil {
				c.names = map[string]string{}
			}
			c.names[kv.GetKey()] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// upstreamSeen records the trace context each MCP request reached the
// upstream with (not the catalog's own listings).
type upstreamSeen struct {
	mu     sync.Mutex
	parent map[string][]string // Mcp-Method → traceparent values
}

func (u *upstreamSeen) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.UserAgent() != catalog.UserAgent && r.Method == "POST" {
			u.mu.Lock()
			if u.parent == nil {
				u.parent = map[string][]string{}
			}
			m := r.Header.Get("Mcp-Method")
			u.parent[m] = append(u.parent[m], r.Header.Get("Traceparent"))
			u.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// withTraceparent is the client's HTTP transport: every request carries
// the caller's W3C traceparent, as an instrumented agent's would.
type withTraceparent struct{ value string }

func (t withTraceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", t.value)
	return http.DefaultTransport.RoundTrip(r)
}

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

// TestTraceThroughBothAdapters: with tracing on, a tools/call made by the
// MCP SDK client through the standalone proxy and through Envoy's
// ext_proc (the envoydriver stand-in) continues the client's trace, is
// exported over OTLP/HTTP with its phases, and reaches the real upstream
// with a traceparent naming mcpgate's upstream span in that trace. No span
// carries the call's arguments.
func TestTraceThroughBothAdapters(t *testing.T) {
	for _, mode := range []string{gateway.TransportProxy, gateway.TransportExtProc} {
		t.Run(mode, func(t *testing.T) {
			col := &collector{}
			cs := httptest.NewServer(col)
			defer cs.Close()
			seen := &upstreamSeen{}
			up := demo.New(demo.Options{})
			us := httptest.NewServer(seen.wrap(up.Handler()))
			defer us.Close()

			cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
			if err != nil {
				t.Fatal(err)
			}
			cfg.Upstreams[0].URL = us.URL + "/mcp"
			cfg.Listeners.Proxy.Address = "127.0.0.1:0"
			cfg.Listeners.Admin.Address = "127.0.0.1:0"
			cfg.Tracing = config.Tracing{Enabled: true, Endpoint: cs.URL, ServiceName: "mcpgate-test"}
			if mode == gateway.TransportExtProc {
				cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
			}
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			a, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			endpoint := "http://" + a.ProxyAddr + "/mcp"
			if mode == gateway.TransportExtProc {
				endpoint = startEnvoy(t, a.ExtProcAddr, us.URL, cfg.Upstreams[0].Name) + "/mcp"
			}

			client := sdk.NewClient(&sdk.Implementation{Name: "trace-test", Version: "1"}, nil)
			hc := &http.Client{Transport: withTraceparent{"00-" + clientTrace + "-" + clientSpan + "-01"}}
			session, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "find_customers", Arguments: map[string]any{"query": "secret-argument-value"}})
			if err != nil || res.IsError {
				t.Fatalf("find_customers: %v %+v", err, res)
			}
			_ = session.Close()
			// Shutdown flushes the batch of spans to the collector.
			sctx, c2 := context.WithTimeout(context.Background(), 10*time.Second)
			defer c2()
			if err := a.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}

			col.mu.Lock()
			spans := col.spans
			service := col.names["service.name"]
			col.mu.Unlock()
			if service != "mcpgate-test" {
				t.Errorf("service.name = %q", service)
			}
			byID := map[string]*tracev1.Span{}
			var call *tracev1.Span
			for _, s := range spans {
				byID[hex.EncodeToString(s.GetSpanId())] = s
				if s.GetName() == "tools/call find_customers" {
					call = s
				}
				for _, kv := range s.GetAttributes() {
					if strings.Contains(kv.GetValue().String(), "secret-argument-value") {
						t.Errorf("span %q carries the call's argument in %s", s.GetName(), kv.GetKey())
					}
				}
			}
			if call == nil {
				t.Fatalf("no span named \"tools/call find_customers\" among %d spans: %v", len(spans), spanNames(spans))
			}
			if got := hex.EncodeToString(call.GetTraceId()); got != clientTrace {
				t.Errorf("call span trace %s, want the client's %s", got, clientTrace)
			}
			if got := hex.EncodeToString(call.GetParentSpanId()); got != clientSpan {
				t.Errorf("call span parent %s, want the client's span %s", got, clientSpan)
			}
			if call.GetKind() != tracev1.Span_SPAN_KIND_SERVER {
				t.Errorf("call span kind %v", call.GetKind())
			}
			attrs := map[string]string{}
			for _, kv := range call.GetAttributes() {
				attrs[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for k, want := range map[string]string{
				gateway.AttrMCPMethod: "tools/call", gateway.AttrToolName: "find_customers", gateway.AttrTransport: mode,
				gateway.AttrUpstream: cfg.Upstreams[0].Name, gateway.AttrDecision: gateway.OutcomeAllow, gateway.AttrEffect: "read",
			} {
				if attrs[k] != want {
					t.Errorf("call span %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
				}
			}
			if attrs[gateway.AttrDecisionID] == "" {
				t.Errorf("call span has no decision id: %v", attrs)
			}

			// The phases are children of the call span, the upstream span a
			// client span among them.
			children := map[string]*tracev1.Span{}
			for _, s := range spans {
				if bytes.Equal(s.GetParentSpanId(), call.GetSpanId()) {
					children[s.GetName()] = s
				}
			}
			for _, name := range []string{gateway.SpanTransport, gateway.SpanPolicy, gateway.SpanLimits, gateway.SpanWriteSafety, gateway.SpanForward, gateway.SpanUpstream, gateway.SpanResponse} {
				if children[name] == nil {
					t.Errorf("call span lacks the child %q (has %v)", name, keys(children))
				}
			}
			upSpan := children[gateway.SpanUpstream]
			if upSpan == nil {
				t.FailNow()
			}
			if upSpan.GetKind() != tracev1.Span_SPAN_KIND_CLIENT {
				t.Errorf("upstream span kind %v", upSpan.GetKind())
			}

			// The upstream received a traceparent in the client's trace whose
			// parent is mcpgate's upstream span.
			seen.mu.Lock()
			got := seen.parent["tools/call"]
			seen.mu.Unlock()
			want := "00-" + clientTrace + "-" + hex.EncodeToString(upSpan.GetSpanId()) + "-01"
			if len(got) != 1 || got[0] != want {
				t.Errorf("upstream received traceparent %q, want [%q]", got, want)
			}
		})
	}
}

// TestTracingOffLeavesTraceparent: with tracing off (the default) a
// client's traceparent reaches the upstream unchanged and nothing is
// exported.
func TestTracingOffLeavesTraceparent(t *testing.T) {
	seen := &upstreamSeen{}
	up := demo.New(demo.Options{})
	us := httptest.NewServer(seen.wrap(up.Handler()))
	defer us.Close()
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams[0].URL = us.URL + "/mcp"
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(context.Background())
	parent := "00-" + clientTrace + "-" + clientSpan + "-01"
	client := sdk.NewClient(&sdk.Implementation{Name: "trace-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://" + a.ProxyAddr + "/mcp", HTTPClient: &http.Client{Transport: withTraceparent{parent}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	if res, err := session.CallTool(ctx, &sdk.CallToolParams{Name: "list_technicians", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("list_technicians: %v %+v", err, res)
	}
	seen.mu.Lock()
	got := seen.parent["tools/call"]
	seen.mu.Unlock()
	if len(got) != 1 || got[0] != parent {
		t.Errorf("upstream received traceparent %q, want the client's [%q]", got, parent)
	}
}

// startEnvoy runs the Envoy stand-in in front of mcpgate's ext_proc
// listener, routing to upstream as config/envoy/ configures Envoy.
func startEnvoy(t *testing.T, target, upstream, name string) string {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	d, err := envoydriver.New(envoydriver.Config{
		Target:   target,
		Upstream: u,
		Mode: &extprocfilterv3.ProcessingMode{
			RequestHeaderMode: extprocfilterv3.ProcessingMode_SEND, RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			RequestTrailerMode: extprocfilterv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MaxMessageTimeout: 5 * time.Second,
		BufferLimit:       5 << 20,
		RequestAttributes: []string{"xds.route_metadata"},
		RouteMetadata:     map[string]map[string]any{"mcpgate": {"upstream": name}},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() { srv.Close(); _ = d.Close() })
	return srv.URL
}

func spanNames(spans []*tracev1.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName())
	}
	return out
}

func keys(m map[string]*tracev1.Span) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
