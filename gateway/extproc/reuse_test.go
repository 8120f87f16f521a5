package extproc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// Exchanges, requests and header maps given back for reuse carry nothing
// of one stream into another: concurrent streams of callers with their
// own principals and arguments (one unauthenticated), which end every way
// a stream can — a JSON or SSE answer, an answer that fails inspection,
// no answer (the stream ends after the request), request headers sent
// twice, refused locally or by the policy — each get the mutations and
// answers of their own request.
func TestReusedExchangesKeepStreamsApart(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(gatewaytest.CallerAuth{}),
		gatewaytest.With(gateway.Options{Asserter: gatewaytest.PlainAsserter{}}), serverBounds)
	c := serve(t, p)
	modes := []string{"json", "json", "sse", "json", "early", "denied", "fail", "repeat", "refused", "json"}
	const callers, rounds = 7, 4
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(n)
			if n == callers-1 {
				caller = "anon"
			}
			for i := range rounds * len(modes) {
				mode := modes[(i+n)%len(modes)]
				id := fmt.Sprintf("%d%03d", n+1, i)
				if err := playStream(c, caller, id, mode); err != nil {
					t.Errorf("caller %s, call %s (%s): %v", caller, id, mode, err)
				}
			}
		}()
	}
	wg.Wait()
}

// playStream plays one tools/call of caller on a stream of its own, as
// Envoy does, and checks every answer belongs to it.
func playStream(c extprocv3.ExternalProcessorClient, caller, id, mode string) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Process(ctx)
	if err != nil {
		return err
	}
	name, tool := "get_booking", "get_booking"
	switch mode {
	case "refused":
		name = "other" // differs from the body's: refused locally
	case "denied":
		name, tool = "drop_tables", "drop_tables" // undeclared: refused by the policy
	}
	hdrs := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", name,
		"authorization", "Bearer tok-"+caller, "x-caller", caller)
	nonce := "n-" + caller + "-" + id
	body := reqBody(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"caller":"` + caller + `","nonce":"` + nonce + `"},` + meta + `}}`)
	if r, err := answer(s, hdrs); err != nil || r.GetRequestHeaders() == nil {
		return fmt.Errorf("request headers: %v %v", r, err)
	}
	if mode == "repeat" {
		if r, err := answer(s, hdrs); err != nil || r.GetRequestHeaders() == nil {
			return fmt.Errorf("repeated request headers: %v %v", r, err)
		}
	}
	r, err := answer(s, body)
	if err != nil {
		return err
	}
	if mode == "refused" || mode == "denied" {
		ir := r.GetImmediateResponse()
		if ir == nil || !strings.Contains(string(ir.GetBody()), `"id":`+id) {
			return fmt.Errorf("want a refusal of request %s, got %v", id, r)
		}
		return s.CloseSend()
	}
	mut := r.GetRequestBody().GetResponse().GetHeaderMutation()
	if mut == nil {
		return fmt.Errorf("request body: %v", r)
	}
	if got, _ := header(mut, gateway.AssertionHeader); got != gatewaytest.CallerAssertion(caller, "crm") {
		return fmt.Errorf("assertion %q, want %q", got, gatewaytest.CallerAssertion(caller, "crm"))
	}
	for _, h := range mut.GetSetHeaders() {
		if k := h.GetHeader().GetKey(); k != gateway.AssertionHeader && k != "accept-encoding" && k != "mcp-name" {
			return fmt.Errorf("sets %s: %q", k, h.GetHeader().GetRawValue())
		}
	}
	if !contains(mut.GetRemoveHeaders(), "authorization") {
		return fmt.Errorf("authorization not removed: %v", mut.GetRemoveHeaders())
	}
	if mode == "early" {
		return s.CloseSend() // the upstream never answers
	}
	contentType := "application/json"
	if mode == "sse" {
		contentType = "text/event-stream"
	}
	status := "200"
	if mode == "fail" {
		status = "401" // the upstream refuses the assertion: a failure (502)
	}
	rh := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", status, "content-type", contentType)}}}
	r, err = answer(s, rh)
	if err != nil {
		return err
	}
	if mode == "fail" && caller == "anon" {
		// Without an assertion the upstream's 401 is relayed.
		if r.GetResponseHeaders() == nil {
			return fmt.Errorf("response headers: %v", r)
		}
		return s.CloseSend()
	}
	if mode == "fail" {
		ir := r.GetImmediateResponse()
		if ir == nil || ir.GetStatus().GetCode() != 502 || !strings.Contains(string(ir.GetBody()), `"id":`+id) {
			return fmt.Errorf("want a failure of request %s, got %v", id, r)
		}
		return s.CloseSend()
	}
	if r.GetResponseHeaders() == nil {
		return fmt.Errorf("response headers: %v", r)
	}
	text := "caller=" + caller + " nonce=" + nonce
	result := `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"` + text + `"}]}}`
	if mode == "sse" {
		result = "event: message\ndata: " + result + "\n\n"
	}
	rb := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(result), EndOfStream: true}}}
	r, err = answer(s, rb)
	if err != nil {
		return err
	}
	if r.GetResponseBody() == nil {
		return fmt.Errorf("response body: %v", r)
	}
	if bm := r.GetResponseBody().GetResponse().GetBodyMutation(); bm != nil && bm.GetBody() != nil {
		if got := string(bm.GetBody()); !strings.Contains(got, text) || !strings.Contains(got, `"id":`+id) {
			return fmt.Errorf("answer of another request: %s", got)
		}
	}
	return s.CloseSend()
}

// answer sends req and returns the message that answers it, past any
// override_message_timeout.
func answer(s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(req); err != nil {
		return nil, err
	}
	for {
		r, err := s.Recv()
		if err != nil {
			return nil, err
		}
		if r.GetResponse() != nil {
			return r, nil
		}
		if r.GetOverrideMessageTimeout() == nil {
			return nil, errors.New("a message with no answer")
		}
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}
