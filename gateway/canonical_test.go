package gateway

import (
	"bytes"
	"slices"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestCanonical(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Integers at and beyond 2^53 keep every digit.
		{`{"n":9007199254740992}`, `{"n":9007199254740992}`},
		{`{"n":9007199254740993}`, `{"n":9007199254740993}`},
		{`{"n":-123456789012345678901234567890}`, `{"n":-123456789012345678901234567890}`},
		// Negative zero, long fractions, exponents: the literal.
		{`{"n":-0}`, `{"n":-0}`},
		{`{"n":-0.0}`, `{"n":-0.0}`},
		{`{"n":0.1000000000000000000001}`, `{"n":0.1000000000000000000001}`},
		{`{"n":1e400}`, `{"n":1e400}`},
		{`{"n":1E2}`, `{"n":1E2}`},
		{`{"n":1e-400}`, `{"n":1e-400}`},
		{`{"n":100.0}`, `{"n":100.0}`},
		{`[100, 1e2, 1E+2, 100.0, 1.0e2]`, `[100,1e2,1E+2,100.0,1.0e2]`},
		// Members sorted by UTF-16 code units (RFC 8785 3.2.3): U+1F600
		// (surrogates D83D DE00) sorts before U+FB33, "\r" before "1".
		{`{"\ufb33":1,"😀":2,"1":3,"\r":4,"":5}`, `{"":5,"\r":4,"1":3,"😀":2,"דּ":1}`},
		// Whitespace and nested order do not matter.
		{" {\n \"b\" : [ {\"z\":1, \"y\":2} ],\t\"a\":null } ", `{"a":null,"b":[{"y":2,"z":1}]}`},
		// Strings in RFC 8785 form: only what must be escaped is.
		{`"\u0041\/\u00e9\u001f\u2028"`, "\"A/é\\u001f\u2028\""},
		{`"<&>"`, `"<&>"`},
	} {
		got, err := canonical([]byte(c.in))
		if err != nil {
			t.Errorf("canonical(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("canonical(%s) = %s, want %s", c.in, got, c.want)
		}
	}
	for _, in := range []string{
		`{"a":1,"a":2}`, // duplicate names
		`{"n":01}`, `{"n":+1}`, `{"n":.5}`, `{"n":1.}`, `{"n":1e}`, `{"n":NaN}`, `{"n":Infinity}`,
		"\"\xff\"", `"\ud800"`, `{"a":1`, `{"a":1}{}`, ``,
	} {
		if got, err := canonical([]byte(in)); err == nil {
			t.Errorf("canonical(%q) = %s, want an error", in, got)
		}
	}
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{"n":9007199254740993,"m":-0,"f":0.1000000000000000000001,"e":[1e400,1E2,100.0]}`,
		`{"b":{"y":[1,{"q":2,"p":3}],"x":"\u00e9"},"a":""}`,
		`{"\ufb33":1,"😀":2,"\r":"\u001f"}`,
		`[]`, `"x"`, `-1.5e-7`, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := canonical(in)
		if err != nil {
			return
		}
		if !jsontext.Value(out).IsValid() {
			t.Fatalf("canonical(%q) = %q: not valid JSON", in, out)
		}
		again, err := canonical(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent: %q → %q → %q (%v)", in, out, again, err)
		}
		// Whitespace and member order do not change the form.
		for _, variant := range [][]byte{reverseMembers(t, in, true), reverseMembers(t, in, false)} {
			if v, err := canonical(variant); err != nil || !bytes.Equal(v, out) {
				t.Fatalf("depends on layout: %q → %q, %q → %q (%v)", in, out, variant, v, err)
			}
		}
		// Every number literal is kept as written.
		if a, b := numberLiterals(t, in), numberLiterals(t, out); !slices.Equal(a, b) {
			t.Fatalf("number literals changed: %q → %q", a, b)
		}
		// Apart from numbers it is RFC 8785.
		rin, rout := jsontext.Value(bytes.Clone(in)), jsontext.Value(bytes.Clone(out))
		if rin.Canonicalize() != nil || rout.Canonicalize() != nil || !bytes.Equal(rin, rout) {
			t.Fatalf("differs from RFC 8785 beyond numbers: %q → %q", in, out)
		}
	})
}

// reverseMembers re-encodes v with every object's members in reverse
// order, indented when indent is set.
func reverseMembers(t *testing.T, v []byte, indent bool) []byte {
	t.Helper()
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	val, err := dec.ReadValue()
	if err != nil {
		t.Fatalf("valid input does not decode: %v", err)
	}
	var b bytes.Buffer
	var opts []jsontext.Options
	if indent {
		opts = append(opts, jsontext.WithIndent("\t"))
	}
	enc := jsontext.NewEncoder(&b, opts...)
	var rev func(v jsontext.Value)
	rev = func(v jsontext.Value) {
		switch v.Kind() {
		case '{':
			type m struct{ name, val jsontext.Value }
			var ms []m
			d := jsontext.NewDecoder(bytes.NewReader(v))
			_, _ = d.ReadToken()
			for d.PeekKind() != '}' {
				n, _ := d.ReadValue()
				n = bytes.Clone(n)
				x, _ := d.ReadValue()
				ms = append(ms, m{n, bytes.Clone(x)})
			}
			_ = enc.WriteToken(jsontext.BeginObject)
			for i := len(ms) - 1; i >= 0; i-- {
				_ = enc.WriteValue(ms[i].name)
				rev(ms[i].val)
			}
			_ = enc.WriteToken(jsontext.EndObject)
		case '[':
			d := jsontext.NewDecoder(bytes.NewReader(v))
			_, _ = d.ReadToken()
			_ = enc.WriteToken(jsontext.BeginArray)
			for d.PeekKind() != ']' {
				x, _ := d.ReadValue()
				rev(bytes.Clone(x))
			}
			_ = enc.WriteToken(jsontext.EndArray)
		default:
			if err := enc.WriteValue(v); err != nil {
				t.Fatalf("re-encoding %q: %v", v, err)
			}
		}
	}
	rev(val)
	return b.Bytes()
}

// numberLiterals are the number literals of v, sorted.
func numberLiterals(t *testing.T, v []byte) []string {
	t.Helper()
	var out []string
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	for {
		if dec.PeekKind() == '0' {
			n, err := dec.ReadValue()
			if err != nil {
				t.Fatalf("reading a number of %q: %v", v, err)
			}
			out = append(out, string(n))
			continue
		}
		if _, err := dec.ReadToken(); err != nil {
			break
		}
	}
	slices.Sort(out)
	return out
}
