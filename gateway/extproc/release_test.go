package extproc_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
)

// The pipeline's exchange, and the stream's request and header maps,
// are reused by later streams only once nothing else can reach them: a
// relayed SSE answer's exchange (which its rewriter and a tool-list
// watch may still reach) is never reused, nor is what it holds — its
// request and the request's header map stay as they were whatever the
// streams after it carry.
func TestStreamStorageReusedOnlyWhenReleased(t *testing.T) {
	s := server(t)
	var (
		x *gateway.Exchange
		r *gateway.Request
	)
	extproc.Observe(s, func(req *gateway.Request, e *gateway.Exchange) { r, x = req, e })
	list := reqBody(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{` + meta + `}}`)
	listHeaders := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list", "x-seen", "list")
	respHeaders := func(contentType string) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", contentType)}}}
	}
	respBody := func(b string) *extprocv3.ProcessingRequest {
		return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(b), EndOfStream: true}}}
	}
	sse := []*extprocv3.ProcessingRequest{listHeaders, list, respHeaders("text/event-stream"),
		respBody("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"tools\":[]}}\n\n")}
	jsonList := []*extprocv3.ProcessingRequest{listHeaders, list, respHeaders("application/json"),
		respBody(`{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"get_booking"}]}}`)}
	call := []*extprocv3.ProcessingRequest{benchHeaders, benchBody, benchResp}
	run := func(msgs []*extprocv3.ProcessingRequest) (*gateway.Request, *gateway.Exchange) {
		t.Helper()
		wire := make([][]byte, len(msgs))
		for i, m := range msgs {
			var err error
			if wire[i], err = proto.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		r, x = nil, nil
		st := &wireStream{ctx: context.Background(), in: wire}
		if err := s.Process(st); err != nil {
			t.Fatal(err)
		}
		if st.answered != len(wire) || x == nil {
			t.Fatalf("%d answers to %d messages (exchange %v)", st.answered, len(wire), x)
		}
		return r, x
	}

	// Released streams: the exchange is zeroed (no message) for reuse.
	for _, msgs := range [][]*extprocv3.ProcessingRequest{jsonList, call} {
		if _, x := run(msgs); x.Message() != nil {
			t.Errorf("%s: exchange not released", msgs[1])
		}
	}

	heldReq, heldX := run(sse)
	want := *heldReq
	want.Header = maps.Clone(heldReq.Header)
	if heldX.Message() == nil || heldX.Message().Method != "tools/list" {
		t.Fatal("the SSE stream's exchange was released")
	}
	for range 4 {
		run(call)
		run(jsonList)
	}
	if heldX.Message() == nil || heldX.Message().Method != "tools/list" {
		t.Error("the SSE stream's exchange was reused")
	}
	got := *heldReq
	if got.Method != want.Method || got.Path != want.Path || got.Upstream != want.Upstream || string(got.Body) != string(want.Body) {
		t.Errorf("the SSE stream's request changed: %+v, want %+v", got, want)
	}
	if !maps.EqualFunc(got.Header, want.Header, slices.Equal[[]string]) || !slices.Equal(got.Header.Values("x-seen"), []string{"list"}) {
		t.Errorf("the SSE stream's header map changed: %v, want %v", got.Header, want.Header)
	}
}
