package envoydriver

import (
	"context"
	"sync"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/metadata"
)

// fifo is an unbounded queue consumed by one goroutine. Envoy's async gRPC
// client and codecs buffer writes, so the filter never blocks on a slow peer;
// the driver's event loop must not block either.
type fifo[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	wake   chan struct{}
}

func newFIFO[T any]() *fifo[T] { return &fifo[T]{wake: make(chan struct{}, 1)} }

func (q *fifo[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	q.signal()
}

func (q *fifo[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
}

func (q *fifo[T]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop blocks until an item is available (true) or the queue is closed and
// drained, or done is closed (false).
func (q *fifo[T]) pop(done <-chan struct{}) (T, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			var zero T
			q.items[0] = zero
			q.items = q.items[1:]
			q.mu.Unlock()
			return v, true
		}
		closed := q.closed
		q.mu.Unlock()
		if closed {
			var zero T
			return zero, false
		}
		select {
		case <-q.wake:
		case <-done:
			var zero T
			return zero, false
		}
	}
}

// recvResult is one event from the side stream: a response, or the end of
// the stream (err is io.EOF for an OK status).
type recvResult struct {
	resp *extprocv3.ProcessingResponse
	err  error
}

// sidestream is one ExternalProcessor.Process stream. Like Envoy's
// ExternalProcessorStreamImpl it is opened asynchronously: sends are queued
// and a failure to open surfaces as a stream error on the receive channel.
type sidestream struct {
	d      *Driver
	ctx    context.Context
	cancel context.CancelFunc
	sendQ  *fifo[*extprocv3.ProcessingRequest]
	recvCh chan<- recvResult
	loop   <-chan struct{} // closed when the exchange's event loop ends
	done   chan struct{}   // closed when the receive side has ended
}

func (d *Driver) openSidestream(parent context.Context, recvCh chan<- recvResult, loop <-chan struct{}) *sidestream {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	if len(d.cfg.GRPCInitialMetadata) > 0 {
		ctx = metadata.NewOutgoingContext(ctx, metadata.New(d.cfg.GRPCInitialMetadata))
	}
	s := &sidestream{d: d, ctx: ctx, cancel: cancel, sendQ: newFIFO[*extprocv3.ProcessingRequest](),
		recvCh: recvCh, loop: loop, done: make(chan struct{})}
	go s.run()
	return s
}

func (s *sidestream) run() {
	stream, err := s.d.client.Process(s.ctx)
	if err != nil {
		s.deliver(recvResult{err: err})
		close(s.done)
		return
	}
	s.d.st.streamsStarted.Add(1)
	go func() {
		defer close(s.done)
		for {
			resp, err := stream.Recv()
			s.deliver(recvResult{resp: resp, err: err})
			if err != nil {
				return
			}
		}
	}()
	for {
		req, ok := s.sendQ.pop(s.ctx.Done())
		if !ok {
			break
		}
		// A failed Send means the stream is broken; Recv reports why.
		if err := stream.Send(req); err != nil {
			break
		}
	}
	if s.ctx.Err() == nil {
		_ = stream.CloseSend()
	}
}

// deliver hands a result to the event loop, or drops it once the loop is over.
func (s *sidestream) deliver(r recvResult) {
	select {
	case s.recvCh <- r:
	case <-s.loop:
	}
}

func (s *sidestream) send(req *extprocv3.ProcessingRequest) { s.sendQ.push(req) }

// closeNow models ExternalProcessorStreamImpl::close: half-close and reset.
func (s *sidestream) closeNow() {
	s.sendQ.close()
	s.cancel()
}

// closeGracefully models closeStreamMaybeGraceful with graceful gRPC close:
// half-close, wait up to the remote close timeout for the server to finish,
// then reset. Once the driver is closing, the stream is reset at once.
func (s *sidestream) closeGracefully() {
	s.sendQ.close()
	if !s.d.background() {
		s.cancel()
		return
	}
	go func() {
		defer s.d.bg.Done()
		t := time.NewTimer(remoteCloseTimeout)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
		}
		s.cancel()
	}()
}
