// Package sse reads and writes text/event-stream bodies (the WHATWG HTML
// "server-sent events" format) for a relay that must pass most events on
// byte for byte and rewrite a few.
//
// The package is pure: no network I/O, no net/http. The pieces are:
//
//   - Splitter cuts a stream, fed in chunks of any size, into raw blocks: the
//     exact bytes of one event up to and including the blank line that
//     dispatches it. Relaying every raw block unchanged reproduces the input
//     exactly, whatever the chunking.
//   - Reader does the same for an io.Reader, one block per call.
//   - Parse interprets one raw block the way a browser's EventSource would.
//   - AppendEvent encodes an Event as a single well-formed block, for the
//     events a relay rewrites.
//
// Interpretation follows the "event stream interpretation" rules of the HTML
// standard: lines end with CRLF, LF or CR; a line beginning with ':' is a
// comment; "name: value" loses one optional space after the colon; a line
// without a colon is a field with an empty value; the fields are data, event,
// id (ignored when it contains NUL) and retry (ignored unless ASCII digits);
// a blank line dispatches the event; a UTF-8 byte order mark is skipped at
// the very start of the stream only.
//
// Bytes are not decoded: field values are returned as they appear on the
// wire (a client would decode them as UTF-8, replacing invalid sequences).
package sse

import (
	"bytes"
	"strings"
)

// Event is the parsed form of one event block.
type Event struct {
	// ID is the value of the block's last valid id field; HasID reports
	// whether there was one. An id field whose value contains NUL is ignored,
	// as a client ignores it. HasID with an empty ID resets a client's last
	// event ID.
	ID    string
	HasID bool
	// Type is the last event field's value; "" means the default type,
	// "message".
	Type string
	// Data is the values of the data fields joined with "\n" (no trailing
	// "\n"). It never contains CR. After Parse it may alias the raw block.
	Data []byte
	// HasData reports at least one data field, even an empty one. A client
	// dispatches an event only if it has data.
	HasData bool
	// Retry is the last retry field value made only of ASCII digits, as it
	// appeared (no range check); "" if there was none.
	Retry string
}

// Parse interprets one raw event block, as returned by a Splitter or Reader.
//
// Lines are processed up to and including the first blank line; anything
// after it belongs to another event and is ignored. A final line without a
// line ending is not processed either: a client only acts on complete lines.
// Comments and unknown fields are skipped. Blocks carrying only id or retry,
// or nothing at all, give an Event with HasData false.
//
// Parse does not skip a byte order mark: the Splitter hands the stream's
// leading BOM out as a block of its own, and anywhere else a BOM is part of
// a field name, as it is for a client.
//
// When the block has a single data line, Data aliases raw; with several,
// Data is newly allocated. ID, Type and Retry are always copies.
func Parse(raw []byte) Event {
	var (
		ev                Event
		id, typ, retry    []byte
		data              []byte
		nData             int
		hasRetry, hasType bool
		f                 = newTermFinder()
		i                 int
	)
	for {
		j := f.next(raw, i)
		if j == len(raw) {
			break // no more complete lines
		}
		line := raw[i:j]
		i = j + 1
		if raw[j] == '\r' && i < len(raw) && raw[i] == '\n' {
			i++
		}
		if len(line) == 0 {
			break // the blank line ends the event
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, []byte(nil)
		if c := bytes.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "data":
			switch nData {
			case 0:
				data = value
			case 1:
				// The joined data can never be longer than the rest of the
				// block, so one allocation suffices.
				joined := make([]byte, 0, len(data)+1+len(value)+len(raw)-i)
				joined = append(joined, data...)
				joined = append(joined, '\n')
				data = append(joined, value...)
			default:
				data = append(data, '\n')
				data = append(data, value...)
			}
			nData++
		case "event":
			typ, hasType = value, true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				id, ev.HasID = value, true
			}
		case "retry":
			if isDigits(value) {
				retry, hasRetry = value, true
			}
		}
	}
	if ev.HasID {
		ev.ID = string(id)
	}
	if hasType {
		ev.Type = eventType(typ)
	}
	if hasRetry {
		ev.Retry = string(retry)
	}
	ev.Data, ev.HasData = data, nData > 0
	return ev
}

// eventType returns typ as a string, without allocating for common types.
func eventType(typ []byte) string {
	switch string(typ) {
	case "":
		return ""
	case "message":
		return "message"
	case "endpoint":
		return "endpoint"
	case "error":
		return "error"
	}
	return string(typ)
}

// isDigits reports whether v is non-empty and made only of ASCII digits.
func isDigits[T ~string | ~[]byte](v T) bool {
	if len(v) == 0 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return true
}

// Complete reports whether raw ends with a blank line, that is whether a
// client reading raw dispatches (or, without data, discards) the event it
// holds. Every block a Splitter emits from Write is complete, except the
// stream's leading byte order mark; the bytes handed out by Flush, or by a
// Reader just before io.EOF, may not be. A client never dispatches an
// incomplete block, and a relay that sends anything after one would join it
// to the incomplete event, so such a relay should drop or terminate it.
func Complete(raw []byte) bool {
	n := len(raw)
	if n == 0 {
		return false
	}
	switch raw[n-1] {
	case '\n':
		n--
		if n > 0 && raw[n-1] == '\r' {
			n--
		}
	case '\r':
		n--
	default:
		return false
	}
	return n == 0 || raw[n-1] == '\n' || raw[n-1] == '\r'
}

// AppendEvent appends ev to dst as one event block and returns the extended
// buffer. It writes, as present, an id line (when HasID), an event line (when
// Type is not ""), a retry line (when Retry is ASCII digits), one data line
// per line of Data (when HasData or Data is not empty), then a blank line.
// Line endings are LF.
//
// The output is always exactly one block, whatever ev holds, so a rewritten
// event can never smuggle extra fields or events into the stream:
//   - Data is split at every LF, CR and CRLF (a client cannot receive a CR
//     inside data, and for JSON a raw CR is whitespace either way);
//   - ID and Type end at their first CR or LF (what a client would have read
//     of them), and an ID containing NUL is left out (a client ignores it);
//   - a Retry that is not ASCII digits is left out.
//
// For every ev returned by Parse, Parse(AppendEvent(nil, ev)) equals ev.
func AppendEvent(dst []byte, ev Event) []byte {
	if ev.HasID {
		if id := firstLine(ev.ID); strings.IndexByte(id, 0) < 0 {
			dst = appendField(dst, "id", id)
		}
	}
	if typ := firstLine(ev.Type); typ != "" {
		dst = appendField(dst, "event", typ)
	}
	if isDigits(ev.Retry) {
		dst = appendField(dst, "retry", ev.Retry)
	}
	if ev.HasData || len(ev.Data) > 0 {
		d := ev.Data
		f := newTermFinder()
		for i := 0; ; {
			j := f.next(d, i)
			dst = appendField(dst, "data", d[i:j])
			if j == len(d) {
				break
			}
			i = j + 1
			if d[j] == '\r' && i < len(d) && d[i] == '\n' {
				i++
			}
		}
	}
	return append(dst, '\n')
}

// appendField appends "name: value\n" ("name:\n" for an empty value). The
// space is always written before a non-empty value so that a value starting
// with a space keeps it.
func appendField[T ~string | ~[]byte](dst []byte, name string, value T) []byte {
	dst = append(dst, name...)
	dst = append(dst, ':')
	if len(value) > 0 {
		dst = append(dst, ' ')
		dst = append(dst, value...)
	}
	return append(dst, '\n')
}

// firstLine returns s up to its first CR or LF.
func firstLine(s string) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// termFinder finds line terminators in one buffer. It remembers the next CR
// and the next LF it has found (or that there is none before the end), so a
// front-to-back scan of the buffer costs O(len) in total even when one kind
// of terminator is absent or rare.
type termFinder struct{ lf, cr int }

func newTermFinder() termFinder { return termFinder{-1, -1} }

// next returns the index of the first CR or LF at or after i in b, or len(b)
// if there is none. Successive calls must use the same b and a non-decreasing i.
func (f *termFinder) next(b []byte, i int) int {
	if f.lf < i {
		f.lf = indexFrom(b, i, '\n')
	}
	if f.cr < i {
		f.cr = indexFrom(b, i, '\r')
	}
	return min(f.lf, f.cr)
}

func indexFrom(b []byte, i int, c byte) int {
	if k := bytes.IndexByte(b[i:], c); k >= 0 {
		return i + k
	}
	return len(b)
}
