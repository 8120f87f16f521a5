package gateway_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/mcp/sse"
)

// FuzzEventRewriterChunks: however the upstream's SSE stream is cut into
// chunks (inside events, inside CRLF, inside multi-byte UTF-8), the relayed
// bytes are the same as for the stream fed whole, and a hidden tool never
// gets through.
func FuzzEventRewriterChunks(f *testing.F) {
	p := gatewaytest.New(f, gatewaytest.WithDecls(benchDecls), gatewaytest.With(gateway.Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 32, MaxSSEEventBytes: 1 << 16}))
	req := &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo",
		Header: mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/list"}},
		Body:   []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`)}
	stream := "event: message\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1,\"message\":\"größer ✓\"}}\r\n\r\n" +
		": keep-alive\n\n" +
		"id: 7\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"tools\":[{\"name\":\"get_booking\",\"description\":\"Bücher 📚\"},{\"name\":\"hidden_tool\"}]}}\n\n"
	f.Add([]byte(stream), []byte{3, 17, 1, 200})
	f.Add([]byte(stream), []byte{1})
	f.Fuzz(func(t *testing.T, data, cuts []byte) {
		run := func(chunks [][]byte) []byte {
			x, v := p.HandleRequest(context.Background(), req)
			if v.Local != nil {
				t.Fatalf("refused: %s", v.Local.Body)
			}
			if mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"text/event-stream"}}); err != nil || mode != gateway.StreamSSE {
				t.Fatalf("mode %v %v", mode, err)
			}
			rw := x.NewEventRewriter(context.Background())
			var out bytes.Buffer
			emit := func(b []byte) error { out.Write(b); return nil }
			for _, c := range chunks {
				if err := rw.Write(c, emit); err != nil {
					t.Fatal(err)
				}
			}
			if err := rw.Flush(emit); err != nil {
				t.Fatal(err)
			}
			return out.Bytes()
		}
		whole := run([][]byte{data})
		var chunks [][]byte
		rest := data
		for i := 0; len(rest) > 0; i++ {
			n := 1
			if len(cuts) > 0 {
				n = int(cuts[i%len(cuts)])%len(rest) + 1
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		split := run(chunks)
		if !bytes.Equal(whole, split) {
			t.Fatalf("chunking changed the output:\nwhole %q\nsplit %q", whole, split)
		}
		// What a client decodes: the data of each complete event.
		sp := sse.NewSplitter(-1)
		_ = sp.Write(whole, func(raw []byte) error {
			ev := sse.Parse(raw)
			if msg, err := mcp.Parse(bytes.TrimLeft(ev.Data, " \t\r\n"), 32); err == nil && msg.Kind == mcp.KindResponse &&
				string(msg.ID) == "1" && bytes.Contains(msg.Result, []byte(`"hidden_tool"`)) {
				t.Fatalf("hidden tool relayed in the answer: %q", raw)
			}
			return nil
		})
	})
}
