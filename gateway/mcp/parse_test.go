package mcp

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
)

const toolsCall2026 = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` +
	`"name":"get_weather","arguments":{"location":"Seattle, WA","units":"metric","days":3},` +
	`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"ExampleClient","version":"1.0.0","title":"Example"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},"progressToken":"p1"}}}`

// wantErr is the expected outcome of a failing Parse.
type wantErr struct {
	code    int
	msgPart string // substring of the message, "" to skip
	id      string // expected ID of the partial message, "" for a nil message
}

func TestParseErrors(t *testing.T) {
	deep := func(n int) string { // n nested arrays inside params.arguments.x
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":` +
			strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`
	}
	tests := []struct {
		name string
		body string
		want wantErr
	}{
		// Empty and malformed JSON.
		{"empty", ``, wantErr{CodeParseError, "empty body", ""}},
		{"whitespace only", " \r\n\t ", wantErr{CodeParseError, "empty body", ""}},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"ping"`, wantErr{CodeParseError, "unexpected end", ""}},
		{"truncated string", `{"jsonrpc":"2.0","id":1,"method":"pi`, wantErr{CodeParseError, "", ""}},
		{"single quote", `{'jsonrpc':'2.0'}`, wantErr{CodeParseError, "", ""}},
		{"trailing comma", `{"jsonrpc":"2.0","id":1,"method":"ping",}`, wantErr{CodeParseError, "", ""}},
		{"missing colon", `{"jsonrpc" "2.0"}`, wantErr{CodeParseError, "", ""}},
		{"non-string name", `{1:2}`, wantErr{CodeParseError, "", ""}},
		{"bare word", `hello`, wantErr{CodeParseError, "", ""}},
		{"NaN number", `{"jsonrpc":"2.0","id":NaN,"method":"ping"}`, wantErr{CodeParseError, "", ""}},
		{"leading zero number", `{"jsonrpc":"2.0","id":01,"method":"ping"}`, wantErr{CodeParseError, "", ""}},
		{"plus number", `{"jsonrpc":"2.0","id":+1,"method":"ping"}`, wantErr{CodeParseError, "", ""}},
		{"byte order mark", "\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", wantErr{CodeParseError, "", ""}},
		{"comment", `{"jsonrpc":"2.0",/*c*/"id":1,"method":"ping"}`, wantErr{CodeParseError, "", ""}},
		{"raw control char in string", "{\"jsonrpc\":\"2.0\",\"id\":\"a\x01\",\"method\":\"ping\"}", wantErr{CodeParseError, "", ""}},
		{"bad escape", `{"jsonrpc":"2.0","id":"\x41","method":"ping"}`, wantErr{CodeParseError, "", ""}},
		{"lone surrogate escape", `{"jsonrpc":"2.0","id":"\ud800","method":"ping"}`, wantErr{CodeParseError, "", ""}},

		// Trailing data.
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, wantErr{CodeParseError, "", ""}},
		{"trailing second object", `{"jsonrpc":"2.0","id":1,"method":"ping"}{}`, wantErr{CodeParseError, "after the top-level", ""}},
		{"trailing brace", `{"jsonrpc":"2.0","id":1,"method":"ping"}}`, wantErr{CodeParseError, "", ""}},
		{"trailing NUL", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\x00", wantErr{CodeParseError, "", ""}},

		// Duplicate names, compared after unescaping.
		{"dup top level", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup top level escaped", `{"a":1,"\u0061":2}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup method escaped", `{"jsonrpc":"2.0","id":1,"method":"ping","m\u0065thod":"tools/list"}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in params escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","\u006eame":"b"}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"x":2}}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup deep in arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":[{"y":{"z":1,"\u007a":2}}]}}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in _meta", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/protocolVersion":"2025-06-18"}}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in clientInfo", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"a","name":"b"}}}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in result", `{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":1}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in unknown member", `{"jsonrpc":"2.0","id":1,"method":"ping","x":{"a":1,"a":2}}`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup in batch", `[{"a":1,"a":2}]`, wantErr{CodeParseError, "duplicate", ""}},
		{"dup escaped slash", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a/b":1,"a\/b":2}}`, wantErr{CodeParseError, "duplicate", ""}},

		// Invalid UTF-8.
		{"invalid utf8 in method", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"to\xffols/list\"}", wantErr{CodeParseError, "UTF-8", ""}},
		{"invalid utf8 in key", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"\xc3\x28\":1}}", wantErr{CodeParseError, "UTF-8", ""}},
		{"invalid utf8 top key", "{\"\xff\":1}", wantErr{CodeParseError, "UTF-8", ""}},
		{"invalid utf8 in arguments", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"arguments\":{\"q\":\"\xed\xa0\x80\"}}}", wantErr{CodeParseError, "UTF-8", ""}},
		{"overlong utf8", "{\"jsonrpc\":\"2.0\",\"id\":\"\xc0\xaf\",\"method\":\"ping\"}", wantErr{CodeParseError, "UTF-8", ""}},
		{"truncated utf8", "{\"jsonrpc\":\"2.0\",\"id\":\"\xe2\x82\",\"method\":\"ping\"}", wantErr{CodeParseError, "UTF-8", ""}},

		// Nesting depth (maxDepth 8 in this table: params=2, arguments=3, x=4..).
		{"depth one over", deep(6), wantErr{CodeParseError, "depth", ""}},
		{"depth far over", deep(500), wantErr{CodeParseError, "depth", ""}},
		{"depth in unknown member", `{"x":[[[[[[[[[]]]]]]]]]}`, wantErr{CodeParseError, "depth", ""}},
		{"depth in batch", `[[[[[[[[[]]]]]]]]]`, wantErr{CodeParseError, "depth", ""}},
		{"depth in _meta", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"a":[[[[[[]]]]]]}}}`, wantErr{CodeParseError, "depth", ""}},

		// Batches and non-objects.
		{"empty batch", `[]`, wantErr{CodeInvalidRequest, "batch requests are not supported", ""}},
		{"valid batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`, wantErr{CodeInvalidRequest, "batch requests are not supported", ""}},
		{"batch of one", ` [{"jsonrpc":"2.0","id":1,"method":"ping"}] `, wantErr{CodeInvalidRequest, "batch", ""}},
		{"malformed batch", `[{"jsonrpc":"2.0"`, wantErr{CodeParseError, "", ""}},
		{"string", `"hello"`, wantErr{CodeInvalidRequest, "JSON object", ""}},
		{"number", `42`, wantErr{CodeInvalidRequest, "JSON object", ""}},
		{"null", `null`, wantErr{CodeInvalidRequest, "JSON object", ""}},
		{"true", `true`, wantErr{CodeInvalidRequest, "JSON object", ""}},

		// JSON-RPC shape.
		{"empty object", `{}`, wantErr{CodeInvalidRequest, "jsonrpc", ""}},
		{"missing jsonrpc", `{"id":1,"method":"ping"}`, wantErr{CodeInvalidRequest, "jsonrpc", "1"}},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, wantErr{CodeInvalidRequest, "2.0", "1"}},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, wantErr{CodeInvalidRequest, "2.0", "1"}},
		{"jsonrpc padded", `{"jsonrpc":"2.0 ","id":1,"method":"ping"}`, wantErr{CodeInvalidRequest, "2.0", "1"}},
		{"jsonrpc null", `{"jsonrpc":null,"id":1,"method":"ping"}`, wantErr{CodeInvalidRequest, "2.0", "1"}},
		{"missing method", `{"jsonrpc":"2.0","id":1}`, wantErr{CodeInvalidRequest, "method", "1"}},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":1}`, wantErr{CodeInvalidRequest, "method", "1"}},
		{"method null", `{"jsonrpc":"2.0","id":"x","method":null}`, wantErr{CodeInvalidRequest, "method", `"x"`}},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, wantErr{CodeInvalidRequest, "id", ""}},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, wantErr{CodeInvalidRequest, "id", ""}},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, wantErr{CodeInvalidRequest, "id", ""}},
		{"request id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, wantErr{CodeInvalidRequest, "null", "null"}},
		{"params array", `{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}`, wantErr{CodeInvalidRequest, "params", "1"}},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, wantErr{CodeInvalidRequest, "params", "1"}},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, wantErr{CodeInvalidRequest, "params", "1"}},
		{"unknown member", `{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}`, wantErr{CodeInvalidRequest, "unknown member 'extra'", "1"}},
		{"unknown member before id", `{"jsonrpc":"2.0","x":1,"id":5,"method":"ping"}`, wantErr{CodeInvalidRequest, "unknown member", "5"}},
		{"unknown member case", `{"jsonrpc":"2.0","id":1,"Method":"ping"}`, wantErr{CodeInvalidRequest, "unknown member", "1"}},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, wantErr{CodeInvalidRequest, "both", "1"}},
		{"method and error", `{"jsonrpc":"2.0","method":"ping","error":{"code":1,"message":"x"}}`, wantErr{CodeInvalidRequest, "both", ""}},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, wantErr{CodeInvalidRequest, "exactly one", "1"}},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, wantErr{CodeInvalidRequest, "id", ""}},
		{"result response null id", `{"jsonrpc":"2.0","id":null,"result":{}}`, wantErr{CodeInvalidRequest, "null", "null"}},
		{"response with params", `{"jsonrpc":"2.0","id":1,"result":{},"params":{}}`, wantErr{CodeInvalidRequest, "params", "1"}},
		{"result not object", `{"jsonrpc":"2.0","id":1,"result":1}`, wantErr{CodeInvalidRequest, "result", "1"}},
		{"error not object", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, wantErr{CodeInvalidRequest, "error", "1"}},

		// MCP params.
		{"tools/call no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, wantErr{CodeInvalidParams, "params.name", "1"}},
		{"tools/call no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}`, wantErr{CodeInvalidParams, "params.name", "1"}},
		{"tools/call name number", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5}}`, wantErr{CodeInvalidParams, "params.name must be a string", "1"}},
		{"tools/call name null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":null}}`, wantErr{CodeInvalidParams, "string", "1"}},
		{"tools/call arguments array", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":[]}}`, wantErr{CodeInvalidParams, "arguments", "1"}},
		{"tools/call arguments null", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":null}}`, wantErr{CodeInvalidParams, "arguments", "1"}},
		{"tools/call arguments string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":"{}"}}`, wantErr{CodeInvalidParams, "arguments", "1"}},
		{"prompts/get no name", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{}}`, wantErr{CodeInvalidParams, "params.name", "1"}},
		{"prompts/get arguments array", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":[1]}}`, wantErr{CodeInvalidParams, "arguments", "1"}},
		{"resources/read no uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{}}`, wantErr{CodeInvalidParams, "params.uri", "1"}},
		{"resources/read uri object", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":{}}}`, wantErr{CodeInvalidParams, "params.uri", "1"}},
		{"resources/subscribe no uri", `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{}}`, wantErr{CodeInvalidParams, "params.uri", "1"}},
		{"resources/unsubscribe no params", `{"jsonrpc":"2.0","id":1,"method":"resources/unsubscribe"}`, wantErr{CodeInvalidParams, "params.uri", "1"}},
		{"tools/call notification no name", `{"jsonrpc":"2.0","method":"tools/call","params":{}}`, wantErr{CodeInvalidParams, "params.name", ""}},
		{"_meta not object", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":[]}}`, wantErr{CodeInvalidParams, "_meta", "1"}},
		{"_meta null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":null}}`, wantErr{CodeInvalidParams, "_meta", "1"}},
		{"_meta version number", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":20260728}}}`, wantErr{CodeInvalidParams, "protocolVersion", "1"}},
		{"_meta version empty", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":""}}}`, wantErr{CodeUnsupportedProtocolVersion, "", "1"}},
		{"_meta clientInfo string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientInfo":"x"}}}`, wantErr{CodeInvalidParams, "clientInfo", "1"}},
		{"_meta clientInfo no name", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"version":"1"}}}}`, wantErr{CodeInvalidParams, "clientInfo", "1"}},
		{"_meta clientInfo version number", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"a","version":1}}}}`, wantErr{CodeInvalidParams, "clientInfo", "1"}},
		{"_meta capabilities array", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":[]}}}`, wantErr{CodeInvalidParams, "clientCapabilities", "1"}},
		{"_meta error in notification", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":1}}`, wantErr{CodeInvalidParams, "_meta", ""}},
		{"initialize no version", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`, wantErr{CodeInvalidParams, "protocolVersion", "1"}},
		{"initialize version number", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}`, wantErr{CodeInvalidParams, "protocolVersion", "1"}},
		{"initialize version empty", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":""}}`, wantErr{CodeInvalidParams, "protocolVersion", "1"}},
		{"initialize clientInfo array", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":[]}}`, wantErr{CodeInvalidParams, "clientInfo", "1"}},
		{"initialize clientInfo name number", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":1}}}`, wantErr{CodeInvalidParams, "clientInfo", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, e := Parse([]byte(tt.body), 8)
			if e == nil {
				t.Fatalf("Parse succeeded (kind %v), want code %d", m.Kind, tt.want.code)
			}
			if e.Code != tt.want.code || e.Status != 400 {
				t.Fatalf("got %d/%d %q, want 400/%d", e.Status, e.Code, e.Message, tt.want.code)
			}
			if !strings.Contains(e.Message, tt.want.msgPart) {
				t.Errorf("message %q does not contain %q", e.Message, tt.want.msgPart)
			}
			switch {
			case tt.want.id == "" && m != nil:
				t.Errorf("got partial message with id %s, want nil", m.ID)
			case tt.want.id != "" && m == nil:
				t.Errorf("got nil message, want id %s", tt.want.id)
			case tt.want.id != "" && string(m.ID) != tt.want.id:
				t.Errorf("partial id = %s, want %s", m.ID, tt.want.id)
			}
		})
	}
}

func TestParseDepthLimit(t *testing.T) {
	// Depth counts the top-level object as 1.
	nest := func(n int) string { // a message whose deepest value has depth n
		inner := strings.Repeat("[", n-2) + strings.Repeat("]", n-2)
		return `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":` + inner + `}}`
	}
	for _, limit := range []int{4, 5, 16, 64} {
		t.Run("limit "+itoa(limit), func(t *testing.T) {
			if _, e := Parse([]byte(nest(limit)), limit); e != nil {
				t.Errorf("depth == limit: %v", e)
			}
			if _, e := Parse([]byte(nest(limit+1)), limit); e == nil || e.Code != CodeParseError {
				t.Errorf("depth == limit+1: got %v, want -32700", e)
			}
		})
	}
	t.Run("arguments at limit", func(t *testing.T) {
		// top(1) params(2) arguments(3) x: 5 arrays (4..8).
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"x":[[[[[]]]]]}}}`
		if _, e := Parse([]byte(body), 8); e != nil {
			t.Errorf("at limit: %v", e)
		}
		if _, e := Parse([]byte(body), 7); e == nil || e.Code != CodeParseError {
			t.Errorf("over limit: got %v", e)
		}
	})
	t.Run("objects in _meta", func(t *testing.T) {
		// top(1) params(2) _meta(3) clientInfo(4) x(5)
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/clientInfo":{"name":"a","x":{}}}}}`
		if _, e := Parse([]byte(body), 5); e != nil {
			t.Errorf("at limit: %v", e)
		}
		if _, e := Parse([]byte(body), 4); e == nil || e.Code != CodeParseError {
			t.Errorf("over limit: got %v", e)
		}
	})
	t.Run("descended object over limit", func(t *testing.T) {
		// params itself is depth 2.
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{}}`
		if _, e := Parse([]byte(body), 1); e == nil || e.Code != CodeParseError {
			t.Errorf("got %v, want -32700", e)
		}
		if _, e := Parse([]byte(body), 2); e != nil {
			t.Errorf("got %v", e)
		}
	})
	t.Run("brackets inside strings do not count", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":["[[[[[[\"{{{{"]}}`
		if _, e := Parse([]byte(body), 3); e != nil {
			t.Errorf("got %v", e)
		}
	})
	t.Run("default when non-positive", func(t *testing.T) {
		if _, e := Parse([]byte(nest(DefaultMaxDepth)), 0); e != nil {
			t.Errorf("got %v", e)
		}
		if _, e := Parse([]byte(nest(DefaultMaxDepth+1)), -1); e == nil {
			t.Errorf("want depth error")
		}
	})
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func TestParseIDByteExact(t *testing.T) {
	ids := []string{
		`0`, `-0`, `1`, `-1`, `42`, `1e3`, `1E+3`, `-1.5e-7`, `0.0`, `3.14159`,
		`9007199254740993`,        // 2^53+1, not representable as float64
		`12345678901234567890123`, // bigger than int64
		`-99999999999999999999999999999999`,
		`""`, `"abc"`, `"a\u0062"`, `"\ud83d\ude00"`, `"é"`, `"\"quoted\""`, `"a\/b"`, `"\n"`,
	}
	for _, id := range ids {
		t.Run(id, func(t *testing.T) {
			for _, body := range []string{
				`{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`,
				`{"id": ` + id + ` , "method":"ping","jsonrpc":"2.0"}`,
				`{"jsonrpc":"2.0","id":` + id + `,"result":{}}`,
				`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-1,"message":"m"}}`,
			} {
				b := []byte(body)
				m, e := Parse(b, 8)
				if e != nil {
					t.Fatalf("%s: %v", body, e)
				}
				if string(m.ID) != id {
					t.Errorf("%s: ID = %s, want %s", body, m.ID, id)
				}
				if !aliases(b, m.ID) {
					t.Errorf("%s: ID is not a sub-slice of the body", body)
				}
			}
		})
	}
	t.Run("error response with null id", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Kind != KindResponse || string(m.ID) != "null" {
			t.Errorf("got %v %s", m.Kind, m.ID)
		}
	})
}

// aliases reports whether sub lies inside body's memory.
func aliases(body, sub []byte) bool {
	if len(sub) == 0 || len(body) == 0 {
		return false
	}
	b0 := uintptr(unsafe.Pointer(unsafe.SliceData(body)))
	s0 := uintptr(unsafe.Pointer(unsafe.SliceData(sub)))
	return s0 >= b0 && s0+uintptr(len(sub)) <= b0+uintptr(len(body))
}

func TestParseKinds(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		kind   Kind
		method string
		id     string
	}{
		{"request", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, KindRequest, "tools/list", "1"},
		{"request string id", `{"jsonrpc":"2.0","id":"r-1","method":"ping","params":{}}`, KindRequest, "ping", `"r-1"`},
		{"request members reordered", `{"method":"ping","params":{},"id":2,"jsonrpc":"2.0"}`, KindRequest, "ping", "2"},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, KindNotification, "notifications/initialized", ""},
		{"notification with params", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"x"}}`, KindNotification, "notifications/cancelled", ""},
		{"result response", `{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`, KindResponse, "", "3"},
		{"error response", `{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope"}}`, KindResponse, "", `"x"`},
		{"escaped method", `{"jsonrpc":"2.0","id":1,"method":"tools\/list"}`, KindRequest, "tools/list", "1"},
		{"unicode escaped jsonrpc", `{"jsonrpc":"2\u002e0","id":1,"method":"ping"}`, KindRequest, "ping", "1"},
		{"unknown method still parses", `{"jsonrpc":"2.0","id":1,"method":"x/y"}`, KindRequest, "x/y", "1"},
		{"empty method", `{"jsonrpc":"2.0","id":1,"method":""}`, KindRequest, "", "1"},
		{"whitespace around", " \n{ \"jsonrpc\" : \"2.0\" , \"id\" : 1 , \"method\" : \"ping\" }\r\n\t", KindRequest, "ping", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, e := Parse([]byte(tt.body), 8)
			if e != nil {
				t.Fatal(e)
			}
			if m.Kind != tt.kind || m.Method != tt.method || string(m.ID) != tt.id {
				t.Errorf("got kind=%v method=%q id=%s, want %v %q %s", m.Kind, m.Method, m.ID, tt.kind, tt.method, tt.id)
			}
			if (tt.id == "") != (m.ID == nil) {
				t.Errorf("ID nil-ness: %v", m.ID)
			}
		})
	}
}

func TestParseMCPFields(t *testing.T) {
	t.Run("tools/call 2026-07-28", func(t *testing.T) {
		body := []byte(toolsCall2026)
		m, e := Parse(body, 16)
		if e != nil {
			t.Fatal(e)
		}
		if m.Kind != KindRequest || m.Method != "tools/call" || m.Name != "get_weather" || m.URI != "" {
			t.Errorf("got %+v", m)
		}
		if string(m.Arguments) != `{"location":"Seattle, WA","units":"metric","days":3}` {
			t.Errorf("Arguments = %s", m.Arguments)
		}
		if m.Meta.ProtocolVersion != "2026-07-28" {
			t.Errorf("Meta.ProtocolVersion = %q", m.Meta.ProtocolVersion)
		}
		if ci := m.Meta.ClientInfo; ci == nil || *ci != (Implementation{Name: "ExampleClient", Version: "1.0.0", Title: "Example"}) {
			t.Errorf("Meta.ClientInfo = %+v", ci)
		}
		if string(m.Meta.ClientCapabilities) != `{"elicitation":{}}` {
			t.Errorf("ClientCapabilities = %s", m.Meta.ClientCapabilities)
		}
		if !strings.HasPrefix(string(m.Params), `{"name":"get_weather"`) || !strings.HasSuffix(toolsCall2026, string(m.Params)+"}") {
			t.Errorf("Params = %s", m.Params)
		}
		if m.Target() != "get_weather" {
			t.Errorf("Target = %q", m.Target())
		}
		for name, raw := range map[string][]byte{"ID": m.ID, "Params": m.Params, "Arguments": m.Arguments, "ClientCapabilities": m.Meta.ClientCapabilities} {
			if !aliases(body, raw) {
				t.Errorf("%s is not a sub-slice of the body", name)
			}
			if cap(raw) != len(raw) {
				t.Errorf("%s has spare capacity into the body", name)
			}
		}
	})
	t.Run("name with escapes", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"g\u00e9t\ttool"}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Name != "gét\ttool" {
			t.Errorf("Name = %q", m.Name)
		}
		if m.Arguments != nil {
			t.Errorf("Arguments = %s, want nil", m.Arguments)
		}
	})
	t.Run("params before method", func(t *testing.T) {
		m, e := Parse([]byte(`{"params":{"arguments":{},"name":"t"},"id":1,"jsonrpc":"2.0","method":"tools/call"}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Name != "t" || string(m.Arguments) != "{}" {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("prompts/get", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"a":"b"}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Name != "p" || string(m.Arguments) != `{"a":"b"}` || m.Target() != "p" {
			t.Errorf("got %+v", m)
		}
	})
	for _, method := range []string{"resources/read", "resources/subscribe", "resources/unsubscribe"} {
		t.Run(method, func(t *testing.T) {
			m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"uri":"file:///a%20b.txt","name":"ignored"}}`), 8)
			if e != nil {
				t.Fatal(e)
			}
			if m.URI != "file:///a%20b.txt" || m.Name != "" || m.Target() != m.URI {
				t.Errorf("got %+v", m)
			}
		})
	}
	t.Run("name ignored for other methods", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":5,"uri":[],"arguments":1}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Name != "" || m.URI != "" || m.Arguments != nil || m.Target() != "" {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("initialize", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"2","icons":[]}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.InitializeVersion != "2025-06-18" || m.InitializeClientInfo == nil || m.InitializeClientInfo.Name != "c" || m.InitializeClientInfo.Version != "2" {
			t.Errorf("got %+v / %+v", m, m.InitializeClientInfo)
		}
	})
	t.Run("initialize without clientInfo", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05"}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.InitializeVersion != "2024-11-05" || m.InitializeClientInfo != nil {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("meta absent", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":1}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Meta.ProtocolVersion != "" || m.Meta.ClientInfo != nil || m.Meta.ClientCapabilities != nil {
			t.Errorf("got %+v", m.Meta)
		}
	})
	t.Run("meta in notification", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Kind != KindNotification || m.Meta.ProtocolVersion != "2026-07-28" {
			t.Errorf("got %+v", m)
		}
	})
	t.Run("unsupported meta version is kept for CheckHeaders", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Meta.ProtocolVersion != "2099-01-01" {
			t.Errorf("got %q", m.Meta.ProtocolVersion)
		}
	})
	t.Run("escaped meta key", func(t *testing.T) {
		m, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol\/protocolVersion":"2026-07-28"}}}`), 8)
		if e != nil {
			t.Fatal(e)
		}
		if m.Meta.ProtocolVersion != "2026-07-28" {
			t.Errorf("got %q", m.Meta.ProtocolVersion)
		}
	})
}

func TestParseDoesNotModifyBody(t *testing.T) {
	body := []byte(toolsCall2026 + " ")
	orig := string(body)
	for i := 0; i < 3; i++ {
		if _, e := Parse(body, 16); e != nil {
			t.Fatal(e)
		}
	}
	bad := []byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"a":2}}`)
	origBad := string(bad)
	Parse(bad, 16)
	if string(body) != orig || string(bad) != origBad {
		t.Error("Parse modified its input")
	}
}

func TestParseConcurrent(t *testing.T) {
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 200; i++ {
				m, e := Parse([]byte(toolsCall2026), 16)
				if e != nil || m.Name != "get_weather" || string(m.ID) != "7" {
					t.Errorf("got %v %v", m, e)
					return
				}
				if _, e := Parse([]byte(`{"a":1,"a":2}`), 16); e == nil {
					t.Error("dup accepted")
					return
				}
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func TestParamsCaseVariants(t *testing.T) {
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"find_customers","Name":"cancel_booking"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},"ARGUMENTS":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a://b","URI":"c://d"}}`,
		// U+017F LATIN SMALL LETTER LONG S folds to "s": Go's
		// encoding/json takes "argumentſ" for "arguments".
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{},"argument\u017f":{"tenant_id":"x"}}}`,
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\",\"argument\u017f\":{}}}",
		// The id comes after params: still reported with it.
		`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"a","Arguments":{}},"id":1}`,
	} {
		m, e := Parse([]byte(body), 0)
		if e == nil || e.Code != CodeInvalidParams || !strings.Contains(e.Message, "only in case") {
			t.Errorf("%s: got %v", body, e)
			continue
		}
		if m == nil || string(m.ID) != "1" {
			t.Errorf("%s: the error must keep the request's id, got %+v", body, m)
		}
	}
	// Other members are free.
	if _, e := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Names":"x"}}`), 0); e != nil {
		t.Errorf("unrelated member refused: %v", e)
	}
}

// TestParseReusesRecentStrings: the parser hands out again the short
// strings of earlier messages (a client repeats its tool names and
// clientInfo on every request) and every message still reads its own.
func TestParseReusesRecentStrings(t *testing.T) {
	body := func(tool, version string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool +
			`","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"agent","version":"` + version + `"}}}}`)
	}
	long := strings.Repeat("x", 100)
	for i := range 200 {
		tool, version := fmt.Sprintf("tool_%d", i%13), fmt.Sprintf("1.%d", i%5)
		if i%7 == 0 {
			tool = long + tool
		}
		m, e := Parse(body(tool, version), 0)
		if e != nil {
			t.Fatal(e)
		}
		if m.Name != tool || m.Meta.ClientInfo == nil || m.Meta.ClientInfo.Name != "agent" || m.Meta.ClientInfo.Version != version {
			t.Fatalf("message %d: name %q, client %+v; want %q, agent %q", i, m.Name, m.Meta.ClientInfo, tool, version)
		}
	}
}

// valueReader is a ResultReader that reads the result as one value, or
// misbehaves as told.
type valueReader struct {
	calls int
	fail  bool // return an error after reading
	short bool // read only the '{'
}

func (r *valueReader) ReadResult(dec *jsontext.Decoder, _ []byte) error {
	r.calls++
	if r.short {
		_, err := dec.ReadToken()
		return err
	}
	if _, err := dec.ReadValue(); err != nil {
		return err
	}
	if r.fail {
		return errors.New("refused")
	}
	return nil
}

// TestParseResultInto: the outcome is ParseInto's whatever the reader
// does, and the reader never sees a result nested deeper than the limit.
func TestParseResultInto(t *testing.T) {
	deep := `{"jsonrpc":"2.0","id":1,"result":{"a":[[[[[[1]]]]]]}}`
	for _, c := range []struct {
		body      string
		r         valueReader
		wantCalls int
	}{
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1}}`, valueReader{}, 1},
		{`{"result":{"a":1},"jsonrpc":"2.0","id":1}`, valueReader{}, 1},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1}}`, valueReader{fail: true}, 1},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1}}`, valueReader{short: true}, 1},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1,"a":2}}`, valueReader{}, 1},
		{"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"a\":\"\xff\"}}", valueReader{}, 1},
		{`{"jsonrpc":"2.0","id":1,"result":{"a":1},"result":{"a":1}}`, valueReader{}, 1},
		{`{"jsonrpc":"2.0","id":1,"result":[1]}`, valueReader{}, 0},
		{`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`, valueReader{}, 0},
		{deep, valueReader{}, 0},
	} {
		want, wantErr := ParseInto(nil, []byte(c.body), 5)
		got, gotErr := ParseResultInto(nil, []byte(c.body), 5, &c.r)
		if c.r.calls != c.wantCalls {
			t.Errorf("%s: read %d times, want %d", c.body, c.r.calls, c.wantCalls)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("%s: got %+v, %v; ParseInto: %+v, %v", c.body, got, gotErr, want, wantErr)
		}
	}
	// Deep enough for the limit: read.
	r := valueReader{}
	if _, e := ParseResultInto(nil, []byte(deep), 8, &r); e != nil || r.calls != 1 {
		t.Errorf("depth 8: %v, %d reads", e, r.calls)
	}
}
