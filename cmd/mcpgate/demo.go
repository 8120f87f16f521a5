package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
)

// Default demo addresses.
const (
	demoUpstreamAddr = "127.0.0.1:8081"
)

// cmdDemo runs the bundled demo upstream (a naive booking system on the
// official MCP Go SDK) and the gateway in front of it with
// config/examples/quickstart.yaml.
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", stderr)
	listen := fs.String("listen", "", "proxy listener `address` (default from quickstart.yaml: 127.0.0.1:8080)")
	admin := fs.String("admin", "", "admin listener `address` (default 127.0.0.1:9090)")
	upstreamListen := fs.String("upstream-listen", demoUpstreamAddr, "demo upstream `address`")
	extprocAddr := fs.String("extproc", "", "also serve Envoy ext_proc (gRPC) for the demo upstream on `address` (host:port or unix:/path)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		return err
	}
	if *listen != "" {
		cfg.Listeners.Proxy.Address = *listen
	}
	if *admin != "" {
		cfg.Listeners.Admin.Address = *admin
	}
	if *extprocAddr != "" {
		cfg.Listeners.ExtProc.Address = *extprocAddr
	}

	ln, err := net.Listen("tcp", *upstreamListen)
	if err != nil {
		return fmt.Errorf("demo upstream: %w", err)
	}
	// The demo upstream logs each tool call, so a user sees what reaches it.
	mux := http.NewServeMux()
	mux.Handle("/mcp", demo.New(demo.Options{Logger: newLogger(cfg.Log, stderr).With("component", "demo-upstream")}).Handler())
	up := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := up.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(stderr, "demo upstream:", err)
		}
	}()
	defer up.Close()
	for i := range cfg.Upstreams {
		if cfg.Upstreams[i].Name == "demo" {
			cfg.Upstreams[i].URL = "http://" + ln.Addr().String() + "/mcp"
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	return serve(ctx, cfg, log, stdout, func(a *app.App) { demoBanner(stdout, a, ln.Addr().String()) })
}

func demoBanner(w io.Writer, a *app.App, upstream string) {
	u := "http://" + a.ProxyAddr + "/mcp"
	fmt.Fprintf(w, `
mcpgate demo
  MCP endpoint (through mcpgate): %s
  demo upstream (direct, naive):  http://%s/mcp
  metrics:                        http://%s/metrics%s

Point any MCP client at the endpoint above, or try (MCP 2026-07-28):

  curl -s %s -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \
    -d '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

  curl -s %s -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: find_customers' \
    -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"find_customers","arguments":{"query":"a"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

A header that disagrees with the body is refused (400, -32020):

  curl -s %s -H 'Content-Type: application/json' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \
    -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"cancel_booking","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'

Press Ctrl-C to stop.
`, u, upstream, a.AdminAddr, extprocLine(a), u, u, u)
}

func extprocLine(a *app.App) string {
	if a.ExtProcAddr == "" {
		return ""
	}
	return "\n  Envoy ext_proc (gRPC):          " + a.ExtProcAddr + "  (see config/envoy/)"
}
