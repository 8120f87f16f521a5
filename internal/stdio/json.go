package stdio

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// span is the byte range [start, end) of a JSON value inside a message.
type span struct{ start, end int }

// find returns the span of the value at path (object member names from the
// top) in msg, and whether it is there. msg is read, never changed; a
// message that is not valid JSON up to the value has none.
func find(msg []byte, path ...string) (span, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(msg))
	for depth, name := range path {
		tok, err := dec.ReadToken()
		if err != nil || tok.Kind() != '{' {
			return span{}, false
		}
		for {
			if dec.PeekKind() == '}' {
				return span{}, false
			}
			key, err := dec.ReadToken()
			if err != nil {
				return span{}, false
			}
			if key.String() == name {
				break
			}
			if err := dec.SkipValue(); err != nil {
				return span{}, false
			}
		}
		if depth == len(path)-1 {
			if dec.PeekKind() == 0 {
				return span{}, false
			}
			// InputOffset is after the name; the value starts after the
			// colon and any white space.
			start := int(dec.InputOffset())
			if err := dec.SkipValue(); err != nil {
				return span{}, false
			}
			end := int(dec.InputOffset())
			for start < end && (msg[start] == ':' || isSpace(msg[start])) {
				start++
			}
			return span{start, end}, true
		}
	}
	return span{}, false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// replace returns msg with the value at s replaced by v (a new slice).
func replace(msg []byte, s span, v []byte) []byte {
	out := make([]byte, 0, len(msg)-(s.end-s.start)+len(v))
	out = append(out, msg[:s.start]...)
	out = append(out, v...)
	return append(out, msg[s.end:]...)
}

// value returns the value at path in msg, nil when absent.
func value(msg []byte, path ...string) []byte {
	s, ok := find(msg, path...)
	if !ok {
		return nil
	}
	return msg[s.start:s.end]
}

// oneLine returns msg with its line breaks, which valid JSON holds only as
// white space between tokens (never inside strings), made spaces: the
// stdio transport delimits messages by newlines.
func oneLine(msg []byte) []byte {
	if !bytes.ContainsAny(msg, "\r\n") {
		return msg
	}
	out := bytes.Clone(msg)
	for i, c := range out {
		if c == '\n' || c == '\r' {
			out[i] = ' '
		}
	}
	return out
}
