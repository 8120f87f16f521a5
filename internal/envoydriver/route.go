package envoydriver

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// Route is one route of the driver's virtual host (RouteConfiguration
// virtual_hosts[].routes[]): routes are matched in order and the first
// that matches is the request's route (RouteMatcher::route,
// source/common/router/config_impl.cc).
type Route struct {
	// Name is the route's name ("xds.route_name").
	Name string
	// Path matches the request's path exactly, the query left out
	// (RouteMatch.path; PathMatcher compares the path without query and
	// fragment). "" matches every path (RouteMatch.prefix "/").
	Path string
	// Headers must all be present with exactly these values
	// (RouteMatch.headers with string_match.exact). A field that appears
	// more than once is matched on its values joined with ","
	// (HeaderUtility::getAllOfHeaderAsString); an absent field never
	// matches.
	Headers map[string]string
	// Metadata is the route's metadata ("xds.route_metadata"), filter
	// namespace → fields.
	Metadata map[string]map[string]any
	// Cluster is the route's cluster ("xds.cluster_name") and Upstream
	// its address (scheme://host:port); the path and query come from the
	// request's :path. Unset with DirectResponse.
	Cluster  string
	Upstream *url.URL
	// DirectResponse, when set, makes the router answer itself
	// (Route.direct_response) instead of forwarding.
	DirectResponse *DirectResponse
	// RequestHeadersToRemove are removed from the request the router
	// forwards on this route (Route.request_headers_to_remove, applied by
	// the router after the route was chosen: RouteEntryImplBase::
	// finalizeRequestHeaders).
	RequestHeadersToRemove []string
}

// DirectResponse is a route's direct_response (and the content-type a
// route's response_headers_to_add gives it).
type DirectResponse struct {
	Status      int
	Body        string
	ContentType string
}

// route is a Route with its metadata converted.
type route struct {
	Route
	md *corev3.Metadata
}

// compileRoutes builds the route table: cfg.Routes, or without them the
// one route every request takes (cfg.Upstream, RouteName, ClusterName,
// RouteMetadata).
func compileRoutes(cfg *Config) ([]*route, error) {
	rs := cfg.Routes
	if len(rs) == 0 {
		if cfg.Upstream == nil || cfg.Upstream.Scheme == "" || cfg.Upstream.Host == "" {
			return nil, errors.New("Upstream must be an absolute URL (scheme://host:port)")
		}
		rs = []Route{{Name: cfg.RouteName, Cluster: cfg.ClusterName, Metadata: cfg.RouteMetadata, Upstream: cfg.Upstream}}
	} else if cfg.Upstream != nil || cfg.RouteName != "" || cfg.ClusterName != "" || cfg.RouteMetadata != nil {
		return nil, errors.New("Routes replaces Upstream, RouteName, ClusterName and RouteMetadata: set one or the other")
	}
	var out []*route
	var errs []error
	for i, r := range rs {
		if (r.Upstream == nil) == (r.DirectResponse == nil) {
			errs = append(errs, fmt.Errorf("route %d (%s): exactly one of Upstream and DirectResponse", i, r.Name))
		}
		if r.Upstream != nil && (r.Upstream.Scheme == "" || r.Upstream.Host == "") {
			errs = append(errs, fmt.Errorf("route %d (%s): Upstream must be an absolute URL (scheme://host:port)", i, r.Name))
		}
		if r.DirectResponse != nil && (r.DirectResponse.Status < 200 || r.DirectResponse.Status > 599) {
			errs = append(errs, fmt.Errorf("route %d (%s): direct response status %d", i, r.Name, r.DirectResponse.Status))
		}
		md, err := routeMetadata(r.Metadata)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %d (%s): %w", i, r.Name, err))
		}
		out = append(out, &route{Route: r, md: md})
	}
	return out, errors.Join(errs...)
}

// match is RouteMatcher::route: the first route that matches h, nil for
// none.
func (d *Driver) match(h *headerMap) *route {
	path, _ := h.first(":path")
	path, _, _ = strings.Cut(path, "?")
	path, _, _ = strings.Cut(path, "#")
next:
	for _, r := range d.routes {
		if r.Path != "" && r.Path != path {
			continue
		}
		for k, want := range r.Headers {
			var vals []string
			for _, e := range h.entries {
				if e.key == k {
					vals = append(vals, e.value)
				}
			}
			if len(vals) == 0 || strings.Join(vals, ",") != want {
				continue next
			}
		}
		return r
	}
	return nil
}

// routeCacheAction is the filter's route_cache_action, with
// disable_clear_route_cache: true read as RETAIN (FilterConfig's
// constructor, source/extensions/filters/http/ext_proc/ext_proc.cc); both
// set otherwise than their defaults is refused (verifyFilterConfig,
// config.cc).
func routeCacheAction(cfg *Config) (extprocfilterv3.ExternalProcessor_RouteCacheAction, error) {
	a := cfg.RouteCacheAction
	if _, ok := extprocfilterv3.ExternalProcessor_RouteCacheAction_name[int32(a)]; !ok {
		return 0, fmt.Errorf("route_cache_action %d is not defined", a)
	}
	if cfg.DisableClearRouteCache {
		if a != extprocfilterv3.ExternalProcessor_DEFAULT {
			return 0, errors.New("disable_clear_route_cache and route_cache_action can not be set to none-default at the same time")
		}
		a = extprocfilterv3.ExternalProcessor_RETAIN
	}
	return a, nil
}

// clearRouteCache is DecodingProcessorState::clearRouteCache
// (processor_state.cc), called after a headers or body answer's mutations
// were applied (handleHeadersResponse, handleBodyResponse). Responses never
// clear: EncodingProcessorState keeps ProcessorState's no-op
// (processor_state.h). An answer without a header_mutation never clears
// (clear_route_cache_ignored); DEFAULT clears when clear_route_cache is
// set, CLEAR on every answer with a header mutation, RETAIN never
// (clear_route_cache_disabled). Clearing drops the route the connection
// manager chose on the client's headers (ActiveStream::clearRouteCache);
// the router chooses again when it starts the upstream request.
func (x *exchange) clearRouteCache(st *dirState, cr *extprocv3.CommonResponse) {
	if st.response {
		return
	}
	flag := cr.GetClearRouteCache()
	if cr.GetHeaderMutation() == nil {
		if flag {
			x.d.st.clearRouteCacheIgnored.Add(1)
		}
		return
	}
	switch x.d.routeCache {
	case extprocfilterv3.ExternalProcessor_DEFAULT:
		if !flag {
			return
		}
	case extprocfilterv3.ExternalProcessor_RETAIN:
		if flag {
			x.d.st.clearRouteCacheDisabled.Add(1)
		}
		return
	}
	x.d.st.clearRouteCache.Add(1)
	x.route, x.routeCached = nil, false
	x.d.logf("route cache cleared")
}

// currentRoute is ActiveStream::route: the cached route, or a new choice
// on the request headers as they are now when the cache was cleared.
func (x *exchange) currentRoute() *route {
	if !x.routeCached {
		x.route, x.routeCached = x.d.match(x.dec.headers), true
		name := "none"
		if x.route != nil {
			name = x.route.Name
		}
		x.d.logf("route chosen: %s", name)
	}
	return x.route
}
