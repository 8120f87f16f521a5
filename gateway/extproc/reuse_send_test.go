package extproc_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// streamSender returns a Sender that plays each call on a stream of its
// own, as Envoy does, on the route of path. A local answer is returned
// as it is; a forwarded call is answered with what up answers (to the
// client's header with the assertion set, and the body as forwarded),
// unless the call leaves, when the stream ends with the request.
func streamSender(c extprocv3.ExternalProcessorClient, path string, up gatewaytest.Upstream) gatewaytest.Sender {
	return func(call gatewaytest.Call) (gatewaytest.Reply, error) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s, err := c.Process(ctx)
		if err != nil {
			return gatewaytest.Reply{}, err
		}
		defer func() { _ = s.CloseSend() }()
		kv := append([]string{"authorization", "Bearer tok-" + call.Caller}, call.Fields...)
		if r, err := answer(s, reqHeaders(path, nil, kv...)); err != nil || r.GetRequestHeaders() == nil {
			return gatewaytest.Reply{}, fmt.Errorf("request headers: %v %v", r, err)
		}
		r, err := answer(s, reqBody(call.Body))
		if err != nil {
			return gatewaytest.Reply{}, err
		}
		if ir := r.GetImmediateResponse(); ir != nil {
			return gatewaytest.Reply{Status: int(ir.GetStatus().GetCode()), Body: ir.GetBody(), Route: gatewaytest.RouteLocal}, nil
		}
		if r.GetRequestBody() == nil {
			return gatewaytest.Reply{}, fmt.Errorf("request body: %v", r)
		}
		cr := r.GetRequestBody().GetResponse()
		sent := []byte(call.Body)
		if b := cr.GetBodyMutation().GetBody(); b != nil {
			sent = b
		}
		h := call.Header()
		if a, ok := header(cr.GetHeaderMutation(), gateway.AssertionHeader); ok {
			h.Set(gateway.AssertionHeader, a)
		}
		got, hold := up.Answer(h, sent)
		if call.Leave {
			return gatewaytest.Reply{Route: gatewaytest.RouteUpstream}, nil
		}
		if hold {
			return gatewaytest.Reply{}, errors.New("the upstream holds its answer, which a stream does not play")
		}
		rh := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "application/json")}}}
		r, err = answer(s, rh)
		if err != nil || r.GetResponseHeaders() == nil {
			return gatewaytest.Reply{}, fmt.Errorf("response headers: %v %v", r, err)
		}
		status := 200
		if v, ok := header(r.GetResponseHeaders().GetResponse().GetHeaderMutation(), ":status"); ok {
			status, _ = strconv.Atoi(v)
		}
		rb := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: got, EndOfStream: true}}}
		r, err = answer(s, rb)
		if ir := r.GetImmediateResponse(); err == nil && ir != nil {
			return gatewaytest.Reply{Status: int(ir.GetStatus().GetCode()), Body: ir.GetBody(), Route: gatewaytest.RouteWithheld}, nil
		}
		if err != nil || r.GetResponseBody() == nil {
			return gatewaytest.Reply{}, fmt.Errorf("response body: %v %v", r, err)
		}
		if b := r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(); b != nil {
			got = b
		}
		return gatewaytest.Reply{Status: status, Body: got, Route: gatewaytest.RouteUpstream}, nil
	}
}
