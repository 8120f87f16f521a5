package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// The loop brake's key is made lazily while no failure is remembered
// (limits.go): a call forwarded then must still count. Here a call goes
// out while the brake remembers nothing, two identical calls fail
// meanwhile, then the first one's success ends the run: the next identical
// call runs instead of being braked. A failure of a lazily keyed call
// starts a run like any other.
func TestLoopBrakeLazyKey(t *testing.T) {
	ctx := context.Background()
	lim := &gateway.Limits{
		Limiter:   ratelimit.NewMemory(0),
		Buckets:   map[string]ratelimit.Limit{"reads": {Rate: 1000, Period: time.Minute, Burst: 1000}, "writes": {Rate: 1000, Period: time.Minute, Burst: 1000}},
		LoopBrake: 3,
	}
	p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithLimits(lim))...)
	ok := `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"id":"N-1"}}}`
	fail := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Error: no"}],"isError":true}}`
	call := func(id string) *gateway.Exchange {
		t.Helper()
		x, v := p.HandleRequest(ctx, toolCall(id, "get_note", `{"text":"lazy"}`))
		if v.Local != nil {
			t.Fatalf("call %s not run: %s", id, v.Local.Body)
		}
		return x
	}

	early := call("1") // forwarded while no failure is remembered
	answer(t, call("2"), 200, fail)
	answer(t, call("3"), 200, fail)
	answer(t, early, 200, ok) // ends the run of two failures
	answer(t, call("4"), 200, fail)
	answer(t, call("5"), 200, fail)
	// A new run of two: the third identical call is braked.
	_, v := p.HandleRequest(ctx, toolCall("6", "get_note", `{"text":"lazy"}`))
	if v.Local == nil {
		t.Fatal("third identical failing call was forwarded")
	}
	if a := decodeAnswer(t, v); code(t, a) != "stop_and_ask" {
		t.Fatalf("third identical failing call: %s", v.Local.Body)
	}
}
