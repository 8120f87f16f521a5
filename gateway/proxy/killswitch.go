package proxy

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/gateway"
)

// killSwitch ends a relayed SSE stream when a kill switch turns on: a
// goroutine (gateway.Exchange.WatchSwitches) takes the stream's last event
// — the JSON-RPC error for the request — and closes the upstream body,
// which wakes the reader however long the upstream stays silent; the
// reader relays that event after the last complete one and ends the
// response. The upstream's connection closes with it, so nothing more of
// the request reaches the upstream.
type killSwitch struct {
	last   atomic.Pointer[[]byte] // set once the switch ended the stream
	cancel func()                 // stops the watch; nil without one
}

// watchSwitches starts the watch for r's exchange x until r is closed.
func (r *eventReader) watchSwitches(ctx context.Context, x *gateway.Exchange) {
	r.ks.cancel = x.WatchSwitches(ctx, func(last []byte) {
		r.ks.last.Store(&last)
		_ = r.src.Close()
	})
}

// stopped reports whether the switch ended the stream; if so the reader's
// output is the last event and then io.EOF (nothing the upstream sent
// afterwards is relayed).
func (k *killSwitch) stopped(r *eventReader) bool {
	ev := k.last.Load()
	if ev == nil || r.err != nil {
		return false
	}
	r.out = append(r.out[:0], *ev...)
	r.off = 0
	r.err = io.EOF
	return true
}

func (k *killSwitch) unwatch() {
	if k.cancel != nil {
		k.cancel()
	}
}
