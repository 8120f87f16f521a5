package routes

import (
	"fmt"
	"regexp"
	"strings"
)

// ResourceTenantParam is the placeholder of the tenant in a resource_tenant
// pattern (upstreams[].resource_tenant).
const ResourceTenantParam = "{tenant}"

// CompileResourcePattern compiles a resource_tenant pattern: the URI up
// to its query, with {tenant} (exactly once) standing for one or more
// characters other than "/", "?" and "#", "*" for any run of characters
// other than "/", "**" for any run at all ("/**" at the end also matches
// nothing, so "crm://{tenant}/**" matches "crm://acme"). Everything else
// is literal; the scheme must be lower case (URIs are matched with their
// scheme lower-cased). A pattern never sees the query or fragment.
func CompileResourcePattern(pattern string) (*regexp.Regexp, error) {
	if n := strings.Count(pattern, ResourceTenantParam); n != 1 {
		return nil, fmt.Errorf("resource_tenant pattern %q: must hold %s exactly once", pattern, ResourceTenantParam)
	}
	if strings.ContainsAny(pattern, "?#") {
		return nil, fmt.Errorf("resource_tenant pattern %q: must not hold a query or fragment (tenant-like query parameters are checked in every URI)", pattern)
	}
	scheme, _, ok := strings.Cut(pattern, ":")
	if !ok || scheme == "" || scheme != strings.ToLower(scheme) {
		return nil, fmt.Errorf("resource_tenant pattern %q: must start with a lower-case scheme and \":\"", pattern)
	}
	var b strings.Builder
	b.WriteString("^")
	rest := pattern
	for rest != "" {
		switch {
		case strings.HasPrefix(rest, ResourceTenantParam):
			b.WriteString("([^/?#]+)")
			rest = rest[len(ResourceTenantParam):]
		case rest == "/**":
			b.WriteString("(?:/.*)?")
			rest = ""
		case strings.HasPrefix(rest, "**"):
			b.WriteString(".*")
			rest = rest[2:]
		case strings.HasPrefix(rest, "*"):
			b.WriteString("[^/]*")
			rest = rest[1:]
		default:
			i := strings.IndexAny(rest, "*{")
			if i == 0 { // a "{" that does not start {tenant}
				i = 1
			}
			if i < 0 {
				i = len(rest)
			}
			b.WriteString(regexp.QuoteMeta(rest[:i]))
			rest = rest[i:]
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}
