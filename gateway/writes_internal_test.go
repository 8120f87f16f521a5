package gateway

import "testing"

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
	a, _, err := writeDigest(nil, []byte(`{"b":1,"a":{"y":2,"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _, _ := writeDigest(nil, []byte(`{ "a" : {"x":1,"y":2}, "b" : 1.0 }`))
	if a != b {
		t.Error("member order or number spelling changes the digest")
	}
	c, key, _ := writeDigest(nil, []byte(`{"b":1,"a":{"y":2,"x":1},"idempotency_key":"k\u0031"}`))
	if c != a || key != "k1" {
		t.Errorf("idempotency_key: digest %s (want %s), key %q", c, a, key)
	}
	d, _, _ := writeDigest([]byte(`{"requestState":"s1"}`), []byte(`{"b":1,"a":{"y":2,"x":1}}`))
	e, _, _ := writeDigest([]byte(`{"requestState":"s2"}`), []byte(`{"b":1,"a":{"y":2,"x":1}}`))
	if d == a || d == e {
		t.Error("a multi-round retry's requestState is not part of the fingerprint")
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
