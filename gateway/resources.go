package gateway

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Resource URIs never choose the tenant: they cannot name another
// tenant. A platform team
// says where the tenant sits in an upstream's URIs with patterns
// (upstreams[].resource_tenant), e.g. "crm://{tenant}/**"; tenant-like
// query parameters (?tenant=, ?org_id=, ... — the names of
// DefaultTenantArguments and policy.tenant_arguments) name a tenant in
// any URI. The gateway finds the tenants a URI names; the policy refuses
// a request naming another tenant than the caller's, and hides list
// entries that do; results of an upstream with patterns lose resource
// links and embedded resources naming another tenant.

// resourceTenants holds the compiled resource_tenant patterns per
// upstream.
type resourceTenants map[string][]*regexp.Regexp

func compileResourceTenants(m map[string][]string) (resourceTenants, error) {
	out := resourceTenants{}
	var errs []error
	for u, pats := range m {
		for _, s := range pats {
			re, err := routes.CompileResourcePattern(s)
			if err != nil {
				errs = append(errs, fmt.Errorf("upstream %q: %w", u, err))
				continue
			}
			out[u] = append(out[u], re)
		}
	}
	return out, errors.Join(errs...)
}

// ResourceWarningCode is the code of the warning a result carries in
// _meta["io.mcpgate/warnings"] when the gateway removed a resource of
// another tenant from it.
const ResourceWarningCode = "resource_removed"

// errURI is the problem with a URI that cannot be checked.
type errURI struct{ msg string }

func (e *errURI) Error() string { return e.msg }

// uriTenants returns the tenants uri names for upstream: the {tenant} of
// each of its patterns that matches (percent-decoded) and the values of
// tenant-like query parameters. A template variable in the tenant's place
// ("crm://{tenant_id}/x" of a resource template) names none. It fails for
// a URI that does not parse or whose tenant part does not decode: such a
// URI cannot be checked, and is refused (fail closed).
//
// A resource template (template true, RFC 6570) is not a URI: it is
// matched as text, and a tenant placeholder of its own ("{tenant_id}")
// names no tenant.
func (p *Pipeline) uriTenants(upstream, uri string, template bool, add func(string)) error {
	u, err := url.Parse(uri)
	if err != nil {
		if !template {
			return &errURI{"The resource URI " + quote(uri) + " cannot be parsed."}
		}
		u = &url.URL{}
		if scheme, _, ok := strings.Cut(uri, ":"); ok {
			u.Scheme = strings.ToLower(scheme)
		}
		if _, q, ok := strings.Cut(uri, "?"); ok {
			u.RawQuery, _, _ = strings.Cut(q, "#")
		}
	}
	if pats := p.resTenants[upstream]; len(pats) > 0 {
		s := uri
		if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		if u.Scheme != "" && len(s) >= len(u.Scheme) {
			s = u.Scheme + s[len(u.Scheme):]
		}
		for _, re := range pats {
			m := re.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			if strings.HasPrefix(m[1], "{") {
				continue // a template variable
			}
			t, err := url.PathUnescape(m[1])
			if err != nil || t == "" {
				return &errURI{"The tenant part of the resource URI " + quote(uri) + " cannot be decoded."}
			}
			add(t)
		}
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil && !template {
			return &errURI{"The query of the resource URI " + quote(uri) + " cannot be parsed."}
		}
		for name, vals := range q {
			if !isTenantParam(name, p.tenantArgs) {
				continue
			}
			for _, v := range vals {
				if !strings.HasPrefix(v, "{") {
					add(v)
				}
			}
		}
	}
	return nil
}

// collectTenants runs uriTenants over uris and returns the tenants, sorted
// without repeats, and the first problem ("" when none).
func (p *Pipeline) collectTenants(upstream string, uris []string, template bool) ([]string, string) {
	var out []string
	add := func(t string) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, u := range uris {
		if err := p.uriTenants(upstream, u, template, add); err != nil {
			return nil, err.Error()
		}
	}
	slices.Sort(out)
	return out, ""
}

// requestURIs returns the resource URIs a client message names: the uri
// of resources/read, subscribe and unsubscribe, the resourceSubscriptions
// of subscriptions/listen (revision 2026-07-28).
func requestURIs(msg *mcp.Message) ([]string, error) {
	switch msg.Method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		if msg.URI == "" {
			return nil, nil
		}
		return []string{msg.URI}, nil
	case "subscriptions/listen":
		var params struct {
			Notifications struct {
				ResourceSubscriptions []string `json:"resourceSubscriptions"`
			} `json:"notifications"`
		}
		if len(msg.Params) == 0 {
			return nil, nil
		}
		if err := json.Unmarshal(msg.Params, &params, json.RejectUnknownMembers(false)); err != nil {
			return nil, err
		}
		return params.Notifications.ResourceSubscriptions, nil
	}
	return nil, nil
}

// messageTenants fills input.message.uri_tenants and uri_problem for the
// request (policy.Message).
func (p *Pipeline) messageTenants(x *Exchange) {
	uris, err := requestURIs(x.msg)
	if err != nil {
		x.input.Message.URIProblem = "The resourceSubscriptions of subscriptions/listen must be a list of URI strings."
		return
	}
	if len(uris) == 0 {
		return
	}
	x.input.Message.URITenants, x.input.Message.URIProblem = p.collectTenants(x.req.Upstream, uris, false)
}

// callerTenant is the tenant the caller acts in: the credential's, else
// the one the route's path names; "" when neither is known.
func (x *Exchange) callerTenant() string {
	if t := x.input.Principal.Tenant; t != "" {
		return t
	}
	return x.req.Tenant
}

// foreignURI reports whether uri names a tenant other than the caller's,
// or cannot be checked (fail closed).
func (x *Exchange) foreignURI(uri string) bool {
	own := x.callerTenant()
	foreign := false
	if err := x.p.uriTenants(x.req.Upstream, uri, false, func(t string) {
		if t != own {
			foreign = true
		}
	}); err != nil {
		return true
	}
	return foreign
}

// checksResultURIs reports whether results of the exchange's upstream are
// checked for resources of other tenants: only for an upstream with
// resource_tenant patterns (opt-in; the check parses every result).
func (x *Exchange) checksResultURIs() bool {
	return len(x.p.resTenants[x.req.Upstream]) > 0
}

// dropForeignResources removes, from a tools/call result's content (or a
// prompts/get result's messages[].content, or a resources/read result's
// contents), every resource link and embedded resource whose URI names
// another tenant than the caller's or cannot be checked. It returns the
// new result and the number removed (nil, 0 when nothing changes).
func (x *Exchange) dropForeignResources(result []byte) ([]byte, int, error) {
	return mapResourceItems(result, func(item jsontext.Value, uri string) (jsontext.Value, bool) {
		return nil, x.foreignURI(uri)
	})
}

// removedResource stands, in a prompts/get message, for a resource
// mapResourceItems removed.
var removedResource = jsontext.Value(`{"type":"text","text":"[mcpgate removed a resource here]"}`)

// mapResourceItems calls fn with every resource link and embedded
// resource of a result (a tools/call result's content, a prompts/get
// result's messages[].content, a resources/read result's contents) and
// its URI. fn returns the item's replacement (nil: unchanged) and
// whether to remove it (a message's content is then removedResource). It
// returns the new result and the number of items replaced or removed
// (nil, 0 when nothing changes).
func mapResourceItems(result []byte, fn func(item jsontext.Value, uri string) (jsontext.Value, bool)) ([]byte, int, error) {
	changed := 0
	var werr error
	// visit returns item's replacement, or nil to remove it.
	visit := func(item jsontext.Value) jsontext.Value {
		if item.Kind() != '{' {
			return item
		}
		var c struct {
			Type     string `json:"type"`
			URI      string `json:"uri"`
			Resource *struct {
				URI string `json:"uri"`
			} `json:"resource"`
		}
		if err := json.Unmarshal(item, &c, json.RejectUnknownMembers(false)); err != nil {
			werr = err
			return item
		}
		uri, has := "", false
		switch {
		case c.Type == "resource_link":
			uri, has = c.URI, true
		case c.Type == "resource" && c.Resource != nil:
			uri, has = c.Resource.URI, true
		case c.Type == "" && c.URI != "": // resources/read contents
			uri, has = c.URI, true
		}
		if !has {
			return item
		}
		out, drop := fn(item, uri)
		switch {
		case drop:
			changed++
			return nil
		case out != nil:
			changed++
			return out
		}
		return item
	}
	mapArray := func(arr jsontext.Value) (jsontext.Value, bool) {
		var items []jsontext.Value
		if err := json.Unmarshal(arr, &items); err != nil {
			werr = err
			return arr, true
		}
		before := changed
		kept := items[:0:0]
		for _, it := range items {
			if out := visit(it); out != nil {
				kept = append(kept, out)
			}
		}
		if changed == before {
			return arr, true
		}
		out, err := json.Marshal(kept)
		if err != nil {
			werr = err
			return arr, true
		}
		return out, true
	}
	out, err := mapMembers(result, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		switch {
		case (name == "content" || name == "contents") && v.Kind() == '[':
			return mapArray(v)
		case name == "messages" && v.Kind() == '[':
			var msgs []jsontext.Value
			if err := json.Unmarshal(v, &msgs); err != nil {
				werr = err
				return v, true
			}
			before := changed
			for i, m := range msgs {
				if m.Kind() != '{' {
					continue
				}
				c, ok, err := member(m, "content")
				if err != nil || !ok || c.Kind() != '{' {
					continue
				}
				out := visit(c)
				if out == nil {
					out = removedResource
				}
				if &out[0] == &c[0] {
					continue
				}
				nm, err := withMember(m, "content", out)
				if err != nil {
					werr = err
					continue
				}
				msgs[i] = nm
			}
			if changed == before {
				return v, true
			}
			nv, err := json.Marshal(msgs)
			if err != nil {
				werr = err
				return v, true
			}
			return nv, true
		}
		return v, true
	})
	if err = errors.Join(err, werr); err != nil {
		return nil, 0, err
	}
	if changed == 0 {
		return nil, 0, nil
	}
	return out, changed, nil
}

// resourceWarning is the note a result carries when resources of another
// tenant were removed from it.
func resourceWarning(n int) args.Warning {
	return args.Warning{Code: ResourceWarningCode,
		Message: fmt.Sprintf("mcpgate removed %d resource link(s) or embedded resource(s) of another tenant from this result; they cannot be read with your credential.", n)}
}

// shapeForeignResources applies dropForeignResources to a result the
// exchange relays (result: the result as shaped so far, or the
// upstream's) and reports the removal in _meta["io.mcpgate/warnings"]
// along with warnings. It returns nil when nothing changes.
func (x *Exchange) shapeForeignResources(result []byte, warnings []args.Warning) ([]byte, error) {
	out, n, err := x.dropForeignResources(result)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	if n == 0 && len(warnings) == 0 {
		return nil, nil
	}
	if out == nil {
		out = result
	}
	if n > 0 {
		warnings = append(slices.Clone(warnings), resourceWarning(n))
	}
	withWarnings, err := warningsMeta(out, warnings)
	if err != nil {
		return nil, errors.Join(ErrUpstreamResponse, err)
	}
	return withWarnings, nil
}

// listItemTenants returns the tenants a resources/list or
// resources/templates/list entry names, or ["\x00"] (never a tenant)
// when its URI cannot be checked, so the policy hides it.
func (p *Pipeline) listItemTenants(upstream, uri string, template bool) []string {
	if uri == "" {
		return nil
	}
	ts, problem := p.collectTenants(upstream, []string{uri}, template)
	if problem != "" {
		return []string{uncheckableTenant}
	}
	return ts
}

// uncheckableTenant stands for the tenant of a list entry whose URI
// cannot be checked: no caller's tenant equals it.
const uncheckableTenant = "\x00uncheckable"
