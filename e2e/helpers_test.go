package e2e

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/envoydriver"
)

// startApp runs the gateway in process with cfg and stops it at cleanup.
func startApp(t *testing.T, cfg *config.Config) *app.App {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = a.Shutdown(sctx)
	})
	return a
}

// startEnvoy runs the Envoy stand-in in front of mcpgate's ext_proc
// listener at target, routing to upstream with the route metadata naming
// the upstream, configured as config/envoy/ configures Envoy (BUFFERED
// bodies, mode override allowed, fail closed).
func startEnvoy(t *testing.T, target, upstream, name string, messageTimeout time.Duration) (*httptest.Server, *envoydriver.Driver) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	cfg := envoydriver.Config{
		Target:   target,
		Upstream: u,
		Mode: &extprocfilterv3.ProcessingMode{
			RequestHeaderMode: extprocfilterv3.ProcessingMode_SEND, RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			ResponseHeaderMode: extprocfilterv3.ProcessingMode_SEND, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED,
			RequestTrailerMode: extprocfilterv3.ProcessingMode_SKIP, ResponseTrailerMode: extprocfilterv3.ProcessingMode_SKIP,
		},
		AllowModeOverride: true,
		MessageTimeout:    messageTimeout,
		MaxMessageTimeout: 5 * time.Second,
		BufferLimit:       5 << 20,
	}
	if name != "" {
		cfg.RequestAttributes = []string{"xds.route_metadata"}
		cfg.RouteMetadata = map[string]map[string]any{"mcpgate": {"upstream": name}}
	}
	d, err := envoydriver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(d)
	t.Cleanup(func() { srv.Close(); _ = d.Close() })
	return srv, d
}
