package stdio

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// call is one HTTP request whose JSON-RPC request is on the child.
type call struct {
	origID    []byte // the client's id, byte-exact
	origToken []byte // the client's progress token, nil without one
	token     string // the bridge's progress token
	// stateless: a 2026-07-28 request, whose client cannot answer requests
	// of the server on this exchange: they become input_required rounds
	// (rounds.go). caps are its _meta client capabilities.
	stateless bool
	caps      []byte
	out       chan []byte // notifications and requests of the child for this exchange
	resp      chan []byte // the answer, under the bridge's id
	input     chan []byte // inputRequests of a round (rounds.go)
	// Guarded by b.mu: asked maps the keys of the round's inputRequests
	// to the child's request ids; parked is set while the call waits for
	// the client's retry with the inputResponses.
	asked  map[string][]byte
	parked bool
	// relayed are the bridge ids of the child's requests relayed on this
	// exchange (guarded by b.mu); those still unanswered when it ends get
	// an error, so the child never waits for them.
	relayed []string
}

// onlyCall is the one call in flight that is not parked, nil when there
// is none or several: the stdio transport does not say which call a
// request or log message of the child belongs to. The caller holds b.mu.
func (c *child) onlyCall() *call {
	var only *call
	for _, cl := range c.calls {
		if cl.parked {
			continue
		}
		if only != nil {
			return nil
		}
		only = cl
	}
	return only
}

func (cl *call) answer(msg []byte) {
	select {
	case cl.resp <- msg:
	default:
	}
}

// push queues msg for the exchange; false when its queue is full.
func (cl *call) push(msg []byte) bool {
	select {
	case cl.out <- msg:
		return true
	default:
		return false
	}
}

// listener is an open notification stream: an older revision's GET
// stream, or a 2026-07-28 subscriptions/listen.
type listener struct {
	out chan []byte
	// id is the subscriptions/listen request's id (nil for GET); only the
	// list_changed kinds in want are sent.
	id   []byte
	want map[string]bool
}

// ServeHTTP implements the streamable HTTP transport in front of the
// child, for the pipeline's forward stage (the standalone proxy or Envoy).
func (b *Bridge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(SecretHeader)), []byte(b.secret)) != 1 {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet:
		// An older revision's notification stream, within its session.
		s, ok := b.enterSession(w, r, nil)
		if !ok {
			return
		}
		defer b.leaveSession(s)
		b.listen(w, r, nil, nil, s)
		return
	case http.MethodDelete:
		b.deleteSession(w, r)
		return
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(b.o.MaxMessageBytes)))
	if err != nil {
		writeJSON(w, http.StatusRequestEntityTooLarge, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "The message is too large for the stdio server's bridge."}))
		return
	}
	m, perr := mcp.Parse(body, 0)
	if perr != nil {
		var id jsontext.Value
		if m != nil {
			id = m.ID
		}
		writeJSON(w, http.StatusBadRequest, mcp.ErrorResponse(id, perr))
		return
	}
	// Every message of an older revision but initialize belongs to the
	// session its answer opened; 2026-07-28 has none.
	var s *session
	if !handshake(m) && !sessionless(r, m) {
		var id []byte
		if m.Kind == mcp.KindRequest {
			id = m.ID
		}
		var ok bool
		if s, ok = b.enterSession(w, r, id); !ok {
			return
		}
		defer b.leaveSession(s)
	}
	switch m.Kind {
	case mcp.KindResponse:
		b.relayResponse(w, body, m)
	case mcp.KindNotification:
		b.relayNotification(w, r, body, m)
	default:
		b.relayRequest(w, r, body, m, s)
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// ready returns the running, initialized child, or answers the request
// with a JSON-RPC error saying why there is none.
func (b *Bridge) ready(w http.ResponseWriter, id []byte) *child {
	b.mu.Lock()
	c, why := b.cur, b.notReady
	b.mu.Unlock()
	if c == nil {
		w.Header().Set("Retry-After", "5")
		if id == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return nil
		}
		writeJSON(w, http.StatusServiceUnavailable, mcp.ErrorResponse(id, &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The stdio MCP server is not available: " + why + "."}))
	}
	return c
}

// relayRequest sends a client's request to the child under an id of the
// bridge and relays the child's answer, and the notifications and requests
// of the child that belong to it, back: as one JSON answer, or as an SSE
// stream when something comes before the answer.
func (b *Bridge) relayRequest(w http.ResponseWriter, r *http.Request, body []byte, m *mcp.Message, s *session) {
	stateless := m.Meta.ProtocolVersion >= mcp.Version20260728
	if stateless && m.Meta.ClientCapabilities == nil {
		writeJSON(w, http.StatusBadRequest, mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "params._meta must hold " + mcp.MetaKeyClientCapabilities + " (revision 2026-07-28)"}))
		return
	}
	switch m.Method {
	case "initialize", "server/discover":
		b.answerHandshake(w, m, !sessionless(r, m))
		return
	case "subscriptions/listen":
		b.listen(w, r, m.ID, m.Params, nil)
		return
	}
	c := b.ready(w, m.ID)
	if c == nil {
		return
	}
	if stateless {
		if state, ok := find(body, "params", "requestState"); ok && b.resume(w, r, c, body, m, body[state.start:state.end]) { // rounds.go
			return
		}
	}
	idSpan, ok := find(body, "id")
	if !ok {
		writeJSON(w, http.StatusBadRequest, mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "no id"}))
		return
	}
	bid := strconv.FormatInt(b.nextID.Add(1), 10)
	cl := &call{origID: bytes.Clone(m.ID), stateless: stateless, caps: bytes.Clone(m.Meta.ClientCapabilities),
		out: make(chan []byte, callQueue), resp: make(chan []byte, 1), input: make(chan []byte, maxInputs)}
	line := body
	if ts, ok := find(body, "params", "_meta", "progressToken"); ok {
		cl.origToken = bytes.Clone(body[ts.start:ts.end])
		cl.token = strconv.Quote("mcpgate-" + bid)
		if ts.start > idSpan.start {
			line = replace(replace(line, ts, []byte(cl.token)), idSpan, []byte(bid))
		} else {
			line = replace(replace(line, idSpan, []byte(bid)), ts, []byte(cl.token))
		}
	} else {
		line = replace(line, idSpan, []byte(bid))
	}
	b.mu.Lock()
	c.calls[bid] = cl
	if cl.token != "" {
		c.tokens[cl.token] = cl
	}
	b.mu.Unlock()
	if !c.send(r.Context(), line) {
		// Not written: the child never saw it.
		c.forget(bid, cl)
		w.Header().Set("Retry-After", "5")
		writeJSON(w, http.StatusServiceUnavailable, mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The stdio MCP server is not available: it exited before the request was written to it."}))
		return
	}
	b.await(w, r, c, bid, cl, m.Method, s.done())
}

// forget drops a call that is over; the child's requests relayed on its
// exchange that the client left unanswered get a JSON-RPC error.
func (c *child) forget(bid string, cl *call) {
	c.b.mu.Lock()
	delete(c.calls, bid)
	delete(c.tokens, cl.token)
	var unanswered [][]byte
	for _, id := range cl.relayed {
		if sr, ok := c.serverReqs[id]; ok {
			delete(c.serverReqs, id)
			unanswered = append(unanswered, sr.id)
		}
	}
	c.b.mu.Unlock()
	for _, id := range unanswered {
		c.sendSoon(mcp.ErrorResponse(id, &mcp.Error{Code: mcp.CodeInternalError,
			Message: "The client's exchange ended before it answered."}))
	}
}

// await relays what the child sends for call bid to the HTTP exchange: as
// one JSON answer, or as an SSE stream when something comes before the
// answer. For a 2026-07-28 call a request of the child ends the exchange
// with an input_required result instead, and the call waits, parked, for
// the client's retry (rounds.go).
func (b *Bridge) await(w http.ResponseWriter, r *http.Request, c *child, bid string, cl *call, method string, ended <-chan struct{}) {
	parked := false
	defer func() {
		if !parked {
			c.forget(bid, cl)
		}
	}()
	streaming := false
	fl, _ := w.(http.Flusher)
	flush := func() {
		// What the child wrote before is queued already.
		for {
			select {
			case n := <-cl.out:
				if !streaming {
					startStream(w, fl)
					streaming = true
				}
				writeEvent(w, fl, n)
			default:
				return
			}
		}
	}
	finish := func(msg []byte) {
		flush()
		if !streaming {
			status := http.StatusOK
			if cl.stateless {
				status = statelessStatus(msg)
			}
			writeJSON(w, status, msg)
			return
		}
		writeEvent(w, fl, msg)
	}
	for {
		select {
		case msg := <-cl.resp:
			s, _ := find(msg, "id")
			msg = replace(msg, s, cl.origID)
			if cl.stateless {
				msg = withResultType(msg)
			}
			finish(msg)
			return
		case first := <-cl.input:
			parked = true
			finish(b.park(c, bid, cl, gatherInputs(cl, first)))
			return
		case msg := <-cl.out:
			if !streaming {
				startStream(w, fl)
				streaming = true
			}
			writeEvent(w, fl, msg)
		case <-c.dead:
			// The request reached the child, which ended before it
			// answered: whether it took effect is unknown, and the
			// exchange fails as a broken upstream does (the pipeline
			// then records a write's outcome as unknown).
			b.mu.Lock()
			why := c.why
			b.mu.Unlock()
			b.log.Error("stdio server ended with a call in flight; the call fails", slog.String("method", method), slog.String("exit", why))
			panic(http.ErrAbortHandler)
		case <-ended:
			// The client ended its session (DELETE) or it was evicted:
			// the child stops working on the call, and the exchange ends
			// as a request on an ended session does.
			c.cancelCall(bid, "the client's session ended")
			if !streaming {
				refuseSession(w, http.StatusNotFound, cl.origID, sessionGone)
			}
			return
		case <-r.Context().Done():
			// The client went away: the child is told to stop working on
			// it (notifications/cancelled), as a client would.
			c.cancelCall(bid, "the client went away")
			return
		}
	}
}

// cancelCall tells the child to stop working on call bid
// (notifications/cancelled).
func (c *child) cancelCall(bid, reason string) {
	cancel := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":%q}}`, bid, reason)
	c.sendSoon([]byte(cancel))
}

func startStream(w http.ResponseWriter, fl http.Flusher) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if fl != nil {
		fl.Flush()
	}
}

func writeEvent(w http.ResponseWriter, fl http.Flusher, msg []byte) {
	buf := make([]byte, 0, len(msg)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, msg...)
	buf = append(buf, "\n\n"...)
	_, _ = w.Write(buf)
	if fl != nil {
		fl.Flush()
	}
}

// relayResponse passes a client's answer to a request of the child back
// to the child, under the child's own id.
func (b *Bridge) relayResponse(w http.ResponseWriter, body []byte, m *mcp.Message) {
	b.mu.Lock()
	c := b.cur
	var sr serverReq
	found := false
	if c != nil {
		sr, found = c.serverReqs[string(m.ID)]
		delete(c.serverReqs, string(m.ID))
	}
	b.mu.Unlock()
	if !found || sr.gen != c.gen {
		b.log.Warn("a client answered a request the stdio server has not asked (or asked before it restarted); dropped")
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if s, ok := find(body, "id"); ok {
		c.sendSoon(replace(body, s, sr.id))
	}
	w.WriteHeader(http.StatusAccepted)
}

// relayNotification passes a client's notification to the child: but
// notifications/initialized, which the bridge sent itself when it started
// the child, and with notifications/cancelled naming the bridge's id of
// the call when exactly one call in flight has the id it names.
func (b *Bridge) relayNotification(w http.ResponseWriter, r *http.Request, body []byte, m *mcp.Message) {
	if m.Method == "notifications/initialized" {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	c := b.ready(w, nil)
	if c == nil {
		return
	}
	line := body
	if m.Method == "notifications/cancelled" {
		s, ok := find(body, "params", "requestId")
		if !ok {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		named := body[s.start:s.end]
		var bid string
		n := 0
		b.mu.Lock()
		for id, cl := range c.calls {
			if bytes.Equal(cl.origID, named) {
				bid, n = id, n+1
			}
		}
		b.mu.Unlock()
		if n != 1 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		line = replace(body, s, []byte(bid))
	}
	c.send(r.Context(), line)
	w.WriteHeader(http.StatusAccepted)
}

// dispatch routes one message of the child.
func (c *child) dispatch(msg []byte) {
	b := c.b
	m, perr := mcp.Parse(msg, 0)
	if perr != nil {
		b.log.Warn("stdio server wrote a line that is not a JSON-RPC message; dropped", slog.String("error", perr.Message))
		return
	}
	switch m.Kind {
	case mcp.KindResponse:
		if string(m.ID) == "0" { // the bridge's own initialize
			select {
			case c.initResult <- m.Result: // nil for an error
			default: // a second answer
			}
			return
		}
		b.mu.Lock()
		cl := c.calls[string(m.ID)]
		b.mu.Unlock()
		if cl == nil {
			b.log.Debug("stdio server answered a call that is no longer waiting; dropped")
			return
		}
		cl.answer(msg) // await restores the client's id
	case mcp.KindRequest:
		c.serverRequest(msg, m)
	default:
		c.notification(msg, m)
	}
}

// serverRequest relays a request of the child (elicitation, sampling,
// roots) to the one exchange in flight, under an id of the bridge; ping is
// answered here. With no exchange or several (the child's message does not
// say which call it belongs to), or one whose client cannot answer (a
// 2026-07-28 request), the child gets a JSON-RPC error.
func (c *child) serverRequest(msg []byte, m *mcp.Message) {
	b := c.b
	if m.Method == "ping" {
		c.reply(mcp.ResultResponse(m.ID, nil))
		return
	}
	b.mu.Lock()
	only := c.onlyCall()
	refuse := ""
	switch {
	case only == nil:
		refuse = "no client call, or several, are in flight, and the request does not say which one it belongs to"
	case only.stateless:
		refuse = c.askRound(only, msg, m) // rounds.go
		b.mu.Unlock()
		if refuse == "" {
			return
		}
		b.log.Warn("stdio server request refused", slog.String("method", m.Method), slog.String("reason", refuse))
		c.reply(mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "mcpgate cannot relay " + m.Method + ": " + refuse + "."}))
		return
	}
	bid := ""
	if refuse == "" {
		bid = strconv.FormatInt(b.nextID.Add(1), 10)
		c.serverReqs[bid] = serverReq{id: bytes.Clone(m.ID), gen: c.gen}
		only.relayed = append(only.relayed, bid)
	}
	b.mu.Unlock()
	if refuse == "" {
		s, _ := find(msg, "id")
		if only.push(replace(msg, s, []byte(bid))) {
			return
		}
		b.mu.Lock()
		delete(c.serverReqs, bid)
		b.mu.Unlock()
		refuse = "the client's stream is not keeping up"
	}
	b.log.Warn("stdio server request refused", slog.String("method", m.Method), slog.String("reason", refuse))
	c.reply(mcp.ErrorResponse(m.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "mcpgate cannot relay " + m.Method + ": " + refuse + "."}))
}

// listChanged are the notifications of a changed list, which go to every
// open notification stream.
var listChanged = map[string]string{
	"notifications/tools/list_changed":     "toolsListChanged",
	"notifications/prompts/list_changed":   "promptsListChanged",
	"notifications/resources/list_changed": "resourcesListChanged",
}

// notification relays a notification of the child: progress to the call
// whose token it names (restored); a log message to the one call in
// flight; everything else (changed lists, updated resources), and a log
// message with no call or several in flight, to the open notification
// streams.
func (c *child) notification(msg []byte, m *mcp.Message) {
	b := c.b
	if m.Method == "notifications/progress" {
		s, ok := find(msg, "params", "progressToken")
		if !ok {
			return
		}
		b.mu.Lock()
		cl := c.tokens[string(msg[s.start:s.end])]
		b.mu.Unlock()
		if cl != nil && !cl.push(replace(msg, s, cl.origToken)) {
			b.m.dropped.Inc()
		}
		return
	}
	if m.Method == "notifications/message" {
		b.mu.Lock()
		only := c.onlyCall()
		b.mu.Unlock()
		if only != nil {
			if !only.push(msg) {
				b.m.dropped.Inc()
			}
			return
		}
	}
	b.broadcast(m.Method, msg)
}

// broadcast sends a notification to the open notification streams: all of
// them for an older revision's GET stream, and to a subscriptions/listen
// stream a list_changed it subscribed to, tagged with its subscription.
func (b *Bridge) broadcast(method string, msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for l := range b.listeners {
		out := msg
		if l.id != nil {
			key, ok := listChanged[method]
			if !ok || !l.want[key] {
				continue
			}
			out = fmt.Appendf(nil, `{"jsonrpc":"2.0","method":%q,"params":{"_meta":{%q:%s}}}`, method, "io.modelcontextprotocol/subscriptionId", l.id)
		}
		select {
		case l.out <- out:
		default:
			b.m.dropped.Inc()
		}
	}
}

// listen serves a notification stream until the client goes away: an
// older revision's GET stream (id nil), or a 2026-07-28
// subscriptions/listen request, which first gets
// notifications/subscriptions/acknowledged with the list_changed kinds it
// asked for (resource subscriptions are not relayed). A GET stream
// belongs to session s and ends with it.
func (b *Bridge) listen(w http.ResponseWriter, r *http.Request, id []byte, params []byte, s *session) {
	l := &listener{out: make(chan []byte, callQueue), id: bytes.Clone(id), want: map[string]bool{}}
	fl, _ := w.(http.Flusher)
	if id != nil {
		var granted []string
		for _, key := range listChanged {
			if string(value(params, "notifications", key)) == "true" {
				l.want[key] = true
				granted = append(granted, fmt.Sprintf("%q:true", key))
			}
		}
		ack := fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{%q:%s},"notifications":{%s}}}`,
			"io.modelcontextprotocol/subscriptionId", id, joinComma(granted))
		l.out <- ack
	}
	b.mu.Lock()
	b.listeners[l] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.listeners, l)
		b.mu.Unlock()
	}()
	startStream(w, fl)
	for {
		select {
		case msg := <-l.out:
			writeEvent(w, fl, msg)
		case <-r.Context().Done():
			return
		case <-s.done():
			return
		case <-b.stop:
			return
		}
	}
}

func joinComma(parts []string) string {
	var buf bytes.Buffer
	for i, p := range parts {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.WriteString(p)
	}
	return buf.String()
}

// answerHandshake answers initialize and server/discover from the child's
// initialize result: the bridge speaks every revision mcpgate does and
// relays the messages as the child writes them.
//
// The answer to initialize of an older revision opens a session and
// carries its id (open).
func (b *Bridge) answerHandshake(w http.ResponseWriter, m *mcp.Message, open bool) {
	c := b.ready(w, m.ID)
	if c == nil {
		return
	}
	if m.Method == "initialize" {
		// The client's revision when the child speaks it too, else the
		// child's; the client decides whether it can go on.
		v := c.version
		if mcp.IsSupportedVersion(m.InitializeVersion) && m.InitializeVersion < v {
			v = m.InitializeVersion
		}
		res := c.init
		if s, ok := find(res, "protocolVersion"); ok {
			res = replace(res, s, strconv.AppendQuote(nil, v))
		}
		if open {
			w.Header().Set(sessionHeader, b.openSession().id)
		}
		writeJSON(w, http.StatusOK, mcp.ResultResponse(m.ID, res))
		return
	}
	var versions []string
	for _, v := range mcp.SupportedVersions {
		if v >= mcp.Version20260728 || v <= c.version {
			versions = append(versions, strconv.Quote(v))
		}
	}
	res := []byte(`{"resultType":"complete","ttlMs":0,"cacheScope":"public","supportedVersions":[` + joinComma(versions) + `]`)
	if caps := value(c.init, "capabilities"); caps != nil {
		res = append(append(res, `,"capabilities":`...), caps...)
	} else {
		res = append(res, `,"capabilities":{}`...)
	}
	if ins := value(c.init, "instructions"); ins != nil {
		res = append(append(res, `,"instructions":`...), ins...)
	}
	if info := value(c.init, "serverInfo"); info != nil {
		res = fmt.Appendf(res, `,"_meta":{%q:%s}`, "io.modelcontextprotocol/serverInfo", info)
	}
	res = append(res, '}')
	writeJSON(w, http.StatusOK, mcp.ResultResponse(m.ID, res))
}

// withResultType returns a response to a 2026-07-28 request with the
// resultType its result needs when the child (speaking an older revision)
// left it out: "input_required" when the result holds inputRequests (a
// handler of the child asking for a round itself), else "complete".
func withResultType(msg []byte) []byte {
	s, ok := find(msg, "result")
	if !ok || msg[s.start] != '{' || value(msg[s.start:s.end], "resultType") != nil {
		return msg
	}
	member := `"resultType":"complete"`
	if value(msg[s.start:s.end], "inputRequests") != nil {
		member = `"resultType":"input_required"`
	}
	if len(bytes.TrimSpace(msg[s.start+1:s.end-1])) > 0 {
		member += ","
	}
	at := span{s.start + 1, s.start + 1}
	return replace(msg, at, []byte(member))
}

// statelessStatus is the HTTP status of a JSON answer to a 2026-07-28
// request (SEP-2575): 400 for an error of the request's parameters or
// headers, 200 otherwise.
func statelessStatus(msg []byte) int {
	var code int
	if json.Unmarshal(value(msg, "error", "code"), &code) != nil {
		return http.StatusOK
	}
	switch code {
	case mcp.CodeInvalidParams, mcp.CodeHeaderMismatch, mcp.CodeMissingRequiredClientCapabilities, mcp.CodeUnsupportedProtocolVersion:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
