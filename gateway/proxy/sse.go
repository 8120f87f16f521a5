package proxy

import (
	"io"
	"sync"

	"github.com/mcpgate/mcpgate/gateway"
)

// eventReader turns the upstream's SSE body into the relayed stream: every
// Read returns the events completed by one upstream read (so the reverse
// proxy writes and flushes them at once), never the whole stream.
//
// When the rewriter can add events of its own (a tools/list_changed
// announcement, EventRewriter.Wake), the upstream is read by a pump
// goroutine and Read waits for whichever comes first: the upstream's next
// chunk or the rewriter's wake-up, so mcpgate's event goes out at once
// on an idle stream.
type eventReader struct {
	src  io.ReadCloser
	rw   *gateway.EventRewriter
	in   []byte
	out  []byte
	off  int
	err  error
	emit func([]byte) error

	wake   <-chan struct{} // nil: no events of the rewriter's own; read src directly
	chunks chan chunk      // from the pump
	ack    chan struct{}   // the pump may reuse in
	closed chan struct{}   // Close was called
	once   sync.Once

	ks killSwitch // ends the stream when a kill switch turns on (killswitch.go)
}

// chunk is one read of the upstream body by the pump.
type chunk struct {
	n   int
	err error
}

func newEventReader(src io.ReadCloser, rw *gateway.EventRewriter) *eventReader {
	r := &eventReader{src: src, rw: rw, in: make([]byte, 32<<10), wake: rw.Wake(), closed: make(chan struct{})}
	r.emit = func(b []byte) error { r.out = append(r.out, b...); return nil }
	if r.wake != nil {
		r.chunks, r.ack = make(chan chunk), make(chan struct{})
		go r.pump()
	}
	return r
}

// pump reads the upstream body and hands each read to Read, waiting until
// Read has used the buffer.
func (r *eventReader) pump() {
	for {
		n, err := r.src.Read(r.in)
		select {
		case r.chunks <- chunk{n, err}:
		case <-r.closed:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-r.ack:
		case <-r.closed:
			return
		}
	}
}

// next returns the upstream's next read (fromPump), or 0 and the error of
// relaying the rewriter's own events when it woke up first.
func (r *eventReader) next() (n int, err error, fromPump bool) {
	if r.wake == nil {
		n, err = r.src.Read(r.in)
		return n, err, false
	}
	select {
	case c := <-r.chunks:
		return c.n, c.err, true
	case <-r.wake:
		return 0, r.rw.Pending(r.emit), false
	}
}

func (r *eventReader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		n, err, fromPump := r.next()
		if r.ks.stopped(r) {
			continue // the kill switch's event, then the end
		}
		if n > 0 {
			if werr := r.rw.Write(r.in[:n], r.emit); werr != nil {
				err = werr
			} else if r.wake != nil {
				err = cmpErr(r.rw.Pending(r.emit), err)
			}
		}
		if fromPump && err == nil {
			r.ack <- struct{}{} // the pump waits for it before reading again
		}
		if err != nil {
			if err == io.EOF {
				if ferr := r.rw.Flush(r.emit); ferr != nil {
					err = ferr
				}
			} else if berr := r.rw.Broken(r.emit); berr == nil && len(r.out) > r.off {
				// The upstream cut the stream: the client gets an error
				// event for its request, then a clean end.
				err = io.EOF
			}
			r.err = err
		}
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// cmpErr returns the first non-nil error.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (r *eventReader) Close() error {
	r.once.Do(func() { close(r.closed) })
	r.ks.unwatch()
	return r.src.Close()
}
