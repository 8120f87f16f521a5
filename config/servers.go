package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Server is a virtual server: one route that fronts several upstreams
// (federation). Its clients see one list of tools, prompts and resources,
// each named with its member's prefix, and every call goes to the member
// whose prefix it carries, under the upstream's own name.
type Server struct {
	// Identifies the server in logs, metric labels and the policy input
	// of requests no member answers alone (lists, initialize): the same
	// shape as an upstream's name, unique across upstreams and servers.
	//
	// Required.
	Name string `yaml:"name"`
	// The path clients connect to, as an upstream's `route`; routes are
	// unique across upstreams and servers.
	//
	// Default: `/mcp`.
	Route string `yaml:"route"`
	// The upstreams behind the route, in the order their tools, prompts and
	// resources are listed. An upstream is a member of at most one server;
	// it keeps its own declarations, credential and timeout, and has no
	// route of its own unless its `route` is set.
	//
	// Required: at least one.
	Members []Member `yaml:"members"`
}

// Member is one upstream of a virtual server and the prefix that names
// its tools, prompts and resources.
type Member struct {
	// The `name` of an upstream in `upstreams`.
	//
	// Required.
	Upstream string `yaml:"upstream"`
	// Namespaces the member: its tools and prompts are exposed as
	// `<prefix>_<name>` (the name its declarations expose), its resource
	// URIs and URI templates as `<prefix>+<uri>` (`crm+file:///a`). 1–32
	// characters of `a-z`, `0-9` and `-`, starting with a letter (so it is
	// also a URI scheme's start); unique within the server, not the start
	// of another member's prefix, and not `confirm`, `reject` or `list`
	// (mcpgate's own tools start with these).
	//
	// Required, unless `unprefixed` is true.
	Prefix string `yaml:"prefix"`
	// Exposes the member's tools, prompts and resource URIs as the
	// upstream lists them, without prefix (e.g. to put one existing server
	// behind a virtual server without renaming its tools). At most one
	// member of a server; `prefix` is then not set. A name is resolved to
	// this member only when it does not start with another member's
	// `<prefix>_` (a URI: `<prefix>+`); the member's own names that do are
	// collisions: neither listed nor callable, reported by `validate` (for
	// declared tools), in the log and by
	// `mcpgate_federation_hidden_names`. Adding a member with a prefix can
	// so hide a name clients used.
	//
	// Default: `false`.
	Unprefixed bool `yaml:"unprefixed"`
}

// ShadowedBy returns the prefix of another member of s that a name of
// s's unprefixed member starts with (sep: FederationSeparator for tool
// and prompt names, FederationURISeparator for resource URIs), "" when
// none does: such a name resolves to that member, so the unprefixed
// member's is hidden.
func (s Server) ShadowedBy(name, sep string) string {
	head, _, found := strings.Cut(name, sep)
	if !found || head == "" {
		return ""
	}
	for _, m := range s.Members {
		if !m.Unprefixed && m.Prefix == head {
			return head
		}
	}
	return ""
}

// FederationWarnings are what validation tolerates but an operator
// should see: declared tools of a server's unprefixed member whose names
// another member's prefix hides.
func (c *Config) FederationWarnings() []string {
	var out []string
	for i, s := range c.Servers {
		for j, m := range s.Members {
			k := c.upstreamIndex(m.Upstream)
			if !m.Unprefixed || k < 0 {
				continue
			}
			u := c.Upstreams[k]
			for _, name := range sortedKeys(u.Tools) {
				exposed := name
				if e := u.Tools[name].Expose; e != nil && e.Name != "" {
					exposed = e.Name
				}
				if prefix := s.ShadowedBy(exposed, FederationSeparator); prefix != "" {
					out = append(out, fmt.Sprintf("%s: tool %q of unprefixed upstream %q starts with member prefix %q and %q: it resolves to that member, so it is neither listed nor callable on server %q",
						indexPath(indexPath("servers", i)+".members", j), exposed, m.Upstream, prefix, FederationSeparator, s.Name))
				}
			}
		}
	}
	return out
}

// FederationSeparator joins a member's prefix and a tool or prompt name;
// FederationURISeparator joins a prefix and a resource URI.
const (
	FederationSeparator    = "_"
	FederationURISeparator = "+"
)

// memberPrefixPattern is a member prefix: it never holds the separator and
// is the start of a valid URI scheme.
var memberPrefixPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)

// reservedPrefixes would make mcpgate's own tools (confirm_action,
// reject_action, list_recent_changes) ambiguous with a member's tools.
var reservedPrefixes = func() []string {
	var r []string
	for _, n := range gatewayToolNames {
		p, _, _ := strings.Cut(n, FederationSeparator)
		if !slices.Contains(r, p) {
			r = append(r, p)
		}
	}
	return r
}()

// MemberOf returns the server the upstream named is a member of, and
// whether it is one.
func (c *Config) MemberOf(upstream string) (Server, bool) {
	for _, s := range c.Servers {
		for _, m := range s.Members {
			if m.Upstream == upstream {
				return s, true
			}
		}
	}
	return Server{}, false
}

// routeOwners records the routes seen so far across upstreams and
// servers, for uniqueness.
type routeOwners struct {
	exact    map[string]string // route → owner ("upstreams[0]")
	patterns []ownedPattern
}

type ownedPattern struct {
	owner string
	p     routes.Pattern
}

// check checks route (at path, owned by owner) and records it: exact
// routes are unique, routes with {tenant} never match the same path.
func (r *routeOwners) check(p *problems, path, owner, route string) (routes.Pattern, bool) {
	pattern, ok := checkRoute(p, path, route)
	if !ok {
		return pattern, false
	}
	if r.exact == nil {
		r.exact = map[string]string{}
	}
	if !pattern.HasTenant() {
		if other, dup := r.exact[route]; dup {
			hint := ""
			if route == DefaultRoutePath {
				hint = fmt.Sprintf(" (an upstream without a route gets %s; give each upstream its own)", DefaultRoutePath)
			}
			p.add(path, "%q is also the route of %s; routes must be unique%s", route, other, hint)
		} else {
			r.exact[route] = owner
		}
		return pattern, true
	}
	for _, o := range r.patterns {
		if example, overlap := routes.Overlap(o.p, pattern); overlap {
			p.add(path, "%q and the route of %s (%q) both match paths such as %q; routes with %s must not match the same path", route, o.owner, o.p, example, routes.Param)
			return pattern, true
		}
	}
	r.patterns = append(r.patterns, ownedPattern{owner, pattern})
	return pattern, true
}

// validateServers checks the servers section: names and routes unique
// across upstreams and servers, members naming known upstreams, each in
// one server, prefixes that resolve every exposed name to one member.
func (c *Config) validateServers(p *problems, upstreams map[string]int, rs *routeOwners) {
	names := map[string]int{}
	memberOf := map[string]string{} // upstream → the key path that made it a member
	for i, s := range c.Servers {
		at := indexPath("servers", i)
		if j, dup := upstreams[s.Name]; dup {
			p.add(at+".name", "%q is also the name of upstreams[%d]; names must be unique across upstreams and servers", s.Name, j)
		} else {
			checkUniqueName(p, at+".name", "servers", s.Name, i, upstreamNamePattern, "1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit", names)
		}
		pattern, routeOK := rs.check(p, at+".route", at, s.Route)
		if len(s.Members) == 0 {
			p.add(at+".members", "at least one member is required (members: [{upstream: crm, prefix: crm}])")
		}
		if len(s.Members) > 0 && c.Catalog.Disabled {
			p.add(at, "needs the catalog (catalog.disabled is true): the server's tools/list is answered from it")
		}
		prefixes := map[string]int{}
		unprefixed := -1
		for j, m := range s.Members {
			mat := indexPath(at+".members", j)
			switch _, known := upstreams[m.Upstream]; {
			case m.Upstream == "":
				p.add(mat+".upstream", "required (the name of an upstream)")
			case !known:
				p.add(mat+".upstream", "%q is not the name of an upstream (%s)", m.Upstream, strings.Join(c.upstreamNames(), ", "))
			default:
				if u := c.Upstreams[upstreams[m.Upstream]]; routeOK && !pattern.HasTenant() && u.Route == "" && strings.Contains(u.URL, routes.Param) {
					p.add(mat+".upstream", "upstream %q has %s in its URL but the server's route (%q) has none to fill it with; give the route a %s segment", m.Upstream, routes.Param, s.Route, routes.Param)
				}
				if other, dup := memberOf[m.Upstream]; dup {
					p.add(mat+".upstream", "upstream %q is already a member at %s; an upstream belongs to at most one server", m.Upstream, other)
				} else {
					memberOf[m.Upstream] = mat
				}
			}
			switch {
			case m.Unprefixed && m.Prefix != "":
				p.add(mat+".prefix", "%q is set but unprefixed is true; set one of them", m.Prefix)
			case m.Unprefixed && unprefixed >= 0:
				p.add(mat+".unprefixed", "members[%d] is unprefixed already; at most one member of a server is", unprefixed)
			case m.Unprefixed:
				unprefixed = j
			case m.Prefix == "":
				p.add(mat+".prefix", "required (e.g. %q: its tools are then exposed as %s_<tool>; or unprefixed: true for the member whose names stay as they are)", "crm", "crm")
			case strings.Contains(m.Prefix, FederationSeparator) || strings.Contains(m.Prefix, FederationURISeparator):
				p.add(mat+".prefix", "%q holds the separator %q or %q; a prefix is 1 to 32 characters of a-z, 0-9 and -, starting with a letter", m.Prefix, FederationSeparator, FederationURISeparator)
			case !memberPrefixPattern.MatchString(m.Prefix):
				p.add(mat+".prefix", "%q must be 1 to 32 characters of a-z, 0-9 and -, starting with a letter", m.Prefix)
			case slices.Contains(reservedPrefixes, m.Prefix):
				p.add(mat+".prefix", "%q is reserved: mcpgate's own tools (%s) start with it", m.Prefix, strings.Join(gatewayToolNames, ", "))
			default:
				if k, dup := prefixes[m.Prefix]; dup {
					p.add(mat+".prefix", "%q is also the prefix of members[%d]; prefixes must be unique", m.Prefix, k)
					continue
				}
				for _, other := range slices.Sorted(maps.Keys(prefixes)) {
					if strings.HasPrefix(other, m.Prefix) || strings.HasPrefix(m.Prefix, other) {
						p.add(mat+".prefix", "%q and the prefix of members[%d] (%q) start alike; no prefix may be the start of another (a reader could not tell their names apart)", m.Prefix, prefixes[other], other)
					}
				}
				prefixes[m.Prefix] = j
			}
		}
	}
}
