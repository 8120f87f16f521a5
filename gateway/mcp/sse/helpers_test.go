package sse

import (
	"bytes"
	"strings"
	"testing"
)

// collect feeds chunks to a fresh Splitter with limit max and returns a copy
// of each block emitted by Write, the bytes emitted by Flush (nil if none)
// and the first error.
func collect(max int, chunks [][]byte) (blocks [][]byte, flushed []byte, err error) {
	s := NewSplitter(max)
	emit := func(raw []byte) error {
		blocks = append(blocks, bytes.Clone(raw))
		return nil
	}
	for _, c := range chunks {
		if err := s.Write(c, emit); err != nil {
			return blocks, nil, err
		}
	}
	err = s.Flush(func(raw []byte) error {
		flushed = bytes.Clone(raw)
		return nil
	})
	return blocks, flushed, err
}

// cutAt cuts b at the given increasing offsets.
func cutAt(b []byte, offs ...int) [][]byte {
	var out [][]byte
	prev := 0
	for _, o := range offs {
		out = append(out, b[prev:o])
		prev = o
	}
	return append(out, b[prev:])
}

// cutEvery cuts b into pieces of n bytes.
func cutEvery(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// dispatched is what a client sees: the events it dispatches (type, data and
// last event ID at dispatch) and its final reconnection time.
type dispatched struct {
	Events []clientEvent
	Retry  string
}

type clientEvent struct{ Type, Data, LastID string }

// reference interprets a whole stream the way the HTML standard describes,
// one character at a time. It shares no code with the package.
func reference(stream []byte) dispatched {
	s := string(stream)
	s = strings.TrimPrefix(s, utf8BOM)
	var lines []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\n':
			lines = append(lines, cur.String())
			cur.Reset()
		case '\r':
			lines = append(lines, cur.String())
			cur.Reset()
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		default:
			cur.WriteByte(c)
		}
	}
	// An unterminated last line is discarded at the end of the stream.
	var (
		out              dispatched
		data             strings.Builder
		typ, idBuf, last string
	)
	for _, line := range lines {
		if line == "" {
			last = idBuf
			if data.Len() == 0 {
				typ = ""
				continue
			}
			if typ == "" {
				typ = "message"
			}
			out.Events = append(out.Events, clientEvent{typ, strings.TrimSuffix(data.String(), "\n"), last})
			data.Reset()
			typ = ""
			continue
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, ""
		if c := strings.IndexByte(line, ':'); c >= 0 {
			name, value = line[:c], line[c+1:]
			value = strings.TrimPrefix(value, " ")
		}
		switch name {
		case "event":
			typ = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.Contains(value, "\x00") {
				idBuf = value
			}
		case "retry":
			if value != "" && strings.Trim(value, "0123456789") == "" {
				out.Retry = value
			}
		}
	}
	return out
}

// interpret is what a client sees when it receives blocks, computed with
// Parse and Complete.
func interpret(blocks [][]byte) dispatched {
	var (
		out         dispatched
		idBuf, last string
	)
	for _, raw := range blocks {
		ev := Parse(raw)
		if ev.HasID {
			idBuf = ev.ID
		}
		if ev.Retry != "" {
			out.Retry = ev.Retry
		}
		if !Complete(raw) {
			continue
		}
		last = idBuf
		if ev.HasData {
			typ := ev.Type
			if typ == "" {
				typ = "message"
			}
			out.Events = append(out.Events, clientEvent{typ, string(ev.Data), last})
		}
	}
	return out
}

func equalDispatched(a, b dispatched) bool {
	if a.Retry != b.Retry || len(a.Events) != len(b.Events) {
		return false
	}
	for i := range a.Events {
		if a.Events[i] != b.Events[i] {
			return false
		}
	}
	return true
}

// checkBlocks checks the invariants of a Splitter's output for input: the
// blocks and the flushed bytes concatenate to input; every block is complete
// but the leading BOM; each block holds exactly one blank line, at its end.
func checkBlocks(t *testing.T, input []byte, blocks [][]byte, flushed []byte) {
	t.Helper()
	joined := bytes.Join(append(blocks, flushed), nil)
	if !bytes.Equal(joined, input) {
		t.Fatalf("relayed bytes differ from input\n got %q\nwant %q", joined, input)
	}
	for i, b := range blocks {
		if i == 0 && string(b) == utf8BOM {
			continue
		}
		if !Complete(b) {
			t.Fatalf("block %d %q is not complete", i, b)
		}
		if n := blankLines(b); n != 1 {
			t.Fatalf("block %d %q holds %d blank lines", i, b, n)
		}
	}
}

// blankLines counts the blank lines of b (which starts at a line start).
func blankLines(b []byte) int {
	n, lineStart := 0, true
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\r', '\n':
			if lineStart {
				n++
			}
			lineStart = true
			if b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n' {
				i++
			}
		default:
			lineStart = false
		}
	}
	return n
}
