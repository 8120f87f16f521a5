// Command libfloor is the memory floor under mcpgate's figures: a program
// that links only the libraries mcpgate's design requires and starts
// them the way `mcpgate serve` does — OPA (rego with a prepared query over
// the embedded default policy; the bundle, decision-log and status plugins
// linked), a grpc-go server with go-control-plane's ExternalProcessor and
// the gRPC health service, a client_golang registry with the Go and process
// collectors behind promhttp, the OpenTelemetry SDK with both OTLP trace
// exporters linked, go-oidc, go-redis, bbolt (a database opened),
// jsonschema/v6 (one schema compiled), go-json-experiment and the MCP Go
// SDK — and nothing of mcpgate's own. Its resident memory is what any
// gateway built from these parts holds before its own code runs.
//
// It prints "libfloor ready <addr>" and serves GET /opa (one policy
// evaluation) and /metrics until its standard input closes. The bench
// (e2e/bench) starts it, evaluates the policy under load and reads its
// memory from /proc.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-redis/redis_rate/v10"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/plugins/status"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/santhosh-tekuri/jsonschema/v6"
	bolt "go.etcd.io/bbolt"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	policies "github.com/mcpgate/mcpgate/rego"
)

// linkConfigured makes the libraries mcpgate starts only when configured
// reachable, as they are in mcpgate: the OPA plugin manager with the
// bundle, status and decision-log plugins, go-oidc's discovery, a go-redis
// client with a redis_rate limiter, both OTLP trace exporters. A blank
// `_ = f` would not do: the compiler drops it and the linker keeps none of
// their code. main runs it only when LIBFLOOR_START_CONFIGURED is set, which
// the bench never sets, so their code is in the binary but not started.
func linkConfigured(ctx context.Context) error {
	mgr, err := plugins.New([]byte(`{}`), "libfloor", inmem.New())
	if err != nil {
		return err
	}
	bcfg, err := bundle.NewConfigBuilder().WithBytes(mgr.Config.Bundles).WithServices(mgr.Services()).WithKeyConfigs(mgr.PublicKeys()).Parse()
	if err != nil {
		return err
	}
	mgr.Register(bundle.Name, bundle.New(bcfg, mgr))
	scfg, err := status.NewConfigBuilder().WithBytes(mgr.Config.Status).WithServices(mgr.Services()).WithPlugins(mgr.Plugins()).Parse()
	if err != nil {
		return err
	}
	mgr.Register(status.Name, status.New(scfg, mgr))
	lcfg, err := logs.NewConfigBuilder().WithBytes(mgr.Config.DecisionLogs).WithServices(mgr.Services()).WithPlugins(mgr.Plugins()).Parse()
	if err != nil {
		return err
	}
	mgr.Register(logs.Name, logs.New(lcfg, mgr))
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	defer mgr.Stop(ctx)
	if _, err := oidc.NewProvider(ctx, "http://127.0.0.1:1"); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := redis_rate.NewLimiter(rdb).Allow(ctx, "k", redis_rate.PerSecond(1)); err != nil {
		return err
	}
	ge, err := otlptracegrpc.New(ctx)
	if err != nil {
		return err
	}
	defer ge.Shutdown(ctx)
	he, err := otlptracehttp.New(ctx)
	if err != nil {
		return err
	}
	return he.Shutdown(ctx)
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "libfloor:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	if os.Getenv("LIBFLOOR_START_CONFIGURED") != "" {
		return linkConfigured(ctx)
	}
	mux := http.NewServeMux()

	// OPA: the default policy, compiled and prepared once.
	mods := map[string]*ast.Module{}
	err := fs.WalkDir(policies.Default, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(path, "/") || !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(policies.Default, path)
		if err != nil {
			return err
		}
		m, err := ast.ParseModuleWithOpts(path, string(b), ast.ParserOptions{RegoVersion: ast.RegoV1})
		mods[path] = m
		return err
	})
	if err != nil {
		return err
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1)
	if c.Compile(mods); c.Failed() {
		return c.Errors
	}
	pq, err := rego.New(rego.Query("data.mcpgate.decision"), rego.Compiler(c), rego.Store(inmem.NewFromObject(map[string]any{}))).PrepareForEval(ctx)
	if err != nil {
		return err
	}
	input := map[string]any{"version": 1, "phase": "request",
		"transport": map[string]any{"kind": "http", "method": "POST", "path": "/mcp"},
		"message":   map[string]any{"kind": "request", "method": "tools/call", "name": "get_status", "arguments": map[string]any{"id": "S-1"}},
		"principal": map[string]any{"authenticated": true, "tenant": "acme", "subject": "alice", "rights": []any{"status:read"}}}
	mux.HandleFunc("/opa", func(w http.ResponseWriter, r *http.Request) {
		rs, err := pq.Eval(r.Context(), rego.EvalInput(input))
		if err != nil || len(rs) == 0 {
			http.Error(w, fmt.Sprint("no decision: ", err), http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})

	// gRPC: the ext_proc service and health.
	g := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(g, extprocv3.UnimplementedExternalProcessorServer{})
	healthpb.RegisterHealthServer(g, health.NewServer())
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() { _ = g.Serve(gln) }()

	// Prometheus.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	// OpenTelemetry: a tracer provider without an exporter (none is
	// configured).
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(ctx) }()

	// bbolt, one schema, one JSON decoder, one MCP server value.
	dir, err := os.MkdirTemp("", "libfloor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucketIfNotExists([]byte("t")); return err }); err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"type":"object","properties":{"id":{"type":"string"}},"additionalProperties":false}`))
	if err != nil {
		return err
	}
	sc := jsonschema.NewCompiler()
	if err := sc.AddResource("tool.json", doc); err != nil {
		return err
	}
	if _, err := sc.Compile("tool.json"); err != nil {
		return err
	}
	if _, err := jsontext.NewDecoder(strings.NewReader(`{}`)).ReadValue(); err != nil {
		return err
	}
	_ = sdk.NewServer(&sdk.Implementation{Name: "libfloor", Version: "1"}, nil)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); _ = srv.Close(); g.Stop() }()
	fmt.Printf("libfloor ready http://%s\n", ln.Addr())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
