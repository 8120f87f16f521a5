package gateway

import (
	"context"
	"errors"
	"io"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Phases is the contract between an adapter and the pipeline: after the
// request phase (Pipeline.HandleRequest: request in, Verdict out), one
// method per phase of the upstream's answer. *Exchange implements it.
//
// An adapter calls ResponseHeaders once, then, as the mode says, nothing
// (PassThrough), ResponseBody once (BufferJSON) or ResponseEvents per
// chunk (StreamSSE), and End once when the exchange is over, whatever
// happened; End gives the answer to send when the upstream failed.
type Phases interface {
	// ResponseHeaders takes the upstream's status and header fields and
	// says how its body is relayed. With kill switches configured, an
	// event stream is relayed event by event so that a switch can end
	// it. An error withholds the answer: End(err) gives the one to send.
	ResponseHeaders(status int, h mcp.Header) (ResponseMode, error)
	// ResponseBody takes a whole BufferJSON body and returns the bytes to
	// relay; changed: they differ (set their length, remove
	// content-encoding). An error withholds the answer, as above.
	ResponseBody(ctx context.Context, body []byte) (out []byte, changed bool, err error)
	// ResponseEvents takes a chunk of a StreamSSE body and emits the
	// bytes to relay. end is nil while the stream goes on, io.EOF at its
	// end (chunk holds its last bytes, if any), any other error when the
	// upstream cut it. An empty chunk relays only mcpgate's own events
	// (Announcements). ErrStreamStopped: a kill switch ended the stream;
	// the adapter ends the response after what was emitted.
	ResponseEvents(ctx context.Context, chunk []byte, end error, emit func([]byte) error) error
	// End ends the exchange: metrics, held slots and claims released.
	// err is nil when the answer was relayed (or answered locally), else
	// why not: ErrUpstreamResponse from a phase, or the transport's error,
	// joined with ErrUnreached when nothing reached the upstream and with
	// ErrDeadline when the call's deadline (Verdict.Deadline) passed. It
	// returns the answer to send in place of the upstream's, nil when
	// none is due (the client went away: context.Canceled). Calls after
	// the first return nil.
	End(err error) *Local
}

var _ Phases = (*Exchange)(nil)

// Errors an adapter joins to the transport's error it gives End, or gets
// from ResponseEvents.
var (
	// ErrUnreached: the request never reached the upstream (the
	// connection could not be made); a write's claim is released so a
	// retry runs it.
	ErrUnreached = errors.New("the upstream could not be reached")
	// ErrDeadline: the call's own deadline passed (Verdict.Deadline).
	ErrDeadline = errors.New("the call's deadline passed")
	// ErrStreamStopped: a kill switch ended the stream.
	ErrStreamStopped = errors.New("a kill switch ended the stream")
)

// End implements Phases.
func (x *Exchange) End(err error) *Local {
	if x.ended {
		return nil
	}
	x.ended = true
	defer x.finish()
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrUnreached) {
		x.release() // nothing reached the upstream
	}
	if errors.Is(err, ErrDeadline) {
		if l := x.deadlineExceeded(x.deadline); l != nil {
			return x.withExtra(l)
		}
	}
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return x.withExtra(x.failure(err))
}

// ResponseEvents implements Phases.
func (x *Exchange) ResponseEvents(ctx context.Context, chunk []byte, end error, emit func([]byte) error) error {
	if x.p.opts.Switches != nil {
		if ev := x.stopStream(); ev != nil {
			if x.stopSent {
				return ErrStreamStopped
			}
			x.stopSent = true
			if err := emit(ev); err != nil {
				return err
			}
			return ErrStreamStopped
		}
	}
	w := x.eventRewriter(ctx)
	if len(chunk) > 0 {
		if err := w.Write(chunk, emit); err != nil {
			return err
		}
	}
	if err := w.Pending(emit); err != nil {
		return err
	}
	switch {
	case end == nil:
		return nil
	case errors.Is(end, io.EOF):
		return w.Flush(emit)
	}
	return w.Broken(emit)
}

// Announcements returns a channel that is signalled when mcpgate has
// events of its own to add to a StreamSSE answer (a tools/list_changed
// announcement), nil when it never will. An adapter that can write
// without an upstream chunk (the standalone proxy) waits on it too and
// then calls ResponseEvents with no chunk; ext_proc adds them to the
// upstream's next chunk.
func (x *Exchange) Announcements(ctx context.Context) <-chan struct{} {
	return x.eventRewriter(ctx).Wake()
}

// eventRewriter is the exchange's EventRewriter, made on first use.
func (x *Exchange) eventRewriter(ctx context.Context) *EventRewriter {
	if x.events == nil {
		x.events = x.NewEventRewriter(ctx)
	}
	return x.events
}
