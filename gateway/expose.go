package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// exposure maps the names clients call an upstream's tools by to the
// tools' own names (policy.ToolDeclaration.Expose). Built once per
// snapshot from the declarations; nil when no tool is renamed.
type exposure map[string]*upstreamExposure

type upstreamExposure struct {
	original map[string]string // exposed name → the tool's own name
	exposed  map[string]string // a renamed tool's own name → its exposed name
}

// newExposure indexes the renames of decls. Declarations are validated at
// load (config): a name exposed twice is a configuration error; should one
// slip through, the name is refused rather than resolved to either tool.
func newExposure(decls map[string]map[string]policy.ToolDeclaration) exposure {
	var e exposure
	for upstream, tools := range decls {
		for name, d := range tools {
			if d.Expose == nil || d.Expose.Name == "" || d.Expose.Name == name {
				continue
			}
			if e == nil {
				e = exposure{}
			}
			u := e[upstream]
			if u == nil {
				u = &upstreamExposure{original: map[string]string{}, exposed: map[string]string{}}
				e[upstream] = u
			}
			if _, dup := u.original[d.Expose.Name]; dup {
				u.original[d.Expose.Name] = ""
			} else {
				u.original[d.Expose.Name] = name
			}
			u.exposed[name] = d.Expose.Name
		}
	}
	return e
}

// resolveTool returns the tool's own name on upstream for the name a
// client calls it by, the one place where exposed names are resolved: an
// exposed name gives the renamed tool, a tool's own name gives itself
// unless the tool is renamed (then ok is false: the tool is not callable
// under its own name).
func (e exposure) resolveTool(upstream, name string) (original string, ok bool) {
	u := e[upstream]
	if u == nil {
		return name, true
	}
	if o, renamed := u.original[name]; renamed {
		return o, o != ""
	}
	if _, renamed := u.exposed[name]; renamed {
		return "", false
	}
	return name, true
}

// exposedName is the name clients see of upstream's tool original.
func (e exposure) exposedName(upstream, original string) string {
	if u := e[upstream]; u != nil {
		if n, ok := u.exposed[original]; ok {
			return n
		}
	}
	return original
}

// shadowed reports whether a catalog tool's own name is another tool's
// exposed name: it is then neither listed nor callable under it.
func (e exposure) shadowed(upstream, name string) bool {
	u := e[upstream]
	if u == nil {
		return false
	}
	_, renamed := u.exposed[name]
	_, taken := u.original[name]
	return taken && !renamed
}

// listedText returns the name, title and description tools/list shows of
// the catalog tool t: its exposed name, and the declaration's title and
// description in place of the upstream's when set.
func (p *Pipeline) listedText(upstream string, t *CatalogTool) (name, title, description string) {
	name, title, description = t.Name, t.Title, t.Description
	if d, ok := p.opts.Declarations[upstream][t.Name]; ok && d.Expose != nil {
		if d.Expose.Name != "" {
			name = d.Expose.Name
		}
		if d.Expose.Title != "" {
			title = d.Expose.Title
		}
		if d.Expose.Description != "" {
			description = d.Expose.Description
		}
	}
	return name, title, description
}

// exposeName is the stage that resolves the tool a tools/call names
// (resolveTool): from here on the exchange names the tool by its own name
// (policy, catalog, rate buckets, replay protection, confirmations, audit,
// metrics), and the body forwarded carries it in params.name (Mcp-Name
// follows the body, forwardVerdict). A renamed tool called by its own name
// is treated as undeclared and unlisted (x.unexposed).
func (p *Pipeline) exposeName(ctx context.Context, x *Exchange) *Verdict {
	if f := p.servers[x.req.Upstream]; f != nil {
		return p.federate(ctx, x, f)
	}
	msg := x.msg
	if p.exposure == nil || msg == nil || msg.Method != "tools/call" || msg.Kind != mcp.KindRequest {
		return nil
	}
	original, ok := p.exposure.resolveTool(x.req.Upstream, msg.Name)
	switch {
	case !ok:
		x.unexposed = true
		return nil
	case original == msg.Name:
		return nil
	}
	body, params, err := withParamString(x.body, "name", original)
	if err != nil {
		p.log.LogAttrs(ctx, slog.LevelError, "the tool's own name cannot be put into the request", slog.Any("error", err))
		return x.answerAs(OutcomeError, local(500, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not rewrite the tool name."})))
	}
	x.exposedAs = msg.Name
	msg.Name, msg.Params = original, params
	x.body, x.bodyChanged = body, true
	return nil
}

// unexposedReason refuses a renamed tool called by its own name, as the
// built-in policy refuses an undeclared tool.
func unexposedReason(name string) policy.Reason {
	return policy.Reason{
		Code:     policy.CodeToolNotDeclared,
		Cause:    "Tool " + strconv.Quote(name) + " is not available on this server.",
		Fix:      "Call tools/list and use one of the tools it lists.",
		NextTool: "tools/list",
	}
}

// calledAs is the name the client called the exchange's tool by.
func (x *Exchange) calledAs() string {
	if x.exposedAs != "" {
		return x.exposedAs
	}
	return x.msg.Name
}

// narrowing is a declared tool's expose.input_schema against one
// definition of the upstream's tool, compiled once per pipeline and
// definition hash.
type narrowing struct {
	listed jsontext.Value // the inputSchema tools/list shows
	s      *args.Schema
	err    error // not compilable, or not a narrowing of the upstream's
}

type narrowKey struct{ upstream, tool, hash string }

// narrowing returns the compiled expose.input_schema of upstream's tool
// t, nil when its declaration has none.
func (p *Pipeline) narrowing(upstream string, t *CatalogTool) *narrowing {
	d, ok := p.opts.Declarations[upstream][t.Name]
	if !ok || d.Expose == nil || d.Expose.InputSchema == "" {
		return nil
	}
	key := narrowKey{upstream, t.Name, t.Hash}
	if v, ok := p.schemas.narrowed.Load(key); ok {
		return v.(*narrowing)
	}
	n := &narrowing{listed: jsontext.Value(d.Expose.InputSchema)}
	if stripped, err := p.stripTenantProperties(n.listed); err == nil && stripped != nil {
		n.listed = stripped
	}
	if closed, err := closeSchema(n.listed); err == nil {
		n.listed = closed
	}
	n.s, n.err = args.Compile(n.listed)
	if n.err == nil {
		if us, err := p.schema(t); err == nil {
			n.err = narrows(n.s, us)
		}
	}
	if v, loaded := p.schemas.narrowed.LoadOrStore(key, n); loaded {
		return v.(*narrowing)
	}
	if n.err != nil {
		p.log.Warn("a tool's expose.input_schema does not narrow the upstream's inputSchema; the tool is refused", "upstream", upstream, "tool", t.Name, "error", n.err)
	}
	return n
}

// narrows reports why the narrowed schema n is not a narrowing of the
// upstream's u: a property u does not declare, or one u requires that n
// does not require.
func narrows(n, u *args.Schema) error {
	have := u.Properties()
	for _, name := range n.Properties() {
		if !slices.Contains(have, name) {
			return fmt.Errorf("property %q is not in the upstream's inputSchema", name)
		}
	}
	required := n.Required()
	for _, name := range u.Required() {
		if !slices.Contains(required, name) {
			return fmt.Errorf("property %q is required by the upstream's inputSchema", name)
		}
	}
	return nil
}

// toolSchemas returns the compiled input schema of upstream's tool t and
// its narrowing (nil when none). err is set when either cannot be used:
// the tool is then unusable.
func (p *Pipeline) toolSchemas(upstream string, t *CatalogTool) (s, narrowed *args.Schema, err error) {
	if s, err = p.schema(t); err != nil {
		return nil, nil, err
	}
	if n := p.narrowing(upstream, t); n != nil {
		if n.err != nil {
			return nil, nil, n.err
		}
		narrowed = n.s
	}
	return s, narrowed, nil
}

// checkNarrowed checks arguments against the narrowed schema n, then what
// it lets through (with its coercions) against the upstream's u. The
// narrowed schema's problems come first (the client was offered it); a
// problem of u is added for an argument n did not report.
func checkNarrowed(n, u *args.Schema, arguments []byte, o args.Options) args.Result {
	res := n.Check(arguments, o)
	in := arguments
	if res.Arguments != nil {
		in = res.Arguments
	}
	ur := u.Check(in, o)
	for _, pr := range ur.Problems {
		if !slices.ContainsFunc(res.Problems, func(q args.Problem) bool { return q.Argument == pr.Argument }) {
			res.Problems = append(res.Problems, pr)
		}
	}
	res.Warnings = append(res.Warnings, ur.Warnings...)
	if ur.Arguments != nil {
		res.Arguments = ur.Arguments
	}
	if len(res.Problems) > 0 {
		res.Arguments = nil
	}
	return res
}

// Separators of federated names: a member's tool or prompt name is
// exposed as <prefix>_<name>, a resource URI or URI template as
// <prefix>+<uri>. Prefixes hold neither (config validates them), so the
// first separator always ends the prefix.
const (
	federationSeparator    = '_'
	federationURISeparator = '+'
)

// federation is a federated route's members (Options.Servers), compiled:
// the one place where a federated name is split into (member, the name
// the member's exposure knows).
type federation struct {
	name    string
	members []Member
	// byPrefix holds each member by prefix; the unprefixed member (if
	// any) under "". A prefix held twice maps to nil: it resolves nothing.
	byPrefix map[string]*Member
}

func newFederations(servers []Server) map[string]*federation {
	if len(servers) == 0 {
		return nil
	}
	out := make(map[string]*federation, len(servers))
	for _, s := range servers {
		f := &federation{name: s.Name, members: s.Members, byPrefix: make(map[string]*Member, len(s.Members))}
		for i := range f.members {
			m := &f.members[i]
			if _, dup := f.byPrefix[m.Prefix]; dup || strings.ContainsAny(m.Prefix, "_+") {
				// Validated at load; a prefix that slips through
				// resolves nothing rather than either member.
				f.byPrefix[m.Prefix] = nil
				continue
			}
			f.byPrefix[m.Prefix] = m
		}
		out[s.Name] = f
	}
	return out
}

// split returns the member that exposed resolves to and the member's own
// name: the member whose prefix starts exposed (up to the first sep) and
// the rest after sep; else the unprefixed member and exposed whole. ok is
// false when neither exists (or the prefix is held twice).
func (f *federation) split(exposed string, sep byte) (m *Member, rest string, ok bool) {
	if i := strings.IndexByte(exposed, sep); i > 0 {
		if m, known := f.byPrefix[exposed[:i]]; known {
			return m, exposed[i+1:], m != nil
		}
	}
	m = f.byPrefix[""]
	return m, exposed, m != nil
}

// shadowed reports whether a name of the unprefixed member (as the member
// lists it) starts with another member's prefix and sep: it then resolves
// to that member (split), so the unprefixed member's is a collision,
// neither listed nor callable.
func (f *federation) shadowed(name string, sep byte) bool {
	i := strings.IndexByte(name, sep)
	if i <= 0 {
		return false
	}
	_, known := f.byPrefix[name[:i]]
	return known
}

// resolveTool maps the name a client calls a federated tool by to its
// member upstream and the tool's own name there: the member by prefix
// (split), then the member's own exposure (renames). ok is false when the
// name resolves to no tool name (unknown prefix, a renamed tool called by
// its own name).
func (f *federation) resolveTool(e exposure, exposed string) (upstream, original string, ok bool) {
	if len(exposed) > maxToolName {
		return "", "", false // never listed (writeListedTools)
	}
	m, rest, ok := f.split(exposed, federationSeparator)
	if !ok {
		return "", "", false
	}
	original, ok = e.resolveTool(m.Upstream, rest)
	return m.Upstream, original, ok
}

// resolvePrompt maps a federated prompt name to its member and the
// prompt's own name.
func (f *federation) resolvePrompt(exposed string) (upstream, original string, ok bool) {
	m, rest, ok := f.split(exposed, federationSeparator)
	if !ok || rest == "" {
		return "", "", false
	}
	return m.Upstream, rest, true
}

// resolveURI maps a federated resource URI (or URI template) to its
// member and the URI the member listed: the scheme part up to the first
// '+' is the prefix.
func (f *federation) resolveURI(exposed string) (upstream, original string, ok bool) {
	m, rest, ok := f.split(exposed, federationURISeparator)
	if !ok || rest == "" {
		return "", "", false
	}
	return m.Upstream, rest, true
}

// maxToolName is the longest tool name MCP allows (1–128 characters): a
// member's tool whose prefixed name is longer is neither listed nor
// callable on a federated route, and mcpgate says so in its log.
const maxToolName = 128

// exposedTool is the name clients of a federated route see of a member's
// tool or prompt (name as the member's exposure shows it); the
// unprefixed member's (prefix "") as it is.
func exposedTool(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + string(federationSeparator) + name
}

// exposedURI is the URI clients of a federated route see of a member's
// resource URI or URI template.
func exposedURI(prefix, uri string) string {
	if prefix == "" {
		return uri
	}
	return prefix + string(federationURISeparator) + uri
}

// prefixOf returns the prefix of member upstream, "" when upstream is not
// a member or is the unprefixed one (has tells them apart).
func (f *federation) prefixOf(upstream string) string {
	for i := range f.members {
		if f.members[i].Upstream == upstream {
			return f.members[i].Prefix
		}
	}
	return ""
}

// has reports whether upstream is a member.
func (f *federation) has(upstream string) bool {
	return slices.ContainsFunc(f.members, func(m Member) bool { return m.Upstream == upstream })
}
