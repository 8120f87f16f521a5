package gateway

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func zlibOf(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func rawDeflateOf(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.BestSpeed)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// encodeAll applies codings in order, as a sender does.
func encodeAll(codings []string, b []byte) []byte {
	for _, c := range codings {
		switch strings.ToLower(c) {
		case "gzip", "x-gzip":
			b = gzipOf(b)
		case "deflate":
			b = zlibOf(b)
		}
	}
	return b
}

func TestDecodeContent(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	ok := []struct {
		header []string
		body   []byte
	}{
		{nil, msg},
		{[]string{"identity"}, msg},
		{[]string{"gzip"}, gzipOf(msg)},
		{[]string{"X-GZIP"}, gzipOf(msg)},
		{[]string{"deflate"}, zlibOf(msg)},
		{[]string{"gzip, deflate"}, zlibOf(gzipOf(msg))},
		{[]string{"deflate,gzip"}, gzipOf(zlibOf(msg))},
		{[]string{"gzip", "identity, deflate"}, zlibOf(gzipOf(msg))},
		{[]string{"gzip"}, append(gzipOf(msg[:10]), gzipOf(msg[10:])...)}, // two members (RFC 1952 §2.2)
	}
	for _, tt := range ok {
		out, err := decodeContent(contentCodings(tt.header), tt.body, 1<<10)
		if err != nil || !bytes.Equal(out, msg) {
			t.Errorf("%q: %q, %v", tt.header, out, err)
		}
	}
	bad := []struct {
		header []string
		body   []byte
		want   error
		coding string
	}{
		{[]string{"br"}, []byte{1, 2, 3}, errUnsupportedCoding, "br"},
		{[]string{"gzip, zstd"}, gzipOf(msg), errUnsupportedCoding, "zstd"},
		{[]string{"compress"}, msg, errUnsupportedCoding, "compress"},
		{[]string{"gzip"}, gzipOf(bytes.Repeat([]byte(" "), 1<<20)), errTooLarge, "gzip"},
		{[]string{"gzip, gzip"}, gzipOf(gzipOf(bytes.Repeat([]byte(" "), 1<<20))), errTooLarge, "gzip"},
		{[]string{"gzip"}, []byte("not gzip"), nil, "gzip"},
		{[]string{"gzip"}, gzipOf(msg)[:20], nil, "gzip"},
		{[]string{"gzip"}, append(gzipOf(msg), "junk"...), nil, "gzip"},
		{[]string{"deflate"}, rawDeflateOf(msg), nil, "deflate"},
		{[]string{"deflate"}, append(zlibOf(msg), "junk"...), errTrailingData, "deflate"},
		{[]string{"gzip, deflate"}, zlibOf(msg), nil, "gzip"},
	}
	for _, tt := range bad {
		out, err := decodeContent(contentCodings(tt.header), tt.body, 1<<10)
		var ce *codingError
		if err == nil || !errors.As(err, &ce) || ce.Coding != tt.coding || tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%q: %q, %v; want a %s error (%v)", tt.header, out, err, tt.coding, tt.want)
		}
	}
}

// The request side uses the same decoder: deflate and stacked codings are
// decoded, a coding it does not know is 415 naming it, a bomb 413.
func TestDecodeBody(t *testing.T) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	for _, enc := range []string{"deflate", "gzip, deflate"} {
		out, changed, e := decodeBody(enc, encodeAll(contentCodings([]string{enc}), msg), 1<<10)
		if e != nil || !changed || !bytes.Equal(out, msg) {
			t.Errorf("%s: %q %v %v", enc, out, changed, e)
		}
	}
	if _, _, e := decodeBody("gzip, br", msg, 1<<10); e == nil || e.Status != 415 || !strings.Contains(e.Message, `"br"`) {
		t.Errorf("gzip, br: %+v", e)
	}
	if _, _, e := decodeBody("deflate", zlibOf(bytes.Repeat([]byte(" "), 1<<20)), 1<<10); e == nil || e.Status != 413 {
		t.Errorf("deflate bomb: %+v", e)
	}
	if _, _, e := decodeBody("deflate", rawDeflateOf(msg), 1<<10); e == nil || e.Status != 400 || !strings.HasPrefix(e.Message, "request body is not valid deflate: ") {
		t.Errorf("raw deflate: %+v", e)
	}
}

func TestSameID(t *testing.T) {
	tests := []struct {
		answer, req string
		isError     bool
		same        bool
	}{
		{`1`, `1`, false, true},
		{`1.0`, `1`, false, true},
		{`1e0`, `1`, false, true},
		{`9007199254740992`, `9007199254740993`, false, true}, // rounded to a double
		{`"a"`, `"a"`, false, true},
		{`"\u0061"`, `"a"`, false, true},
		{`null`, `7`, true, true}, // the upstream could not read the id
		{`null`, `7`, false, false},
		{`2`, `1`, false, false},
		{`"1"`, `1`, false, false},
		{`"a"`, `"b"`, false, false},
		{`1e400`, `2e400`, false, false},
	}
	for _, tt := range tests {
		m := &mcp.Message{Kind: mcp.KindResponse, ID: jsontext.Value(tt.answer), Result: jsontext.Value(`{}`)}
		if tt.isError {
			m.Result, m.Error = nil, jsontext.Value(`{"code":-32700,"message":"x"}`)
		}
		if got := sameID(m, jsontext.Value(tt.req)); got != tt.same {
			t.Errorf("sameID(%s, %s) = %v", tt.answer, tt.req, got)
		}
	}
}

// FuzzDecodeContent: whatever the body and the codings, decodeContent
// never panics and never returns more than the limit; what a sender
// encodes with supported codings decodes to itself (within the limit) or
// is refused as too large.
func FuzzDecodeContent(f *testing.F) {
	msg := []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)
	f.Add("gzip", gzipOf(msg), false)
	f.Add("deflate", zlibOf(msg), false)
	f.Add("gzip, deflate", zlibOf(gzipOf(msg)), false)
	f.Add("gzip", gzipOf(bytes.Repeat([]byte("a"), 5000)), false)
	f.Add("deflate", rawDeflateOf(msg), false)
	f.Add("br", msg, false)
	f.Add("gzip, deflate", msg, true)
	f.Add("x-gzip,identity", msg, true)
	f.Fuzz(func(t *testing.T, header string, body []byte, encode bool) {
		const limit = 4096
		codings := contentCodings([]string{header})
		in := body
		if encode {
			for _, c := range codings {
				if !supportedCoding(c) {
					return
				}
			}
			in = encodeAll(codings, body)
		}
		out, err := decodeContent(codings, in, limit)
		if err == nil && len(out) > limit && len(codings) > 0 {
			t.Fatalf("%d bytes decoded, limit %d", len(out), limit)
		}
		if err != nil {
			var ce *codingError
			if !errors.As(err, &ce) || ce.Coding == "" {
				t.Fatalf("error without its coding: %v", err)
			}
		}
		if encode && len(codings) > 0 {
			switch {
			case len(body) > limit:
				if !errors.Is(err, errTooLarge) {
					t.Fatalf("%d bytes over the limit: %v", len(body), err)
				}
			case err != nil || !bytes.Equal(out, body):
				t.Fatalf("round trip through %q: %v", header, err)
			}
		}
	})
}
