package envoydriver

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// filterName is the key of ProcessingRequest.attributes that Envoy fills
// (FilterName in source/extensions/filters/http/ext_proc/ext_proc.cc).
const filterName = "envoy.filters.http.ext_proc"

func sortedKeys[M ~map[string]V, V any](m M) []string {
	return slices.Sorted(maps.Keys(m))
}

// attributeContext is what Envoy's CEL activation can see when it evaluates
// request_attributes / response_attributes.
type attributeContext struct {
	req         *http.Request
	reqHeaders  *headerMap
	respHeaders *headerMap
	start       time.Time
	cfg         *Config
	route       *route // the stream's route when the attributes are sent; nil for none
}

// evaluate mirrors ExpressionManager::evaluateAttributes
// (source/extensions/filters/http/ext_proc/matching_utils.cc): each attribute
// that evaluates becomes one field of a Struct; bool is a bool, int64/uint64
// a number, everything else a string as Filters::Common::Expr::print renders
// it — maps print as "map value" and messages (xds.route_metadata) in
// protobuf's single-line text format (Message::ShortDebugString). Attributes
// that fail to evaluate (unknown names, absent values) are left out.
func (a *attributeContext) evaluate(names []string) *structpb.Struct {
	out := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for _, name := range names {
		if v, ok := a.value(name); ok {
			out.Fields[name] = v
		}
	}
	return out
}

func (a *attributeContext) value(name string) (*structpb.Value, bool) {
	str := func(s string) (*structpb.Value, bool) { return structpb.NewStringValue(s), true }
	num := func(n int64) (*structpb.Value, bool) { return structpb.NewNumberValue(float64(n)), true }
	hdr := func(h *headerMap, k string) (*structpb.Value, bool) {
		if h == nil {
			return nil, false
		}
		v, ok := h.first(k)
		if !ok {
			return nil, false
		}
		return str(v)
	}
	rh := a.reqHeaders
	switch name {
	case "request.path":
		return hdr(rh, ":path")
	case "request.url_path":
		p, ok := rh.first(":path")
		if !ok {
			return nil, false
		}
		p, _, _ = strings.Cut(p, "?")
		return str(p)
	case "request.query":
		p, _ := rh.first(":path")
		_, q, _ := strings.Cut(p, "?")
		return str(q)
	case "request.host":
		return hdr(rh, ":authority")
	case "request.scheme":
		return hdr(rh, ":scheme")
	case "request.method":
		return hdr(rh, ":method")
	case "request.id":
		return hdr(rh, "x-request-id")
	case "request.referer":
		return hdr(rh, "referer")
	case "request.useragent":
		return hdr(rh, "user-agent")
	case "request.protocol":
		return str(a.req.Proto)
	case "request.time":
		// absl::FormatTime with the default RFC 3339 full format in UTC.
		return str(a.start.UTC().Format("2006-01-02T15:04:05.999999999-07:00"))
	case "request.headers", "response.headers":
		return str("map value")
	case "source.address":
		return str(a.req.RemoteAddr)
	case "source.port":
		if _, p, err := net.SplitHostPort(a.req.RemoteAddr); err == nil {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil {
				return num(n)
			}
		}
		return nil, false
	case "destination.address", "destination.port":
		addr, ok := a.req.Context().Value(http.LocalAddrContextKey).(net.Addr)
		if !ok {
			return nil, false
		}
		if name == "destination.address" {
			return str(addr.String())
		}
		if _, p, err := net.SplitHostPort(addr.String()); err == nil {
			if n, err := strconv.ParseInt(p, 10, 64); err == nil {
				return num(n)
			}
		}
		return nil, false
	case "connection.mtls":
		return structpb.NewBoolValue(a.req.TLS != nil && len(a.req.TLS.PeerCertificates) > 0), true
	case "xds.route_name":
		if a.route == nil || a.route.Name == "" {
			return nil, false
		}
		return str(a.route.Name)
	case "xds.cluster_name":
		if a.route == nil || a.route.Cluster == "" {
			return nil, false
		}
		return str(a.route.Cluster)
	case "xds.route_metadata":
		if a.route == nil || a.route.md == nil {
			return str("")
		}
		return str(metadataDebugString(a.route.md))
	case "response.code":
		if a.respHeaders == nil {
			return nil, false
		}
		s, _ := a.respHeaders.first(":status")
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, false
		}
		return num(n)
	}
	return nil, false
}

// routeMetadata converts Config.RouteMetadata to an envoy.config.core.v3.Metadata.
func routeMetadata(in map[string]map[string]any) (*corev3.Metadata, error) {
	if in == nil {
		return nil, nil
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{}}
	for ns, fields := range in {
		s, err := structpb.NewStruct(fields)
		if err != nil {
			return nil, fmt.Errorf("route metadata namespace %q: %w", ns, err)
		}
		md.FilterMetadata[ns] = s
	}
	return md, nil
}

// metadataDebugString renders md the way protobuf C++'s
// Message::ShortDebugString does (single-line text format, map entries sorted
// by key, strings C-escaped, doubles via SimpleDtoa). It is valid text format
// that prototext can parse. Note that protobuf C++ v30+ may prefix debug
// output with a "goo.gle/debugstr" marker, so real Envoy output is not a
// stable format; this driver never emits the marker.
func metadataDebugString(md *corev3.Metadata) string {
	var parts []string
	for _, ns := range sortedKeys(md.GetFilterMetadata()) {
		parts = append(parts, fmt.Sprintf("filter_metadata { key: %s value { %s} }",
			cEscapeQuoted(ns), structFields(md.GetFilterMetadata()[ns])))
	}
	return strings.Join(parts, " ")
}

// structFields renders the fields of a Struct followed by a space each, so an
// empty Struct renders as "{ }" in its parent.
func structFields(s *structpb.Struct) string {
	var b strings.Builder
	for _, k := range sortedKeys(s.GetFields()) {
		fmt.Fprintf(&b, "fields { key: %s value { %s} } ", cEscapeQuoted(k), valueFields(s.GetFields()[k]))
	}
	return b.String()
}

func valueFields(v *structpb.Value) string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_NullValue:
		return "null_value: NULL_VALUE "
	case *structpb.Value_NumberValue:
		return "number_value: " + simpleDtoa(k.NumberValue) + " "
	case *structpb.Value_StringValue:
		return "string_value: " + cEscapeQuoted(k.StringValue) + " "
	case *structpb.Value_BoolValue:
		return "bool_value: " + strconv.FormatBool(k.BoolValue) + " "
	case *structpb.Value_StructValue:
		return "struct_value { " + structFields(k.StructValue) + "} "
	case *structpb.Value_ListValue:
		var b strings.Builder
		b.WriteString("list_value { ")
		for _, e := range k.ListValue.GetValues() {
			b.WriteString("values { " + valueFields(e) + "} ")
		}
		b.WriteString("} ")
		return b.String()
	}
	return ""
}

// simpleDtoa mirrors absl/protobuf SimpleDtoa: %.15g if it round-trips,
// otherwise %.17g.
func simpleDtoa(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'g', 15, 64)
	if back, err := strconv.ParseFloat(s, 64); err == nil && back == f {
		return s
	}
	return strconv.FormatFloat(f, 'g', 17, 64)
}

// cEscapeQuoted mirrors absl::CEscape inside double quotes.
func cEscapeQuoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\'':
			b.WriteString(`\'`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, "\\%03o", c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
