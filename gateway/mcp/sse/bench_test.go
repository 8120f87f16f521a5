package sse

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

const benchChunk = 16 << 10

func feedChunks(b *testing.B, s *Splitter, chunks [][]byte, emit func([]byte) error) {
	for _, c := range chunks {
		if err := s.Write(c, emit); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(emit); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSplitterSmallEvents relays a stream of ~150-byte JSON-RPC events
// read in 16 KiB chunks (so some events span two chunks).
func BenchmarkSplitterSmallEvents(b *testing.B) {
	for _, eol := range []string{"\n", "\r\n"} {
		b.Run(fmt.Sprintf("eol=%q", eol), func(b *testing.B) {
			var sb strings.Builder
			for i := range 4096 {
				fmt.Fprintf(&sb, "id: %d%sevent: message%sdata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":%d,\"progress\":%d}}%s%s",
					i, eol, eol, i, i, eol, eol)
			}
			stream := []byte(sb.String())
			chunks := cutEvery(stream, benchChunk)
			s := NewSplitter(0)
			n := 0
			emit := func(raw []byte) error { n++; return nil }
			b.ReportAllocs()
			b.SetBytes(int64(len(stream)))
			for b.Loop() {
				feedChunks(b, s, chunks, emit)
			}
			if n != 4096*b.N {
				b.Fatalf("%d events for %d loops", n, b.N)
			}
		})
	}
}

// BenchmarkSplitterHugeEvent relays one event made of a single data line of
// many MiB, read in 16 KiB chunks. The time per byte must not grow with the
// size of the event.
func BenchmarkSplitterHugeEvent(b *testing.B) {
	for _, size := range []int{1 << 20, 32 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			event := hugeEvent(size)
			chunks := cutEvery(event, benchChunk)
			s := NewSplitter(-1)
			n := 0
			emit := func(raw []byte) error { n += len(raw); return nil }
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				feedChunks(b, s, chunks, emit)
			}
			if n != size*b.N {
				b.Fatalf("%d bytes emitted for %d loops", n, b.N)
			}
		})
	}
}

// BenchmarkRewriteEvent parses a 2 KiB JSON-RPC event and encodes it again,
// as a relay does for an event it rewrites.
func BenchmarkRewriteEvent(b *testing.B) {
	result := `{"jsonrpc":"2.0","id":42,"result":{"content":[{"type":"text","text":"` +
		strings.Repeat("lorem ipsum dolor sit amet ", 72) + `"}],"isError":false}}`
	cases := []struct{ name, raw string }{
		{"single-line", "id: 42\nevent: message\ndata: " + result + "\n\n"},
		{"multi-line", "id: 42\r\nevent: message\r\ndata: " + strings.ReplaceAll(result, ",", ",\r\ndata: ") + "\r\n\r\n"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			raw := []byte(tc.raw)
			var dst []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(raw)))
			for b.Loop() {
				ev := Parse(raw)
				dst = AppendEvent(dst[:0], ev)
			}
			if !bytes.Contains(dst, []byte(`"isError":false}}`)) {
				b.Fatalf("bad output %q", dst)
			}
		})
	}
}
