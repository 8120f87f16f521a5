package proxy

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/mcpgate/mcpgate/gateway"
)

// eventReader turns the upstream's SSE body into the relayed stream: every
// Read returns the events completed by one upstream read (so the reverse
// proxy writes and flushes them at once), never the whole stream. Each
// read goes through the exchange's ResponseEvents phase.
//
// When the exchange can add events of its own (a tools/list_changed
// announcement, Exchange.Announcements), the upstream is read by a pump
// goroutine and Read waits for whichever comes first: the upstream's next
// chunk or the announcement, so mcpgate's event goes out at once on an
// idle stream.
type eventReader struct {
	ctx  context.Context
	src  io.ReadCloser
	x    *gateway.Exchange
	in   []byte
	out  []byte
	off  int
	err  error
	emit func([]byte) error

	wake   <-chan struct{} // nil: no events of the exchange's own; read src directly
	chunks chan chunk      // from the pump
	ack    chan struct{}   // the pump may reuse in
	closed chan struct{}   // Close was called
	once   sync.Once

	ks killSwitch // wakes the reader when a kill switch turns on (killswitch.go)
}

// chunk is one read of the upstream body by the pump.
type chunk struct {
	n   int
	err error
}

func newEventReader(ctx context.Context, src io.ReadCloser, x *gateway.Exchange) *eventReader {
	r := &eventReader{ctx: ctx, src: src, x: x, in: make([]byte, 32<<10), wake: x.Announcements(ctx), closed: make(chan struct{})}
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

// next returns the upstream's next read (fromPump), or nothing when an
// announcement is due first.
func (r *eventReader) next() (n int, err error, fromPump bool) {
	if r.wake == nil {
		n, err = r.src.Read(r.in)
		return n, err, false
	}
	select {
	case c := <-r.chunks:
		return c.n, c.err, true
	case <-r.wake:
		return 0, nil, false
	}
}

func (r *eventReader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		n, err, fromPump := r.next()
		rerr := r.x.ResponseEvents(r.ctx, r.in[:n], err, r.emit)
		switch {
		case errors.Is(rerr, gateway.ErrStreamStopped):
			r.err = io.EOF // the kill switch's event, then the end
			continue
		case rerr != nil:
			err = rerr
		case err != nil && !errors.Is(err, io.EOF) && len(r.out) > r.off:
			// The upstream cut the stream: the client gets an error
			// event for its request, then a clean end.
			err = io.EOF
		}
		if fromPump && err == nil {
			r.ack <- struct{}{} // the pump waits for it before reading again
		}
		r.err = err
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

func (r *eventReader) Close() error {
	r.once.Do(func() { close(r.closed) })
	r.ks.unwatch()
	return r.src.Close()
}
