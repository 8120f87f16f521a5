package gateway

import (
	"context"
	"log/slog"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// credentialHeaders are removed from every forwarded request when
// authentication is on: the upstream never sees the client's token or
// cookies.
var credentialHeaders = []string{"authorization", "cookie"}

// identityEncoding is the accept-encoding every forwarded request gets.
// Shared by every verdict: its capacity is its length, so an adapter that
// adds a value copies it; nothing writes into it.
var identityEncoding = []string{"identity"}[:1:1]

// forwardVerdict lets the request go upstream. The upstream is asked for an
// identity-encoded response so the pipeline never inspects compressed bytes.
func (p *Pipeline) forwardVerdict(x *Exchange, body []byte, changed bool) Verdict {
	x.mark(SpanForward)
	v := Verdict{SetHeader: x.forwardHeader(), Upstream: x.member}
	v.SetHeader["accept-encoding"] = identityEncoding
	// The upstream sees the standard headers in their plain form: a
	// base64-encoded Mcp-Name that matched the body is re-derived from it.
	if m := x.msg; m != nil && m.Target() != "" {
		if h := x.req.Header.Get(mcp.HeaderName); h != "" {
			if enc := mcp.EncodeHeaderValue(m.Target()); h != enc {
				v.SetHeader.Set(mcp.HeaderName, enc)
			}
		}
	}
	// The fields to remove: the snapshot's own list, shared by every
	// verdict of an unchanged body without aliases (its capacity is its
	// length, so an append copies it; nothing writes into it).
	remove := p.removeFields
	cr := p.creds[x.req.Upstream]
	if cr != nil {
		remove = cr.remove
	}
	v.RemoveHeader = remove
	if changed {
		v.Body, v.BodyChanged = body, true
		v.RemoveHeader = append(append(make([]string, 0, 1+len(remove)), "content-encoding"), remove...)
	}
	if aliases := underscoreAliases(x.req.Header, v.RemoveHeader); len(aliases) > 0 {
		v.RemoveHeader = append(v.RemoveHeader, aliases...)
	}
	if err := p.assert(x, &v); err != nil {
		p.log.LogAttrs(x.ctx, slog.LevelError, "identity assertion cannot be signed; request refused", slog.Any("error", err))
		x.outcome = OutcomeError
		return Verdict{Local: unavailable(x.msg, "The gateway cannot vouch for your identity to the upstream right now.")}
	}
	if cr != nil {
		if l := p.credential(x, cr, &v); l != nil {
			return Verdict{Local: l}
		}
	}
	if l := p.memberSession(x, &v); l != nil {
		return Verdict{Local: l}
	}
	return v
}

// forwardHeader returns an empty map for a forwarded request's fields:
// the one a released exchange kept, once per exchange, else a new one.
func (x *Exchange) forwardHeader() mcp.Header {
	if x.fwdGiven {
		return make(mcp.Header, 4)
	}
	if x.fwdHeader == nil {
		x.fwdHeader = make(mcp.Header, 4)
	}
	x.fwdGiven = true
	return x.fwdHeader
}

// underscoreAliases returns the request fields whose names, with '_' read
// as '-', name a field the gateway removes or that it or its adapter sets
// (setFields): servers that map header names to environment variables
// (CGI, WSGI, some frameworks) read X_Tenant, Mcpgate_Assertion or
// X_Forwarded_For as the real field.
func underscoreAliases(h mcp.Header, removed []string) []string {
	var out []string
	for k := range h {
		if strings.IndexByte(k, '_') < 0 {
			continue
		}
		if a := strings.ReplaceAll(k, "_", "-"); slices.Contains(removed, a) || slices.Contains(setFields, a) {
			out = append(out, k)
		}
	}
	return out
}

// setFields are the fields set on every forwarded request besides the
// assertion: Accept-Encoding (forwardVerdict) and the X-Forwarded-* fields
// the standalone proxy (or Envoy) writes.
var setFields = []string{"accept-encoding", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto"}

// relayUndecided forwards what the policy decides nothing on: an older
// revision's GET stream and DELETE (no message), and a client's answer to
// a server request, relayed to the upstream that asked. A GET stream is
// read for tools/list_changed and task status notifications.
func (p *Pipeline) relayUndecided(_ context.Context, x *Exchange) *Verdict {
	switch {
	case x.msg == nil:
		get := x.req.Method == "GET"
		x.watchTools = get && (p.opts.OnToolsChanged != nil || p.pushesListChanged())
		x.task.watch = get && p.opts.Tasks.Enabled
		x.shapeMessages = get && p.shapesMessages()
	case x.msg.Kind != mcp.KindResponse:
		return nil
	}
	x.outcome = OutcomeAllow
	return x.forwardWith(p.forwardVerdict(x, x.body, x.bodyChanged))
}

// forward is the last stage: the request goes upstream (forwardVerdict).
// A tools/call also gets its Mcp-Param-* fields and its deadline; a write
// is detached from the client (its outcome is recorded when the answer
// arrives), any other allowed call is audited now.
func (p *Pipeline) forward(ctx context.Context, x *Exchange) *Verdict {
	v := x.forwardWith(p.forwardVerdict(x, x.body, x.bodyChanged))
	if x.member != "" && v.Local == nil && x.msg.Kind == mcp.KindRequest {
		p.calls.add(x) // federation.go: a cancellation finds its member
	}
	if x.msg.Method != "tools/call" {
		return v
	}
	for k, vals := range x.setHeader {
		if v.SetHeader != nil {
			v.SetHeader[k] = vals
		}
	}
	v.Deadline = x.deadline
	switch {
	case v.Local != nil:
		x.release()
	case x.write != nil:
		v.Detach = true
	default:
		p.audit(ctx, x, x.decision)
	}
	return v
}
