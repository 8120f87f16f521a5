package gateway

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// canonicalOptions give the exact canonical form of a JSON value: no
// insignificant whitespace, object members sorted by the UTF-16 code units
// of their names and strings in the form of RFC 8785 (sections 3.2.3 and
// 3.2.2.2), and every number copied exactly as its literal, checked
// against the JSON number grammar (RFC 8259 section 6). RFC 8785 itself
// (jsontext.Value.Canonicalize) writes numbers through IEEE 754 double
// precision, so 9007199254740993 and 9007199254740992, or 0.1 and
// 0.1000000000000000000001, would read the same.
var canonicalOptions = []jsontext.Options{
	jsontext.ReorderRawObjects(true),
	jsontext.CanonicalizeRawInts(false),
	jsontext.CanonicalizeRawFloats(false),
}

// canonical returns the exact canonical form of a JSON value
// (canonicalOptions): the form in which mcpgate shows arguments to a person
// (confirm_summary) and fingerprints them (writeDigest). Numbers that are
// equal but written differently — 100, 1e2, 1E2, 100.0; -0 and 0 — stay
// different arguments, as they are to an upstream that reads 100 as an
// integer and 100.0 as a float; the summary, the fingerprint and the bytes
// forwarded upstream carry the same literal. Duplicate member names and
// invalid UTF-8 are errors.
func canonical(v []byte) ([]byte, error) {
	c := jsontext.Value(bytes.Clone(v))
	if err := c.Format(canonicalOptions...); err != nil {
		return nil, err
	}
	return c, nil
}
