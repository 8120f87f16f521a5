package extproc_test

import (
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
)

// The pipeline's exchange is given back for reuse when its stream ends,
// and only then: a relayed SSE answer's exchange (which its rewriter and
// a tool-list watch may still reach) is never reused.
func TestExchangeReleasedWhenStreamEnds(t *testing.T) {
	s := server(t)
	var x *gateway.Exchange
	extproc.Observe(s, func(e *gateway.Exchange) { x = e })
	list := reqBody(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta + `}}`)
	listHeaders := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list")
	respHeaders := func(contentType string) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", contentType)}}}
	}
	respBody := func(b string) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}}}
	}
	for _, c := range []struct {
		name     string
		msgs     []*extprocv3.ProcessingRequest
		released bool
	}{
		{"JSON answer", []*extprocv3.ProcessingRequest{listHeaders, list, respHeaders("application/json"),
			respBody(`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get_booking"}]}}`)}, true},
		{"tools/call, answer not inspected", []*extprocv3.ProcessingRequest{benchHeaders, benchBody, benchResp}, true},
		{"SSE answer relayed", []*extprocv3.ProcessingRequest{listHeaders, list, respHeaders("text/event-stream"),
			respBody("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}\n\n")}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			wire := make([][]byte, len(c.msgs))
			for i, m := range c.msgs {
				var err error
				if wire[i], err = proto.Marshal(m); err != nil {
					t.Fatal(err)
				}
			}
			x = nil
			st := &wireStream{ctx: context.Background(), in: wire}
			if err := s.Process(st); err != nil {
				t.Fatal(err)
			}
			if st.answered != len(wire) || x == nil {
				t.Fatalf("%d answers to %d messages (exchange %v)", st.answered, len(wire), x)
			}
			// A released exchange is zeroed: it has no message.
			if released := x.Message() == nil; released != c.released {
				t.Errorf("released %v, want %v", released, c.released)
			}
		})
	}
}
