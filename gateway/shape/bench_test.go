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
