package mcp

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Parse reads one JSON-RPC 2.0 message of the MCP streamable HTTP transport
// from body, strictly and in a single streaming pass, and extracts the MCP
// fields the gateway decides on.
//
// JSON rules (RFC 8259 with the RFC 7493 I-JSON restrictions that
// jsontext enforces by default). Each violation is a 400 / -32700
// (CodeParseError) error and a nil *Message:
//   - the body is empty or only whitespace;
//   - the body is not valid JSON, or has data after the top-level value;
//   - a string or object name holds invalid UTF-8;
//   - an object, at any depth, has two members with the same name, compared
//     after unescaping ({"a":1,"\u0061":2} is a duplicate);
//   - objects and arrays nest deeper than maxDepth (the top-level object is
//     depth 1; a non-positive maxDepth means DefaultMaxDepth).
//
// JSON-RPC 2.0 / MCP shape rules. Each violation is a 400 / -32600
// (CodeInvalidRequest) error:
//   - a top-level array (a batch, valid or not, even empty) is refused with
//     the message "batch requests are not supported"; MCP 2025-06-18 and
//     later removed batching and mcpgate refuses it for every revision;
//   - any other top-level value that is not an object;
//   - "jsonrpc" missing or not exactly "2.0";
//   - a member other than jsonrpc, id, method, params, result and error;
//   - "id" not a string, number or null; ids are kept byte-exact;
//   - "method" not a string; "params" not an object (MCP requires objects);
//   - a request whose id is null (MCP forbids it);
//   - a message with both a method and a result/error, a response with both
//     or neither of result and error, with params, or without an id, a
//     result response with a null id (an error response may have id null,
//     JSON-RPC 2.0 §5); "result" and "error" must be objects.
//
// A request is method+id, a notification method without id, a response
// id+result or id+error.
//
// MCP parameter rules, 400 / -32602 (CodeInvalidParams; SEP-2575 maps
// InvalidParams to HTTP 400):
//   - tools/call and prompts/get need params.name, a string; their
//     params.arguments, when present, must be an object;
//   - resources/read, resources/subscribe and resources/unsubscribe need
//     params.uri, a string;
//   - initialize needs params.protocolVersion, a non-empty string, and its
//     params.clientInfo, when present, must be an Implementation object
//     (name a string; version and title strings when present);
//   - params._meta, when present, must be an object; its key
//     "io.modelcontextprotocol/protocolVersion" must be a string,
//     "io.modelcontextprotocol/clientInfo" an Implementation object and
//     "io.modelcontextprotocol/clientCapabilities" an object. An empty
//     _meta protocol version is refused as unsupported (400 / -32022).
//
// When a body breaks several rules, the JSON rules win over the shape
// rules, which win over the parameter rules: a shape problem is reported
// only once the whole body is known to be valid JSON.
//
// The raw fields of the result (ID, Params, Arguments, Result, Error,
// Meta.ClientCapabilities) are sub-slices of body, not copies: the caller
// must not modify body while the Message is in use.
//
// On error, the returned *Message is nil unless the message id could be
// read (a string, a number or null): then Parse returns a partially filled
// *Message whose ID is set, so the caller can answer for the same id. Only
// ID is meaningful in that case; a parse error (-32700) never returns a
// Message.
//
// Parse performs no I/O and is safe for concurrent use.
func Parse(body []byte, maxDepth int) (*Message, *Error) {
	return ParseInto(nil, body, maxDepth)
}

// ParseInto is Parse writing the message into m (a new Message when m is
// nil): for a caller that parses one body after another and keeps no
// message past the next parse. It returns m, or nil where Parse returns
// nil.
func ParseInto(m *Message, body []byte, maxDepth int) (*Message, *Error) {
	msg, e, _ := parsePooled(m, body, maxDepth, nil)
	return msg, e
}

// parsePooled parses body into m with a pooled parser; read, when set,
// reads an object result (ParseResultInto). failed reports that read
// failed: the outcome is then void.
func parsePooled(m *Message, body []byte, maxDepth int, read ResultReader) (msg *Message, e *Error, failed bool) {
	if maxDepth <= 0 {
		maxDepth = DefaultMaxDepth
	}
	first := skipSpace(body)
	if first == len(body) {
		return nil, newParseError("empty body"), false
	}
	p := parserPool.Get().(*parser)
	p.dst, p.read = m, read
	msg, e = p.parse(body, body[first], maxDepth)
	failed = p.readFailed
	p.release()
	parserPool.Put(p)
	return msg, e, failed
}

// ResultReader reads the result of an answer as ParseResultInto parses it.
type ResultReader interface {
	// ReadResult reads the next value from dec, which reads body in
	// place (its offsets are offsets in body), and no further.
	ReadResult(dec *jsontext.Decoder, body []byte) error
}

// ParseResultInto is ParseInto for an answer whose result the caller
// reads itself in the same pass: when the message's "result" member is a
// JSON object, read.ReadResult is called once with the parser's decoder
// positioned before it. What read reads is
// checked as ParseInto checks it: the decoder validates the JSON (syntax,
// UTF-8, duplicate names) and the depth limit applies. When read fails,
// or reads anything but that one value, body is parsed again without it.
// The outcome is always ParseInto's; read's work counts only when it
// returned nil and the message parsed, with Result the value read.
func ParseResultInto(m *Message, body []byte, maxDepth int, read ResultReader) (*Message, *Error) {
	msg, e, failed := parsePooled(m, body, maxDepth, read)
	if failed {
		return ParseInto(m, body, maxDepth)
	}
	return msg, e
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// parser holds a reusable jsontext.Decoder. The decoder reads from a
// bytes.Buffer that wraps the body, so it parses the body in place and
// every value it returns aliases the body.
type parser struct {
	dec      jsontext.Decoder
	rd       bytes.Buffer
	body     []byte
	maxDepth int
	scratch  []byte   // unescaping buffer
	dst      *Message // where done writes the message; nil: a new one
	// read reads an object result in place of the parser
	// (ParseResultInto); readFailed: it failed, the parse is void.
	read       ResultReader
	readFailed bool
	st         parseState
	// recent are short strings of earlier messages (tool names, client
	// names and versions), handed out again when a message repeats them,
	// as a client does on every request: strings are immutable.
	recent     [8]string
	nextRecent int
}

// parseState is what one Parse call collects.
type parseState struct {
	msg Message

	hasJSONRPC, hasID, hasMethod, hasParams, hasResult, hasError bool
	idNull                                                       bool

	shapeErr *Error // first -32600 found
	metaErr  *Error // first _meta or params-member problem found

	// Candidate params members, raw; which apply depends on the method,
	// which may come after params.
	name, uri, initVersion, args rawField
	task, requestState           rawField // recorded for Message.Param
	initClientInfo               *Implementation
	initClientInfoBad            bool
}

type rawField struct {
	v   jsontext.Value
	set bool
}

func (p *parser) release() {
	p.rd = bytes.Buffer{}
	p.dec.Reset(&p.rd) // drop the reference to the body
	p.body, p.dst, p.read, p.readFailed = nil, nil, nil, false
	p.st = parseState{}
	if cap(p.scratch) > 1<<10 {
		p.scratch = nil
	}
}

func (p *parser) parse(body []byte, first byte, maxDepth int) (*Message, *Error) {
	p.body = body
	p.maxDepth = maxDepth
	p.rd = *bytes.NewBuffer(body)
	p.dec.Reset(&p.rd)

	if first != '{' {
		if _, e := p.readValue(); e != nil {
			return nil, e
		}
		if e := p.checkEOF(); e != nil {
			return nil, e
		}
		if first == '[' {
			return nil, newInvalidRequest("batch requests are not supported")
		}
		return nil, newInvalidRequest("a message must be a JSON object")
	}

	if _, e := p.openObject(); e != nil {
		return nil, e
	}
	st := &p.st
	for {
		key, done, e := p.nextName()
		if e != nil {
			return nil, e
		}
		if done {
			break
		}
		switch string(key) {
		case "jsonrpc":
			v, e := p.readValue()
			if e != nil {
				return nil, e
			}
			st.hasJSONRPC = true
			if v.Kind() != '"' || string(p.unquote(v)) != "2.0" {
				p.shape(`"jsonrpc" must be exactly "2.0"`)
			}
		case "id":
			v, e := p.readValue()
			if e != nil {
				return nil, e
			}
			st.hasID = true
			switch v.Kind() {
			case '"', '0':
				st.msg.ID = v
			case 'n':
				st.msg.ID = v
				st.idNull = true
			default:
				p.shape(`"id" must be a string or a number`)
			}
		case "method":
			v, e := p.readValue()
			if e != nil {
				return nil, e
			}
			st.hasMethod = true
			if v.Kind() == '"' {
				st.msg.Method = internMethod(p.unquote(v))
			} else {
				p.shape(`"method" must be a string`)
			}
		case "params":
			st.hasParams = true
			if p.dec.PeekKind() == '{' {
				if e := p.parseParams(); e != nil {
					return nil, e
				}
			} else {
				if _, e := p.readValue(); e != nil {
					return nil, e
				}
				p.shape(`"params" must be an object`)
			}
		case "result", "error":
			isResult := key[0] == 'r'
			var v jsontext.Value
			var e *Error
			if isResult && p.read != nil && p.dec.PeekKind() == '{' {
				v, e = p.readWith()
			} else {
				v, e = p.readValue()
			}
			if e != nil {
				return nil, e
			}
			if isResult {
				st.hasResult, st.msg.Result = true, v
			} else {
				st.hasError, st.msg.Error = true, v
			}
			if v.Kind() != '{' {
				if isResult {
					p.shape(`"result" must be an object`)
				} else {
					p.shape(`"error" must be an object`)
				}
			}
		default:
			if st.shapeErr == nil {
				p.shape("unknown member " + quoteTrunc(string(key)))
			}
			if _, e := p.readValue(); e != nil {
				return nil, e
			}
		}
	}
	if e := p.checkEOF(); e != nil {
		return nil, e
	}
	return p.finish()
}

// finish applies the rules that need the whole message.
func (p *parser) finish() (*Message, *Error) {
	st := &p.st
	m := &st.msg
	if st.shapeErr != nil {
		return p.partial(), st.shapeErr
	}
	if !st.hasJSONRPC {
		return p.partial(), newInvalidRequest(`missing "jsonrpc": "2.0"`)
	}
	switch {
	case st.hasMethod:
		if st.hasResult || st.hasError {
			return p.partial(), newInvalidRequest(`a message must not have both "method" and "result" or "error"`)
		}
		if st.hasID {
			m.Kind = KindRequest
			if st.idNull {
				return p.partial(), newInvalidRequest(`a request "id" must not be null`)
			}
		} else {
			m.Kind = KindNotification
		}
	case st.hasResult || st.hasError:
		m.Kind = KindResponse
		switch {
		case st.hasResult && st.hasError:
			return p.partial(), newInvalidRequest(`a response must have exactly one of "result" and "error"`)
		case st.hasParams:
			return p.partial(), newInvalidRequest(`a response must not have "params"`)
		case !st.hasID:
			return p.partial(), newInvalidRequest(`a response must have an "id"`)
		case st.idNull && st.hasResult:
			return p.partial(), newInvalidRequest(`a result response "id" must not be null`)
		}
		return p.done(), nil
	default:
		return p.partial(), newInvalidRequest(`missing "method"`)
	}

	// Requests and notifications.
	if st.metaErr != nil {
		return p.partial(), st.metaErr
	}
	switch m.Method {
	case MethodToolsCall, MethodPromptsGet:
		s, e := p.requiredString(st.name, "params.name")
		if e != nil {
			return p.partial(), e
		}
		m.Name = s
		if st.args.set {
			if st.args.v.Kind() != '{' {
				return p.partial(), newInvalidParams("params.arguments must be an object")
			}
			m.Arguments = st.args.v
		}
	case MethodResourcesRead, MethodResourcesSubscribe, MethodResourcesUnsubscribe:
		s, e := p.requiredString(st.uri, "params.uri")
		if e != nil {
			return p.partial(), e
		}
		m.URI = s
	case MethodInitialize:
		if m.Kind != KindRequest {
			break
		}
		s, e := p.requiredString(st.initVersion, "params.protocolVersion")
		if e != nil {
			return p.partial(), e
		}
		if s == "" {
			return p.partial(), newInvalidParams("params.protocolVersion must not be empty")
		}
		m.InitializeVersion = s
		if st.initClientInfoBad {
			return p.partial(), newInvalidParams("params.clientInfo must be an object with a string name (and string version and title, if present)")
		}
		m.InitializeClientInfo = st.initClientInfo
	}
	return p.done(), nil
}

func (p *parser) requiredString(f rawField, what string) (string, *Error) {
	if !f.set {
		if !p.st.hasParams {
			return "", newInvalidParams(what + " is required (params is missing)")
		}
		return "", newInvalidParams(what + " is required")
	}
	if f.v.Kind() != '"' {
		return "", newInvalidParams(what + " must be a string")
	}
	return p.str(p.unquote(f.v)), nil
}

// done returns a copy of the collected message.
func (p *parser) done() *Message {
	m := p.dst
	if m == nil {
		m = new(Message)
	}
	*m = p.st.msg
	return m
}

// partial returns the collected message if its id is known, else nil.
func (p *parser) partial() *Message {
	if p.st.msg.ID == nil {
		return nil
	}
	return p.done()
}

func (p *parser) shape(msg string) {
	if p.st.shapeErr == nil {
		p.st.shapeErr = newInvalidRequest(msg)
	}
}

func (p *parser) meta(e *Error) {
	if p.st.metaErr == nil {
		p.st.metaErr = e
	}
}

// parseParams reads the params object, collecting the members Parse
// extracts. The decoder is positioned before its '{'.
func (p *parser) parseParams() *Error {
	start, e := p.openObject()
	if e != nil {
		return e
	}
	st := &p.st
	for {
		key, done, e := p.nextName()
		if e != nil {
			return e
		}
		if done {
			break
		}
		var f *rawField
		switch string(key) {
		case "name":
			f = &st.name
		case "uri":
			f = &st.uri
		case "protocolVersion":
			f = &st.initVersion
		case "arguments":
			f = &st.args
		case ParamTask:
			f = &st.task
		case ParamRequestState:
			f = &st.requestState
		case "clientInfo":
			impl, ok, e := p.parseImplementation()
			if e != nil {
				return e
			}
			st.initClientInfo, st.initClientInfoBad = impl, !ok
			continue
		case "_meta":
			if p.dec.PeekKind() == '{' {
				if e := p.parseMeta(); e != nil {
					return e
				}
				continue
			}
			p.meta(newInvalidParams("params._meta must be an object"))
		default:
			if m := caseVariant(key); m != "" {
				// An upstream decoding case-insensitively (Go's
				// encoding/json, among others) could take this member
				// for the one the gateway checked. Reported once the
				// whole message is read, with its id.
				p.meta(newInvalidParams("params." + quoteTrunc(string(key)) + " differs from params." + m + " only in case"))
			}
		}
		v, e := p.readValue()
		if e != nil {
			return e
		}
		if f != nil {
			f.v, f.set = v, true
		}
	}
	end := int(p.dec.InputOffset())
	st.msg.Params = p.body[start:end:end]
	st.msg.task, st.msg.requestState, st.msg.recorded = st.task.v, st.requestState.v, true
	return nil
}

// parseMeta reads params._meta. The decoder is positioned before its '{'.
func (p *parser) parseMeta() *Error {
	if _, e := p.openObject(); e != nil {
		return e
	}
	st := &p.st
	for {
		key, done, e := p.nextName()
		if e != nil {
			return e
		}
		if done {
			return nil
		}
		switch string(key) {
		case MetaKeyProtocolVersion:
			v, e := p.readValue()
			if e != nil {
				return e
			}
			if v.Kind() != '"' {
				p.meta(newInvalidParams(`params._meta["` + MetaKeyProtocolVersion + `"] must be a string`))
				continue
			}
			s := p.str(p.unquote(v))
			if s == "" {
				p.meta(newUnsupportedVersion(s, "_meta protocol version"))
			}
			st.msg.Meta.ProtocolVersion = s
		case MetaKeyClientInfo:
			impl, ok, e := p.parseImplementation()
			if e != nil {
				return e
			}
			if !ok {
				p.meta(newInvalidParams(`params._meta["` + MetaKeyClientInfo + `"] must be an object with a string name (and string version and title, if present)`))
				continue
			}
			st.msg.Meta.ClientInfo = impl
		case MetaKeyClientCapabilities:
			v, e := p.readValue()
			if e != nil {
				return e
			}
			if v.Kind() != '{' {
				p.meta(newInvalidParams(`params._meta["` + MetaKeyClientCapabilities + `"] must be an object`))
				continue
			}
			st.msg.Meta.ClientCapabilities = v
		default:
			if _, e := p.readValue(); e != nil {
				return e
			}
		}
	}
}

// parseImplementation reads an Implementation object (clientInfo). ok is
// false, and the value consumed, when it is not an object with a string
// name and string version and title (when present). Other members are
// allowed (later revisions add icons, websiteUrl, description, ...).
func (p *parser) parseImplementation() (impl *Implementation, ok bool, e *Error) {
	if p.dec.PeekKind() != '{' {
		_, e := p.readValue()
		return nil, false, e
	}
	if _, e := p.openObject(); e != nil {
		return nil, false, e
	}
	impl = new(Implementation)
	ok = true
	hasName := false
	for {
		key, done, e := p.nextName()
		if e != nil {
			return nil, false, e
		}
		if done {
			break
		}
		var dst *string
		switch string(key) {
		case "name":
			dst, hasName = &impl.Name, true
		case "version":
			dst = &impl.Version
		case "title":
			dst = &impl.Title
		}
		v, e := p.readValue()
		if e != nil {
			return nil, false, e
		}
		if dst != nil {
			if v.Kind() != '"' {
				ok = false
				continue
			}
			*dst = p.str(p.unquote(v))
		}
	}
	if !ok || !hasName {
		return nil, false, nil
	}
	return impl, true, nil
}

// openObject reads a '{' (already peeked) and checks the nesting depth. It
// returns the offset of the '{' in the body.
func (p *parser) openObject() (int, *Error) {
	if _, err := p.dec.ReadToken(); err != nil {
		return 0, p.syntaxError(err)
	}
	if p.dec.StackDepth() > p.maxDepth {
		return 0, p.depthError()
	}
	return int(p.dec.InputOffset()) - 1, nil
}

// nextName reads the next object member name, unescaped, or the closing
// '}' (done). The name is valid until the next call that unescapes.
func (p *parser) nextName() (name []byte, done bool, e *Error) {
	if p.dec.PeekKind() == '}' {
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, false, p.syntaxError(err)
		}
		return nil, true, nil
	}
	v, err := p.dec.ReadValue()
	if err != nil {
		return nil, false, p.syntaxError(err)
	}
	return p.unquote(v), false, nil
}

// readValue reads (and so validates) the next whole value and checks its
// nesting depth.
func (p *parser) readValue() (jsontext.Value, *Error) {
	v, err := p.dec.ReadValue()
	if err != nil {
		return nil, p.syntaxError(err)
	}
	if k := v.Kind(); k == '{' || k == '[' {
		base := p.dec.StackDepth()
		if base+valueDepth(v, p.maxDepth-base) > p.maxDepth {
			return nil, p.depthError()
		}
	}
	return v, nil
}

// readWith is readValue through p.read, called once. When it fails, or
// leaves the decoder anywhere but after one whole value, p.readFailed is
// set and an error returned (ParseResultInto then parses again).
func (p *parser) readWith() (jsontext.Value, *Error) {
	read := p.read
	p.read = nil
	start, depth := int(p.dec.InputOffset()), p.dec.StackDepth()
	// The depth limit first, so that read never walks a value nested
	// deeper: over the rest of the body, which bounds the value's depth
	// once the value proves valid JSON. When the rest is deeper, the
	// value is read as readValue reads it.
	if depth+valueDepth(p.body[start:], p.maxDepth-depth) > p.maxDepth {
		return p.readValue()
	}
	if err := read.ReadResult(&p.dec, p.body); err != nil || p.dec.StackDepth() != depth || int(p.dec.InputOffset()) <= start {
		p.readFailed = true
		return nil, newParseError("the result could not be read")
	}
	end := int(p.dec.InputOffset())
	// Between the name and the value: whitespace and the colon.
	v := jsontext.Value(p.body[start:end:end])
	if i := bytes.IndexByte(v, '{'); i >= 0 {
		v = v[i:]
	}
	if len(v) == 0 || v[0] != '{' {
		p.readFailed = true
		return nil, newParseError("the result could not be read")
	}
	return v, nil
}

// checkEOF reports data after the top-level value.
func (p *parser) checkEOF() *Error {
	_, err := p.dec.ReadToken()
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return newParseError("unexpected data after the top-level JSON value")
	default:
		return p.syntaxError(err)
	}
}

// unquote returns the unescaped contents of the JSON string v (which the
// decoder has validated). Without escapes it is a sub-slice of v; otherwise
// it lives in p.scratch until the next call.
func (p *parser) unquote(v []byte) []byte {
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	b, err := jsontext.AppendUnquote(p.scratch[:0], v)
	if err != nil {
		// Unreachable: the decoder validated the string.
		return inner
	}
	p.scratch = b
	return b
}

func (p *parser) depthError() *Error {
	return newParseError("JSON nesting depth exceeds the limit of " + strconv.Itoa(p.maxDepth))
}

// syntaxError turns a jsontext error into a -32700 error with a readable
// message (without the package prefix, at most ~200 bytes).
func (p *parser) syntaxError(err error) *Error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		var se *jsontext.SyntacticError
		if errors.As(err, &se) {
			return newParseError("unexpected end of JSON input after offset " + strconv.FormatInt(se.ByteOffset, 10))
		}
		return newParseError("unexpected end of JSON input")
	}
	msg := strings.TrimPrefix(err.Error(), "jsontext: ")
	if len(msg) > 200 {
		msg = strings.ToValidUTF8(msg[:200], "") + "..."
	}
	return newParseError(msg)
}

// valueDepth returns the nesting depth of the valid JSON value v (0 for a
// scalar, 1 for [] or {}), or any number above limit once it is exceeded.
func valueDepth(v []byte, limit int) int {
	depth, deepest := 0, 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			// Skip the string; escapes never hide a quote from this loop
			// except \" itself.
			for i++; i < len(v); i++ {
				if c := v[i]; c == '\\' {
					i++
				} else if c == '"' {
					break
				}
			}
		case '{', '[':
			depth++
			if depth > deepest {
				deepest = depth
				if deepest > limit {
					return deepest
				}
			}
		case '}', ']':
			depth--
		}
	}
	return deepest
}

// maxRecent is the longest string parser.str remembers.
const maxRecent = 64

// str returns b as a string, without allocating when it is one of
// SupportedVersions or one of the parser's recent strings.
func (p *parser) str(b []byte) string {
	if len(b) > maxRecent {
		return string(b)
	}
	for _, s := range p.recent {
		if s == string(b) {
			return s
		}
	}
	s := internString(b)
	p.recent[p.nextRecent] = s
	p.nextRecent = (p.nextRecent + 1) % len(p.recent)
	return s
}

// internString returns b as a string, without allocating when it is one of
// SupportedVersions.
func internString(b []byte) string {
	for _, v := range SupportedVersions {
		if string(b) == v {
			return v
		}
	}
	return string(b)
}

// Blank reports whether b is empty or only JSON whitespace (RFC 8259 §2).
func Blank(b []byte) bool { return skipSpace(b) == len(b) }

// skipSpace returns the index of the first non-whitespace byte of b.
func skipSpace(b []byte) int {
	for i, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			return i
		}
	}
	return len(b)
}

// paramsMembers are the params members Parse reads.
var paramsMembers = []string{"name", "uri", "protocolVersion", "arguments", "clientInfo", "_meta", "capabilities", "cursor"}

// caseVariant returns the params member key equals under Unicode simple
// case folding (so also "argumentſ", with U+017F, which Go's encoding/json
// matches to "arguments"), or "".
func caseVariant(key []byte) string {
	for _, m := range paramsMembers {
		if string(key) != m && strings.EqualFold(string(key), m) {
			return m
		}
	}
	return ""
}
