package sse

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

var splitterTests = []struct {
	name   string
	input  string
	blocks []string // emitted by Write, in order
	flush  string   // emitted by Flush
}{
	{"empty stream", "", nil, ""},
	{"LF", "data: a\n\ndata: b\n\n", []string{"data: a\n\n", "data: b\n\n"}, ""},
	{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"data: a\r\n\r\n", "data: b\r\n\r\n"}, ""},
	// A CR ending the stream could still be followed by an LF, so the last
	// block waits for Flush.
	{"CR", "data: a\r\rdata: b\r\r", []string{"data: a\r\r"}, "data: b\r\r"},
	{"CR then more", "data: a\r\rdata: b\r\r: x\n\n", []string{"data: a\r\r", "data: b\r\r", ": x\n\n"}, ""},
	{"LF then CRLF", "data: a\n\r\ndata: b\n\n", []string{"data: a\n\r\n", "data: b\n\n"}, ""},
	{"CRLF then CR", "data: a\r\n\rdata: b\n\n", []string{"data: a\r\n\r", "data: b\n\n"}, ""},
	{"CR CR LF", "data: a\r\r\ndata: b\n\n", []string{"data: a\r\r\n", "data: b\n\n"}, ""},
	{"LF CR at end", "data: a\n\r", nil, "data: a\n\r"},
	{"mixed", "id: 1\rdata: a\r\ndata: b\n\r\n", []string{"id: 1\rdata: a\r\ndata: b\n\r\n"}, ""},
	{"comment", ": ping\n\ndata: x\n\n", []string{": ping\n\n", "data: x\n\n"}, ""},
	{"id and retry only", "id: 5\n\nretry: 100\n\n", []string{"id: 5\n\n", "retry: 100\n\n"}, ""},
	{"empty data", "data\n\ndata:\n\n", []string{"data\n\n", "data:\n\n"}, ""},
	{"leading blank lines", "\n\r\n\rdata: x\n\n", []string{"\n", "\r\n", "\r", "data: x\n\n"}, ""},
	{"field without colon", "data\nfoo\n\n", []string{"data\nfoo\n\n"}, ""},
	{"partial at end", "data: a\n\ndata: b\n", []string{"data: a\n\n"}, "data: b\n"},
	{"unterminated line at end", "data: a\n\ndata: b", []string{"data: a\n\n"}, "data: b"},
	{"CR at end", "data: a\n\ndata: b\r", []string{"data: a\n\n"}, "data: b\r"},
	{"BOM", utf8BOM + "data: a\n\n", []string{utf8BOM, "data: a\n\n"}, ""},
	{"BOM alone", utf8BOM, []string{utf8BOM}, ""},
	{"BOM then blank", utf8BOM + "\n", []string{utf8BOM, "\n"}, ""},
	{"second BOM is content", utf8BOM + utf8BOM + "data: a\n\n", []string{utf8BOM, utf8BOM + "data: a\n\n"}, ""},
	{"BOM prefix is content", "\xEF\xBB\n\n", []string{"\xEF\xBB\n\n"}, ""},
	{"BOM prefix at end", "\xEF\xBB", nil, "\xEF\xBB"},
	{"BOM later is content", "data: a\n\n" + utf8BOM + "data: b\n\n", []string{"data: a\n\n", utf8BOM + "data: b\n\n"}, ""},
}

func TestSplitter(t *testing.T) {
	for _, tt := range splitterTests {
		t.Run(tt.name, func(t *testing.T) {
			input := []byte(tt.input)
			chunkings := map[string][][]byte{
				"whole":        {input},
				"byte by byte": cutEvery(input, 1),
				"empty chunks": {nil, input, nil},
			}
			for k := 0; k <= len(input); k++ {
				chunkings[fmt.Sprintf("cut at %d", k)] = cutAt(input, k)
			}
			for cname, chunks := range chunkings {
				blocks, flushed, err := collect(-1, chunks)
				if err != nil {
					t.Fatalf("%s: %v", cname, err)
				}
				if got := strings.Join(toStrings(blocks), "|"); got != strings.Join(tt.blocks, "|") {
					t.Fatalf("%s: blocks\n got %q\nwant %q", cname, toStrings(blocks), tt.blocks)
				}
				if string(flushed) != tt.flush {
					t.Fatalf("%s: flushed %q, want %q", cname, flushed, tt.flush)
				}
				checkBlocks(t, input, blocks, flushed)
			}
		})
	}
}

func toStrings(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// testStream exercises every kind of line and block.
const testStream = utf8BOM +
	": welcome\n\n" +
	"event: endpoint\ndata: /mcp?session=1\n\n" +
	"id: 1\r\ndata: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":1}\r\n\r\n" +
	"retry: 2500\rid: 2\r\r" +
	"data\ndata:\ndata: x\n\r\n" +
	"foo\nid: bad\x00\nevent\n: c\nData: no\ndata:  two spaces\r\n\n" +
	"id\n\n" +
	"\r\n" +
	"data: last\r"

func TestSplitterEveryOffset(t *testing.T) {
	input := []byte(testStream)
	want := reference(input)
	if len(want.Events) != 4 || want.Retry != "2500" {
		t.Fatalf("reference finds %+v", want)
	}
	wantBlocks, wantFlush, err := collect(-1, [][]byte{input})
	if err != nil {
		t.Fatal(err)
	}
	checkBlocks(t, input, wantBlocks, wantFlush)
	if got := interpret(append(wantBlocks, wantFlush)); !equalDispatched(got, want) {
		t.Fatalf("unsplit: client sees\n %+v\nwant %+v", got, want)
	}
	check := func(t *testing.T, chunks [][]byte) {
		t.Helper()
		blocks, flushed, err := collect(-1, chunks)
		if err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, input, blocks, flushed)
		if len(blocks) != len(wantBlocks) || !bytes.Equal(flushed, wantFlush) {
			t.Fatalf("chunks %q: %d blocks + flush %q, want %d + %q", chunks, len(blocks), flushed, len(wantBlocks), wantFlush)
		}
		for i := range blocks {
			if !bytes.Equal(blocks[i], wantBlocks[i]) {
				t.Fatalf("chunks %q: block %d is %q, want %q", chunks, i, blocks[i], wantBlocks[i])
			}
		}
		if got := interpret(append(blocks, flushed)); !equalDispatched(got, want) {
			t.Fatalf("chunks %q: client sees\n %+v\nwant %+v", chunks, got, want)
		}
	}
	t.Run("one cut", func(t *testing.T) {
		for i := 0; i <= len(input); i++ {
			check(t, cutAt(input, i))
		}
	})
	t.Run("two cuts", func(t *testing.T) {
		for i := 0; i <= len(input); i++ {
			for j := i; j <= len(input); j++ {
				check(t, cutAt(input, i, j))
			}
		}
	})
	t.Run("fixed sizes", func(t *testing.T) {
		for n := 1; n <= len(input); n++ {
			check(t, cutEvery(input, n))
		}
	})
}

func TestSplitterHugeEvent(t *testing.T) {
	const size = 32 << 20
	event := hugeEvent(size)
	next := []byte("data: small\n\n")
	input := append(bytes.Clone(event), next...)
	s := NewSplitter(64 << 20)
	var got [][]byte
	var zeroCopy bool
	held := 0
	for _, c := range cutEvery(input, 16<<10) {
		err := s.Write(c, func(raw []byte) error {
			got = append(got, bytes.Clone(raw))
			if bytes.Equal(raw, next) && len(c) > 0 && &raw[0] == &c[len(c)-len(next)] {
				zeroCopy = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			if b := s.Buffered(); b <= held {
				t.Fatalf("Buffered() = %d after %d", b, held)
			}
			held = s.Buffered()
		}
	}
	if err := s.Flush(func([]byte) error { t.Fatal("nothing should be left"); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !bytes.Equal(got[0], event) || !bytes.Equal(got[1], next) {
		t.Fatalf("got %d blocks", len(got))
	}
	if !zeroCopy {
		t.Error("small block after the huge one was copied")
	}
	if cap(s.buf) > retainMax {
		t.Errorf("the huge event's buffer is retained (cap %d)", cap(s.buf))
	}
	ev := Parse(got[0])
	if !ev.HasData || len(ev.Data) != size-len("data: \n\n") {
		t.Fatalf("parsed data length %d", len(ev.Data))
	}
}

// TestSplitterHugeEventMemory checks, without timing anything, that a huge
// event costs a few allocations and about two bytes allocated per byte (a
// growth that re-copied the held-back bytes per chunk would show here).
func TestSplitterHugeEventMemory(t *testing.T) {
	const size = 32 << 20
	chunks := cutEvery(hugeEvent(size), 16<<10)
	s := NewSplitter(-1)
	n := 0
	emit := func(raw []byte) error { n += len(raw); return nil }
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, c := range chunks {
		if err := s.Write(c, emit); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if n != size {
		t.Fatalf("emitted %d bytes", n)
	}
	if allocs := after.Mallocs - before.Mallocs; allocs > 32 {
		t.Errorf("%d allocations for one event", allocs)
	}
	if bytes := after.TotalAlloc - before.TotalAlloc; bytes > 2*size+1<<20 {
		t.Errorf("%d bytes allocated for a %d-byte event", bytes, size)
	}
}

// hugeEvent returns a single-data-line event of exactly size bytes.
func hugeEvent(size int) []byte {
	b := make([]byte, 0, size)
	b = append(b, "data: "...)
	b = append(b, bytes.Repeat([]byte("x"), size-len("data: \n\n"))...)
	return append(b, "\n\n"...)
}

func TestSplitterTooLarge(t *testing.T) {
	small := "data: ok\n\n"         // 10 bytes
	big := "data: 123456789012\n\n" // 20 bytes
	tests := []struct {
		name    string
		max     int
		input   string
		wantErr bool
		blocks  int // emitted before the error
	}{
		{"at the limit", 10, small + small, false, 2},
		{"over the limit", 19, small + big + small, true, 1},
		{"exactly the limit", 20, small + big + small, false, 3},
		{"partial over the limit", 10, small + "data: 12345", true, 1},
		{"CRLF counts", 11, "data: ok\r\n\r\n", true, 0},
		{"pending CR counts", 10, "data: ok\n\r\n", true, 0},
		{"BOM not counted", 10, utf8BOM + small, false, 2},
		{"no limit", -1, small + big, false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			input := []byte(tt.input)
			for _, chunks := range [][][]byte{{input}, cutEvery(input, 1), cutEvery(input, 7)} {
				blocks, _, err := collect(tt.max, chunks)
				if tt.wantErr != errors.Is(err, ErrEventTooLarge) || (!tt.wantErr && err != nil) {
					t.Fatalf("chunks %q: err = %v", chunks, err)
				}
				if len(blocks) != tt.blocks {
					t.Fatalf("chunks %q: %d blocks emitted, want %d", chunks, len(blocks), tt.blocks)
				}
			}
		})
	}
}

func TestSplitterDefaultLimit(t *testing.T) {
	s := new(Splitter)
	chunk := bytes.Repeat([]byte("y"), 1<<20)
	var err error
	n := 0
	for err == nil && n <= DefaultMaxEvent+len(chunk) {
		err = s.Write(chunk, func([]byte) error { return nil })
		n += len(chunk)
	}
	if !errors.Is(err, ErrEventTooLarge) || n <= DefaultMaxEvent {
		t.Fatalf("after %d bytes: err = %v", n, err)
	}
}

func TestSplitterStickyError(t *testing.T) {
	boom := errors.New("client gone")
	s := NewSplitter(-1)
	calls := 0
	err := s.Write([]byte("data: a\n\ndata: b\n\n"), func([]byte) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Fatalf("err = %v after %d calls", err, calls)
	}
	if err := s.Write([]byte("data: c\n\n"), func([]byte) error { t.Fatal("emit after error"); return nil }); !errors.Is(err, boom) {
		t.Fatalf("second Write: %v", err)
	}
	if err := s.Flush(func([]byte) error { t.Fatal("emit after error"); return nil }); !errors.Is(err, boom) {
		t.Fatalf("Flush: %v", err)
	}
	s.Reset()
	blocks := 0
	if err := s.Write([]byte("data: c\n\n"), func([]byte) error { blocks++; return nil }); err != nil || blocks != 1 {
		t.Fatalf("after Reset: err %v, %d blocks", err, blocks)
	}

	s = NewSplitter(5)
	if err := s.Write([]byte("data: toolong\n\n"), func([]byte) error { return nil }); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v", err)
	}
	if err := s.Write([]byte("\n"), func([]byte) error { return nil }); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("second Write: %v", err)
	}
}

func TestSplitterFlushResets(t *testing.T) {
	s := NewSplitter(-1)
	var got []string
	emit := func(raw []byte) error { got = append(got, string(raw)); return nil }
	for _, stream := range []string{utf8BOM + "data: a\n\ndata: b", utf8BOM + "data: c\r"} {
		if err := s.Write([]byte(stream), emit); err != nil {
			t.Fatal(err)
		}
		if err := s.Flush(emit); err != nil {
			t.Fatal(err)
		}
		if s.Buffered() != 0 {
			t.Fatalf("Buffered() = %d after Flush", s.Buffered())
		}
	}
	want := []string{utf8BOM, "data: a\n\n", "data: b", utf8BOM, "data: c\r"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestSplitterBuffered(t *testing.T) {
	s := NewSplitter(-1)
	for _, step := range []struct {
		chunk string
		want  int
	}{
		{"data: a", 7},
		{"bc\n", 10},
		{"\r", 11},     // CR: blank line, waiting for a possible LF
		{"\n: x\n", 4}, // the LF completes the block; ": x\n" starts the next
		{"\n", 0},      // block complete
		{"\r\n", 0},    // blank block emitted
		{"data: z", 7},
	} {
		if err := s.Write([]byte(step.chunk), func([]byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if got := s.Buffered(); got != step.want {
			t.Fatalf("after %q: Buffered() = %d, want %d", step.chunk, got, step.want)
		}
	}
}

func TestSplitterSteadyStateAllocs(t *testing.T) {
	s := NewSplitter(-1)
	stream := []byte(strings.Repeat("id: 1\ndata: {\"jsonrpc\":\"2.0\"}\n\n", 40))
	chunks := cutEvery(stream, 97) // events span chunks
	emit := func([]byte) error { return nil }
	feed := func() {
		for _, c := range chunks {
			if err := s.Write(c, emit); err != nil {
				t.Fatal(err)
			}
		}
	}
	feed()
	if n := testing.AllocsPerRun(20, feed); n > 0 {
		t.Fatalf("steady state allocates %v times per stream", n)
	}
}

// TestRelayRewrite rewrites one event (the answer to request 2) while the
// others are relayed unchanged, for every way of cutting the stream in two.
func TestRelayRewrite(t *testing.T) {
	input := utf8BOM +
		": ping\r\n\r\n" +
		"id: a1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n" +
		"id: a2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\ndata: \"result\":{\"secret\":\"s\"}}\n\n" +
		"retry: 1000\r\r" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
	want := utf8BOM +
		": ping\r\n\r\n" +
		"id: a1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n" +
		"id: a2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n\n" +
		"retry: 1000\r\r" +
		"data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
	replacement := []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)

	relay := func(chunks [][]byte) string {
		var out, scratch []byte
		emit := func(raw []byte) error {
			ev := Parse(raw)
			if ev.HasData && bytes.Contains(ev.Data, []byte(`"id":2,`)) {
				ev.Data = replacement
				scratch = AppendEvent(scratch[:0], ev)
				raw = scratch
			}
			out = append(out, raw...)
			return nil
		}
		s := NewSplitter(0)
		for _, c := range chunks {
			if err := s.Write(c, emit); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(emit); err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	in := []byte(input)
	for i := 0; i <= len(in); i++ {
		if got := relay(cutAt(in, i)); got != want {
			t.Fatalf("cut at %d:\n got %q\nwant %q", i, got, want)
		}
	}
	if got := relay(cutEvery(in, 1)); got != want {
		t.Fatalf("byte by byte:\n got %q\nwant %q", got, want)
	}
}
