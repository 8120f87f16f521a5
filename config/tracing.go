package config

import (
	"net/url"
	"strconv"
	"strings"
)

// Defaults of the tracing section.
const (
	// TracingProtocolHTTP is OTLP over HTTP with protobuf bodies (OTLP
	// specification, "OTLP/HTTP"); the default.
	TracingProtocolHTTP = "http/protobuf"
	// TracingProtocolGRPC is OTLP over gRPC (OTLP specification,
	// "OTLP/gRPC").
	TracingProtocolGRPC = "grpc"
	// DefaultTracingHTTPEndpoint and DefaultTracingGRPCEndpoint are the
	// collector URLs used when tracing.endpoint is empty: an OpenTelemetry
	// Collector on the same host, on the ports the OTLP specification
	// assigns (4318 for HTTP, 4317 for gRPC).
	DefaultTracingHTTPEndpoint = "http://127.0.0.1:4318/v1/traces"
	DefaultTracingGRPCEndpoint = "http://127.0.0.1:4317"
	// DefaultTracingServiceName is the service.name resource attribute.
	DefaultTracingServiceName = "mcpgate"
	// DefaultTracingSampleRatio samples every trace whose caller did not
	// decide (a caller's sampled flag is always followed).
	DefaultTracingSampleRatio = "1"
)

// Tracing configures OpenTelemetry tracing: one span per MCP request
// through the pipeline (transport gate, authentication, policy, limits,
// write safety, upstream, response), exported with OTLP, and the W3C
// trace context (traceparent, tracestate) propagated to the upstream.
// Off by default. Spans carry the MCP method, tool name, decision and
// upstream, never arguments, results or credentials.
type Tracing struct {
	// Turn tracing on.
	Enabled bool `yaml:"enabled"`
	// The collector. For `http/protobuf` the URL spans are POSTed to (a URL
	// without a path gets `/v1/traces`); for `grpc` its address as
	// `http://host:port` (plaintext) or `https://host:port` (TLS). No
	// credentials, query or fragment.
	//
	// Default: `http://127.0.0.1:4318/v1/traces` (`http://127.0.0.1:4317`
	// for `grpc`).
	Endpoint string `yaml:"endpoint"`
	// OTLP transport: `http/protobuf` or `grpc`.
	//
	// Default: `http/protobuf`.
	Protocol string `yaml:"protocol"`
	// Fraction of new traces recorded, from `"0"` to `"1"` (quoted). A
	// request whose `traceparent` says sampled or not is recorded as its
	// caller decided.
	//
	// Default: `"1"`.
	SampleRatio string `yaml:"sample_ratio"`
	// The `service.name` of the spans.
	//
	// Default: `mcpgate`.
	ServiceName string `yaml:"service_name"`
}

// ProtocolOrDefault returns Protocol, or TracingProtocolHTTP when empty.
func (t Tracing) ProtocolOrDefault() string {
	if t.Protocol == "" {
		return TracingProtocolHTTP
	}
	return t.Protocol
}

// EndpointOrDefault returns the collector URL spans go to. An
// http/protobuf URL without a path gets /v1/traces.
func (t Tracing) EndpointOrDefault() string {
	grpc := t.ProtocolOrDefault() == TracingProtocolGRPC
	switch {
	case t.Endpoint == "" && grpc:
		return DefaultTracingGRPCEndpoint
	case t.Endpoint == "":
		return DefaultTracingHTTPEndpoint
	case grpc:
		return t.Endpoint
	}
	if u, err := url.Parse(t.Endpoint); err == nil && (u.Path == "" || u.Path == "/") {
		u.Path = "/v1/traces"
		return u.String()
	}
	return t.Endpoint
}

// Ratio returns SampleRatio as a number; on a value that does not parse
// it returns 1 (Validate refuses such values).
func (t Tracing) Ratio() float64 {
	s := t.SampleRatio
	if s == "" {
		s = DefaultTracingSampleRatio
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || r < 0 || r > 1 {
		return 1
	}
	return r
}

// ServiceNameOrDefault returns ServiceName, or DefaultTracingServiceName.
func (t Tracing) ServiceNameOrDefault() string {
	if t.ServiceName == "" {
		return DefaultTracingServiceName
	}
	return t.ServiceName
}

func (c *Config) validateTracing(p *problems) {
	t := c.Tracing
	switch t.Protocol {
	case "", TracingProtocolHTTP, TracingProtocolGRPC:
	default:
		p.add("tracing.protocol", "%q is not an OTLP protocol mcpgate speaks: use %q or %q", t.Protocol, TracingProtocolHTTP, TracingProtocolGRPC)
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil:
			p.addErr("tracing.endpoint", err, "%q is not a URL", t.Endpoint)
		case u.Scheme != "http" && u.Scheme != "https":
			p.add("tracing.endpoint", "%q: the collector URL must start with http:// or https:// (for grpc too: http:// is plaintext, https:// TLS)", t.Endpoint)
		case u.Host == "":
			p.add("tracing.endpoint", "%q has no host", t.Endpoint)
		case u.User != nil:
			p.add("tracing.endpoint", "the collector URL must not carry credentials; set OTEL_EXPORTER_OTLP_HEADERS in the environment instead")
		case u.RawQuery != "" || u.Fragment != "":
			p.add("tracing.endpoint", "%q: a collector URL has no query or fragment", t.Endpoint)
		case t.ProtocolOrDefault() == TracingProtocolGRPC && u.Path != "" && u.Path != "/":
			p.add("tracing.endpoint", "%q: an OTLP/gRPC endpoint is a host and port, without a path", t.Endpoint)
		}
	}
	if s := t.SampleRatio; s != "" {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r > 1 || strings.ContainsAny(s, "eExXpP_") {
			p.add("tracing.sample_ratio", "%q is not a decimal number from 0 to 1 (e.g. \"0.1\" records one new trace in ten)", s)
		}
	}
	if n := t.ServiceName; n != "" && (len(n) > 255 || strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f })) {
		p.add("tracing.service_name", "must be at most 255 characters without control characters")
	}
}
