package lint_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/lint"
)

func TestLintParseDump(t *testing.T) {
	tool := `{"name":"get_booking","inputSchema":{"type":"object"}}`
	ok := []struct {
		name, data string
		tools      int
		cursor     string
	}{
		{"result", `{"tools":[` + tool + `]}`, 1, ""},
		{"result with page", `{"tools":[` + tool + `,` + tool + `],"nextCursor":"abc","_meta":{}}`, 2, "abc"},
		{"json-rpc", `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + tool + `]}}`, 1, ""},
		{"array", `[` + tool + `]`, 1, ""},
		{"empty array", ` [ ] `, 0, ""},
		{"empty result", `{"tools":[]}`, 0, ""},
	}
	for _, c := range ok {
		t.Run(c.name, func(t *testing.T) {
			vs, cursor, err := lint.ParseDumpPage([]byte(c.data))
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != c.tools || cursor != c.cursor || vs == nil {
				t.Fatalf("got %d tools, cursor %q", len(vs), cursor)
			}
		})
	}
	bad := []struct{ name, data, want string }{
		{"empty", ``, "not strict JSON"},
		{"not json", `tools: []`, "not strict JSON"},
		{"trailing data", `{"tools":[]} {}`, "not strict JSON"},
		{"duplicate top-level name", `{"tools":[],"tools":[]}`, "duplicate"},
		{"duplicate name inside a tool", `{"tools":[{"name":"a","name":"b"}]}`, "duplicate"},
		{"duplicate name deep in a schema", `[{"name":"a","inputSchema":{"properties":{"x":{},"x":{}}}}]`, "duplicate"},
		{"invalid UTF-8", "{\"tools\":[{\"name\":\"a\xff\"}]}", "UTF-8"},
		{"string", `"tools"`, "neither"},
		{"no tools", `{"result":{}}`, `no "tools"`},
		{"tools not an array", `{"tools":{}}`, "not an array"},
		{"tool not an object", `{"tools":[` + tool + `,"get_booking"]}`, "tools[1] is not an object"},
		{"json-rpc error", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`, "-32601: Method not found"},
		{"json-rpc without result", `{"jsonrpc":"2.0","id":1}`, "without a result"},
		{"json-rpc result without tools", `{"jsonrpc":"2.0","id":1,"result":{"prompts":[]}}`, `result has no "tools"`},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := lint.ParseDump([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, c.want)
			}
		})
	}
}

// TestRuleDocs keeps the rule table of the package documentation and of
// RULES.md in step with Rules.
func TestLintRuleDocs(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile("RULES.md")
	if err != nil {
		t.Fatal(err)
	}
	docRow := regexp.MustCompile(`(?m)^//\t([a-z-]+)\s+(error|warning)\s`)
	mdRow := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (error|warning) \\|")
	for name, rows := range map[string][][]string{
		"doc.go":   docRow.FindAllStringSubmatch(string(doc), -1),
		"RULES.md": mdRow.FindAllStringSubmatch(string(md), -1),
	} {
		if len(rows) != len(lint.Rules) {
			t.Errorf("%s lists %d rules, lint.Rules has %d", name, len(rows), len(lint.Rules))
		}
		for i, row := range rows {
			if i < len(lint.Rules) && (row[1] != lint.Rules[i].ID || row[2] != lint.Rules[i].Severity) {
				t.Errorf("%s row %d: %s %s, want %s %s", name, i, row[1], row[2], lint.Rules[i].ID, lint.Rules[i].Severity)
			}
		}
	}
}
