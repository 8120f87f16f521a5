package shape

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// The rewriting is one streaming pass per value with jsontext: the decoder
// validates, and the walker appends the shaped form to a byte slice,
// copying the input's own bytes for everything it keeps. A call first runs
// strict (jsontext's defaults: duplicate names and invalid UTF-8 refused);
// only when that fails does it run again lenient, with invalid UTF-8 let
// through so that the walker can replace it (duplicate names stay refused).
//
// Every decoder reads from a bytes.Buffer over the caller's slice: jsontext
// then parses the slice in place and never mutates it, so the raw values
// and names it returns stay valid slices of the input while the walk goes
// on (the walker relies on that to record spans of the input).

// lenientOpts lets invalid UTF-8 through the decoder so the walker can
// replace it instead of failing the whole result.
var lenientOpts = jsontext.AllowInvalidUTF8(true)

// member is one member of a top-level object being rewritten.
type member struct {
	name     [2]int // span of the quoted name in the input
	in       [2]int // span of `"name": value` in the input
	out      [2]int // span of `"name":value` in walker.arena; out[0] < 0: use in
	deferred bool   // the value is shaped after the whole object was read
}

// walker holds the scratch state of one call; pooled.
type walker struct {
	s       *Shaper
	maxText int  // bound on one third-party text
	prefix  bool // wrap strings as TextPrefix+text instead of a wrapper object
	lenient bool // decoders let invalid UTF-8 through; strings are checked
	changed bool // something in the current part was rewritten
	isError bool // the tool result's output has "isError": true (ToolResultError)
	// errorObject: members walks a JSON-RPC error object, whose code and
	// message are never dropped as secret names.
	errorObject bool
	task        bool // members read a member named "task"

	decs []*decoder // decoder stack; ndec in use
	ndec int

	name  []byte // unquoted member names
	norm  []byte // normalised member names
	text  []byte // unquoted strings
	san   []byte // sanitised strings
	tb    []byte // unquoted text of a text block
	jbuf  []byte // shaped JSON of a text block
	canon [2][]byte
	kvs   [][2][]byte // members of content blocks (slices of the input)
	recs  []blockRec  // content blocks

	in    []byte // the top-level input
	arena []byte // shaped members
	mem   []member
	out   []byte

	// Per ToolResult call.
	sc struct {
		present bool
		changed bool
		orig    []byte // upstream structuredContent, in the input
		out     [2]int // shaped, in arena
		canon   int    // 0 unknown, 1 canon[0] holds its RFC 8785 form, -1 none
	}
}

type decoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var walkers = sync.Pool{New: func() any { return new(walker) }}

// run is the package run with s's own text bound, for a Shaper method
// (a nil s is the zero Shaper).
func (s *Shaper) run(fn func(w *walker) ([]byte, error)) ([]byte, error) {
	if s == nil {
		s = zeroShaper
	}
	return run(s, s.maxText, false, fn)
}

// run calls fn with a pooled walker, strict first and, if that fails,
// once more lenient (see above).
func run(s *Shaper, maxText int, prefix bool, fn func(w *walker) ([]byte, error)) ([]byte, error) {
	w := walkers.Get().(*walker)
	defer w.release()
	w.reset(s, maxText, prefix, false)
	out, err := fn(w)
	if _, syntax := errors.AsType[*jsontext.SyntacticError](err); syntax {
		w.reset(s, maxText, prefix, true)
		out, err = fn(w)
	}
	return out, err
}

func (w *walker) reset(s *Shaper, maxText int, prefix, lenient bool) {
	w.s, w.maxText, w.prefix, w.lenient, w.changed, w.isError, w.errorObject, w.task = s, maxText, prefix, lenient, false, false, false, false
	w.ndec = 0
	w.arena, w.mem, w.out = w.arena[:0], w.mem[:0], w.out[:0]
	w.kvs, w.recs = w.kvs[:0], w.recs[:0]
	w.in = nil
	w.sc.present, w.sc.changed, w.sc.orig, w.sc.canon = false, false, nil, 0
}

// maxKeep is the largest scratch buffer kept in the pool.
const maxKeep = 64 << 10

// release returns w to the pool without references to the input.
func (w *walker) release() {
	w.s, w.in, w.sc.orig = nil, nil, nil
	clear(w.kvs[:cap(w.kvs)])
	clear(w.recs[:cap(w.recs)])
	for _, b := range [...]*[]byte{&w.name, &w.norm, &w.text, &w.san, &w.tb, &w.jbuf, &w.canon[0], &w.canon[1], &w.arena, &w.out} {
		if cap(*b) > maxKeep {
			*b = nil
		}
	}
	if cap(w.kvs) > 1024 {
		w.kvs = nil
	}
	if cap(w.recs) > 1024 {
		w.recs = nil
	}
	for _, d := range w.decs {
		d.buf = bytes.Buffer{}
		d.dec.Reset(&d.buf) // drop references to the input
	}
	walkers.Put(w)
}

// open returns a decoder over b; close it (LIFO) when done.
func (w *walker) open(b []byte) *jsontext.Decoder {
	if w.ndec == len(w.decs) {
		w.decs = append(w.decs, new(decoder))
	}
	d := w.decs[w.ndec]
	w.ndec++
	d.buf = *bytes.NewBuffer(b)
	if w.lenient {
		d.dec.Reset(&d.buf, lenientOpts)
	} else {
		d.dec.Reset(&d.buf)
	}
	return &d.dec
}

func (w *walker) close() { w.ndec-- }

// value reads the next value from dec and appends its shaped form to dst.
// n is the value's position in the path tree (nil: no path leads here),
// keep says the allowlist keeps all of it, wrap that it is third-party text.
func (w *walker) value(dec *jsontext.Decoder, dst []byte, n *node, keep, wrap bool) ([]byte, error) {
	if w.verbatim(n, keep, wrap) {
		v, err := dec.ReadValue()
		return append(dst, v...), err
	}
	return w.shaped(dec, dst, n, keep, wrap)
}

// verbatim reports whether a value at this position is copied as it
// stands: no rule applies below it and the decoder is strict, so its
// strings are valid UTF-8. (A lenient walk goes token by token, fixing each
// string once, never re-reading a subtree.)
func (w *walker) verbatim(n *node, keep, wrap bool) bool {
	return !w.lenient && n == nil && keep && !wrap && w.s.secrets.empty()
}

func (w *walker) shaped(dec *jsontext.Decoder, dst []byte, n *node, keep, wrap bool) ([]byte, error) {
	k := dec.PeekKind()
	if !wrap && n.mismatch(byte(k)) {
		wrap = true
	}
	switch k {
	case '{':
		return w.object(dec, dst, n, keep, wrap)
	case '[':
		return w.array(dec, dst, n, keep, wrap)
	case '"':
		v, err := dec.ReadValue()
		if err != nil {
			return dst, err
		}
		if wrap {
			w.changed = true
			return w.appendWrapped(dst, v), nil
		}
		return w.appendString(dst, v), nil
	}
	v, err := dec.ReadValue() // a number or literal, or the pending error
	if err != nil {
		return dst, err
	}
	return append(dst, v...), nil
}

func (w *walker) object(dec *jsontext.Decoder, dst []byte, n *node, keep, wrap bool) ([]byte, error) {
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	return w.objectRest(dec, dst, func(name []byte, dec *jsontext.Decoder, dst []byte) ([]byte, bool, error) {
		var c *node
		if n != nil {
			c = n.members[string(name)]
		}
		ck := keep || c != nil && c.keep
		if !ck && (c == nil || !c.allow || !c.fits(byte(dec.PeekKind()))) {
			return dst, true, nil
		}
		return kept(w.value(dec, dst, c, ck, wrap || c != nil && c.wrap))
	})
}

// valueFunc reads the value of the member named name from dec and appends
// its shaped form to dst, or reads nothing and reports drop (the member is
// then left out).
type valueFunc func(name []byte, dec *jsontext.Decoder, dst []byte) (_ []byte, drop bool, _ error)

// kept is the valueFunc answer for a value appended (or an error).
func kept(dst []byte, err error) ([]byte, bool, error) {
	return dst, false, err
}

// objectRest appends an object whose '{' was read from dec: a member with
// a secret name, or one fn drops, is left out (the change noted); every
// other has its name kept and its value shaped by fn.
func (w *walker) objectRest(dec *jsontext.Decoder, dst []byte, fn valueFunc) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	for dec.PeekKind() != '}' {
		raw, err := dec.ReadValue()
		if err != nil {
			return dst, err
		}
		name := w.unquote(&w.name, raw)
		var secret bool
		if secret, w.norm = w.s.secrets.match(name, w.norm); !secret {
			mark := len(dst)
			if !first {
				dst = append(dst, ',')
			}
			dst = w.appendString(dst, raw)
			dst = append(dst, ':')
			var drop bool
			if dst, drop, err = fn(name, dec, dst); err != nil {
				return dst, err
			}
			if !drop {
				first = false
				continue
			}
			dst = dst[:mark]
		}
		w.changed = true
		if err := dec.SkipValue(); err != nil {
			return dst, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	return append(dst, '}'), nil
}

func (w *walker) array(dec *jsontext.Decoder, dst []byte, n *node, keep, wrap bool) ([]byte, error) {
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	dst = append(dst, '[')
	var c *node
	if n != nil {
		c = n.each
	}
	ck := keep || c != nil && c.keep
	cw := wrap || c != nil && c.wrap
	first := true
	for dec.PeekKind() != ']' {
		if !ck && (c == nil || !c.fits(byte(dec.PeekKind()))) {
			w.changed = true
			if err := dec.SkipValue(); err != nil {
				return dst, err
			}
			continue
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		var err error
		if dst, err = w.value(dec, dst, c, ck, cw); err != nil {
			return dst, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return dst, err
	}
	return append(dst, ']'), nil
}

// appendString appends a quoted JSON string (raw, from the decoder),
// replacing invalid UTF-8 if there is any.
func (w *walker) appendString(dst, raw []byte) []byte {
	if !w.lenient || rawOK(raw) {
		return append(dst, raw...)
	}
	w.changed = true
	w.text, _ = jsontext.AppendUnquote(w.text[:0], raw) // replaces invalid UTF-8
	dst = appendQuoted(dst, w.text)
	return dst
}

// wrapperTail closes the wrapper object after its untrusted_text.
var wrapperTail = func() []byte {
	b := []byte(`,"` + NoticeMember + `":`)
	b = appendQuoted(b, Notice)
	return append(b, '}')
}()

const wrapperHead = `{"` + UntrustedMember + `":`

// appendWrapped appends third-party text (a raw JSON string) in its
// wrapped form: the wrapper object, or with w.prefix a string starting with
// TextPrefix.
func (w *walker) appendWrapped(dst, raw []byte) []byte {
	text := w.unquote(&w.text, raw)
	if w.prefix {
		return w.appendPrefixed(dst, text)
	}
	w.san = appendSanitised(w.san[:0], text, w.maxText)
	dst = append(dst, wrapperHead...)
	dst = appendQuoted(dst, w.san)
	return append(dst, wrapperTail...)
}

// appendPrefixed appends TextPrefix and the sanitised, bounded text as
// one JSON string.
func (w *walker) appendPrefixed(dst, text []byte) []byte {
	w.san = append(w.san[:0], TextPrefix...)
	w.san = appendSanitised(w.san, text, w.maxText)
	dst = appendQuoted(dst, w.san)
	return dst
}

// unquote returns the text of a raw JSON string: a slice of raw when it has
// no escapes, else decoded into *buf (invalid UTF-8 replaced).
func (w *walker) unquote(buf *[]byte, raw []byte) []byte {
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 && (!w.lenient || utf8.Valid(raw)) {
		return raw[1 : len(raw)-1]
	}
	*buf, _ = jsontext.AppendUnquote((*buf)[:0], raw)
	return *buf
}

// rawOK reports whether raw JSON text is strict: valid UTF-8 and no escaped
// lone surrogate.
func rawOK(raw []byte) bool {
	return utf8.Valid(raw) && (bytes.IndexByte(raw, '\\') < 0 || escapesOK(raw))
}

// escapesOK reports whether every \u escape in raw JSON text that encodes a
// surrogate is part of a high-low pair.
func escapesOK(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++
		if i >= len(b) || b[i] != 'u' {
			continue
		}
		r, ok := hex4(b[i+1:])
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xdc00 && r < 0xe000:
			return false
		case r >= 0xd800 && r < 0xdc00:
			if i+2 >= len(b) || b[i+1] != '\\' || b[i+2] != 'u' {
				return false
			}
			r2, ok := hex4(b[i+3:])
			if !ok || r2 < 0xdc00 || r2 >= 0xe000 {
				return false
			}
			i += 6
		}
	}
	return true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// memberFunc shapes the value of one top-level member: it reads the value
// from dec and appends its shaped form to dst, or reads it raw and reports
// deferred (the caller fills the member in later).
type memberFunc func(name []byte, dec *jsontext.Decoder, dst []byte) (_ []byte, deferred bool, _ error)

// members reads the top-level object b, dropping secret names and shaping
// every other member's value with fn into w.arena; w.mem lists the members
// in order.
func (w *walker) members(b []byte, fn memberFunc) error {
	w.in = b
	dec := w.open(b)
	defer w.close()
	if err := w.membersFrom(dec, fn); err != nil {
		return err
	}
	if _, err := dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("shape: data after the result object")
		}
		return err
	}
	return nil
}

// membersFrom is members reading the object from dec, which reads w.in in
// place (its offsets are offsets in w.in); it reads the object and no
// further.
func (w *walker) membersFrom(dec *jsontext.Decoder, fn memberFunc) error {
	switch k := dec.PeekKind(); k {
	case '{':
	case 0:
		_, err := dec.ReadToken()
		return err
	default:
		return fmt.Errorf("%w: the result is a JSON %s", ErrNotObject, kindName(k))
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	for dec.PeekKind() != '}' {
		raw, err := dec.ReadValue()
		if err != nil {
			return err
		}
		end := int(dec.InputOffset())
		m := member{name: [2]int{end - len(raw), end}}
		name := w.unquote(&w.name, raw)
		if string(name) == "task" {
			w.task = true
		}
		var secret bool
		if secret, w.norm = w.s.secrets.match(name, w.norm); secret && !(w.errorObject && (string(name) == "code" || string(name) == "message")) {
			w.changed = true
			if err := dec.SkipValue(); err != nil {
				return err
			}
			continue
		}
		start := len(w.arena)
		saved := w.changed
		w.changed = false
		w.arena = w.appendString(w.arena, raw)
		w.arena = append(w.arena, ':')
		w.arena, m.deferred, err = fn(name, dec, w.arena)
		if err != nil {
			return err
		}
		changed := w.changed
		w.changed = saved || changed
		m.in = [2]int{m.name[0], int(dec.InputOffset())}
		m.out = [2]int{start, len(w.arena)}
		if !changed && !m.deferred {
			w.arena = w.arena[:start]
			m.out[0] = -1
		}
		w.mem = append(w.mem, m)
	}
	_, err := dec.ReadToken()
	return err
}

// assemble writes the object of w.mem to w.out: changed members from the
// arena, the others as the input had them.
func (w *walker) assemble(in []byte) []byte {
	w.out = append(w.out[:0], '{')
	for i, m := range w.mem {
		if i > 0 {
			w.out = append(w.out, ',')
		}
		if m.out[0] >= 0 {
			w.out = append(w.out, w.arena[m.out[0]:m.out[1]]...)
		} else {
			w.out = append(w.out, in[m.in[0]:m.in[1]]...)
		}
	}
	return append(w.out, '}')
}

// valueOf shapes one raw value (opening a decoder unless it can be copied).
func (w *walker) valueOf(dst, raw []byte, n *node, keep, wrap bool) ([]byte, error) {
	if w.verbatim(n, keep, wrap) {
		return append(dst, raw...), nil
	}
	dec := w.open(raw)
	defer w.close()
	return w.shaped(dec, dst, n, keep, wrap)
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '[':
		return "array"
	case '"':
		return "string"
	case '0':
		return "number"
	case 'n':
		return "null"
	case 't', 'f':
		return "boolean"
	}
	return "value"
}

// escapes marks the bytes a JSON string must escape.
var escapes = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// appendQuoted appends src, which must be valid UTF-8, as a JSON string.
// Only '"', '\\' and control characters are escaped (what jsontext does by
// default), in one pass that copies the runs between them.
func appendQuoted[T ~string | ~[]byte](dst []byte, src T) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !escapes[c] {
			continue
		}
		dst = append(dst, src[start:i]...)
		start = i + 1
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}
