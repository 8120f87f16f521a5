package gateway

import (
	"bytes"
	"strings"
	"sync"
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
// nil when there are none. It reads names only and skips values.
func tenantArguments(args jsontext.Value, names map[string]bool) []string {
	if len(args) == 0 || args[0] != '{' {
		return nil
	}
	d := decoders.Get().(*pooledDecoder)
	defer decoders.Put(d)
	d.r.Reset(args)
	d.dec.Reset(&d.r)
	dec := d.dec
	if _, err := dec.ReadToken(); err != nil {
		return nil
	}
	var found []string
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return found
		}
		if k := tok.String(); names[foldName(k)] {
			found = append(found, k)
		}
		if err := dec.SkipValue(); err != nil {
			return found
		}
	}
	return found
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

// pooledDecoder is a reusable decoder over a byte slice: the name scan runs
// on every tools/call.
type pooledDecoder struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

var decoders = sync.Pool{New: func() any {
	d := &pooledDecoder{}
	d.dec = jsontext.NewDecoder(&d.r)
	return d
}}
