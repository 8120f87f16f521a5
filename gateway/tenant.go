package gateway

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultTenantArguments are argument names that would let the model
// choose a tenant (the tenant comes from the credential);
// Options.TenantArguments adds
// to them.
var DefaultTenantArguments = []string{"tenant", "tenant_id", "workspace_id", "org_id"}

// tenantArguments returns the top-level names in args (a JSON object,
// already checked as strict JSON) that equal one of names ignoring case;
// nil when there are none. It reads names only and skips values: the
// bytes are strict JSON, so outside strings a '{' or '[' opens and a '}'
// or ']' closes a level, and at the first level a string before ':' is a
// member name.
func tenantArguments(args jsontext.Value, names map[string]bool) []string {
	if len(args) == 0 || args[0] != '{' {
		return nil
	}
	var found []string
	var buf [32]byte
	depth := 0
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			start := i
			escaped := false
			for i++; i < len(args) && args[i] != '"'; i++ {
				if args[i] == '\\' {
					escaped = true
					i++
				}
			}
			if i >= len(args) {
				return found // not strict JSON: the parse refused it already
			}
			if depth != 1 || !isMemberName(args[i+1:]) {
				continue
			}
			quoted := args[start : i+1]
			name := quoted[1 : len(quoted)-1]
			if escaped {
				var err error
				if name, err = jsontext.AppendUnquote(nil, quoted); err != nil {
					continue // not strict JSON: the parse refused it already
				}
			}
			var hit bool
			if folded, ascii := lowerASCII(buf[:0], name); ascii {
				hit = names[string(folded)]
			} else {
				hit = names[foldName(string(name))]
			}
			if hit {
				found = append(found, string(name))
			}
		}
	}
	return found
}

// isMemberName reports whether rest, what follows a string, starts (after
// whitespace) with ':'.
func isMemberName(rest []byte) bool {
	for _, c := range rest {
		switch c {
		case ' ', '\t', '\r', '\n':
		case ':':
			return true
		default:
			return false
		}
	}
	return false
}

// lowerASCII appends name lower-cased to dst, which is foldName's key
// for an ASCII name; false (and dst unfinished) when name is not ASCII.
func lowerASCII(dst, name []byte) ([]byte, bool) {
	for _, c := range name {
		if c >= utf8.RuneSelf {
			return dst, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst, true
}

// foldName is the key under which argument names are compared: equal for
// two names exactly when they are equal under Unicode simple case folding
// (strings.EqualFold), so that "workſpace_id" (U+017F, which Go's
// encoding/json matches to workspace_id) and "wor\u212Aspace_id" (the
// Kelvin sign) are caught like "Workspace_ID". ASCII names, the usual case,
// are only lower-cased.
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	var b strings.Builder
	for _, r := range s {
		// The smallest rune of r's folding orbit stands for all of it.
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(unicode.ToLower(m))
	}
	return b.String()
}
