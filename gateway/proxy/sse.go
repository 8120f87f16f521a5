package proxy

import (
	"io"

	"github.com/mcpgate/mcpgate/gateway"
)

// eventReader turns the upstream's SSE body into the relayed stream: every
// Read returns the events completed by one upstream read (so the reverse
// proxy writes and flushes them at once), never the whole stream.
type eventReader struct {
	src  io.ReadCloser
	rw   *gateway.EventRewriter
	in   []byte
	out  []byte
	off  int
	err  error
	emit func([]byte) error
}

func newEventReader(src io.ReadCloser, rw *gateway.EventRewriter) *eventReader {
	r := &eventReader{src: src, rw: rw, in: make([]byte, 32<<10)}
	r.emit = func(b []byte) error { r.out = append(r.out, b...); return nil }
	return r
}

func (r *eventReader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		n, err := r.src.Read(r.in)
		if n > 0 {
			if werr := r.rw.Write(r.in[:n], r.emit); werr != nil {
				r.err = werr
				continue
			}
		}
		if err != nil {
			if err == io.EOF {
				if ferr := r.rw.Flush(r.emit); ferr != nil {
					err = ferr
				}
			}
			r.err = err
		}
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

func (r *eventReader) Close() error { return r.src.Close() }
