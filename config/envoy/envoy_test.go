// Tests for the Envoy configurations in this directory.
//
// Each Envoy bootstrap (sidecar.yaml, ingress.yaml, stdio.yaml) is read the way Envoy
// reads it: YAML → JSON → protojson into envoy.config.bootstrap.v3.Bootstrap
// (unknown fields are errors), then every message, including the ones packed
// in typed_config Anys, goes through its protoc-gen-validate ValidateAll.
// On top come the checks protos cannot express: what mcpgate needs from
// Envoy (fail closed, BUFFERED bodies with mode override for SSE, the route
// metadata that names the upstream, buffer limits that fit mcpgate's body
// and gRPC limits, no 15 s route timeout, JSON-RPC bodies for Envoy's own
// errors). Negative tests mutate a loaded configuration and require the
// matching check to fail, so no check passes vacuously.
//
// The Kubernetes resources (envoy-gateway.yaml, istio-envoyfilter.yaml) are
// checked in k8s_test.go with the same helpers.
package envoy_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	celv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/filters/cel/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/goccy/go-yaml"
	gwextproc "github.com/mcpgate/mcpgate/gateway/extproc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// What mcpgate expects; keep in step with docs/reference/configuration.md and
// internal/app (gRPC message limit = max_body_bytes + 1 MiB).
const (
	mcpgateBodyLimit    = 4 << 20  // limits.max_body_bytes default
	mcpgateGRPCHeadroom = 1 << 20  // added to the body limit for the gRPC message limit
	grpcOverhead        = 64 << 10 // ProcessingRequest framing around a body, generous
	bodyHeadroom        = 256 << 10

	// listeners.extproc.message_budget and max_message_budget defaults:
	// Envoy's message_timeout must be above the first, its
	// max_message_timeout at least the second (the override mcpgate sends).
	mcpgateMessageBudget    = 150 * time.Millisecond
	mcpgateMaxMessageBudget = 5 * time.Second

	// The listener (stream) buffer limit bounds every buffered body. It must
	// let bodies a bit over mcpgate's limit through (mcpgate answers 413
	// itself) and must fit mcpgate's gRPC message limit.
	minStreamBuffer = mcpgateBodyLimit + bodyHeadroom
	maxStreamBuffer = mcpgateBodyLimit + mcpgateGRPCHeadroom - grpcOverhead

	extProcFilter  = "envoy.filters.http.ext_proc"
	routerFilter   = "envoy.filters.http.router"
	routeMetaNS    = "mcpgate"            // filter_metadata namespace
	routeMetaKey   = "upstream"           // key naming the mcpgate upstream
	upstreamHeader = "x-mcpgate-upstream" // listeners.extproc.upstream_header default
	routeAttribute = "xds.route_metadata"
	http1Options   = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	celFilterName  = "envoy.access_loggers.extension_filters.cel"
	// The CEL expression that keeps local_reply_config away from mcpgate's
	// own replies (ext_proc ImmediateResponse.details starts with "mcpgate").
	notMcpgateReply = "!response.code_details.startsWith('mcpgate')"
)

// mcpgate upstream names: docs/reference/configuration.md, upstreams[].name.
var upstreamName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// strict protojson: an unknown or misspelt field is an error, as in Envoy.
var strictJSON = protojson.UnmarshalOptions{}

var bootstrapFiles = []string{"sidecar.yaml", "ingress.yaml", "federation.yaml", "stdio.yaml"}

// ---------------------------------------------------------------- loading --

func yamlToJSON(t testing.TB, file string) []byte {
	t.Helper()
	y, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatalf("%s: YAML: %v", file, err)
	}
	return j
}

func loadBootstrap(t testing.TB, file string) *bootstrapv3.Bootstrap {
	t.Helper()
	bs := &bootstrapv3.Bootstrap{}
	if err := strictJSON.Unmarshal(yamlToJSON(t, file), bs); err != nil {
		t.Fatalf("%s: protojson into Bootstrap: %v", file, err)
	}
	return bs
}

// envoyConfig is a loaded bootstrap with its MCP HTTP connection managers
// (those that run ext_proc) unpacked. Checks read, and negative tests mutate,
// these decoded messages.
type envoyConfig struct {
	file     string
	bs       *bootstrapv3.Bootstrap
	hcms     []*mcpHCM
	clusters map[string]*clusterv3.Cluster
}

type mcpHCM struct {
	listener *listenerv3.Listener
	hcm      *hcmv3.HttpConnectionManager
	filters  []string // HTTP filter names, in order
	extProc  *extprocfilterv3.ExternalProcessor
}

func (h *mcpHCM) String() string { return "listener " + h.listener.GetName() }

func newEnvoyConfig(t testing.TB, file string) *envoyConfig {
	t.Helper()
	c, err := decodeConfig(file, loadBootstrap(t, file))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func decodeConfig(file string, bs *bootstrapv3.Bootstrap) (*envoyConfig, error) {
	c := &envoyConfig{file: file, bs: bs, clusters: map[string]*clusterv3.Cluster{}}
	for _, cl := range bs.GetStaticResources().GetClusters() {
		c.clusters[cl.GetName()] = cl
	}
	for _, l := range bs.GetStaticResources().GetListeners() {
		for _, fc := range l.GetFilterChains() {
			for _, f := range fc.GetFilters() {
				msg, err := f.GetTypedConfig().UnmarshalNew()
				if err != nil {
					return nil, fmt.Errorf("listener %s filter %s: %w", l.GetName(), f.GetName(), err)
				}
				hcm, ok := msg.(*hcmv3.HttpConnectionManager)
				if !ok {
					continue
				}
				h := &mcpHCM{listener: l, hcm: hcm}
				for _, hf := range hcm.GetHttpFilters() {
					h.filters = append(h.filters, hf.GetName())
					if hf.GetName() != extProcFilter {
						continue
					}
					ep := &extprocfilterv3.ExternalProcessor{}
					if err := hf.GetTypedConfig().UnmarshalTo(ep); err != nil {
						return nil, fmt.Errorf("listener %s: ext_proc typed_config: %w", l.GetName(), err)
					}
					h.extProc = ep
				}
				if h.extProc != nil {
					c.hcms = append(c.hcms, h)
				}
			}
		}
	}
	return c, nil
}

// ------------------------------------------------------- proto validation --

type validator interface{ ValidateAll() error }

// validateDeep runs ValidateAll on m and on every message packed in an Any
// below it (protoc-gen-validate does not look inside Anys).
func validateDeep(m proto.Message, path string) error {
	var errs []error
	if v, ok := m.(validator); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	errs = append(errs, validateAnys(m, path))
	return errors.Join(errs...)
}

// validateAnys validates the Anys below m but not m itself (for partial
// messages such as Istio MERGE patches).
func validateAnys(m proto.Message, path string) error {
	var errs []error
	walkAnys(m.ProtoReflect(), path, func(p string, a *anypb.Any) {
		inner, err := a.UnmarshalNew()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", p, a.GetTypeUrl(), err))
			return
		}
		errs = append(errs, validateDeep(inner, p+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">"))
	})
	return errors.Join(errs...)
}

var anyName = (&anypb.Any{}).ProtoReflect().Descriptor().FullName()

// walkAnys calls fn for each Any set below m (not descending into them).
func walkAnys(m protoreflect.Message, path string, fn func(string, *anypb.Any)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		visit := func(p string, v protoreflect.Value) {
			if fd.Message() == nil {
				return
			}
			if fd.Message().FullName() == anyName {
				a := &anypb.Any{}
				proto.Merge(a, v.Message().Interface())
				fn(p, a)
				return
			}
			walkAnys(v.Message(), p, fn)
		}
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				visit(fmt.Sprintf("%s[%d]", p, i), v.List().Get(i))
			}
		case fd.IsMap():
			if fd.MapValue().Message() == nil {
				return true
			}
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				p := fmt.Sprintf("%s[%s]", p, k.String())
				if fd.MapValue().Message().FullName() == anyName {
					a := &anypb.Any{}
					proto.Merge(a, mv.Message().Interface())
					fn(p, a)
				} else {
					walkAnys(mv.Message(), p, fn)
				}
				return true
			})
		default:
			visit(p, v)
		}
		return true
	})
}

// eachMessage calls fn for m and every message below it, Anys unpacked.
func eachMessage(m proto.Message, fn func(proto.Message)) {
	fn(m)
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		one := func(v protoreflect.Value) {
			inner := v.Message().Interface()
			if a, ok := inner.(*anypb.Any); ok {
				if u, err := a.UnmarshalNew(); err == nil {
					inner = u
				}
			}
			eachMessage(inner, fn)
		}
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := range v.List().Len() {
				one(v.List().Get(i))
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { one(mv); return true })
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			one(v)
		}
		return true
	})
}

// deprecatedUses lists deprecated fields and enum values set below m.
func deprecatedUses(m proto.Message) []string {
	var out []string
	eachMessage(m, func(msg proto.Message) {
		r := msg.ProtoReflect()
		name := string(r.Descriptor().FullName())
		r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			if o, ok := fd.Options().(*descriptorpb.FieldOptions); ok && o.GetDeprecated() {
				out = append(out, name+"."+string(fd.Name()))
			}
			if fd.Enum() == nil {
				return true
			}
			check := func(n protoreflect.EnumNumber) {
				ev := fd.Enum().Values().ByNumber(n)
				if ev == nil {
					return
				}
				if o, ok := ev.Options().(*descriptorpb.EnumValueOptions); ok && o.GetDeprecated() {
					out = append(out, name+"."+string(fd.Name())+"="+string(ev.Name()))
				}
			}
			if fd.IsList() {
				for i := range v.List().Len() {
					check(v.List().Get(i).Enum())
				}
			} else if !fd.IsMap() {
				check(v.Enum())
			}
			return true
		})
	})
	return out
}

// ------------------------------------------------------------ the checks --

type check[T any] struct {
	name string
	fn   func(T) error
}

func runChecks[T any](t *testing.T, checks []check[T], v T) {
	t.Helper()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.fn(v); err != nil {
				t.Error(err)
			}
		})
	}
}

func find[T any](checks []check[T], name string) check[T] {
	for _, c := range checks {
		if c.name == name {
			return c
		}
	}
	panic("no check named " + name)
}

func dur(d *durationpb.Duration) time.Duration { return d.AsDuration() }

// extProcChecks apply to every ext_proc filter config: bootstrap, Istio.
var extProcChecks = []check[*extprocfilterv3.ExternalProcessor]{
	{"processing modes", func(ep *extprocfilterv3.ExternalProcessor) error {
		pm := ep.GetProcessingMode()
		var errs []error
		want := func(field string, got, want fmt.Stringer) {
			if got.String() != want.String() {
				errs = append(errs, fmt.Errorf("processing_mode.%s = %s, want %s", field, got, want))
			}
		}
		want("request_header_mode", pm.GetRequestHeaderMode(), extprocfilterv3.ProcessingMode_SEND)
		want("request_body_mode", pm.GetRequestBodyMode(), extprocfilterv3.ProcessingMode_BUFFERED)
		want("response_header_mode", pm.GetResponseHeaderMode(), extprocfilterv3.ProcessingMode_SEND)
		want("response_body_mode", pm.GetResponseBodyMode(), extprocfilterv3.ProcessingMode_BUFFERED)
		if pm.GetRequestBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
			want("request_trailer_mode", pm.GetRequestTrailerMode(), extprocfilterv3.ProcessingMode_SKIP)
		}
		if pm.GetResponseBodyMode() != extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED {
			want("response_trailer_mode", pm.GetResponseTrailerMode(), extprocfilterv3.ProcessingMode_SKIP)
		}
		return errors.Join(errs...)
	}},
	{"full duplex needs trailers", func(ep *extprocfilterv3.ExternalProcessor) error {
		// FULL_DUPLEX_STREAMED ends a body only with trailers: without
		// them the processor never sees end of stream.
		pm := ep.GetProcessingMode()
		var errs []error
		if pm.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetRequestTrailerMode() != extprocfilterv3.ProcessingMode_SEND {
			errs = append(errs, errors.New("request_body_mode FULL_DUPLEX_STREAMED needs request_trailer_mode SEND"))
		}
		if pm.GetResponseBodyMode() == extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED && pm.GetResponseTrailerMode() != extprocfilterv3.ProcessingMode_SEND {
			errs = append(errs, errors.New("response_body_mode FULL_DUPLEX_STREAMED needs response_trailer_mode SEND"))
		}
		return errors.Join(errs...)
	}},
	{"mode override for SSE", func(ep *extprocfilterv3.ExternalProcessor) error {
		// mcpgate switches text/event-stream responses to STREAMED.
		var errs []error
		if ep.GetProcessingMode().GetResponseBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED && !ep.GetAllowModeOverride() {
			errs = append(errs, errors.New("response_body_mode BUFFERED without allow_mode_override: SSE responses would be buffered whole"))
		}
		if ep.GetSendBodyWithoutWaitingForHeaderResponse() {
			errs = append(errs, errors.New("send_body_without_waiting_for_header_response makes Envoy ignore mcpgate's mode_override"))
		}
		if len(ep.GetAllowedOverrideModes()) > 0 {
			errs = append(errs, errors.New("allowed_override_modes restricts mcpgate's mode_override; leave it unset"))
		}
		return errors.Join(errs...)
	}},
	{"fail closed", func(ep *extprocfilterv3.ExternalProcessor) error {
		var errs []error
		if ep.GetFailureModeAllow() {
			errs = append(errs, errors.New("failure_mode_allow: requests would pass unchecked when mcpgate fails"))
		}
		if ep.GetObservabilityMode() {
			errs = append(errs, errors.New("observability_mode: mcpgate's answers would be ignored"))
		}
		if ep.GetDisableImmediateResponse() {
			errs = append(errs, errors.New("disable_immediate_response: mcpgate could not refuse requests"))
		}
		if ep.GetGrpcService().GetEnvoyGrpc().GetClusterName() == "" {
			errs = append(errs, errors.New("grpc_service.envoy_grpc.cluster_name is not set"))
		}
		return errors.Join(errs...)
	}},
	{"message timeouts", func(ep *extprocfilterv3.ExternalProcessor) error {
		mt, max := ep.GetMessageTimeout(), ep.GetMaxMessageTimeout()
		switch {
		case mt == nil:
			return errors.New("message_timeout is not set (Envoy's 200 ms default is implicit)")
		case dur(mt) <= 0:
			return fmt.Errorf("message_timeout %v is not positive", dur(mt))
		case max == nil:
			return errors.New("max_message_timeout is not set: mcpgate cannot extend a message's deadline")
		case dur(mt) >= dur(max):
			return fmt.Errorf("message_timeout %v is not below max_message_timeout %v", dur(mt), dur(max))
		case dur(mt) <= mcpgateMessageBudget:
			return fmt.Errorf("message_timeout %v is not above mcpgate's message_budget %v", dur(mt), mcpgateMessageBudget)
		case dur(max) < mcpgateMaxMessageBudget:
			return fmt.Errorf("max_message_timeout %v is below mcpgate's max_message_budget %v: Envoy would ignore its override_message_timeout", dur(max), mcpgateMaxMessageBudget)
		}
		return nil
	}},
	{"stream without deadline", func(ep *extprocfilterv3.ExternalProcessor) error {
		// The ext_proc stream lives as long as the HTTP request (SSE).
		if d := ep.GetGrpcService().GetTimeout(); d != nil && dur(d) != 0 {
			return fmt.Errorf("grpc_service.timeout %v would cut long streams", dur(d))
		}
		return nil
	}},
	{"route metadata attribute", func(ep *extprocfilterv3.ExternalProcessor) error {
		if !slices.Contains(ep.GetRequestAttributes(), routeAttribute) {
			return fmt.Errorf("request_attributes %q lack %s: mcpgate cannot tell the upstream", ep.GetRequestAttributes(), routeAttribute)
		}
		return nil
	}},
	{"gRPC receive limit", func(ep *extprocfilterv3.ExternalProcessor) error {
		// mcpgate sends bodies up to its gRPC limit back (rewritten bodies).
		if v := ep.GetGrpcService().GetEnvoyGrpc().GetMaxReceiveMessageLength(); v != nil && v.GetValue() < mcpgateBodyLimit+mcpgateGRPCHeadroom {
			return fmt.Errorf("max_receive_message_length %d is below mcpgate's gRPC message limit %d", v.GetValue(), mcpgateBodyLimit+mcpgateGRPCHeadroom)
		}
		return nil
	}},
	{"mutation safety", func(ep *extprocfilterv3.ExternalProcessor) error {
		var errs []error
		if !ep.GetMutationRules().GetDisallowIsError().GetValue() {
			errs = append(errs, errors.New("mutation_rules.disallow_is_error: a refused header mutation (e.g. removing a credential) must fail the request, not be dropped"))
		}
		return errors.Join(errs...)
	}},
	{"mcpgate metadata namespace", func(ep *extprocfilterv3.ExternalProcessor) error {
		if !slices.Contains(ep.GetMetadataOptions().GetReceivingNamespaces().GetUntyped(), routeMetaNS) {
			return errors.New(`metadata_options.receiving_namespaces.untyped lacks "mcpgate"`)
		}
		return nil
	}},
}

// checkRouteUpstream: the route names the mcpgate upstream in its metadata.
func checkRouteUpstream(r *routev3.Route) error {
	v := r.GetMetadata().GetFilterMetadata()[routeMetaNS].GetFields()[routeMetaKey]
	if name := v.GetStringValue(); !upstreamName.MatchString(name) {
		return fmt.Errorf("route %q: metadata.filter_metadata.%s.%s = %v, want an mcpgate upstream name", r.GetName(), routeMetaNS, routeMetaKey, v)
	}
	return nil
}

// checkRouteTimeouts: no route timeout (or a very long one), an idle timeout.
func checkRouteTimeouts(r *routev3.Route) error {
	ra := r.GetRoute()
	var errs []error
	switch to := ra.GetTimeout(); {
	case to == nil:
		errs = append(errs, fmt.Errorf("route %q: timeout unset means Envoy's 15 s default, which cuts tool calls and SSE streams; set 0s", r.GetName()))
	case dur(to) != 0 && dur(to) < time.Hour:
		errs = append(errs, fmt.Errorf("route %q: timeout %v cuts long tool calls and SSE streams; set 0s", r.GetName(), dur(to)))
	}
	if it := ra.GetIdleTimeout(); it == nil || dur(it) <= 0 {
		errs = append(errs, fmt.Errorf("route %q: idle_timeout is not set; dead streams would only be reaped by the connection manager", r.GetName()))
	}
	return errors.Join(errs...)
}

func checkStreamBuffer(where string, v *wrapperspb.UInt32Value) error {
	switch {
	case v == nil:
		return fmt.Errorf("%s: per_connection_buffer_limit_bytes unset (1 MiB default) is below mcpgate's %d byte body limit", where, mcpgateBodyLimit)
	case v.GetValue() < minStreamBuffer:
		return fmt.Errorf("%s: per_connection_buffer_limit_bytes %d < %d: bodies just over mcpgate's limit must reach mcpgate (it answers 413)", where, v.GetValue(), minStreamBuffer)
	case v.GetValue() > maxStreamBuffer:
		return fmt.Errorf("%s: per_connection_buffer_limit_bytes %d > %d: a buffered body would exceed mcpgate's gRPC message limit", where, v.GetValue(), maxStreamBuffer)
	}
	return nil
}

func checkClusterBuffer(where string, v *wrapperspb.UInt32Value) error {
	if v.GetValue() < minStreamBuffer {
		return fmt.Errorf("%s: per_connection_buffer_limit_bytes %d < %d", where, v.GetValue(), minStreamBuffer)
	}
	return nil
}

func clusterIsHTTP2(c *clusterv3.Cluster) error {
	if c.GetHttp2ProtocolOptions() != nil {
		return fmt.Errorf("cluster %s: use typed_extension_protocol_options, not the deprecated http2_protocol_options", c.GetName())
	}
	a := c.GetTypedExtensionProtocolOptions()[http1Options]
	if a == nil {
		return fmt.Errorf("cluster %s: no typed_extension_protocol_options[%s]: Envoy would speak HTTP/1.1, and gRPC needs HTTP/2", c.GetName(), http1Options)
	}
	o := &upstreamhttpv3.HttpProtocolOptions{}
	if err := a.UnmarshalTo(o); err != nil {
		return fmt.Errorf("cluster %s: %w", c.GetName(), err)
	}
	h2 := o.GetExplicitHttpConfig().GetHttp2ProtocolOptions()
	if h2 == nil {
		return fmt.Errorf("cluster %s: explicit_http_config.http2_protocol_options is not set: gRPC needs HTTP/2", c.GetName())
	}
	// mcpgate's ext_proc listener answers keepalive PINGs no more often
	// than gwextproc.KeepaliveMinTime; faster PINGs count as abuse and end
	// the connection with GOAWAY too_many_pings.
	if ka := h2.GetConnectionKeepalive(); ka != nil && ka.GetInterval().AsDuration() < gwextproc.KeepaliveMinTime {
		return fmt.Errorf("cluster %s: connection_keepalive.interval %s is below mcpgate's keepalive minimum %s", c.GetName(), ka.GetInterval().AsDuration(), gwextproc.KeepaliveMinTime)
	}
	return nil
}

// --------------------------------------------------------- local replies --

// localReply is a local reply as the mappers see it: status and
// response code details.
type localReply struct {
	code    uint32
	details string
}

// evalFilter evaluates an access log filter the way Envoy would for a local
// reply; only the filter kinds these configs use are modelled.
func evalFilter(f *accesslogv3.AccessLogFilter, r localReply) (bool, error) {
	switch x := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		c := x.StatusCodeFilter.GetComparison()
		v := c.GetValue().GetDefaultValue()
		switch c.GetOp() {
		case accesslogv3.ComparisonFilter_EQ:
			return r.code == v, nil
		case accesslogv3.ComparisonFilter_GE:
			return r.code >= v, nil
		case accesslogv3.ComparisonFilter_LE:
			return r.code <= v, nil
		}
		return false, fmt.Errorf("status_code_filter op %s", c.GetOp())
	case *accesslogv3.AccessLogFilter_AndFilter:
		for _, sub := range x.AndFilter.GetFilters() {
			ok, err := evalFilter(sub, r)
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case *accesslogv3.AccessLogFilter_OrFilter:
		for _, sub := range x.OrFilter.GetFilters() {
			ok, err := evalFilter(sub, r)
			if err != nil || ok {
				return ok, err
			}
		}
		return false, nil
	case *accesslogv3.AccessLogFilter_ExtensionFilter:
		ef := &celv3.ExpressionFilter{}
		if x.ExtensionFilter.GetName() != celFilterName || x.ExtensionFilter.GetTypedConfig().UnmarshalTo(ef) != nil {
			return false, fmt.Errorf("extension_filter %s is not modelled", x.ExtensionFilter.GetName())
		}
		if ef.GetExpression() != notMcpgateReply {
			return false, fmt.Errorf("CEL expression %q is not modelled (want %q)", ef.GetExpression(), notMcpgateReply)
		}
		return !strings.HasPrefix(r.details, "mcpgate"), nil
	}
	return false, fmt.Errorf("filter %T is not modelled", f.GetFilterSpecifier())
}

func hasStatusEQ(f *accesslogv3.AccessLogFilter, code uint32) bool {
	switch x := f.GetFilterSpecifier().(type) {
	case *accesslogv3.AccessLogFilter_StatusCodeFilter:
		c := x.StatusCodeFilter.GetComparison()
		return c.GetOp() == accesslogv3.ComparisonFilter_EQ && c.GetValue().GetDefaultValue() == code
	case *accesslogv3.AccessLogFilter_AndFilter:
		return slices.ContainsFunc(x.AndFilter.GetFilters(), func(s *accesslogv3.AccessLogFilter) bool { return hasStatusEQ(s, code) })
	}
	return false
}

var commandOperator = regexp.MustCompile(`%[A-Z_]+(\([^)%]*\))?(:[0-9]+)?%`)

// jsonRPCBody renders a body format with command operators as placeholders
// and checks that it is a JSON-RPC 2.0 error object served as JSON.
func jsonRPCBody(sf *corev3.SubstitutionFormatString) error {
	var raw []byte
	switch f := sf.GetFormat().(type) {
	case *corev3.SubstitutionFormatString_JsonFormat:
		if ct := sf.GetContentType(); ct != "" && !strings.HasPrefix(ct, "application/json") {
			return fmt.Errorf("content_type %q, want application/json", ct)
		}
		b, err := protojson.Marshal(f.JsonFormat)
		if err != nil {
			return err
		}
		raw = b
	case *corev3.SubstitutionFormatString_TextFormatSource:
		if !strings.HasPrefix(sf.GetContentType(), "application/json") {
			return fmt.Errorf("text_format_source with content_type %q, want application/json", sf.GetContentType())
		}
		raw = []byte(commandOperator.ReplaceAllString(f.TextFormatSource.GetInlineString(), "0"))
	default:
		return fmt.Errorf("body format %T is not JSON", sf.GetFormat())
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	if body["jsonrpc"] != "2.0" {
		return fmt.Errorf(`body: jsonrpc = %v, want "2.0"`, body["jsonrpc"])
	}
	if id, ok := body["id"]; !ok || id != nil {
		return errors.New("body: id must be present and null (the request id is unknown to Envoy)")
	}
	e, _ := body["error"].(map[string]any)
	code, _ := e["code"].(float64)
	if e == nil || code != float64(int64(code)) || code < -32768 || code > -32000 {
		return fmt.Errorf("body: error.code = %v, want a JSON-RPC error code", e["code"])
	}
	if m, _ := e["message"].(string); m == "" {
		return errors.New("body: error.message is empty")
	}
	return nil
}

// checkLocalReplies: Envoy's own 408/413/500/502/503/504 become JSON-RPC error
// bodies (application/json); mcpgate's replies are never rewritten.
func checkLocalReplies(lrc *hcmv3.LocalReplyConfig) error {
	if lrc == nil {
		return errors.New("local_reply_config is not set: Envoy's errors reach MCP clients as text/plain")
	}
	if err := validateDeep(lrc, "local_reply_config"); err != nil {
		return err
	}
	if lrc.GetBodyFormat() != nil {
		return errors.New("local_reply_config.body_format is set: it would rewrite mcpgate's own replies too; use per-mapper body_format_override")
	}
	first := func(r localReply) (*hcmv3.ResponseMapper, error) {
		for _, m := range lrc.GetMappers() {
			ok, err := evalFilter(m.GetFilter(), r)
			if err != nil {
				return nil, err
			}
			if ok {
				return m, nil
			}
		}
		return nil, nil
	}
	var errs []error
	for _, code := range []uint32{413, 500, 502, 503, 504} {
		m, err := first(localReply{code, "envoy_generated"})
		switch {
		case err != nil:
			errs = append(errs, err)
		case m == nil || !hasStatusEQ(m.GetFilter(), code):
			errs = append(errs, fmt.Errorf("no mapper for Envoy's own %d", code))
		case m.GetStatusCode() != nil && m.GetStatusCode().GetValue() != code:
			errs = append(errs, fmt.Errorf("the %d mapper changes the status to %d", code, m.GetStatusCode().GetValue()))
		default:
			if err := jsonRPCBody(m.GetBodyFormatOverride()); err != nil {
				errs = append(errs, fmt.Errorf("%d mapper: %w", code, err))
			}
		}
	}
	// Envoy's 408 (request_timeout: the request did not arrive in time)
	// has no mapper of its own: the one that matches it (the catch-all
	// for Envoy's other errors) must answer JSON-RPC with the status kept.
	for _, code := range []uint32{408} {
		m, err := first(localReply{code, "request_overall_timeout"})
		switch {
		case err != nil:
			errs = append(errs, err)
		case m == nil:
			errs = append(errs, fmt.Errorf("no mapper for Envoy's own %d", code))
		case m.GetStatusCode() != nil && m.GetStatusCode().GetValue() != code:
			errs = append(errs, fmt.Errorf("the mapper of %d changes the status to %d", code, m.GetStatusCode().GetValue()))
		default:
			if err := jsonRPCBody(m.GetBodyFormatOverride()); err != nil {
				errs = append(errs, fmt.Errorf("mapper of %d: %w", code, err))
			}
		}
	}
	for _, code := range []uint32{200, 202, 400, 401, 403, 404, 408, 413, 429, 500, 502, 503, 504} {
		m, err := first(localReply{code, "mcpgate"})
		if err != nil {
			errs = append(errs, err)
		} else if m != nil {
			errs = append(errs, fmt.Errorf("a mapper rewrites mcpgate's own %d reply (details \"mcpgate\")", code))
		}
	}
	return errors.Join(errs...)
}

// ----------------------------------------------------- bootstrap checks --

func eachExtProc(fn func(*extprocfilterv3.ExternalProcessor) error) func(*envoyConfig) error {
	return func(c *envoyConfig) error {
		var errs []error
		for _, h := range c.hcms {
			if err := fn(h.extProc); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h, err))
			}
		}
		return errors.Join(errs...)
	}
}

func mcpRoutes(h *mcpHCM) []*routev3.Route {
	var out []*routev3.Route
	for _, vh := range h.hcm.GetRouteConfig().GetVirtualHosts() {
		out = append(out, vh.GetRoutes()...)
	}
	return out
}

func eachRoute(fn func(*routev3.Route) error) func(*envoyConfig) error {
	return func(c *envoyConfig) error {
		var errs []error
		for _, h := range c.hcms {
			for _, r := range mcpRoutes(h) {
				if err := fn(r); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", h, err))
				}
			}
		}
		return errors.Join(errs...)
	}
}

var bootstrapChecks = func() []check[*envoyConfig] {
	cs := []check[*envoyConfig]{
		{"ext_proc filter present", func(c *envoyConfig) error {
			if len(c.hcms) == 0 {
				return errors.New("no HTTP connection manager runs the ext_proc filter")
			}
			for _, h := range c.hcms {
				if h.hcm.GetRds() != nil || h.hcm.GetRouteConfig() == nil {
					return fmt.Errorf("%s: routes must be inline (route_config) to be checked", h)
				}
			}
			return nil
		}},
		{"filter order", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				ep, rt := slices.Index(h.filters, extProcFilter), slices.Index(h.filters, routerFilter)
				if rt != len(h.filters)-1 || ep > rt || slices.Index(h.filters[ep+1:], extProcFilter) >= 0 {
					errs = append(errs, fmt.Errorf("%s: http_filters %v: want one ext_proc before the router, router last", h, h.filters))
				}
			}
			return errors.Join(errs...)
		}},
		{"ext_proc cluster is HTTP/2", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				name := h.extProc.GetGrpcService().GetEnvoyGrpc().GetClusterName()
				cl := c.clusters[name]
				if cl == nil {
					errs = append(errs, fmt.Errorf("%s: ext_proc cluster %q is not defined", h, name))
					continue
				}
				errs = append(errs, clusterIsHTTP2(cl))
			}
			return errors.Join(errs...)
		}},
		{"routes name their upstream", eachRoute(checkRouteUpstream)},
		{"route timeouts", eachRoute(func(r *routev3.Route) error {
			if r.GetDirectResponse() != nil {
				return nil // Envoy answers; nothing is forwarded
			}
			return checkRouteTimeouts(r)
		})},
		{"routes go to defined clusters", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				for _, r := range mcpRoutes(h) {
					if r.GetDirectResponse() != nil {
						continue
					}
					if cl := r.GetRoute().GetCluster(); c.clusters[cl] == nil {
						errs = append(errs, fmt.Errorf("%s: route %s: cluster %q is not defined", h, r.GetName(), cl))
					}
				}
			}
			return errors.Join(errs...)
		}},
		{"no retries", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				for _, vh := range h.hcm.GetRouteConfig().GetVirtualHosts() {
					if vh.GetRetryPolicy() != nil || vh.GetRetryPolicyTypedConfig() != nil {
						errs = append(errs, fmt.Errorf("%s: virtual host %s retries: a tools/call is not idempotent", h, vh.GetName()))
					}
					for _, r := range vh.GetRoutes() {
						if r.GetRoute().GetRetryPolicy() != nil || r.GetRoute().GetRetryPolicyTypedConfig() != nil {
							errs = append(errs, fmt.Errorf("%s: route %s retries: a tools/call is not idempotent", h, r.GetName()))
						}
					}
				}
			}
			return errors.Join(errs...)
		}},
		{"stream idle timeout", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				if d := h.hcm.GetStreamIdleTimeout(); d == nil || dur(d) <= 0 {
					errs = append(errs, fmt.Errorf("%s: stream_idle_timeout must be set and positive", h))
				}
			}
			return errors.Join(errs...)
		}},
		{"buffer limits", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				errs = append(errs, checkStreamBuffer(h.String(), h.listener.GetPerConnectionBufferLimitBytes()))
				for _, vh := range h.hcm.GetRouteConfig().GetVirtualHosts() {
					for _, r := range append([]proto.Message{vh}, protoSlice(vh.GetRoutes())...) {
						if l, ok := r.(interface {
							GetRequestBodyBufferLimit() *wrapperspb.UInt64Value
						}); ok && l.GetRequestBodyBufferLimit() != nil && l.GetRequestBodyBufferLimit().GetValue() < minStreamBuffer {
							errs = append(errs, fmt.Errorf("%s: request_body_buffer_limit %d < %d", h, l.GetRequestBodyBufferLimit().GetValue(), minStreamBuffer))
						}
					}
				}
				used := []string{h.extProc.GetGrpcService().GetEnvoyGrpc().GetClusterName()}
				for _, r := range mcpRoutes(h) {
					used = append(used, r.GetRoute().GetCluster())
				}
				for _, name := range used {
					if cl := c.clusters[name]; cl != nil {
						errs = append(errs, checkClusterBuffer("cluster "+name, cl.GetPerConnectionBufferLimitBytes()))
					}
				}
			}
			return errors.Join(errs...)
		}},
		{"local replies are JSON-RPC", func(c *envoyConfig) error {
			var errs []error
			for _, h := range c.hcms {
				if err := checkLocalReplies(h.hcm.GetLocalReplyConfig()); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", h, err))
				}
			}
			return errors.Join(errs...)
		}},
		{"no deprecated fields", func(c *envoyConfig) error {
			if d := deprecatedUses(c.bs); len(d) > 0 {
				return fmt.Errorf("deprecated fields or values in use: %v", d)
			}
			return nil
		}},
		{"admin on loopback", func(c *envoyConfig) error {
			sa := c.bs.GetAdmin().GetAddress().GetSocketAddress()
			ip, err := netip.ParseAddr(sa.GetAddress())
			if err != nil || !ip.IsLoopback() {
				return fmt.Errorf("admin listens on %q: the admin interface can change Envoy's state; bind it to loopback", sa.GetAddress())
			}
			return nil
		}},
	}
	for _, ec := range extProcChecks {
		cs = append(cs, check[*envoyConfig]{"ext_proc: " + ec.name, eachExtProc(ec.fn)})
	}
	return append(cs, federationChecks...)
}()

func protoSlice[T proto.Message](in []T) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, v := range in {
		out[i] = v
	}
	return out
}

// ------------------------------------------------------------------ tests --

func TestBootstrapProtoValidation(t *testing.T) {
	for _, file := range bootstrapFiles {
		t.Run(file, func(t *testing.T) {
			bs := loadBootstrap(t, file)
			if err := validateDeep(bs, "bootstrap"); err != nil {
				t.Error(err)
			}
			// Every typed_config in the HTTP connection managers unpacks.
			c := newEnvoyConfig(t, file)
			for _, h := range c.hcms {
				for _, hf := range h.hcm.GetHttpFilters() {
					if _, err := hf.GetTypedConfig().UnmarshalNew(); err != nil {
						t.Errorf("%s: filter %s: %v", h, hf.GetName(), err)
					}
				}
			}
		})
	}
}

func TestBootstrapChecks(t *testing.T) {
	for _, file := range bootstrapFiles {
		t.Run(file, func(t *testing.T) {
			runChecks(t, bootstrapChecks, newEnvoyConfig(t, file))
		})
	}
}

// TestBootstrapChecksCatchMistakes mutates a loaded configuration and
// requires the named check to fail, so the checks cannot pass vacuously.
func TestBootstrapChecksCatchMistakes(t *testing.T) {
	route0 := func(c *envoyConfig) *routev3.Route { return mcpRoutes(c.hcms[0])[0] }
	cases := []struct {
		name, file, check string
		mutate            func(t *testing.T, c *envoyConfig)
	}{
		{"drop http2 options", "sidecar.yaml", "ext_proc cluster is HTTP/2", func(t *testing.T, c *envoyConfig) {
			c.clusters["mcpgate_extproc"].TypedExtensionProtocolOptions = nil
		}},
		{"ext_proc cluster on HTTP/1.1", "ingress.yaml", "ext_proc cluster is HTTP/2", func(t *testing.T, c *envoyConfig) {
			o := &upstreamhttpv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
				}}}
			a, err := anypb.New(o)
			if err != nil {
				t.Fatal(err)
			}
			c.clusters["mcpgate_extproc"].TypedExtensionProtocolOptions[http1Options] = a
		}},
		{"route timeout 15s", "sidecar.yaml", "route timeouts", func(t *testing.T, c *envoyConfig) {
			route0(c).GetRoute().Timeout = durationpb.New(15 * time.Second)
		}},
		{"route timeout unset", "ingress.yaml", "route timeouts", func(t *testing.T, c *envoyConfig) {
			route0(c).GetRoute().Timeout = nil
		}},
		{"no idle timeout", "ingress.yaml", "route timeouts", func(t *testing.T, c *envoyConfig) {
			route0(c).GetRoute().IdleTimeout = nil
		}},
		{"fail open", "sidecar.yaml", "ext_proc: fail closed", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.FailureModeAllow = true
		}},
		{"observability mode", "ingress.yaml", "ext_proc: fail closed", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.ObservabilityMode = true
		}},
		{"message timeout not below max", "sidecar.yaml", "ext_proc: message timeouts", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.MessageTimeout = durationpb.New(5 * time.Second)
		}},
		{"message timeout unset", "ingress.yaml", "ext_proc: message timeouts", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.MessageTimeout = nil
		}},
		{"message timeout within mcpgate's budget", "ingress.yaml", "ext_proc: message timeouts", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.MessageTimeout = durationpb.New(mcpgateMessageBudget)
		}},
		{"max message timeout below mcpgate's max budget", "sidecar.yaml", "ext_proc: message timeouts", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.MaxMessageTimeout = durationpb.New(2 * time.Second)
		}},
		{"full duplex without trailers", "sidecar.yaml", "ext_proc: full duplex needs trailers", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED
		}},
		{"streamed request body", "ingress.yaml", "ext_proc: processing modes", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_STREAMED
		}},
		{"no mode override", "sidecar.yaml", "ext_proc: mode override for SSE", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.AllowModeOverride = false
		}},
		{"body without waiting for headers", "ingress.yaml", "ext_proc: mode override for SSE", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.SendBodyWithoutWaitingForHeaderResponse = true
		}},
		{"grpc deadline", "sidecar.yaml", "ext_proc: stream without deadline", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.GrpcService.Timeout = durationpb.New(30 * time.Second)
		}},
		{"no route metadata attribute", "sidecar.yaml", "ext_proc: route metadata attribute", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.RequestAttributes = []string{"request.path"}
		}},
		{"route without upstream metadata", "ingress.yaml", "routes name their upstream", func(t *testing.T, c *envoyConfig) {
			mcpRoutes(c.hcms[0])[2].Metadata = nil
		}},
		{"route cache cleared (retained if federated)", "sidecar.yaml", "route cache action", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].extProc.RouteCacheAction = extprocfilterv3.ExternalProcessor_CLEAR
			if federated(c.hcms[0]) { // the chart renders sidecar.yaml with members
				c.hcms[0].extProc.RouteCacheAction = extprocfilterv3.ExternalProcessor_RETAIN
			}
		}},
		{"keepalive faster than mcpgate allows", "ingress.yaml", "ext_proc cluster is HTTP/2", func(t *testing.T, c *envoyConfig) {
			cl := c.clusters[c.hcms[0].extProc.GetGrpcService().GetEnvoyGrpc().GetClusterName()]
			a := cl.GetTypedExtensionProtocolOptions()[http1Options]
			o := &upstreamhttpv3.HttpProtocolOptions{}
			if err := a.UnmarshalTo(o); err != nil {
				t.Fatal(err)
			}
			o.GetExplicitHttpConfig().GetHttp2ProtocolOptions().ConnectionKeepalive.Interval = durationpb.New(5 * time.Second)
			if err := a.MarshalFrom(o); err != nil {
				t.Fatal(err)
			}
		}},
		{"listener buffer 1 MiB", "sidecar.yaml", "buffer limits", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].listener.PerConnectionBufferLimitBytes = wrapperspb.UInt32(1 << 20)
		}},
		{"listener buffer above gRPC limit", "ingress.yaml", "buffer limits", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].listener.PerConnectionBufferLimitBytes = wrapperspb.UInt32(16 << 20)
		}},
		{"upstream cluster buffer default", "ingress.yaml", "buffer limits", func(t *testing.T, c *envoyConfig) {
			c.clusters["tickets_upstream"].PerConnectionBufferLimitBytes = nil
		}},
		{"no 504 mapper", "sidecar.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			lrc := c.hcms[0].hcm.LocalReplyConfig
			lrc.Mappers = slices.DeleteFunc(lrc.Mappers, func(m *hcmv3.ResponseMapper) bool { return hasStatusEQ(m.GetFilter(), 504) })
		}},
		{"no mapper for 408", "ingress.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			lrc := c.hcms[0].hcm.LocalReplyConfig
			lrc.Mappers = slices.DeleteFunc(lrc.Mappers, func(m *hcmv3.ResponseMapper) bool {
				ok, err := evalFilter(m.GetFilter(), localReply{408, "request_overall_timeout"})
				return err == nil && ok
			})
		}},
		{"408 mapper with a text body", "sidecar.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			for _, m := range c.hcms[0].hcm.LocalReplyConfig.Mappers {
				if ok, err := evalFilter(m.GetFilter(), localReply{408, "request_overall_timeout"}); err == nil && ok {
					m.BodyFormatOverride = &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%LOCAL_REPLY_BODY%"}}
				}
			}
		}},
		{"global body format", "ingress.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].hcm.LocalReplyConfig.BodyFormat = &corev3.SubstitutionFormatString{
				Format: &corev3.SubstitutionFormatString_TextFormat{TextFormat: "%LOCAL_REPLY_BODY%"},
			}
		}},
		{"mapper rewrites mcpgate replies", "ingress.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			for _, m := range c.hcms[0].hcm.LocalReplyConfig.Mappers {
				if hasStatusEQ(m.GetFilter(), 503) {
					m.Filter = m.GetFilter().GetAndFilter().GetFilters()[0] // status only: no CEL exclusion
				}
			}
		}},
		{"no local reply config", "sidecar.yaml", "local replies are JSON-RPC", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].hcm.LocalReplyConfig = nil
		}},
		{"router before ext_proc", "sidecar.yaml", "filter order", func(t *testing.T, c *envoyConfig) {
			f := c.hcms[0].filters
			f[0], f[len(f)-1] = f[len(f)-1], f[0]
		}},
		{"virtual host retries", "ingress.yaml", "no retries", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].hcm.GetRouteConfig().GetVirtualHosts()[0].RetryPolicy = &routev3.RetryPolicy{RetryOn: "5xx"}
		}},
		{"stream idle timeout unset", "sidecar.yaml", "stream idle timeout", func(t *testing.T, c *envoyConfig) {
			c.hcms[0].hcm.StreamIdleTimeout = nil
		}},
		{"deprecated cluster http2 options", "ingress.yaml", "no deprecated fields", func(t *testing.T, c *envoyConfig) {
			c.clusters["mcpgate_extproc"].Http2ProtocolOptions = &corev3.Http2ProtocolOptions{} //nolint:staticcheck // the point of the test
		}},
		{"route to undefined cluster", "sidecar.yaml", "routes go to defined clusters", func(t *testing.T, c *envoyConfig) {
			route0(c).GetRoute().ClusterSpecifier = &routev3.RouteAction_Cluster{Cluster: "nope"}
		}},
		{"admin on all interfaces", "ingress.yaml", "admin on loopback", func(t *testing.T, c *envoyConfig) {
			c.bs.Admin.Address.GetSocketAddress().Address = "0.0.0.0"
		}},
	}
	for _, tc := range cases {
		t.Run(tc.file+"/"+tc.name, func(t *testing.T) {
			chk := find(bootstrapChecks, tc.check)
			c := newEnvoyConfig(t, tc.file)
			if err := chk.fn(c); err != nil {
				t.Fatalf("check %q fails before the mutation: %v", tc.check, err)
			}
			tc.mutate(t, c)
			if err := chk.fn(c); err == nil {
				t.Fatalf("check %q passed after %q", tc.check, tc.name)
			} else {
				t.Logf("caught: %v", err)
			}
		})
	}
}

// FULL_DUPLEX_STREAMED with trailers SEND is what the trailer check allows.
func TestFullDuplexWithTrailersPasses(t *testing.T) {
	c := newEnvoyConfig(t, "sidecar.yaml")
	pm := c.hcms[0].extProc.ProcessingMode
	pm.RequestBodyMode, pm.RequestTrailerMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocfilterv3.ProcessingMode_SEND
	pm.ResponseBodyMode, pm.ResponseTrailerMode = extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED, extprocfilterv3.ProcessingMode_SEND
	if err := find(bootstrapChecks, "ext_proc: full duplex needs trailers").fn(c); err != nil {
		t.Fatal(err)
	}
}

// The local reply model itself: a JSON-RPC body with a string code, or a
// text body, is refused.
func TestJSONRPCBodyCheck(t *testing.T) {
	bad := []string{
		`{"jsonrpc":"2.0","id":null,"error":{"code":"-32603","message":"x"}}`,
		`{"jsonrpc":"2.0","error":{"code":-32603,"message":"x"}}`,
		`{"jsonrpc":"1.0","id":null,"error":{"code":-32603,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":""}}`,
		`upstream connect error`,
	}
	for _, b := range bad {
		sf := &corev3.SubstitutionFormatString{
			Format:      &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: b}}},
			ContentType: "application/json",
		}
		if jsonRPCBody(sf) == nil {
			t.Errorf("accepted %s", b)
		}
	}
	good := &corev3.SubstitutionFormatString{
		Format:      &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: `{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"%LOCAL_REPLY_BODY%","data":{"status":%RESPONSE_CODE%}}}`}}},
		ContentType: "application/json",
	}
	if err := jsonRPCBody(good); err != nil {
		t.Error(err)
	}
	good.ContentType = "text/plain"
	if jsonRPCBody(good) == nil {
		t.Error("accepted a JSON body served as text/plain")
	}
}

// ------------------------------------------------ commented alternatives --

// Commented-out alternatives in the YAML files sit between
//
//	# mcpgate:alt <protobuf message type> [partial]
//	# mcpgate:end
//
// This test uncomments each and checks it against its type, so the
// alternatives a platform engineer switches on are valid too.
var (
	altStart = regexp.MustCompile(`^\s*#\s*mcpgate:alt\s+(\S+)(\s+partial)?\s*$`)
	altEnd   = regexp.MustCompile(`^\s*#\s*mcpgate:end\s*$`)
)

type altBlock struct {
	where    string
	typeName string
	partial  bool
	yaml     string
}

func altBlocks(t *testing.T, file string) []altBlock {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []altBlock
	for i := 0; i < len(lines); i++ {
		m := altStart.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		b := altBlock{where: fmt.Sprintf("%s:%d", file, i+1), typeName: m[1], partial: m[2] != ""}
		j := i + 1
		for ; j < len(lines) && !altEnd.MatchString(lines[j]); j++ {
			l := strings.TrimLeft(lines[j], " ")
			if !strings.HasPrefix(l, "#") {
				t.Fatalf("%s:%d: uncommented line inside a mcpgate:alt block", file, j+1)
			}
			l = strings.TrimPrefix(strings.TrimPrefix(l, "#"), " ")
			b.yaml += l + "\n"
		}
		if j == len(lines) {
			t.Fatalf("%s: mcpgate:alt block without mcpgate:end", b.where)
		}
		out = append(out, b)
		i = j
	}
	return out
}

func TestCommentedAlternatives(t *testing.T) {
	for _, file := range bootstrapFiles {
		t.Run(file, func(t *testing.T) {
			blocks := altBlocks(t, file)
			if len(blocks) == 0 {
				t.Fatal("no mcpgate:alt blocks found; the header alternative should be documented")
			}
			for _, b := range blocks {
				mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(b.typeName))
				if err != nil {
					t.Errorf("%s: type %s: %v", b.where, b.typeName, err)
					continue
				}
				msg := mt.New().Interface()
				j, err := yaml.YAMLToJSON([]byte(b.yaml))
				if err == nil {
					err = strictJSON.Unmarshal(j, msg)
				}
				if err != nil {
					t.Errorf("%s: %v", b.where, err)
					continue
				}
				if b.partial {
					err = validateAnys(msg, b.typeName)
				} else {
					err = validateDeep(msg, b.typeName)
				}
				if err != nil {
					t.Errorf("%s: %v", b.where, err)
				}
				if d := deprecatedUses(msg); len(d) > 0 {
					t.Errorf("%s: deprecated: %v", b.where, d)
				}
				// The upstream header must be overwritten, never appended:
				// otherwise the client's own value reaches mcpgate.
				eachMessage(msg, func(m proto.Message) {
					if hv, ok := m.(*corev3.HeaderValueOption); ok && strings.EqualFold(hv.GetHeader().GetKey(), upstreamHeader) &&
						hv.GetAppendAction() != corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD {
						t.Errorf("%s: %s set with %s, want OVERWRITE_IF_EXISTS_OR_ADD", b.where, upstreamHeader, hv.GetAppendAction())
					}
				})
			}
		})
	}
}
