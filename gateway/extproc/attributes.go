package extproc

import (
	"sync"
	"sync/atomic"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/types/known/structpb"
)

// Attribute and metadata names mcpgate reads.
const (
	// routeMetadataAttribute is the ext_proc request attribute holding the
	// route's metadata (request_attributes: ["xds.route_metadata"]).
	routeMetadataAttribute = "xds.route_metadata"
	// envoyGatewayNamespace is where Envoy Gateway puts an HTTPRoute's
	// annotations: filter_metadata["envoy-gateway"].resources[].annotations.
	envoyGatewayNamespace = "envoy-gateway"
	// envoyGatewayAnnotation is the HTTPRoute annotation
	// gateway.envoyproxy.io/mcpgate-upstream as Envoy Gateway exposes it.
	envoyGatewayAnnotation = "mcpgate-upstream"
)

// routeUpstream reads the upstream name from one filter's attribute
// Struct (ProcessingRequest.attributes["envoy.filters.http.ext_proc"]).
// Envoy sends xds.route_metadata as the protobuf text form of
// envoy.config.core.v3.Metadata; a Struct form is accepted too. Any other
// shape yields "".
func routeUpstream(attrs *structpb.Struct) string {
	v := attrs.GetFields()[routeMetadataAttribute]
	if v == nil {
		return ""
	}
	var fm map[string]*structpb.Struct
	switch {
	case v.GetStringValue() != "":
		return textRouteUpstream(v.GetStringValue())
	case v.GetStructValue() != nil:
		fm = map[string]*structpb.Struct{}
		for k, ns := range v.GetStructValue().GetFields()["filter_metadata"].GetStructValue().GetFields() {
			fm[k] = ns.GetStructValue()
		}
	}
	return metadataUpstream(fm)
}

// metadataUpstream finds the upstream name in a route's filter metadata:
// filter_metadata["mcpgate"].upstream, else the Envoy Gateway annotation.
func metadataUpstream(fm map[string]*structpb.Struct) string {
	if name := fm[RouteMetadataNamespace].GetFields()["upstream"].GetStringValue(); name != "" {
		return name
	}
	for _, r := range fm[envoyGatewayNamespace].GetFields()["resources"].GetListValue().GetValues() {
		if name := r.GetStructValue().GetFields()["annotations"].GetStructValue().GetFields()[envoyGatewayAnnotation].GetStringValue(); name != "" {
			return name
		}
	}
	return ""
}

// routeNames memoises textRouteUpstream: Envoy sends the same route
// metadata text with every request of a route, and parsing the protobuf
// text form is done once per text. The texts come from the route
// configuration, not from clients; still, at most maxRouteNames are kept,
// and a text beyond that is parsed every time.
var routeNames struct {
	m sync.Map // metadata text → upstream name ("" when none)
	n atomic.Int32
}

const maxRouteNames = 1024

// textRouteUpstream is routeUpstream for the protobuf text form of
// envoy.config.core.v3.Metadata.
func textRouteUpstream(text string) string {
	if name, ok := routeNames.m.Load(text); ok {
		return name.(string)
	}
	name := ""
	var md corev3.Metadata
	if err := prototext.Unmarshal([]byte(text), &md); err == nil {
		name = metadataUpstream(md.GetFilterMetadata())
	}
	if routeNames.n.Load() < maxRouteNames {
		if _, loaded := routeNames.m.LoadOrStore(text, name); !loaded {
			routeNames.n.Add(1)
		}
	}
	return name
}
