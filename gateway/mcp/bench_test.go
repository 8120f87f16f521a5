package mcp

import "testing"

// benchToolsCall is a realistic 2026-07-28 tools/call as an SDK client sends
// it: per-request _meta and a few arguments.
const benchToolsCall = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{` +
	`"name":"create_ticket",` +
	`"arguments":{"project":"OPS","title":"Disk usage above 90% on db-3","priority":2,` +
	`"labels":["storage","alert"],"assignee":{"id":"u-1842","notify":false}},` +
	`"_meta":{"progressToken":"tok-42",` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"claude-code","version":"2.1.0"},` +
	`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}},"extensions":{}}}}}`

func BenchmarkParseToolsCall(b *testing.B) {
	body := []byte(benchToolsCall)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		m, e := Parse(body, DefaultMaxDepth)
		if e != nil || m.Name != "create_ticket" {
			b.Fatal(e)
		}
	}
}

func BenchmarkParseAndCheckHeaders(b *testing.B) {
	body := []byte(benchToolsCall)
	h := Header{
		HeaderProtocolVersion: {"2026-07-28"},
		HeaderMethod:          {"tools/call"},
		HeaderName:            {"create_ticket"},
	}
	b.ReportAllocs()
	for b.Loop() {
		m, e := Parse(body, DefaultMaxDepth)
		if e != nil {
			b.Fatal(e)
		}
		if e := CheckHeaders(h, m); e != nil {
			b.Fatal(e)
		}
	}
}

func BenchmarkParseDuplicateRejected(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"x":1,"\u0078":2}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, e := Parse(body, DefaultMaxDepth); e == nil {
			b.Fatal("accepted")
		}
	}
}

// benchAnswer is the e2e bench upstream's answer to get_status as the Go
// MCP SDK writes it.
const benchAnswer = `{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpgate-bench-upstream","version":"1"}},"content":[{"type":"text","text":"{\"checked_at\":\"2026-01-02T03:04:05Z\",\"region\":\"eu-west\",\"service\":\"db\",\"state\":\"ok\"}"}],"structuredContent":{"checked_at":"2026-01-02T03:04:05Z","region":"eu-west","service":"db","state":"ok"},"resultType":"complete"}}`

func BenchmarkParseAnswer(b *testing.B) {
	body := []byte(benchAnswer)
	var m Message
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, e := ParseInto(&m, body, DefaultMaxDepth); e != nil || m.Result == nil {
			b.Fatal(e)
		}
	}
}
