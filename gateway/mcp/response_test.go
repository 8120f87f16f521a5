package mcp

import (
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		name string
		id   jsontext.Value
		e    *Error
		want string
	}{
		{"number id", jsontext.Value(`7`), &Error{Status: 400, Code: CodeHeaderMismatch, Message: "Header mismatch: x"},
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"Header mismatch: x"}}`},
		{"nil id", nil, &Error{Status: 400, Code: CodeParseError, Message: "Parse error: empty body"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: empty body"}}`},
		{"big int id", jsontext.Value(`12345678901234567890123`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":12345678901234567890123,"error":{"code":-1,"message":"m"}}`},
		{"escaped string id", jsontext.Value(`"a\u0062"`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":"a\u0062","error":{"code":-1,"message":"m"}}`},
		{"negative zero id", jsontext.Value(`-0`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":-0,"error":{"code":-1,"message":"m"}}`},
		{"null id", jsontext.Value(`null`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}`},
		{"object id becomes null", jsontext.Value(`{}`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}`},
		{"invalid id becomes null", jsontext.Value(`"abc`), &Error{Code: -1, Message: "m"},
			`{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"m"}}`},
		{"message escaping", jsontext.Value(`1`), &Error{Code: -1, Message: "a\"b\\c\n<>\xff"},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"a\"b\\c\n<>` + "\ufffd" + `"}}`},
		{"data struct", jsontext.Value(`1`), &Error{Code: CodeUnsupportedProtocolVersion, Message: "m", Data: UnsupportedProtocolVersionData{Supported: []string{"2026-07-28"}, Requested: "x"}},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"m","data":{"supported":["2026-07-28"],"requested":"x"}}}`},
		{"data map", jsontext.Value(`1`), &Error{Code: -1, Message: "m", Data: map[string]int{"b": 2, "a": 1}},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":{"a":1,"b":2}}}`},
		{"data raw", jsontext.Value(`1`), &Error{Code: -1, Message: "m", Data: jsontext.Value(`{"x":[1]}`)},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m","data":{"x":[1]}}}`},
		{"data invalid raw dropped", jsontext.Value(`1`), &Error{Code: -1, Message: "m", Data: jsontext.Value(`{"x":`)},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}`},
		{"data unmarshallable dropped", jsontext.Value(`1`), &Error{Code: -1, Message: "m", Data: func() {}},
			`{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"m"}}`},
		{"nil error", jsontext.Value(`1`), nil,
			`{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Internal error"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorResponse(tt.id, tt.e)
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if !jsontext.Value(got).IsValid() {
				t.Error("not valid JSON")
			}
			m, e := Parse(got, 8)
			if e != nil || m.Kind != KindResponse {
				t.Errorf("does not parse as a response: %v", e)
			}
		})
	}
}

func TestResultResponse(t *testing.T) {
	tests := []struct {
		name   string
		id     jsontext.Value
		result []byte
		want   string
	}{
		{"basic", jsontext.Value(`"r1"`), []byte(`{"content":[]}`), `{"jsonrpc":"2.0","id":"r1","result":{"content":[]}}`},
		{"empty result", jsontext.Value(`1e3`), nil, `{"jsonrpc":"2.0","id":1e3,"result":{}}`},
		{"nil id", nil, []byte(`{}`), `{"jsonrpc":"2.0","id":null,"result":{}}`},
		{"short id", jsontext.Value(`7`), []byte(`{"isError":true}`), `{"jsonrpc":"2.0","id":7,"result":{"isError":true}}`},
		{"invalid id", jsontext.Value(`[1]`), nil, `{"jsonrpc":"2.0","id":null,"result":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ResultResponse(tt.id, tt.result)
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			// The body is built in one allocation of the right size.
			if n := testing.AllocsPerRun(20, func() { ResultResponse(tt.id, tt.result) }); n > 1 {
				t.Errorf("%v allocations, want at most 1", n)
			}
		})
	}
}

func TestErrorResponseForParseResults(t *testing.T) {
	// The id of a partial message is echoed byte-exact.
	body := []byte(`{"jsonrpc":"2.0","id":"a\u0062","method":"tools/call","params":{"name":1}}`)
	m, e := Parse(body, 8)
	if e == nil || m == nil {
		t.Fatalf("got %v %v", m, e)
	}
	want := `{"jsonrpc":"2.0","id":"a\u0062","error":{"code":-32602,"message":"Invalid params: params.name must be a string"}}`
	if got := string(ErrorResponse(m.ID, e)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// FuzzAppendID: the shortcut for plain ids writes what jsontext's
// validation writes: the id when it is a valid JSON string, number or
// null, else null.
func FuzzAppendID(f *testing.F) {
	for _, s := range []string{"7", "0", "00", "01", "-1", "1.5", "1e3", `"a"`, `""`, `"`, `"a`, `a"`, `"\"`, `"\u0041"`,
		"\"\x7f\"", "\"\x1f\"", "\"é\"", "\"\xff\"", "null", "nul", "true", "{}", "[]", "1 ", " 1", "12345678901234567890"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, id []byte) {
		want := "null"
		if len(id) > 0 {
			switch jsontext.Value(id).Kind() {
			case '"', '0', 'n':
				if jsontext.Value(id).IsValid() {
					want = string(id)
				}
			}
		}
		if got := string(appendID(nil, id)); got != want {
			t.Fatalf("appendID(%q) = %s, want %s", id, got, want)
		}
	})
}
