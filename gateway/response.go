package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"mime"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/mcp/sse"
	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/policy"
)

// ResponseMode tells the adapter how to relay an upstream response.
type ResponseMode int

const (
	// PassThrough relays the body untouched; the pipeline need not see it.
	PassThrough ResponseMode = iota
	// BufferJSON: read the whole application/json body and call ResponseBody.
	BufferJSON
	// StreamSSE: relay text/event-stream through an EventRewriter, event by
	// event, flushing each, never buffering the stream.
	StreamSSE
)

// listKinds maps each list method to the member of its result that holds
// the list.
var listKinds = map[string]string{
	"tools/list":               "tools",
	"prompts/list":             "prompts",
	"resources/list":           "resources",
	"resources/templates/list": "resourceTemplates",
}

// ErrUpstreamResponse is returned when an upstream response the pipeline must
// inspect cannot be (compressed with an unknown coding, not JSON, not the
// answer to the request). End(err) answers 502 in its place; nothing
// unchecked reaches the client.
var ErrUpstreamResponse = errors.New("upstream response cannot be inspected")

// answerError is an upstream answer withheld for a reason the client is
// told: message is the JSON-RPC error message answerFailure sends.
type answerError struct {
	message string
	err     error // the detail, for the log
}

func (e *answerError) Error() string           { return e.message + " (" + e.err.Error() + ")" }
func (e *answerError) Unwrap() []error         { return []error{ErrUpstreamResponse, e.err} }
func withheld(message string, err error) error { return &answerError{message: message, err: err} }

// Why answers are withheld.
var (
	errEmptyAnswer = errors.New("empty body answering a request")
	errForeignID   = errors.New("the answer's id is not the request's")
	errRedirect    = errors.New("redirect from an upstream with a credential")
	errSwitched    = errors.New("the upstream switched protocols")
)

// Messages of the errors that replace withheld answers.
const (
	emptyAnswer     = "The upstream MCP server answered the request with an empty body; the call may or may not have taken effect."
	foreignAnswer   = "The upstream MCP server answered with another request's id; the answer was withheld."
	redirectAnswer  = "The upstream answered with a redirect; mcpgate does not follow or relay redirects of an upstream it sends a credential to."
	switchedAnswer  = "The upstream answered 101 Switching Protocols, which Streamable HTTP never asks for; the answer was withheld."
	compressedEvent = "The upstream MCP server compressed its event stream (Content-Encoding %s); mcpgate relays event streams uncompressed only, and the answer was withheld."
	unknownCoding   = "The upstream MCP server compressed its answer with Content-Encoding %s, which mcpgate cannot decode (it decodes gzip and deflate); the answer was withheld."
	corruptCoding   = "The upstream MCP server's answer is not valid %s data; the answer was withheld."
	bombCoding      = "The upstream MCP server's answer decodes (Content-Encoding %s) to more than %d bytes (limits.max_body_bytes); the answer was withheld."
	cutEvent        = "The upstream MCP server's stream ended in the middle of an event; the incomplete event was discarded and the call may or may not have taken effect."
)

// uncheckable is the message of the error that replaces an upstream answer
// the pipeline could not inspect.
const uncheckable = "The upstream MCP server answered with something mcpgate cannot check; the answer was withheld."

// answersRequest reports whether the upstream's answer must carry the
// answer to a JSON-RPC request.
func (x *Exchange) answersRequest() bool {
	return x.msg != nil && x.msg.Kind == mcp.KindRequest
}

// mediaType is the media type of a Content-Type value, lower case.
func mediaType(ct string) string {
	switch {
	case plainMediaType(ct, "application/json"):
		return "application/json"
	case plainMediaType(ct, "text/event-stream"):
		return "text/event-stream"
	}
	mt, _, _ := mime.ParseMediaType(ct)
	return mt
}

// ResponseHeaders decides how the upstream's response is relayed. Only
// results the policy shapes are inspected; everything else passes through,
// but for a JSON answer in a content coding (decoded, BufferJSON), and
// answers that cannot be relayed as they are (an empty success answering
// a request, a compressed event stream, a coding mcpgate cannot decode).
// An adapter that knows the body is empty (no body follows the headers)
// passes content-length 0. With kill switches configured, an event stream
// that would pass through is relayed event by event (KillableStream).
func (x *Exchange) ResponseHeaders(status int, h mcp.Header) (ResponseMode, error) {
	mode, err := x.responseHeaders(status, h)
	if err != nil {
		return mode, err
	}
	return x.KillableStream(mode, h), nil
}

func (x *Exchange) responseHeaders(status int, h mcp.Header) (ResponseMode, error) {
	x.upstreamAnswered(status) // tracing.go
	if status == 101 {
		// Switching Protocols: no Upgrade field is forwarded, whatever
		// the upstream switched to is not MCP, and its connection is not
		// relayed.
		return PassThrough, withheld(switchedAnswer, errSwitched)
	}
	if status/100 == 2 && status != 202 && x.answersRequest() && h.Get("content-length") == "0" {
		// Streamable HTTP: a request is answered with application/json
		// or text/event-stream; 202 without a body answers only
		// notifications and responses.
		return PassThrough, withheld(emptyAnswer, errEmptyAnswer)
	}
	if x.msg != nil && x.msg.Method == "initialize" && status/100 == 2 {
		if err := x.bindSession(h); err != nil {
			return PassThrough, err
		}
	}
	x.unbindSession(status)
	if status == 404 && x.memberSession != "" {
		// The member lost its session: the next use opens a new one.
		x.p.opts.MemberSessions.Reset(x.req.Header.Get(SessionHeader), x.member, x.memberSession)
	}
	if status/100 == 4 {
		x.release() // the upstream refused the request: nothing ran
	}
	if err := x.refusedCredential(status); err != nil { // credentials.go
		return PassThrough, err
	}
	if x.cred != nil && status/100 == 3 && status != 304 {
		// Streamable HTTP has no redirects, and the Location of an
		// upstream that gets a credential is not the client's to follow.
		return PassThrough, withheld(redirectAnswer, errRedirect)
	}
	if err := x.refusedAssertion(status); err != nil {
		return PassThrough, err
	}
	x.codings = nil
	if enc := h["content-encoding"]; len(enc) > 0 {
		if codings := contentCodings(enc); len(codings) > 0 {
			if mode, err, ok := x.encodedAnswer(h, codings); ok {
				return mode, err
			}
		}
	}
	if x.listKind == "" && !x.shapeResult && !x.shapeMessages {
		// A notification stream (an older revision's GET stream,
		// subscriptions/listen) is read, never changed, for the
		// upstream's notifications/tools/list_changed; a tool call's
		// stream for its progress and log notifications. A JSON answer
		// that needs no shaping passes untouched.
		if (x.watchTools || x.shapeNotes || x.task.watch) && strings.HasPrefix(strings.ToLower(h.Get("content-type")), "text/event-stream") &&
			(h.Get("content-encoding") == "" || strings.EqualFold(h.Get("content-encoding"), "identity")) {
			return StreamSSE, nil
		}
		return PassThrough, nil
	}
	// Whatever the status, a body a client would decode as JSON-RPC is
	// inspected: an upstream must not get an unfiltered list through by
	// answering 500 or 201.
	if len(contentCodings(h["content-encoding"])) > 0 {
		return PassThrough, ErrUpstreamResponse
	}
	switch mediaType(h.Get("content-type")) {
	case "application/json":
		return BufferJSON, nil
	case "text/event-stream":
		return StreamSSE, nil
	}
	if status == 200 {
		return PassThrough, ErrUpstreamResponse
	}
	return PassThrough, nil // an error page no MCP client parses as a result
}

// encodedAnswer decides on an answer in content codings (RFC 9110 §8.4),
// although every forwarded request asks for identity: a JSON answer is
// buffered, decoded and then inspected like any other (ResponseBody), and
// relayed uncompressed; an event stream, which is never buffered, is
// refused, as is a coding mcpgate cannot decode. ok is false for other
// media types (an error page), which go on as before.
func (x *Exchange) encodedAnswer(h mcp.Header, codings []string) (mode ResponseMode, err error, ok bool) {
	named := strings.Join(codings, ", ")
	switch mediaType(h.Get("content-type")) {
	case "application/json":
		for _, c := range codings {
			if !supportedCoding(c) {
				return PassThrough, withheld(fmt.Sprintf(unknownCoding, quote(c)), &codingError{Coding: c, Err: errUnsupportedCoding}), true
			}
		}
		x.codings = codings
		return BufferJSON, nil, true
	case "text/event-stream":
		return PassThrough, withheld(fmt.Sprintf(compressedEvent, quote(named)), errors.New("compressed event stream")), true
	}
	return PassThrough, nil, false
}

// decodeAnswer undoes the answer's content codings within
// limits.max_body_bytes; the error names the coding.
func (x *Exchange) decodeAnswer(body []byte) ([]byte, error) {
	out, err := decodeContent(x.codings, body, x.p.opts.MaxBodyBytes)
	if err == nil {
		return out, nil
	}
	var ce *codingError
	errors.As(err, &ce)
	switch {
	case errors.Is(err, errTooLarge):
		return nil, withheld(fmt.Sprintf(bombCoding, quote(ce.Coding), x.p.opts.MaxBodyBytes), err)
	case errors.Is(err, errUnsupportedCoding):
		return nil, withheld(fmt.Sprintf(unknownCoding, quote(ce.Coding)), err)
	}
	return nil, withheld(fmt.Sprintf(corruptCoding, quote(ce.Coding)), err)
}

// ResponseBody decodes (ResponseHeaders chose BufferJSON for its codings)
// and shapes a buffered application/json response. It returns the body to
// relay and whether it differs from body: then the adapter sets a new
// content-length and removes content-encoding (what is relayed is always
// uncompressed).
func (x *Exchange) ResponseBody(ctx context.Context, body []byte) ([]byte, bool, error) {
	decoded := false
	if len(x.codings) > 0 {
		out, err := x.decodeAnswer(body)
		if err != nil {
			return nil, false, err
		}
		body, decoded = out, true
	}
	if x.answersRequest() && mcp.Blank(body) {
		return nil, false, withheld(emptyAnswer, errEmptyAnswer)
	}
	out, err := x.shape(ctx, body, nil)
	if err != nil {
		return nil, false, err
	}
	if out == nil {
		return body, decoded, nil
	}
	return out, true, nil
}

// parsedBody is body's mcp.Parse result, when the caller already has it.
type parsedBody struct {
	msg  *mcp.Message
	perr *mcp.Error
}

// parse is mcp.Parse of body, or pre's result when pre is set (the same
// body, parsed once by the caller: Parse is a function of the body and
// the depth limit alone). The message is x.answerMsg, rewritten by the next
// parse: shape, its only caller, keeps none past its own call.
func (x *Exchange) parse(body []byte, pre *parsedBody) (*mcp.Message, *mcp.Error) {
	x.early = earlyResult{}
	if pre != nil {
		return pre.msg, pre.perr
	}
	if x.shaper != nil && x.shapeResult && !x.task.inspect && x.answersRequest() && x.msg.Method == mcp.MethodToolsCall {
		// The result is shaped as it is parsed (one pass over it); the
		// parse's outcome is ParseInto's all the same.
		return mcp.ParseResultInto(&x.answerMsg, body, x.p.opts.MaxJSONDepth, (*earlyReader)(x))
	}
	return mcp.ParseInto(&x.answerMsg, body, x.p.opts.MaxJSONDepth)
}

// earlyResult is a tools/call result shaped by the exchange's shaper while
// the answer was parsed (mcp.ParseResultInto): shapeToolResult takes it
// for that result instead of shaping it again. Only a shaping that
// succeeded is kept: after a failure ParseResultInto parses the answer
// again, and shapeToolResult shapes the result again, as when parsing and
// shaping were two passes (with their errors).
type earlyResult struct {
	out     []byte // the shaped result, with room for the frame; nil: unchanged
	at      *byte  // the result read: its first byte in the body; nil: none
	n       uint32 // and its length
	isError bool
	task    bool // the result has a top-level member "task"
}

// earlyReader is the exchange as the mcp.ResultReader of its answer.
type earlyReader Exchange

// ReadResult shapes the result dec is about to read.
func (r *earlyReader) ReadResult(dec *jsontext.Decoder, body []byte) error {
	x := (*Exchange)(r)
	var buf [64]byte
	reserve := len(mcp.AppendResultHead(buf[:0], x.msg.ID)) + len(mcp.ResultTail)
	read, err := x.shaper.AppendToolResultFrom(nil, dec, body, reserve)
	if err != nil {
		return err
	}
	if uint64(len(read.Result)) <= math.MaxUint32 {
		x.early = earlyResult{out: read.Out, at: &read.Result[0], n: uint32(len(read.Result)), isError: read.IsError, task: read.Task}
	}
	return nil
}

// earlyFor reports whether x.early is the shaping of result.
func (x *Exchange) earlyFor(result []byte) bool {
	e := &x.early
	return e.at != nil && uint64(len(result)) == uint64(e.n) && &result[0] == e.at
}

// takeEarly returns the early shaping of result, if there is one.
func (x *Exchange) takeEarly(result []byte) (earlyResult, bool) {
	ok := x.earlyFor(result)
	e := x.early
	x.early = earlyResult{}
	return e, ok
}

// mayHoldTask reports whether a tools/call result may be a task handle
// (a top-level member "task", its name compared after unescaping): as the
// early shaping read its names, else by a look for the name, or for an
// escape that may spell it.
func (x *Exchange) mayHoldTask(result []byte) bool {
	if x.earlyFor(result) {
		return x.early.task
	}
	return bytes.Contains(result, []byte(`"task"`)) || bytes.Contains(result, []byte(`\u`))
}

// shape returns the rewritten message, nil when nothing changes, or an error
// when body is not the JSON-RPC answer to this request. pre, when set, is
// body already parsed.
func (x *Exchange) shape(ctx context.Context, body []byte, pre *parsedBody) ([]byte, error) {
	if x.listKind == "" && !x.shapeResult && !x.shapeNotes && !x.shapeMessages {
		// A watched notification stream: read for tools/list_changed,
		// relayed as it is, never withheld (nothing in it is shaped but a
		// task status notification's message).
		if out := x.watchedTaskStatus(body); out != nil {
			return out, nil
		}
		if x.p.opts.OnToolsChanged != nil && bytes.Contains(body, []byte("notifications/tools/list_changed")) {
			if msg, perr := x.parse(body, pre); perr == nil && msg.Kind == mcp.KindNotification && msg.Method == "notifications/tools/list_changed" {
				x.p.opts.OnToolsChanged(x.req.Upstream)
			}
		}
		return nil, nil
	}
	msg, perr := x.parse(body, pre)
	if perr != nil && x.msg == nil {
		return nil, nil // a GET stream answers no request: never withheld
	}
	if perr != nil {
		return nil, errors.Join(ErrUpstreamResponse, perr)
	}
	if msg.Kind == mcp.KindNotification && msg.Method == "notifications/tools/list_changed" && x.p.opts.OnToolsChanged != nil {
		x.p.opts.OnToolsChanged(x.req.Upstream)
	}
	if msg.Kind == mcp.KindNotification && msg.Method == mcp.NotificationTasksStatus {
		return shapeTaskStatus(body, msg)
	}
	if msg.Kind == mcp.KindResponse && x.answersRequest() && !sameID(msg, x.msg.ID) {
		// Another request's answer (an upstream mixing up its
		// exchanges): shaped by this request's rules it could pass
		// another principal's data; nothing of it is relayed.
		return nil, withheld(foreignAnswer, errForeignID)
	}
	switch {
	case msg.Kind == mcp.KindNotification && (x.shapeResult || x.shapeNotes || x.shapeMessages):
		return x.shapeNotification(body, msg)
	case msg.Kind == mcp.KindNotification:
		return nil, nil
	case msg.Kind == mcp.KindRequest:
		return x.shapeServerRequest(body, msg)
	case msg.Result == nil:
		x.settle(nil) // a JSON-RPC error answers a write: not executed
		return x.shapeError(body, msg)
	}
	if !x.shapeResult && x.listKind == "" {
		return nil, nil // the result itself needs nothing
	}
	// The result answers this request (sameID: an id rewritten as
	// upstreams do, 1.0 → 1 or a big integer rounded, still matches).
	// The id is relayed as the upstream wrote it.
	if x.shapeNotes && !x.shapeResult {
		return nil, nil // the result itself needs nothing
	}
	if x.shapeResult {
		x.frame.id = msg.ID
		result, err := x.shapeAnswer(msg.Result)
		framed := x.frame.response(result)
		x.frame.id, x.frame.resp = nil, nil
		if err != nil || result == nil {
			return nil, err
		}
		if framed != nil {
			return framed, nil
		}
		return mcp.ResultResponse(msg.ID, result), nil
	}
	result, err := x.filterList(ctx, msg.Result)
	if err != nil || result == nil {
		return nil, err
	}
	return mcp.ResultResponse(msg.ID, result), nil
}

// answerFrame lets the shaper write a tools/call result straight into
// the JSON-RPC response that relays it (mcp.ResultResponse's bytes, one
// buffer instead of a shaped copy and then the response): shape sets id
// to the answer's id, shapeToolResult writes the whole response into resp
// and hands on its result part, and shape relays resp when the result it
// is left with is still that part (no later step replaced it).
type answerFrame struct {
	id   jsontext.Value // the answer's id; nil: no frame
	resp []byte         // the response written, nil while none
}

// shapeToolResult is s.ToolResultError of result, written into a
// response for f.id when f has one: the result part of it is returned.
// early, when set, is that shaping already done.
func (f *answerFrame) shapeToolResult(s *shape.Shaper, result []byte, early *earlyResult) ([]byte, bool, error) {
	if f.id == nil {
		if early != nil {
			return early.out, early.isError, nil
		}
		return s.ToolResultError(result)
	}
	var buf [64]byte
	head := mcp.AppendResultHead(buf[:0], f.id)
	// The shaped result with room for the head and the tail; then it
	// moves up behind the head.
	var out []byte
	var isError bool
	var err error
	if early != nil {
		out, isError = early.out, early.isError
	} else {
		out, isError, err = s.AppendToolResultError(nil, result, len(head)+len(mcp.ResultTail))
	}
	if err != nil || out == nil {
		return nil, isError, err
	}
	n := len(out)
	if cap(out) < len(head)+n+len(mcp.ResultTail) {
		// Shaped early for an id written differently (1.0 for 1).
		out = slices.Grow(out, len(head)+len(mcp.ResultTail))
	}
	out = out[:len(head)+n]
	copy(out[len(head):], out[:n])
	copy(out, head)
	f.resp = append(out, mcp.ResultTail...)
	return out[len(head):len(out):len(out)], isError, nil
}

// response is the response written for result, nil when result is not
// the result part of it.
func (f *answerFrame) response(result []byte) []byte {
	at := len(f.resp) - len(mcp.ResultTail) - len(result)
	if len(result) == 0 || at <= 0 || &result[0] != &f.resp[at] {
		return nil
	}
	return f.resp
}

// sameID reports whether the id of answer (a response) is req, the
// request's: the same JSON value, numbers compared as IEEE 754 doubles
// (upstreams rewrite 1.0 as 1 and round integers beyond 2^53 in their
// answers), or null in a JSON-RPC error (JSON-RPC 2.0 §5: the upstream
// could not read the request's id).
func sameID(answer *mcp.Message, req jsontext.Value) bool {
	id := answer.ID
	if bytes.Equal(id, req) {
		return true
	}
	if len(id) == 0 || len(req) == 0 {
		return false
	}
	switch {
	case string(id) == "null":
		return answer.Result == nil
	case id[0] == '"' && req[0] == '"':
		a, err1 := jsontext.AppendUnquote(nil, id)
		b, err2 := jsontext.AppendUnquote(nil, req)
		return err1 == nil && err2 == nil && bytes.Equal(a, b)
	case isNumber(id[0]) && isNumber(req[0]):
		a, err1 := strconv.ParseFloat(string(id), 64)
		b, err2 := strconv.ParseFloat(string(req), 64)
		return err1 == nil && err2 == nil && a == b
	}
	return false
}

func isNumber(c byte) bool { return c == '-' || '0' <= c && c <= '9' }

// requestID is the id of the exchange's request, null for a stream that
// answers none (an older revision's GET stream).
func (x *Exchange) requestID() []byte {
	if x.msg == nil {
		return jsonNull
	}
	return idOrNull(x.msg.ID)
}

// shapeAnswer shapes the result of the exchange's request by its method.
func (x *Exchange) shapeAnswer(result jsontext.Value) ([]byte, error) {
	out, err := x.shapeOwnAnswer(result)
	if err != nil || x.member == "" {
		return out, err
	}
	// A federated route: the member's resource URIs as clients see them.
	in := out
	if in == nil {
		in = result
	}
	exposed, err := x.exposeResultURIs(in)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	if exposed != nil {
		return exposed, nil
	}
	return out, nil
}

// shapeOwnAnswer is shapeAnswer's work on the upstream's own result.
func (x *Exchange) shapeOwnAnswer(result jsontext.Value) ([]byte, error) {
	if x.task.inspect || x.msg.Method == "tools/call" && x.mayHoldTask(result) {
		if out, done, err := x.taskAnswer(result); done {
			return out, err
		}
	}
	var out []byte
	var err error
	switch x.msg.Method {
	case "tools/call":
		out, isError, err := x.shapeToolResult(result)
		if err == nil {
			relayed := out
			if out == nil {
				relayed = result
			}
			x.settleKnown(relayed, isError)
		}
		return out, err
	case "resources/read":
		if x.p.opts.Catalog != nil {
			out, err = x.p.textShaper.ResourceContents(result)
		}
	case "prompts/get":
		if x.p.opts.Catalog != nil {
			out, err = shape.PromptResult(result, 0)
		}
	case "completion/complete":
		out, err = shape.CompletionResult(result, 0)
	}
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	if x.checksResultURIs() && x.msg.Method != "completion/complete" {
		in := out
		if in == nil {
			in = result
		}
		if dropped, err := x.shapeForeignResources(in, nil); err != nil || dropped != nil {
			return dropped, err
		}
	}
	return out, nil
}

// messageShaper is the shaper of the answer's messages other than its
// result: the tool's (its untrusted text and secret names, plus a
// decision's drop names) for tools/call, else the gateway-wide one
// (secret names).
func (x *Exchange) messageShaper() *shape.Shaper {
	if x.shaper != nil {
		return x.shaper
	}
	return x.p.textShaper
}

// shapeNotification shapes a notification inside a shaped exchange's
// stream: the text of a progress or log notification marked as
// third-party, secret names dropped at any depth of any params; nil when
// nothing changes.
func (x *Exchange) shapeNotification(body []byte, msg *mcp.Message) ([]byte, error) {
	params, err := x.messageShaper().Notification(msg.Method, msg.Params)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	if x.member != "" && msg.Method == "notifications/resources/updated" {
		// A federated route: the URI as clients know it.
		in := params
		if in == nil {
			in = msg.Params
		}
		if params, err = x.exposeParamURI(in); err != nil {
			return nil, errors.Join(ErrUpstreamResponse, err)
		}
	}
	if params == nil {
		return nil, nil
	}
	return withMember(body, "params", params)
}

// shapeError shapes the error object of a JSON-RPC error answer
// (shape.ErrorObject): its message sanitised and bounded, secret names
// dropped from data, the text marked when the tool declares untrusted
// text. The id and code are relayed as the upstream wrote them.
func (x *Exchange) shapeError(body []byte, msg *mcp.Message) ([]byte, error) {
	if msg.Error == nil {
		return nil, nil
	}
	e, err := x.messageShaper().ErrorObject(msg.Error)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	if e == nil {
		return nil, nil
	}
	return withMember(body, "error", e)
}

// shapeServerRequest handles a request the upstream sends the client in
// its answer (sampling/createMessage, elicitation/create, roots/list,
// ping). Revision 2026-07-28 has no way for the client to answer it there
// (a client never sends a JSON-RPC response; a server asks for input with
// an input_required result): it is replaced by a JSON-RPC error for the
// client's request, and nothing more of the stream is relayed. Under older
// revisions it reaches the client (and its model or its person): its
// third-party text is marked and secret names dropped
// (shape.ServerRequestParams).
func (x *Exchange) shapeServerRequest(body []byte, msg *mcp.Message) ([]byte, error) {
	if x.version >= mcp.Version20260728 {
		x.endStream = true
		x.p.log.LogAttrs(x.ctx, slog.LevelWarn, "upstream sent a server-to-client request the client cannot answer; answer withheld",
			slog.String("mcp_method", x.label), slog.String("request_method", msg.Method))
		return mcp.ErrorResponse(x.requestID(), &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The upstream MCP server sent a " + quote(msg.Method) + " request inside its answer; under protocol revision " + x.version +
				" a client cannot answer it there (a server asks for input with an input_required result), so mcpgate withheld it and the rest of the answer. The call may or may not have taken effect."}), nil
	}
	params, err := x.messageShaper().ServerRequestParams(msg.Method, msg.Params)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	out := body
	if params != nil {
		if out, err = withMember(body, "params", params); err != nil {
			return nil, err
		}
	}
	if x.member != "" {
		// A federated route: the client's answer must find the member.
		return x.exposeRequestID(out, msg.ID)
	}
	if params == nil {
		return nil, nil
	}
	return out, nil
}

// shapeToolResult applies the tool's result shaping (untrusted text,
// field allowlist, secrets, size) and reports the argument coercions in
// _meta. It returns nil when nothing changes. isError tells whether the
// result to relay (out, else result) is a tool error, when the shaper's
// answer is what is relayed (it read the member on its pass); otherwise
// it is errUnknown and settle reads the relayed result.
func (x *Exchange) shapeToolResult(result jsontext.Value) ([]byte, errState, error) {
	var out []byte
	isError := errUnknown
	if x.shaper != nil {
		var early *earlyResult
		if e, ok := x.takeEarly(result); ok {
			early = &e
		}
		shaped, e, err := x.frame.shapeToolResult(x.shaper, result, early)
		if err != nil {
			return nil, errUnknown, errors.Join(ErrUpstreamResponse, err)
		}
		out, isError = shaped, errNo
		if e {
			isError = errYes
		}
	}
	if x.checksResultURIs() {
		in := out
		if in == nil {
			in = result
		}
		dropped, err := x.shapeForeignResources(in, x.warnings)
		if err != nil || dropped != nil {
			return dropped, errUnknown, err
		}
		return out, isError, nil
	}
	if len(x.warnings) > 0 {
		in := out
		if in == nil {
			in = result
		}
		withWarnings, err := warningsMeta(in, x.warnings)
		if err != nil {
			return nil, errUnknown, errors.Join(ErrUpstreamResponse, err)
		}
		out, isError = withWarnings, errUnknown
	}
	return out, isError, nil
}

// listEntry is the part of a list item the policy needs.
type listEntry struct {
	Name        string `json:"name"`
	URI         string `json:"uri"`
	URITemplate string `json:"uriTemplate"`
}

// filterList keeps the list items the policy shows (phase "list"), in the
// upstream's order. It returns nil when every item stays.
func (x *Exchange) filterList(ctx context.Context, result jsontext.Value) (jsontext.Value, error) {
	var members []struct {
		name  string
		value jsontext.Value
	}
	dec := jsontext.NewDecoder(bytes.NewReader(result))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, errors.Join(ErrUpstreamResponse, errors.New("result is not an object"))
	}
	listAt, scopeAt := -1, -1
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, errors.Join(ErrUpstreamResponse, err)
		}
		name := tok.String() // read before the decoder moves on
		val, err := dec.ReadValue()
		if err != nil {
			return nil, errors.Join(ErrUpstreamResponse, err)
		}
		switch name {
		case x.listKind:
			listAt = len(members)
		case "cacheScope":
			scopeAt = len(members)
		}
		members = append(members, struct {
			name  string
			value jsontext.Value
		}{name, bytes.Clone(val)})
	}
	if listAt < 0 {
		return nil, nil
	}
	var raw []jsontext.Value
	if err := json.Unmarshal(members[listAt].value, &raw); err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	items := make([]policy.Item, len(raw))
	for i, r := range raw {
		var e listEntry
		if err := json.Unmarshal(r, &e, json.RejectUnknownMembers(false)); err != nil {
			return nil, errors.Join(ErrUpstreamResponse, err)
		}
		switch x.listKind {
		case "tools":
			items[i] = policy.Item{Name: e.Name, Tool: x.p.tool(x.req.Upstream, e.Name)}
		case "resources":
			items[i] = policy.Item{Name: e.URI, URITenants: x.p.listItemTenants(x.req.Upstream, e.URI, false)}
		case "resourceTemplates":
			items[i] = policy.Item{Name: e.URITemplate, URITenants: x.p.listItemTenants(x.req.Upstream, e.URITemplate, true)}
		default:
			items[i] = policy.Item{Name: e.Name}
		}
	}
	d := x.p.decide(ctx, x, policy.PhaseList, items)
	visible := make(map[string]bool, len(d.Visible))
	if d.Allow {
		for _, n := range d.Visible {
			visible[n] = true
		}
	}
	kept := raw[:0:0]
	var keptNames, effects []string
	gatewayTools := false // an undeclared tool is listed for confirmation
	for i, r := range raw {
		if visible[items[i].Name] {
			kept, keptNames = append(kept, r), append(keptNames, items[i].Name)
			if t := items[i].Tool; t != nil && !t.Declared && t.Undeclared == policy.UndeclaredConfirm {
				gatewayTools, effects = true, append(effects, policy.EffectDelete)
			} else if t != nil {
				effects = append(effects, t.Effect)
			}
		}
	}
	gatewayTools = gatewayTools && x.p.opts.Writes != nil
	if gatewayTools {
		// The confirmation their calls need is mcpgate's confirm_action:
		// listed, as the catalog lists it; an upstream tool of that name
		// is not (the gateway answers it).
		own := kept[:0:0]
		for i, r := range kept {
			if !isGatewayTool(keptNames[i]) {
				own = append(own, r)
			}
		}
		var buf bytes.Buffer
		x.p.writeGatewayTools(jsontext.NewEncoder(&buf), effects)
		for dec := jsontext.NewDecoder(&buf); dec.PeekKind() != 0; {
			v, err := dec.ReadValue()
			if err != nil {
				break
			}
			own = append(own, bytes.Clone(v))
		}
		kept = own
	}
	// A list filtered for an authenticated caller is that caller's alone:
	// under 2026-07-28 it must not be marked cacheable for everyone.
	private := x.input.Principal.Authenticated && x.version >= mcp.Version20260728
	scopeOK := !private || (scopeAt >= 0 && string(members[scopeAt].value) == `"private"`)
	if len(kept) == len(raw) && scopeOK && !gatewayTools {
		return nil, nil
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	_ = enc.WriteToken(jsontext.BeginObject)
	for i, m := range members {
		_ = enc.WriteToken(jsontext.String(m.name))
		if i == scopeAt && private {
			_ = enc.WriteToken(jsontext.String("private"))
			continue
		}
		if i != listAt {
			if err := enc.WriteValue(m.value); err != nil {
				return nil, err
			}
			continue
		}
		_ = enc.WriteToken(jsontext.BeginArray)
		for _, r := range kept {
			if err := enc.WriteValue(r); err != nil {
				return nil, err
			}
		}
		_ = enc.WriteToken(jsontext.EndArray)
	}
	if private && scopeAt < 0 {
		_ = enc.WriteToken(jsontext.String("cacheScope"))
		_ = enc.WriteToken(jsontext.String("private"))
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// EventRewriter relays a text/event-stream response event by event: events
// carrying the answer to this request are shaped, every other byte is
// relayed unchanged. Partial events are held back across chunks.
type EventRewriter struct {
	x      *Exchange
	ctx    context.Context
	s      *sse.Splitter
	buf    []byte
	failed bool // the stream could not be split (an event over the limit)
	// answered: the answer to the request passed (Broken adds nothing).
	answered bool
	// ls is the stream's entry for tool list announcements (nil when
	// mcpgate announces none on it; listchanged.go).
	ls *listStream
	// pre is the parse of the event being shaped, when event parsed it.
	pre parsedBody
}

// NewEventRewriter returns the rewriter for a StreamSSE response.
func (x *Exchange) NewEventRewriter(ctx context.Context) *EventRewriter {
	w := &EventRewriter{x: x, ctx: ctx, s: sse.NewSplitter(x.p.opts.MaxSSEEventBytes)}
	if x.watchTools && x.ls == nil {
		w.ls = x.p.openListStream(ctx, x)
	}
	return w
}

// Write consumes a chunk of the upstream stream and calls emit with each
// complete event's bytes to relay (emit's argument is reused afterwards).
//
// When the stream cannot be split (a single event larger than
// max_sse_event_bytes), the rest of the stream is withheld and one JSON-RPC
// error event for the request id takes its place: nothing unchecked
// reaches the client, and the client learns why its answer is missing.
func (w *EventRewriter) Write(chunk []byte, emit func([]byte) error) error {
	if w.failed {
		return nil
	}
	err := w.s.Write(chunk, func(raw []byte) error { return w.event(raw, emit) })
	if !errors.Is(err, sse.ErrEventTooLarge) {
		return err // nil, or the client write failed
	}
	w.failed = true
	w.x.p.log.LogAttrs(w.ctx, slog.LevelWarn, "upstream event stream withheld", slog.String("mcp_method", w.x.label), slog.Any("error", err))
	w.buf = sse.AppendEvent(w.buf[:0], sse.Event{Type: "message", HasData: true,
		Data: mcp.ErrorResponse(w.x.requestID(), &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The upstream MCP server sent an event larger than the gateway inspects (limits.max_sse_event_bytes, " +
				strconv.Itoa(w.x.p.opts.MaxSSEEventBytes) + " bytes); the rest of its answer was withheld."})})
	return emit(w.buf)
}

// Broken ends a stream the upstream cut (reset, timeout) before answering
// the request: one JSON-RPC error event for the request id, so the client
// learns why its answer is missing instead of seeing a truncated stream.
// Nothing is emitted for a stream that already carried the answer or that
// answers no request (an older revision's GET stream).
func (w *EventRewriter) Broken(emit func([]byte) error) error {
	return w.unanswered(brokenStream, emit)
}

// unanswered ends a stream that did not carry the answer to its request
// with one JSON-RPC error event (message) for the request id.
func (w *EventRewriter) unanswered(message string, emit func([]byte) error) error {
	if w.failed || w.answered || !w.x.answersRequest() {
		return nil
	}
	w.failed = true
	w.buf = sse.AppendEvent(w.buf[:0], sse.Event{Type: "message", HasData: true,
		Data: mcp.ErrorResponse(w.x.requestID(), &mcp.Error{Code: mcp.CodeInternalError, Message: message})})
	return emit(w.buf)
}

// brokenStream is the message of the error event that ends a stream the
// upstream cut before its answer.
const brokenStream = "The upstream MCP server's stream broke before its answer arrived; the call may or may not have taken effect."

// Flush ends the stream. An unfinished event (no terminating blank line)
// is dropped: clients discard it (WHATWG HTML, server-sent events: "If
// the file ends in the middle of an event ... the incomplete event is
// discarded"), and a lenient one must not get an answer the pipeline never
// shaped. When it carried data and the request is still unanswered, one
// JSON-RPC error event for the request id takes its place, so the client
// learns why its answer is missing.
func (w *EventRewriter) Flush(emit func([]byte) error) error {
	if w.failed {
		return nil
	}
	return w.s.Flush(func(raw []byte) error {
		if !sse.Complete(raw) {
			w.x.p.log.LogAttrs(w.ctx, slog.LevelDebug, "dropped an unfinished event at the end of the stream", slog.Int("bytes", len(raw)))
			if sse.Parse(append(bytes.Clone(raw), "\n\n"...)).HasData {
				return w.unanswered(cutEvent, emit)
			}
			return nil
		}
		return w.event(raw, emit)
	})
}

// event relays one complete event. Every event that carries data is
// checked: whatever the client would decode as JSON is parsed here first,
// so leading whitespace or an empty first data line cannot slip an answer
// past the shaping.
func (w *EventRewriter) event(raw []byte, emit func([]byte) error) error {
	if w.failed {
		return nil // the rest of the stream is withheld
	}
	ev := sse.Parse(raw)
	data := bytes.TrimLeft(ev.Data, " \t\r\n")
	if !ev.HasData || len(data) == 0 {
		return emit(raw)
	}
	var pre *parsedBody
	answered := w.answered
	if !w.answered && (bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`))) {
		// Into the exchange's Message, as parse reads: shape reads the
		// same parse and keeps no message past this event.
		m, perr := mcp.ParseInto(&w.x.answerMsg, data, w.x.p.opts.MaxJSONDepth)
		if perr == nil && m.Kind == mcp.KindResponse {
			w.answered = true
		}
		w.pre = parsedBody{m, perr}
		pre = &w.pre
	}
	out, err := w.x.shape(w.ctx, data, pre)
	if w.ls != nil && err == nil {
		seen := data
		if out != nil {
			seen = out
		}
		repl, drop := w.ls.observe(seen)
		if drop {
			return nil
		}
		if repl != nil {
			out = repl
		}
	}
	if err != nil {
		// The stream is under way: the status can no longer change, so
		// the unchecked answer is replaced by a JSON-RPC error event.
		w.x.p.log.LogAttrs(w.ctx, slog.LevelWarn, "upstream event cannot be inspected", slog.String("mcp_method", w.x.label), slog.Any("error", err))
		msg := uncheckable
		if ae := (*answerError)(nil); errors.As(err, &ae) {
			msg = ae.message
		}
		if errors.Is(err, errForeignID) {
			// Another request's answer: nothing more of this stream is
			// relayed; the client gets one answer, this error, unless
			// its own came first.
			w.failed = true
			if answered {
				return nil
			}
		}
		out = mcp.ErrorResponse(w.x.requestID(), &mcp.Error{Code: mcp.CodeInternalError, Message: msg})
	}
	if out == nil {
		return emit(raw)
	}
	if w.x.endStream {
		// The error for the request replaces the rest of the stream.
		w.failed, w.answered = true, true
	}
	ev.Data = out
	w.buf = sse.AppendEvent(w.buf[:0], ev)
	return emit(w.buf)
}

// planShaping is the stage that decides how the answer of an allowed
// request is inspected: the result shaper of a tools/call (its declared
// result fields, untrusted text, secret names), the list a list method
// filters, the third-party text of resources/read, prompts/get and
// completion/complete, resource links of other tenants, the notification
// streams read for tools/list_changed.
func (p *Pipeline) planShaping(_ context.Context, x *Exchange) *Verdict {
	msg := x.msg
	if msg.Method != "tools/call" {
		x.listKind = listKinds[msg.Method]
		x.shapeResult = p.opts.Catalog != nil && textResults[msg.Method] || x.task.inspect
		x.watchTools = msg.Method == "subscriptions/listen" && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
		if x.watchTools && x.member != "" {
			x.shapeNotes = true // a federated route's stream: resource URIs exposed
		}
		if !x.shapeResult && (x.checksResultURIs() || x.member != "") && (msg.Method == "resources/read" || msg.Method == "prompts/get") {
			x.shapeResult = true // resource links of other tenants are removed, a member's URIs exposed
		}
		return nil
	}
	d := x.decision
	shaper, err := p.resultShaper(x.req.Upstream, msg.Name, d)
	if err != nil {
		p.log.LogAttrs(x.ctx, slog.LevelError, "the policy's result paths cannot be compiled; call refused",
			slog.String("decision_id", d.ID), slog.String("tool", msg.Name), slog.Any("error", err))
		return x.answerAs(OutcomeError, local(200, shapeRefusal(msg.ID, d.ID)))
	}
	x.shaper = shaper
	x.shapeResult = x.shaper != nil || len(x.warnings) > 0 || x.checksResultURIs() || x.task.inspect || x.member != ""
	if p.tasksOn(x.version) {
		// Any answer may be a task handle, which is withheld unless the
		// call asked for a task and the handle was bound (taskAnswer).
		x.shapeResult = true
	}
	if p.opts.Limits != nil && p.opts.Limits.LoopBrake > 0 {
		x.shapeResult = true // its outcome feeds the loop brake
	}
	// With the contracts on, a tool's stream is read even when its
	// result needs no shaping: its progress and log notifications carry
	// text too.
	x.shapeNotes = p.opts.Catalog != nil
	return nil
}

// instructions is the note Options.Instructions gives for upstream, "" for
// none.
func (p *Pipeline) instructions(upstream string) string {
	if p.opts.Instructions == nil {
		return ""
	}
	return p.opts.Instructions(upstream)
}

// withInstructions returns an initialize or server/discover result with
// note added to its instructions (MCP: InitializeResult.instructions, a
// hint for the model): after the upstream's own text and a blank line, or
// as the only text when it gives none. nil when note is "".
func withInstructions(result jsontext.Value, note string) ([]byte, error) {
	if note == "" {
		return nil, nil
	}
	text := note
	if v, ok, err := member(result, "instructions"); err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	} else if ok && v.Kind() == '"' {
		var own string
		if err := json.Unmarshal(v, &own); err != nil {
			return nil, errors.Join(ErrUpstreamResponse, err)
		}
		if own != "" {
			text = own + "\n\n" + note
		}
	}
	value, err := json.Marshal(text)
	if err != nil {
		return nil, err
	}
	out, err := withMember(result, "instructions", value)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	return out, nil
}
