package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
)

// HandleRequest runs the request-side gates in order: Origin, HTTP method,
// CORS preflight, Content-Type, content encoding, body size, strict JSON and
// JSON-RPC shape, known method, MCP headers, authentication (when an
// Authenticator is set), then the policy decision.
func (p *Pipeline) HandleRequest(ctx context.Context, r *Request) (*Exchange, Verdict) {
	p = p.cur.Load() // the settings this exchange runs with, start to end
	x := &Exchange{ctx: ctx, p: p, req: r, start: time.Now(), label: LabelNone}
	if p.opts.Tracer != nil {
		ctx = p.startTrace(x)
	}
	v := p.handle(ctx, x)
	if v.Local != nil && x.version >= mcp.Version20260728 && !x.fromCatalog {
		// (tools/list answered from the catalog writes it itself: no
		// second pass over the whole list.)
		v.Local.Body = withResultType(v.Local.Body)
	}
	if v.Local != nil && x.outcome == OutcomeAllow && !x.fromCatalog {
		x.outcome = OutcomeLocal
	}
	if origin := r.Header.Get("origin"); origin != "" && x.outcome != OutcomeInvalid {
		v.ResponseExtra = corsResponseHeader(origin)
		if v.Local != nil {
			for k, vals := range v.ResponseExtra {
				if v.Local.Header == nil {
					v.Local.Header = mcp.Header{}
				}
				v.Local.Header[k] = vals
			}
		}
	}
	if p.opts.Tracer != nil {
		p.endRequestTrace(x, &v)
	}
	if v.Local != nil {
		x.Finish()
	}
	return x, v
}

func (p *Pipeline) handle(ctx context.Context, x *Exchange) Verdict {
	r := x.req
	if l := p.headerFaults(r); l != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: l}
	}
	if origin := r.Header.Get("origin"); origin != "" && !p.originAllowed(origin) {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(403, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Origin " + quote(origin) + " is not allowed"}))}
	}
	if doc, ok := p.metadata(r.Path); ok {
		return serveDocument(x, doc, "application/json", "300")
	}
	if r.Path == JWKSPath && p.opts.JWKS != nil {
		return serveDocument(x, p.opts.JWKS(), "application/jwk-set+json", "60")
	}
	if name := tenantQueryName(r.RawQuery, p.tenantArgs); name != "" {
		x.outcome = OutcomeInvalid
		return Verdict{Local: p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest,
			Message: "The query parameter " + quote(name) + " would choose a tenant; the tenant comes from your credential. Remove it from the URL."})}
	}
	switch r.Method {
	case "POST":
	case "OPTIONS":
		x.outcome = OutcomeAllow
		return Verdict{Local: preflight(r.Header)}
	case "GET", "DELETE":
		// Older revisions' server-to-client stream (GET) and session end
		// (DELETE) carry no JSON-RPC message; the upstream applies its
		// own session rules. Revision 2026-07-28 servers answer 405. A
		// body, or headers naming a message, would reach the upstream
		// unchecked: refused.
		if len(r.Body) > 0 || r.Header.Has(mcp.HeaderMethod) || r.Header.Has(mcp.HeaderName) {
			x.outcome = OutcomeInvalid
			return Verdict{Local: local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: r.Method + " carries no JSON-RPC message: no body, Mcp-Method or Mcp-Name"}))}
		}
		x.mark(SpanAuth)
		if l := p.authenticate(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		x.mark(SpanKillSwitch)
		if l := p.killSwitch(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		if l := p.checkSession(ctx, x); l != nil {
			return Verdict{Local: l}
		}
		x.outcome = OutcomeAllow
		x.watchTools = r.Method == "GET" && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
		x.task.watch = r.Method == "GET" && p.opts.Tasks.Enabled
		x.shapeMessages = r.Method == "GET" && p.shapesMessages()
		return p.forwardVerdict(x, nil, false)
	default:
		x.outcome = OutcomeInvalid
		l := local(405, nil)
		l.Header = mcp.Header{"allow": {"GET, POST, DELETE, OPTIONS"}}
		return Verdict{Local: l}
	}
	if !isJSON(r.Header.Get("content-type")) {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(415, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Content-Type must be application/json"}))}
	}
	body, changed, ferr := decodeBody(r.Header.Get("content-encoding"), r.Body, p.opts.MaxBodyBytes)
	if ferr != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(ferr.Status, mcp.ErrorResponse(nil, ferr))}
	}
	msg, perr := mcp.Parse(body, p.opts.MaxJSONDepth)
	if perr != nil && perr.Code == mcp.CodeInvalidParams && msg != nil && msg.Method != "" &&
		!mcp.KnownMethodIn(mcp.EffectiveVersion(r.Header, msg), msg.Method, msg.Kind) {
		// JSON-RPC: a method that does not exist is reported as such
		// before its params are judged.
		perr = nil
	}
	if perr != nil {
		x.outcome = OutcomeInvalid
		var id = jsonNull
		if msg != nil && msg.ID != nil {
			id = msg.ID
		}
		return Verdict{Local: local(perr.Status, mcp.ErrorResponse(id, perr))}
	}
	x.msg = msg
	x.label = MethodLabel(msg)
	x.version = mcp.EffectiveVersion(r.Header, msg)
	x.shapeMessages = msg.Kind == mcp.KindRequest && p.shapesMessages()
	if msg.Kind != mcp.KindResponse && !mcp.KnownMethodIn(x.version, msg.Method, msg.Kind) {
		x.outcome = OutcomeInvalid
		if msg.Kind == mcp.KindNotification {
			return Verdict{Local: local(404, nil)}
		}
		return Verdict{Local: local(404, mcp.ErrorResponse(msg.ID, &mcp.Error{Status: 404, Code: mcp.CodeMethodNotFound, Message: "Method not found: " + quote(msg.Method)}))}
	}
	if herr := mcp.CheckHeaders(r.Header, msg); herr != nil {
		x.outcome = OutcomeInvalid
		if msg.Kind == mcp.KindNotification {
			return Verdict{Local: local(herr.Status, nil)}
		}
		return Verdict{Local: local(herr.Status, mcp.ErrorResponse(idOrNull(msg.ID), herr))}
	}
	if msg.Kind == mcp.KindResponse && x.version >= mcp.Version20260728 {
		// Revision 2026-07-28 has no server-to-client requests a client
		// could answer on this endpoint.
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "clients do not send JSON-RPC responses in protocol revision " + x.version}))}
	}
	x.mark(SpanAuth)
	if l := p.authenticate(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	x.mark(SpanKillSwitch)
	if l := p.killSwitch(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	if l := p.checkSession(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	if nb, err := p.stripClientCapabilities(msg, body); err != nil {
		x.outcome = OutcomeInvalid
		return Verdict{Local: local(400, mcp.ErrorResponse(idOrNull(msg.ID), &mcp.Error{Code: mcp.CodeInvalidParams, Message: "The client capabilities cannot be read."}))}
	} else if nb != nil {
		body, changed = nb, true
	}
	if msg.Kind == mcp.KindResponse {
		// A client's answer to a server request (older revisions) decides
		// nothing; it is relayed to the upstream that asked.
		x.outcome = OutcomeAllow
		return p.forwardVerdict(x, body, changed)
	}
	x.mark(SpanPolicy)
	if p.opts.Writes != nil && msg.Method == "tools/call" && isGatewayTool(msg.Name) {
		// mcpgate's own tools; a confirm_action that may run becomes the
		// original call, judged below with the current principal.
		if l := p.gatewayTool(ctx, x, &body); l != nil {
			return Verdict{Local: l}
		}
		msg, changed = x.msg, true
	} else if p.opts.Writes != nil && msg.Method == "tools/call" {
		// A retry carrying a requestState mcpgate sealed (an approval
		// asked through input_required): checked before anything else;
		// the approved call goes on with the upstream's own state.
		if l := p.elicitRetry(ctx, x, &body); l != nil {
			return Verdict{Local: l}
		}
		if x.elicit != nil {
			msg, changed = x.msg, true
		}
	}
	if p.opts.Catalog != nil && (msg.Method == "tools/call" || msg.Method == "tools/list") {
		// One look at the catalog per request: the entry (or the list)
		// found here is the one the policy and the answer use
		// (catalogTool, listAnswer).
		var loaded bool
		if msg.Method == "tools/call" {
			loaded = x.lookupTool(msg.Name)
		} else {
			x.cat.tools, loaded = p.opts.Catalog.Tools(r.Upstream)
		}
		if !loaded {
			x.outcome = OutcomeError
			return Verdict{Local: catalogUnavailable(msg)}
		}
	}
	d := p.decide(ctx, x, policy.PhaseRequest, nil)
	x.decision = d
	if !d.Allow {
		p.audit(ctx, x, d)
	}
	if !d.Allow {
		if x.outcome == "" {
			x.outcome = OutcomeDeny
		}
		p.logRefusal(ctx, x, d)
		if l := p.scopeChallenge(x, d); l != nil {
			return Verdict{Local: l}
		}
		switch {
		case msg.Kind == mcp.KindNotification:
			return Verdict{Local: local(403, nil)}
		case msg.Method == "tools/call":
			return Verdict{Local: local(200, refusal.ToolError(msg.ID, p.loopRefused(x, d.Reasons), d.ID))}
		default:
			return Verdict{Local: local(200, refusal.RPCError(msg.ID, d.Reasons, d.ID))}
		}
	}
	x.outcome = OutcomeAllow
	if l := p.taskRequest(ctx, x); l != nil {
		return Verdict{Local: l}
	}
	switch {
	case msg.Method == "tools/list" && p.opts.Catalog != nil:
		return Verdict{Local: p.listAnswer(ctx, x)}
	case msg.Method == "tools/call":
		var extra mcp.Header
		if p.opts.Catalog != nil {
			herr, set := x.checkParamHeaders()
			if herr != nil {
				x.outcome = OutcomeInvalid
				return Verdict{Local: local(herr.Status, mcp.ErrorResponse(msg.ID, herr))}
			}
			extra = set
			if x.coerced != nil {
				nb, err := replaceArguments(body, x.coerced)
				if err != nil {
					x.outcome = OutcomeError
					p.log.LogAttrs(ctx, slog.LevelError, "coerced arguments cannot be put back into the request", slog.Any("error", err))
					return Verdict{Local: local(500, mcp.ErrorResponse(msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: "The gateway could not rewrite the arguments."}))}
				}
				body, changed = nb, true
			}
		}
		shaper, serr := p.resultShaper(r.Upstream, msg.Name, d)
		if serr != nil {
			x.outcome = OutcomeError
			p.log.LogAttrs(ctx, slog.LevelError, "the policy's result paths cannot be compiled; call refused",
				slog.String("decision_id", d.ID), slog.String("tool", msg.Name), slog.Any("error", serr))
			return Verdict{Local: local(200, shapeRefusal(msg.ID, d.ID))}
		}
		x.shaper = shaper
		x.shapeResult = x.shaper != nil || len(x.warnings) > 0 || x.checksResultURIs() || x.task.inspect
		// With the contracts on, a tool's stream is read even when its
		// result needs no shaping: its progress and log notifications
		// carry text too.
		x.shapeNotes = p.opts.Catalog != nil
		if x.confirming != nil {
			extra = x.paramHeaders()
		}
		x.mark(SpanLimits)
		if l := p.limitsGate(ctx, x, d); l != nil {
			return Verdict{Local: l}
		}
		x.mark(SpanWriteSafety)
		if l := p.writeSafety(ctx, x, d); l != nil {
			return Verdict{Local: l}
		}
		if p.opts.Limits != nil && p.opts.Limits.LoopBrake > 0 {
			x.shapeResult = true // its outcome feeds the loop brake
		}
		v := p.forwardVerdict(x, body, changed)
		for k, vals := range extra {
			if v.SetHeader != nil {
				v.SetHeader[k] = vals
			}
		}
		v.Deadline = x.deadline
		if v.Local != nil {
			x.release()
		} else if x.write != nil {
			v.Detach = true // audited with its outcome when the answer arrives
		} else {
			p.audit(ctx, x, d) // allowed and forwarded
		}
		return v
	}
	x.listKind = listKinds[msg.Method]
	x.shapeResult = p.opts.Catalog != nil && textResults[msg.Method] || x.task.inspect
	x.watchTools = msg.Method == "subscriptions/listen" && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
	if !x.shapeResult && x.checksResultURIs() && (msg.Method == "resources/read" || msg.Method == "prompts/get") {
		x.shapeResult = true // resource links of other tenants are removed
	}
	return p.forwardVerdict(x, body, changed)
}
