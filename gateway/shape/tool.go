package shape

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// ToolResult shapes a CallToolResult object (the JSON-RPC "result" member of
// a tools/call answer) by the rules in the package comment. It returns nil
// when nothing changes (pass the upstream bytes on untouched), else the new
// result JSON. Errors: the result is not a JSON object (ErrNotObject),
// structuredContent is not an object while an allowlist applies
// (ErrNotObject), or the JSON is invalid (jsontext's syntactic errors,
// duplicate names included).
func (s *Shaper) ToolResult(result []byte) ([]byte, error) {
	return s.run(func(w *walker) ([]byte, error) {
		return w.toolResult(nil, result, 0)
	})
}

// ToolResultError is ToolResult that also reports whether the result to
// relay — out, or result itself when out is nil — is a tool error: its
// top-level "isError" member (names compared after unescaping) is the
// JSON literal true, as MCP's CallToolResult.isError (schema.ts) marks
// one. The shaper reads that member as it walks the result, so a caller
// need not scan the result again; a member dropped as a secret name is
// not in the output and so reports false, and a result replaced for its
// size is always a tool error. isError is meaningful only when err is nil.
func (s *Shaper) ToolResultError(result []byte) (out []byte, isError bool, err error) {
	return s.AppendToolResultError(nil, result, 0)
}

// AppendToolResultError is ToolResultError writing the shaped result
// after dst: out is dst followed by the shaped result, with room for
// reserve more bytes, or nil when nothing changes. A caller that frames
// the result in a message passes the frame's head as dst and the length
// of its tail as reserve, so the message is written once.
func (s *Shaper) AppendToolResultError(dst, result []byte, reserve int) (out []byte, isError bool, err error) {
	out, err = s.run(func(w *walker) ([]byte, error) {
		o, e := w.toolResult(dst, result, reserve)
		isError = w.isError
		return o, e
	})
	return out, isError, err
}

// appendReserved appends b to dst, growing dst at most once, to hold b
// and reserve more bytes.
func appendReserved(dst, b []byte, reserve int) []byte {
	return append(slices.Grow(dst, len(b)+reserve), b...)
}

// ResultRead is what AppendToolResultFrom read and wrote.
type ResultRead struct {
	Out     []byte // the shaped result after dst, nil when nothing changes
	Result  []byte // the result's bytes in src
	IsError bool   // as ToolResultError reports it
	// Task: the result has a top-level member named "task" (compared
	// after unescaping, whatever its value and whether or not it is
	// dropped as a secret name).
	Task bool
}

// AppendToolResultFrom is AppendToolResultError for a result that dec
// reads next: dec reads src in place (from a bytes.Buffer over src, so
// that its offsets are offsets in src), and it reads the result and no
// further. Unlike the other tool result methods it reads strictly only:
// invalid UTF-8 is an error, like any other in the JSON. A caller that
// reads a whole message with dec has the result checked and shaped in
// one pass; after an error dec is spent.
func (s *Shaper) AppendToolResultFrom(dst []byte, dec *jsontext.Decoder, src []byte, reserve int) (ResultRead, error) {
	if s == nil {
		s = zeroShaper
	}
	w := walkers.Get().(*walker)
	defer w.release()
	w.reset(s, s.maxText, false, false)
	w.in = src
	start := int(dec.InputOffset())
	if err := w.membersFrom(dec, w.toolMember); err != nil {
		return ResultRead{}, err
	}
	end := int(dec.InputOffset())
	// The span before the value may hold the colon and whitespace.
	r := ResultRead{Result: valueAfterName(src[start:end:end])}
	out, err := w.finishToolResult(dst, r.Result, reserve)
	if err != nil {
		return ResultRead{}, err
	}
	r.Out, r.IsError, r.Task = out, w.isError, w.task
	return r, nil
}

// valueAfterName is b, the span a decoder read after a member's name,
// without the colon and whitespace before the value.
func valueAfterName(b []byte) []byte {
	for len(b) > 0 {
		switch b[0] {
		case ' ', '\t', '\r', '\n', ':':
			b = b[1:]
			continue
		}
		break
	}
	return b
}

// toolResult appends the shaped result to dst (see AppendToolResultError).
func (w *walker) toolResult(dst, result []byte, reserve int) ([]byte, error) {
	if err := w.members(result, w.toolMember); err != nil {
		return nil, err
	}
	return w.finishToolResult(dst, result, reserve)
}

// finishToolResult shapes the deferred members of a tool result whose
// top-level members were read (members) and appends the shaped result to
// dst; result is the result's bytes in w.in.
func (w *walker) finishToolResult(dst, result []byte, reserve int) ([]byte, error) {
	s := w.s
	// The content array was read in the first pass (its blocks' members
	// kept as slices of the input); its text blocks can be shaped now that
	// structuredContent is known.
	for i := range w.mem {
		m := &w.mem[i]
		if !m.deferred {
			continue
		}
		saved := w.changed
		w.changed = false
		start := len(w.arena)
		w.arena = w.appendString(w.arena, w.in[m.name[0]:m.name[1]])
		w.arena = append(w.arena, ':')
		var err error
		if w.arena, err = w.emitBlocks(w.arena, w.recs, true, false); err != nil {
			return nil, err
		}
		m.out = [2]int{start, len(w.arena)}
		if !w.changed {
			m.out[0] = -1
		}
		w.changed = saved || w.changed
	}
	if !w.changed {
		if len(result) > s.maxResult {
			w.isError = true
			return appendReserved(dst, tooLarge(len(result), s.maxResult), reserve), nil
		}
		return nil, nil
	}
	out := w.assemble(w.in)
	if len(out) > s.maxResult {
		w.isError = true
		return appendReserved(dst, tooLarge(len(out), s.maxResult), reserve), nil
	}
	return appendReserved(dst, out, reserve), nil
}

// toolMember shapes one top-level member of a CallToolResult.
func (w *walker) toolMember(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
	switch string(name) {
	case "structuredContent":
		// Any JSON value (SEP-2106); null is as good as absent. Allowlist
		// paths start with a member name, so with an allowlist it must be
		// an object.
		k := dec.PeekKind()
		if k == 'n' {
			break
		}
		if k == 0 {
			_, err := dec.ReadValue()
			return dst, false, err
		}
		if k != '{' && w.s.minimise {
			return dst, false, fmt.Errorf("%w: structuredContent is a JSON %s, but the tool's result_fields expect an object", ErrNotObject, kindName(k))
		}
		before := dec.InputOffset()
		start := len(dst)
		saved := w.changed
		w.changed = false
		dst, err := w.value(dec, dst, w.s.root, !w.s.minimise, false)
		if err != nil {
			return dst, false, err
		}
		w.sc.present, w.sc.changed = true, w.changed
		w.changed = saved || w.changed
		w.sc.out = [2]int{start, len(dst)}
		// The span after the name holds the colon, whitespace and the value.
		w.sc.orig = valueAfterName(w.in[before:dec.InputOffset()])
		return dst, false, nil
	case "content":
		if dec.PeekKind() == '[' {
			err := w.collectBlocks(dec)
			return dst, true, err
		}
		if w.s.untrusted {
			// Not an array of blocks: whatever text it holds is the
			// tool's, third-party.
			return kept(w.prefixed(dec, dst))
		}
	case "inputRequests":
		// Server-to-client requests of an input_required result: their
		// text reaches the client's model or person.
		if dec.PeekKind() == '{' {
			return kept(w.inputRequests(dec, dst))
		}
	case "_meta", "resultType", "requestState", "task":
		// Protocol members for the client, not text for the model:
		// secret names dropped, kept otherwise.
	case "isError":
		// Copied as it stands (a literal is never rewritten); the copy
		// tells ToolResultError what the output holds.
		start := len(dst)
		v, err := w.value(dec, dst, nil, true, false)
		w.isError = err == nil && string(v[start:]) == "true"
		return v, false, err
	default:
		if w.s.untrusted {
			// An unknown member of a third-party result: a client that
			// shows it shows the tool's text.
			return kept(w.prefixed(dec, dst))
		}
	}
	v, err := w.value(dec, dst, nil, true, false)
	return v, false, err
}

// prefixed reads a value from dec and appends it with every string in it
// (member names excepted) as TextPrefix plus the sanitised, bounded text:
// third-party text where it must stay a string.
func (w *walker) prefixed(dec *jsontext.Decoder, dst []byte) ([]byte, error) {
	saved := w.prefix
	w.prefix = true
	dst, err := w.value(dec, dst, nil, true, true)
	w.prefix = saved
	return dst, err
}

// prefixedOf is prefixed for a raw value.
func (w *walker) prefixedOf(dst, raw []byte) ([]byte, error) {
	saved := w.prefix
	w.prefix = true
	dst, err := w.valueOf(dst, raw, nil, true, true)
	w.prefix = saved
	return dst, err
}

// Block types the shaper looks into.
const (
	blockOther = iota
	blockText
	blockResource
	blockToolUse    // sampling message history (schema.ts ToolUseContent)
	blockToolResult // sampling message history (schema.ts ToolResultContent)
)

// blockRec is one element of a content array, read but not yet shaped.
type blockRec struct {
	raw []byte // an element that is not an object, as it stands
	kv  [2]int // an object: its members are w.kvs[kv[0]:kv[1]]
	typ int    // an object: blockText, blockResource or blockOther
}

// collectBlocks reads an array of content blocks from dec into w.recs and
// w.kvs without shaping anything.
func (w *walker) collectBlocks(dec *jsontext.Decoder) error {
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != ']' {
		if err := w.collectBlock(dec); err != nil {
			return err
		}
	}
	_, err := dec.ReadToken()
	return err
}

// collectBlock reads one content block (or any other value) from dec into
// w.recs. An object's members are kept as raw slices of the input (the
// decoders parse the input in place), because its type may come after its
// text.
func (w *walker) collectBlock(dec *jsontext.Decoder) error {
	if dec.PeekKind() != '{' {
		v, err := dec.ReadValue()
		w.recs = append(w.recs, blockRec{raw: v})
		return err
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	rec := blockRec{kv: [2]int{len(w.kvs), len(w.kvs)}, typ: blockOther}
	typed := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadValue()
		if err != nil {
			return err
		}
		val, err := dec.ReadValue()
		if err != nil {
			return err
		}
		w.kvs = append(w.kvs, [2][]byte{name, val})
		if !typed && val[0] == '"' && string(w.unquote(&w.name, name)) == "type" {
			typed = true
			switch string(w.unquote(&w.text, val)) {
			case "text":
				rec.typ = blockText
			case "resource":
				rec.typ = blockResource
			case "tool_use":
				rec.typ = blockToolUse
			case "tool_result":
				rec.typ = blockToolResult
			}
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	rec.kv[1] = len(w.kvs)
	w.recs = append(w.recs, rec)
	return nil
}

// emitBlocks appends the shaped form of collected content blocks: as an
// array, or with array false the single block recs[0]. plain marks the
// text of every text block as third-party as a whole (prompts).
func (w *walker) emitBlocks(dst []byte, recs []blockRec, array, plain bool) ([]byte, error) {
	if array {
		dst = append(dst, '[')
	}
	for i, rec := range recs {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		switch {
		case rec.raw != nil && (plain || w.s.untrusted):
			dst, err = w.prefixedOf(dst, rec.raw)
		case rec.raw != nil:
			dst, err = w.valueOf(dst, rec.raw, nil, true, false)
		default:
			dst, err = w.emitBlock(dst, rec, plain)
		}
		if err != nil {
			return dst, err
		}
	}
	if array {
		dst = append(dst, ']')
	}
	return dst, nil
}

// emitBlock appends one collected content block: secret names dropped,
// the text of a text block and the resource of an embedded resource block
// by the rules in the package comment, everything else kept.
func (w *walker) emitBlock(dst []byte, rec blockRec, plain bool) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	for _, kv := range w.kvs[rec.kv[0]:rec.kv[1]] {
		name := w.unquote(&w.name, kv[0])
		var secret bool
		if secret, w.norm = w.s.secrets.match(name, w.norm); secret {
			w.changed = true
			continue
		}
		isText := rec.typ == blockText && string(name) == "text" && kv[1][0] == '"'
		isResource := rec.typ == blockResource && string(name) == "resource" && kv[1][0] == '{'
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = w.appendString(dst, kv[0])
		dst = append(dst, ':')
		var err error
		switch {
		case isText:
			dst = w.textBlock(dst, kv[1], plain)
		case isResource:
			dst, err = w.resource(dst, kv[1], plain || w.s.untrusted)
		case (plain || w.s.untrusted) && !blockValue[string(name)] && !(rec.typ == blockToolUse && string(name) == "name"):
			switch {
			case rec.typ == blockToolResult && string(name) == "content" && kv[1][0] == '[':
				dec := w.open(kv[1])
				mark := len(w.recs)
				if err = w.collectBlocks(dec); err == nil {
					dst, err = w.emitBlocks(dst, w.recs[mark:], true, true)
				}
				w.close()
			case string(name) == "annotations" && kv[1][0] == '{':
				dst, err = w.annotations(dst, kv[1])
			default:
				// name, title, description of a resource link, the
				// text of a block of an unknown or odd-case type
				// ("Text"), unknown members: the tool's text.
				dst, err = w.prefixedOf(dst, kv[1])
			}
		default:
			dst, err = w.valueOf(dst, kv[1], nil, true, false)
		}
		if err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// blockValue are the members of a content block that hold protocol
// values, not text (schema.ts ContentBlock): kept as written (secret
// names dropped) when the block's text is third-party.
var blockValue = map[string]bool{"type": true, "mimeType": true, "uri": true, "data": true, "size": true, "_meta": true,
	"id": true, "toolUseId": true, "isError": true}

// annotationValue are the Annotations members that hold protocol values.
var annotationValue = map[string]bool{"audience": true, "priority": true, "lastModified": true}

// annotations appends a content block's annotations (a raw object) from
// third-party content: audience, priority and lastModified kept, every
// string of any other member prefixed as third-party text.
func (w *walker) annotations(dst, raw []byte) ([]byte, error) {
	dec := w.open(raw)
	defer w.close()
	return w.objectMembers(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if annotationValue[string(name)] {
			return kept(w.value(dec, dst, nil, true, false))
		}
		return kept(w.prefixed(dec, dst))
	})
}

// unquotedEqual reports whether the raw JSON string raw decodes to exactly
// b, without decoding it into a buffer.
func unquotedEqual(raw, b []byte) bool {
	if len(raw) < 2 {
		return false
	}
	s := raw[1 : len(raw)-1]
	j := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			if j >= len(b) || b[j] != c {
				return false
			}
			i++
			j++
			continue
		}
		if i+1 >= len(s) {
			return false
		}
		var r rune
		n := 2
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			r = rune(c)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var ok bool
			if r, ok = hex4(s[i+2:]); !ok {
				return false
			}
			n = 6
			if r >= 0xd800 && r < 0xdc00 && i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if lo, ok := hex4(s[i+8:]); ok && lo >= 0xdc00 && lo < 0xe000 {
					r, n = (r-0xd800)<<10+(lo-0xdc00)+0x10000, 12
				}
			}
			if r >= 0xd800 && r < 0xe000 {
				return false // a lone surrogate: never equal to valid JSON
			}
		default:
			return false
		}
		i += n
		if r < utf8.RuneSelf {
			if j >= len(b) || b[j] != byte(r) {
				return false
			}
			j++
			continue
		}
		var tmp [utf8.UTFMax]byte
		e := utf8.EncodeRune(tmp[:], r)
		if !bytes.HasPrefix(b[j:], tmp[:e]) {
			return false
		}
		j += e
	}
	return j == len(b)
}

// textBlock appends the shaped text (a raw JSON string) of a text content
// block; see the package comment for the rules.
func (w *walker) textBlock(dst, raw []byte, plain bool) []byte {
	if !plain && w.sc.present && unquotedEqual(raw, w.sc.orig) {
		// The usual mirror: the text is structuredContent's own bytes.
		if !w.sc.changed {
			return w.appendString(dst, raw)
		}
		w.changed = true
		dst = appendQuoted(dst, dst[w.sc.out[0]:w.sc.out[1]])
		return dst
	}
	text := w.unquote(&w.tb, raw)
	if plain {
		w.changed = true
		return w.appendPrefixed(dst, text)
	}
	t := bytes.Trim(text, " \t\r\n")
	if w.sc.present && len(t) > 0 && w.equalSC(t) {
		if !w.sc.changed {
			return w.appendString(dst, raw)
		}
		w.changed = true
		dst = appendQuoted(dst, dst[w.sc.out[0]:w.sc.out[1]])
		return dst
	}
	rewritten := false
	switch {
	case len(t) > 0 && t[0] == '{':
		if ok, changed := w.jsonText(t, w.s.root, !w.s.minimise); ok {
			if !changed {
				return w.appendString(dst, raw)
			}
			w.changed = true
			dst = appendQuoted(dst, w.jbuf)
			return dst
		}
		if w.s.minimise || !w.s.secrets.empty() {
			w.changed = true
			dst = appendQuoted(dst, WithheldText)
			return dst
		}
	case len(t) > 0 && t[0] == '[':
		if ok, changed := w.jsonText(t, nil, true); ok {
			if w.s.minimise {
				w.changed = true
				dst = appendQuoted(dst, WithheldText)
				return dst
			}
			if changed {
				text, rewritten = w.jbuf, true
			}
		}
	}
	if w.s.untrusted {
		w.changed = true
		return w.appendPrefixed(dst, text)
	}
	if rewritten {
		w.changed = true
		dst = appendQuoted(dst, text)
		return dst
	}
	return w.appendString(dst, raw)
}

// jsonText shapes t, the text of a text block, as one JSON value into
// w.jbuf. ok is false when t is not exactly one valid JSON value (then the
// walker's change flag is left as it was).
func (w *walker) jsonText(t []byte, n *node, keep bool) (ok, changed bool) {
	saved := w.changed
	w.changed = false
	dec := w.open(t)
	defer w.close()
	var err error
	w.jbuf, err = w.value(dec, w.jbuf[:0], n, keep, false)
	if err == nil {
		if _, err = dec.ReadToken(); errors.Is(err, io.EOF) {
			err = nil
		} else if err == nil {
			err = io.ErrUnexpectedEOF // more than one value
		}
	}
	changed = w.changed
	if err != nil {
		w.changed = saved
		return false, false
	}
	w.changed = saved || changed
	return true, changed
}

// equalSC reports whether t is JSON equal to the upstream's
// structuredContent: byte-equal, or equal in RFC 8785 canonical form.
// Numbers compare as float64 here, which is enough: both values are the
// upstream's, and a text equal to structuredContent is only replaced by
// the shaped structuredContent.
func (w *walker) equalSC(t []byte) bool {
	if bytes.Equal(t, w.sc.orig) {
		return true
	}
	if t[0] != w.sc.orig[0] || t[0] != '{' && t[0] != '[' {
		return false
	}
	if w.sc.canon == 0 {
		w.sc.canon = -1
		v := jsontext.Value(append(w.canon[0][:0], w.sc.orig...))
		if v.Canonicalize() == nil {
			w.canon[0], w.sc.canon = v, 1
		}
	}
	if w.sc.canon < 0 {
		return false
	}
	v := jsontext.Value(append(w.canon[1][:0], t...))
	if v.Canonicalize() != nil {
		return false
	}
	w.canon[1] = v
	return bytes.Equal(w.canon[0], w.canon[1])
}

// resource shapes an embedded resource or a resources/read contents item
// (a raw object): secret names dropped; with wrapText its text member, a
// string, becomes TextPrefix plus the sanitised, bounded text.
func (w *walker) resource(dst, raw []byte, wrapText bool) ([]byte, error) {
	dec := w.open(raw)
	defer w.close()
	return w.objectMembers(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		if !wrapText || string(name) != "text" || dec.PeekKind() != '"' {
			return kept(w.value(dec, dst, nil, true, false))
		}
		v, err := dec.ReadValue()
		if err != nil {
			return dst, false, err
		}
		w.changed = true
		return w.appendPrefixed(dst, w.unquote(&w.tb, v)), false, nil
	})
}

// tooLarge is the tool result that replaces one above the size bound, in
// the gateway's error contract (gateway/refusal): isError true, a text
// block "Error: <cause> Fix: <fix>" plus one line of JSON details, and the
// same details as structuredContent.
func tooLarge(size, limit int) []byte {
	cause := "The tool ran, but its result is " + strconv.Itoa(size) +
		" bytes, more than mcpgate's limit of " + strconv.Itoa(limit) + " bytes, so mcpgate withheld it."
	const fix = "Ask for less: narrow the query, request fewer items, or use the tool's paging or filter arguments. " +
		"If the tool changes data, do not call it again; read the changed object instead."
	details := []byte(`{"error":{"code":"` + ResultTooLargeCode + `","cause":`)
	details = appendQuoted(details, cause)
	details = append(details, `,"fix":`...)
	details = appendQuoted(details, fix)
	details = append(details, "}}"...)
	text := "Error: " + cause + " Fix: " + fix + "\n" + string(details)
	b := []byte(`{"content":[{"type":"text","text":`)
	b = appendQuoted(b, text)
	b = append(b, `}],"structuredContent":`...)
	b = append(b, details...)
	return append(b, `,"isError":true}`...)
}
