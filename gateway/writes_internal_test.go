package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestWithResultType(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Added, the id kept byte for byte.
		{`{"jsonrpc":"2.0","id":"a\u0062","result":{"content":[]}}`, `{"jsonrpc":"2.0","id":"a\u0062","result":{"content":[],"resultType":"complete"}}`},
		{`{"jsonrpc":"2.0","id":1e0,"result":{}}`, `{"jsonrpc":"2.0","id":1e0,"result":{"resultType":"complete"}}`},
		// Kept: already there, an error, no body, not an object.
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"x"}}`},
		{``, ``},
		{`[1]`, `[1]`},
	} {
		if got := string(withResultType([]byte(c.in))); got != c.want {
			t.Errorf("withResultType(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestWriteDigest(t *testing.T) {
	digest := func(args string) string {
		t.Helper()
		d, _, err := writeDigest([]byte(args))
		if err != nil {
			t.Fatalf("writeDigest(%s): %v", args, err)
		}
		return d
	}
	a := digest(`{"b":1,"a":{"y":2,"x":1}}`)
	if b := digest(` { "a" : {"x":1,"y":2}, "b" : 1 }`); a != b {
		t.Error("member order or whitespace changes the digest")
	}
	c, key, _ := writeDigest([]byte(`{"b":1,"a":{"y":2,"x":1},"idempotency_key":"k\u0031"}`))
	if c != a || key != "k1" {
		t.Errorf("idempotency_key: digest %s (want %s), key %q", c, a, key)
	}
	// Numbers are fingerprinted as written: different literals are
	// different writes, even where IEEE 754 doubles are equal.
	for _, pair := range [][2]string{
		{`{"n":9007199254740993}`, `{"n":9007199254740992}`},
		{`{"n":0.1000000000000000000001}`, `{"n":0.1}`},
		{`{"n":1e400}`, `{"n":1.7976931348623157e308}`},
		{`{"n":100}`, `{"n":1e2}`},
		{`{"n":1E2}`, `{"n":1e2}`},
		{`{"n":100.0}`, `{"n":100}`},
		{`{"n":-0}`, `{"n":0}`},
	} {
		if digest(pair[0]) == digest(pair[1]) {
			t.Errorf("%s and %s share a fingerprint", pair[0], pair[1])
		}
	}
	// Arguments whose numbers RFC 8785 would not rewrite keep the digest
	// they had under RFC 8785 (a replay window survives an upgrade).
	for _, args := range []string{`{"b":1,"a":{"y":2,"x":-3},"s":"\u00e9\n","l":[true,null,0.5]}`, `{}`} {
		v := jsontext.Value(`{"arguments":` + args + `}`)
		if err := v.Canonicalize(); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(v)
		if got := digest(args); got != hex.EncodeToString(sum[:]) {
			t.Errorf("digest of %s changed from the RFC 8785 one", args)
		}
	}
}

func TestIsIncomplete(t *testing.T) {
	for in, want := range map[string]bool{
		`{"resultType":"input_required","inputRequests":{}}`: true,
		`{"requestState":"x"}`:                               true,
		`{"resultType":"complete","content":[]}`:             false,
		`{"content":[]}`:                                     false,
	} {
		if got := isIncomplete([]byte(in)); got != want {
			t.Errorf("isIncomplete(%s) = %v", in, got)
		}
	}
}
