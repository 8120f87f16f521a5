package gateway

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/gateway/shape"
	"github.com/mcpgate/mcpgate/policy"
)

// ToolCatalog is mcpgate's own listing of each upstream's tools (the
// tool contracts): internal/app implements it with internal/catalog and
// the pinned manifest. The pipeline reads it on every tools/list and
// tools/call; implementations must be cheap and safe for concurrent use.
type ToolCatalog interface {
	// Tools returns the upstream's tools in the catalog's fixed order, and
	// false while the upstream has not been listed yet.
	Tools(upstream string) ([]CatalogTool, bool)
	// Tool returns one tool; listed is false when the upstream does not
	// list it, loaded false while the upstream has not been listed yet.
	Tool(upstream, name string) (t CatalogTool, listed, loaded bool)
}

// CatalogTool is a tool as the catalog holds it.
type CatalogTool struct {
	Name, Title, Description  string
	InputSchema, OutputSchema jsontext.Value
	// Annotations is the raw JSON of the upstream's "annotations" (hints,
	// never trusted; the policy sees them as input.tool.catalog.annotations);
	// nil when none.
	Annotations jsontext.Value
	// Hash identifies the definition (the catalog's canonical hash); the
	// compiled input schema is cached under it.
	Hash string
	// State is policy.CatalogApproved, CatalogChanged or CatalogUnpinned.
	State string
}

// WarningsMetaKey is the _meta member of a tools/call result in which
// mcpgate reports the coercions it applied to the call's arguments.
const WarningsMetaKey = "io.mcpgate/warnings"

// schemaCache holds compiled input schemas by definition hash, and
// compiled shapers by upstream and tool. Both are bounded by the catalog's
// size: a changed definition gets a new hash, an old one stays until the
// cache is reset (cheap; schemas are small).
type schemaCache struct {
	mu      sync.Mutex
	schemas map[string]schemaEntry
	shapers sync.Map // toolKey → *shape.Shaper (nil: nothing to shape)
	// byRules holds the shapers decisions ask for, by appendRulesKey; a plain
	// map under a read lock, so that a lookup with the key's bytes
	// allocates nothing.
	rulesMu sync.RWMutex
	byRules map[string]*shape.Shaper
	listed  sync.Map // definition hash → jsontext.Value, the inputSchema tools/list shows
	output  sync.Map // definition hash → jsontext.Value, the outputSchema tools/list shows
	// narrowed holds the compiled expose.input_schema of declared tools,
	// by narrowKey (expose.go); told the member names already reported
	// as not listed: too long (toolKey), hidden by a prefix (hiddenKey).
	narrowed sync.Map
	told     sync.Map
}

type toolKey struct{ upstream, tool string }

type schemaEntry struct {
	s   *args.Schema
	err error
}

// maxSchemas bounds the compiled-schema cache; above it the cache starts
// over (a catalog this large is an attack or a misconfiguration).
const maxSchemas = 4096

// schema returns the compiled input schema of t: the schema tools/list
// shows (without tenant-like parameters, see listedSchema), so a call is
// checked against exactly what the model was offered.
func (p *Pipeline) schema(t *CatalogTool) (*args.Schema, error) {
	c := &p.schemas
	c.mu.Lock()
	e, ok := c.schemas[t.Hash]
	c.mu.Unlock()
	if ok {
		return e.s, e.err
	}
	s, err := args.Compile(p.listedSchema(t))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.schemas == nil || len(c.schemas) >= maxSchemas {
		c.schemas = map[string]schemaEntry{}
	}
	c.schemas[t.Hash] = schemaEntry{s, err}
	return s, err
}

// shaper returns the compiled result shaping of a declared tool, nil when
// its declaration asks for none.
func (p *Pipeline) shaper(upstream, tool string) *shape.Shaper {
	d, ok := p.opts.Declarations[upstream][tool]
	if !ok {
		// Undeclared (a permissive policy let it through): only the
		// secret names apply. Not cached per name: the client picks it.
		return p.secretShaper
	}
	key := toolKey{upstream, tool}
	if v, ok := p.schemas.shapers.Load(key); ok {
		return v.(*shape.Shaper)
	}
	var s *shape.Shaper
	if len(d.ResultFields) > 0 || len(d.UntrustedText) > 0 || len(p.opts.SecretNames) > 0 {
		var err error
		s, err = shape.Compile(shape.Rules{ResultFields: d.ResultFields, UntrustedText: d.UntrustedText, SecretNames: p.opts.SecretNames})
		if err != nil {
			// Declarations are validated at load; fail closed all the same:
			// an allowlist nothing matches withholds every field.
			p.log.Error("result shaping of a declared tool cannot be compiled; its results are withheld", "upstream", upstream, "tool", tool, "error", err)
			s, _ = shape.Compile(shape.Rules{ResultFields: []string{withheldField}})
		}
	}
	p.schemas.shapers.Store(key, s)
	return s
}

// resultShaper returns the result shaping of an allowed tools/call as its
// decision asks (policy.Decision.Result: the paths to wrap as untrusted
// text, the allowlist, the names to drop, plus Options.SecretNames); nil
// when there is nothing to shape. A decision without a result member gets
// the tool's declaration (shaper), so shaping never turns off by omission.
// Compiled shapers are cached by their rules, so a hot path answering the
// same paths compiles once. Paths the shaper cannot compile are an error:
// the call is refused (fail closed).
func (p *Pipeline) resultShaper(upstream, tool string, d *policy.Decision) (*shape.Shaper, error) {
	r := d.Result
	if r == nil {
		return p.shaper(upstream, tool), nil
	}
	if len(r.UntrustedText) == 0 && len(r.Fields) == 0 && len(r.Drop) == 0 {
		return p.secretShaper, nil
	}
	var buf [256]byte
	key := appendRulesKey(buf[:0], r)
	c := &p.schemas
	c.rulesMu.RLock()
	s, ok := c.byRules[string(key)]
	c.rulesMu.RUnlock()
	if ok {
		return s, nil
	}
	rules := shape.Rules{ResultFields: r.Fields, UntrustedText: r.UntrustedText, SecretNames: p.opts.SecretNames}
	if len(r.Drop) > 0 {
		rules.SecretNames = append(slices.Clip(p.opts.SecretNames), r.Drop...)
	}
	s, err := shape.Compile(rules)
	if err != nil {
		return nil, err
	}
	c.rulesMu.Lock()
	defer c.rulesMu.Unlock()
	if c.byRules == nil || len(c.byRules) >= maxSchemas {
		// A policy answering ever new paths (e.g. from arguments): start
		// over rather than grow without bound.
		c.byRules = map[string]*shape.Shaper{}
	}
	c.byRules[string(key)] = s
	return s, nil
}

// appendRulesKey appends the key of a decision's result paths to b: each
// list's length, then each entry's length and bytes (uvarints), so two
// different ResultPaths never share a key.
func appendRulesKey(b []byte, r *policy.ResultPaths) []byte {
	for _, list := range [...][]string{r.UntrustedText, r.Fields, r.Drop} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for _, e := range list {
			b = append(binary.AppendUvarint(b, uint64(len(e))), e...)
		}
	}
	return b
}

// shapeRefusal is the answer to an allowed tools/call whose decision asks
// for result shaping the gateway cannot compile: a policy failure, refused
// (fail closed) in the error contract.
func shapeRefusal(id jsontext.Value, decisionID string) []byte {
	return refusal.ToolError(id, []policy.Reason{{
		Code:  policy.CodeInvalidDecision,
		Cause: "The server's policy asked for result shaping the gateway cannot apply, so the call was not made.",
		Fix:   "Do not retry; report decision " + decisionID + " to the server's administrators.",
	}}, decisionID)
}

// withheldField is the only field an allowlist keeps when a tool's own
// shaping cannot be compiled: none of an upstream's.
const withheldField = "mcpgate_withheld"

// catalogTool fills the policy's view of a called tool from the catalog
// and checks the call's arguments against the listed inputSchema. It
// returns false while the upstream's catalog is not loaded (the request is
// then refused with 503: nothing is forwarded unchecked).
func (p *Pipeline) catalogTool(x *Exchange) bool {
	c := p.opts.Catalog
	if c == nil {
		return true
	}
	msg := x.msg
	if !x.lookupTool(msg.Name) {
		return false
	}
	t, listed := &x.cat.tool, x.cat.listed
	in := &x.input
	if !listed {
		in.Tool.Catalog = &policy.ToolCatalog{Listed: false}
		return true
	}
	// The exchange holds the entry (no allocation of its own); the
	// policy input points at it for this request only.
	x.catEntry = policy.ToolCatalog{Listed: true, State: t.State, Hash: t.Hash, Title: t.Title, Annotations: t.Annotations}
	in.Tool.Catalog = &x.catEntry
	s, ns, err := p.toolSchemas(x.req.Upstream, t)
	if err != nil {
		// Fail closed: a tool whose calls cannot be checked is refused
		// (tool_unusable) and not listed; no argument could fix it.
		in.Tool.Catalog.State = policy.CatalogUnusable
		p.log.Warn("a tool's inputSchema cannot be compiled; the tool is refused", "upstream", x.req.Upstream, "tool", t.Name, "error", err)
		return true
	}
	arguments := msg.Arguments
	if len(arguments) == 0 {
		arguments = jsontext.Value("{}")
	}
	var res args.Result
	if ns != nil {
		res = checkNarrowed(ns, s, arguments, args.Options{Write: in.Tool.Effect != policy.EffectRead})
	} else {
		res = s.Check(arguments, args.Options{Write: in.Tool.Effect != policy.EffectRead})
	}
	for _, pr := range res.Problems {
		if pr.Code == "unknown_argument" && p.tenantArgs[foldName(pr.Argument)] {
			continue // refused as a tenant argument, with its own reason
		}
		in.Message.ArgumentProblems = append(in.Message.ArgumentProblems, policy.ArgumentProblem{
			Argument: pr.Argument, Code: pr.Code, Message: pr.Message, Allowed: pr.Allowed, Expected: pr.Expected})
	}
	x.coerced, x.warnings, x.headerParams = res.Arguments, res.Warnings, s.HeaderParams()
	if res.Arguments != nil {
		in.Message.Arguments = res.Arguments // the policy judges what is forwarded
		in.Message.ArgumentsStrict = false
	}
	return true
}

// catalogLookup is what the catalog answered for one request, looked up
// once per request (HandleRequest checks the catalog is loaded, the policy
// input and the schema check use the same entry).
type catalogLookup struct {
	name   string      // the tool looked up (tools/call)
	tool   CatalogTool // its entry, when listed
	found  bool        // name was looked up
	listed bool        // the upstream lists it
	loaded bool        // the upstream's catalog is loaded
	// tools is the upstream's whole list (tools/list), nil if not looked up.
	tools []CatalogTool
}

// lookupTool looks tool name up in the catalog, once per exchange and
// name, and reports whether the upstream's catalog is loaded.
func (x *Exchange) lookupTool(name string) bool {
	c := &x.cat
	if !c.found || c.name != name {
		c.tool, c.listed, c.loaded = x.p.opts.Catalog.Tool(x.req.Upstream, name)
		if x.unexposed {
			// A renamed tool is not listed under its own name.
			c.tool, c.listed = CatalogTool{}, false
		}
		c.name, c.found = name, true
	}
	return c.loaded
}

// catalogEntry is the policy's view of a listed tool's catalog entry.
func catalogEntry(t *CatalogTool) *policy.ToolCatalog {
	return &policy.ToolCatalog{Listed: true, State: t.State, Hash: t.Hash, Title: t.Title, Annotations: t.Annotations}
}

// finderPrefixes start the names of tools that find things (by
// convention: find_ searches, list_ returns short full lists, get_ returns one object).
var finderPrefixes = []string{"find_", "search_", "list_", "get_"}

// maxFinders bounds input.finders.
const maxFinders = 16

// notFound reports whether a tools/call names a tool the caller cannot
// find: undeclared (and not listed for confirmation), hidden, or not
// listed by the upstream.
func notFound(t *policy.Tool) bool {
	return (!t.Declared && t.Undeclared == "") || t.Hidden || (t.Catalog != nil && !t.Catalog.Listed)
}

// finders returns the candidates a "not found" refusal may point to
// (input.finders): the declared read tools of the upstream whose names
// start with a finder prefix, other than name, in the catalog's order
// (by name without a catalog), each as input.tool shows it. The policy
// picks a visible one; create tools are never candidates.
func (p *Pipeline) finders(upstream, name, prefix string) []policy.Tool {
	decls := p.opts.Declarations[upstream]
	// Candidates are named as clients see them (expose.go): with the
	// member's prefix on a federated route.
	exposed := func(n string) string {
		n = p.exposure.exposedName(upstream, n)
		if prefix != "" {
			n = exposedTool(prefix, n)
		}
		return n
	}
	candidate := func(n string) (policy.ToolDeclaration, bool) {
		d, ok := decls[n]
		if !ok || exposed(n) == name || d.Effect != policy.EffectRead || d.Hidden {
			return d, false
		}
		n = p.exposure.exposedName(upstream, n)
		for _, fp := range finderPrefixes {
			if strings.HasPrefix(n, fp) {
				return d, true
			}
		}
		return d, false
	}
	var out []policy.Tool
	if c := p.opts.Catalog; c != nil {
		tools, _ := c.Tools(upstream)
		for i := range tools {
			if d, ok := candidate(tools[i].Name); ok && len(out) < maxFinders {
				t := policy.Tool{Name: exposed(tools[i].Name), Declared: true, ToolDeclaration: d, Catalog: catalogEntry(&tools[i])}
				if _, _, err := p.toolSchemas(upstream, &tools[i]); err != nil {
					t.Catalog.State = policy.CatalogUnusable
				}
				out = append(out, t)
			}
		}
		return out
	}
	for _, n := range slices.Sorted(maps.Keys(decls)) {
		if d, ok := candidate(n); ok && len(out) < maxFinders {
			out = append(out, policy.Tool{Name: exposed(n), Declared: true, ToolDeclaration: d})
		}
	}
	return out
}

// catalogUnavailable is the answer while an upstream's catalog is not
// loaded yet.
func catalogUnavailable(msg *mcp.Message) *Local {
	return unavailable(msg, "The tools of this server have not been listed by the gateway yet.")
}

// replaceArguments returns body with params.arguments replaced by newArgs,
// every other member of the message kept in its order.
func replaceArguments(body []byte, newArgs []byte) ([]byte, error) {
	params, ok, err := member(body, "params")
	if err != nil || !ok {
		return nil, errors.Join(errors.New("params not found"), err)
	}
	params, err = withMember(params, "arguments", newArgs)
	if err != nil {
		return nil, err
	}
	return withMember(body, "params", params)
}

// member returns the value of an object's member key (the first one of
// that name; names compared after unescaping), a slice of obj.
func member(obj []byte, key string) (jsontext.Value, bool, error) {
	start, end, ok, err := memberSpan(obj, key)
	if err != nil || !ok {
		return nil, false, err
	}
	return obj[start:end:end], true, nil
}

// memberSpan returns where the value of member key of the JSON object obj
// sits in obj: obj[start:end], ok false when obj has no such member.
// Unlike eachMember it makes no string of the names it passes over: a
// lookup allocates nothing.
func memberSpan(obj []byte, key string) (start, end int, ok bool, err error) {
	md := memberDecoders.Get().(*memberDecoder)
	defer md.release()
	md.src = *bytes.NewBuffer(obj)
	dec := &md.dec
	dec.Reset(&md.src)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return 0, 0, false, errors.New("not a JSON object")
	}
	for dec.PeekKind() == '"' {
		raw, err := dec.ReadValue() // the quoted name, validated
		if err != nil {
			return 0, 0, false, err
		}
		name := raw[1 : len(raw)-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			if md.name, err = jsontext.AppendUnquote(md.name[:0], raw); err != nil {
				return 0, 0, false, err
			}
			name = md.name
		}
		match := string(name) == key
		v, err := dec.ReadValue()
		if err != nil {
			return 0, 0, false, err
		}
		if match {
			end := int(dec.InputOffset())
			return end - len(v), end, true, nil
		}
	}
	return 0, 0, false, nil
}

// withParam returns body with the value of params.<key> replaced by value
// (bytes otherwise exact: no re-encoding) and the new params object.
func withParam(body []byte, key string, value []byte) (newBody, params []byte, err error) {
	return spliceParam(body, key, len(value), func(out []byte) ([]byte, error) { return append(out, value...), nil })
}

// withParamString is withParam with the JSON string s as the value.
func withParamString(body []byte, key, s string) (newBody, params []byte, err error) {
	return spliceParam(body, key, len(s)+2, func(out []byte) ([]byte, error) { return jsontext.AppendQuote(out, s) })
}

// spliceParam puts the value write appends (about size bytes) in place of
// params.<key> of body, in one new buffer.
func spliceParam(body []byte, key string, size int, write func([]byte) ([]byte, error)) (newBody, params []byte, err error) {
	ps, pe, ok, err := memberSpan(body, "params")
	if err != nil || !ok {
		return nil, nil, errors.Join(errors.New("params not found"), err)
	}
	ns, ne, ok, err := memberSpan(body[ps:pe], key)
	if err != nil || !ok {
		return nil, nil, errors.Join(errors.New("params."+key+" not found"), err)
	}
	out := make([]byte, 0, len(body)-(ne-ns)+size)
	out = append(out, body[:ps+ns]...)
	if out, err = write(out); err != nil {
		return nil, nil, err
	}
	delta := len(out) - (ps + ns) - (ne - ns)
	out = append(out, body[ps+ne:]...)
	return out, out[ps : pe+delta : pe+delta], nil
}

// eachMember calls fn with every member of the JSON object obj, in order,
// until fn returns true. The values alias obj and have no spare capacity:
// appending to one copies it, obj is never written.
func eachMember(obj []byte, fn func(name string, v jsontext.Value) (stop bool)) error {
	md := memberDecoders.Get().(*memberDecoder)
	defer md.release()
	// A bytes.Buffer is parsed in place (no copy of obj), and the decoder
	// comes from a pool: walking a small object allocates nothing but its
	// member names. This runs several times per tools/call (arguments,
	// result, isError).
	md.src = *bytes.NewBuffer(obj)
	dec := &md.dec
	dec.Reset(&md.src)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return errors.New("not a JSON object")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if fn(name, v[:len(v):len(v)]) {
			return nil
		}
	}
	return nil
}

// memberDecoder is eachMember's pooled decoder and its source.
type memberDecoder struct {
	dec  jsontext.Decoder
	src  bytes.Buffer
	name []byte // member's unescaping space
}

var memberDecoders = sync.Pool{New: func() any { return new(memberDecoder) }}

// noInput is what a pooled decoder reads between uses, so the pool keeps
// no caller's bytes alive (never read).
var noInput = new(bytes.Reader)

func (md *memberDecoder) release() {
	md.dec.Reset(noInput)
	md.src = bytes.Buffer{}
	if cap(md.name) > 1<<10 {
		md.name = nil
	}
	memberDecoders.Put(md)
}

// mapMembers returns obj with every member passed through fn (which
// returns the value to write, or false to drop the member), then the
// members of tail appended; order kept.
func mapMembers(obj []byte, fn func(name string, v jsontext.Value) (jsontext.Value, bool), tail ...appended) ([]byte, error) {
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	_ = enc.WriteToken(jsontext.BeginObject)
	var werr error
	err := eachMember(obj, func(name string, v jsontext.Value) bool {
		nv, keep := fn(name, v)
		if !keep {
			return false
		}
		if werr = enc.WriteToken(jsontext.String(name)); werr == nil {
			werr = enc.WriteValue(nv)
		}
		return werr != nil
	})
	if err = errors.Join(err, werr); err != nil {
		return nil, err
	}
	for _, m := range tail {
		_ = enc.WriteToken(jsontext.String(m.name))
		if err := enc.WriteValue(m.value); err != nil {
			return nil, err
		}
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// appended is one object member to append (mapMembers).
type appended struct {
	name  string
	value jsontext.Value
}

// withMember returns obj with member key set to value: replaced where it
// is, appended when absent; every other member kept in its order.
func withMember(obj []byte, key string, value []byte) ([]byte, error) {
	done := false
	out, err := mapMembers(obj, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		if name == key {
			done = true
			return value, true
		}
		return v, true
	})
	if err != nil || done {
		return out, err
	}
	return mapMembers(obj, func(_ string, v jsontext.Value) (jsontext.Value, bool) { return v, true }, appended{key, value})
}

// paramHeaderPrefix starts the Mcp-Param-<Name> header fields of
// revision 2026-07-28 (lower case).
const paramHeaderPrefix = "mcp-param-"

// checkParamHeaders checks every Mcp-Param-<Name> field against the
// argument the tool's schema marks with x-mcp-header <Name>: an unknown
// name, or a value other than the argument's, is a header mismatch
// (-32020). It returns the fields to set when the arguments were coerced
// (re-derived from the new values).
func (x *Exchange) checkParamHeaders() (*mcp.Error, mcp.Header) {
	var set mcp.Header
	for k, vals := range x.req.Header {
		suffix, ok := strings.CutPrefix(k, paramHeaderPrefix)
		if !ok {
			continue
		}
		arg := ""
		for name, a := range x.headerParams {
			if strings.EqualFold(name, suffix) {
				arg = a
			}
		}
		if arg == "" {
			return &mcp.Error{Status: 400, Code: mcp.CodeHeaderMismatch, Message: "Header Mcp-Param-" + suffix + " names no argument of tool " + quote(x.msg.Name)}, nil
		}
		want, _ := argumentText(x.msg.Arguments, arg)
		got := ""
		if len(vals) == 1 {
			got, _ = mcp.DecodeHeaderValue(vals[0])
		}
		if len(vals) != 1 || got != want {
			return &mcp.Error{Status: 400, Code: mcp.CodeHeaderMismatch, Message: "Header Mcp-Param-" + suffix + " does not match argument " + quote(arg)}, nil
		}
		if x.coerced != nil {
			if v, ok := argumentText(x.coerced, arg); ok && v != want {
				if set == nil {
					set = mcp.Header{}
				}
				set.Set(k, mcp.EncodeHeaderValue(v))
			}
		}
	}
	return nil, set
}

// argumentText is the header form of a top-level argument: a string as
// is, any other value as its JSON text.
func argumentText(arguments []byte, name string) (string, bool) {
	v, ok, err := member(arguments, name)
	if err != nil || !ok {
		return "", false
	}
	if v.Kind() == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", false
		}
		return s, true
	}
	return string(v), true
}

// listAnswer answers tools/list from the catalog: the tools the policy
// shows the caller, in the catalog's order, on one page, each with a title
// and annotations derived from its declared effect class (not the
// upstream's own hints), marked cacheScope "private" under 2026-07-28.
func (p *Pipeline) listAnswer(ctx context.Context, x *Exchange) *Local {
	var tools []CatalogTool
	loaded := x.fed != nil
	if !loaded {
		tools, loaded = x.cat.tools, x.cat.tools != nil
	}
	if !loaded {
		tools, loaded = p.opts.Catalog.Tools(x.req.Upstream)
	}
	if !loaded {
		x.outcome = OutcomeError
		return catalogUnavailable(x.msg)
	}
	if _, has, _ := member(x.msg.Params, "cursor"); has {
		x.outcome = OutcomeInvalid
		return local(200, mcp.ErrorResponse(x.msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Invalid cursor: this server lists every tool on one page; call tools/list without a cursor."}))
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	_ = enc.WriteToken(jsontext.BeginObject)
	_ = enc.WriteToken(jsontext.String("tools"))
	_ = enc.WriteToken(jsontext.BeginArray)
	var effects []string
	if x.fed == nil {
		items, visible, _ := p.visibleTools(ctx, x, tools)                               // listchanged.go; refused: none visible
		p.recordListed(x, fingerprint(tools, items, visible, x.input.Principal.Toolset)) // listchanged.go
		effects = p.writeListedTools(ctx, enc, x, nil, "", tools, items, visible, nil)
	} else {
		// A federated route: every member's tools in member order, each
		// under its prefix; a member not listed yet is left out.
		parts := make([]string, len(x.fed.members))
		for i, m := range x.fed.members {
			tools, loaded := p.opts.Catalog.Tools(m.Upstream)
			if !loaded {
				continue
			}
			mx := x.forMember(m.Upstream)
			items, visible, _ := p.visibleTools(ctx, mx, tools)
			parts[i] = fingerprint(tools, items, visible, x.input.Principal.Toolset)
			effects = p.writeListedTools(ctx, enc, mx, x.fed, m.Prefix, tools, items, visible, effects)
		}
		p.recordListed(x, combineFingerprints(parts)) // listchanged.go
	}
	p.writeGatewayTools(enc, effects)
	_ = enc.WriteToken(jsontext.EndArray)
	if x.version >= mcp.Version20260728 {
		_ = enc.WriteToken(jsontext.String("cacheScope"))
		_ = enc.WriteToken(jsontext.String("private"))
		_ = enc.WriteToken(jsontext.String("ttlMs"))
		_ = enc.WriteToken(jsontext.Int(p.opts.ListTTL.Milliseconds()))
		_ = enc.WriteToken(jsontext.String("resultType"))
		_ = enc.WriteToken(jsontext.String("complete"))
	}
	_ = enc.WriteToken(jsontext.EndObject)
	// An allowed request the gateway answers for the upstream, from its
	// catalog: counted as allowed, not as a local answer.
	x.fromCatalog = true
	return local(200, mcp.ResultResponse(x.msg.ID, bytes.TrimSuffix(out.Bytes(), []byte("\n"))))
}

// writeListedTools writes the visible tools of x's upstream, each under
// its exposed name (with prefix on federated route f, nil off one), and
// returns effects with each written tool's effect class added.
func (p *Pipeline) writeListedTools(ctx context.Context, enc *jsontext.Encoder, x *Exchange, f *federation, prefix string, tools []CatalogTool, items []policy.Item, visible map[string]bool, effects []string) []string {
	upstream, toolset := x.req.Upstream, x.input.Principal.Toolset
	for i := range tools {
		// (A member's tool named like mcpgate's own is listed with its
		// prefix: it does not shadow mcpgate's.)
		if !visible[tools[i].Name] || (p.opts.Writes != nil && prefix == "" && isGatewayTool(tools[i].Name)) || p.exposure.shadowed(upstream, tools[i].Name) {
			continue
		}
		effects = append(effects, items[i].Tool.Effect)
		lt := tools[i]
		// An exposed name and text (expose.go), then a toolset's short
		// description for small models (toolsets.go).
		name, title, desc := p.listedText(upstream, &lt)
		if f != nil && prefix == "" && p.hiddenByPrefix(ctx, f, upstream, "tool", name, federationSeparator) {
			continue
		}
		if prefix != "" {
			if title == "" {
				title = titleFromName(name) // the member's name, without prefix
			}
			name = exposedTool(prefix, name)
			if len(name) > maxToolName {
				if _, told := p.schemas.told.LoadOrStore(toolKey{upstream, tools[i].Name}, true); !told {
					p.log.LogAttrs(ctx, slog.LevelWarn, "a member's tool is neither listed nor callable on its virtual server: its name with the member's prefix is longer than 128 characters",
						slog.String("upstream", upstream), slog.String("tool", tools[i].Name), slog.String("exposed", name))
				}
				continue
			}
		}
		lt.Title = title
		lt.Description = p.opts.Toolsets.Description(toolset, upstream, lt.Name, desc)
		if err := p.writeListedTool(enc, upstream, name, &lt, items[i].Tool); err != nil {
			p.log.LogAttrs(ctx, slog.LevelError, "a catalog tool cannot be listed", slog.String("tool", tools[i].Name), slog.Any("error", err))
			continue
		}
	}
	return effects
}

// writeListedTool writes one tools/list entry: the catalog tool t listed
// under name.
func (p *Pipeline) writeListedTool(enc *jsontext.Encoder, upstream, name string, t *CatalogTool, pt *policy.Tool) error {
	str := func(k, v string) {
		_ = enc.WriteToken(jsontext.String(k))
		_ = enc.WriteToken(jsontext.String(v))
	}
	_ = enc.WriteToken(jsontext.BeginObject)
	str("name", name)
	// Titles and descriptions reach the model: invisible, bidi and tag
	// characters an upstream put in them are removed (lint reports them).
	title := shape.Sanitise(t.Title, -1)
	if title == "" {
		title = titleFromName(name)
	}
	str("title", title)
	if d := shape.Sanitise(t.Description, -1); d != "" {
		str("description", d)
	}
	_ = enc.WriteToken(jsontext.String("inputSchema"))
	schema := p.listedSchema(t)
	if n := p.narrowing(upstream, t); n != nil && n.err == nil {
		schema = n.listed
	}
	if err := enc.WriteValue(schema); err != nil {
		return err
	}
	// The upstream's outputSchema describes its results before shaping
	// (untrusted text becomes a wrapper object, fields are dropped): a
	// client validating shaped results against it would refuse them, so
	// it is listed only for tools whose results pass unshaped by their
	// declaration (no untrusted_text, result_fields or secret names). It
	// is listed extended (refusal.OutputSchema) so mcpgate's own tool
	// errors for the tool validate against it too (the declared
	// outputSchema covers every structured result, errors included).
	if len(t.OutputSchema) > 0 && p.shaper(upstream, t.Name) == nil {
		_ = enc.WriteToken(jsontext.String("outputSchema"))
		if err := enc.WriteValue(p.listedOutputSchema(t)); err != nil {
			return err
		}
	}
	_ = enc.WriteToken(jsontext.String("annotations"))
	_ = enc.WriteToken(jsontext.BeginObject)
	str("title", title)
	for _, h := range EffectHints(pt.Effect) {
		_ = enc.WriteToken(jsontext.String(h.Name))
		_ = enc.WriteToken(jsontext.Bool(h.Value))
	}
	_ = enc.WriteToken(jsontext.EndObject)
	return enc.WriteToken(jsontext.EndObject)
}

// listedSchema is a tool's inputSchema as tools/list shows it: the
// upstream's, without tenant-like top-level properties (the tenant comes
// from the credential; offering the parameter would only invite refused
// calls). Cached per definition hash.
func (p *Pipeline) listedSchema(t *CatalogTool) jsontext.Value {
	if len(t.InputSchema) == 0 {
		return jsontext.Value(`{"type":"object"}`)
	}
	if v, ok := p.schemas.listed.Load(t.Hash); ok {
		return v.(jsontext.Value)
	}
	out := jsontext.Value(t.InputSchema)
	if stripped, err := p.stripTenantProperties(t.InputSchema); err == nil && stripped != nil {
		out = stripped
	}
	if closed, err := closeSchema(out); err == nil {
		out = closed
	}
	p.schemas.listed.Store(t.Hash, out)
	return out
}

// listedOutputSchema is a tool's outputSchema as tools/list shows it: the
// upstream's beside the error details (refusal.OutputSchema). Cached per
// definition hash.
func (p *Pipeline) listedOutputSchema(t *CatalogTool) jsontext.Value {
	if v, ok := p.schemas.output.Load(t.Hash); ok {
		return v.(jsontext.Value)
	}
	out := refusal.OutputSchema(t.OutputSchema)
	p.schemas.output.Store(t.Hash, out)
	return out
}

// closeSchema adds "additionalProperties": false to every object schema
// that lists properties and says nothing about other members — the root
// and, recursively, the schemas of properties and of array items — unless
// it combines schemas (allOf, anyOf, oneOf, not, if, $ref), where closing
// one part would refuse another's members. Naive upstreams omit it and
// silently ignore unknown fields; a model then believes it set
// something. The listed schema says so, and calls are checked against it.
func closeSchema(v jsontext.Value) (jsontext.Value, error) {
	if v.Kind() != '{' {
		return v, nil
	}
	var hasProps, open, composite bool
	if err := eachMember(v, func(name string, x jsontext.Value) bool {
		switch name {
		case "properties":
			hasProps = x.Kind() == '{'
		case "additionalProperties", "unevaluatedProperties", "patternProperties":
			open = true
		case "allOf", "anyOf", "oneOf", "not", "if", "$ref", "$dynamicRef":
			composite = true
		}
		return false
	}); err != nil {
		return nil, err
	}
	var werr error
	sub := func(x jsontext.Value) jsontext.Value {
		c, err := closeSchema(x)
		if err != nil {
			werr = err
			return x
		}
		return c
	}
	var tail []appended
	if hasProps && !open && !composite {
		tail = append(tail, appended{"additionalProperties", jsontext.Value("false")})
	}
	out, err := mapMembers(v, func(name string, x jsontext.Value) (jsontext.Value, bool) {
		switch {
		case name == "properties" && x.Kind() == '{':
			props, err := mapMembers(x, func(_ string, ps jsontext.Value) (jsontext.Value, bool) { return sub(ps), true })
			if err != nil {
				werr = err
				return x, true
			}
			return props, true
		case name == "items" && x.Kind() == '{':
			return sub(x), true
		}
		return x, true
	}, tail...)
	return out, errors.Join(err, werr)
}

// stripTenantProperties removes tenant-like names from the schema's
// top-level "properties" and "required"; nil when there are none.
func (p *Pipeline) stripTenantProperties(schema []byte) (jsontext.Value, error) {
	props, ok, err := member(schema, "properties")
	if err != nil || !ok || props.Kind() != '{' {
		return nil, err
	}
	dropped := map[string]bool{}
	kept, err := mapMembers(props, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		if p.tenantArgs[foldName(name)] {
			dropped[name] = true
			return nil, false
		}
		return v, true
	})
	if err != nil {
		return nil, err
	}
	if len(dropped) == 0 {
		return nil, nil
	}
	out, err := withMember(schema, "properties", kept)
	if err != nil {
		return nil, err
	}
	if req, ok, _ := member(out, "required"); ok && req.Kind() == '[' {
		var names []string
		if err := json.Unmarshal(req, &names); err == nil {
			names = slices.DeleteFunc(names, func(n string) bool { return dropped[n] })
			nb, err := json.Marshal(names)
			if err != nil {
				return nil, err
			}
			if out, err = withMember(out, "required", nb); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Hint is one MCP tool annotation hint.
type Hint struct {
	Name  string
	Value bool
}

// EffectHints derives a tool's annotation hints from its declared effect
// class, in one place (the upstream's own hints are never passed on):
// readOnlyHint only for read; destructiveHint for delete and for the
// classes that reach outside (notify, wake, alerting) — what a person
// would want to confirm; idempotentHint false for every write (replay
// protection is not on yet, so a repeat is not known to be harmless);
// openWorldHint for the classes that reach people or alerting.
func EffectHints(effect string) []Hint {
	switch effect {
	case policy.EffectRead:
		return []Hint{{"readOnlyHint", true}, {"destructiveHint", false}, {"idempotentHint", true}, {"openWorldHint", false}}
	case policy.EffectSilentWrite:
		return []Hint{{"readOnlyHint", false}, {"destructiveHint", false}, {"idempotentHint", false}, {"openWorldHint", false}}
	case policy.EffectDelete:
		return []Hint{{"readOnlyHint", false}, {"destructiveHint", true}, {"idempotentHint", false}, {"openWorldHint", false}}
	}
	// notify, wake, alerting
	return []Hint{{"readOnlyHint", false}, {"destructiveHint", true}, {"idempotentHint", false}, {"openWorldHint", true}}
}

// titleFromName makes a title of a snake_case name: "find_customers" →
// "Find customers".
func titleFromName(name string) string {
	s := strings.ReplaceAll(name, "_", " ")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// warningsMeta adds the argument coercion warnings to a tools/call result
// (its _meta member, WarningsMetaKey), so the model learns what the gateway
// changed.
func warningsMeta(result []byte, warnings []args.Warning) ([]byte, error) {
	var w bytes.Buffer
	enc := jsontext.NewEncoder(&w)
	_ = enc.WriteToken(jsontext.BeginArray)
	for _, wa := range warnings {
		_ = enc.WriteToken(jsontext.BeginObject)
		for _, kv := range [][2]string{{"argument", wa.Argument}, {"code", wa.Code}, {"message", wa.Message}} {
			_ = enc.WriteToken(jsontext.String(kv[0]))
			_ = enc.WriteToken(jsontext.String(kv[1]))
		}
		_ = enc.WriteToken(jsontext.EndObject)
	}
	_ = enc.WriteToken(jsontext.EndArray)
	return setMeta(result, WarningsMetaKey, bytes.TrimSuffix(w.Bytes(), []byte("\n")))
}

// setMeta sets _meta[key] = value in a result object, keeping every other
// member and their order.
func setMeta(result []byte, key string, value []byte) ([]byte, error) {
	meta, ok, err := member(result, "_meta")
	if err != nil {
		return nil, err
	}
	if !ok || meta.Kind() != '{' {
		meta = jsontext.Value("{}")
	}
	meta, err = withMember(meta, key, value)
	if err != nil {
		return nil, err
	}
	return withMember(result, "_meta", meta)
}

// lookupCatalog is the stage that looks at the catalog once per request:
// the entry of a tools/call's tool, or the upstream's list for
// tools/list, is the one the policy and the answer use (catalogTool,
// listAnswer). A catalog that cannot be read refuses the request.
func (p *Pipeline) lookupCatalog(_ context.Context, x *Exchange) *Verdict {
	msg := x.msg
	if p.opts.Catalog == nil || (msg.Method != "tools/call" && msg.Method != "tools/list") || (x.fed != nil && x.member == "") {
		return nil
	}
	var loaded bool
	if msg.Method == "tools/call" {
		loaded = x.lookupTool(msg.Name)
	} else {
		x.cat.tools, loaded = p.opts.Catalog.Tools(x.req.Upstream)
	}
	if !loaded && x.fed != nil {
		return x.answerAs(OutcomeError, memberUnavailable(x))
	}
	if !loaded {
		return x.answerAs(OutcomeError, catalogUnavailable(msg))
	}
	return nil
}

// toolsListAnswer answers an allowed tools/list from the catalog.
func (p *Pipeline) toolsListAnswer(ctx context.Context, x *Exchange) *Verdict {
	if x.msg.Method != "tools/list" || p.opts.Catalog == nil {
		return nil
	}
	return x.answer(p.listAnswer(ctx, x))
}

// checkArguments is the stage that holds an allowed tools/call to its
// tool's schema: the Mcp-Param-* headers against the arguments, and the
// coerced arguments put back into the body. A confirmed action's call,
// rebuilt from the stored action, gets its Mcp-Param-* fields derived.
func (p *Pipeline) checkArguments(ctx context.Context, x *Exchange) *Verdict {
	msg := x.msg
	if msg.Method != "tools/call" {
		return nil
	}
	if p.opts.Catalog != nil {
		herr, set := x.checkParamHeaders()
		if herr != nil {
			return x.answerAs(OutcomeInvalid, local(herr.Status, mcp.ErrorResponse(msg.ID, herr)))
		}
		x.setHeader = set
		if x.coerced != nil {
			nb, err := replaceArguments(x.body, x.coerced)
			if err != nil {
				p.log.LogAttrs(ctx, slog.LevelError, "coerced arguments cannot be put back into the request", slog.Any("error", err))
				return x.answerAs(OutcomeError, local(500, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not rewrite the arguments."})))
			}
			x.body, x.bodyChanged = nb, true
		}
	}
	if x.confirming != nil {
		x.setHeader = x.paramHeaders()
	}
	return nil
}
