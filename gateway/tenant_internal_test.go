package gateway

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// tenantArgumentsDecoded is tenantArguments read with a JSON decoder:
// the reference the byte scan is held to.
func tenantArgumentsDecoded(args []byte, names map[string]bool) []string {
	if len(args) == 0 || args[0] != '{' {
		return nil
	}
	dec := jsontext.NewDecoder(bytes.NewReader(args))
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

// TestTenantArgumentsMatchDecoder holds the byte scan of top-level names
// to a JSON decoder's reading, on strict JSON objects whose names are
// escaped, case-folded (ſ, the Kelvin sign), nested or quoted in values.
func TestTenantArgumentsMatchDecoder(t *testing.T) {
	names := map[string]bool{}
	for _, n := range append(DefaultTenantArguments, "Project") {
		names[foldName(n)] = true
	}
	keys := []string{`"tenant"`, `"Tenant_ID"`, `"\u0074enant"`, `"workſpace_id"`, `"wor\u212Aspace_id"`, `"org_id"`, `"query"`,
		`"project"`, `"\"tenant"`, `"tenant\\"`, `"a:b"`, `"é"`, `"ORG_ID"`, `"tenant "`, `""`}
	values := []string{`1`, `"tenant"`, `"\"tenant\":1"`, `{"tenant":1}`, `[{"org_id":"x"},"]"]`, `null`, `-1.5e3`, `"}"`, `"{"`, `[]`, `{}`}
	cases := []string{`{}`, `{"tenant":1}`, ` {"a":{"tenant":1},"org_id" : 2}`, `{"x":"tenant","y":["tenant"]}`}
	r := rand.New(rand.NewPCG(3, 5))
	for range 3000 {
		var b bytes.Buffer
		b.WriteByte('{')
		used := map[string]bool{}
		for i := range r.IntN(5) {
			k := keys[r.IntN(len(keys))]
			if used[k] {
				continue
			}
			used[k] = true
			if i > 0 && b.Len() > 1 {
				b.WriteString([]string{",", " , ", ",\n"}[r.IntN(3)])
			}
			fmt.Fprintf(&b, "%s%s%s", k, []string{":", " : ", ":\t"}[r.IntN(3)], values[r.IntN(len(values))])
		}
		b.WriteByte('}')
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		if !jsontext.Value(c).IsValid() {
			continue // duplicate names after unescaping: the parse refuses them
		}
		got, want := tenantArguments([]byte(c), names), tenantArgumentsDecoded([]byte(c), names)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %q, decoder %q", c, got, want)
		}
	}
}

func BenchmarkTenantArguments(b *testing.B) {
	names := map[string]bool{}
	for _, n := range DefaultTenantArguments {
		names[n] = true
	}
	args := []byte(`{"query":"acme","limit":25,"min_score":0.75,"tags":["vip","emea"],"filters":{"active":true,"owner":null}}`)
	b.ReportAllocs()
	for b.Loop() {
		if tenantArguments(args, names) != nil {
			b.Fatal("found a tenant argument")
		}
	}
}
