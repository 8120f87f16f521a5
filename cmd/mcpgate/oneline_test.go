package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/demo"
)

// startServe runs `mcpgate serve` with args until the test ends and
// returns the proxy's base URL and the log.
func startServe(t *testing.T, args ...string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var errb, out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, args...), &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	ready := regexp.MustCompile(`mcpgate ready proxy=(http://\S+)`)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := ready.FindStringSubmatch(out.String()); m != nil {
			return m[1], &errb
		}
		select {
		case err := <-done:
			done <- err
			t.Fatalf("serve ended: %v\n%s", err, errb.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatalf("serve not ready:\n%s", errb.String())
	return "", nil
}

func connect(t *testing.T, url string) *sdk.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := sdk.NewClient(&sdk.Implementation{Name: "oneline-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func structured(t *testing.T, r *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(r.StructuredContent)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// The one-line mode in front of the demo upstream: every tool is listed,
// a tool named with --read-tools runs at once, every other call answers a
// preview with the exact arguments and confirm_action runs it once; the
// start-up log says what is usable and what to do next.
func TestServeOneLineListsAndConfirms(t *testing.T) {
	up := demo.New(demo.Options{})
	srv := httptest.NewServer(up.Handler())
	defer srv.Close()
	base, logs := startServe(t, "--upstream", srv.URL+"/mcp", "--read-tools", demo.ToolFindCustomers)

	for _, want := range []string{
		"upstream tools", "listed=9", "declared=1", "undeclared=8", "usable=9", "undeclared_tools=confirm",
		"8 tools are listed but not declared: every call of one shows a preview with its exact arguments and runs only after a person confirms it",
		"next step: `mcpgate init --upstream " + srv.URL + "/mcp --out mcpgate.yaml`",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up log lacks %q:\n%s", want, logs.String())
		}
	}

	cs := connect(t, base+"/mcp")
	ctx := context.Background()
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "8 tools of this server") || !strings.Contains(ins, "runs only after a person confirms it") {
		t.Errorf("instructions = %q", ins)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{demo.ToolFindCustomers, demo.ToolCancelBooking, demo.ToolPageTechnician, "confirm_action"} {
		if !names[want] {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}

	// The declared read runs at once.
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: demo.ToolFindCustomers, Arguments: map[string]any{"query": "a"}})
	if err != nil || r.IsError {
		t.Fatalf("find_customers: %v %+v", err, r)
	}
	if up.Calls(demo.ToolFindCustomers) != 1 {
		t.Errorf("find_customers ran %d times", up.Calls(demo.ToolFindCustomers))
	}

	// An undeclared tool: a preview, nothing upstream.
	r, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: demo.ToolCancelBooking, Arguments: map[string]any{"booking_id": "B-1001"}})
	if err != nil {
		t.Fatal(err)
	}
	p := structured(t, r)
	if p["status"] != "confirmation_required" || p["effect"] != "delete" || p["approval"] != "client" {
		t.Fatalf("preview = %v", p)
	}
	summary, _ := p["confirm_summary"].(string)
	if !strings.Contains(summary, "not declared: what it does is unknown") || !strings.Contains(summary, `{"booking_id":"B-1001"}`) {
		t.Errorf("confirm_summary = %q", summary)
	}
	if n := up.Calls(demo.ToolCancelBooking); n != 0 {
		t.Fatalf("cancel_booking ran %d times before confirmation", n)
	}
	confirm := &sdk.CallToolParams{Name: "confirm_action", Arguments: map[string]any{"confirm_token": p["confirm_token"], "confirm_summary": summary}}
	r, err = cs.CallTool(ctx, confirm)
	if err != nil || r.IsError {
		t.Fatalf("confirm_action: %v %+v", err, r)
	}
	if n := up.Calls(demo.ToolCancelBooking); n != 1 {
		t.Errorf("cancel_booking ran %d times after confirmation, want 1", n)
	}
	// The token is spent: a second confirmation runs nothing.
	if r, err = cs.CallTool(ctx, confirm); err == nil && !r.IsError {
		t.Errorf("second confirm_action succeeded: %+v", r)
	}
	if n := up.Calls(demo.ToolCancelBooking); n != 1 {
		t.Errorf("cancel_booking ran %d times, want 1", n)
	}
}

// Config mode keeps refusing undeclared tools (undeclared_tools unset),
// and says what the operator adds: at start, in the instructions and in
// the refusal.
func TestServeConfigRefusesUndeclared(t *testing.T) {
	up := demo.New(demo.Options{})
	srv := httptest.NewServer(up.Handler())
	defer srv.Close()
	cfg := filepath.Join(t.TempDir(), "mcpgate.yaml")
	yaml := "upstreams:\n  - name: crm\n    url: " + srv.URL + "/mcp\n    tools:\n      find_customers: {effect: read}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	base, logs := startServe(t, "--config", cfg)
	for _, want := range []string{
		"listed=9", "declared=1", "undeclared=8", "usable=1", "undeclared_tools=refuse",
		"8 tools the upstream lists are hidden and refused because nobody declared them; declare each under upstreams[].tools, or set upstreams[].undeclared_tools: confirm",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("start-up log lacks %q:\n%s", want, logs.String())
		}
	}
	cs := connect(t, base+"/mcp")
	ctx := context.Background()
	ins := cs.InitializeResult().Instructions
	if !strings.HasPrefix(ins, "Field-service bookings") || !strings.Contains(ins, "8 tools this server offers are hidden by the gateway because its operator has not declared them") ||
		!strings.Contains(ins, `under the upstream "crm"`) || !strings.Contains(ins, "undeclared_tools: confirm") {
		t.Errorf("instructions = %q", ins)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tools) != 1 || list.Tools[0].Name != demo.ToolFindCustomers {
		t.Errorf("tools/list = %d tools", len(list.Tools))
	}
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: demo.ToolCancelBooking, Arguments: map[string]any{"booking_id": "B-1001"}})
	if err != nil {
		t.Fatal(err)
	}
	text := ""
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			text += tc.Text
		}
	}
	if !r.IsError || !strings.Contains(text, "tool_not_declared") || !strings.Contains(text, `under the upstream \"crm\"`) ||
		!strings.Contains(text, "undeclared_tools: confirm") {
		t.Errorf("refusal = %s", text)
	}
	if up.Calls(demo.ToolCancelBooking) != 0 {
		t.Error("cancel_booking ran")
	}
}

// TestServeUndeclaredToolsFlag: --undeclared-tools takes confirm or
// refuse, only in the one-line mode.
func TestServeUndeclaredToolsFlag(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown value", []string{"--upstream", "http://127.0.0.1:1/mcp", "--undeclared-tools", "allow"}, `--undeclared-tools "allow": use "confirm" or "refuse"`},
		{"with a config file", []string{"--config", "x.yaml", "--undeclared-tools", "refuse"}, "--undeclared-tools is for the one-line mode"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := run(context.Background(), append([]string{"serve"}, tt.args...), &out, &errb)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("serve %v: error %v, want it to contain %q", tt.args, err, tt.want)
			}
		})
	}
}

// TestServeOneLineRefuse: with --undeclared-tools refuse the policy sees
// undeclared tools as such: the default policy lists only the tool named
// with --read-tools.
func TestServeOneLineRefuse(t *testing.T) {
	srv := httptest.NewServer(demo.New(demo.Options{}).Handler())
	t.Cleanup(srv.Close)
	base, _ := startServe(t, "--upstream", srv.URL+"/mcp", "--undeclared-tools", "refuse", "--read-tools", demo.ToolFindCustomers)
	list, err := connect(t, base+"/mcp").ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if len(names) != 1 || names[0] != demo.ToolFindCustomers {
		t.Errorf("tools/list = %v, want only %s", names, demo.ToolFindCustomers)
	}
}
