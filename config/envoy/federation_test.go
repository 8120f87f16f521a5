package envoy_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcpgate/mcpgate/gateway"
)

// Federation: one endpoint, several member upstreams. mcpgate names the
// member in gateway.UpstreamHeader and clears the route cache in its
// answer to the request body; Envoy then chooses the member's route. The
// checks below hold an Envoy configuration to what that needs
// (gateway/extproc/route.go has Envoy's rules and their source).

// memberValue returns the member a route matches on gateway.UpstreamHeader
// (exact value), and whether it matches on that header at all.
func memberValue(r *routev3.Route) (string, bool) {
	for _, hm := range r.GetMatch().GetHeaders() {
		if hm.GetName() == gateway.UpstreamHeader {
			return hm.GetStringMatch().GetExact(), true
		}
	}
	return "", false
}

// federated reports whether any route of h routes on the member header.
func federated(h *mcpHCM) bool {
	return slices.ContainsFunc(mcpRoutes(h), func(r *routev3.Route) bool {
		_, ok := memberValue(r)
		return ok
	})
}

// checkRouteCacheAction: a federated endpoint needs Envoy to honour
// clear_route_cache (DEFAULT; CLEAR would also do), never RETAIN or
// disable_clear_route_cache, or every call stays on the route chosen on the
// client's headers. Elsewhere mcpgate's header changes must not re-select
// the route it decided on: RETAIN.
func checkRouteCacheAction(ep *extprocfilterv3.ExternalProcessor, federated bool) error {
	a := ep.GetRouteCacheAction()
	switch {
	case federated && ep.GetDisableClearRouteCache():
		return errors.New("disable_clear_route_cache: Envoy would ignore clear_route_cache and never route to a member")
	case federated && a == extprocfilterv3.ExternalProcessor_RETAIN:
		return errors.New("route_cache_action RETAIN: Envoy would ignore clear_route_cache and never route to a member; use DEFAULT")
	case !federated && a != extprocfilterv3.ExternalProcessor_RETAIN:
		return fmt.Errorf("route_cache_action %s: mcpgate's header changes must not re-select the route it decided on", a)
	}
	return nil
}

// samePath reports whether two route matches select the same paths.
func samePath(a, b *routev3.RouteMatch) bool {
	return a.GetPath() == b.GetPath() && a.GetPrefix() == b.GetPrefix() && a.GetPathSeparatedPrefix() == b.GetPathSeparatedPrefix()
}

// checkMemberRoutes checks the routes of one virtual host: each member
// route matches gateway.UpstreamHeader exactly on one member name and
// forwards; for every path with member routes a route on the path alone
// comes after them (before them it would take every request) and answers
// itself (a request mcpgate did not route never reaches a member); all
// routes of the path name the same mcpgate upstream (the virtual server)
// in their metadata, so mcpgate serves the request alike whichever route
// Envoy chose on the client's headers.
func checkMemberRoutes(vh *routev3.VirtualHost) error {
	routes := vh.GetRoutes()
	var errs []error
	for i, r := range routes {
		member, ok := memberValue(r)
		if !ok {
			continue
		}
		hm := r.GetMatch().GetHeaders()
		if len(hm) != 1 || !upstreamName.MatchString(member) || hm[0].GetInvertMatch() || hm[0].GetTreatMissingHeaderAsEmpty() {
			errs = append(errs, fmt.Errorf("route %s: want one header match, %s exactly equal to an mcpgate upstream name", r.GetName(), gateway.UpstreamHeader))
		}
		if r.GetRoute().GetCluster() == "" {
			errs = append(errs, fmt.Errorf("route %s: a member route forwards to the member's cluster", r.GetName()))
		}
		if !slices.Contains(r.GetRequestHeadersToRemove(), gateway.UpstreamHeader) {
			errs = append(errs, fmt.Errorf("route %s: request_headers_to_remove lacks %s: the member would get mcpgate's routing header", r.GetName(), gateway.UpstreamHeader))
		}
		server := r.GetMetadata().GetFilterMetadata()[routeMetaNS].GetFields()[routeMetaKey].GetStringValue()
		fallback := -1
		for j, o := range routes {
			if !samePath(o.GetMatch(), r.GetMatch()) {
				continue
			}
			if got := o.GetMetadata().GetFilterMetadata()[routeMetaNS].GetFields()[routeMetaKey].GetStringValue(); got != server {
				errs = append(errs, fmt.Errorf("route %s names mcpgate upstream %q, member route %s %q: the routes of one endpoint name the same virtual server", o.GetName(), got, r.GetName(), server))
			}
			if v, isMember := memberValue(o); isMember && v == member && j != i {
				errs = append(errs, fmt.Errorf("routes %s and %s both route member %q", r.GetName(), o.GetName(), member))
			}
			if len(o.GetMatch().GetHeaders()) == 0 && fallback < 0 {
				fallback = j
			}
		}
		switch {
		case fallback < 0:
			errs = append(errs, fmt.Errorf("route %s: no route on its path alone answers requests mcpgate names no member for", r.GetName()))
		case fallback < i:
			errs = append(errs, fmt.Errorf("route %s comes after %s, which matches the same path without the header: Envoy takes the first match, the member route is never chosen", r.GetName(), routes[fallback].GetName()))
		case routes[fallback].GetDirectResponse() == nil:
			errs = append(errs, fmt.Errorf("route %s forwards: a request mcpgate did not route would reach a member; answer with direct_response", routes[fallback].GetName()))
		}
	}
	return errors.Join(errs...)
}

var federationChecks = []check[*envoyConfig]{
	{"route cache action", func(c *envoyConfig) error {
		var errs []error
		for _, h := range c.hcms {
			if err := checkRouteCacheAction(h.extProc, federated(h)); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h, err))
			}
		}
		return errors.Join(errs...)
	}},
	{"member routes", func(c *envoyConfig) error {
		var errs []error
		for _, h := range c.hcms {
			for _, vh := range h.hcm.GetRouteConfig().GetVirtualHosts() {
				if err := checkMemberRoutes(vh); err != nil {
					errs = append(errs, fmt.Errorf("%s: %w", h, err))
				}
			}
		}
		return errors.Join(errs...)
	}},
	{"federation example routes", func(c *envoyConfig) error {
		// federation.yaml must keep routing on the header (the other
		// files may: the chart renders sidecar.yaml with members).
		for _, h := range c.hcms {
			if c.file == "federation.yaml" && !federated(h) {
				return fmt.Errorf("%s: no route on %s", h, gateway.UpstreamHeader)
			}
		}
		return nil
	}},
}

// TestFederationChecksCatchMistakes: the usual ways a federated endpoint
// goes wrong fail the checks.
func TestFederationChecksCatchMistakes(t *testing.T) {
	vh := func(c *envoyConfig) *routev3.VirtualHost { return c.hcms[0].hcm.GetRouteConfig().GetVirtualHosts()[0] }
	for _, tt := range []struct {
		name, check string
		mutate      func(c *envoyConfig)
	}{
		{"RETAIN", "route cache action", func(c *envoyConfig) {
			c.hcms[0].extProc.RouteCacheAction = extprocfilterv3.ExternalProcessor_RETAIN
		}},
		{"disable_clear_route_cache", "route cache action", func(c *envoyConfig) {
			c.hcms[0].extProc.DisableClearRouteCache = true
		}},
		{"member route after the path route", "member routes", func(c *envoyConfig) {
			rs := vh(c).Routes
			rs[1], rs[2] = rs[2], rs[1]
		}},
		{"path route forwards", "member routes", func(c *envoyConfig) {
			vh(c).Routes[2].Action = &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "crm_upstream"}}}
		}},
		{"no path route", "member routes", func(c *envoyConfig) {
			vh(c).Routes = slices.Delete(vh(c).Routes, 2, 3)
		}},
		{"member route names the member to mcpgate", "member routes", func(c *envoyConfig) {
			vh(c).Routes[0].GetMetadata().GetFilterMetadata()[routeMetaNS].GetFields()[routeMetaKey].Kind = structString("crm")
		}},
		{"prefix match on the header", "member routes", func(c *envoyConfig) {
			vh(c).Routes[0].GetMatch().GetHeaders()[0].HeaderMatchSpecifier = &routev3.HeaderMatcher_StringMatch{StringMatch: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Prefix{Prefix: "c"}}}
		}},
		{"routing header forwarded to the member", "member routes", func(c *envoyConfig) {
			vh(c).Routes[0].RequestHeadersToRemove = nil
		}},
		{"two routes for one member", "member routes", func(c *envoyConfig) {
			vh(c).Routes[1].GetMatch().GetHeaders()[0].GetStringMatch().MatchPattern = &matcherv3.StringMatcher_Exact{Exact: "crm"}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newEnvoyConfig(t, "federation.yaml")
			if err := find(bootstrapChecks, tt.check).fn(c); err != nil {
				t.Fatalf("the file fails %q before the change: %v", tt.check, err)
			}
			tt.mutate(c)
			if err := find(bootstrapChecks, tt.check).fn(c); err == nil {
				t.Fatalf("check %q passed after %s", tt.check, tt.name)
			}
		})
	}
}

func structString(s string) *structpb.Value_StringValue {
	return &structpb.Value_StringValue{StringValue: s}
}

// ------------------------------------------------------- Envoy Gateway ----

// egMember returns the member an HTTPRoute rule matches on
// gateway.UpstreamHeader, and whether it matches on it.
func egMember(r *httpRoute, rule int) (string, bool) {
	for _, m := range r.Spec.Rules[rule].Matches {
		for _, h := range m.Headers {
			if strings.EqualFold(h.Name, gateway.UpstreamHeader) {
				return h.Value, true
			}
		}
	}
	return "", false
}

// egFederated reports whether an HTTPRoute routes on the member header.
func egFederated(r *httpRoute) bool {
	for i := range r.Spec.Rules {
		if _, ok := egMember(r, i); ok {
			return true
		}
	}
	return false
}

var egFederationChecks = []check[*egConfig]{
	// A request first matches a rule on the client's headers: every rule
	// of a federated endpoint must run mcpgate, so they all sit in one
	// HTTPRoute the EnvoyExtensionPolicy targets.
	{"member rules attached to mcpgate", func(c *egConfig) error {
		var errs []error
		for _, r := range c.routes {
			if !egFederated(r) {
				continue
			}
			attached := slices.ContainsFunc(c.eeps, func(p *envoyExtensionPolicy) bool {
				return p.Metadata.Namespace == r.Metadata.Namespace && targets(p.Spec.TargetRefs, "HTTPRoute", r.Metadata.Name)
			})
			if !attached {
				errs = append(errs, fmt.Errorf("HTTPRoute %s routes on %s but no EnvoyExtensionPolicy attaches mcpgate to it", r.Metadata, gateway.UpstreamHeader))
			}
			for _, o := range c.routes {
				if o == r {
					continue
				}
				for _, rule := range o.Spec.Rules {
					for _, m := range rule.Matches {
						for _, rm := range r.Spec.Rules {
							for _, mm := range rm.Matches {
								if m.Path == mm.Path {
									errs = append(errs, fmt.Errorf("HTTPRoutes %s and %s both match path %s: keep the endpoint's rules in one HTTPRoute", r.Metadata, o.Metadata, m.Path.Value))
								}
							}
						}
					}
				}
			}
		}
		return errors.Join(errs...)
	}},
	{"member rules", eachEGRoute(func(_ *egConfig, r *httpRoute) error {
		if !egFederated(r) {
			return nil
		}
		var errs []error
		seen := map[string]bool{}
		for i, rule := range r.Spec.Rules {
			member, ok := egMember(r, i)
			if !ok {
				continue
			}
			if len(rule.Matches) != 1 || len(rule.Matches[0].Headers) != 1 || cmpOr(rule.Matches[0].Headers[0].Type, "Exact") != "Exact" || !upstreamName.MatchString(member) {
				errs = append(errs, fmt.Errorf("rule %d: want one match with one header match, %s Exact on an mcpgate upstream name", i, gateway.UpstreamHeader))
			}
			if seen[member] {
				errs = append(errs, fmt.Errorf("rule %d: member %q routed twice", i, member))
			}
			seen[member] = true
			if len(rule.BackendRefs) == 0 {
				errs = append(errs, fmt.Errorf("rule %d: a member rule forwards to the member's backend", i))
			}
			removes := false
			for _, f := range rule.Filters {
				if f.Type == "RequestHeaderModifier" && f.RequestHeaderModifier != nil && slices.Contains(f.RequestHeaderModifier.Remove, gateway.UpstreamHeader) {
					removes = true
				}
			}
			if !removes {
				errs = append(errs, fmt.Errorf("rule %d: no RequestHeaderModifier removes %s: the member would get mcpgate's routing header", i, gateway.UpstreamHeader))
			}
			path := rule.Matches[0].Path
			fallback := -1
			for j, o := range r.Spec.Rules {
				if len(o.Matches) == 1 && o.Matches[0].Path == path && len(o.Matches[0].Headers) == 0 {
					fallback = j
					break
				}
			}
			switch {
			case fallback < 0:
				errs = append(errs, fmt.Errorf("rule %d: no rule on path %s alone answers requests mcpgate names no member for", i, path.Value))
			case len(r.Spec.Rules[fallback].BackendRefs) > 0:
				errs = append(errs, fmt.Errorf("rule %d on path %s alone forwards: a request mcpgate did not route would reach a member; leave its backendRefs out", fallback, path.Value))
			}
		}
		return errors.Join(errs...)
	})},
}

func init() { egChecks = append(egChecks, egFederationChecks...) }

func TestEnvoyGatewayFederation(t *testing.T) {
	c := loadEG(t, "envoy-gateway.yaml", "envoy-gateway-federation.yaml")
	runChecks(t, egChecks, c)
	if !slices.ContainsFunc(c.routes, egFederated) {
		t.Error("no HTTPRoute routes on " + gateway.UpstreamHeader)
	}
}

// TestEnvoyGatewayFederationChecksCatchMistakes: the ways a federated
// HTTPRoute goes wrong fail the checks.
func TestEnvoyGatewayFederationChecksCatchMistakes(t *testing.T) {
	team := func(c *egConfig) *httpRoute { return c.route("team", "team-mcp") }
	for _, tt := range []struct {
		name, check string
		mutate      func(c *egConfig)
	}{
		{"fallback forwards", "member rules", func(c *egConfig) {
			team(c).Spec.Rules[2].BackendRefs = []backendRef{{Name: "crm-mcp", Port: 8080}}
		}},
		{"no fallback", "member rules", func(c *egConfig) {
			team(c).Spec.Rules = slices.Delete(team(c).Spec.Rules, 2, 3)
		}},
		{"regular expression on the header", "member rules", func(c *egConfig) {
			team(c).Spec.Rules[0].Matches[0].Headers[0].Type = "RegularExpression"
		}},
		{"routing header forwarded to the member", "member rules", func(c *egConfig) {
			team(c).Spec.Rules[0].Filters = nil
		}},
		{"member rule without backend", "member rules", func(c *egConfig) {
			team(c).Spec.Rules[1].BackendRefs = nil
		}},
		{"member rules in an HTTPRoute mcpgate is not attached to", "member rules attached to mcpgate", func(c *egConfig) {
			other := *team(c)
			other.Metadata.Name = "team-members"
			other.Spec.Rules = other.Spec.Rules[:2]
			team(c).Spec.Rules = team(c).Spec.Rules[2:]
			c.routes = append(c.routes, &other)
		}},
		{"request body streamed", "processing modes", func(c *egConfig) {
			for _, p := range c.eeps {
				if p.Metadata.Namespace == "team" {
					p.Spec.ExtProc[0].ProcessingMode.Request.Body = "Streamed"
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := loadEG(t, "envoy-gateway.yaml", "envoy-gateway-federation.yaml")
			chk := find(egChecks, tt.check)
			if err := chk.fn(c); err != nil {
				t.Fatalf("check %q fails before the change: %v", tt.check, err)
			}
			tt.mutate(c)
			if err := chk.fn(c); err == nil {
				t.Fatalf("check %q passed after %s", tt.check, tt.name)
			}
		})
	}
}

// ---------------------------------------------------------------- Istio ----

type istioGateway struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Selector map[string]string `json:"selector"`
		Servers  []struct {
			Port struct {
				Number   int    `json:"number"`
				Name     string `json:"name"`
				Protocol string `json:"protocol"`
			} `json:"port"`
			Hosts []string `json:"hosts"`
		} `json:"servers"`
	} `json:"spec"`
}

type stringMatch struct {
	Exact  string `json:"exact,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Regex  string `json:"regex,omitempty"`
}

type vsRoute struct {
	Name  string `json:"name"`
	Match []struct {
		URI     *stringMatch           `json:"uri,omitempty"`
		Headers map[string]stringMatch `json:"headers,omitempty"`
	} `json:"match"`
	Route []struct {
		Destination struct {
			Host string `json:"host"`
			Port struct {
				Number int `json:"number"`
			} `json:"port"`
		} `json:"destination"`
	} `json:"route,omitempty"`
	Headers *struct {
		Request *struct {
			Remove []string `json:"remove,omitempty"`
		} `json:"request,omitempty"`
	} `json:"headers,omitempty"`
	Timeout        string `json:"timeout,omitempty"`
	DirectResponse *struct {
		Status int `json:"status"`
	} `json:"directResponse,omitempty"`
}

type virtualService struct {
	typeMeta
	Metadata objectMeta `json:"metadata"`
	Spec     struct {
		Hosts    []string  `json:"hosts"`
		Gateways []string  `json:"gateways"`
		HTTP     []vsRoute `json:"http"`
	} `json:"spec"`
}

// istioFederation is istio-federation.yaml decoded.
type istioFederation struct {
	gw *istioGateway
	vs *virtualService
	*istioConfig
}

func loadIstioFederation(t testing.TB) *istioFederation {
	t.Helper()
	c := &istioFederation{}
	for i, raw := range loadDocs(t, "istio-federation.yaml") {
		tm := kindOf(t, raw)
		var v any
		switch {
		case tm.Kind == "Gateway" && tm.APIVersion == "networking.istio.io/v1":
			c.gw = &istioGateway{}
			v = c.gw
		case tm.Kind == "VirtualService" && tm.APIVersion == "networking.istio.io/v1":
			c.vs = &virtualService{}
			v = c.vs
		case tm.Kind == "EnvoyFilter":
			c.istioConfig = decodeEnvoyFilter(t, raw)
			continue
		default:
			t.Fatalf("document %d: %s %s is not expected", i, tm.APIVersion, tm.Kind)
		}
		if err := strictDecode(raw, v); err != nil {
			t.Fatalf("document %d (%s): %v", i, tm.Kind, err)
		}
	}
	if c.gw == nil || c.vs == nil || c.istioConfig == nil {
		t.Fatal("want a Gateway, a VirtualService and an EnvoyFilter")
	}
	return c
}

// vsMember returns the member a VirtualService route matches on
// gateway.UpstreamHeader, and whether it matches on it.
func vsMember(r vsRoute) (string, bool) {
	for _, m := range r.Match {
		if h, ok := m.Headers[gateway.UpstreamHeader]; ok {
			return h.Exact, true
		}
	}
	return "", false
}

var istioFederationChecks = func() []check[*istioFederation] {
	cs := []check[*istioFederation]{
		{"gateway context", func(c *istioFederation) error {
			var errs []error
			if c.ef.Spec.WorkloadSelector == nil || c.ef.Spec.WorkloadSelector.Labels["istio"] != c.gw.Spec.Selector["istio"] {
				errs = append(errs, errors.New("the EnvoyFilter's workloadSelector must pick the Gateway's proxies"))
			}
			for i, p := range c.ef.Spec.ConfigPatches {
				if p.Match == nil || p.Match.Context != "GATEWAY" {
					errs = append(errs, fmt.Errorf("configPatches[%d]: context must be GATEWAY (the proxy that applies the VirtualService)", i))
				}
			}
			if c.filter == nil || c.filter.Patch.Operation != "INSERT_BEFORE" || c.filter.Match.Listener.FilterChain.Filter.SubFilter.Name != routerFilter {
				errs = append(errs, errors.New("ext_proc must be inserted before the router"))
			}
			return errors.Join(errs...)
		}},
		{"route cache action", func(c *istioFederation) error {
			return checkRouteCacheAction(c.extProc, true)
		}},
		{"HCM patch", func(c *istioFederation) error {
			if c.hcm == nil {
				return errors.New("no HCM patch")
			}
			return checkLocalReplies(c.hcm.GetLocalReplyConfig())
		}},
		{"member routes", func(c *istioFederation) error {
			var errs []error
			if !slices.Contains(c.vs.Spec.Gateways, c.gw.Metadata.Namespace+"/"+c.gw.Metadata.Name) {
				errs = append(errs, errors.New("the VirtualService is not bound to the Gateway"))
			}
			routes := c.vs.Spec.HTTP
			seen := map[string]bool{}
			members := 0
			for i, r := range routes {
				member, ok := vsMember(r)
				if !ok {
					continue
				}
				members++
				if len(r.Match) != 1 || r.Match[0].URI == nil || r.Match[0].URI.Exact == "" || len(r.Match[0].Headers) != 1 || !upstreamName.MatchString(member) || seen[member] {
					errs = append(errs, fmt.Errorf("route %s: want one match, an exact path and %s exact on one member's upstream name", r.Name, gateway.UpstreamHeader))
				}
				seen[member] = true
				if len(r.Route) == 0 || r.DirectResponse != nil {
					errs = append(errs, fmt.Errorf("route %s: a member route forwards to the member", r.Name))
				}
				if r.Headers == nil || r.Headers.Request == nil || !slices.Contains(r.Headers.Request.Remove, gateway.UpstreamHeader) {
					errs = append(errs, fmt.Errorf("route %s: headers.request.remove lacks %s: the member would get mcpgate's routing header", r.Name, gateway.UpstreamHeader))
				}
				if r.Timeout != "0s" {
					errs = append(errs, fmt.Errorf("route %s: timeout %q, want 0s (tool calls and SSE streams)", r.Name, r.Timeout))
				}
				fallback := -1
				for j, o := range routes {
					if len(o.Match) == 1 && o.Match[0].URI != nil && r.Match[0].URI != nil && *o.Match[0].URI == *r.Match[0].URI && len(o.Match[0].Headers) == 0 {
						fallback = j
						break
					}
				}
				switch {
				case fallback < 0:
					errs = append(errs, fmt.Errorf("route %s: no route on its path alone answers requests mcpgate names no member for", r.Name))
				case fallback < i:
					errs = append(errs, fmt.Errorf("route %s comes after %s, which matches the same path without the header: the member route is never chosen", r.Name, routes[fallback].Name))
				case routes[fallback].DirectResponse == nil:
					errs = append(errs, fmt.Errorf("route %s forwards: a request mcpgate did not route would reach a member; use directResponse", routes[fallback].Name))
				}
			}
			if members == 0 {
				errs = append(errs, errors.New("no route on "+gateway.UpstreamHeader))
			}
			return errors.Join(errs...)
		}},
		{"routes name the virtual server", func(c *istioFederation) error {
			// One patch, for the whole virtual host of the VirtualService's
			// host, sets the metadata and nothing else.
			vhost := fmt.Sprintf("%s:%d", c.vs.Spec.Hosts[0], c.gw.Spec.Servers[0].Port.Number)
			for _, p := range c.patches("HTTP_ROUTE") {
				rc := p.Match.RouteConfiguration
				if rc == nil || rc.Vhost == nil || rc.Vhost.Name != vhost || rc.Vhost.Route != nil {
					continue
				}
				r := p.value.(*routev3.Route)
				if r.GetAction() != nil {
					return fmt.Errorf("the metadata patch for %s also sets a route action, which clashes with directResponse routes", vhost)
				}
				return checkRouteUpstream(r)
			}
			return fmt.Errorf("no HTTP_ROUTE patch names the virtual server on every route of %s", vhost)
		}},
	}
	for _, ec := range extProcChecks {
		cs = append(cs, check[*istioFederation]{"ext_proc: " + ec.name, func(c *istioFederation) error { return ec.fn(c.extProc) }})
	}
	return cs
}()

func TestIstioFederation(t *testing.T) {
	c := loadIstioFederation(t)
	// MERGE patches are partial messages; the inserted filter is whole.
	if err := validateDeep(c.filter.value, "ext_proc filter"); err != nil {
		t.Error(err)
	}
	runChecks(t, istioFederationChecks, c)
}

func TestIstioFederationChecksCatchMistakes(t *testing.T) {
	for _, tt := range []struct {
		name, check string
		mutate      func(c *istioFederation)
	}{
		{"RETAIN", "route cache action", func(c *istioFederation) {
			c.extProc.RouteCacheAction = extprocfilterv3.ExternalProcessor_RETAIN
		}},
		{"fallback first", "member routes", func(c *istioFederation) {
			h := c.vs.Spec.HTTP
			h[0], h[2] = h[2], h[0]
		}},
		{"fallback forwards", "member routes", func(c *istioFederation) {
			c.vs.Spec.HTTP[2].DirectResponse = nil
			c.vs.Spec.HTTP[2].Route = c.vs.Spec.HTTP[0].Route
		}},
		{"prefix match on the header", "member routes", func(c *istioFederation) {
			c.vs.Spec.HTTP[0].Match[0].Headers[gateway.UpstreamHeader] = stringMatch{Prefix: "c"}
		}},
		{"routing header forwarded to the member", "member routes", func(c *istioFederation) {
			c.vs.Spec.HTTP[0].Headers = nil
		}},
		{"member route timeout", "member routes", func(c *istioFederation) {
			c.vs.Spec.HTTP[1].Timeout = ""
		}},
		{"metadata on one route only", "routes name the virtual server", func(c *istioFederation) {
			for _, p := range c.patches("HTTP_ROUTE") {
				if p.Match.RouteConfiguration.Vhost.Route == nil {
					p.Match.RouteConfiguration.Vhost.Route = &struct {
						Name   string `json:"name,omitempty"`
						Action string `json:"action,omitempty"`
					}{Name: "team-crm"}
				}
			}
		}},
		{"sidecar context", "gateway context", func(c *istioFederation) { c.filter.Match.Context = "SIDECAR_INBOUND" }},
		{"streamed request body", "ext_proc: processing modes", func(c *istioFederation) {
			c.extProc.ProcessingMode.RequestBodyMode = extprocfilterv3.ProcessingMode_STREAMED
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := loadIstioFederation(t)
			chk := find(istioFederationChecks, tt.check)
			if err := chk.fn(c); err != nil {
				t.Fatalf("check %q fails before the change: %v", tt.check, err)
			}
			tt.mutate(c)
			if err := chk.fn(c); err == nil {
				t.Fatalf("check %q passed after %s", tt.check, tt.name)
			}
		})
	}
}
