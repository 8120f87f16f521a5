// Package routes maps request paths to MCP routes, for both adapters, the
// authenticator and the configuration's validation. A route is either an
// exact path ("/mcp") or a pattern with one whole segment {tenant}
// ("/t/{tenant}/mcp") that names the tenant a request is for.
//
// Paths are compared as they arrive, percent-encoding and all: a request
// path is never decoded before matching, so "/t/%61cme/mcp" is not
// "/t/acme/mcp" and matches no pattern (a tenant segment never contains
// '%'). Routes therefore hold only characters that stand for themselves in
// a URL path (Parse refuses the others).
//
// The package has no dependencies beyond the standard library, so that
// config can use it without importing the pipeline.
package routes

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Param is the tenant segment of a route pattern.
const Param = "{tenant}"

// MaxTenantLength is the longest tenant a path may name.
const MaxTenantLength = 128

// Pattern is one parsed route: an exact path, or a path with one {tenant}
// segment.
type Pattern struct {
	path   string
	prefix string // exact: the whole path; pattern: up to {tenant}, ends in "/"
	suffix string // pattern: after {tenant}, "" or starting with "/"
	tenant bool
}

// Problems Parse reports (wrapped with the route's text).
var (
	ErrNotAbsolute       = errors.New(`must start with "/"`)
	ErrCharacter         = errors.New("character not allowed in a route")
	ErrBraces            = errors.New("only " + Param + " may appear in braces")
	ErrSeveralTenants    = errors.New("more than one " + Param + "; a route names at most one tenant")
	ErrPartialSegment    = errors.New(Param + " must be a whole path segment, e.g. /t/" + Param + "/mcp")
	ErrOnlyTenant        = errors.New("a route with " + Param + " needs a fixed, non-empty segment too, e.g. /t/" + Param + "/mcp")
	errEmpty             = errors.New("empty route")
	errDuplicateRoute    = errors.New("two routes have the same path")
	errOverlap           = errors.New("two route patterns can match the same path")
	errDuplicateUpstream = errors.New("two routes have the same upstream")
)

// Parse checks a route and returns its pattern. A route starts with "/"
// and holds letters, digits and - . _ ~ ! $ & ' ( ) * + , ; = : @ /
// (RFC 3986 path characters, without percent-encoding), and at most one
// {tenant}, which must be a whole segment and not the only non-empty one.
func Parse(route string) (Pattern, error) {
	switch {
	case route == "":
		return Pattern{}, errEmpty
	case route[0] != '/':
		return Pattern{}, ErrNotAbsolute
	}
	for i := 0; i < len(route); i++ {
		c := route[i]
		if c == '{' || c == '}' {
			continue // checked below
		}
		if !pathChar(c) {
			r, _ := utf8.DecodeRuneInString(route[i:])
			return Pattern{}, fmt.Errorf("%w: %q (routes use letters, digits and - . _ ~ ! $ & ' ( ) * + , ; = : @ /, written as they appear in the URL: no percent-encoding)", ErrCharacter, r)
		}
	}
	n := strings.Count(route, Param)
	if strings.Count(route, "{") != n || strings.Count(route, "}") != n {
		return Pattern{}, ErrBraces
	}
	switch n {
	case 0:
		return Pattern{path: route, prefix: route}, nil
	case 1:
	default:
		return Pattern{}, ErrSeveralTenants
	}
	i := strings.Index(route, Param)
	prefix, suffix := route[:i], route[i+len(Param):]
	if !strings.HasSuffix(prefix, "/") || (suffix != "" && suffix[0] != '/') {
		return Pattern{}, ErrPartialSegment
	}
	if strings.Trim(prefix+suffix, "/") == "" {
		return Pattern{}, ErrOnlyTenant
	}
	return Pattern{path: route, prefix: prefix, suffix: suffix, tenant: true}, nil
}

// pathChar reports whether c stands for itself in a URL path (RFC 3986
// pchar or "/", without "%").
func pathChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0
}

// String returns the route as written.
func (p Pattern) String() string { return p.path }

// HasTenant reports whether the route has a {tenant} segment.
func (p Pattern) HasTenant() bool { return p.tenant }

// Match reports whether path (as received, not decoded) is on the route,
// and the tenant it names ("" for an exact route).
func (p Pattern) Match(path string) (tenant string, ok bool) {
	if !p.tenant {
		return "", path == p.path
	}
	if len(path) <= len(p.prefix)+len(p.suffix) || !strings.HasPrefix(path, p.prefix) || !strings.HasSuffix(path, p.suffix) {
		return "", false
	}
	t := path[len(p.prefix) : len(path)-len(p.suffix)]
	if !ValidTenant(t) {
		return "", false
	}
	return t, true
}

// Expand returns the path of the route for tenant (the route itself when
// it has no {tenant}). The caller passes a valid tenant.
func (p Pattern) Expand(tenant string) string {
	if !p.tenant {
		return p.path
	}
	return p.prefix + tenant + p.suffix
}

// ValidTenant reports whether s may be the tenant segment of a path: 1 to
// MaxTenantLength characters of A-Z a-z 0-9 . _ ~ -, and not "." or "..".
func ValidTenant(s string) bool {
	if len(s) == 0 || len(s) > MaxTenantLength || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '.', c == '_', c == '~', c == '-':
		default:
			return false
		}
	}
	return true
}

// Overlap reports whether two patterns with {tenant} can match the same
// path, and an example of one. Routes without {tenant} never overlap here:
// an exact route takes precedence over any pattern.
func Overlap(a, b Pattern) (example string, ok bool) {
	if !a.tenant || !b.tenant {
		return "", false
	}
	as, bs := strings.Split(a.path, "/"), strings.Split(b.path, "/")
	if len(as) != len(bs) {
		return "", false
	}
	out := make([]string, len(as))
	for i := range as {
		x, y := as[i], bs[i]
		switch {
		case x == Param && y == Param:
			out[i] = "example"
		case x == Param && ValidTenant(y):
			out[i] = y
		case y == Param && ValidTenant(x):
			out[i] = x
		case x == y:
			out[i] = x
		default:
			return "", false
		}
	}
	return strings.Join(out, "/"), true
}

// Route maps a route to an upstream.
type Route struct {
	Path     string // exact path or pattern
	Upstream string // upstream name
}

// Table matches paths against a set of routes: exact routes first, then
// patterns. At most one pattern matches a path (New refuses patterns that
// overlap), so the order of the patterns does not matter.
type Table struct {
	exact map[string]string // path → upstream
	// Patterns by their first segment ("t" for /t/{tenant}/mcp), and
	// those whose first segment is {tenant}: a path is tried against the
	// patterns of its own first segment and the wild ones only.
	patterns   map[string][]entry
	wild       []entry
	all        []entry
	byUpstream map[string]Pattern
}

type entry struct {
	p        Pattern
	upstream string
}

// New builds a table. Every route must parse; exact paths and upstreams
// are unique; no two patterns may overlap.
func New(rs []Route) (*Table, error) {
	t := &Table{exact: map[string]string{}, patterns: map[string][]entry{}, byUpstream: map[string]Pattern{}}
	for _, r := range rs {
		p, err := Parse(r.Path)
		if err != nil {
			return nil, fmt.Errorf("route %q: %w", r.Path, err)
		}
		if _, dup := t.byUpstream[r.Upstream]; dup {
			return nil, fmt.Errorf("route %q: %w (%q)", r.Path, errDuplicateUpstream, r.Upstream)
		}
		t.byUpstream[r.Upstream] = p
		if !p.tenant {
			if _, dup := t.exact[r.Path]; dup {
				return nil, fmt.Errorf("route %q: %w", r.Path, errDuplicateRoute)
			}
			t.exact[r.Path] = r.Upstream
			continue
		}
		for _, e := range t.all {
			if ex, ok := Overlap(e.p, p); ok {
				return nil, fmt.Errorf("routes %q and %q: %w (e.g. %s)", e.p.path, r.Path, errOverlap, ex)
			}
		}
		e := entry{p: p, upstream: r.Upstream}
		t.all = append(t.all, e)
		if first := firstSegment(r.Path); first == Param {
			t.wild = append(t.wild, e)
		} else {
			t.patterns[first] = append(t.patterns[first], e)
		}
	}
	return t, nil
}

// Match returns the upstream whose route path is on, and the tenant the
// path names ("" for an exact route). Path is the request path as
// received, without the query, never decoded.
func (t *Table) Match(path string) (upstream, tenant string, ok bool) {
	if u, ok := t.exact[path]; ok {
		return u, "", true
	}
	for _, list := range [2][]entry{t.patterns[firstSegment(path)], t.wild} {
		for i := range list {
			if tenant, ok := list[i].p.Match(path); ok {
				return list[i].upstream, tenant, true
			}
		}
	}
	return "", "", false
}

// firstSegment returns the first segment of an absolute path: "t" of
// "/t/acme/mcp".
func firstSegment(path string) string {
	if path == "" || path[0] != '/' {
		return ""
	}
	path = path[1:]
	if i := strings.IndexByte(path, '/'); i >= 0 {
		return path[:i]
	}
	return path
}

// Pattern returns the route of upstream.
func (t *Table) Pattern(upstream string) (Pattern, bool) {
	p, ok := t.byUpstream[upstream]
	return p, ok
}
