package extproc

import (
	"log/slog"
	"net/http"
	"slices"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// Routing a federated request to its member under Envoy.
//
// On a route that fronts several upstreams the verdict names the member
// a request goes to (gateway.Verdict.Upstream). Envoy forwards, so mcpgate
// tells it: the request answer sets gateway.UpstreamHeader to the member
// (overwriting any value) and sets CommonResponse.clear_route_cache, and
// Envoy's route table has a route per member that matches the header's
// exact value and goes to the member's cluster. :authority is left alone:
// Envoy's default mutation rules refuse to change it, and filters and
// policies keyed on the host would see another host.
//
// Envoy's rules, from its source:
//
//   - The route is chosen once, on the client's headers, before any HTTP
//     filter runs (ConnectionManagerImpl::ActiveStream::decodeHeaders calls
//     refreshCachedRoute), and cached. The router filter takes the cached
//     route when it starts the upstream request (Router::Filter::
//     decodeHeaders → route()); only after clearRouteCache is it chosen
//     again, on the headers as they are then.
//   - ext_proc clears the cache for a headers or body answer
//     (ProcessorState::handleHeadersResponse, handleBodyResponse, after the
//     mutation is applied), in DecodingProcessorState::clearRouteCache, and
//     only for an answer that carries a header_mutation: clear_route_cache
//     alone is ignored (stat clear_route_cache_ignored). The filter's
//     route_cache_action decides: DEFAULT clears when clear_route_cache is
//     set, CLEAR clears on every answer with a header mutation, RETAIN never
//     clears (stat clear_route_cache_disabled). disable_clear_route_cache:
//     true is RETAIN (FilterConfig's constructor, ext_proc.cc); the two
//     together are refused (verifyFilterConfig, config.cc). An ext_proc
//     filter in a cluster's upstream filter chain never clears (stat
//     clear_route_cache_upstream_ignored).
//   - Response answers never clear: EncodingProcessorState keeps
//     ProcessorState's no-op clearRouteCache (processor_state.h); the route
//     was used long before.
//   - The answer must reach Envoy before the router runs. With the request
//     body BUFFERED the headers are held until the body answer
//     (handleHeadersResponse returns without continuing in BUFFERED mode), so
//     the body answer's header mutation and clear choose the route: that
//     is where mcpgate, which needs the body to know the tool, routes. In
//     STREAMED (and FULL_DUPLEX_STREAMED) mode the headers answer lets the
//     headers through to the router, which has picked the route before any
//     body answer (whose header mutations are not applied either,
//     handleStreamedBodyResponse): routing on the body is impossible there,
//     so mcpgate refuses a body mode other than BUFFERED when Envoy states
//     it (ProcessingRequest.protocol_config). A request without a body is
//     routed by the headers answer.
//
// A client's own UpstreamHeader never survives: when the request carried
// one, the answer sets the member's value or removes it, and clears the
// route cache either way, so that a route Envoy chose on the client's
// header is chosen again without it. The mutation (set or remove) also
// makes Envoy honour the clear.
//
// What Envoy's configuration must do (config/envoy/federation.yaml,
// docs/guides/federation-envoy.md): ext_proc before the router, in the
// connection manager's filter chain (not a cluster's), request body
// BUFFERED, route_cache_action DEFAULT or CLEAR (never RETAIN,
// never disable_clear_route_cache), member routes that match the header
// before any route that matches the path alone, every route of the
// endpoint naming the virtual server in its mcpgate route metadata, and a
// default route that answers an error instead of reaching a member (a
// request that was not routed, e.g. when the clear was ignored, fails
// instead of landing on whichever member the default would pick).

// routing adds the member routing to the header mutation of a request
// mcpgate forwards: set and remove are the verdict's (set is not
// modified). clear reports whether the answer must clear Envoy's route
// cache.
func (ex *exchange) routing(set mcp.Header, remove []string) (_ mcp.Header, _ []string, clear bool) {
	member := ex.verdict.Upstream
	_, sent := ex.req.Header[gateway.UpstreamHeader]
	switch {
	case member != "":
		set = set.Clone()
		if set == nil {
			set = mcp.Header{}
		}
		set[gateway.UpstreamHeader] = []string{member}
		// The verdict removes the header from every forwarded request
		// (a client's own never reaches an upstream); here it is set,
		// and only set: the route Envoy chooses must not depend on the
		// order in which it applies remove_headers and set_headers. The
		// member's route removes it before the member
		// (request_headers_to_remove).
		if slices.Contains(remove, gateway.UpstreamHeader) {
			remove = slices.DeleteFunc(slices.Clone(remove), func(h string) bool { return h == gateway.UpstreamHeader })
		}
		return set, remove, true
	case sent:
		if !slices.Contains(remove, gateway.UpstreamHeader) {
			remove = append(remove[:len(remove):len(remove)], gateway.UpstreamHeader)
		}
		return set, remove, true
	}
	return set, remove, false
}

// checkBodyMode refuses a request whose body Envoy does not send
// BUFFERED, as its first message's protocol_config states (the stream's
// body modes, per-route overrides applied: Filter::encodeProtocolConfig,
// ext_proc.cc; Envoys that send none are checked when the body arrives):
// mcpgate decides on the whole body, and its header answer (credentials
// removed, the member's route) only applies while Envoy holds the headers
// for it.
func checkBodyMode(in *extprocv3.ProcessingRequest) *gateway.Local {
	pc := in.GetProtocolConfig()
	if pc == nil || pc.GetRequestBodyMode() == extprocfilterv3.ProcessingMode_BUFFERED {
		return nil
	}
	return gateway.Misconfigured("mcpgate: Envoy must send the request body BUFFERED (request_body_mode: BUFFERED), not " + pc.GetRequestBodyMode().String())
}

// checkRouted reports a request mcpgate routed to a member that Envoy
// answered from the endpoint's own route instead: the 421 the federation
// examples answer requests with when no member route was chosen. The
// member never got the request (the client gets Envoy's answer); the
// operator gets the likely causes.
func (ex *exchange) checkRouted(status int) {
	if ex.verdict.Upstream == "" || status != http.StatusMisdirectedRequest {
		return
	}
	ex.s.log.LogAttrs(ex.ctx, slog.LevelError, "Envoy did not route the request to its member: answered 421 (the endpoint's own route); check route_cache_action (DEFAULT, not RETAIN or disable_clear_route_cache), that the member's route matches "+gateway.UpstreamHeader+" exactly and comes before the route on the path alone, and that the ext_proc filter runs in the connection manager",
		slog.String("upstream", ex.req.Upstream), slog.String("member", ex.verdict.Upstream))
}
