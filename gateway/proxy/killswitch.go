package proxy

// killSwitch wakes a relayed SSE stream when a kill switch turns on: a
// goroutine (gateway.Exchange.WatchSwitches) closes the upstream body,
// which wakes the reader however long the upstream stays silent; the
// reader's ResponseEvents then relays the switch's event after the last
// complete one and ends the response. The upstream's connection closes
// with it, so nothing more of the request reaches the upstream.
type killSwitch struct {
	cancel func() // stops the watch; nil without one
}

// watchSwitches starts the watch for r's exchange until r is closed.
func (r *eventReader) watchSwitches() {
	r.ks.cancel = r.x.WatchSwitches(r.ctx, func([]byte) { _ = r.src.Close() })
}

func (k *killSwitch) unwatch() {
	if k.cancel != nil {
		k.cancel()
	}
}
