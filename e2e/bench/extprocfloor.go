package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// extProcFloor is the ext_proc floor: the least an ext_proc server built on
// go-control-plane and grpc-go can do per HTTP request — receive each
// ProcessingRequest and answer it with an empty response of its kind (Envoy
// continues unchanged). It runs with the grpc-go server options of
// mcpgate's ext_proc listener (extproc.GRPCServerOptions: message sizes,
// stream workers, the fixed flow-control window, keepalive policy; repeated
// here so this binary — also the HTTP floor — links none of mcpgate):
// transport settings any ext_proc server would choose, not pipeline work.
// Its CPU per call is what the protocol and the libraries cost before any
// policy runs.
type extProcFloor struct {
	extprocv3.UnimplementedExternalProcessorServer
}

// Process answers each message with an empty response of its kind.
func (extProcFloor) Process(s extprocv3.ExternalProcessor_ProcessServer) error {
	for {
		req, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		resp := &extprocv3.ProcessingResponse{}
		switch req.Request.(type) {
		case *extprocv3.ProcessingRequest_RequestHeaders:
			resp.Response = &extprocv3.ProcessingResponse_RequestHeaders{RequestHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_RequestBody:
			resp.Response = &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_ResponseHeaders:
			resp.Response = &extprocv3.ProcessingResponse_ResponseHeaders{ResponseHeaders: &extprocv3.HeadersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseBody:
			resp.Response = &extprocv3.ProcessingResponse_ResponseBody{ResponseBody: &extprocv3.BodyResponse{}}
		case *extprocv3.ProcessingRequest_RequestTrailers:
			resp.Response = &extprocv3.ProcessingResponse_RequestTrailers{RequestTrailers: &extprocv3.TrailersResponse{}}
		case *extprocv3.ProcessingRequest_ResponseTrailers:
			resp.Response = &extprocv3.ProcessingResponse_ResponseTrailers{ResponseTrailers: &extprocv3.TrailersResponse{}}
		default:
			return fmt.Errorf("unknown ProcessingRequest %T", req.Request)
		}
		if err := s.Send(resp); err != nil {
			return err
		}
	}
}

// serveExtProcFloor runs the ext_proc floor, prints its address and stops
// when its standard input closes.
func serveExtProcFloor(stdout io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	const maxMsg, window = 6 << 20, 1 << 20
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxMsg), grpc.MaxSendMsgSize(maxMsg),
		grpc.NumStreamWorkers(uint32(8*runtime.GOMAXPROCS(0))),
		grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(window),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}))
	extprocv3.RegisterExternalProcessorServer(srv, extProcFloor{})
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); srv.Stop() }()
	fmt.Fprintf(stdout, "extproc floor ready %s\n", ln.Addr())
	return srv.Serve(ln)
}

// startExtProcFloor runs this program again as the ext_proc floor.
func startExtProcFloor(prof *profiler) (pid int, addr string, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return 0, "", nil, err
	}
	return startChild(self, append([]string{"-extproc-floor"}, prof.floorArgs("extproc-floor")...), "extproc floor ready ")
}
