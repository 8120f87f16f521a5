package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/policy"
)

// TestLogToolsNextStep: the start-up hint names the command that drafts a
// configuration from this upstream: its URL, or for a stdio upstream its
// command line, quoted for a shell (the bridge's URL, whose port and
// secret end with the process, would be refused).
func TestLogToolsNextStep(t *testing.T) {
	const bridge = "http://127.0.0.1:41234/mcp"
	for _, tc := range []struct {
		name string
		u    config.Upstream
		want string
	}{
		{"http", config.Upstream{Name: "crm", URL: "http://crm.internal/mcp"},
			"`mcpgate init --upstream http://crm.internal/mcp --out mcpgate.yaml`"},
		{"stdio", config.Upstream{Name: "default", URL: bridge,
			Command: &config.Command{Argv: []string{"npx", "-y", "@modelcontextprotocol/server-everything"}}},
			"`mcpgate init --upstream-command \"npx -y @modelcontextprotocol/server-everything\" --out mcpgate.yaml`"},
		{"stdio with quotes", config.Upstream{Name: "default", URL: bridge,
			Command: &config.Command{Argv: []string{"sh", "-c", "exec server $PORT"}}},
			"`mcpgate init --upstream-command 'sh -c '\\''exec server $PORT'\\''' --out mcpgate.yaml`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			a := &App{log: slog.New(slog.NewJSONHandler(&buf, nil))}
			tc.u.UndeclaredTools = policy.UndeclaredConfirm
			a.logTools(tc.u, []string{"echo"})
			var msgs []string
			for line := range strings.Lines(buf.String()) {
				var rec struct{ Msg string }
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(rec.Msg, tc.want) {
					return
				}
				msgs = append(msgs, rec.Msg)
			}
			t.Fatalf("no message holds %s:\n%s", tc.want, strings.Join(msgs, "\n"))
		})
	}
}
