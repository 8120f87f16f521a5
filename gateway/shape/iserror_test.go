package shape

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// outputIsError reads the relayed result the slow way: a top-level member
// named isError (after unescaping) whose value is the literal true.
func outputIsError(t testing.TB, out []byte) bool {
	t.Helper()
	dec := jsontext.NewDecoder(bytes.NewReader(out))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		t.Fatalf("not an object: %q", out)
	}
	found := false
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			t.Fatal(err)
		}
		n := name.String()
		v, err := dec.ReadValue()
		if err != nil {
			t.Fatal(err)
		}
		if n == "isError" && string(v) == "true" {
			found = true
		}
	}
	return found
}

// ToolResultError's isError is what the relayed result says (and
// AppendToolResultError writes the same result after a head): the shaped
// output, or the input when nothing changes — for escaped names, secret
// names that drop the member, a nested isError, a non-literal value, a
// result replaced for its size and input repaired by the lenient pass.
func TestToolResultErrorMatchesOutput(t *testing.T) {
	plain := mustCompile(t, Rules{})
	secret := mustCompile(t, Rules{SecretNames: []string{"*error*"}})
	allow := mustCompile(t, Rules{ResultFields: []string{"a"}, SecretNames: []string{"password"}})
	small := mustCompile(t, Rules{MaxResultBytes: 60})
	results := []string{
		`{"content":[],"isError":true}`,
		`{"content":[],"isError":false}`,
		`{"content":[]}`,
		`{"is\u0045rror":true,"content":[]}`,
		`{"isError":"true"}`,
		`{"isError": true , "structuredContent":{"a":1,"b":2}}`,
		`{"structuredContent":{"isError":true,"a":1}}`,
		`{"content":[{"type":"text","text":"{\"isError\":true}"}]}`,
		"{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}],\"isError\":true}",
		`{"content":[{"type":"text","text":"` + string(bytes.Repeat([]byte("x"), 100)) + `"}],"isError":false}`,
		`{"password":1,"isError":true}`,
	}
	sawTrue, sawFalse := false, false
	for _, s := range []*Shaper{nil, plain, secret, allow, small} {
		for _, r := range results {
			out, isError, err := s.ToolResultError([]byte(r))
			if err != nil {
				t.Fatalf("%q: %v", r, err)
			}
			want, werr := s.ToolResult([]byte(r))
			if werr != nil || !bytes.Equal(out, want) {
				t.Fatalf("%q: ToolResultError returned %q, ToolResult %q (%v)", r, out, want, werr)
			}
			// AppendToolResultError writes the same result after a head,
			// with room for the tail, and leaves the head as it was.
			head := []byte(`{"id":1,"result":`)
			framed, framedErr, err := s.AppendToolResultError(head[:len(head):len(head)], []byte(r), 1)
			switch {
			case err != nil || framedErr != isError:
				t.Fatalf("%q: AppendToolResultError isError %v err %v; ToolResultError isError %v", r, framedErr, err, isError)
			case out == nil && framed != nil:
				t.Fatalf("%q: nothing changes, but AppendToolResultError returned %q", r, framed)
			case out != nil && (!bytes.Equal(framed, append(append([]byte{}, head...), out...)) || cap(framed)-len(framed) < 1):
				t.Fatalf("%q: AppendToolResultError returned %q (cap %d), want the head then %q and room for 1", r, framed, cap(framed), out)
			case string(head) != `{"id":1,"result":`:
				t.Fatalf("head changed: %q", head)
			}
			relayed := out
			if relayed == nil {
				relayed = []byte(r)
			}
			if got := outputIsError(t, relayed); got != isError {
				t.Errorf("%q → %q: isError %v, the output says %v", r, relayed, isError, got)
			}
			sawTrue, sawFalse = sawTrue || isError, sawFalse || !isError
		}
	}
	if !sawTrue || !sawFalse {
		t.Fatalf("cases cover isError true %v and false %v", sawTrue, sawFalse)
	}
}
