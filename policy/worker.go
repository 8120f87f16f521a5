package policy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// worker runs handle on queued items in one goroutine, off the request
// path. The queue is bounded: when it is full, an item is dropped and
// counted (decision logs and the shadow policy never slow a decision).
type worker[T any] struct {
	queue   chan T
	pending atomic.Int64 // queued or being handled
	dropped prometheus.Counter
	done    chan struct{}
	once    sync.Once
}

// newWorker starts a worker with a queue of size items.
func newWorker[T any](size int, dropped prometheus.Counter, handle func(T)) *worker[T] {
	w := &worker[T]{queue: make(chan T, size), dropped: dropped, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for it := range w.queue {
			handle(it)
			w.pending.Add(-1)
		}
	}()
	return w
}

// enqueue queues it, or drops and counts it when the queue is full.
func (w *worker[T]) enqueue(it T) {
	w.pending.Add(1)
	select {
	case w.queue <- it:
	default:
		w.pending.Add(-1)
		w.dropped.Inc()
	}
}

// stop closes the queue and waits until what it held is handled, or ctx
// ends. Later enqueues must not happen.
func (w *worker[T]) stop(ctx context.Context) {
	w.once.Do(func() { close(w.queue) })
	select {
	case <-w.done:
	case <-ctx.Done():
	}
}

// wait returns once every queued item was handled, or ctx ends.
func (w *worker[T]) wait(ctx context.Context) error {
	for w.pending.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
