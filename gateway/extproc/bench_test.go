package extproc_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/mcpgate/mcpgate/gateway/extproc"
)

// BenchmarkExtProcToolsCall measures mcpgate's side of one proxied
// tools/call through ext_proc, gRPC included (client and server in one
// process over loopback TCP): stream open, request headers, buffered
// request body with the policy decision, response headers (an SSE answer
// mcpgate need not see: body mode NONE). Target ≤ 150 µs.
func BenchmarkExtProcToolsCall(b *testing.B) {
	c := client(b)
	ctx := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		toolsCall(b, ctx, c)
	}
	// CPU of the whole process (mcpgate's server and the gRPC client that
	// stands in for Envoy) per call: an upper bound for mcpgate's own CPU.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkExtProcServerCPU is BenchmarkExtProcToolsCall with the ext_proc
// server in a process of its own (this test binary run again, see
// TestServeForBench), so that server-µs/op is the server's CPU alone —
// gRPC, protobuf, the adapter and the pipeline — per tools/call, as
// a budget counts it; client-µs/op is the gRPC client
// playing Envoy. Both are utime+stime, the server's from
// /proc/<pid>/stat (proc(5)) in 10 ms ticks: run it for a second or more.
// allocs/op counts the client only.
func BenchmarkExtProcServerCPU(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestServeForBench$")
	cmd.Env = append(os.Environ(), serveForBenchEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("server process: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	conn, err := grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	c := extprocv3.NewExternalProcessorClient(conn)
	ctx := context.Background()
	toolsCall(b, ctx, c) // connect
	b.ReportAllocs()
	srv0, cpu0 := pidCPU(b, cmd.Process.Pid), processCPU()
	for b.Loop() {
		toolsCall(b, ctx, c)
	}
	srv, cpu := pidCPU(b, cmd.Process.Pid)-srv0, processCPU()-cpu0
	b.ReportMetric(float64(srv.Microseconds())/float64(b.N), "server-µs/op")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "client-µs/op")
}

const serveForBenchEnv = "MCPGATE_EXTPROC_SERVE_FOR_BENCH"

// TestServeForBench is BenchmarkExtProcServerCPU's server process: the
// ext_proc server of client() on a loopback port, its address on stdout,
// until stdin closes. Skipped unless the benchmark started it.
func TestServeForBench(t *testing.T) {
	if os.Getenv(serveForBenchEnv) == "" {
		t.Skip("the server process of BenchmarkExtProcServerCPU")
	}
	srv := grpc.NewServer(extproc.GRPCServerOptions(2 << 20)...)
	extprocv3.RegisterExternalProcessorServer(srv, server(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(ln.Addr().String())
	_, _ = io.Copy(io.Discard, os.Stdin)
	srv.Stop()
}

var (
	benchHeaders = reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking")
	benchBody    = reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1001","include":"customer"},` + meta + `}}`)
	benchResp    = &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "text/event-stream")}}}
)

// toolsCall plays one allowed tools/call on a stream of its own, as
// Envoy does: request headers, the buffered body, response headers (an
// SSE answer: body mode NONE), then the half-close.
func toolsCall(b *testing.B, ctx context.Context, c extprocv3.ExternalProcessorClient) {
	s, err := c.Process(ctx)
	if err != nil {
		b.Fatal(err)
	}
	exchange(b, s, benchHeaders)
	r := exchange(b, s, benchBody)
	// On a loaded machine the decision may outlast half the message
	// budget: Envoy then gets override_message_timeout before the answer.
	for r.GetResponse() == nil && r.GetOverrideMessageTimeout() != nil {
		var err error
		if r, err = s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
	if r.GetRequestBody() == nil {
		b.Fatalf("refused: %v", r)
	}
	exchange(b, s, benchResp)
	_ = s.CloseSend()
	if _, err := s.Recv(); err == nil {
		b.Fatal("stream not closed")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is a process's utime+stime (/proc/<pid>/stat fields 14 and 15,
// in USER_HZ = 100 ticks per second on Linux).
func pidCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count after its ')'.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// BenchmarkExtProcStream measures the server's own work on one tools/call
// stream without the gRPC transport: Process over a stream that
// unmarshals each message from its wire form (as grpc-go's RecvMsg does)
// and marshals each answer (as Send does). What it reports is the
// adapter and the pipeline alone, free of the network and scheduling
// noise the gRPC benchmarks carry. The JSON answer is buffered, so the
// response body is read too; the SSE answer's body is not (body mode
// NONE). cpu-ns/op is the process's CPU per stream.
func BenchmarkExtProcStream(b *testing.B) {
	s := server(b)
	jsonResp := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "application/json")}}}
	jsonBody := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
		Body: []byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"booking B-1001: confirmed"}]}}`), EndOfStream: true}}}
	for _, tt := range []struct {
		name string
		msgs []*extprocv3.ProcessingRequest
	}{
		{"sse", []*extprocv3.ProcessingRequest{benchHeaders, benchBody, benchResp}},
		{"json", []*extprocv3.ProcessingRequest{benchHeaders, benchBody, jsonResp, jsonBody}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			wire := make([][]byte, len(tt.msgs))
			for i, m := range tt.msgs {
				var err error
				if wire[i], err = proto.Marshal(m); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			cpu0 := processCPU()
			for b.Loop() {
				ctx, cancel := context.WithCancel(context.Background())
				st := &wireStream{ctx: ctx, in: wire}
				if err := s.Process(st); err != nil {
					b.Fatal(err)
				}
				cancel()
				if st.answered != len(wire) {
					b.Fatalf("%d answers to %d messages", st.answered, len(wire))
				}
			}
			// The process's CPU (the collector's included) per stream: less
			// disturbed than the wall clock by other work on the machine.
			b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// wireStream is the server side of an ext_proc stream that delivers
// messages from their wire form and marshals the answers, standing in
// for grpc-go's stream without a connection.
type wireStream struct {
	grpc.ServerStream
	ctx      context.Context
	in       [][]byte
	answered int
}

func (w *wireStream) Context() context.Context { return w.ctx }

func (w *wireStream) RecvMsg(m any) error {
	if len(w.in) == 0 {
		return io.EOF
	}
	msg := w.in[0]
	w.in = w.in[1:]
	return proto.Unmarshal(msg, m.(proto.Message))
}

func (w *wireStream) Recv() (*extprocv3.ProcessingRequest, error) {
	m := new(extprocv3.ProcessingRequest)
	if err := w.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

func (w *wireStream) SendMsg(m any) error {
	r := m.(*extprocv3.ProcessingResponse)
	if r.GetImmediateResponse() != nil {
		return fmt.Errorf("refused: %v", r)
	}
	if _, err := proto.Marshal(r); err != nil {
		return err
	}
	if r.GetResponse() != nil {
		w.answered++
	}
	return nil
}

func (w *wireStream) Send(r *extprocv3.ProcessingResponse) error { return w.SendMsg(r) }
