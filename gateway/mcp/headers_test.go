package mcp

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// hdr builds a Header from name/value pairs (names in any case).
func hdr(kv ...string) Header {
	h := Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func mustParse(t testing.TB, body string) *Message {
	t.Helper()
	m, e := Parse([]byte(body), 16)
	if e != nil {
		t.Fatalf("Parse(%s): %v", body, e)
	}
	return m
}

const (
	meta2026 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	meta0618 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-06-18"}`

	callModern      = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather","arguments":{},` + meta2026 + `}}`
	callUnicode     = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"météo","arguments":{},` + meta2026 + `}}`
	readModern      = `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///projects/app/config.json",` + meta2026 + `}}`
	promptModern    = `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"review",` + meta2026 + `}}`
	listModern      = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`
	listNoMeta      = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	callNoMeta      = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_weather"}}`
	subscribeNoMeta = `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///x"}}`
	cancelNotif     = `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`
	response        = `{"jsonrpc":"2.0","id":1,"result":{}}`
	initialize      = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	initialize2026  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`
	listMeta0618    = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta0618 + `}}`
	listMetaBad     = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`
)

func TestCheckHeaders(t *testing.T) {
	const (
		pv = "MCP-Protocol-Version"
		mm = "Mcp-Method"
		mn = "Mcp-Name"
	)
	long := strings.Repeat("x", 500)
	tests := []struct {
		name    string
		body    string
		h       Header
		code    int    // 0 = accepted
		msgPart string // substring of the error message
	}{
		// 2026-07-28, accepted.
		{"modern tools/call", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get_weather"), 0, ""},
		{"modern resources/read", readModern, hdr(pv, "2026-07-28", mm, "resources/read", mn, "file:///projects/app/config.json"), 0, ""},
		{"modern prompts/get", promptModern, hdr(pv, "2026-07-28", mm, "prompts/get", mn, "review"), 0, ""},
		{"modern tools/list", listModern, hdr(pv, "2026-07-28", mm, "tools/list"), 0, ""},
		{"modern notification", cancelNotif, hdr(pv, "2026-07-28", mm, "notifications/cancelled"), 0, ""},
		{"header names fold case", callModern, Header{"mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"get_weather"}}, 0, ""},
		{"base64 name", callUnicode, hdr(pv, "2026-07-28", mm, "tools/call", mn, "=?base64?bcOpdMOpbw==?="), 0, ""},
		{"base64 method refused (only Mcp-Name may be encoded)", callModern, hdr(pv, "2026-07-28", mm, "=?base64?dG9vbHMvY2FsbA==?=", mn, "get_weather"), CodeHeaderMismatch, "does not match"},
		{"Mcp-Param headers ignored", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get_weather", "Mcp-Param-Region", "lies"), 0, ""},

		// 2026-07-28, refused.
		{"modern missing Mcp-Method", callModern, hdr(pv, "2026-07-28", mn, "get_weather"), CodeHeaderMismatch, "missing required Mcp-Method"},
		{"modern missing Mcp-Name", callModern, hdr(pv, "2026-07-28", mm, "tools/call"), CodeHeaderMismatch, "missing required Mcp-Name"},
		{"modern resources/read missing Mcp-Name", readModern, hdr(pv, "2026-07-28", mm, "resources/read"), CodeHeaderMismatch, "Mcp-Name"},
		{"modern prompts/get missing Mcp-Name", promptModern, hdr(pv, "2026-07-28", mm, "prompts/get"), CodeHeaderMismatch, "Mcp-Name"},
		{"modern notification missing Mcp-Method", cancelNotif, hdr(pv, "2026-07-28"), CodeHeaderMismatch, "Mcp-Method"},
		{"modern wrong method", callModern, hdr(pv, "2026-07-28", mm, "tools/list", mn, "get_weather"), CodeHeaderMismatch, "Mcp-Method header value 'tools/list' does not match body value 'tools/call'"},
		{"modern wrong name", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "delete_everything"), CodeHeaderMismatch, "Mcp-Name header value 'delete_everything' does not match body value 'get_weather'"},
		{"method case differs", callModern, hdr(pv, "2026-07-28", mm, "Tools/Call", mn, "get_weather"), CodeHeaderMismatch, "does not match"},
		{"name with padding", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get_weather "), CodeHeaderMismatch, "does not match"},
		{"plain unicode name not decoded", callUnicode, hdr(pv, "2026-07-28", mm, "tools/call", mn, "m\xc3\xa9t\xc3\xa9o"), CodeHeaderMismatch, "characters"},
		{"malformed base64 name", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "=?base64?!!!?="), CodeHeaderMismatch, "malformed"},
		{"base64 bad padding", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "=?base64?Z2V0X3dlYXRoZXI?="), CodeHeaderMismatch, "malformed"},
		{"base64 of wrong name", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, EncodeHeaderValue("other\n")), CodeHeaderMismatch, "does not match"},
		{"base64 name malformed", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "=?base64?Z2V0X3dlYXRoZXI=?"), CodeHeaderMismatch, ""},
		{"name header control char", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get\x00weather"), CodeHeaderMismatch, "characters"},
		{"duplicate Mcp-Name", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get_weather", mn, "get_weather"), CodeHeaderMismatch, "more than once"},
		{"duplicate Mcp-Method", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mm, "tools/call", mn, "get_weather"), CodeHeaderMismatch, "more than once"},
		{"duplicate protocol version", callModern, hdr(pv, "2026-07-28", pv, "2026-07-28", mm, "tools/call", mn, "get_weather"), CodeHeaderMismatch, "more than once"},
		{"long values truncated", callModern, hdr(pv, "2026-07-28", mm, "tools/call", mn, long), CodeHeaderMismatch, "'" + long[:64] + "…'"},
		{"Mcp-Name on tools/list", listModern, hdr(pv, "2026-07-28", mm, "tools/list", mn, "x"), CodeHeaderMismatch, "no counterpart"},

		// Protocol version header and _meta.
		{"meta without header", callModern, hdr(mm, "tools/call", mn, "get_weather"), CodeHeaderMismatch, "MCP-Protocol-Version header is required"},
		{"meta differs from header", listMeta0618, hdr(pv, "2025-11-25"), CodeHeaderMismatch, "does not match body _meta"},
		{"modern header without meta", listNoMeta, hdr(pv, "2026-07-28", mm, "tools/list"), CodeInvalidParams, "has no io.modelcontextprotocol/protocolVersion"},
		{"modern header without meta tools/call", callNoMeta, hdr(pv, "2026-07-28", mm, "tools/call", mn, "get_weather"), CodeInvalidParams, "has no io.modelcontextprotocol/protocolVersion"},
		{"modern header on initialize", initialize, hdr(pv, "2026-07-28", mm, "initialize"), 0, ""},
		{"modern header on initialize without Mcp-Method", initialize, hdr(pv, "2026-07-28"), CodeHeaderMismatch, "Mcp-Method"},
		{"modern header notification without meta", cancelNotif, hdr(pv, "2026-07-28", mm, "notifications/cancelled"), 0, ""},
		{"modern header response", response, hdr(pv, "2026-07-28"), 0, ""},
		{"unsupported header", listNoMeta, hdr(pv, "2099-01-01"), CodeUnsupportedProtocolVersion, "'2099-01-01'"},
		{"empty header", listNoMeta, hdr(pv, ""), CodeUnsupportedProtocolVersion, ""},
		{"unsupported meta", listMetaBad, hdr(pv, "2099-01-01"), CodeUnsupportedProtocolVersion, "2099-01-01"},
		{"unsupported meta, supported header: a mismatch first", listMetaBad, hdr(pv, "2026-07-28"), CodeHeaderMismatch, "does not match"},
		{"meta 2025-06-18 with header", listMeta0618, hdr(pv, "2025-06-18"), 0, ""},

		// Older revisions: headers optional but never allowed to lie.
		{"no headers at all", listNoMeta, Header{}, 0, ""},
		{"nil header", listNoMeta, nil, 0, ""},
		{"old tools/call no headers", callNoMeta, hdr(pv, "2025-06-18"), 0, ""},
		{"old tools/call right headers", callNoMeta, hdr(pv, "2025-11-25", mm, "tools/call", mn, "get_weather"), 0, ""},
		{"old tools/call wrong name", callNoMeta, hdr(pv, "2025-11-25", mm, "tools/call", mn, "rm"), CodeHeaderMismatch, "Mcp-Name"},
		{"old tools/call wrong method", callNoMeta, hdr(pv, "2025-03-26", mm, "tools/list"), CodeHeaderMismatch, "Mcp-Method"},
		{"absent version wrong name", callNoMeta, hdr(mn, "rm"), CodeHeaderMismatch, "Mcp-Name"},
		{"old malformed base64", callNoMeta, hdr(mn, "=?base64?%%%?="), CodeHeaderMismatch, "malformed"},
		{"old duplicate Mcp-Method", callNoMeta, hdr(mm, "tools/call", mm, "tools/list"), CodeHeaderMismatch, "more than once"},
		{"old subscribe right name", subscribeNoMeta, hdr(mn, "file:///x"), 0, ""},
		{"old subscribe wrong name", subscribeNoMeta, hdr(mn, "file:///y"), CodeHeaderMismatch, "Mcp-Name"},
		{"old response with Mcp-Method", response, hdr(mm, "tools/call"), CodeHeaderMismatch, "no counterpart"},
		{"old response with Mcp-Name", response, hdr(mn, "x"), CodeHeaderMismatch, "no counterpart"},
		{"initialize without headers", initialize, Header{}, 0, ""},
		{"initialize 2026 version requires Mcp-Method", initialize2026, Header{}, CodeHeaderMismatch, "Mcp-Method"},
		{"old notification wrong method", cancelNotif, hdr(mm, "notifications/progress"), CodeHeaderMismatch, "Mcp-Method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := mustParse(t, tt.body)
			e := CheckHeaders(tt.h, m)
			if tt.code == 0 {
				if e != nil {
					t.Fatalf("refused: %d %s", e.Code, e.Message)
				}
				return
			}
			if e == nil {
				t.Fatalf("accepted, want %d", tt.code)
			}
			if e.Status != 400 || e.Code != tt.code {
				t.Fatalf("got %d/%d %q, want 400/%d", e.Status, e.Code, e.Message, tt.code)
			}
			if !strings.Contains(e.Message, tt.msgPart) {
				t.Errorf("message %q does not contain %q", e.Message, tt.msgPart)
			}
			if len(e.Message) > 400 {
				t.Errorf("message too long (%d bytes)", len(e.Message))
			}
		})
	}
}

func TestCheckHeadersUnsupportedData(t *testing.T) {
	m := mustParse(t, listNoMeta)
	e := CheckHeaders(hdr("MCP-Protocol-Version", "1999-01-01"), m)
	if e == nil || e.Code != CodeUnsupportedProtocolVersion {
		t.Fatalf("got %v", e)
	}
	d, ok := e.Data.(UnsupportedProtocolVersionData)
	if !ok {
		t.Fatalf("Data is %T", e.Data)
	}
	if !reflect.DeepEqual(d.Supported, SupportedVersions) || d.Requested != "1999-01-01" {
		t.Errorf("data = %+v", d)
	}
	body := string(ErrorResponse(m.ID, e))
	want := `"data":{"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"requested":"1999-01-01"}`
	if !strings.Contains(body, want) {
		t.Errorf("response %s lacks %s", body, want)
	}
	// The data must not alias SupportedVersions.
	d.Supported[0] = "mutated"
	if SupportedVersions[0] != Version20260728 {
		t.Error("Data aliases SupportedVersions")
	}
}

func TestCheckHeadersNilMessage(t *testing.T) {
	if e := CheckHeaders(Header{}, nil); e == nil || e.Status != 400 {
		t.Errorf("got %v", e)
	}
}

func TestEffectiveVersion(t *testing.T) {
	tests := []struct {
		name string
		body string
		h    Header
		want string
	}{
		{"meta wins", listMeta0618, hdr("MCP-Protocol-Version", "2025-11-25"), "2025-06-18"},
		{"header", listNoMeta, hdr("MCP-Protocol-Version", "2025-11-25"), "2025-11-25"},
		{"initialize params", initialize, Header{}, "2025-06-18"},
		{"header beats initialize", initialize, hdr("MCP-Protocol-Version", "2025-11-25"), "2025-11-25"},
		{"default", listNoMeta, Header{}, "2025-03-26"},
		{"default nil header", listNoMeta, nil, "2025-03-26"},
		{"initialize-named notification ignored", `{"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":"2025-06-18"}}`, nil, "2025-03-26"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EffectiveVersion(tt.h, mustParse(t, tt.body)); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if got := EffectiveVersion(nil, nil); got != Version20250326 {
		t.Errorf("nil, nil: %q", got)
	}
}

func TestHeaderValueCoding(t *testing.T) {
	// Examples from the 2026-07-28 streamable HTTP "Value Encoding" table.
	tests := []struct {
		plain, encoded string
	}{
		{"us-west1", "us-west1"},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
		{"", ""},
		{"a b", "a b"},
		{"tab\there", "=?base64?dGFiCWhlcmU=?="},
		{"trailing\t", "=?base64?dHJhaWxpbmcJ?="},
		{"=?base64?", "=?base64?"},
		{"=?base64?=", "=?base64?PT9iYXNlNjQ/PQ==?="},
		{"file:///a b/c?x=1", "file:///a b/c?x=1"},
	}
	for _, tt := range tests {
		t.Run(tt.plain, func(t *testing.T) {
			if got := EncodeHeaderValue(tt.plain); got != tt.encoded {
				t.Errorf("Encode = %q, want %q", got, tt.encoded)
			}
			got, err := DecodeHeaderValue(tt.encoded)
			if err != nil || got != tt.plain {
				t.Errorf("Decode = %q, %v; want %q", got, err, tt.plain)
			}
		})
	}

	bad := []struct{ name, v string }{
		{"bad alphabet", "=?base64?a-b_?="},
		{"missing padding", "=?base64?YQ?="},
		{"too much padding", "=?base64?YQ===?="},
		{"non-canonical bits", "=?base64?YR==?="},
		{"embedded newline", "=?base64?YW\nJj?="},
		{"embedded CR", "=?base64?YW\rJj?="},
		{"space inside", "=?base64?YW Jj?="},
		{"overlapping markers", "=?base64?="},
		{"invalid utf8 payload", "=?base64?/w==?="},
		{"non-ascii byte", "caf\xc3\xa9"},
		{"control char", "a\x01b"},
		{"DEL", "a\x7fb"},
		{"newline", "a\nb"},
	}
	for _, tt := range bad {
		t.Run("bad "+tt.name, func(t *testing.T) {
			if got, err := DecodeHeaderValue(tt.v); err == nil {
				t.Errorf("Decode(%q) = %q, want error", tt.v, got)
			}
		})
	}
	t.Run("uppercase markers are plain", func(t *testing.T) {
		got, err := DecodeHeaderValue("=?BASE64?YQ==?=")
		if err != nil || got != "=?BASE64?YQ==?=" {
			t.Errorf("got %q %v", got, err)
		}
	})
	t.Run("empty base64", func(t *testing.T) {
		got, err := DecodeHeaderValue("=?base64??=")
		if err != nil || got != "" {
			t.Errorf("got %q %v", got, err)
		}
	})
}

// TestEchoedValuesCutOnRunes: a long header value with multi-byte
// characters at the cut comes back cut before the character, valid UTF-8,
// with the clip marker.
func TestEchoedValuesCutOnRunes(t *testing.T) {
	m := mustParse(t, callModern)
	for _, name := range []string{
		strings.Repeat("a", 63) + "é" + strings.Repeat("b", 40),
		strings.Repeat("a", 62) + "€" + strings.Repeat("b", 40),
		strings.Repeat("a", 61) + "😀" + strings.Repeat("b", 40),
	} {
		e := CheckHeaders(hdr("MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", EncodeHeaderValue(name)), m)
		if e == nil {
			t.Fatal("accepted")
		}
		if !utf8.ValidString(e.Message) || strings.ContainsRune(e.Message, utf8.RuneError) {
			t.Errorf("message %q: a character was split", e.Message)
		}
		if !strings.Contains(e.Message, "'"+name[:strings.IndexByte(name, 'a')+strings.Count(name, "a")]+"…'") {
			t.Errorf("message %q: not cut before the multi-byte character", e.Message)
		}
	}
}
