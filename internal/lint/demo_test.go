package lint_test

import (
	"context"
	stdjson "encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/lint"
)

// demoTools lists the demo upstream's tools with the SDK client, as the
// live mode of `mcpgate manifest lint` does, and returns the
// tools/list result re-encoded.
func demoTools(t *testing.T) *mcp.ListToolsResult {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", demo.New(demo.Options{}).Handler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "lint-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.NextCursor != "" {
		t.Fatalf("the demo lists on one page; got cursor %q", res.NextCursor)
	}
	return res
}

func encodeTools(t *testing.T, tools []*mcp.Tool) []jsontext.Value {
	t.Helper()
	out := make([]jsontext.Value, len(tools))
	for i, tl := range tools {
		b, err := stdjson.Marshal(tl)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = b
	}
	return out
}

// TestDemoReport lints the demo upstream, naive by design, and checks the
// report names what the demo gets wrong (and nothing it gets right).
func TestLintDemoReport(t *testing.T) {
	res := demoTools(t)
	r := lint.Lint(encodeTools(t, res.Tools), lint.Options{})
	if r.Tools != len(demo.ToolNames) {
		t.Fatalf("tools = %d, want %d", r.Tools, len(demo.ToolNames))
	}
	got := map[string][]string{} // tool → rules, with duplicates
	for _, f := range r.Findings {
		got[f.Tool] = append(got[f.Tool], f.Rule)
	}
	has := func(tool, rule string) bool { return slices.Contains(got[tool], rule) }
	find := func(tool, rule, path string) *lint.Finding {
		for i, f := range r.Findings {
			if f.Tool == tool && f.Rule == rule && f.Path == path {
				return &r.Findings[i]
			}
		}
		return nil
	}

	for _, name := range demo.ToolNames {
		// Every tool takes a tenant argument, sets no additionalProperties
		// and has no title.
		if find(name, "tenant-argument", "inputSchema.properties.tenant") == nil {
			t.Errorf("%s: no tenant-argument finding", name)
		}
		if find(name, "schema-additional-properties", "inputSchema") == nil {
			t.Errorf("%s: no schema-additional-properties finding", name)
		}
		if !has(name, "title-missing") {
			t.Errorf("%s: no title-missing finding", name)
		}
		// Its names and texts are fine.
		for _, rule := range []string{"name-snake-case", "name-length", "name-verb-object", "name-unique",
			"description-missing", "description-instructions", "description-injection", "invisible-characters",
			"schema-object", "schema-depth", "schema-remote-ref", "money-number", "money-unit", "batch-expected-count"} {
			if has(name, rule) {
				t.Errorf("%s: unexpected %s", name, rule)
			}
		}
	}
	// Hints: reads and cancel_booking are explicit, the other writes not.
	for _, name := range []string{demo.ToolCreateBooking, demo.ToolUpdateBooking, demo.ToolSendBookingConfirmation, demo.ToolPageTechnician, demo.ToolMuteBookingAlerts} {
		if !has(name, "hints-explicit") {
			t.Errorf("%s: no hints-explicit finding", name)
		}
	}
	for _, name := range []string{demo.ToolFindCustomers, demo.ToolGetBooking, demo.ToolListTechnicians, demo.ToolCancelBooking} {
		if has(name, "hints-explicit") || has(name, "hints-conflict") {
			t.Errorf("%s: unexpected hints finding", name)
		}
	}
	// create_booking has its update_booking; update_booking takes no version.
	if has(demo.ToolCreateBooking, "create-has-update") {
		t.Error("create_booking has update_booking, yet create-has-update fired")
	}
	if !has(demo.ToolUpdateBooking, "update-version") {
		t.Error("update_booking: no update-version finding")
	}
	// start says "RFC 3339 with offset" only in its description.
	for _, name := range []string{demo.ToolCreateBooking, demo.ToolUpdateBooking} {
		f := find(name, "time-zone-unenforced", "inputSchema.properties.start")
		if f == nil || !strings.Contains(f.Message, "format: date-time") {
			t.Errorf("%s: start should get time-zone-unenforced with a fix, got %v", name, f)
		}
		if has(name, "time-zone") {
			t.Errorf("%s: time-zone fired although the description asks for an offset", name)
		}
	}
	// Unbounded strings everywhere; minutes has a minimum but no maximum;
	// status is an enum.
	if f := find(demo.ToolMuteBookingAlerts, "schema-bounds", "inputSchema.properties.minutes"); f == nil || !strings.Contains(f.Message, "no maximum") {
		t.Errorf("minutes: got %v", f)
	}
	if find(demo.ToolUpdateBooking, "schema-bounds", "inputSchema.properties.notes") == nil {
		t.Error("update_booking.notes: no schema-bounds finding")
	}
	if find(demo.ToolUpdateBooking, "schema-bounds", "inputSchema.properties.status") != nil {
		t.Error("update_booking.status is an enum, yet schema-bounds fired")
	}
	// The SDK server lists tools sorted by name.
	if len(got[""]) != 0 {
		t.Errorf("list findings: %v", got[""])
	}
	// Errors: one tenant argument per tool and update_booking's version.
	if want := len(demo.ToolNames) + 1; r.Errors() != want {
		t.Errorf("errors = %d, want %d:%s", r.Errors(), want, dump(r))
	}
}

// TestDemoDumpForms lints the demo's list saved in each dump form and gets
// the same report as from the live list.
func TestLintDemoDumpForms(t *testing.T) {
	res := demoTools(t)
	want := lint.Lint(encodeTools(t, res.Tools), lint.Options{})
	result, err := stdjson.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	tools, err := stdjson.Marshal(res.Tools)
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string]string{
		"result":   string(result),
		"json-rpc": `{"jsonrpc":"2.0","id":7,"result":` + string(result) + `}`,
		"array":    string(tools),
	}
	for name, data := range forms {
		t.Run(name, func(t *testing.T) {
			vs, err := lint.ParseDump([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			if got := lint.Lint(vs, lint.Options{}); !slices.Equal(got.Findings, want.Findings) || got.Tools != want.Tools {
				t.Fatalf("report differs:%s\nwant:%s", dump(got), dump(want))
			}
		})
	}
}
