package extproc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// TestBodiesBeyondTheWindow: request bodies larger than the fixed
// flow-control window (extproc.FlowControlWindow), several streams at
// once on one connection (together several times the connection's
// window), each arrive whole and are decided on in full: grpc-go grants
// the extra window when it reads a message's length, and the connection
// window is replenished as messages are read.
func TestBodiesBeyondTheWindow(t *testing.T) {
	const argBytes = extproc.FlowControlWindow + extproc.FlowControlWindow/2
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.With(gateway.Options{MaxBodyBytes: 2 * extproc.FlowControlWindow, MaxJSONDepth: 32}))
	srv := grpc.NewServer(extproc.GRPCServerOptions(2*extproc.FlowControlWindow + 1<<20)...)
	extprocv3.RegisterExternalProcessorServer(srv, newServer(t, p))
	c := serveGRPC(t, srv, grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(4*extproc.FlowControlWindow)))

	big := strings.Repeat("x", argBytes)
	allowed := reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1001","include":"` + big + `"},` + meta + `}}`)
	// The same size of body, but the last bytes make it invalid JSON: a
	// decision on a truncated body could not tell.
	broken := reqBody(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1001","include":"` + big + `"},` + meta + `}}}`)
	hdrs := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking")

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			s, err := c.Process(context.Background())
			if err != nil {
				errs <- err
				return
			}
			if err := s.Send(hdrs); err != nil {
				errs <- err
				return
			}
			if _, err := s.Recv(); err != nil {
				errs <- err
				return
			}
			body := allowed
			if i%2 == 1 {
				body = broken
			}
			if err := s.Send(body); err != nil {
				errs <- err
				return
			}
			r, err := s.Recv()
			// Slow work (the race detector) is extended first.
			for err == nil && r.GetResponse() == nil && r.GetOverrideMessageTimeout() != nil {
				r, err = s.Recv()
			}
			switch {
			case err != nil:
				errs <- err
			case i%2 == 0 && r.GetRequestBody() == nil:
				errs <- errors.New("a whole, valid body was not forwarded: " + r.String()[:min(200, len(r.String()))])
			case i%2 == 1 && r.GetImmediateResponse() == nil:
				errs <- errors.New("a body that is not JSON was forwarded")
			}
			_ = s.CloseSend()
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPingFloodStillEndsTheConnection: allowing Envoy's keepalive PINGs
// (extproc.KeepaliveMinTime) keeps grpc-go's enforcement: a client that
// pings far more often than that, on a connection without streams, gets
// GOAWAY ENHANCE_YOUR_CALM (RFC 9113 section 6.8) after grpc-go's three
// strikes. (That Envoy's 30 s interval is at least KeepaliveMinTime is a
// comparison of constants; waiting for three such pings would take 90 s.)
func TestPingFloodStillEndsTheConnection(t *testing.T) {
	srv := grpc.NewServer(extproc.GRPCServerOptions(2 << 20)...)
	extprocv3.RegisterExternalProcessorServer(srv, server(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			break // the server may already have closed the connection
		}
	}
	acks := 0
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended without GOAWAY (%d ping acks): %v", acks, err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			acks++
		case *http2.GoAwayFrame:
			if f.ErrCode != http2.ErrCodeEnhanceYourCalm || string(f.DebugData()) != "too_many_pings" {
				t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", f.ErrCode, f.DebugData())
			}
			return
		}
	}
}
