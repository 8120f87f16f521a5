package gateway

import (
	"errors"
	"mime"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// decodeBody undoes a request's Content-Encoding (decodeContent) so the
// pipeline never inspects compressed bytes as JSON: identity passes, gzip
// and deflate (stacked too) are decoded within the body limit (413 above
// it), corrupt data is 400 and any other coding 415.
func decodeBody(encoding string, body []byte, limit int64) ([]byte, bool, *mcp.Error) {
	if limit > 0 && int64(len(body)) > limit {
		return nil, false, tooLarge(limit)
	}
	codings := contentCodings([]string{encoding})
	if len(codings) == 0 {
		return body, false, nil
	}
	out, err := decodeContent(codings, body, limit)
	var ce *codingError
	switch {
	case err == nil:
		return out, true, nil
	case errors.Is(err, errTooLarge):
		return nil, false, tooLarge(limit)
	case errors.Is(err, errUnsupportedCoding) && errors.As(err, &ce):
		return nil, false, &mcp.Error{Status: 415, Code: mcp.CodeInvalidRequest, Message: "Content-Encoding " + quote(ce.Coding) + " is not supported; send identity, gzip or deflate"}
	case errors.As(err, &ce):
		return nil, false, &mcp.Error{Status: 400, Code: mcp.CodeParseError, Message: "request body is not valid " + strings.ToLower(ce.Coding) + ": " + ce.Err.Error()}
	}
	return nil, false, &mcp.Error{Status: 400, Code: mcp.CodeParseError, Message: "request body cannot be decoded"}
}

// TooLarge is the 413 answer for a body over limit bytes; adapters that
// enforce the limit while reading use it too.
func TooLarge(limit int64) *Local {
	e := tooLarge(limit)
	return local(e.Status, mcp.ErrorResponse(jsonNull, e))
}

func tooLarge(limit int64) *mcp.Error {
	return &mcp.Error{Status: 413, Code: mcp.CodeInvalidRequest, Message: "request body exceeds " + strconv.FormatInt(limit, 10) + " bytes"}
}

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

// singleValued are the request fields the gates read that must appear at
// most once: a second value would be checked by nobody and forwarded.
var singleValued = []string{"origin", "content-type", "content-encoding", "host"}

// headerFaults is the first transport gate, before anything is parsed:
//   - a Connection header may not nominate an end-to-end field: proxies
//     delete nominated fields, so a client could strip Mcp-Method,
//     MCP-Protocol-Version or Origin after the gateway checked them;
//   - Origin, Content-Type, Content-Encoding and Host appear at most once.
//
// The Host allowlist (DNS rebinding) belongs to the listener: the
// standalone proxy checks it (HostAllowed); under Envoy, virtual hosts do.
func (p *Pipeline) headerFaults(r *Request) *Local {
	for _, v := range r.Header.Values("connection") {
		for _, tok := range strings.Split(v, ",") {
			tok = strings.ToLower(strings.TrimSpace(tok))
			if tok != "" && !hopByHop[tok] {
				return local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the Connection header may not name the end-to-end header " + quote(tok)}))
			}
		}
	}
	for _, k := range singleValued {
		if len(r.Header.Values(k)) > 1 {
			return local(400, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: "the " + k + " header may appear only once"}))
		}
	}
	return nil
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

// isJSON reports whether a Content-Type is application/json (parameters
// and case tolerated) in UTF-8, the only encoding JSON-RPC bodies are
// parsed in (RFC 8259 §8.1).
func isJSON(contentType string) bool {
	if plainMediaType(contentType, "application/json") {
		return true // what mime.ParseMediaType makes of it: no charset
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")
}

// plainMediaType reports whether the field value v is the media type mt
// (lower case) alone, in any ASCII case, without parameters or spaces: the
// common form, which mime.ParseMediaType parses to mt and no parameters,
// recognised without its allocations. Anything else is left to
// mime.ParseMediaType.
func plainMediaType(v, mt string) bool {
	if len(v) != len(mt) {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != mt[i] {
			return false
		}
	}
	return true
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
