package extproc

import (
	"google.golang.org/protobuf/types/known/structpb"
)

// structAttrs is one filter's attribute Struct
// (ProcessingRequest.attributes["envoy.filters.http.ext_proc"]).
type structAttrs structpb.Struct

func structs(m map[string]*structpb.Struct) map[string]*structAttrs {
	out := make(map[string]*structAttrs, len(m))
	for k, v := range m {
		out[k] = (*structAttrs)(v)
	}
	return out
}

// routeUpstream reads xds.route_metadata → filter_metadata → mcpgate →
// upstream, defensively: any other shape yields "".
func (a *structAttrs) routeUpstream() string {
	md := (*structpb.Struct)(a).GetFields()["xds.route_metadata"].GetStructValue()
	ns := md.GetFields()["filter_metadata"].GetStructValue().GetFields()[RouteMetadataNamespace].GetStructValue()
	return ns.GetFields()["upstream"].GetStringValue()
}
