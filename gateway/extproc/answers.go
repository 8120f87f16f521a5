package extproc

import (
	"strconv"
	"sync"
	"unsafe"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// answers holds the messages of one stream: the ProcessingRequest being
// answered and the parts of its answer. Process takes a stream's messages
// one at a time: it sends each answer (gRPC marshals it inside Send; the
// listener has no stats handler or interceptor that could keep a message)
// before it reads the next message into the same ProcessingRequest
// (Unmarshal resets it and allocates what it holds anew, so values taken
// from one message stay intact). One set therefore serves every message
// of the stream, header mutations included (headerStore), and answering
// allocates nothing once the set's header storage has grown. Rare
// answers are built apart: immediate responses, trailers, and the
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
	mut         extprocv3.HeaderMutation
	store       headerStore
	length      [20]byte // the content-length value of contentLength
	// ex is the stream's exchange, maps the header maps of its request
	// and response (fromHeaderMap). held: the pipeline may still reach
	// them (through ex.request) once the stream has ended
	// (exchange.release); the set is then left to the collector.
	ex   exchange
	maps headerMaps
	held bool
}

// headerMaps is the storage of a stream's converted header maps.
type headerMaps struct{ req, resp headerStorage }

// headerStorage is a header map and the array of its values
// (fromHeaderMap); given: in use by the stream.
type headerStorage struct {
	m     mcp.Header
	vals  []string
	given bool
}

// cleared returns st emptied for another stream (nothing of its values
// kept alive), or nothing when it grew large.
func (st headerStorage) cleared() headerStorage {
	if len(st.m) > maxKeptHeaders || cap(st.vals) > maxKeptHeaders {
		return headerStorage{}
	}
	clear(st.m)
	clear(st.vals[:cap(st.vals)])
	return headerStorage{m: st.m, vals: st.vals[:0]}
}

// answerSets keeps answers from one stream for the next: nothing holds a
// set once its stream's Process has returned. Each answer was marshalled
// inside Send, and what the pipeline keeps of a received message (header
// values, the body) lives in what Unmarshal allocated for it, which the
// ProcessingRequest only points to.
var answerSets = sync.Pool{New: func() any { return new(answers) }}

// maxKeptHeaders bounds the header storage a set keeps between streams.
const maxKeptHeaders = 32

// release clears a, so that it keeps nothing of its stream alive, and
// returns it to answerSets with its header storage when that is small;
// a set the pipeline may still reach is not reused.
func (a *answers) release() {
	if a.held {
		return
	}
	st := a.store
	if len(st.hs) > maxKeptHeaders {
		st = headerStore{}
	}
	clear(st.hs)
	clear(st.opts[:cap(st.opts)])
	maps := headerMaps{req: a.maps.req.cleared(), resp: a.maps.resp.cleared()}
	*a = answers{store: st, maps: maps}
	answerSets.Put(a)
}

// mutation is the HeaderMutation that overwrites each header in set and
// removes remove (nil when it does neither), built in a.
func (a *answers) mutation(set mcp.Header, remove []string) *extprocv3.HeaderMutation {
	return a.store.mutation(&a.mut, set, remove)
}

// contentLength is the mutation that sets content-length to n (the one
// header an answer with a new body needs) and removes remove, built in a
// without a Header map.
func (a *answers) contentLength(n int, remove []string) *extprocv3.HeaderMutation {
	v := strconv.AppendInt(a.length[:0], int64(n), 10)
	a.store.room(1)
	a.mut = extprocv3.HeaderMutation{RemoveHeaders: remove}
	a.mut.SetHeaders = a.store.set(a.store.opts[:0], 0, "content-length", v, overwriteFlag)
	return &a.mut
}

// mutation is answers.mutation for an answer built apart (an immediate
// response).
func mutation(set mcp.Header, remove []string) *extprocv3.HeaderMutation {
	var st headerStore
	return st.mutation(new(extprocv3.HeaderMutation), set, remove)
}

// headerStore holds the header options and values of a HeaderMutation:
// one array of each header's option and value together, one of the
// options' pointers, both reused from one mutation to the next.
type headerStore struct {
	hs   []setHeader
	opts []*corev3.HeaderValueOption
}

type setHeader struct {
	o  corev3.HeaderValueOption
	hv corev3.HeaderValue
}

// mutation sets m to overwrite each header in set and remove remove, and
// returns it (nil when it does neither).
//
// The append flags are shared, and raw_value holds the value's own bytes
// (rawBytes), not a copy: gRPC only reads a message it sends, and nothing
// else writes to it.
func (st *headerStore) mutation(m *extprocv3.HeaderMutation, set mcp.Header, remove []string) *extprocv3.HeaderMutation {
	if len(set) == 0 && len(remove) == 0 {
		return nil
	}
	*m = extprocv3.HeaderMutation{RemoveHeaders: remove}
	n := 0
	for _, vals := range set {
		n += len(vals)
	}
	if n == 0 {
		return m
	}
	st.room(n)
	opts := st.opts[:0]
	for k, vals := range set {
		for i, v := range vals {
			// ext_proc honours the (deprecated) append flag, not
			// append_action: false overwrites, true adds a value
			// (Envoy mutation_utils.cc). Values go in raw_value only.
			flag := overwriteFlag
			if i > 0 {
				flag = appendFlag
			}
			opts = st.set(opts, len(opts), k, rawBytes(v), flag)
		}
	}
	m.SetHeaders = opts
	return m
}

// room makes room in st for n headers.
func (st *headerStore) room(n int) {
	if len(st.hs) < n {
		st.hs = make([]setHeader, n)
		st.opts = make([]*corev3.HeaderValueOption, 0, n)
	}
}

// set fills header j of st and appends its option to opts.
func (st *headerStore) set(opts []*corev3.HeaderValueOption, j int, key string, value []byte, flag *wrapperspb.BoolValue) []*corev3.HeaderValueOption {
	h := &st.hs[j]
	h.hv = corev3.HeaderValue{Key: key, RawValue: value}
	h.o = corev3.HeaderValueOption{Header: &h.hv, Append: flag}
	return append(opts, &h.o)
}

// rawBytes is s's bytes without a copy, for a field of a message that is
// only marshalled (never written to: strings are immutable).
func rawBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// The append flags of HeaderValueOption, shared by every mutation: sent
// only, never modified.
var (
	overwriteFlag = wrapperspb.Bool(false)
	appendFlag    = wrapperspb.Bool(true)
)

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
