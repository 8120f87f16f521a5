package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway/extproc"
)

// grpcHeadroom is added to the body limit for the largest gRPC message: a
// ProcessingRequest carries the body plus headers and attributes.
const grpcHeadroom = 1 << 20

// grpcServer is the ext_proc listener with its health service.
type grpcServer struct {
	srv    *grpc.Server
	health *health.Server
	addr   string
}

// startGRPC listens on e.Address (host:port or unix:/path) and serves the
// ext_proc service and grpc.health.v1.Health (overall and per service).
func startGRPC(e config.ExtProcListener, svc extprocv3.ExternalProcessorServer, maxBody int64, errc chan<- error) (*grpcServer, error) {
	opts := extproc.GRPCServerOptions(int(maxBody) + grpcHeadroom)
	if e.TLS.CertFile != "" {
		tc, err := serverTLS(e.TLS)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	network, address := "tcp", e.Address
	if path, ok := strings.CutPrefix(e.Address, "unix:"); ok {
		network, address = "unix", path
		// A socket left by a previous run would block the listen.
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, err
	}
	g := &grpcServer{srv: grpc.NewServer(opts...), health: health.NewServer(), addr: ln.Addr().String()}
	if network == "unix" {
		g.addr = "unix:" + address
	}
	extprocv3.RegisterExternalProcessorServer(g.srv, svc)
	healthpb.RegisterHealthServer(g.srv, g.health)
	g.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	g.health.SetServingStatus(extprocv3.ExternalProcessor_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	go func() {
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errc <- err
		}
	}()
	return g, nil
}

// stop reports NOT_SERVING (so Envoy's health checks move away), lets
// in-flight streams finish until ctx ends, then closes what is left.
func (g *grpcServer) stop(ctx context.Context) {
	g.health.Shutdown()
	done := make(chan struct{})
	go func() { g.srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		g.srv.Stop()
	}
}

func serverTLS(t config.TLS) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("extproc tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("extproc tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("extproc tls: no certificate in %s", t.ClientCAFile)
		}
		tc.ClientCAs = pool
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return tc, nil
}
