package extproc

import (
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
)

// stopped answers a STREAMED SSE chunk once a kill switch covers its
// request (ResponseEvents said ErrStreamStopped). ext_proc can only
// answer the messages Envoy sends, so the switch is noticed on the next
// response chunk after it turned on (an upstream that stays silent keeps
// the stream open until it sends something; the standalone proxy has no
// such limit):
//
//   - that chunk is replaced by the JSON-RPC error event for the request
//     (what ResponseEvents emitted into ex.out) — nothing of it reaches
//     the client;
//   - the chunk after it is answered with an immediate response, which
//     makes Envoy reset the stream (its response headers were sent), so
//     the client's stream closes and the upstream's request is cancelled.
func (ex *exchange) stopped(b *extprocv3.HttpBody) *extprocv3.ProcessingResponse {
	if ex.killed {
		if b.GetEndOfStream() {
			ex.streaming = false
			ex.finish()
			return ex.a.answer(responseBody, change{clearBody: true}, nil)
		}
		// The response headers are out: Envoy resets the stream.
		return immediate(&gateway.Local{Status: 503})
	}
	ex.killed = true
	if b.GetEndOfStream() {
		ex.streaming = false
		ex.finish()
	}
	return ex.a.answer(responseBody, change{setBody: true, body: ex.out}, nil)
}
