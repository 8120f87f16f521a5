package gateway

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"mime"
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
// answer to the request). The adapter answers 502; nothing unchecked
// reaches the client.
var ErrUpstreamResponse = errors.New("upstream response cannot be inspected")

// uncheckable is the message of the error that replaces an upstream answer
// the pipeline could not inspect.
const uncheckable = "The upstream MCP server answered with something mcpgate cannot check; the answer was withheld."

// UpstreamFailure is the JSON-RPC error message adapters send (with 502)
// when the upstream cannot be reached or its response cannot be inspected.
const UpstreamFailure = "The upstream MCP server could not be reached or answered with something mcpgate cannot check."

// ResponseHeaders decides how the upstream's response is relayed. Only
// results the policy shapes are inspected; everything else passes through.
func (x *Exchange) ResponseHeaders(status int, h mcp.Header) (ResponseMode, error) {
	x.upstreamAnswered(status) // tracing.go
	if x.msg != nil && x.msg.Method == "initialize" && status/100 == 2 {
		if err := x.bindSession(h); err != nil {
			return PassThrough, err
		}
	}
	x.unbindSession(status)
	if status/100 == 4 {
		x.release() // the upstream refused the request: nothing ran
	}
	if err := x.refusedAssertion(status); err != nil {
		return PassThrough, err
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
	if enc := strings.ToLower(h.Get("content-encoding")); enc != "" && enc != "identity" {
		return PassThrough, ErrUpstreamResponse
	}
	ct := h.Get("content-type")
	var mt string
	switch {
	case plainMediaType(ct, "application/json"):
		mt = "application/json"
	case plainMediaType(ct, "text/event-stream"):
		mt = "text/event-stream"
	default:
		mt, _, _ = mime.ParseMediaType(ct)
	}
	switch mt {
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

// ResponseBody shapes a buffered application/json response. It returns the
// body to relay and whether it differs from body (then the adapter sets a
// new content-length).
func (x *Exchange) ResponseBody(ctx context.Context, body []byte) ([]byte, bool, error) {
	out, err := x.shape(ctx, body, nil)
	if err != nil {
		return nil, false, err
	}
	if out == nil {
		return body, false, nil
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
// the depth limit alone).
func (x *Exchange) parse(body []byte, pre *parsedBody) (*mcp.Message, *mcp.Error) {
	if pre != nil {
		return pre.msg, pre.perr
	}
	return mcp.Parse(body, x.p.opts.MaxJSONDepth)
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
	// Every result in this exchange is treated as the answer to the list
	// request, whatever its id: upstreams rewrite ids (1.0 → 1, big
	// integers rounded), and a byte comparison would let a list through
	// unfiltered. The id is relayed as the upstream wrote it.
	if x.shapeNotes && !x.shapeResult {
		return nil, nil // the result itself needs nothing
	}
	if x.shapeResult {
		result, err := x.shapeAnswer(msg.Result)
		if err != nil || result == nil {
			return nil, err
		}
		return mcp.ResultResponse(msg.ID, result), nil
	}
	result, err := x.filterList(ctx, msg.Result)
	if err != nil || result == nil {
		return nil, err
	}
	return mcp.ResultResponse(msg.ID, result), nil
}

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
	if x.task.inspect || x.msg.Method == "tools/call" && bytes.Contains(result, []byte(`"task"`)) {
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
	if params == nil {
		return nil, nil
	}
	return withMember(body, "params", params)
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
		shaped, e, err := x.shaper.ToolResultError(result)
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
	for i, r := range raw {
		if visible[items[i].Name] {
			kept = append(kept, r)
		}
	}
	// A list filtered for an authenticated caller is that caller's alone:
	// under 2026-07-28 it must not be marked cacheable for everyone.
	private := x.input.Principal.Authenticated && x.version >= mcp.Version20260728
	scopeOK := !private || (scopeAt >= 0 && string(members[scopeAt].value) == `"private"`)
	if len(kept) == len(raw) && scopeOK {
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
	if w.failed || w.answered || w.x.msg == nil || w.x.msg.Kind != mcp.KindRequest {
		return nil
	}
	w.failed = true
	w.buf = sse.AppendEvent(w.buf[:0], sse.Event{Type: "message", HasData: true,
		Data: mcp.ErrorResponse(w.x.requestID(), &mcp.Error{Code: mcp.CodeInternalError, Message: brokenStream})})
	return emit(w.buf)
}

// brokenStream is the message of the error event that ends a stream the
// upstream cut before its answer.
const brokenStream = "The upstream MCP server's stream broke before its answer arrived; the call may or may not have taken effect."

// Flush ends the stream. An unfinished event (no terminating blank line)
// is dropped: compliant clients discard it, and a lenient one must not get
// an answer the pipeline never shaped.
func (w *EventRewriter) Flush(emit func([]byte) error) error {
	if w.failed {
		return nil
	}
	return w.s.Flush(func(raw []byte) error {
		if !sse.Complete(raw) {
			w.x.p.log.LogAttrs(w.ctx, slog.LevelDebug, "dropped an unfinished event at the end of the stream", slog.Int("bytes", len(raw)))
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
	if !w.answered && (bytes.Contains(data, []byte(`"result"`)) || bytes.Contains(data, []byte(`"error"`))) {
		m, perr := mcp.Parse(data, w.x.p.opts.MaxJSONDepth)
		if perr == nil && m.Kind == mcp.KindResponse {
			w.answered = true
		}
		pre = &parsedBody{m, perr} // shape reads the same parse
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
		out = mcp.ErrorResponse(w.x.requestID(), &mcp.Error{Code: mcp.CodeInternalError, Message: uncheckable})
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
