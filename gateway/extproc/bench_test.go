package extproc_test

import (
	"context"
	"syscall"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// BenchmarkExtProcToolsCall measures mcpgate's side of one proxied
// tools/call through ext_proc, gRPC included (client and server in one
// process over loopback TCP): stream open, request headers, buffered
// request body with the policy decision, response headers (an SSE answer
// mcpgate need not see: body mode NONE). Target ≤ 150 µs.
func BenchmarkExtProcToolsCall(b *testing.B) {
	c := client(b)
	hdrs := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking")
	body := reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1001","include":"customer"},` + meta + `}}`)
	resp := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "text/event-stream")}}}
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		s, err := c.Process(ctx)
		if err != nil {
			b.Fatal(err)
		}
		exchange(b, s, hdrs)
		if r := exchange(b, s, body); r.GetRequestBody() == nil {
			b.Fatalf("refused: %v", r)
		}
		exchange(b, s, resp)
		_ = s.CloseSend()
		if _, err := s.Recv(); err == nil {
			b.Fatal("stream not closed")
		}
	}
	// CPU of the whole process (mcpgate's server and the gRPC client that
	// stands in for Envoy) per call: an upper bound for mcpgate's own CPU.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
