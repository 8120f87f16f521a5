package gateway

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"strings"
)

// Content codings (RFC 9110 §8.4.1) the gateway decodes, in both
// directions: gzip (x-gzip, RFC 1952) and deflate, which RFC 9110 §8.4.1.2
// defines as the zlib format (RFC 1950) around deflate data. A raw deflate
// stream without the zlib header is not "deflate" and is refused as
// corrupt, as is data after the end of a gzip or zlib stream. identity is
// no coding.

// codingError is a body the gateway cannot decode: Coding names the content
// coding (as the sender wrote it) and Err is errUnsupportedCoding,
// errTooLarge or the decoder's error.
type codingError struct {
	Coding string
	Err    error
}

func (e *codingError) Error() string { return "content coding " + e.Coding + ": " + e.Err.Error() }
func (e *codingError) Unwrap() error { return e.Err }

var (
	errTooLarge          = errors.New("decoded body exceeds the limit")
	errUnsupportedCoding = errors.New("not supported")
	errTrailingData      = errors.New("data after the end of the compressed stream")
)

// contentCodings returns the content codings of the Content-Encoding field
// values, in the order they were applied (RFC 9110 §8.4: a list, possibly
// across several fields), without identity; nil when there is none.
func contentCodings(values []string) []string {
	var out []string
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			c = strings.TrimSpace(c)
			if c == "" || strings.EqualFold(c, "identity") {
				continue
			}
			out = append(out, c)
		}
	}
	return out
}

// supportedCoding reports whether the gateway decodes coding.
func supportedCoding(coding string) bool {
	switch strings.ToLower(coding) {
	case "gzip", "x-gzip", "deflate":
		return true
	}
	return false
}

// decodeContent undoes codings (contentCodings' order: the last applied is
// undone first). Every stage's output is bounded by limit bytes (0: no
// bound), so a small body that expands enormously is refused with
// errTooLarge without being held. body itself is returned when codings is
// empty.
func decodeContent(codings []string, body []byte, limit int64) ([]byte, error) {
	for _, c := range codings {
		if !supportedCoding(c) {
			return nil, &codingError{Coding: c, Err: errUnsupportedCoding}
		}
	}
	for i := len(codings) - 1; i >= 0; i-- {
		out, err := decodeOne(strings.ToLower(codings[i]), body, limit)
		if err != nil {
			return nil, &codingError{Coding: codings[i], Err: err}
		}
		body = out
	}
	return body, nil
}

// decodeOne undoes one supported coding.
func decodeOne(coding string, body []byte, limit int64) ([]byte, error) {
	src := bytes.NewReader(body) // an io.ByteReader: the decoders read no further than their stream
	var zr io.ReadCloser
	var err error
	if coding == "deflate" {
		zr, err = zlib.NewReader(src)
	} else {
		var gr *gzip.Reader
		if gr, err = gzip.NewReader(src); err == nil {
			zr = gr
		}
	}
	if err != nil {
		return nil, err
	}
	defer zr.Close()
	var r io.Reader = zr
	if limit > 0 {
		r = io.LimitReader(zr, limit+1)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if limit > 0 && int64(len(out)) > limit {
		return nil, errTooLarge
	}
	if src.Len() > 0 {
		// gzip reads concatenated members itself (RFC 1952 §2.2); what
		// remains after a zlib stream is not part of it.
		return nil, errTrailingData
	}
	return out, nil
}
