package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
)

// Server is a federated route (Options.Servers): one route in front of
// several member upstreams. Its route maps to Name (Request.Upstream);
// the expose stage resolves each message to one member, and from there
// on the exchange's upstream is that member.
type Server struct {
	Name    string
	Members []Member // in listing order
}

// Member is one upstream of a Server and the prefix of its names.
type Member struct {
	Upstream string
	// Prefix names the member: tools and prompts are exposed as
	// <prefix>_<name>, resource URIs as <prefix>+<uri>. It holds neither
	// separator.
	Prefix string
}

// MemberLister gives what a federated route lists of its members besides
// their tools (those come from the catalog): internal/app implements it
// with the MCP SDK client and mcpgate's own identity, with a short cache.
// Implementations must be safe for concurrent use.
type MemberLister interface {
	// Items returns the member's prompts, resources or resource templates
	// (kind "prompts", "resources" or "resourceTemplates") as it lists
	// them, in its order; an error when it cannot list them now.
	Items(ctx context.Context, upstream, kind string) ([]jsontext.Value, error)
	// Capabilities returns the server capabilities the member announced
	// (initialize or server/discover), false while unknown.
	Capabilities(ctx context.Context, upstream string) (jsontext.Value, bool)
}

// MemberSessions holds, for each client session mcpgate terminates on a
// federated route (revisions before 2026-07-28), one session per member.
// internal/app implements it over HTTP; the pipeline never opens
// connections itself. Implementations must be safe for concurrent use.
type MemberSessions interface {
	// Session returns the member's session id for client session key and
	// the revision the member agreed to, opening the session on first use
	// (initialize, then notifications/initialized, asking for version,
	// with header's fields: the forwarded request's assertion and
	// credential). Parallel first uses open one session.
	Session(ctx context.Context, key, upstream, version string, header mcp.Header) (id, agreed string, err error)
	// Reset forgets the member session id after the member answered 404
	// for it: the next use opens a new one.
	Reset(key, upstream, id string)
	// Close ends the member sessions of key (HTTP DELETE to each member).
	Close(ctx context.Context, key string)
}

// federate is the expose stage of a request on a federated route: the
// name or URI the message carries resolves to one member (federation's
// resolvers), the body gets the member's own name or URI, and the
// exchange's upstream becomes the member. What no member answers alone
// (lists, initialize, ping, notifications) stays with the server and is
// answered by mcpgate (federationGate, federatedAnswer); a name that
// resolves to nothing is refused once the caller is authenticated.
func (p *Pipeline) federate(ctx context.Context, x *Exchange, f *federation) *Verdict {
	x.fed = f
	msg := x.msg
	if msg == nil {
		if x.req.Method == "DELETE" && x.req.Header.Get(SessionHeader) != "" {
			return nil // the session's end: federationGate, once authenticated
		}
		if x.req.Method == "GET" && x.req.Header.Get(SessionHeader) != "" {
			// An older revision's GET stream, held by one member (in
			// its own session, opened on first use) as a
			// subscriptions/listen stream is: mcpgate announces the
			// server's tools/list_changed on it, and the member's
			// requests to the client carry its prefix.
			x.toMember(p.carrier(f))
			return nil
		}
		// A GET stream without a session: none (the MCP answer for "no
		// stream").
		l := local(405, nil)
		l.Header = mcp.Header{"allow": {"POST, DELETE, OPTIONS"}}
		return x.answerAs(OutcomeInvalid, l)
	}
	if msg.Kind == mcp.KindResponse {
		return p.federateResponse(ctx, x, f)
	}
	if msg.Kind != mcp.KindRequest {
		return nil
	}
	if _, has := paramMember(msg, mcp.ParamTask); has {
		// Its tasks/* follow-ups name no member: not federated (yet).
		return x.answerAs(OutcomeInvalid, local(200, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Invalid params: task-augmented requests are not available on this federated endpoint; call without params.task."})))
	}
	var upstream, original, key string
	var ok bool
	switch msg.Method {
	case "tools/call":
		if p.opts.Writes != nil && isGatewayTool(msg.Name) {
			// mcpgate's own tool (confirm_action, …), listed without
			// prefix: the server's; a confirmed action goes to its member
			// (ownAction).
			return nil
		}
		upstream, original, ok = f.resolveTool(p.exposure, msg.Name)
		key = "name"
	case "prompts/get":
		upstream, original, ok = f.resolvePrompt(msg.Name)
		key = "name"
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		upstream, original, ok = f.resolveURI(msg.URI)
		key = "uri"
	case "completion/complete":
		return p.federateCompletion(ctx, x, f)
	case "subscriptions/listen":
		// The stream is held by one member (the carrier); mcpgate
		// announces the server's tools/list_changed on it
		// (listchanged.go, with the fingerprint of every member).
		x.toMember(p.carrier(f))
		return nil
	default:
		return nil
	}
	if ok && msg.Method == "tools/call" && p.opts.Catalog != nil {
		// A name the member does not list is unknown on this route: the
		// refusal names close matches across members.
		if _, listed, loaded := p.opts.Catalog.Tool(upstream, original); loaded && !listed {
			ok = false
		}
	}
	if !ok {
		x.fedUnknown = true
		return nil
	}
	body, params, err := withParamString(x.body, key, original)
	if err != nil {
		return p.rewriteFailed(ctx, x, err)
	}
	if key == "name" {
		x.exposedAs = msg.Name
		msg.Name = original
	} else {
		msg.URI = original
	}
	msg.Params = params
	x.body, x.bodyChanged = body, true
	x.toMember(upstream)
	return nil
}

// carrier is the member that holds a federated route's
// subscriptions/listen streams: the first member whose tools are listed
// and whose latest listing did not fail (so likely up), else the first
// listed, else the first.
func (p *Pipeline) carrier(f *federation) string {
	if len(f.members) == 0 {
		return ""
	}
	listed := ""
	if p.opts.Catalog != nil {
		failing, _ := p.opts.Catalog.(ListingFailures)
		for _, m := range f.members {
			if _, loaded := p.opts.Catalog.Tools(m.Upstream); !loaded {
				continue
			}
			if failing == nil || !failing.Failing(m.Upstream) {
				return m.Upstream
			}
			if listed == "" {
				listed = m.Upstream
			}
		}
	}
	if listed != "" {
		return listed
	}
	return f.members[0].Upstream
}

// ListingFailures is what a ToolCatalog may also tell: whether the latest
// listing of an upstream failed (its previous listing stays in use).
type ListingFailures interface {
	Failing(upstream string) bool
}

// toMember makes the member upstream the exchange's upstream: from here
// on the request is the member's, as on the member's own route.
func (x *Exchange) toMember(upstream string) {
	m := new(Request)
	*m = *x.req
	m.Upstream = upstream
	x.routeReq = x.req
	x.req, x.member = m, upstream
}

// routeRequest is the request as it came in on its route: on a federated
// route its Upstream is the server, whose protected resource (token
// audience, scopes, metadata) the caller authenticates for, whichever
// member the message goes to.
func (x *Exchange) routeRequest() *Request {
	if x.routeReq != nil {
		return x.routeReq
	}
	return x.req
}

// rewriteFailed answers a request whose body could not take the member's
// own name (fail closed).
func (p *Pipeline) rewriteFailed(ctx context.Context, x *Exchange, err error) *Verdict {
	p.log.LogAttrs(ctx, slog.LevelError, "the member's own name cannot be put into the request", slog.Any("error", err))
	return x.answerAs(OutcomeError, local(500, mcp.ErrorResponse(x.msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not rewrite the request for its upstream."})))
}

// federateCompletion resolves the prompt or resource template a
// completion/complete refers to (params.ref: {"type":"ref/prompt",
// "name"} or {"type":"ref/resource","uri"}) to its member, with the
// member's own name or URI template in the body.
func (p *Pipeline) federateCompletion(ctx context.Context, x *Exchange, f *federation) *Verdict {
	var params struct {
		Ref struct {
			Type string `json:"type"`
			Name string `json:"name"`
			URI  string `json:"uri"`
		} `json:"ref"`
	}
	if json.Unmarshal(x.msg.Params, &params, json.RejectUnknownMembers(false)) != nil {
		x.fedUnknown = true
		return nil
	}
	var upstream, original, key string
	var ok bool
	switch params.Ref.Type {
	case "ref/prompt":
		upstream, original, ok = f.resolvePrompt(params.Ref.Name)
		key = "name"
	case "ref/resource":
		upstream, original, ok = f.resolveURI(params.Ref.URI)
		key = "uri"
	}
	ref, found, err := member(x.msg.Params, "ref")
	if !ok || !found || err != nil {
		x.fedUnknown = true
		return nil
	}
	q, err := jsontext.AppendQuote(nil, original)
	if err == nil {
		ref, err = withMember(ref, key, q)
	}
	var body, newParams []byte
	if err == nil {
		body, newParams, err = withParam(x.body, "ref", ref)
	}
	if err != nil {
		return p.rewriteFailed(ctx, x, err)
	}
	x.msg.Params = newParams
	x.body, x.bodyChanged = body, true
	x.toMember(upstream)
	return nil
}

// federationGate is the stage that answers, on a federated route and for
// an authenticated caller, what reaches no member: a name or URI no member
// resolves (a tool error naming close matches, or a JSON-RPC error), ping
// and logging/setLevel (an empty result), notifications (202), and the
// methods mcpgate does not federate (-32601). Lists, initialize and
// server/discover go on through the policy to federatedAnswer.
func (p *Pipeline) federationGate(ctx context.Context, x *Exchange) *Verdict {
	if x.fed == nil || x.member != "" {
		return nil
	}
	msg := x.msg
	if msg == nil {
		// DELETE: the client ends its session; mcpgate ends the members'.
		if p.opts.MemberSessions != nil {
			p.opts.MemberSessions.Close(ctx, x.req.Header.Get(SessionHeader))
		}
		x.unbindSession(200)
		return x.answerAs(OutcomeLocal, local(200, nil))
	}
	if msg.Kind == mcp.KindRequest && x.version >= mcp.Version20260728 && msg.Meta.ClientCapabilities == nil {
		// mcpgate answers this request itself, so it checks what the
		// server would (SEP-2575): every request declares the client's
		// capabilities.
		return x.answerAs(OutcomeInvalid, local(400, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Invalid params: _meta has no " + mcp.MetaKeyClientCapabilities})))
	}
	switch msg.Kind {
	case mcp.KindNotification:
		if msg.Method == mcp.NotificationCancelled {
			if member := p.calls.memberOf(x); member != "" {
				x.toMember(member) // the member that has the request
				return nil
			}
		}
		return x.answerAs(OutcomeLocal, local(202, nil))
	case mcp.KindResponse:
		return x.answerAs(OutcomeInvalid, local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest,
			Message: "This federated endpoint sends no requests to clients; the response matches none."})))
	}
	switch {
	case msg.Method == "tools/call" && !x.fedUnknown:
		return nil // mcpgate's own tool (federate)
	case msg.Method == "tools/call":
		x.outcome = OutcomeDeny
		return x.answer(local(200, refusal.ToolError(msg.ID, []policy.Reason{p.unknownTool(ctx, x)}, "")))
	case msg.Method == "prompts/get":
		return x.answerAs(OutcomeInvalid, local(200, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Unknown prompt " + quote(msg.Name) + ": prompt names start with a member's prefix and '_'; call prompts/list."})))
	case msg.Method == "completion/complete":
		return x.answerAs(OutcomeInvalid, local(200, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Unknown reference: params.ref names a prompt (<prefix>_<name>) or resource template (<prefix>+<uri>) of no member; call prompts/list or resources/templates/list."})))
	case strings.HasPrefix(msg.Method, "resources/") && x.fedUnknown:
		return x.answerAs(OutcomeInvalid, local(200, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Resource not found: " + quote(msg.URI) + " names no member (URIs start with a member's prefix and '+'); call resources/list.",
			Data:    map[string]string{"uri": msg.URI}})))
	case msg.Method == "ping" || msg.Method == "logging/setLevel":
		return x.answerAs(OutcomeLocal, local(200, mcp.ResultResponse(msg.ID, []byte("{}"))))
	case listKinds[msg.Method] != "" || msg.Method == mcp.MethodInitialize || msg.Method == mcp.MethodServerDiscover:
		return nil
	}
	return x.answerAs(OutcomeInvalid, local(404, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeMethodNotFound,
		Message: "Method " + quote(msg.Method) + " is not available on this federated endpoint."})))
}

// unknownTool is the reason a tools/call naming no member's tool is
// refused: the prefix is no member's, or the member has no such tool
// (then mcpgate would not know which one to call). It names the visible
// tools whose names are closest.
func (p *Pipeline) unknownTool(ctx context.Context, x *Exchange) policy.Reason {
	name := x.msg.Name
	var names []string
	for _, m := range x.fed.members {
		tools, loaded := p.opts.Catalog.Tools(m.Upstream)
		if !loaded {
			continue
		}
		mx := x.forMember(m.Upstream)
		// Asked as tools/list asks: what would the caller see listed.
		mx.msg = &mcp.Message{Kind: mcp.KindRequest, Method: "tools/list"}
		mx.input.Message = policy.Message{Kind: "request", Method: "tools/list", Client: x.input.Message.Client}
		mx.input.Tool = nil
		_, visible, _ := p.visibleTools(ctx, mx, tools)
		for i := range tools {
			own := p.exposure.exposedName(m.Upstream, tools[i].Name)
			if visible[tools[i].Name] && !p.exposure.shadowed(m.Upstream, tools[i].Name) && (m.Prefix != "" || !x.fed.shadowed(own, federationSeparator)) {
				names = append(names, exposedTool(m.Prefix, own))
			}
		}
	}
	fix := "Call tools/list and use one of the tools it lists; names start with a member's prefix and '_'."
	if close := closeNames(name, names, 3); len(close) > 0 {
		fix = "Did you mean " + strings.Join(close, ", ") + "? " + fix
	}
	return policy.Reason{Code: policy.CodeToolNotDeclared, Cause: "Tool " + quote(name) + " is not available on this server.", Fix: fix, NextTool: "tools/list"}
}

// closeNames returns up to n names close to name: the same name after
// the prefix, or a small edit distance, nearest first.
func closeNames(name string, names []string, n int) []string {
	_, suffix, _ := strings.Cut(name, string(federationSeparator))
	type scored struct {
		name string
		d    int
	}
	var c []scored
	for _, cand := range names {
		_, cs, _ := strings.Cut(cand, string(federationSeparator))
		d := editDistance(name, cand)
		if suffix != "" && (cs == suffix || cs == name) || cs == name {
			d = 0
		}
		if d <= max(2, len(name)/3) {
			c = append(c, scored{cand, d})
		}
	}
	slices.SortStableFunc(c, func(a, b scored) int { return a.d - b.d })
	var out []string
	for i := 0; i < len(c) && i < n; i++ {
		out = append(out, quote(c[i].name))
	}
	return out
}

// editDistance is the Levenshtein distance of a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// hiddenByPrefix reports whether name, a tool, prompt or resource URI
// (kind) of f's unprefixed member upstream, starts with another member's
// prefix and sep (federation.shadowed): a collision, neither listed nor
// callable, said once in the log.
func (p *Pipeline) hiddenByPrefix(ctx context.Context, f *federation, upstream, kind, name string, sep byte) bool {
	if !f.shadowed(name, sep) {
		return false
	}
	if _, told := p.schemas.told.LoadOrStore(hiddenKey{upstream, kind, name}, true); !told {
		p.log.LogAttrs(ctx, slog.LevelWarn, "a name of the unprefixed member starts with another member's prefix: it resolves to that member, so the unprefixed member's is neither listed nor callable",
			slog.String("server", f.name), slog.String("upstream", upstream), slog.String("kind", kind), slog.String("name", name))
	}
	return true
}

type hiddenKey struct{ upstream, kind, name string }

// memberPrefix is the prefix of the member the exchange resolved to, ""
// off a federated route.
func (x *Exchange) memberPrefix() string {
	if x.fed == nil {
		return ""
	}
	return x.fed.prefixOf(x.member)
}

// forMember is an exchange for x's caller as seen by member upstream: the
// policy's per-member questions (which tools, prompts, resources are
// visible) are asked with it.
func (x *Exchange) forMember(upstream string) *Exchange {
	r := *x.req
	r.Upstream = upstream
	mx := &Exchange{ctx: x.ctx, p: x.p, req: &r, msg: x.msg, version: x.version, label: x.label, listKind: listKinds[x.msg.Method]}
	mx.input = x.input
	mx.input.Transport.Upstream = upstream
	return mx
}

// federatedAnswer is the stage that answers an allowed list, initialize or
// server/discover on a federated route: the members' items under their
// prefixes, one page in member order (tools/list: listAnswer), and the
// members' merged capabilities.
func (p *Pipeline) federatedAnswer(ctx context.Context, x *Exchange) *Verdict {
	if x.fed == nil || x.member != "" {
		return nil
	}
	switch m := x.msg.Method; {
	case m == mcp.MethodInitialize || m == mcp.MethodServerDiscover:
		l := p.federatedDiscover(ctx, x)
		if m == mcp.MethodInitialize && l.Status == 200 {
			// mcpgate's own session, bound to the caller; each member's
			// is opened on first use (MemberSessions).
			id := newSessionID()
			if err := x.bindSessionID(id); err != nil {
				return x.answerAs(OutcomeError, unavailable(x.msg, "The gateway cannot start a session right now."))
			}
			l.Header.Set(SessionHeader, id)
		}
		return x.answer(l)
	case listKinds[m] != "":
		return x.answer(p.federatedList(ctx, x, listKinds[m]))
	}
	return nil
}

// federatedList answers prompts/list, resources/list or
// resources/templates/list: each member's items (MemberLister), filtered
// by the policy as the member's own list would be, renamed with the
// member's prefix. A member that cannot be listed now is left out (its
// names answer upstream_unavailable until it is back).
func (p *Pipeline) federatedList(ctx context.Context, x *Exchange, kind string) *Local {
	if _, has, _ := member(x.msg.Params, "cursor"); has {
		x.outcome = OutcomeInvalid
		return local(200, mcp.ErrorResponse(x.msg.ID, &mcp.Error{Code: mcp.CodeInvalidParams,
			Message: "Invalid cursor: this server lists everything on one page; call " + x.msg.Method + " without a cursor."}))
	}
	key := "name"
	if kind == "resources" {
		key = "uri"
	} else if kind == "resourceTemplates" {
		key = "uriTemplate"
	}
	var all []jsontext.Value
	for _, m := range x.fed.members {
		if p.opts.Members == nil {
			break
		}
		items, err := p.opts.Members.Items(ctx, m.Upstream, kind)
		if err != nil {
			p.log.LogAttrs(ctx, slog.LevelDebug, "a member's list is left out", slog.String("upstream", m.Upstream), slog.String("list", kind), slog.Any("error", err))
			continue
		}
		mx := x.forMember(m.Upstream)
		kept, err := mx.visibleItems(ctx, kind, items)
		if err != nil {
			p.log.LogAttrs(ctx, slog.LevelWarn, "a member's list cannot be filtered; left out", slog.String("upstream", m.Upstream), slog.Any("error", err))
			continue
		}
		for _, it := range kept {
			var own string
			if v, ok, _ := member(it, key); ok && json.Unmarshal(v, &own) == nil {
				exposed, sep := exposedTool(m.Prefix, own), byte(federationSeparator)
				if key != "name" {
					exposed, sep = exposedURI(m.Prefix, own), federationURISeparator
				}
				if m.Prefix == "" && p.hiddenByPrefix(ctx, x.fed, m.Upstream, kind, own, sep) {
					continue
				}
				q, _ := jsontext.AppendQuote(nil, exposed)
				if renamed, err := withMember(it, key, q); err == nil {
					all = append(all, renamed)
				}
			}
		}
	}
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	_ = enc.WriteToken(jsontext.BeginObject)
	_ = enc.WriteToken(jsontext.String(kind))
	_ = enc.WriteToken(jsontext.BeginArray)
	for _, it := range all {
		_ = enc.WriteValue(it)
	}
	_ = enc.WriteToken(jsontext.EndArray)
	if x.version >= mcp.Version20260728 {
		_ = enc.WriteToken(jsontext.String("cacheScope"))
		_ = enc.WriteToken(jsontext.String("private"))
		_ = enc.WriteToken(jsontext.String("ttlMs"))
		_ = enc.WriteToken(jsontext.Int(p.opts.ListTTL.Milliseconds()))
	}
	_ = enc.WriteToken(jsontext.EndObject)
	x.fromCatalog = true // answered for the members: counted as allowed
	body := mcp.ResultResponse(x.msg.ID, bytes.TrimSuffix(out.Bytes(), []byte("\n")))
	if x.version >= mcp.Version20260728 {
		body = withResultType(body)
	}
	return local(200, body)
}

// visibleItems are the items of a member's list the policy shows x's
// caller (filterList, as for the member's own list).
func (x *Exchange) visibleItems(ctx context.Context, kind string, items []jsontext.Value) ([]jsontext.Value, error) {
	var b bytes.Buffer
	enc := jsontext.NewEncoder(&b)
	_ = enc.WriteToken(jsontext.BeginObject)
	_ = enc.WriteToken(jsontext.String(kind))
	_ = enc.WriteToken(jsontext.BeginArray)
	for _, it := range items {
		if err := enc.WriteValue(it); err != nil {
			return nil, err
		}
	}
	_ = enc.WriteToken(jsontext.EndArray)
	_ = enc.WriteToken(jsontext.EndObject)
	filtered, err := x.filterList(ctx, b.Bytes())
	switch {
	case err != nil:
		return nil, err
	case filtered == nil:
		return items, nil // every item stays
	}
	v, _, err := member(filtered, kind)
	if err != nil {
		return nil, err
	}
	var kept []jsontext.Value
	if err := json.Unmarshal(v, &kept); err != nil {
		return nil, err
	}
	return kept, nil
}

// federatedDiscover answers initialize (older revisions) or
// server/discover (2026-07-28) on a federated route: mcpgate speaks for
// the server, with the union of its members' capabilities.
func (p *Pipeline) federatedDiscover(ctx context.Context, x *Exchange) *Local {
	// mcpgate announces the server's tools/, prompts/ and
	// resources/list_changed itself, on subscriptions/listen and GET
	// streams (listchanged.go): it answers those lists.
	caps := map[string]map[string]any{"tools": {"listChanged": true}}
	for _, m := range x.fed.members {
		if p.opts.Members == nil {
			break
		}
		raw, ok := p.opts.Members.Capabilities(ctx, m.Upstream)
		if !ok {
			continue
		}
		var c map[string]any
		if json.Unmarshal(raw, &c) != nil {
			continue
		}
		// A member's capability, without subscribe (resource
		// subscriptions are not federated); listChanged is mcpgate's.
		for _, k := range []string{"prompts", "resources", "logging"} {
			if _, has := c[k]; has {
				caps[k] = map[string]any{}
				if k != "logging" {
					caps[k]["listChanged"] = true
				}
			}
		}
	}
	info := map[string]any{"name": x.fed.name, "title": "mcpgate federated server " + x.fed.name, "version": "1"}
	result := map[string]any{"capabilities": caps, "_meta": map[string]any{metaKeyServerInfo: info}}
	if x.msg.Method == mcp.MethodInitialize {
		v := x.msg.InitializeVersion
		if !mcp.IsSupportedVersion(v) || v >= mcp.Version20260728 {
			v = mcp.Version20251125
		}
		result["protocolVersion"] = v
		result["serverInfo"] = info
	} else {
		result["supportedVersions"] = mcp.SupportedVersions
		result["serverInfo"] = info
		// The same for every caller: the members' capabilities.
		result["cacheScope"] = "public"
		result["ttlMs"] = p.opts.ListTTL.Milliseconds()
	}
	body, err := json.Marshal(result, json.Deterministic(true))
	if err != nil {
		return local(500, mcp.ErrorResponse(x.msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not describe this server."}))
	}
	return local(200, mcp.ResultResponse(x.msg.ID, body))
}

// memberUnavailable answers a call whose member has not been listed yet
// or is down: a tool error (JSON-RPC error for other methods) with code
// upstream_unavailable; the other members keep answering.
func memberUnavailable(x *Exchange) *Local {
	behind := "prefix " + quote(x.fed.prefixOf(x.member))
	if x.fed.prefixOf(x.member) == "" {
		behind = "the names without prefix"
	}
	reason := policy.Reason{Code: "upstream_unavailable",
		Cause: "The server behind " + behind + " is not available right now.",
		Fix:   "Retry in a few seconds; the other tools of this endpoint keep working."}
	if x.msg == nil || x.msg.Kind != mcp.KindRequest {
		// A GET stream or a client's answer: no request to answer.
		return unavailable(x.msg, reason.Cause)
	}
	if x.msg.Method == "tools/call" {
		return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{reason}, ""))
	}
	return local(200, refusal.RPCError(x.msg.ID, []policy.Reason{reason}, ""))
}

// exposeResultURIs rewrites the URIs of the resource links, embedded
// resources and resource contents in a member's result to their exposed
// form (<prefix>+<uri>), and removes those of the unprefixed member that
// start with another member's prefix; nil when the result carries none.
func (x *Exchange) exposeResultURIs(result []byte) ([]byte, error) {
	if !bytes.Contains(result, []byte(`"uri"`)) {
		return nil, nil // no resource carries a URI: nothing to walk
	}
	prefix := x.memberPrefix()
	var werr error
	out, _, err := mapResourceItems(result, func(item jsontext.Value, uri string) (jsontext.Value, bool) {
		if prefix == "" && x.fed.shadowed(uri, federationURISeparator) {
			// The unprefixed member's URI reads as another member's: a
			// client reading it back would reach that member. Removed.
			return nil, true
		}
		q, err := jsontext.AppendQuote(nil, exposedURI(prefix, uri))
		if err != nil {
			werr = err
			return nil, false
		}
		if r, ok, _ := member(item, "resource"); ok && r.Kind() == '{' {
			nr, err := withMember(r, "uri", q)
			if err == nil {
				var ni []byte
				ni, err = withMember(item, "resource", nr)
				if err == nil {
					return ni, false
				}
			}
			werr = err
			return nil, false
		}
		ni, err := withMember(item, "uri", q)
		if err != nil {
			werr = err
			return nil, false
		}
		return ni, false
	})
	return out, errors.Join(err, werr)
}

// exposeParamURI returns params with its uri member exposed
// (<prefix>+<uri>), nil when it has none.
func (x *Exchange) exposeParamURI(params []byte) ([]byte, error) {
	v, ok, err := member(params, "uri")
	if err != nil || !ok || v.Kind() != '"' {
		return nil, err
	}
	var uri string
	if err := json.Unmarshal(v, &uri); err != nil {
		return nil, err
	}
	q, err := jsontext.AppendQuote(nil, exposedURI(x.memberPrefix(), uri))
	if err != nil {
		return nil, err
	}
	return withMember(params, "uri", q)
}

// newSessionID is a session id mcpgate issues on a federated route: 128
// random bits, hex (visible ASCII, as MCP requires).
func newSessionID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// memberIDSeparator joins a member's prefix and the raw JSON text of the
// id of a request the member sent a client: the id the client sees is the
// string "<prefix>/<raw id>", and its answer goes back to that member
// under the member's own id.
const memberIDSeparator = "/"

// exposeRequestID returns the server-to-client request body with its id
// id exposed for the client (memberIDSeparator).
func (x *Exchange) exposeRequestID(body []byte, id jsontext.Value) ([]byte, error) {
	q, err := jsontext.AppendQuote(nil, x.memberPrefix()+memberIDSeparator+string(id))
	if err != nil {
		return nil, err
	}
	return withMember(body, "id", q)
}

// federateResponse routes a client's answer to a server-to-client request
// back to the member that sent it, with the member's own id
// (exposeRequestID); an answer that names no member is refused by
// federationGate.
func (p *Pipeline) federateResponse(_ context.Context, x *Exchange, f *federation) *Verdict {
	var exposed string
	if json.Unmarshal(x.msg.ID, &exposed) != nil {
		return nil
	}
	prefix, raw, ok := strings.Cut(exposed, memberIDSeparator)
	m := f.byPrefix[prefix]
	if !ok || m == nil || !jsontext.Value(raw).IsValid() {
		return nil
	}
	body, err := withMember(x.body, "id", []byte(raw))
	if err != nil {
		return nil
	}
	x.msg.ID = jsontext.Value(raw)
	x.body, x.bodyChanged = body, true
	x.toMember(m.Upstream)
	return nil
}

// memberSession puts the member's session into v, the verdict of a
// request of an older revision on a federated route: the client's
// session id (mcpgate's own) never reaches a member, and a member's never
// reaches the client. It returns the answer when the member's session
// cannot be opened.
func (p *Pipeline) memberSession(x *Exchange, v *Verdict) *Local {
	key := x.req.Header.Get(SessionHeader)
	if x.member == "" || x.version >= mcp.Version20260728 {
		return nil
	}
	version := x.version
	if x.msg == nil {
		version = mcp.EffectiveVersion(x.req.Header, nil) // a GET stream
	}
	var id, agreed string
	if p.opts.MemberSessions != nil && key != "" {
		var err error
		id, agreed, err = p.opts.MemberSessions.Session(x.ctx, key, x.member, version, v.SetHeader)
		if err != nil {
			p.log.LogAttrs(x.ctx, slog.LevelWarn, "a member's session cannot be opened", slog.String("upstream", x.member), slog.Any("error", err))
			x.outcome = OutcomeError
			return memberUnavailable(x)
		}
	}
	if id == "" {
		// A member without sessions: mcpgate's own id stays here.
		if key != "" {
			v.RemoveHeader = append(slices.Clip(v.RemoveHeader), SessionHeader)
		}
		return nil
	}
	x.memberSession = id
	v.SetHeader.Set(SessionHeader, id)
	if agreed != "" && agreed != version {
		v.SetHeader.Set(mcp.HeaderProtocolVersion, agreed)
	}
	return nil
}

// metaKeyServerInfo is the _meta member in which a 2026-07-28 server
// names itself on its results.
const metaKeyServerInfo = "io.modelcontextprotocol/serverInfo"

// memberCalls are the requests in flight on federated routes, each with
// the member it went to, so that notifications/cancelled (which names the
// request's id) reaches that member. Keyed by route, caller (the client's
// session with older revisions, else the connection) and request id;
// bounded by maxMemberCalls (beyond, a call is not recorded and its
// cancellation stays with mcpgate).
type memberCalls struct {
	mu sync.Mutex
	m  map[string]string
}

const maxMemberCalls = 100000

// callKey is the key of the request id in x's scope.
func callKey(x *Exchange, id []byte) string {
	scope := x.req.Header.Get(SessionHeader)
	if scope == "" {
		scope = connectionOf(&x.input.Principal)
	}
	return x.fed.name + "\x1f" + scope + "\x1f" + string(id)
}

func (c *memberCalls) add(x *Exchange) {
	k := callKey(x, x.msg.ID)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	if len(c.m) >= maxMemberCalls {
		return
	}
	c.m[k] = x.member
	x.callKey = k
}

func (c *memberCalls) remove(k string) {
	c.mu.Lock()
	delete(c.m, k)
	c.mu.Unlock()
}

// memberOf returns the member that has the request a
// notifications/cancelled names, "" when none of x's is in flight.
func (c *memberCalls) memberOf(x *Exchange) string {
	id, ok, err := member(x.msg.Params, "requestId")
	if err != nil || !ok {
		return ""
	}
	k := callKey(x, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}
