package gateway

import (
	"bytes"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// DefaultTenantArguments are argument names that would let the model
// choose a tenant (seed 002, tenant binding); Options.TenantArguments adds
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
		if k := tok.String(); names[strings.ToLower(k)] {
			found = append(found, k)
		}
		if err := dec.SkipValue(); err != nil {
			return found
		}
	}
	return found
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
