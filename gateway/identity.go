package gateway

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// AssertionHeader is the request header field (lower case) that carries
// mcpgate's signed identity assertion to the upstream; it equals
// assertion.Header. A client-sent field of that name is always removed
// before forwarding, whether or not an Asserter is configured.
const AssertionHeader = "mcpgate-assertion"

// JWKSPath is where the pipeline serves the public keys of its identity
// assertions (RFC 7517 JWK Set), unauthenticated, when Options.JWKS is set.
const JWKSPath = "/.well-known/jwks.json"

// SessionHeader is the session id field of MCP revisions before
// 2026-07-28 (Streamable HTTP, "Session Management").
const SessionHeader = "mcp-session-id"

// Asserter signs the identity assertion an upstream receives instead of
// the client's credential (ARCHITECTURE.md, "Forward"); the internal/app
// wiring implements it with the assertion package.
type Asserter interface {
	// Assert returns the assertion (a compact JWS) for principal p calling
	// upstream with the self-reported client name client ("" if unknown).
	Assert(p *policy.Principal, upstream, client string) (string, error)
}

// DefaultSessionTTL is how long a session id stays bound to its principal
// when Options.SessionTTL is zero.
const DefaultSessionTTL = 24 * time.Hour

// checkSession enforces the binding of an older revision's session id to
// the principal that created it: a request that carries Mcp-Session-Id
// must come from the same connection, tenant and subject, otherwise it
// gets 404 (the MCP answer to an unknown session) and learns nothing. It
// returns the answer of a refused request, nil to go on.
func (p *Pipeline) checkSession(ctx context.Context, x *Exchange) *Local {
	s := p.opts.Sessions
	id := x.req.Header.Get(SessionHeader)
	if s == nil || id == "" || !x.input.Principal.Authenticated {
		return nil
	}
	b, err := s.Session(ctx, id)
	switch {
	case err == nil && b == bindingOf(&x.input.Principal):
		return nil
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid):
		x.outcome = OutcomeInvalid
		if x.msg != nil && x.msg.Kind == mcp.KindNotification {
			return local(404, nil)
		}
		var id []byte
		if x.msg != nil {
			id = x.msg.ID
		}
		return local(404, mcp.ErrorResponse(idOrNull(id), &mcp.Error{Code: mcp.CodeInvalidRequest,
			Message: "Session not found: start a new session with initialize"}))
	}
	p.log.LogAttrs(ctx, slog.LevelError, "session store unavailable; request refused", slog.Any("error", err))
	x.outcome = OutcomeError
	return unavailable(x.msg, "The gateway cannot check the session right now.")
}

// bindSession binds the session id an upstream assigned in its answer to
// initialize to the caller. A binding that cannot be stored fails the
// exchange (the client would hold a session nobody can check).
func (x *Exchange) bindSession(h mcp.Header) error {
	s := x.p.opts.Sessions
	id := h.Get(SessionHeader)
	if s == nil || id == "" || !x.input.Principal.Authenticated {
		return nil
	}
	ttl := x.p.opts.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if err := s.BindSession(ctx, id, bindingOf(&x.input.Principal), ttl); err != nil {
		x.p.log.LogAttrs(ctx, slog.LevelError, "session binding failed; answer withheld", slog.Any("error", err))
		return ErrUpstreamResponse
	}
	return nil
}

// unbindSession forgets a session the client ended (DELETE answered 2xx or
// 404 by the upstream).
func (x *Exchange) unbindSession(status int) {
	s := x.p.opts.Sessions
	id := x.req.Header.Get(SessionHeader)
	if s == nil || id == "" || x.req.Method != "DELETE" || !(status/100 == 2 || status == 404) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if err := s.UnbindSession(ctx, id); err != nil {
		x.p.log.LogAttrs(ctx, slog.LevelWarn, "session unbinding failed; the binding expires on its own", slog.Any("error", err))
	}
}

func bindingOf(pr *policy.Principal) store.SessionBinding {
	return store.SessionBinding{Connection: pr.Connection, Tenant: pr.Tenant, Subject: pr.Subject}
}

// RetryAfterSeconds is the Retry-After value of 503 answers the gateway
// gives when a dependency (token verification, rights source, state
// store) cannot answer now.
const RetryAfterSeconds = "5"

// unavailable is the 503 answer (with Retry-After) to a message the
// gateway cannot decide on now; fail closed.
func unavailable(msg *mcp.Message, cause string) *Local {
	f := &AuthFailure{Status: 503, Code: "unavailable", Message: cause, Fix: "Retry in a few seconds."}
	return authLocal(f, msg, []policy.Reason{{Code: f.Code, Cause: f.Message, Fix: f.Fix}}, "")
}

// assert adds the signed identity assertion to a forwarded request.
func (p *Pipeline) assert(x *Exchange, v *Verdict) error {
	a := p.opts.Asserter
	if a == nil || !x.input.Principal.Authenticated {
		return nil
	}
	client := ""
	if x.msg != nil {
		if ci := clientInfo(x.msg); ci != nil {
			client = ci.Name
		}
	}
	tok, err := a.Assert(&x.input.Principal, x.req.Upstream, client)
	if err != nil {
		return err
	}
	v.SetHeader.Set(AssertionHeader, tok)
	x.asserted = true
	return nil
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

// tenantQueryName returns the first query parameter of rawQuery (as
// sent) whose name would choose a tenant (isTenantParam), or "": the tenant
// comes from the credential, not from the URL either.
func tenantQueryName(rawQuery string, names map[string]bool) string {
	if rawQuery == "" {
		return ""
	}
	for _, part := range strings.FieldsFunc(rawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(part, "=")
		if isTenantParam(name, names) {
			return name
		}
	}
	return ""
}

// isTenantParam reports whether the query parameter name, read the way
// common server frameworks read names, is one of names (folded with
// foldName). The readings, each tried:
//   - percent-decoded, repeatedly (at most maxUnescape rounds), "+" as a
//     space, malformed escapes left as they are;
//   - cut at the first NUL (C strings), surrounding spaces and control
//     characters trimmed;
//   - the name before "[" or "." (PHP, Rails and qs nest tenant[]=,
//     tenant[id]= and tenant.id= under tenant);
//   - "." and " " read as "_" (PHP: tenant.id= is tenant_id=).
func isTenantParam(name string, names map[string]bool) bool {
	n := name
	for i := 0; i < maxUnescape; i++ {
		u := unescapeQuery(n)
		if u == n {
			break
		}
		n = u
	}
	if i := strings.IndexByte(n, 0); i >= 0 {
		n = n[:i]
	}
	n = strings.TrimFunc(n, func(r rune) bool { return r <= ' ' || r == 0x7f })
	if names[foldName(n)] {
		return true
	}
	if i := strings.IndexAny(n, "[."); i >= 0 && names[foldName(strings.TrimFunc(n[:i], func(r rune) bool { return r <= ' ' }))] {
		return true
	}
	head := n
	if i := strings.IndexByte(head, '['); i >= 0 {
		head = head[:i]
	}
	php := strings.Map(func(r rune) rune {
		if r == '.' || r == ' ' {
			return '_'
		}
		return r
	}, head)
	return php != n && names[foldName(php)]
}

// maxUnescape bounds the rounds of percent-decoding isTenantParam applies
// (a name encoded three times over is still read).
const maxUnescape = 4

// unescapeQuery decodes %XX escapes and "+" of a query component, leaving
// a malformed escape as it is (as PHP and most frameworks do, where
// url.QueryUnescape fails).
func unescapeQuery(s string) string {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// refusedAssertion reports an upstream that answered 401 to a request
// carrying mcpgate's assertion: the upstream does not accept the
// gateway's identity (keys, issuer or audience differ), which the client
// cannot fix. The exchange fails as an upstream failure (502), logged for
// the operator.
func (x *Exchange) refusedAssertion(status int) error {
	if status != 401 || !x.asserted {
		return nil
	}
	x.p.log.LogAttrs(x.ctx, slog.LevelError, "upstream refused mcpgate's identity assertion; check assertion.keys_file, assertion.issuer and upstreams[].audience against the upstream's verifier",
		slog.String("upstream", x.req.Upstream))
	return ErrUpstreamResponse
}

// Audit outcomes of tools/call records.
const (
	AuditAllowed = "allowed" // forwarded to the upstream
	AuditDenied  = "denied"  // refused by the policy
)

// audit records a tools/call decision (ARCHITECTURE.md, step 12): every
// call of a tool that is not read-only, and every refusal. The record
// names the tool, the connection, the client and the decision id; never
// arguments.
func (p *Pipeline) audit(ctx context.Context, x *Exchange, d *policy.Decision) {
	if p.opts.Audit == nil || x.msg.Method != "tools/call" {
		return
	}
	outcome := AuditAllowed
	if !d.Allow {
		outcome = AuditDenied
	} else if d.Effect == policy.EffectRead {
		return
	}
	pr := &x.input.Principal
	r := store.AuditRecord{
		Channel: store.ChannelMCP, Tenant: pr.Tenant, Connection: pr.Connection, Subject: pr.Subject,
		Action: x.msg.Name, Outcome: outcome, DecisionID: d.ID,
		PublicIDs: map[string]string{"upstream": x.req.Upstream},
	}
	if c := x.input.Message.Client; c != nil {
		r.Client = c.Name
	}
	if d.Effect != "" {
		r.PublicIDs["effect"] = d.Effect
	}
	if !d.Allow && len(d.Reasons) > 0 {
		r.PublicIDs["reason"] = d.Reasons[0].Code
	}
	p.opts.Audit(ctx, r)
}
