package extproc_test

import (
	"context"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/policy"
)

var decls = map[string]map[string]policy.ToolDeclaration{
	"crm":     {"get_booking": {Effect: policy.EffectRead}},
	"tickets": {"open_ticket": {Effect: policy.EffectSilentWrite}},
}

const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// client starts the ext_proc server on a loopback port and returns a real
// gRPC client, as Envoy would hold.
func client(t testing.TB) extprocv3.ExternalProcessorClient {
	t.Helper()
	return serveServer(t, server(t))
}

// serverBounds are the bounds of the ext_proc tests' pipelines: 1 MiB
// bodies, 32 levels of nesting.
var serverBounds = gatewaytest.With(gateway.Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 32})

// server is the ext_proc server client serves: the default policy over
// decls, the two upstreams on their routes.
func server(t testing.TB) *extproc.Server {
	t.Helper()
	return newServer(t, gatewaytest.New(t, gatewaytest.WithDecls(decls), serverBounds))
}

// serve runs the ext_proc server for pipeline p on a loopback port, with
// the configuration's default budgets (slow work extended), and returns a
// gRPC client for it.
func serve(t testing.TB, p *gateway.Pipeline) extprocv3.ExternalProcessorClient {
	t.Helper()
	return serveServer(t, newServer(t, p))
}

func newServer(t testing.TB, p *gateway.Pipeline) *extproc.Server {
	t.Helper()
	s, err := extproc.New(extproc.Options{
		Pipeline:         p,
		Upstreams:        []extproc.Upstream{{Name: "crm", Route: "/crm/mcp"}, {Name: "tickets", Route: "/tickets/mcp"}},
		MaxMessageBudget: extproc.DefaultMaxMessageBudget,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serveServer runs an ext_proc server on a loopback port and returns a
// gRPC client for it.
func serveServer(t testing.TB, s *extproc.Server) extprocv3.ExternalProcessorClient {
	t.Helper()
	srv := grpc.NewServer(extproc.GRPCServerOptions(2 << 20)...)
	extprocv3.RegisterExternalProcessorServer(srv, s)
	return serveGRPC(t, srv)
}

// serveGRPC serves srv on a loopback port and returns a gRPC client for
// its ext_proc service.
func serveGRPC(t testing.TB, srv *grpc.Server, opts ...grpc.DialOption) extprocv3.ExternalProcessorClient {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return extprocv3.NewExternalProcessorClient(conn)
}

func headers(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// exchange sends req and returns the server's answer to it, past any
// override_message_timeout the server sends first (it does at half the
// message budget, which a slow, loaded test machine can reach).
func exchange(t testing.TB, s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	if err := s.Send(req); err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetResponse() != nil || resp.GetOverrideMessageTimeout() == nil {
			return resp
		}
	}
}

func reqHeaders(path string, attrs map[string]*structpb.Struct, kv ...string) *extprocv3.ProcessingRequest {
	all := append([]string{":method", "POST", ":path", path, ":authority", "gw", ":scheme", "http", "content-type", "application/json"}, kv...)
	return &extprocv3.ProcessingRequest{Attributes: attrs, Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: headers(all...)}}}
}

func reqBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

func header(hm *extprocv3.HeaderMutation, key string) (string, bool) {
	for _, h := range hm.GetSetHeaders() {
		if h.GetHeader().GetKey() == key {
			return string(h.GetHeader().GetRawValue()), true
		}
	}
	return "", false
}

// TestRefusalIsImmediateJSON: a refused tools/call becomes an
// ImmediateResponse 200 with content-type application/json (Envoy's own
// default would be text/plain).
func TestRefusalIsImmediateJSON(t *testing.T) {
	c := client(t)
	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r := exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "drop_tables"))
	if r.GetRequestHeaders() == nil {
		t.Fatalf("want a headers response, got %v", r)
	}
	r = exchange(t, s, reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables","arguments":{},`+meta+`}}`))
	ir := r.GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 200 {
		t.Fatalf("want ImmediateResponse 200, got %v", r)
	}
	if ct, _ := header(ir.GetHeaders(), "content-type"); ct != "application/json" {
		t.Errorf("content-type %q", ct)
	}
}

// TestUpstreamFromRouteMetadata: the route metadata attribute chooses the
// upstream (so its declarations apply), before the path.
func TestUpstreamFromRouteMetadata(t *testing.T) {
	c := client(t)
	// Envoy sends the route metadata as the text form of core.v3.Metadata.
	attrs := map[string]*structpb.Struct{"envoy.filters.http.ext_proc": mustStruct(t, map[string]any{
		"xds.route_metadata": `filter_metadata { key: "mcpgate" value { fields { key: "upstream" value { string_value: "tickets" } } } }`,
	})}
	gatewayAttrs := map[string]*structpb.Struct{"envoy.filters.http.ext_proc": mustStruct(t, map[string]any{
		"xds.route_metadata": `filter_metadata { key: "envoy-gateway" value { fields { key: "resources" value { list_value { values { struct_value { fields { key: "annotations" value { struct_value { fields { key: "mcpgate-upstream" value { string_value: "tickets" } } } } } } } } } } } }`,
	})}
	for _, tt := range []struct {
		name   string
		attrs  map[string]*structpb.Struct
		path   string
		allow  bool
		header []string
	}{
		{"metadata names tickets", attrs, "/crm/mcp", true, nil},
		{"Envoy Gateway annotation names tickets", gatewayAttrs, "/crm/mcp", true, nil},
		{"path names crm", nil, "/crm/mcp", false, nil},
		{"header names tickets", nil, "/crm/mcp", true, []string{"x-mcpgate-upstream", "tickets"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kv := append([]string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "open_ticket"}, tt.header...)
			exchange(t, s, reqHeaders(tt.path, tt.attrs, kv...))
			r := exchange(t, s, reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open_ticket","arguments":{},`+meta+`}}`))
			if allowed := r.GetRequestBody() != nil; allowed != tt.allow {
				t.Fatalf("allowed=%v, want %v: %v", allowed, tt.allow, r)
			}
		})
	}
	t.Run("unknown upstream in header refused", func(t *testing.T) {
		s, _ := c.Process(context.Background())
		r := exchange(t, s, reqHeaders("/crm/mcp", nil, "x-mcpgate-upstream", "nope"))
		if r.GetImmediateResponse().GetStatus().GetCode() != 500 {
			t.Fatalf("want 500, got %v", r)
		}
	})
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestResponseModes: list answers are BUFFERED (JSON) or switched to
// STREAMED (SSE) and filtered; answers the pipeline need not see are not
// sent to mcpgate at all.
func TestResponseModes(t *testing.T) {
	c := client(t)
	list := `{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta + `}}`
	t.Run("SSE list switched to STREAMED, filtered event by event", func(t *testing.T) {
		s, _ := c.Process(context.Background())
		exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"))
		exchange(t, s, reqBody(list))
		r := exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "text/event-stream", "content-length", "999")}}})
		if r.GetModeOverride().GetResponseBodyMode() != extprocfilterv3.ProcessingMode_STREAMED {
			t.Fatalf("mode override %v", r.GetModeOverride())
		}
		if rm := r.GetResponseHeaders().GetResponse().GetHeaderMutation().GetRemoveHeaders(); len(rm) != 1 || rm[0] != "content-length" {
			t.Errorf("content-length not removed: %v", rm)
		}
		chunk := func(b string, eos bool) string {
			r := exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: eos}}})
			m := r.GetResponseBody().GetResponse().GetBodyMutation()
			if m.GetClearBody() {
				return ""
			}
			return string(m.GetBody())
		}
		event := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"get_booking\"},{\"name\":\"secret\"}]}}\n\n"
		if got := chunk(event[:30], false); got != "" {
			t.Errorf("partial event relayed early: %q", got)
		}
		got := chunk(event[30:], false)
		if want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[{\"name\":\"get_booking\"}]}}\n\n"; got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
		if got := chunk("", true); got != "" {
			t.Errorf("end of stream: %q", got)
		}
		if got := chunk("", true); got != "" { // a repeated end of stream is tolerated
			t.Errorf("repeated end of stream: %q", got)
		}
	})
	t.Run("JSON list stays BUFFERED, content-length set", func(t *testing.T) {
		s, _ := c.Process(context.Background())
		exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list"))
		exchange(t, s, reqBody(list))
		r := exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "application/json")}}})
		if r.GetModeOverride() != nil {
			t.Fatalf("unexpected mode override %v", r.GetModeOverride())
		}
		r = exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"secret"},{"name":"get_booking"}]}}`), EndOfStream: true}}})
		cr := r.GetResponseBody().GetResponse()
		body := string(cr.GetBodyMutation().GetBody())
		if body != `{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get_booking"}]}}` {
			t.Errorf("body %s", body)
		}
		if cl, _ := header(cr.GetHeaderMutation(), "content-length"); cl != "68" || len(body) != 68 {
			t.Errorf("content-length %q for %d bytes", cl, len(body))
		}
	})
	t.Run("tools/call answer not inspected: body mode NONE", func(t *testing.T) {
		s, _ := c.Process(context.Background())
		exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"))
		r := exchange(t, s, reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{},`+meta+`}}`))
		if r.GetRequestBody() == nil {
			t.Fatalf("refused: %v", r)
		}
		r = exchange(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "text/event-stream")}}})
		if m := r.GetModeOverride(); m == nil || m.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_NONE {
			t.Fatalf("want response body mode NONE, got %v", m)
		}
	})
}
