package mcp

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

var fuzzSeeds = []string{
	toolsCall2026,
	callModern, readModern, promptModern, listModern, listNoMeta, callNoMeta,
	subscribeNoMeta, cancelNotif, response, initialize, initialize2026, listMeta0618, listMetaBad,
	`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
	`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
	`{"a":1,"\u0061":2}`,
	`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	`[]`, `{}`, `""`, ` `, ``,
	"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"ping\"}",
	`{"jsonrpc":"2.0","id":-0,"method":"tools/call","params":{"name":"a\u0000b","arguments":{"x":[[[[]]]]}}}`,
	`{"jsonrpc":"2.0","id":1e3,"method":"resources/read","params":{"uri":"file:///x"}}`,
}

// jsonDepth is an independent nesting-depth count for a valid JSON text.
func jsonDepth(b []byte) int {
	d := jsontext.NewDecoder(strings.NewReader(string(b)))
	deepest := 0
	for {
		if _, err := d.ReadToken(); err != nil {
			return deepest
		}
		deepest = max(deepest, d.StackDepth())
	}
}

// FuzzParse checks that Parse never panics, agrees with jsontext on what is
// valid JSON, respects the depth limit, is deterministic, and that what it
// returns is well formed.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), 8)
	}
	f.Fuzz(func(t *testing.T, body []byte, maxDepth int) {
		maxDepth = maxDepth%20 + 1
		if maxDepth < 1 {
			maxDepth += 20
		}
		orig := string(body)
		m, e := Parse(body, maxDepth)
		if string(body) != orig {
			t.Fatal("Parse modified its input")
		}

		valid := jsontext.Value(body).IsValid()
		tooDeep := valid && jsonDepth(body) > maxDepth
		switch {
		case !valid || tooDeep:
			if e == nil || e.Code != CodeParseError {
				t.Fatalf("valid=%v tooDeep=%v but Parse gave %v", valid, tooDeep, e)
			}
		case e != nil && e.Code == CodeParseError:
			t.Fatalf("valid JSON within depth refused as parse error: %s", e.Message)
		}

		if e != nil {
			if e.Status != 400 {
				t.Fatalf("status %d", e.Status)
			}
			if m != nil && (m.ID == nil || !validID(m.ID)) {
				t.Fatalf("partial message with bad id %q", m.ID)
			}
			if !jsontext.Value(ErrorResponse(idOf(m), e)).IsValid() {
				t.Fatal("ErrorResponse is not valid JSON")
			}
			return
		}

		// Success.
		if m == nil {
			t.Fatal("nil message without error")
		}
		switch m.Kind {
		case KindRequest:
			if !validID(m.ID) || string(m.ID) == "null" {
				t.Fatalf("request id %q", m.ID)
			}
		case KindNotification:
			if m.ID != nil {
				t.Fatalf("notification with id %q", m.ID)
			}
		case KindResponse:
			if !validID(m.ID) || m.Method != "" || (m.Result == nil) == (m.Error == nil) {
				t.Fatalf("bad response %+v", m)
			}
		default:
			t.Fatalf("kind %v", m.Kind)
		}
		for name, raw := range map[string]jsontext.Value{"Params": m.Params, "Arguments": m.Arguments, "Result": m.Result, "Error": m.Error, "ClientCapabilities": m.Meta.ClientCapabilities} {
			if raw == nil {
				continue
			}
			if raw.Kind() != '{' || !raw.IsValid() || !aliases(body, raw) {
				t.Fatalf("%s = %q is not an object inside the body", name, raw)
			}
		}
		if m.ID != nil && !aliases(body, m.ID) {
			t.Fatal("ID not inside the body")
		}
		for _, s := range []string{m.Method, m.Name, m.URI, m.Meta.ProtocolVersion, m.InitializeVersion} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 in %q", s)
			}
		}

		// Stable: parsing again (a copy) gives the same message.
		m2, e2 := Parse([]byte(orig), maxDepth)
		if e2 != nil || !reflect.DeepEqual(m, m2) {
			t.Fatalf("re-parse differs: %+v %v", m2, e2)
		}
		// A response built from the id parses back to the same id.
		r, e3 := Parse(ErrorResponse(m.ID, &Error{Code: -1, Message: "x"}), 3)
		if m.ID != nil && (e3 != nil || string(r.ID) != string(m.ID)) {
			t.Fatalf("id %q does not round-trip: %v", m.ID, e3)
		}
	})
}

func idOf(m *Message) jsontext.Value {
	if m == nil {
		return nil
	}
	return m.ID
}

func validID(id jsontext.Value) bool {
	if !id.IsValid() {
		return false
	}
	switch id.Kind() {
	case '"', '0', 'n':
		return true
	}
	return false
}

// FuzzCheckHeaders checks CheckHeaders never panics, only answers 400 with
// -32020 / -32022, and never accepts a present header that differs from
// the body.
func FuzzCheckHeaders(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s), "2026-07-28", "tools/call", "get_weather", true, true, true)
		f.Add([]byte(s), "", "", "", false, false, false)
	}
	f.Add([]byte(callUnicode), "2026-07-28", "tools/call", "=?base64?bcOpdMOpbw==?=", true, true, true)
	f.Fuzz(func(t *testing.T, body []byte, version, method, name string, hasV, hasM, hasN bool) {
		m, pe := Parse(body, 16)
		if pe != nil {
			return
		}
		h := Header{}
		if hasV {
			h.Set(HeaderProtocolVersion, version)
		}
		if hasM {
			h.Set(HeaderMethod, method)
		}
		if hasN {
			h.Set(HeaderName, name)
		}
		e := CheckHeaders(h, m)
		if e != nil {
			if e.Status != 400 || (e.Code != CodeHeaderMismatch && e.Code != CodeUnsupportedProtocolVersion && e.Code != CodeInvalidParams) {
				t.Fatalf("unexpected error %d/%d %s", e.Status, e.Code, e.Message)
			}
			if !jsontext.Value(ErrorResponse(m.ID, e)).IsValid() {
				t.Fatal("ErrorResponse is not valid JSON")
			}
			return
		}
		// Accepted: every present header agrees with the body.
		if hasV && !IsSupportedVersion(version) {
			t.Fatalf("unsupported version %q accepted", version)
		}
		if m.Meta.ProtocolVersion != "" && (!hasV || version != m.Meta.ProtocolVersion) {
			t.Fatalf("_meta version %q with header %q accepted", m.Meta.ProtocolVersion, version)
		}
		if hasM {
			if d, err := DecodeHeaderValue(method); err != nil || d != m.Method || m.Kind == KindResponse {
				t.Fatalf("Mcp-Method %q accepted for %q", method, m.Method)
			}
		}
		if hasN {
			if d, err := DecodeHeaderValue(name); err != nil || d != m.Target() || !hasTarget(m.Method) {
				t.Fatalf("Mcp-Name %q accepted for %q", name, m.Target())
			}
		}
		if isModern(EffectiveVersion(h, m)) {
			if (m.Kind == KindRequest || m.Kind == KindNotification) && !hasM {
				t.Fatal("modern message accepted without Mcp-Method")
			}
			if m.Kind == KindRequest && requiresName(m.Method) && !hasN {
				t.Fatal("modern request accepted without Mcp-Name")
			}
		}
	})
}

// FuzzDecodeHeaderValue checks the header value coding round-trips.
func FuzzDecodeHeaderValue(f *testing.F) {
	for _, s := range []string{"", "us-west1", "Hello, 世界", " padded ", "line1\nline2",
		"=?base64?literal?=", "=?base64?SGVsbG8sIOS4lueVjA==?=", "=?base64?=", "=?base64??=",
		"=?base64?YQ?=", "\xff", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := EncodeHeaderValue(s)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; c < 0x20 || c > 0x7e {
				t.Fatalf("encoded %q has byte %#x", enc, c)
			}
		}
		if enc != "" && (enc[0] == ' ' || enc[len(enc)-1] == ' ') {
			t.Fatalf("encoded %q has surrounding space", enc)
		}
		dec, err := DecodeHeaderValue(enc)
		if utf8.ValidString(s) {
			if err != nil || dec != s {
				t.Fatalf("round trip of %q: %q, %v", s, dec, err)
			}
		} else if err == nil {
			t.Fatalf("invalid UTF-8 %q decoded to %q", s, dec)
		}

		// Anything that decodes re-encodes to something that decodes the same.
		if d, err := DecodeHeaderValue(s); err == nil {
			if !utf8.ValidString(d) {
				t.Fatalf("decoded %q is not UTF-8", d)
			}
			d2, err := DecodeHeaderValue(EncodeHeaderValue(d))
			if err != nil || d2 != d {
				t.Fatalf("re-encoding %q: %q, %v", d, d2, err)
			}
		}
	})
}
