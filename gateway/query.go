package gateway

import (
	"context"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

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

// queryGate refuses a query parameter that would choose a tenant: the
// tenant comes from the credential, not from the URL.
func (p *Pipeline) queryGate(_ context.Context, x *Exchange) *Verdict {
	name := tenantQueryName(x.req.RawQuery, p.tenantArgs)
	if name == "" {
		return nil
	}
	return x.answerAs(OutcomeInvalid, p.gateRefusal(x.req, &mcp.Error{Code: mcp.CodeInvalidRequest,
		Message: "The query parameter " + quote(name) + " would choose a tenant; the tenant comes from your credential. Remove it from the URL."}))
}
