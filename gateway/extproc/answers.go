package extproc

import (
	"sync"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// answers holds the messages of one stream: the ProcessingRequest being
// answered and the parts of its answer. Process takes a stream's messages
// one at a time: it sends each answer (gRPC marshals it inside Send; the
// listener has no stats handler or interceptor that could keep a message)
// before it reads the next message into the same ProcessingRequest
// (Unmarshal resets it and allocates what it holds anew, so values taken
// from one message stay intact). One set therefore serves every message
// of the stream: answering costs no allocation beyond a header mutation.
// Rare answers are built apart: immediate responses, trailers, and the
// override_message_timeout the override timer sends from its own
// goroutine.
type answers struct {
	in          extprocv3.ProcessingRequest
	resp        extprocv3.ProcessingResponse
	common      extprocv3.CommonResponse
	headers     extprocv3.HeadersResponse
	body        extprocv3.BodyResponse
	bodyMut     extprocv3.BodyMutation
	newBody     extprocv3.BodyMutation_Body
	clearedBody extprocv3.BodyMutation_ClearBody
	reqHeaders  extprocv3.ProcessingResponse_RequestHeaders
	reqBody     extprocv3.ProcessingResponse_RequestBody
	respHeaders extprocv3.ProcessingResponse_ResponseHeaders
	respBody    extprocv3.ProcessingResponse_ResponseBody
}

// answerSets keeps answers from one stream for the next: nothing holds a
// set once its stream's Process has returned. Each answer was marshalled
// inside Send, and what the pipeline keeps of a received message (header
// values, the body) lives in what Unmarshal allocated for it, which the
// ProcessingRequest only points to.
var answerSets = sync.Pool{New: func() any { return new(answers) }}

// release clears a (so that it keeps nothing of its stream alive) and
// returns it to answerSets.
func (a *answers) release() {
	*a = answers{}
	answerSets.Put(a)
}

// change is what an answer's CommonResponse carries. An answer with no
// change carries no CommonResponse: Envoy reads an absent one as the
// default (status CONTINUE, nothing mutated), as it reads an empty one.
type change struct {
	header *extprocv3.HeaderMutation
	// setBody replaces the body with body; clearBody empties it.
	setBody, clearBody bool
	body               []byte
	clearRoute         bool // clear_route_cache (route.go)
}

// commonResponse is c as a CommonResponse, nil when c changes nothing.
func (a *answers) commonResponse(c change) *extprocv3.CommonResponse {
	if c.header == nil && !c.setBody && !c.clearBody && !c.clearRoute {
		return nil
	}
	a.common = extprocv3.CommonResponse{HeaderMutation: c.header, ClearRouteCache: c.clearRoute}
	switch {
	case c.setBody:
		a.newBody.Body = c.body
		a.bodyMut = extprocv3.BodyMutation{Mutation: &a.newBody}
		a.common.BodyMutation = &a.bodyMut
	case c.clearBody:
		a.clearedBody.ClearBody = true
		a.bodyMut = extprocv3.BodyMutation{Mutation: &a.clearedBody}
		a.common.BodyMutation = &a.bodyMut
	}
	return &a.common
}

// The messages an answer answers.
const (
	requestHeaders = iota
	requestBody
	responseHeaders
	responseBody // a buffered body, or one chunk of a streamed one
)

// answer is the answer to a message of kind msg (requestHeaders…) with c
// and, for response headers, the processing mode override (nil for none).
func (a *answers) answer(msg int, c change, override *extprocfilterv3.ProcessingMode) *extprocv3.ProcessingResponse {
	cr := a.commonResponse(c)
	a.resp = extprocv3.ProcessingResponse{ModeOverride: override}
	switch msg {
	case requestHeaders, responseHeaders:
		a.headers = extprocv3.HeadersResponse{Response: cr}
		if msg == requestHeaders {
			a.reqHeaders.RequestHeaders = &a.headers
			a.resp.Response = &a.reqHeaders
		} else {
			a.respHeaders.ResponseHeaders = &a.headers
			a.resp.Response = &a.respHeaders
		}
	default:
		a.body = extprocv3.BodyResponse{Response: cr}
		if msg == requestBody {
			a.reqBody.RequestBody = &a.body
			a.resp.Response = &a.reqBody
		} else {
			a.respBody.ResponseBody = &a.body
			a.resp.Response = &a.respBody
		}
	}
	return &a.resp
}

// The processing modes sent as mode_override: shared by every answer,
// never modified.
var (
	passThroughMode = responseMode(extprocfilterv3.ProcessingMode_NONE)
	streamedMode    = responseMode(extprocfilterv3.ProcessingMode_STREAMED)
)

// responseMode is the whole processing mode sent as mode_override (Envoy
// replaces the mode with it): the request side as configured, the response
// body as chosen, trailers skipped.
func responseMode(body extprocfilterv3.ProcessingMode_BodySendMode) *extprocfilterv3.ProcessingMode {
	return &extprocfilterv3.ProcessingMode{
		RequestHeaderMode:   extprocfilterv3.ProcessingMode_SEND,
		RequestBodyMode:     extprocfilterv3.ProcessingMode_BUFFERED,
		RequestTrailerMode:  extprocfilterv3.ProcessingMode_SKIP,
		ResponseHeaderMode:  extprocfilterv3.ProcessingMode_SEND,
		ResponseBodyMode:    body,
		ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
	}
}
