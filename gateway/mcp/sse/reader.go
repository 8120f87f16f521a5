package sse

import (
	"errors"
	"io"
)

// readSize is the size of a Reader's read buffer.
const readSize = 32 << 10

// maxEmptyReads is how many successive (0, nil) reads a Reader tolerates
// before giving up with io.ErrNoProgress.
const maxEmptyReads = 100

// Reader reads raw event blocks from an io.Reader, one per call, with the
// same splitting as a Splitter (including the separate BOM block).
type Reader struct {
	r    io.Reader
	s    Splitter
	rbuf []byte
	err  error // read error, returned once the data before it is used up
}

// NewReader returns a Reader of the event stream r whose events may be at
// most max bytes (0: DefaultMaxEvent; negative: no limit).
func NewReader(r io.Reader, max int) *Reader {
	return &Reader{r: r, s: Splitter{Max: max}}
}

// Next returns the next raw block. raw is valid until the next call to Next
// or Reset; it may alias the Reader's buffers.
//
// At the end of the stream, the bytes held back, as Splitter.Flush hands
// them out (usually an event the stream ended without dispatching; see
// Complete), are returned as a last block, then io.EOF. A read error other than io.EOF is returned as soon as
// the complete blocks before it are consumed, and the held-back bytes are
// dropped. ErrEventTooLarge and read errors are sticky.
func (r *Reader) Next() (raw []byte, err error) {
	empty := 0
	for {
		raw, ok, err := r.s.next()
		if ok || err != nil {
			return raw, err
		}
		if r.err != nil {
			if errors.Is(r.err, io.EOF) {
				if raw := r.s.end(); len(raw) > 0 {
					return raw, nil
				}
			}
			return nil, r.err
		}
		if r.rbuf == nil {
			r.rbuf = make([]byte, readSize)
		}
		n, err := r.r.Read(r.rbuf)
		if n > 0 {
			empty = 0
			r.s.feed(r.rbuf[:n])
		} else if err == nil {
			if empty++; empty >= maxEmptyReads {
				err = io.ErrNoProgress
			}
		}
		r.err = err
	}
}

// Buffered returns the number of bytes read but not yet returned.
func (r *Reader) Buffered() int {
	return r.s.Buffered() + len(r.s.p) - r.s.bs
}

// Reset makes r read a new stream from src, keeping its buffers and limit.
func (r *Reader) Reset(src io.Reader) {
	r.s.Reset()
	r.r, r.err = src, nil
}
