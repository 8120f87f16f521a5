package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// The loop brake counts a shaped tools/call result as failed exactly when
// the result the client gets says "isError": true — the shaper reports it
// from its own pass (shape.ToolResultError) instead of settle reading the
// result again. Escaped member names count, a non-literal value does not,
// and a member the secret names drop is not in what the client gets.
func TestLoopBrakeFollowsShapedIsError(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		secrets []string
		result  string
		failed  bool
	}{
		{"error", nil, `{"content":[],"structuredContent":{"service":"db","region":"x"},"isError":true}`, true},
		{"escaped name", nil, `{"content":[],"structuredContent":{"service":"db"},"is\u0045rror":true}`, true},
		{"success", nil, `{"content":[],"structuredContent":{"service":"db","region":"x"},"isError":false}`, false},
		{"absent", nil, `{"content":[],"structuredContent":{"service":"db","region":"x"}}`, false},
		{"string", nil, `{"content":[],"structuredContent":{"service":"db"},"isError":"true"}`, false},
		{"nested", nil, `{"content":[],"structuredContent":{"service":"db","isError":true}}`, false},
		{"dropped as a secret", []string{"*error*"}, `{"content":[],"structuredContent":{"service":"db"},"isError":true}`, false},
		{"unchanged error", []string{"password"}, `{"content":[],"structuredContent":{"service":"db"},"isError":true}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lim := &gateway.Limits{Limiter: ratelimit.NewMemory(0), Buckets: map[string]ratelimit.Limit{
				"reads": {Rate: 1000, Period: time.Minute, Burst: 1000}}, LoopBrake: 3}
			p := gatewaytest.New(t, gatewaytest.WithDecls(exchangeDecls), gatewaytest.WithAuth(&fakeAuth{}), gatewaytest.WithCatalog(exchangeCatalog()),
				gatewaytest.WithLimits(lim), gatewaytest.WithMetrics(nil),
				gatewaytest.With(gateway.Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64, SecretNames: c.secrets}))
			answer := []byte(`{"jsonrpc":"2.0","id":7,"result":` + c.result + `}`)
			for i := range 2 {
				x, v := p.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(exchangeCall)))
				if v.Local != nil {
					t.Fatalf("call %d refused: %s", i, v.Local.Body)
				}
				if _, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil {
					t.Fatal(err)
				}
				if _, _, err := x.ResponseBody(ctx, answer); err != nil {
					t.Fatal(err)
				}
				x.Finish()
			}
			_, v := p.HandleRequest(ctx, exchangeRequest("good-status:read", []byte(exchangeCall)))
			braked := v.Local != nil && strings.Contains(string(v.Local.Body), "stop_and_ask")
			if braked != c.failed {
				t.Fatalf("third identical call braked %v, want %v (%+v)", braked, c.failed, v.Local)
			}
		})
	}
}
