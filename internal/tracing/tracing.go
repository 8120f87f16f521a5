// Package tracing sets up OpenTelemetry tracing for mcpgate from the
// configuration's tracing section: an SDK tracer provider with a
// parent-based ratio sampler and a batching OTLP exporter (OTLP/HTTP with
// protobuf bodies, or OTLP/gRPC). The pipeline (gateway/tracing.go) makes
// the spans and propagates the W3C trace context; this package only
// decides where they go.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpgate/mcpgate/config"
)

// InstrumentationName names the tracer mcpgate's spans come from
// (the instrumentation scope of OTLP).
const InstrumentationName = "github.com/mcpgate/mcpgate/gateway"

// exportTimeout bounds one export to the collector; a collector that does
// not answer in time loses that batch, never a request.
const exportTimeout = 10 * time.Second

// Provider is a running tracer provider. A nil *Provider is tracing off:
// Tracer returns nil and Shutdown does nothing.
type Provider struct {
	tp *sdktrace.TracerProvider
}

// Start builds the exporter the configuration names and a provider around
// it. It returns nil, nil when tracing is off. Connecting to the collector
// is lazy: a collector that is down costs dropped spans (logged through
// log), never a refused request or a failed start.
func Start(ctx context.Context, cfg config.Tracing, version string, log *slog.Logger) (*Provider, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	exp, err := NewExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("tracing: spans could not be exported", "endpoint", cfg.EndpointOrDefault(), "error", err)
		}))
	}
	return New(cfg, version, sdktrace.NewBatchSpanProcessor(exp)), nil
}

// NewExporter returns the OTLP exporter of cfg (protocol and endpoint,
// plus the OTEL_EXPORTER_OTLP_* environment variables the exporters read
// themselves, e.g. OTEL_EXPORTER_OTLP_HEADERS).
func NewExporter(ctx context.Context, cfg config.Tracing) (sdktrace.SpanExporter, error) {
	endpoint := cfg.EndpointOrDefault()
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch cfg.ProtocolOrDefault() {
	case config.TracingProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(endpoint), otlptracegrpc.WithTimeout(exportTimeout))
	case config.TracingProtocolHTTP:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(endpoint), otlptracehttp.WithTimeout(exportTimeout))
	default:
		err = fmt.Errorf("protocol %q is not supported", cfg.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter for %s: %w", endpoint, err)
	}
	return exp, nil
}

// New returns a provider that hands finished spans to sp (a batching
// processor around an exporter; tests pass tracetest's SpanRecorder). Its
// sampler follows an incoming traceparent's sampled flag, and samples new
// traces at cfg.Ratio(). Spans carry service.name and service.version.
func New(cfg config.Tracing, version string, sp sdktrace.SpanProcessor) *Provider {
	res := resource.NewSchemaless(
		attribute.String("service.name", cfg.ServiceNameOrDefault()),
		attribute.String("service.version", version),
	)
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.Ratio()))),
		sdktrace.WithSpanProcessor(sp),
	)
	return &Provider{tp: tp}
}

// Tracer returns the tracer the pipeline records with, nil when p is nil
// (gateway.Options.Tracer nil: tracing off).
func (p *Provider) Tracer() trace.Tracer {
	if p == nil {
		return nil
	}
	return p.tp.Tracer(InstrumentationName)
}

// Shutdown exports the spans still queued and stops the exporter, within
// ctx. Safe on a nil *Provider.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
