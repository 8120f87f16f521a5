package shape

import (
	"testing"

	"github.com/mcpgate/mcpgate/internal/demo"
)

// BenchmarkToolResult: the demo's find_customers answer (three customers
// with notes and portal passwords, ~2 KiB with its text mirror) under the
// quickstart declaration, and answers that need no change.
func BenchmarkToolResult(b *testing.B) {
	decl := quickstart(b)
	withSecrets := decl["find_customers"]
	withSecrets.SecretNames = demoSecrets
	clean := findCustomersOut()
	for i := range clean.Customers {
		clean.Customers[i].PortalPassword = ""
	}
	for _, c := range []struct {
		name  string
		rules Rules
		out   any
		nilOK bool
	}{
		{"find_customers/quickstart", decl["find_customers"], findCustomersOut(), false},
		{"find_customers/quickstart+secrets", withSecrets, findCustomersOut(), false},
		{"get_booking/quickstart", decl["get_booking"], injected, false},
		{"unchanged/no_rules", Rules{}, findCustomersOut(), true},
		{"unchanged/secret_names", Rules{SecretNames: []string{"password", "api_key"}}, clean, true},
		{"unchanged/mute_booking_alerts", decl["mute_booking_alerts"], demo.AlertMute{BookingID: "B-1001", Minutes: 30, AlertsMutedUntil: "2026-07-01T08:30:00Z"}, true},
	} {
		s := mustCompile(b, c.rules)
		in := demoResult(b, c.out)
		out, err := s.ToolResult(in)
		if err != nil || (out == nil) != c.nilOK {
			b.Fatalf("%s: out %s, err %v", c.name, out, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.ToolResult(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// sdkResult is the result of the e2e bench upstream's get_status answer
// as the Go MCP SDK writes it (serverInfo _meta, sorted members).
const sdkResult = `{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpgate-bench-upstream","version":"1"}},"content":[{"type":"text","text":"{\"checked_at\":\"2026-01-02T03:04:05Z\",\"region\":\"eu-west\",\"service\":\"db\",\"state\":\"ok\"}"}],"structuredContent":{"checked_at":"2026-01-02T03:04:05Z","region":"eu-west","service":"db","state":"ok"},"resultType":"complete"}`

// BenchmarkToolResultSDK: that result under the bench's declaration of
// get_status (an allowlist that drops region, the secret name password),
// and under one declaring untrusted text instead.
func BenchmarkToolResultSDK(b *testing.B) {
	for _, c := range []struct {
		name  string
		rules Rules
	}{
		{"result_fields", Rules{ResultFields: []string{"service", "state", "checked_at"}, SecretNames: []string{"password"}}},
		{"untrusted_text", Rules{UntrustedText: []string{"state"}, SecretNames: []string{"password"}}},
	} {
		s := mustCompile(b, c.rules)
		in := []byte(sdkResult)
		if out, err := s.ToolResult(in); err != nil || out == nil {
			b.Fatalf("%s: out %s, err %v", c.name, out, err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.ToolResultError(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
