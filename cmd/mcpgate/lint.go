package main

import (
	"context"
	stdjson "encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/lint"
	"github.com/mcpgate/mcpgate/policy"
)

const (
	// maxDumpBytes bounds a dump read from a file or stdin.
	maxDumpBytes = 64 << 20
	// maxListPages bounds how many tools/list pages live mode fetches.
	maxListPages = 1000
	// defaultLintTimeout bounds listing a live upstream.
	defaultLintTimeout = 30 * time.Second
)

// errLintFailed is returned (wrapped) when findings reach --fail-on; main
// maps it to exit status 1.
var errLintFailed = errors.New("manifest lint failed")

// lintStdin is where FILE "-" is read from (tests replace it).
var lintStdin io.Reader = os.Stdin

// cmdManifestLint runs `mcpgate manifest lint`; args follow "lint".
func cmdManifestLint(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("manifest lint", stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON")
	failOn := fs.String("fail-on", lint.SeverityError, "exit 1 at or above this `severity` (error or warning)")
	maxDesc := fs.Int("max-description", lint.DefaultMaxDescription, "bound on a description, in `characters`")
	endpoint := fs.String("url", "", "the upstream's MCP endpoint `URL`")
	timeout := fs.Duration("timeout", defaultLintTimeout, "bound on listing a live upstream")
	cfgPath := fs.String("config", "", "lint the tools as the gateway exposes them: the `FILE`'s expose sections (upstreams[].tools.<tool>.expose) applied")
	upstream := fs.String("upstream", "", "with --config: the upstream the tools are of (`NAME`; default: the only one)")
	var headers headerFlag
	fs.Var(&headers, "header", "`'Name: value'` added to every request to --url (repeatable)")

	files, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	var problems []string
	switch {
	case len(files) > 1:
		problems = append(problems, fmt.Sprintf("give one FILE, not %d", len(files)))
	case len(files) == 1 && *endpoint != "":
		problems = append(problems, "give a FILE or --url, not both")
	case len(files) == 0 && *endpoint == "":
		problems = append(problems, "give a FILE (a saved tools/list answer, - for stdin) or --url")
	}
	if len(headers) > 0 && *endpoint == "" {
		problems = append(problems, "--header needs --url")
	}
	header, err := headers.parse()
	if err != nil {
		problems = append(problems, err.Error())
	}
	if *upstream != "" && *cfgPath == "" {
		problems = append(problems, "--upstream needs --config")
	}
	if *failOn != lint.SeverityError && *failOn != lint.SeverityWarning {
		problems = append(problems, fmt.Sprintf("--fail-on is %q; use error or warning", *failOn))
	}
	if *maxDesc <= 0 {
		problems = append(problems, "--max-description must be positive")
	}
	if *timeout <= 0 {
		problems = append(problems, "--timeout must be positive")
	}
	var u *url.URL
	if *endpoint != "" {
		u, err = url.Parse(*endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, "--url must be an http or https URL")
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "manifest lint:", p)
		}
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}

	var decls map[string]policy.ToolDeclaration
	if *cfgPath != "" {
		if decls, err = exposedDeclarations(*cfgPath, *upstream); err != nil {
			return err
		}
	}
	var tools []jsontext.Value
	var listFindings []lint.Finding
	if u != nil {
		lctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		tools, listFindings, err = listLiveTools(lctx, u, header, stderr)
	} else {
		tools, err = readDump(files[0], stderr)
	}
	if err != nil {
		return err
	}

	if decls != nil {
		tools = lint.Exposed(tools, decls)
	}
	report := lint.Lint(tools, lint.Options{MaxDescription: *maxDesc})
	report.Findings = append(report.Findings, listFindings...)

	if *asJSON {
		if err := json.MarshalWrite(stdout, report, jsontext.WithIndent("  ")); err != nil {
			return err
		}
		fmt.Fprintln(stdout)
	} else {
		writeLintReport(stdout, report)
	}
	if n := report.AtOrAbove(*failOn); n > 0 {
		return fmt.Errorf("%w: %s at or above %s", errLintFailed, plural(n, "finding"), *failOn)
	}
	return nil
}

// exposedDeclarations returns the tool declarations of upstream (the only
// one when "") in the configuration file path.
func exposedDeclarations(path, upstream string) (map[string]policy.ToolDeclaration, error) {
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	if upstream == "" {
		if len(cfg.Upstreams) != 1 {
			return nil, fmt.Errorf("manifest lint: %s has %d upstreams; name one with --upstream", path, len(cfg.Upstreams))
		}
		return cfg.Upstreams[0].Tools, nil
	}
	for _, u := range cfg.Upstreams {
		if u.Name == upstream {
			return u.Tools, nil
		}
	}
	return nil, fmt.Errorf("manifest lint: %s has no upstream %q", path, upstream)
}

// parseInterspersed parses flags that may come before or after the
// positional arguments (FILE --json as well as --json FILE) and returns the
// positional ones. "--" ends flag parsing.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, errUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stopped at a positional argument, or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeLintReport prints one line per finding, then a summary. Tool names,
// paths and messages carry the upstream's text, so characters a terminal
// would act on or hide (escape sequences, bidi controls) are escaped.
func writeLintReport(w io.Writer, r lint.Report) {
	for _, f := range r.Findings {
		tool := f.Tool
		if tool == "" {
			tool = "(list)"
		}
		line := fmt.Sprintf("%s: %s %s: %s", printable(tool), f.Severity, f.Rule, printable(f.Message))
		if f.Path != "" && f.Path != "tools" {
			line += " [" + printable(f.Path) + "]"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "%s: %s, %s\n", plural(r.Tools, "tool"), plural(r.Errors(), "error"), plural(r.Warnings(), "warning"))
}

// printable escapes the runes of s that are not graphic (controls, format
// characters such as zero-width and bidi marks) as \uXXXX.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08X`, r)
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
		}
	}
	return b.String()
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// readDump reads and parses a saved tools/list answer.
func readDump(path string, stderr io.Writer) ([]jsontext.Value, error) {
	var r io.Reader
	name := path
	if path == "-" {
		r, name = lintStdin, "stdin"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxDumpBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxDumpBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB", name, maxDumpBytes>>20)
	}
	tools, cursor, err := lint.ParseDumpPage(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if cursor != "" {
		fmt.Fprintf(stderr, "manifest lint: note: %s has a nextCursor, so it holds one page of a longer list; only that page is checked (use --url to list every page)\n", name)
	}
	return tools, nil
}

// listLiveTools lists every tool of a live upstream with the MCP Go SDK
// client, following cursors explicitly. A cursor seen before, or more than
// maxListPages pages, ends the listing with a list-pagination finding.
func listLiveTools(ctx context.Context, u *url.URL, header http.Header, stderr io.Writer) ([]jsontext.Value, []lint.Finding, error) {
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpgate-manifest-lint", Version: version()}, &mcp.ClientOptions{Logger: logger})
	transport := &mcp.StreamableClientTransport{
		Endpoint: u.String(),
		HTTPClient: &http.Client{
			Transport: headerTransport{base: http.DefaultTransport, header: header},
			// The transport adds --header fields to every request; following
			// a redirect would hand them to whatever host it names.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		DisableStandaloneSSE: true,
		MaxRetries:           -1,
	}
	where := u.Redacted()
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", where, err)
	}
	defer cs.Close()

	var tools []jsontext.Value
	var findings []lint.Finding
	seen := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, nil, fmt.Errorf("tools/list page %d from %s: %w", page, where, err)
		}
		for _, t := range res.Tools {
			b, err := stdjson.Marshal(t)
			if err != nil {
				return nil, nil, fmt.Errorf("tools/list page %d from %s: %w", page, where, err)
			}
			tools = append(tools, b)
		}
		next := res.NextCursor
		if next == "" {
			break
		}
		if seen[next] {
			findings = append(findings, lint.ListFinding("list-pagination", fmt.Sprintf(
				"page %d of tools/list returned the cursor %q again, so the listing never ends: the upstream must advance its cursor; lint stopped and checked the %s of the first %s",
				page, next, plural(len(tools), "tool"), plural(page, "page"))))
			break
		}
		if page == maxListPages {
			findings = append(findings, lint.ListFinding("list-pagination", fmt.Sprintf(
				"tools/list did not end within %d pages; lint stopped and checked the first %s: return fewer, larger pages",
				maxListPages, plural(len(tools), "tool"))))
			break
		}
		seen[next] = true
		cursor = next
	}
	return tools, findings, nil
}

// headerFlag collects repeated --header 'Name: value' flags. Set accepts
// anything, so the flag package never echoes a value (it may hold a
// token); parse checks them afterwards.
type headerFlag []string

func (h *headerFlag) String() string { return "" }

func (h *headerFlag) Set(s string) error {
	*h = append(*h, s)
	return nil
}

// parse returns the header fields, or a problem naming the flag by
// position and the field by name, never by value.
func (h headerFlag) parse() (http.Header, error) {
	out := http.Header{}
	for i, s := range h {
		name, value, ok := strings.Cut(s, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !validHeaderName(name) {
			return nil, fmt.Errorf("--header #%d is not 'Name: value' with a valid field name", i+1)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return nil, fmt.Errorf("--header #%d (%s) holds a line break or NUL", i+1, name)
		}
		out.Add(name, value)
	}
	return out, nil
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", r):
		default:
			return false
		}
	}
	return true
}

// headerTransport adds fixed header fields to every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	}
	return t.base.RoundTrip(req)
}
