package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll returns a copy of every block Next returns and the error that
// ended the loop.
func readAll(r *Reader) ([][]byte, error) {
	var blocks [][]byte
	for {
		raw, err := r.Next()
		if err != nil {
			return blocks, err
		}
		if len(raw) == 0 {
			return blocks, errors.New("Next returned an empty block")
		}
		blocks = append(blocks, bytes.Clone(raw))
	}
}

func TestReader(t *testing.T) {
	input := []byte(testStream)
	wantBlocks, wantFlush, err := collect(-1, [][]byte{input})
	if err != nil {
		t.Fatal(err)
	}
	want := append(wantBlocks, wantFlush)
	readers := []struct {
		name string
		r    func() io.Reader
	}{
		{"whole", func() io.Reader { return bytes.NewReader(input) }},
		{"one byte", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(input)) }},
		{"half", func() io.Reader { return iotest.HalfReader(bytes.NewReader(input)) }},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(input)) }},
		{"empty reads", func() io.Reader { return &stutterReader{r: bytes.NewReader(input)} }},
	}
	for _, tt := range readers {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.r(), -1)
			blocks, err := readAll(r)
			if !errors.Is(err, io.EOF) {
				t.Fatalf("err = %v", err)
			}
			if len(blocks) != len(want) {
				t.Fatalf("%d blocks, want %d", len(blocks), len(want))
			}
			for i := range blocks {
				if !bytes.Equal(blocks[i], want[i]) {
					t.Fatalf("block %d = %q, want %q", i, blocks[i], want[i])
				}
			}
			if _, err := r.Next(); !errors.Is(err, io.EOF) {
				t.Fatalf("Next after EOF: %v", err)
			}
		})
	}
}

// stutterReader returns (0, nil) before every read.
type stutterReader struct {
	r    io.Reader
	flip bool
}

func (s *stutterReader) Read(p []byte) (int, error) {
	s.flip = !s.flip
	if s.flip {
		return 0, nil
	}
	return s.r.Read(p)
}

type zeroReader struct{}

func (zeroReader) Read([]byte) (int, error) { return 0, nil }

func TestReaderErrors(t *testing.T) {
	boom := errors.New("connection reset")
	tests := []struct {
		name    string
		r       io.Reader
		max     int
		blocks  []string
		wantErr error
	}{
		{"empty", strings.NewReader(""), 0, nil, io.EOF},
		{"partial before EOF", strings.NewReader("data: a\n\ndata: b"), 0, []string{"data: a\n\n", "data: b"}, io.EOF},
		{"BOM", strings.NewReader(utf8BOM + "data: a\n\n"), 0, []string{utf8BOM, "data: a\n\n"}, io.EOF},
		{"read error", io.MultiReader(strings.NewReader("data: a\n\ndata: b"), iotest.ErrReader(boom)), 0, []string{"data: a\n\n"}, boom},
		{"timeout", iotest.TimeoutReader(strings.NewReader("data: a\n\n")), 0, []string{"data: a\n\n"}, iotest.ErrTimeout},
		{"too large", strings.NewReader("data: a\n\ndata: too large\n\n"), 10, []string{"data: a\n\n"}, ErrEventTooLarge},
		{"no progress", zeroReader{}, 0, nil, io.ErrNoProgress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(tt.r, tt.max)
			blocks, err := readAll(r)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if got := toStrings(blocks); strings.Join(got, "|") != strings.Join(tt.blocks, "|") {
				t.Fatalf("blocks %q, want %q", got, tt.blocks)
			}
			if _, err := r.Next(); !errors.Is(err, tt.wantErr) {
				t.Fatalf("error not sticky: %v", err)
			}
		})
	}
}

func TestReaderReset(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\n"), 0)
	if _, err := readAll(r); !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	r.Reset(strings.NewReader(utf8BOM + "data: b\n\ndata: c\n\n"))
	blocks, err := readAll(r)
	if !errors.Is(err, io.EOF) || len(blocks) != 3 || string(blocks[0]) != utf8BOM {
		t.Fatalf("after Reset: %q, %v", blocks, err)
	}
}

func TestReaderBuffered(t *testing.T) {
	r := NewReader(strings.NewReader("data: a\n\ndata: b\n\ndata: c"), 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if got := r.Buffered(); got != len("data: b\n\ndata: c") {
		t.Fatalf("Buffered() = %d", got)
	}
}
