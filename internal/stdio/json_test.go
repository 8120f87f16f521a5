package stdio

import "testing"

func TestWithResultType(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{ }}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete" }}`},
		{`{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}`},
		{`{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{},"requestState":"s"}}`, `{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{},"requestState":"s"}}`},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`, `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`},
	} {
		if got := string(withResultType([]byte(tc.in))); got != tc.want {
			t.Errorf("withResultType(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestFindAndReplaceKeepBytes(t *testing.T) {
	msg := []byte(`{ "jsonrpc" : "2.0", "params": {"_meta": {"progressToken" :  "t\u0031" }}, "id" :  1e0 }`)
	s, ok := find(msg, "id")
	if !ok || string(msg[s.start:s.end]) != `1e0` {
		t.Fatalf("id span %v %q", ok, msg[s.start:s.end])
	}
	s, ok = find(msg, "params", "_meta", "progressToken")
	if !ok || string(msg[s.start:s.end]) != `"t\u0031"` {
		t.Fatalf("token span %v %q", ok, msg[s.start:s.end])
	}
	if got := string(replace(msg, s, []byte(`"x"`))); got != `{ "jsonrpc" : "2.0", "params": {"_meta": {"progressToken" :  "x" }}, "id" :  1e0 }` {
		t.Fatalf("replace: %s", got)
	}
	if _, ok := find(msg, "params", "missing"); ok {
		t.Fatal("found a missing member")
	}
	if got := statelessStatus([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}`)); got != 400 {
		t.Errorf("status %d", got)
	}
}
