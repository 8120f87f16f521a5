package extproc_test

import (
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// A request decided again on its stream (request headers and body sent
// twice) ends the exchange the first decision started: its concurrency
// slot is given back when the stream ends.
func TestRepeatedDecisionEndsTheFirst(t *testing.T) {
	slots := ratelimit.NewSlots(2, 0)
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(gatewaytest.CallerAuth{}),
		gatewaytest.WithLimits(&gateway.Limits{Slots: slots}), serverBounds)
	c := serve(t, p)
	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hdrs := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking",
		"authorization", "Bearer tok-1")
	body := reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`)
	for range 2 {
		exchange(t, s, hdrs)
		if r := exchange(t, s, body); r.GetRequestBody() == nil {
			t.Fatalf("refused: %v", r)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("the stream goes on")
	}
	if n := slots.InUse("conn-1"); n != 0 {
		t.Errorf("%d slots in use after the stream ended, want 0", n)
	}
}
