package main

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/lint"
)

// Dumps for the file-mode tests.
const (
	// cleanTool passes every rule.
	cleanTool = `{"name":"get_booking","title":"Get booking","description":"Get one booking by its handle.",
		"inputSchema":{"type":"object","properties":{"booking_id":{"type":"string","maxLength":40}},"required":["booking_id"],"additionalProperties":false},
		"annotations":{"readOnlyHint":true}}`
	// warnTool only has warnings (no title, no additionalProperties: false).
	warnTool = `{"name":"list_bookings","description":"List the bookings.",
		"inputSchema":{"type":"object","properties":{}},"annotations":{"readOnlyHint":true}}`
	// errTool has errors (a tenant argument, no version on update).
	errTool = `{"name":"update_booking","title":"Update booking","description":"Change a booking.",
		"inputSchema":{"type":"object","properties":{"tenant":{"type":"string","maxLength":20}},"additionalProperties":false},
		"annotations":{"destructiveHint":false}}`
)

func runLint(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	if stdin != "" {
		old := lintStdin
		lintStdin = strings.NewReader(stdin)
		defer func() { lintStdin = old }()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cmdManifestLint(ctx, args, &out, &errb)
	return out.String(), errb.String(), err
}

func writeDump(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLintFile(t *testing.T) {
	clean := writeDump(t, `{"tools":[`+cleanTool+`]}`)
	warn := writeDump(t, `{"jsonrpc":"2.0","id":1,"result":{"tools":[`+cleanTool+`,`+warnTool+`]}}`)
	bad := writeDump(t, `[`+cleanTool+`,`+errTool+`]`)

	t.Run("clean", func(t *testing.T) {
		out, _, err := runLint(t, "", clean)
		if err != nil || out != "1 tool: 0 errors, 0 warnings\n" {
			t.Fatalf("err %v, out %q", err, out)
		}
	})
	t.Run("warnings pass by default", func(t *testing.T) {
		out, _, err := runLint(t, "", warn)
		if err != nil {
			t.Fatalf("err %v\n%s", err, out)
		}
		for _, want := range []string{
			"list_bookings: warning title-missing: ",
			"list_bookings: warning schema-additional-properties: ",
			"2 tools: 0 errors, 2 warnings\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("--fail-on warning", func(t *testing.T) {
		_, _, err := runLint(t, "", "--fail-on", "warning", warn)
		if !errors.Is(err, errLintFailed) || exitCode(err) != 1 || !strings.Contains(err.Error(), "2 findings at or above warning") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("errors fail", func(t *testing.T) {
		out, _, err := runLint(t, "", bad)
		if !errors.Is(err, errLintFailed) || exitCode(err) != 1 {
			t.Fatalf("err %v", err)
		}
		for _, want := range []string{
			"update_booking: error tenant-argument: argument \"tenant\" lets the caller choose the tenant",
			"[inputSchema.properties.tenant]",
			"update_booking: error update-version: ",
			"2 tools: 2 errors, 0 warnings\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("flags after FILE", func(t *testing.T) {
		out, _, err := runLint(t, "", bad, "--json", "--fail-on", "warning")
		if !errors.Is(err, errLintFailed) || !strings.HasPrefix(out, "{") {
			t.Fatalf("err %v, out %q", err, out)
		}
	})
	t.Run("--max-description", func(t *testing.T) {
		out, _, err := runLint(t, "", "--max-description", "10", "--fail-on", "warning", clean)
		if !errors.Is(err, errLintFailed) || !strings.Contains(out, "warning description-length") {
			t.Fatalf("err %v, out %q", err, out)
		}
	})
	t.Run("one page of a longer list", func(t *testing.T) {
		page := writeDump(t, `{"tools":[`+cleanTool+`],"nextCursor":"p2"}`)
		_, stderr, err := runLint(t, "", page)
		if err != nil || !strings.Contains(stderr, "nextCursor") {
			t.Fatalf("err %v, stderr %q", err, stderr)
		}
	})
}

// TestLintHumanOutputEscapes: a hostile tool name or property name cannot
// send escape sequences or bidi controls to the terminal.
func TestLintHumanOutputEscapes(t *testing.T) {
	f := writeDump(t, `[{"name":"create_\u001b[2Jx","description":"d","inputSchema":{"type":"object","properties":{"a\u202eb":{"type":"string"}}}}]`)
	out, _, err := runLint(t, "", f)
	if !errors.Is(err, errLintFailed) {
		t.Fatalf("err %v", err)
	}
	if strings.ContainsAny(out, "\x1b\u202e") {
		t.Fatalf("raw control characters in the output:\n%q", out)
	}
	if !strings.Contains(out, `create_\u001B[2Jx: error name-snake-case`) || !strings.Contains(out, `[inputSchema.properties.a\u202Eb]`) {
		t.Fatalf("escaped names missing:\n%s", out)
	}
}

func TestLintStdin(t *testing.T) {
	out, _, err := runLint(t, `[`+errTool+`]`, "-")
	if !errors.Is(err, errLintFailed) || !strings.Contains(out, "update_booking: error update-version") {
		t.Fatalf("err %v, out %q", err, out)
	}
	out, _, err = runLint(t, `{"tools":[`+cleanTool+`]}`, "--json", "-")
	if err != nil || !strings.Contains(out, `"tools": 1`) {
		t.Fatalf("err %v, out %q", err, out)
	}
}

func TestLintJSON(t *testing.T) {
	bad := writeDump(t, `[`+cleanTool+`,`+warnTool+`,`+errTool+`]`)
	out, _, err := runLint(t, "", "--json", bad)
	if !errors.Is(err, errLintFailed) {
		t.Fatalf("err %v", err)
	}
	var got struct {
		Tools    int            `json:"tools"`
		Errors   int            `json:"errors"`
		Warnings int            `json:"warnings"`
		Findings []lint.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &got, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if got.Tools != 3 || got.Errors != 2 || got.Warnings != 2 || len(got.Findings) != 4 {
		t.Fatalf("%+v", got)
	}
	f := got.Findings[0]
	if f.Tool != "list_bookings" || f.Severity != "warning" || f.Rule == "" || f.Message == "" || f.Path == "" {
		t.Fatalf("first finding %+v", f)
	}

	clean := writeDump(t, `[`+cleanTool+`]`)
	out, _, err = runLint(t, "", "--json", clean)
	if err != nil || !strings.Contains(out, `"findings": []`) {
		t.Fatalf("err %v, out %s", err, out)
	}
}

func TestLintBadInput(t *testing.T) {
	dupes := writeDump(t, `{"tools":[{"name":"a","name":"b"}]}`)
	notJSON := writeDump(t, `tools:`)
	rpcErr := writeDump(t, `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`)
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"duplicate member": {[]string{dupes}, "duplicate"},
		"not JSON":         {[]string{notJSON}, "not strict JSON"},
		"JSON-RPC error":   {[]string{rpcErr}, "Method not found"},
		"missing file":     {[]string{filepath.Join(t.TempDir(), "nope.json")}, "no such file"},
		"empty stdin":      {[]string{"-"}, "stdin"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := runLint(t, "", c.args...)
			if err == nil || errors.Is(err, errUsage) || errors.Is(err, errLintFailed) || exitCode(err) != 1 || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want a read error mentioning %q", err, c.want)
			}
		})
	}
}

func TestLintUsage(t *testing.T) {
	f := writeDump(t, `[`+cleanTool+`]`)
	for name, args := range map[string][]string{
		"nothing":             nil,
		"FILE and --url":      {f, "--url", "http://127.0.0.1:1/mcp"},
		"two files":           {f, f},
		"bad --fail-on":       {"--fail-on", "info", f},
		"--header sans --url": {"--header", "A: b", f},
		"malformed --header":  {"--url", "http://127.0.0.1:1/mcp", "--header", "Authorization Bearer s3cret"},
		"bad header name":     {"--url", "http://127.0.0.1:1/mcp", "--header", "Bad Name: x"},
		"header line break":   {"--url", "http://127.0.0.1:1/mcp", "--header", "X-A: b\r\nX-B: c"},
		"not an http URL":     {"--url", "ftp://example.com/mcp"},
		"unknown flag":        {"--bogus", f},
		"bad --max":           {"--max-description", "0", f},
		"help":                {"--help"},
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, err := runLint(t, "", args...)
			if !errors.Is(err, errUsage) || exitCode(err) != 2 {
				t.Fatalf("err %v, want usage", err)
			}
			if !strings.Contains(stderr, "mcpgate manifest lint") {
				t.Errorf("no usage text on stderr: %q", stderr)
			}
			if strings.Contains(stderr, "s3cret") {
				t.Errorf("stderr echoes a header value: %q", stderr)
			}
		})
	}
}

// serveMCP serves h at /mcp and returns the endpoint.
func serveMCP(t *testing.T, h http.Handler) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

func TestLintURLDemo(t *testing.T) {
	endpoint := serveMCP(t, demo.New(demo.Options{}).Handler())
	out, _, err := runLint(t, "", "--url", endpoint)
	if !errors.Is(err, errLintFailed) {
		t.Fatalf("err %v\n%s", err, out)
	}
	for _, want := range []string{
		"update_booking: error update-version: ",
		"create_booking: error tenant-argument: ",
		"create_booking: warning time-zone-unenforced: ",
		"cancel_booking: warning schema-additional-properties: ",
		"9 tools: 10 errors, ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "create-has-update") {
		t.Errorf("create_booking has update_booking:\n%s", out)
	}
}

// TestLintURLHeaders lists an upstream that wants a bearer token: without
// --header the listing fails, with it the tools are checked.
func TestLintURLHeaders(t *testing.T) {
	d := demo.New(demo.Options{}).Handler()
	var seen []string
	endpoint := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test-token" || r.Header.Get("X-Extra") != "1" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		seen = append(seen, r.Method)
		d.ServeHTTP(w, r)
	}))
	_, _, err := runLint(t, "", "--url", endpoint)
	if err == nil || errors.Is(err, errLintFailed) || errors.Is(err, errUsage) || exitCode(err) != 1 {
		t.Fatalf("without the header: err %v", err)
	}
	out, _, err := runLint(t, "", "--url", endpoint, "--header", "Authorization: Bearer test-token", "--header", "X-Extra: 1", "--json")
	if !errors.Is(err, errLintFailed) || !strings.Contains(out, `"tools": 9`) {
		t.Fatalf("with the header: err %v\n%s", err, out)
	}
	if len(seen) == 0 {
		t.Fatal("no request reached the upstream")
	}
}

// TestLintURLPages lists an SDK server that pages two tools at a time.
func TestLintURLPages(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "paged", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	names := []string{"get_a", "get_b", "get_c", "get_d", "get_e"}
	for _, n := range names {
		srv.AddTool(&mcp.Tool{
			Name: n, Title: "Get", Description: "Gets one thing.",
			InputSchema: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	}
	endpoint := serveMCP(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	out, _, err := runLint(t, "", "--url", endpoint)
	if err != nil || out != "5 tools: 0 errors, 0 warnings\n" {
		t.Fatalf("err %v, out %q", err, out)
	}
}

// TestLintURLRepeatedCursor lists a hand-written upstream whose cursor never
// advances: lint stops, checks what it got and reports list-pagination.
func TestLintURLRepeatedCursor(t *testing.T) {
	var lists int
	endpoint := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     stdjson.RawMessage `json:"id"`
			Method string             `json:"method"`
		}
		if err := stdjson.Unmarshal(body, &msg); err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		if len(msg.ID) == 0 { // a notification
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch msg.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"loop","version":"1"}}`
		case "tools/list":
			lists++
			result = `{"tools":[` + cleanTool + `],"nextCursor":"same"}`
		default: // server/discover and the rest: not supported
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"error":{"code":-32601,"message":"Method not found"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+result+`}`)
	}))
	out, _, err := runLint(t, "", "--url", endpoint)
	if !errors.Is(err, errLintFailed) {
		t.Fatalf("err %v\n%s", err, out)
	}
	if !strings.Contains(out, `(list): error list-pagination: page 2 of tools/list returned the cursor "same" again`) {
		t.Errorf("no list-pagination finding:\n%s", out)
	}
	// Two pages fetched, the same tool twice: name-unique says so too.
	if lists != 2 || !strings.Contains(out, "get_booking: error name-unique") || !strings.Contains(out, "2 tools: 2 errors") {
		t.Errorf("lists %d:\n%s", lists, out)
	}
}

func TestLintURLUnreachable(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	endpoint := ts.URL + "/mcp"
	ts.Close()
	start := time.Now()
	_, _, err := runLint(t, "", "--url", endpoint, "--timeout", "10s")
	if err == nil || errors.Is(err, errUsage) || errors.Is(err, errLintFailed) || exitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	if !strings.Contains(err.Error(), "connecting to") {
		t.Errorf("err %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestLintURLNoRedirect: a redirect is not followed, so --header fields
// never reach the host it names.
func TestLintURLNoRedirect(t *testing.T) {
	var leaked bool
	other := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked = true
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	endpoint := serveMCP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other, http.StatusTemporaryRedirect)
	}))
	_, _, err := runLint(t, "", "--url", endpoint, "--header", "Authorization: Bearer s3cret")
	if err == nil || errors.Is(err, errLintFailed) || exitCode(err) != 1 {
		t.Fatalf("err %v", err)
	}
	if leaked {
		t.Fatal("the Authorization header followed the redirect")
	}
}
