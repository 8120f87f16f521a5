package sse

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func addSeeds(f *testing.F) {
	for _, tt := range splitterTests {
		f.Add([]byte(tt.input), []byte{1, 3, 0, 7})
	}
	f.Add([]byte(testStream), []byte{0})
	f.Add([]byte(testStream), []byte{2, 1, 5})
	f.Add([]byte("data: a\r"), []byte{7})
	f.Add([]byte("id: 1\x00\r\nretry: 12\r\n\r"), []byte{0, 1})
}

// chunk cuts input into pieces whose sizes cycle through cuts (each byte b
// gives a piece of b%32 bytes, empty pieces included).
func chunk(input, cuts []byte) [][]byte {
	if len(cuts) == 0 {
		return [][]byte{input}
	}
	var out [][]byte
	// The bound on pieces ends cuts made only of zeros.
	for k, limit := 0, 2*len(cuts)+len(input); k < limit && len(input) > 0; k++ {
		n := min(int(cuts[k%len(cuts)])%32, len(input))
		out = append(out, input[:n])
		input = input[n:]
	}
	return append(out, input)
}

// FuzzSplitter checks that relaying the blocks reproduces the input exactly
// whatever the chunking, that the blocks do not depend on the chunking, that
// a client sees from them what it sees from the whole stream, and that a size
// limit fails exactly when a block exceeds it.
func FuzzSplitter(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, input, cuts []byte) {
		whole, wholeFlush, err := collect(-1, [][]byte{input})
		if err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, input, whole, wholeFlush)
		chunks := chunk(input, cuts)
		blocks, flushed, err := collect(-1, chunks)
		if err != nil {
			t.Fatal(err)
		}
		checkBlocks(t, input, blocks, flushed)
		if len(blocks) != len(whole) || !bytes.Equal(flushed, wholeFlush) {
			t.Fatalf("chunking changes the blocks: %q + %q vs %q + %q", blocks, flushed, whole, wholeFlush)
		}
		for i := range blocks {
			if !bytes.Equal(blocks[i], whole[i]) {
				t.Fatalf("chunking changes block %d: %q vs %q", i, blocks[i], whole[i])
			}
		}
		if got, want := interpret(append(blocks, flushed)), reference(input); !equalDispatched(got, want) {
			t.Fatalf("client sees\n %+v\nwant %+v", got, want)
		}

		// A Reader given the same chunks returns the same blocks.
		read, err := readAll(NewReader(&chunkReader{chunks: chunks}, -1))
		if !errors.Is(err, io.EOF) {
			t.Fatalf("Reader: %v", err)
		}
		wantRead := whole
		if len(wholeFlush) > 0 {
			wantRead = append(wantRead[:len(wantRead):len(wantRead)], wholeFlush)
		}
		if len(read) != len(wantRead) {
			t.Fatalf("Reader returns %d blocks, want %d", len(read), len(wantRead))
		}
		for i := range read {
			if !bytes.Equal(read[i], wantRead[i]) {
				t.Fatalf("Reader block %d: %q vs %q", i, read[i], wantRead[i])
			}
		}

		// A limit: the error comes exactly when some event block (the BOM,
		// or a part of one at the end, aside) exceeds it, after the blocks
		// before that one.
		if len(cuts) == 0 {
			return
		}
		max := 1 + int(cuts[0])%64
		firstBig := -1
		for i, b := range append(whole[:len(whole):len(whole)], wholeFlush) {
			if len(b) > max && !(i == 0 && bytes.HasPrefix([]byte(utf8BOM), b)) {
				firstBig = i
				break
			}
		}
		limited, _, err := collect(max, chunks)
		if firstBig < 0 {
			if err != nil || len(limited) != len(whole) {
				t.Fatalf("max %d: err %v, %d blocks of %d", max, err, len(limited), len(whole))
			}
			return
		}
		if !errors.Is(err, ErrEventTooLarge) || len(limited) != firstBig {
			t.Fatalf("max %d: err %v after %d blocks, want ErrEventTooLarge after %d", max, err, len(limited), firstBig)
		}
	})
}

// FuzzParse checks that Parse never panics, that AppendEvent always writes
// exactly one complete block that Parse reads back unchanged, and that the
// fields AppendEvent sanitizes come back as documented.
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Add([]byte("event: a\nid: 1\nretry: 9\ndata: x\ndata\n\n"), []byte("\r\nq"))
	f.Fuzz(func(t *testing.T, raw, extra []byte) {
		ev := Parse(raw)
		out := AppendEvent(nil, ev)
		checkOneBlock(t, out)
		if back := Parse(out); !equalEvent(back, ev) {
			t.Fatalf("Parse(AppendEvent(Parse(%q)))\n got %+v\nwant %+v", raw, back, ev)
		}

		// An arbitrary Event, as a rewrite might build it.
		s := string(extra)
		arb := Event{ID: s, HasID: len(extra)%2 == 0, Type: s, Data: raw, HasData: len(raw)%3 != 0, Retry: s}
		out = AppendEvent(nil, arb)
		checkOneBlock(t, out)
		back := Parse(out)
		want := Event{Type: firstLine(arb.Type), Retry: arb.Retry}
		if arb.HasID && !bytes.Contains([]byte(firstLine(arb.ID)), []byte{0}) {
			want.ID, want.HasID = firstLine(arb.ID), true
		}
		if !isDigits(want.Retry) {
			want.Retry = ""
		}
		if arb.HasData || len(arb.Data) > 0 {
			want.HasData = true
			want.Data = bytes.ReplaceAll(bytes.ReplaceAll(arb.Data, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
		}
		if !equalEvent(back, want) {
			t.Fatalf("Parse(AppendEvent(%+v))\n got %+v\nwant %+v", arb, back, want)
		}
	})
}

// checkOneBlock checks that b is exactly one complete block for a Splitter.
func checkOneBlock(t *testing.T, b []byte) {
	t.Helper()
	blocks, flushed, err := collect(-1, [][]byte{b})
	if err != nil || len(blocks) != 1 || len(flushed) != 0 || !bytes.Equal(blocks[0], b) {
		t.Fatalf("AppendEvent wrote %q: %d blocks, flushed %q, err %v", b, len(blocks), flushed, err)
	}
}

// chunkReader returns its non-empty chunks one Read at a time.
type chunkReader struct {
	chunks [][]byte
	off    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.chunks) > 0 && r.off == len(r.chunks[0]) {
		r.chunks, r.off = r.chunks[1:], 0
	}
	if len(r.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0][r.off:])
	r.off += n
	return n, nil
}
