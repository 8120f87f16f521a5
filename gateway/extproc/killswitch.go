package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
)

// killSwitchChunk ends a STREAMED SSE response when a kill switch covers
// its request. ext_proc can only answer the messages Envoy sends, so the
// switch is noticed on the next response chunk after it turned on (an
// upstream that stays silent keeps the stream open until it sends
// something; the standalone proxy has no such limit):
//
//   - that chunk is replaced by the JSON-RPC error event for the request
//     (gateway.Exchange.StreamStop) — nothing of it reaches the client;
//   - the chunk after it is answered with an immediate response, which
//     makes Envoy reset the stream (its response headers were sent), so
//     the client's stream closes and the upstream's request is cancelled.
//
// It returns nil while no switch covers the request.
func (ex *exchange) killSwitchChunk(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if ex.killed {
		if b.GetEndOfStream() {
			ex.rw = nil
			ex.finish()
			return clearBody()
		}
		// The response headers are out: Envoy resets the stream.
		return immediate(&gateway.Local{Status: 503})
	}
	last := ex.x.StreamStop()
	if last == nil {
		return nil
	}
	ex.killed = true
	if b.GetEndOfStream() {
		ex.rw = nil
		ex.finish()
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: last}}},
	}}}
}

func clearBody() *extprocv3.ProcessingResponse {
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{
		Response: &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}},
	}}}
}
