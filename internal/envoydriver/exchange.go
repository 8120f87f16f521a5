package envoydriver

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
)

const (
	bodyNone     = extprocfilterv3.ProcessingMode_NONE
	bodyStreamed = extprocfilterv3.ProcessingMode_STREAMED
	bodyBuffered = extprocfilterv3.ProcessingMode_BUFFERED
)

// callbackState is ProcessorState::CallbackState: which response the
// direction is waiting for.
type callbackState int

const (
	cbIdle callbackState = iota
	cbHeaders
	cbBufferedBody
	cbStreamedBody
)

var (
	// errSpurious is Envoy's FailedPrecondition "spurious message": a response
	// that matches no outstanding message.
	errSpurious = errors.New("spurious message")
	// errBodyLength is the BUFFERED body mutation whose length differs from
	// the content-length header left in place.
	errBodyLength = errors.New("mismatch between content length and the length of the mutated body")
)

// bodyEvent is one body chunk read from the client or the upstream.
type bodyEvent struct {
	data []byte
	eos  bool
	err  error
}

type chunk struct {
	data []byte
	eos  bool
}

type upstreamResult struct {
	resp *http.Response
	err  error
}

// dirState is ProcessorState for one direction: decoding (the request path)
// or encoding (the response path).
type dirState struct {
	response     bool
	sendHeaders  bool
	sendTrailers bool
	bodyMode     extprocfilterv3.ProcessingMode_BodySendMode

	cb                 callbackState
	timer              *time.Timer
	timerC             <-chan time.Time
	newTimeoutReceived bool

	headers          *headerMap // the direction's live header map; nil until it starts
	processorHeaders bool       // Envoy's headers_ != nullptr: mutations still apply
	held             bool       // headers not yet continued to the next filter
	noBody           bool
	completeBody     bool
	bodyReplaced     bool
	buffered         []byte
	hasBuffered      bool
	queue            []chunk
	queueBytes       int
	attributesSent   bool
	eosForwarded     bool
	watermark        bool // reading paused
}

func (st *dirState) setMode(m *extprocfilterv3.ProcessingMode) {
	if st.response {
		st.sendHeaders = m.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_SKIP
		st.sendTrailers = m.GetResponseTrailerMode() == extprocfilterv3.ProcessingMode_SEND
		st.bodyMode = m.GetResponseBodyMode()
		return
	}
	st.sendHeaders = m.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_SKIP
	st.sendTrailers = m.GetRequestTrailerMode() == extprocfilterv3.ProcessingMode_SEND
	st.bodyMode = m.GetRequestBodyMode()
}

// shouldRemoveContentLength is ProcessorState::shouldRemoveContentLength
// (allow_content_length_header unset).
func (st *dirState) shouldRemoveContentLength() bool {
	return st.bodyMode == bodyStreamed || st.bodyMode == extprocfilterv3.ProcessingMode_BUFFERED_PARTIAL ||
		st.bodyMode == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED ||
		(st.bodyMode == bodyBuffered && !st.sendHeaders)
}

// noExternalProcess is EncodingProcessorState::noExternalProcess.
func (st *dirState) noExternalProcess() bool {
	return !st.sendHeaders && !st.sendTrailers && st.bodyMode == bodyNone
}

func (st *dirState) startTimer(d time.Duration) {
	if st.timer == nil {
		st.timer = time.NewTimer(d)
	} else {
		st.timer.Reset(d)
	}
	st.timerC = st.timer.C
}

func (st *dirState) stopTimer() {
	if st.timer != nil {
		st.timer.Stop()
	}
	st.timerC = nil
}

func (st *dirState) headersPhase() phase {
	if st.response {
		return phaseResponseHeaders
	}
	return phaseRequestHeaders
}

func (st *dirState) bodyPhase() phase {
	if st.response {
		return phaseResponseBody
	}
	return phaseRequestBody
}

// exchange is one HTTP request through the filter chain: the ext_proc filter
// (Filter in ext_proc.cc) followed by the router.
type exchange struct {
	d     *Driver
	w     http.ResponseWriter
	rc    *http.ResponseController
	r     *http.Request
	ctx   context.Context
	start time.Time

	loopDone chan struct{}
	recvCh   chan recvResult
	side     *sidestream
	// sideClosed: events of the closed stream are ignored.
	sideClosed bool
	// complete is processing_complete_: nothing more goes to the server.
	complete           bool
	protocolConfigSent bool

	dec, enc dirState

	reqBodyCh chan bodyEvent
	// reqReaderDone is closed when the goroutine reading the client's
	// body has returned: the handler must not return before it (net/http
	// reads and closes the body after the handler).
	reqReaderDone chan struct{}
	// reqBodyRead is set by that goroutine once a read of the body has
	// ended it (end of stream or an error), before it hands the last event
	// on: from then on it blocks on no read of the client's connection.
	reqBodyRead atomic.Bool
	respBodyCh  chan bodyEvent
	upRespCh    chan upstreamResult
	upCancel    context.CancelFunc
	upBody      *fifo[[]byte]
	upStart     time.Time

	// route is the route chosen (routeCached) on the request headers:
	// by the connection manager before the filters, again by the router
	// after an answer cleared it (route.go).
	route       *route
	routeCached bool

	upstreamStarted   bool
	decoderAborted    bool // a local reply took over: the request goes nowhere
	responseStarted   bool // response headers exist (upstream or local reply)
	downstreamStarted bool // response headers were written to the client
	declaredLength    int64
	written           int64

	done  bool
	reset bool
}

func newExchange(d *Driver, w http.ResponseWriter, r *http.Request) *exchange {
	x := &exchange{
		d: d, w: w, r: r, rc: http.NewResponseController(w), ctx: r.Context(), start: time.Now(),
		loopDone: make(chan struct{}), recvCh: make(chan recvResult),
		upRespCh: make(chan upstreamResult, 1), declaredLength: -1,
	}
	x.dec.setMode(d.mode)
	x.enc.response = true
	x.enc.setMode(d.mode)
	// Envoy reads request data while the response is being written.
	_ = x.rc.EnableFullDuplex()
	return x
}

// run drives the exchange to its end and reports whether the downstream
// stream must be reset.
func (x *exchange) run() bool {
	defer x.cleanup()
	x.decodeHeaders()
	for !x.done {
		reqCh, respCh := x.reqBodyCh, x.respBodyCh
		if x.dec.watermark || x.decoderAborted {
			reqCh = nil
		}
		if x.enc.watermark {
			respCh = nil
		}
		select {
		case res := <-x.recvCh:
			x.onStreamEvent(res)
		case <-x.dec.timerC:
			x.dec.timerC = nil
			x.onMessageTimeout()
		case <-x.enc.timerC:
			x.enc.timerC = nil
			x.onMessageTimeout()
		case ev := <-reqCh:
			x.onBodyEvent(&x.dec, ev)
		case up := <-x.upRespCh:
			x.onUpstreamResponse(up)
		case ev := <-respCh:
			x.onBodyEvent(&x.enc, ev)
		case <-x.ctx.Done():
			// The client went away: Envoy resets the stream and the filter's
			// onDestroy closes the side stream.
			x.d.logf("downstream closed: %v", x.ctx.Err())
			x.done = true
		}
	}
	return x.reset
}

func (x *exchange) cleanup() {
	close(x.loopDone)
	if x.reqReaderDone != nil {
		if !x.reqBodyRead.Load() {
			// The exchange ended before the client's body did: the reader
			// may be blocked on a client that sends no more. A read
			// deadline ends that read; the reader then sees loopDone and
			// returns. The response said "Connection: close"
			// (writeDownstreamHeaders), so net/http reads no further
			// request on this connection, whose context the failed read
			// has cancelled. When the body has been read nothing here
			// touches the connection, and a kept-alive connection reads
			// its next request.
			_ = x.rc.SetReadDeadline(time.Now())
		}
		<-x.reqReaderDone
	}
	x.dec.stopTimer()
	x.enc.stopTimer()
	if x.side != nil && !x.sideClosed {
		// Filter::onDestroy → closeStreamMaybeGraceful.
		x.sideClosed = true
		x.side.closeGracefully()
	}
	if x.upBody != nil {
		x.upBody.close()
	}
	if x.upCancel != nil {
		x.upCancel()
	}
}

// --- request path (decoding) ---

func (x *exchange) decodeHeaders() {
	r := x.r
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	path := r.RequestURI
	if !strings.HasPrefix(path, "/") {
		path = r.URL.RequestURI()
	}
	h := &headerMap{}
	h.add(":authority", r.Host)
	h.add(":path", path)
	h.add(":method", r.Method)
	h.add(":scheme", scheme)
	h.fromHTTP(r.Header)
	// The connection manager adds these before any filter runs.
	if !h.has("x-forwarded-proto") {
		h.add("x-forwarded-proto", scheme)
	}
	if !h.has("x-request-id") {
		h.add("x-request-id", newRequestID())
	}
	st := &x.dec
	st.headers = h
	st.held = true
	st.noBody = r.Body == nil || r.Body == http.NoBody
	if st.noBody {
		st.completeBody = true
	} else {
		x.reqBodyCh, x.reqReaderDone = make(chan bodyEvent), make(chan struct{})
		go func() {
			defer close(x.reqReaderDone)
			readBody(r.Body, r.ContentLength, x.reqBodyCh, x.loopDone, &x.reqBodyRead)
		}()
	}
	// The connection manager chooses the route on the client's headers
	// before any filter runs (ActiveStream::decodeHeaders →
	// refreshCachedRoute).
	x.currentRoute()
	x.encodeOrDecodeHeaders(st)
}

// encodeOrDecodeHeaders is Filter::decodeHeaders / Filter::encodeHeaders.
func (x *exchange) encodeOrDecodeHeaders(st *dirState) {
	if !x.complete && st.sendHeaders {
		x.onHeaders(st)
	}
	// The processor saw the original content-length; Envoy removes it after
	// sending, based on the mode configured at this point.
	if !x.complete && st.shouldRemoveContentLength() {
		st.headers.remove("content-length")
	}
	if st.response && st.noExternalProcess() && !x.complete {
		x.closeStreamGracefully()
	}
	if st.cb != cbHeaders {
		x.release(st)
	}
}

func (x *exchange) onHeaders(st *dirState) {
	if !x.openStream() {
		return
	}
	st.processorHeaders = true
	req := x.newRequest(st)
	hh := &extprocv3.HttpHeaders{Headers: st.headers.proto(), EndOfStream: st.noBody}
	if st.response {
		req.Request = &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: hh}
	} else {
		req.Request = &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: hh}
	}
	x.sendMessage(st, req, cbHeaders, st.headersPhase())
}

func (x *exchange) openStream() bool {
	if x.complete {
		return false
	}
	if x.side == nil {
		x.side = x.d.openSidestream(x.ctx, x.recvCh, x.loopDone)
	}
	return true
}

func (x *exchange) newRequest(st *dirState) *extprocv3.ProcessingRequest {
	req := &extprocv3.ProcessingRequest{MetadataContext: &corev3.Metadata{}}
	names := x.d.cfg.RequestAttributes
	if st.response {
		names = x.d.cfg.ResponseAttributes
	}
	if !st.attributesSent && len(names) > 0 {
		st.attributesSent = true
		ac := &attributeContext{req: x.r, reqHeaders: x.dec.headers, respHeaders: x.enc.headers,
			start: x.start, cfg: &x.d.cfg, route: x.route}
		req.Attributes = map[string]*structpb.Struct{filterName: ac.evaluate(names)}
	}
	if !x.protocolConfigSent {
		x.protocolConfigSent = true
		req.ProtocolConfig = &extprocv3.ProtocolConfiguration{
			RequestBodyMode:  x.dec.bodyMode,
			ResponseBodyMode: x.enc.bodyMode,
		}
	}
	return req
}

func (x *exchange) sendMessage(st *dirState, req *extprocv3.ProcessingRequest, cb callbackState, ph phase) {
	st.cb = cb
	st.newTimeoutReceived = false
	st.startTimer(x.d.cfg.MessageTimeout)
	x.side.send(req)
	x.d.st.sent[ph].Add(1)
	x.d.logf("ext_proc ← %s: %v", ph, req)
}

func (x *exchange) sendBody(st *dirState, data []byte, eos bool, cb callbackState) {
	req := x.newRequest(st)
	body := &extprocv3.HttpBody{Body: append([]byte(nil), data...), EndOfStream: eos}
	if st.response {
		req.Request = &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: body}
	} else {
		req.Request = &extprocv3.ProcessingRequest_RequestBody{RequestBody: body}
	}
	x.sendMessage(st, req, cb, st.bodyPhase())
}

func (x *exchange) finishCall(st *dirState, next callbackState) {
	st.stopTimer()
	st.cb = next
	st.newTimeoutReceived = false
}

func (x *exchange) finishCalls() {
	x.finishCall(&x.dec, cbIdle)
	x.finishCall(&x.enc, cbIdle)
}

// onBodyEvent is Filter::decodeData / Filter::encodeData for one chunk.
func (x *exchange) onBodyEvent(st *dirState, ev bodyEvent) {
	if ev.err != nil {
		if st.response {
			// Upstream reset after its headers: the router resets the
			// downstream stream.
			x.resetStream("upstream reset after response started: " + ev.err.Error())
		} else {
			x.d.logf("downstream request body: %v", ev.err)
			x.done = true
		}
		return
	}
	if ev.eos {
		if st.response {
			x.respBodyCh = nil
		} else {
			x.reqBodyCh = nil
		}
	}
	x.onData(st, ev.data, ev.eos)
}

func (x *exchange) onData(st *dirState, data []byte, eos bool) {
	if !st.response && x.decoderAborted {
		return
	}
	if eos {
		st.completeBody = true
	}
	if st.bodyReplaced {
		// CONTINUE_AND_REPLACE: the original body is drained.
		if !st.held {
			x.forwardData(st, nil, eos)
		}
		return
	}
	if x.complete || (!st.held && st.bodyMode == bodyNone && !st.hasBuffered) {
		if st.held {
			x.buffer(st, data)
			return
		}
		x.forwardData(st, data, eos)
		return
	}
	if st.cb == cbHeaders {
		// Header processing in progress: hold the data. BUFFERED uses
		// StopIterationAndBuffer (over the limit: 413/500), the other modes
		// StopIterationAndWatermark (over the limit: stop reading).
		x.buffer(st, data)
		if len(st.buffered) > x.d.cfg.BufferLimit {
			if st.bodyMode == bodyBuffered {
				x.bufferOverflow(st)
				return
			}
			st.watermark = true
		}
		return
	}
	switch st.bodyMode {
	case bodyBuffered:
		x.buffer(st, data)
		if len(st.buffered) > x.d.cfg.BufferLimit {
			x.bufferOverflow(st)
			return
		}
		if eos {
			if !x.openStream() {
				x.release(st)
				return
			}
			x.sendBody(st, st.buffered, true, cbBufferedBody)
		}
	case bodyStreamed:
		if !x.openStream() {
			x.forwardData(st, data, eos)
			return
		}
		x.sendBody(st, data, eos, cbStreamedBody)
		st.queue = append(st.queue, chunk{data: data, eos: eos})
		st.queueBytes += len(data)
		if st.queueBytes > x.d.cfg.BufferLimit {
			st.watermark = true
		}
	case bodyNone:
		if st.held {
			x.buffer(st, data)
			return
		}
		x.forwardData(st, data, eos)
	default:
		x.unsupported(st)
	}
}

func (x *exchange) buffer(st *dirState, data []byte) {
	st.buffered = append(st.buffered, data...)
	st.hasBuffered = true
}

// bufferOverflow is the filter manager's requestDataTooLarge (413 through the
// filter chain) and responseDataTooLarge (500 straight to the codec).
func (x *exchange) bufferOverflow(st *dirState) {
	if st.response {
		x.d.logf("response body exceeds the %d byte buffer limit", x.d.cfg.BufferLimit)
		x.localReply(http.StatusInternalServerError, "Internal Server Error", nil, "response_payload_too_large")
		return
	}
	x.d.logf("request body exceeds the %d byte buffer limit", x.d.cfg.BufferLimit)
	x.localReply(http.StatusRequestEntityTooLarge, "Payload Too Large", nil, "request_payload_too_large")
}

// release is continueIfNecessary: held headers go to the next filter, then
// whatever body is held.
func (x *exchange) release(st *dirState) {
	if st.headers == nil {
		return
	}
	if st.held {
		st.held = false
		x.forwardHeaders(st)
	}
	if st.hasBuffered || (st.completeBody && !st.noBody) {
		data := st.buffered
		st.buffered, st.hasBuffered = nil, false
		x.forwardData(st, data, st.completeBody)
	}
	st.watermark = false
}

func (x *exchange) forwardHeaders(st *dirState) {
	endStream := st.noBody && len(st.buffered) == 0
	if endStream {
		st.eosForwarded = true
	}
	if st.response {
		x.writeDownstreamHeaders(st.headers, endStream)
		return
	}
	x.startUpstream(endStream)
}

func (x *exchange) forwardData(st *dirState, data []byte, eos bool) {
	if st.eosForwarded || (len(data) == 0 && !eos) {
		return
	}
	if eos {
		st.eosForwarded = true
	}
	if !st.response {
		if x.decoderAborted || x.upBody == nil {
			return
		}
		if len(data) > 0 {
			x.upBody.push(data)
		}
		if eos {
			x.upBody.close()
		}
		return
	}
	if x.done {
		return
	}
	if len(data) > 0 {
		n, err := x.w.Write(data)
		x.written += int64(n)
		if err != nil {
			x.resetStream("downstream write: " + err.Error())
			return
		}
		_ = x.rc.Flush()
	}
	if eos {
		if x.declaredLength >= 0 && x.written != x.declaredLength {
			x.resetStream(fmt.Sprintf("content-length %d but %d body bytes", x.declaredLength, x.written))
			return
		}
		x.done = true
	}
}

// --- the router ---

func (x *exchange) startUpstream(endStream bool) {
	if x.decoderAborted || x.upstreamStarted {
		return
	}
	x.upstreamStarted = true
	// Router::Filter::decodeHeaders takes the cached route, or chooses it
	// again after the cache was cleared.
	rt := x.currentRoute()
	switch {
	case rt == nil:
		x.localReply(http.StatusNotFound, "", nil, "route_not_found")
		return
	case rt.DirectResponse != nil:
		dr := rt.DirectResponse
		var mutate func(*headerMap)
		if dr.ContentType != "" {
			mutate = func(h *headerMap) { h.set("content-type", dr.ContentType) }
		}
		x.localReply(dr.Status, dr.Body, mutate, "direct_response")
		return
	}
	h := x.dec.headers
	for _, k := range rt.RequestHeadersToRemove {
		h.remove(strings.ToLower(k))
	}
	method, _ := h.first(":method")
	path, _ := h.first(":path")
	authority, _ := h.first(":authority")
	ctx, cancel := context.WithCancel(x.ctx)
	x.upCancel = cancel
	var body io.ReadCloser = http.NoBody
	length := int64(0)
	if !endStream {
		pr, pw := io.Pipe()
		body = pr
		x.upBody = newFIFO[[]byte]()
		go feedPipe(x.upBody, pw, ctx.Done())
		length = -1
		if n, ok := h.contentLength(); ok {
			length = n
		}
	}
	u := rt.Upstream
	req, err := http.NewRequestWithContext(ctx, method, u.Scheme+"://"+u.Host+path, body)
	if err != nil {
		x.d.st.upstreamFailures.Add(1)
		x.localReply(http.StatusServiceUnavailable, "upstream connect error or disconnect/reset before headers. reset reason: "+err.Error(), nil, "upstream_reset_before_response_started")
		return
	}
	req.ContentLength = length
	req.Host = authority
	h.toHTTP(req.Header, map[string]bool{"host": true, "content-length": true, "transfer-encoding": true})
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // Go would add its own
	}
	x.upStart = time.Now()
	x.d.st.upstreamRequests.Add(1)
	x.d.logf("router → %s %s", method, req.URL)
	go func() {
		resp, err := x.d.http.Do(req)
		select {
		case x.upRespCh <- upstreamResult{resp: resp, err: err}:
		case <-x.loopDone:
			if resp != nil {
				resp.Body.Close()
			}
		}
	}()
}

func feedPipe(q *fifo[[]byte], pw *io.PipeWriter, done <-chan struct{}) {
	for {
		b, ok := q.pop(done)
		if !ok {
			break
		}
		if _, err := pw.Write(b); err != nil {
			return
		}
	}
	select {
	case <-done:
		pw.CloseWithError(context.Canceled)
	default:
		pw.Close()
	}
}

func (x *exchange) onUpstreamResponse(up upstreamResult) {
	if x.decoderAborted || x.responseStarted {
		if up.resp != nil {
			up.resp.Body.Close()
		}
		return
	}
	if up.err != nil {
		x.d.st.upstreamFailures.Add(1)
		x.d.logf("router: %v", up.err)
		x.localReply(http.StatusServiceUnavailable,
			"upstream connect error or disconnect/reset before headers. reset reason: connection failure",
			nil, "upstream_reset_before_response_started")
		return
	}
	resp := up.resp
	h := &headerMap{}
	h.add(":status", strconv.Itoa(resp.StatusCode))
	h.fromHTTP(resp.Header)
	h.set("x-envoy-upstream-service-time", strconv.FormatInt(time.Since(x.upStart).Milliseconds(), 10))
	noBody := resp.Body == http.NoBody || resp.ContentLength == 0 || x.r.Method == http.MethodHead
	if noBody {
		resp.Body.Close()
	}
	x.beginResponse(h, noBody, func() {
		ch, done := make(chan bodyEvent), x.loopDone
		x.respBodyCh = ch // the exchange loop may clear the field; the reader keeps its channel
		go func() {
			defer resp.Body.Close()
			readBody(resp.Body, resp.ContentLength, ch, done, nil)
		}()
	})
}

// --- response path (encoding) ---

func (x *exchange) beginResponse(h *headerMap, noBody bool, startBody func()) {
	x.responseStarted = true
	st := &x.enc
	st.headers = h
	st.held = true
	st.noBody = noBody
	if noBody {
		st.completeBody = true
	}
	x.encodeOrDecodeHeaders(st)
	if !noBody && !x.done {
		startBody()
	}
}

func (x *exchange) writeDownstreamHeaders(h *headerMap, endStream bool) {
	x.downstreamStarted = true
	s, _ := h.first(":status")
	status, err := strconv.Atoi(s)
	if err != nil || status < 100 || status > 999 {
		status = http.StatusBadGateway
	}
	hdr := x.w.Header()
	clear(hdr)
	h.toHTTP(hdr, nil)
	hdr.Set("Server", "envoy") // server_header_transformation OVERWRITE
	if x.reqReaderDone != nil && !x.reqBodyRead.Load() {
		// A response to a request whose body has not ended: the
		// connection closes after it, as Envoy's HTTP/1 codec closes one
		// whose request is not complete when its response is.
		hdr.Set("Connection", "close")
	}
	if n, ok := h.contentLength(); ok {
		x.declaredLength = n
	}
	x.w.WriteHeader(status)
	if endStream {
		x.done = true
		return
	}
	_ = x.rc.Flush()
}

// localReply is FilterManager::sendLocalReply: before the response exists it
// goes through the encoder filters (so the ext_proc filter processes it unless
// processing is complete); once response headers exist but were not sent it
// goes straight to the codec; after they were sent the stream is reset.
func (x *exchange) localReply(code int, body string, mutate func(*headerMap), details string) {
	x.d.st.localReplies.Add(1)
	x.d.logf("local reply %d (%s)", code, details)
	x.decoderAborted = true
	if x.upCancel != nil {
		x.upCancel()
	}
	if x.downstreamStarted {
		x.resetStream(details)
		return
	}
	h := &headerMap{}
	h.add(":status", strconv.Itoa(code))
	if mutate != nil {
		mutate(h)
	}
	// Utility::prepareLocalReply.
	if body != "" {
		h.set("content-length", strconv.Itoa(len(body)))
		if !h.has("content-type") {
			h.set("content-type", "text/plain")
		}
	} else {
		h.remove("content-length")
		h.remove("content-type")
	}
	if x.responseStarted {
		x.enc.held, x.enc.hasBuffered, x.enc.queue = false, false, nil
		x.respBodyCh = nil
		x.writeDownstreamHeaders(h, body == "")
		if body != "" && !x.done {
			n, _ := io.WriteString(x.w, body)
			x.written += int64(n)
			x.done = true
		}
		return
	}
	x.enc = dirState{response: true, sendHeaders: x.enc.sendHeaders, sendTrailers: x.enc.sendTrailers,
		bodyMode: x.enc.bodyMode, timer: x.enc.timer, attributesSent: x.enc.attributesSent}
	x.beginResponse(h, body == "", func() {
		x.respBodyCh = make(chan bodyEvent, 1)
		x.respBodyCh <- bodyEvent{data: []byte(body), eos: true}
	})
}

func (x *exchange) resetStream(details string) {
	x.d.st.streamResets.Add(1)
	x.d.logf("resetting downstream stream: %s", details)
	x.reset = true
	x.done = true
}

// --- side stream events (Filter::onReceiveMessage, onGrpcError, onGrpcClose) ---

func (x *exchange) onStreamEvent(res recvResult) {
	if x.sideClosed {
		return
	}
	if res.err != nil {
		x.onStreamEnd(res.err)
		return
	}
	x.d.logf("ext_proc → %v", res.resp)
	x.onReceive(res.resp)
}

func (x *exchange) onStreamEnd(err error) {
	if errors.Is(err, io.EOF) {
		// OK status: Envoy treats the stream as done and continues unprocessed.
		if x.complete {
			return
		}
		x.d.st.streamsClosedByServer.Add(1)
		x.d.logf("ext_proc stream closed by the server with OK status")
		x.complete = true
		x.closeStreamNow()
		x.clearAsyncState()
		return
	}
	x.d.st.streamsFailed.Add(1)
	x.d.logf("ext_proc stream error: %v", err)
	if x.complete {
		return
	}
	x.complete = true
	x.closeStreamNow()
	if x.d.cfg.FailureModeAllow {
		x.d.st.failureModeAllowed.Add(1)
		x.clearAsyncState()
		return
	}
	x.finishCalls()
	x.localReply(http.StatusInternalServerError, "", nil, "ext_proc_error_gRPC_error")
}

func (x *exchange) onMessageTimeout() {
	x.d.st.timeouts.Add(1)
	x.d.logf("ext_proc message timeout")
	x.complete = true
	x.closeStreamNow()
	if x.d.cfg.FailureModeAllow {
		x.d.st.failureModeAllowed.Add(1)
		x.clearAsyncState()
		return
	}
	x.finishCalls()
	x.localReply(http.StatusGatewayTimeout, "", nil, "ext_proc_error_per-message_timeout_exceeded")
}

// clearAsyncState resets both directions to idle and lets everything held
// continue unprocessed.
func (x *exchange) clearAsyncState() {
	x.finishCalls()
	if !x.decoderAborted {
		x.flushQueue(&x.dec)
		x.release(&x.dec)
	}
	if !x.done {
		x.flushQueue(&x.enc)
		x.release(&x.enc)
	}
}

// flushQueue injects leftover streamed chunks unprocessed.
func (x *exchange) flushQueue(st *dirState) {
	if len(st.queue) == 0 {
		return
	}
	var all []byte
	eos := false
	for _, c := range st.queue {
		all = append(all, c.data...)
		eos = eos || c.eos
	}
	st.queue, st.queueBytes = nil, 0
	x.forwardData(st, all, eos)
}

func (x *exchange) closeStreamNow() {
	if x.side != nil && !x.sideClosed {
		x.sideClosed = true
		x.side.closeNow()
	}
}

func (x *exchange) closeStreamGracefully() {
	x.complete = true
	if x.side != nil && !x.sideClosed {
		x.sideClosed = true
		x.side.closeGracefully()
	}
}

func (x *exchange) onReceive(resp *extprocv3.ProcessingResponse) {
	if x.complete {
		return
	}
	if t := resp.GetOverrideMessageTimeout(); t != nil {
		x.onNewTimeout(t)
		return
	}
	if mo := resp.GetModeOverride(); mo != nil {
		x.applyModeOverride(mo)
	}
	var (
		err    error
		isLast bool
	)
	// Counters are updated before the answer takes effect, so a test that
	// has seen the effect also sees the count.
	count := func(ph phase, ok bool) {
		if ok {
			x.d.st.received[ph].Add(1)
		}
	}
	switch r := resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		count(phaseRequestHeaders, x.dec.cb == cbHeaders)
		err = x.handleHeadersResponse(&x.dec, r.RequestHeaders.GetResponse())
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		count(phaseResponseHeaders, x.enc.cb == cbHeaders)
		err = x.handleHeadersResponse(&x.enc, r.ResponseHeaders.GetResponse())
	case *extprocv3.ProcessingResponse_RequestBody:
		isLast = x.isLastBodyResponse(&x.dec)
		count(phaseRequestBody, expectsBody(&x.dec, r.RequestBody.GetResponse()))
		err = x.handleBodyResponse(&x.dec, r.RequestBody.GetResponse())
	case *extprocv3.ProcessingResponse_ResponseBody:
		isLast = x.isLastBodyResponse(&x.enc)
		count(phaseResponseBody, expectsBody(&x.enc, r.ResponseBody.GetResponse()))
		err = x.handleBodyResponse(&x.enc, r.ResponseBody.GetResponse())
	case *extprocv3.ProcessingResponse_ImmediateResponse:
		x.d.st.immediate.Add(1)
		x.finishCalls()
		x.closeStreamGracefully()
		x.sendImmediateResponse(r.ImmediateResponse)
		return
	default:
		// Trailer responses (the driver never sends trailers), streamed
		// immediate responses and responses with no case set.
		err = errSpurious
	}
	switch {
	case err == nil:
	case errors.Is(err, errSpurious):
		x.d.st.spurious.Add(1)
		x.d.logf("spurious ext_proc response: %v", err)
		x.complete = true
		x.closeStreamNow()
		if x.d.cfg.FailureModeAllow {
			x.d.st.failureModeAllowed.Add(1)
			x.clearAsyncState()
			return
		}
		x.finishCalls()
		x.localReply(http.StatusInternalServerError, "", nil, err.Error())
		return
	default:
		x.d.st.processingErrors.Add(1)
		if errors.Is(err, errBodyLength) {
			x.d.st.rejectedBodyMutations.Add(1)
		}
		x.d.logf("ext_proc response rejected: %v", err)
		x.complete = true
		x.finishCalls()
		x.closeStreamNow()
		x.localReply(http.StatusInternalServerError, "", nil, err.Error())
		return
	}
	x.closeIfLastResponse(resp, isLast)
}

// closeIfLastResponse is Filter::closeGrpcStreamIfLastRespReceived
// (ext_proc_stream_close_optimization, on by default).
func (x *exchange) closeIfLastResponse(resp *extprocv3.ProcessingResponse, isLastBody bool) {
	if x.side == nil || x.sideClosed || x.complete {
		return
	}
	last := false
	switch resp.GetResponse().(type) {
	case *extprocv3.ProcessingResponse_RequestHeaders:
		last = (x.dec.noBody || (x.dec.bodyMode == bodyNone && !x.dec.sendTrailers)) && x.enc.noExternalProcess()
	case *extprocv3.ProcessingResponse_RequestBody:
		last = isLastBody && x.enc.noExternalProcess()
	case *extprocv3.ProcessingResponse_ResponseHeaders:
		last = x.enc.noBody || (x.enc.bodyMode == bodyNone && !x.enc.sendTrailers)
	case *extprocv3.ProcessingResponse_ResponseBody:
		last = isLastBody
	}
	if last {
		x.d.logf("closing ext_proc stream after the last response")
		x.closeStreamGracefully()
	}
}

// expectsBody reports whether a body answer is not spurious.
func expectsBody(st *dirState, cr *extprocv3.CommonResponse) bool {
	switch st.cb {
	case cbBufferedBody:
		return true
	case cbStreamedBody:
		return cr.GetBodyMutation().GetStreamedResponse() == nil
	}
	return false
}

func (x *exchange) isLastBodyResponse(st *dirState) bool {
	return st.bodyMode == bodyStreamed && len(st.queue) > 0 && st.queue[0].eos
}

func (x *exchange) onNewTimeout(t *durationpb.Duration) {
	ignore := func(why string) {
		x.d.st.overrideIgnored.Add(1)
		x.d.logf("override_message_timeout ignored: %s", why)
	}
	if err := t.CheckValid(); err != nil {
		ignore(err.Error())
		return
	}
	ms := t.AsDuration().Milliseconds()
	if ms < 1 || ms > x.d.cfg.MaxMessageTimeout.Milliseconds() {
		ignore("outside [1ms, max_message_timeout]")
		return
	}
	d := time.Duration(ms) * time.Millisecond
	r1 := restartTimer(&x.dec, d)
	r2 := restartTimer(&x.enc, d)
	if !r1 && !r2 {
		ignore("no message outstanding, or already extended once")
		return
	}
	x.d.st.overrideReceived.Add(1)
}

// restartTimer is ProcessorState::restartMessageTimer: at most once per call.
func restartTimer(st *dirState, d time.Duration) bool {
	if st.timerC == nil || st.newTimeoutReceived {
		return false
	}
	st.startTimer(d)
	st.newTimeoutReceived = true
	return true
}

func (x *exchange) applyModeOverride(mo *extprocfilterv3.ProcessingMode) {
	if !x.d.cfg.AllowModeOverride || (x.dec.cb != cbHeaders && x.enc.cb != cbHeaders) {
		x.d.st.modeOverridesIgnored.Add(1)
		return
	}
	// effectiveModeOverride: DEFAULT header/trailer modes keep the filter's
	// configured mode; body modes are always taken as given.
	m := proto.Clone(x.d.mode).(*extprocfilterv3.ProcessingMode)
	if mo.GetRequestHeaderMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		m.RequestHeaderMode = mo.GetRequestHeaderMode()
	}
	if mo.GetResponseHeaderMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		m.ResponseHeaderMode = mo.GetResponseHeaderMode()
	}
	if mo.GetRequestTrailerMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		m.RequestTrailerMode = mo.GetRequestTrailerMode()
	}
	if mo.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_DEFAULT {
		m.ResponseTrailerMode = mo.GetResponseTrailerMode()
	}
	m.RequestBodyMode = mo.GetRequestBodyMode()
	m.ResponseBodyMode = mo.GetResponseBodyMode()
	if allowed := x.d.cfg.AllowedOverrideModes; len(allowed) > 0 {
		ok := false
		for _, a := range allowed {
			if m.GetRequestBodyMode() == a.GetRequestBodyMode() && m.GetRequestTrailerMode() == a.GetRequestTrailerMode() &&
				m.GetResponseHeaderMode() == a.GetResponseHeaderMode() && m.GetResponseBodyMode() == a.GetResponseBodyMode() &&
				m.GetResponseTrailerMode() == a.GetResponseTrailerMode() {
				ok = true
				break
			}
		}
		if !ok {
			x.d.st.modeOverridesIgnored.Add(1)
			return
		}
	}
	x.d.st.modeOverrides.Add(1)
	x.d.logf("processing mode overridden: %v", m)
	x.dec.setMode(m)
	x.enc.setMode(m)
}

// handleHeadersResponse is ProcessorState::handleHeadersResponse.
func (x *exchange) handleHeadersResponse(st *dirState, cr *extprocv3.CommonResponse) error {
	if st.cb != cbHeaders {
		return fmt.Errorf("%w: %s response while not waiting for headers", errSpurious, st.headersPhase())
	}
	replace := cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE
	if hm := cr.GetHeaderMutation(); hm != nil {
		ignored, err := applyHeaderMutation(hm, st.headers, replace, st.shouldRemoveContentLength())
		x.d.st.rejectedHeaderMutations.Add(int64(ignored))
		if err != nil {
			return err
		}
	}
	x.clearRouteCache(st, cr)
	x.finishCall(st, cbIdle)
	switch {
	case replace:
		if bm := cr.GetBodyMutation(); bm != nil {
			st.headers.remove("content-length")
			st.bodyReplaced = true
			st.buffered = applyBodyMutation(bm, st.buffered)
			st.hasBuffered = true
		}
		st.queue, st.queueBytes = nil, 0
		st.bodyMode = bodyNone
		st.sendTrailers = false
	case st.noBody:
	case st.completeBody && st.bodyMode != bodyNone:
		if st.hasBuffered {
			// The whole body arrived during header processing: it goes in
			// one message, handled as buffered whatever the mode.
			st.watermark = false
			x.sendBody(st, st.buffered, true, cbBufferedBody)
			return nil
		}
	case st.bodyMode == bodyBuffered:
		st.watermark = false
		return nil
	case st.bodyMode == bodyStreamed:
		if len(st.buffered) > 0 {
			data := st.buffered
			st.buffered, st.hasBuffered = nil, false
			x.sendBody(st, data, false, cbStreamedBody)
			st.queue = append(st.queue, chunk{data: data})
			st.queueBytes += len(data)
		}
		st.buffered, st.hasBuffered = nil, false
		x.release(st)
		st.watermark = st.queueBytes > x.d.cfg.BufferLimit
		return nil
	case st.bodyMode != bodyNone:
		x.unsupported(st)
		return nil
	}
	st.processorHeaders = false
	x.release(st)
	return nil
}

// handleBodyResponse is ProcessorState::handleBodyResponse.
func (x *exchange) handleBodyResponse(st *dirState, cr *extprocv3.CommonResponse) error {
	shouldContinue := false
	switch st.cb {
	case cbBufferedBody:
		if hm := cr.GetHeaderMutation(); hm != nil {
			if st.processorHeaders {
				ignored, err := applyHeaderMutation(hm, st.headers,
					cr.GetStatus() == extprocv3.CommonResponse_CONTINUE_AND_REPLACE, st.shouldRemoveContentLength())
				x.d.st.rejectedHeaderMutations.Add(int64(ignored))
				if err != nil {
					return err
				}
			} else {
				x.d.logf("body response has header mutations but the headers are gone; ignored")
			}
		}
		if bm := cr.GetBodyMutation(); bm != nil {
			if st.processorHeaders {
				if cl, ok := st.headers.contentLength(); ok && cl != int64(len(bm.GetBody())) {
					return fmt.Errorf("%w: content-length %d, mutated body %d bytes", errBodyLength, cl, len(bm.GetBody()))
				}
			}
			st.buffered = applyBodyMutation(bm, st.buffered)
		}
		x.finishCall(st, cbIdle)
		shouldContinue = true
	case cbStreamedBody:
		bm := cr.GetBodyMutation()
		if bm.GetStreamedResponse() != nil {
			return fmt.Errorf("%w: streamed_response while the body mode is not FULL_DUPLEX_STREAMED", errSpurious)
		}
		c := st.queue[0]
		st.queue = st.queue[1:]
		st.queueBytes -= len(c.data)
		data := c.data
		if bm != nil {
			data = applyBodyMutation(bm, data)
		}
		shouldContinue = c.eos
		if len(data) > 0 {
			x.forwardData(st, data, c.eos)
		}
		if st.queueBytes < x.d.cfg.BufferLimit/2 {
			st.watermark = false
		}
		if len(st.queue) == 0 {
			x.finishCall(st, cbIdle)
		} else {
			// Envoy stops the timer here too: the queued chunks wait untimed
			// until the next chunk is sent.
			x.finishCall(st, cbStreamedBody)
		}
	default:
		return fmt.Errorf("%w: %s response while not waiting for a body", errSpurious, st.bodyPhase())
	}
	x.clearRouteCache(st, cr)
	st.processorHeaders = false
	if shouldContinue {
		x.release(st)
	}
	return nil
}

func applyBodyMutation(m *extprocv3.BodyMutation, data []byte) []byte {
	switch mm := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_ClearBody:
		if mm.ClearBody {
			return nil
		}
	case *extprocv3.BodyMutation_Body:
		return append([]byte(nil), mm.Body...)
	}
	return data
}

// sendImmediateResponse is Filter::sendImmediateResponse.
func (x *exchange) sendImmediateResponse(ir *extprocv3.ImmediateResponse) {
	code := int(ir.GetStatus().GetCode())
	if code < 200 {
		code = 200 // MutationUtils::isValidHttpStatus
	}
	mutate := func(h *headerMap) {
		if ir.GetHeaders() == nil {
			return
		}
		ignored, err := applyHeaderMutation(ir.GetHeaders(), h, false, false)
		x.d.st.rejectedHeaderMutations.Add(int64(ignored))
		if err != nil {
			x.d.logf("immediate response header mutations failed: %v", err)
		}
	}
	x.localReply(code, string(ir.GetBody()), mutate, ir.GetDetails())
}

func (x *exchange) unsupported(st *dirState) {
	x.d.st.unsupported.Add(1)
	x.d.logf("body mode %v (%s) is not modelled by this driver", st.bodyMode, st.bodyPhase())
	x.complete = true
	x.finishCalls()
	x.closeStreamNow()
	x.localReply(http.StatusInternalServerError, "", nil, "envoydriver_unsupported_body_mode")
}

// readBody reads src into chunks. With a known length the chunk that
// completes it carries end of stream; otherwise an empty end-of-stream chunk
// follows the last data, as Envoy's HTTP/1 codec delivers a chunked body.
// ended (if not nil) is set once a read has ended the body, before the
// last event is handed on.
func readBody(src io.Reader, length int64, ch chan<- bodyEvent, done <-chan struct{}, ended *atomic.Bool) {
	end := func() {
		if ended != nil {
			ended.Store(true)
		}
	}
	send := func(ev bodyEvent) bool {
		select {
		case ch <- ev:
			return true
		case <-done:
			return false
		}
	}
	remaining := length
	buf := make([]byte, readChunkSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			eos := err == io.EOF
			if remaining >= 0 {
				remaining -= int64(n)
				eos = eos || remaining <= 0
			}
			if eos {
				end()
			}
			if !send(bodyEvent{data: append([]byte(nil), buf[:n]...), eos: eos}) || eos {
				return
			}
		}
		switch {
		case err == io.EOF:
			end()
			send(bodyEvent{eos: true})
			return
		case err != nil:
			end()
			send(bodyEvent{err: err})
			return
		}
	}
}

// newRequestID returns a random UUID v4, as Envoy's request ID extension.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
