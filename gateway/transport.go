package gateway

import (
	"context"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// CORS: the request headers an MCP client sends cross-origin, and the
// response headers it must be able to read.
const (
	corsAllowMethods  = "GET, POST, DELETE, OPTIONS"
	corsAllowHeaders  = "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Method, Mcp-Name, Mcp-Protocol-Version, Mcp-Session-Id"
	corsExposeHeaders = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version"
	corsMaxAge        = "600"
)

// preflight answers a CORS preflight (the Origin gate ran before). Requested
// Mcp-Param-* headers are allowed too: they carry tool arguments.
func preflight(h mcp.Header) *Local {
	allow := corsAllowHeaders
	for _, req := range h.Values("access-control-request-headers") {
		for _, name := range strings.Split(req, ",") {
			name = strings.TrimSpace(name)
			if strings.HasPrefix(strings.ToLower(name), mcp.HeaderParamPrefix) && isToken(name) {
				allow += ", " + name
			}
		}
	}
	l := &Local{Status: 204, Header: mcp.Header{
		"access-control-allow-methods": {corsAllowMethods},
		"access-control-allow-headers": {allow},
		"access-control-max-age":       {corsMaxAge},
	}}
	return l
}

// corsResponseHeader returns the header fields added to every answer to an
// allowed cross-origin request.
func corsResponseHeader(origin string) mcp.Header {
	return mcp.Header{
		"access-control-allow-origin":   {origin},
		"access-control-expose-headers": {corsExposeHeaders},
		"vary":                          {"Origin"},
	}
}

// hopByHop are the header fields a Connection header may legitimately
// nominate (RFC 9110 §7.6.1 and the fields proxies treat as hop-by-hop).
var hopByHop = map[string]bool{
	"close": true, "keep-alive": true, "upgrade": true, "te": true, "trailer": true,
	"transfer-encoding": true, "proxy-connection": true, "proxy-authenticate": true,
	"proxy-authorization": true, "http2-settings": true,
}

// Field rules of the header gate (fieldRules).
const (
	// ruleList: a value holding "," is refused too. Intermediaries join
	// repeated fields into one value with "," (RFC 9110 §5.3; Envoy does
	// for its inline headers such as Authorization and Origin, Node.js for
	// most), so a comma in a field whose values never hold one is a second
	// value the upstream may read instead.
	ruleList = 1 << iota
	// ruleBearer: a comma is refused in a Bearer credential (RFC 6750
	// b64token has none); other schemes' parameters may hold commas.
	ruleBearer
	// ruleMCP: a standard MCP header (SEP-2243): refused with -32020.
	ruleMCP
)

// fieldRules are the request fields the gates read, bind or compare on:
// each must arrive as one field with one value, and is never sent under an
// underscore spelling (X_Y), which servers that map header names to
// variables read as X-Y. A second field would be checked by nobody and
// forwarded. Mcp-Name and Mcp-Param-* values may hold commas (resource
// URIs, argument values): for them only a repeated field is refused; a
// joined value fails the comparison with the body.
var fieldRules = [...]struct {
	name, shown string
	rule        int
}{
	{"origin", "Origin", ruleList},
	{"content-type", "Content-Type", 0},
	{"content-encoding", "Content-Encoding", 0},
	{"host", "Host", 0},
	{"authorization", "Authorization", ruleBearer},
	{SessionHeader, "Mcp-Session-Id", ruleList},
	{mcp.HeaderProtocolVersion, "MCP-Protocol-Version", ruleList | ruleMCP},
	{mcp.HeaderMethod, "Mcp-Method", ruleList | ruleMCP},
	{mcp.HeaderName, "Mcp-Name", ruleMCP},
}

// headerFaults is the first transport gate, before anything is parsed:
//   - a Connection header may not nominate an end-to-end field: proxies
//     delete nominated fields, so a client could strip Mcp-Method,
//     MCP-Protocol-Version or Origin after the gateway checked them;
//   - the fields of fieldRules, every Mcp-Param-* and the tenant header
//     (Options.TenantHeader) appear at most once, those marked as single
//     values (and the tenant header) without a comma, none of them under
//     an underscore spelling.
//
// A refusal is 400 with a JSON-RPC error for the body's id, when one can be
// read (gateRefusal), -32020 for the standard MCP headers, else -32600.
//
// The Host allowlist (DNS rebinding) belongs to the listener: the
// standalone proxy checks it (HostAllowed); under Envoy, virtual hosts do.
func (p *Pipeline) headerFaults(r *Request) *Local {
	// fieldRules' names are lower case, as Header keys are: indexed
	// directly, without Values' case folding (TestFieldRulesLowerCase).
	for _, v := range r.Header["connection"] {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.ToLower(strings.TrimSpace(tok))
			if tok != "" && !hopByHop[tok] {
				return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the Connection header may not name the end-to-end header " + quote(tok)})
			}
		}
	}
	for i := range fieldRules {
		f := &fieldRules[i]
		vs := r.Header[f.name]
		if len(vs) == 0 {
			continue
		}
		what := ""
		switch {
		case len(vs) > 1:
			what = "may appear only once"
		case f.rule&ruleList != 0 && strings.IndexByte(vs[0], ',') >= 0,
			f.rule&ruleBearer != 0 && isBearer(vs[0]) && strings.IndexByte(vs[0], ',') >= 0:
			what = "holds more than one value (a comma); send one value in one field"
		default:
			continue
		}
		if f.rule&ruleMCP != 0 {
			return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeHeaderMismatch, Message: "Header mismatch: the " + f.shown + " header " + what})
		}
		return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the " + f.shown + " header " + what})
	}
	if th := p.opts.TenantHeader; th != "" {
		if vs := r.Header.Values(th); len(vs) > 1 || len(vs) == 1 && strings.IndexByte(vs[0], ',') >= 0 {
			return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the " + th + " header must be sent once, with one tenant"})
		}
	}
	for k, vs := range r.Header {
		if strings.HasPrefix(k, mcp.HeaderParamPrefix) && len(vs) > 1 {
			return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeHeaderMismatch, Message: "Header mismatch: the " + quote(k) + " header may appear only once"})
		}
		if strings.IndexByte(k, '_') >= 0 {
			if alias := strings.ReplaceAll(k, "_", "-"); p.boundField(alias) {
				return p.gateRefusal(r, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the header " + quote(k) + " is read as " + quote(alias) + " by some servers; send " + quote(alias) + " only"})
			}
		}
	}
	return nil
}

// boundField reports whether name (lower case) is a field the header gate
// holds to one value: fieldRules, Mcp-Param-* and the tenant header.
func (p *Pipeline) boundField(name string) bool {
	if strings.HasPrefix(name, mcp.HeaderParamPrefix) || name == p.opts.TenantHeader && name != "" {
		return true
	}
	for i := range fieldRules {
		if fieldRules[i].name == name {
			return true
		}
	}
	return false
}

// isBearer reports whether an Authorization value uses the Bearer scheme
// (case-insensitive, RFC 9110 §11.1).
func isBearer(v string) bool {
	v = strings.TrimLeft(v, " \t")
	return len(v) > 6 && strings.EqualFold(v[:6], "bearer") && (v[6] == ' ' || v[6] == '\t')
}

// gateRefusal answers a request the header gate refused, before its body
// was parsed: 400 with the JSON-RPC error e for the id of the request the
// body holds (null when none can be read), no body for a notification.
// It runs only on refusals.
func (p *Pipeline) gateRefusal(r *Request, e *mcp.Error) *Local {
	id := jsonNull
	if len(r.Body) > 0 {
		if body, _, err := decodeBody(r.Header.Get("content-encoding"), r.Body, p.opts.MaxBodyBytes); err == nil {
			if msg, _ := mcp.Parse(body, p.opts.MaxJSONDepth); msg != nil {
				if msg.Kind == mcp.KindNotification {
					return local(400, nil)
				}
				id = idOrNull(msg.ID)
			}
		}
	}
	return local(400, mcp.ErrorResponse(id, e))
}

// Refused is a local JSON-RPC error answer (id null) with the given status,
// for refusals an adapter makes before the pipeline runs.
func Refused(status int, message string) *Local {
	return local(status, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: message}))
}

// NotFound is the answer to a path no route matches (and the pipeline
// does not answer itself), the same from both adapters: 404 with the text
// net/http's NotFound writes.
func NotFound() *Local {
	return &Local{Status: 404, Header: mcp.Header{
		"content-type":           {"text/plain; charset=utf-8"},
		"x-content-type-options": {"nosniff"},
	}, Body: []byte("404 page not found\n")}
}

// HostAllowed reports whether a Host header value names one of hosts
// (lower-case names without port); an empty set allows any.
func HostAllowed(hosts map[string]bool, host string) bool {
	return len(hosts) == 0 || hosts[hostOnly(host)]
}

// hostOnly returns the lower-case host of a Host header value, without the
// port and IPv6 brackets.
func hostOnly(h string) string {
	h = strings.ToLower(strings.TrimSpace(h))
	if strings.HasPrefix(h, "[") {
		if i := strings.IndexByte(h, ']'); i > 0 {
			return h[1:i]
		}
		return h
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		return h[:i]
	}
	return h
}

// isLoopbackOrigin reports whether o (lower case) is an http(s) origin on
// localhost, 127.0.0.1 or [::1], with at most a numeric port and nothing
// else.
func isLoopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return false
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return false
	}
	switch u.Hostname() {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return false
}

// isToken reports whether s is an HTTP field name (RFC 9110 token).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
func (p *Pipeline) originAllowed(origin string) bool {
	o := strings.ToLower(strings.TrimSuffix(origin, "/"))
	if len(p.origins) > 0 {
		return p.origins[o]
	}
	return isLoopbackOrigin(o)
}

// transportGate is the first stage: the header gate (headerFaults) and
// the Origin allowlist.
func (p *Pipeline) transportGate(_ context.Context, x *Exchange) *Verdict {
	r := x.req
	if l := p.headerFaults(r); l != nil {
		return x.answerAs(OutcomeInvalid, l)
	}
	if origin := r.Header.Get("origin"); origin != "" && !p.originAllowed(origin) {
		return x.answerAs(OutcomeInvalid, local(403, mcp.ErrorResponse(nil, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "Origin " + quote(origin) + " is not allowed"})))
	}
	return nil
}

// methodGate answers a CORS preflight (OPTIONS) and refuses HTTP methods
// MCP does not use (405). GET (an older revision's server-to-client
// stream) and DELETE (its session end) carry no JSON-RPC message; the
// upstream applies its own session rules, and revision 2026-07-28
// servers answer 405. A body, or headers naming a message, would reach
// the upstream unchecked: refused. POST goes on to parseMessage.
func (p *Pipeline) methodGate(_ context.Context, x *Exchange) *Verdict {
	r := x.req
	switch r.Method {
	case "POST":
		return nil
	case "OPTIONS":
		return x.answerAs(OutcomeAllow, preflight(r.Header))
	case "GET", "DELETE":
		if len(r.Body) > 0 || r.Header.Has(mcp.HeaderMethod) || r.Header.Has(mcp.HeaderName) {
			return x.answerAs(OutcomeInvalid, local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: r.Method + " carries no JSON-RPC message: no body, Mcp-Method or Mcp-Name"})))
		}
		return nil
	}
	l := local(405, nil)
	l.Header = mcp.Header{"allow": {"GET, POST, DELETE, OPTIONS"}}
	return x.answerAs(OutcomeInvalid, l)
}
