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
		// federation.yaml must keep routing on the header; the others
		// must not start to.
		for _, h := range c.hcms {
			if want := c.file == "federation.yaml"; federated(h) != want {
				return fmt.Errorf("%s: routes on %s: %v, want %v", h, gateway.UpstreamHeader, federated(h), want)
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
