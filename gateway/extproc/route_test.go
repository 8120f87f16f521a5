package extproc_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
)

// federated serves an ext_proc server whose verdicts name a member: the
// upstream the request was on, prefixed "member-" (a unit seam standing in
// for the federation resolver, so the adapter's routing is tested alone).
func federated(t testing.TB) extprocv3.ExternalProcessorClient {
	t.Helper()
	s := server(t)
	extproc.RouteTo(s, func(r *gateway.Request) string { return "member-" + r.Upstream })
	return serveServer(t, s)
}

// envoyApply applies a header mutation as Envoy does (removals, then
// sets; append false overwrites) to the header fields in kv.
func envoyApply(hm *extprocv3.HeaderMutation, kv ...string) map[string][]string {
	h := map[string][]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		h[kv[i]] = append(h[kv[i]], kv[i+1])
	}
	for _, k := range hm.GetRemoveHeaders() {
		delete(h, k)
	}
	for _, o := range hm.GetSetHeaders() {
		k, v := o.GetHeader().GetKey(), string(o.GetHeader().GetRawValue())
		if o.GetAppend().GetValue() {
			h[k] = append(h[k], v)
		} else {
			h[k] = []string{v}
		}
	}
	return h
}

// crmRoute is the route metadata attribute of a route that names crm.
func crmRoute(t *testing.T) map[string]*structpb.Struct {
	return map[string]*structpb.Struct{"envoy.filters.http.ext_proc": mustStruct(t, map[string]any{
		"xds.route_metadata": `filter_metadata { key: "mcpgate" value { fields { key: "upstream" value { string_value: "crm" } } } }`,
	})}
}

var callHeaders = []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"}

const bookingCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`

// TestRoutesToMember: a verdict that names a member sets
// x-mcpgate-upstream to it in the request body answer (the one Envoy
// holds the headers for) with clear_route_cache, so that Envoy chooses the
// member's route; the headers answer before it neither routes nor clears.
// A client's own x-mcpgate-upstream never survives, whatever the verdict;
// a request that names no member and carried no such header is answered
// as before, without a clear.
func TestRoutesToMember(t *testing.T) {
	for _, tt := range []struct {
		name   string
		c      func(testing.TB) extprocv3.ExternalProcessorClient
		client []string // the client's own x-mcpgate-upstream, if any
		want   []string // x-mcpgate-upstream after Envoy applies the answer
		clear  bool
	}{
		{"member named", federated, nil, []string{"member-crm"}, true},
		{"member named over the client's header", federated, []string{"evil", "tickets"}, []string{"member-crm"}, true},
		{"no member, client's header removed", client, []string{"tickets"}, nil, true},
		{"no member, no header", client, nil, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := tt.c(t).Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kv := slices.Clone(callHeaders)
			for _, v := range tt.client {
				kv = append(kv, gateway.UpstreamHeader, v)
			}
			// Envoy's route metadata, not the client's header, names the
			// upstream (the route).
			r := exchange(t, s, reqHeaders("/crm/mcp", crmRoute(t), kv...))
			// Nothing to change: no CommonResponse (Envoy reads it as
			// an empty one).
			if r.GetRequestHeaders() == nil || r.GetRequestHeaders().GetResponse() != nil {
				t.Fatalf("headers answer: %v", r)
			}
			r = exchange(t, s, reqBody(bookingCall))
			if r.GetRequestBody() == nil {
				t.Fatalf("refused: %v", r)
			}
			cr := r.GetRequestBody().GetResponse()
			if cr.GetClearRouteCache() != tt.clear {
				t.Errorf("clear_route_cache %v, want %v", cr.GetClearRouteCache(), tt.clear)
			}
			if tt.clear && cr.GetHeaderMutation() == nil {
				t.Error("clear_route_cache without a header mutation: Envoy ignores it")
			}
			if got := envoyApply(cr.GetHeaderMutation(), kv...)[gateway.UpstreamHeader]; !slices.Equal(got, tt.want) {
				t.Errorf("%s after the answer: %q, want %q", gateway.UpstreamHeader, got, tt.want)
			}
			if tt.want != nil && slices.Contains(cr.GetHeaderMutation().GetRemoveHeaders(), gateway.UpstreamHeader) {
				t.Errorf("%s both set and removed: the route would depend on the order Envoy applies them", gateway.UpstreamHeader)
			}
		})
	}
}

// TestRoutesBodylessRequest: a request without a body is decided, and
// routed, by the headers answer.
func TestRoutesBodylessRequest(t *testing.T) {
	s, err := federated(t).Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	get := reqHeaders("/crm/mcp", crmRoute(t), "mcp-session-id", "s", gateway.UpstreamHeader, "tickets")
	get.GetRequestHeaders().EndOfStream = true
	get.GetRequestHeaders().Headers.Headers[0].RawValue = []byte("GET")
	r := exchange(t, s, get)
	cr := r.GetRequestHeaders().GetResponse()
	if cr == nil || !cr.GetClearRouteCache() {
		t.Fatalf("want a headers answer that clears the route cache: %v", r)
	}
	if got := envoyApply(cr.GetHeaderMutation(), gateway.UpstreamHeader, "tickets")[gateway.UpstreamHeader]; !slices.Equal(got, []string{"member-crm"}) {
		t.Errorf("%s: %q", gateway.UpstreamHeader, got)
	}
}

// TestRefusalNotRouted: a request mcpgate answers itself is not routed.
func TestRefusalNotRouted(t *testing.T) {
	s, err := federated(t).Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	exchange(t, s, reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "drop_tables"))
	r := exchange(t, s, reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"drop_tables","arguments":{},`+meta+`}}`))
	if r.GetImmediateResponse() == nil {
		t.Fatalf("want an immediate response: %v", r)
	}
}

// TestRequestBodyModeChecked: a request body Envoy states it sends other
// than BUFFERED (protocol_config of the first message) is refused before
// anything is forwarded: mcpgate could neither decide on the whole body
// nor change the headers (or the route) after seeing it. An Envoy that
// states nothing is checked when the body arrives.
func TestRequestBodyModeChecked(t *testing.T) {
	c := federated(t)
	for _, tt := range []struct {
		name string
		pc   *extprocv3.ProtocolConfiguration
		want string // "" continues
	}{
		{"BUFFERED", &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED}, ""},
		{"not stated", nil, ""},
		{"STREAMED", &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_STREAMED}, "not STREAMED"},
		{"NONE", &extprocv3.ProtocolConfiguration{}, "not NONE"},
		{"FULL_DUPLEX_STREAMED", &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED}, "not FULL_DUPLEX_STREAMED"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := c.Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			req := reqHeaders("/crm/mcp", nil, callHeaders...)
			req.ProtocolConfig = tt.pc
			r := exchange(t, s, req)
			ir := r.GetImmediateResponse()
			if tt.want == "" {
				if ir != nil {
					t.Fatalf("refused: %v", r)
				}
				return
			}
			if ir.GetStatus().GetCode() != 500 || !strings.Contains(string(ir.GetBody()), "request_body_mode: BUFFERED") || !strings.Contains(string(ir.GetBody()), tt.want) {
				t.Fatalf("want 500 naming request_body_mode, got %v", r)
			}
		})
	}
	t.Run("bodyless request in any mode", func(t *testing.T) {
		s, err := c.Process(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		get := reqHeaders("/crm/mcp", nil, "mcp-session-id", "s")
		get.GetRequestHeaders().EndOfStream = true
		get.GetRequestHeaders().Headers.Headers[0].RawValue = []byte("GET")
		get.ProtocolConfig = &extprocv3.ProtocolConfiguration{RequestBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
		if r := exchange(t, s, get); r.GetRequestHeaders() == nil {
			t.Fatalf("want a headers answer: %v", r)
		}
	})
}
