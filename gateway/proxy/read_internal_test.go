package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
)

// TestReadAll: readAll returns exactly what io.ReadAll (bounded like
// io.LimitReader) returns, whatever the hint says — right, too small, too
// large or unknown — and with readers that return little at a time; a
// right hint costs one allocation of hint+1 bytes.
func TestReadAll(t *testing.T) {
	data := make([]byte, 20000)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
		"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	for _, size := range []int{0, 1, 300, 4095, 4096, 4097, 9999, 10000, 10001, 20000} {
		for _, hint := range []int64{-1, 0, 10, int64(size), int64(size) + 7, 1 << 21} {
			for _, max := range []int64{0, 1, 4096, 10001} {
				for name, mk := range readers {
					in := data[:size]
					want := in
					if max > 0 && int64(len(want)) > max {
						want = want[:max]
					}
					got, err := readAll(mk(in), hint, max)
					if err != nil {
						t.Fatalf("size %d hint %d max %d %s: %v", size, hint, max, name, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("size %d hint %d max %d %s: got %d bytes, want %d", size, hint, max, name, len(got), len(want))
					}
					if max > 0 && int64(cap(got)) > max {
						t.Fatalf("size %d hint %d max %d %s: capacity %d beyond the bound", size, hint, max, name, cap(got))
					}
				}
			}
		}
	}
	if got, _ := readAll(bytes.NewReader(data[:300]), 300, 0); cap(got) != 301 {
		t.Errorf("a right hint: capacity %d, want 301 (one allocation)", cap(got))
	}
	r := bytes.NewReader(nil)
	if n := testing.AllocsPerRun(20, func() { r.Reset(data[:3000]); _, _ = readAll(r, 3000, 10001) }); n > 1 {
		t.Errorf("a right hint: %v allocations, want 1", n)
	}
}

// TestReadAllErrors: a failed read is reported with what came before it.
func TestReadAllErrors(t *testing.T) {
	boom := errors.New("boom")
	got, err := readAll(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(boom)), 10, 0)
	if !errors.Is(err, boom) || string(got) != "abc" {
		t.Errorf("got %q, %v", got, err)
	}
	got, err = readAll(iotest.TimeoutReader(strings.NewReader("abcdef")), -1, 0)
	if !errors.Is(err, iotest.ErrTimeout) {
		t.Errorf("got %q, %v; want the timeout", got, err)
	}
}

// TestFromHTTP: the pipeline's header has every field under
// strings.ToLower of its name — names from the table, other canonical
// names, non-canonical keys — with the values as they were.
func TestFromHTTP(t *testing.T) {
	for k, v := range lowerNames {
		if v != strings.ToLower(k) {
			t.Errorf("lowerNames[%q] = %q", k, v)
		}
		if http.CanonicalHeaderKey(k) != k {
			t.Errorf("lowerNames: %q is not in canonical form", k)
		}
	}
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Authorization":        {"Bearer x"},
		"X-Custom-Thing":       {"a", "b"},
		"x-lower-set-directly": {"c"},
		"MiXeD":                {"d"},
		"Accept":               {},
	}
	got := fromHTTP(h)
	if len(got) != len(h) {
		t.Fatalf("%d fields, want %d: %v", len(got), len(h), got)
	}
	for k, v := range h {
		g, ok := got[strings.ToLower(k)]
		if !ok || len(g) != len(v) || (len(v) > 0 && &g[0] != &v[0]) {
			t.Errorf("%s: got %q (present %v), want the values %q", k, g, ok, v)
		}
	}
}
