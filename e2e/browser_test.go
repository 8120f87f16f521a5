package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/tokens"
	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// The browser test's parts (TestApprovalPageInBrowser).
const (
	// browserDir holds the Playwright driver (approve.mjs, package.json).
	browserDir = "browser"
	// browserArtifacts is where the screenshots go (gitignored).
	browserArtifacts = "browser/artifacts"
	// docsScreenshot is the README's copy of the approval page, refreshed
	// with MCPGATE_UPDATE_SCREENSHOT=1.
	docsScreenshot = "../docs/approval-page.png"

	// EnvChromium names the Chromium binary (default /usr/bin/chromium, or
	// chromium on $PATH). EnvRequireBrowser=1 (scripts/test.sh) or CI set
	// makes a missing Chromium, node or playwright-core a failure, not a
	// skip.
	envChromium       = "MCPGATE_CHROMIUM"
	envRequireBrowser = "MCPGATE_REQUIRE_BROWSER"
	envUpdateShot     = "MCPGATE_UPDATE_SCREENSHOT"

	// The approval page's OAuth client at the provider and the people.
	approvalClient       = "approval-page"
	approvalClientSecret = "approval-page-secret"
	approverSubject      = "olivia" // acme, holds every demo right
	requesterSubject     = "alice"  // acme, the person the agent acts for
)

// browserTools finds Chromium, node and the installed playwright-core.
// When one is missing the test is skipped on a developer's machine and
// fails where it must run (CI, or MCPGATE_REQUIRE_BROWSER=1).
func browserTools(t *testing.T) (chromium, node string) {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if os.Getenv("CI") != "" || os.Getenv(envRequireBrowser) == "1" {
			t.Fatalf("%s (CI / %s=1: the browser test must run)", msg, envRequireBrowser)
		}
		t.Skipf("%s; install it (apt-get install chromium; cd e2e/browser && npm ci) or set %s", msg, envChromium)
	}
	chromium = os.Getenv(envChromium)
	if chromium == "" {
		if _, err := os.Stat("/usr/bin/chromium"); err == nil {
			chromium = "/usr/bin/chromium"
		} else if p, err := exec.LookPath("chromium"); err == nil {
			chromium = p
		}
	}
	if chromium == "" {
		missing("Chromium not found (Debian package chromium)")
	} else if _, err := os.Stat(chromium); err != nil {
		missing("%s=%s: %v", envChromium, chromium, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node not found")
	}
	if _, err := os.Stat(filepath.Join(browserDir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing("playwright-core is not installed in e2e/browser (npm ci)")
	}
	return chromium, node
}

// browserPlan is approve.mjs's input (see its header).
type browserPlan struct {
	Chromium    string          `json:"chromium"`
	Subject     string          `json:"subject"`
	TimeoutMS   int             `json:"timeout_ms"`
	FailureShot string          `json:"failure_shot,omitempty"`
	Actions     []browserAction `json:"actions"`
}

type browserAction struct {
	URL        string `json:"url"`
	Decision   string `json:"decision"`
	Reason     string `json:"reason,omitempty"`
	LoginShot  string `json:"login_shot,omitempty"`
	PageShot   string `json:"page_shot,omitempty"`
	ResultShot string `json:"result_shot,omitempty"`
}

// browserReport is approve.mjs's output.
type browserReport struct {
	Chromium string `json:"chromium"`
	Actions  []struct {
		URL   string `json:"url"`
		Login *struct {
			URL  string `json:"url"`
			Hint string `json:"hint"`
		} `json:"login"`
		Landed      string   `json:"landed"`
		Summary     *string  `json:"summary"`
		Content     *string  `json:"content"`
		Untrusted   []string `json:"untrusted"`
		ContentTags []string `json:"content_tags"`
		Requester   *string  `json:"requester"`
		Expires     *string  `json:"expires"`
		ApproveForm bool     `json:"approve_form"`
		RejectForm  bool     `json:"reject_form"`
		CSRFFields  int      `json:"csrf_fields"`
		Scripts     int      `json:"scripts"`
		Canary      any      `json:"canary"`
		CanaryAfter any      `json:"canary_after"`
		After       string   `json:"after"`
		Result      *string  `json:"result"`
	} `json:"actions"`
	Cookies []struct {
		Name     string `json:"name"`
		HTTPOnly bool   `json:"http_only"`
		Secure   bool   `json:"secure"`
		SameSite string `json:"same_site"`
	} `json:"cookies"`
	Console []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"console"`
	PageErrors  []string `json:"page_errors"`
	Navigations []string `json:"navigations"`
	Requests    []string `json:"requests"`
	Error       string   `json:"error"`
	FailedAt    string   `json:"failed_at"`
	FailedHTML  string   `json:"failed_html"`
}

// runBrowser runs approve.mjs with plan and decodes its report. A step it
// could not drive fails the test with what the browser last saw.
func runBrowser(t *testing.T, node string, plan browserPlan) browserReport {
	t.Helper()
	in, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "approve.mjs")
	cmd.Dir = browserDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var r browserReport
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &r); err != nil {
		t.Fatalf("approve.mjs: %v; no report (%v)\nstdout: %s\nstderr: %s", runErr, err, stdout.String(), stderr.String())
	}
	if runErr != nil || r.Error != "" {
		t.Fatalf("approve.mjs could not drive the page: %v: %s\nat %s (screenshot %s)\nnavigations: %v\nhtml: %s\nstderr: %s",
			runErr, r.Error, r.FailedAt, plan.FailureShot, r.Navigations, r.FailedHTML, stderr.String())
	}
	return r
}

// approvalPolicyDir is mcpgate's built-in policy with deployment data
// that sends notify and wake calls to the approval page (data.mcpgate.
// approval, rego/mcpgate.rego _approval).
func approvalPolicyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := fs.ReadDir(mcpgaterego.Default, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".rego") || strings.HasSuffix(e.Name(), "_test.rego") {
			continue
		}
		b, err := fs.ReadFile(mcpgaterego.Default, e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := `{"mcpgate": {"approval": {"notify": "out_of_band", "wake": "out_of_band"}}}`
	if err := os.WriteFile(filepath.Join(dir, "approval.json"), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// freeLoopbackAddr returns a loopback address with a port that was free a
// moment ago: the admin listener's address must be known before the
// provider starts, which registers the page's redirect URI on it, and the
// provider's before it starts, to name it by another host.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// callTool calls a tool through the agent's MCP session.
func callTool(t *testing.T, cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	return res
}

// resultText joins a tool result's text content.
func resultText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// oobPreview is the structuredContent of an out-of-band preview.
type oobPreview struct {
	Status         string `json:"status"`
	Tool           string `json:"tool"`
	ConfirmToken   string `json:"confirm_token"`
	ConfirmSummary string `json:"confirm_summary"`
	Approval       string `json:"approval"`
	ApprovalURL    string `json:"approval_url"`
	NextTool       string `json:"next_tool"`
}

func previewOf(t *testing.T, r *sdk.CallToolResult) oobPreview {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var p oobPreview
	if err := json.Unmarshal(b, &p); err != nil || p.ConfirmToken == "" {
		t.Fatalf("not a preview: %s (%v)\n%s", b, err, resultText(r))
	}
	return p
}

// TestApprovalPageInBrowser is the approval page's real-browser test: an
// agent (the MCP Go SDK client) calls a notify tool through mcpgate; the policy
// sends it to the approval page, so the preview carries approval_url and
// confirm_action answers approval_pending. Headless Chromium (Debian's,
// driven by playwright-core) opens the link, is sent to the real OpenID
// provider's sign-in page, signs in as a second person of the tenant who
// holds the right, sees the action (summary, content, requester, expiry)
// and approves it; the agent's confirm_action then runs the tool exactly
// once. A wake call whose message carries markup and an injection canary
// is shown inert (no elements, no script ran) and rejected in the same
// browser session (no second sign-in); it never runs. Screenshots are
// saved under e2e/browser/artifacts.
func TestApprovalPageInBrowser(t *testing.T) {
	chromium, node := browserTools(t)
	dir := t.TempDir()
	adminAddr := freeLoopbackAddr(t)
	base := "http://" + adminAddr

	// The OpenID provider, with its sign-in page on and the page's client.
	pc := provider.DefaultConfig()
	pc.LoginForm = true
	pc.Users = append(pc.Users, provider.User{Subject: approverSubject, Tenant: provider.TenantAlice, Email: "olivia@acme.example"})
	pc.Clients = append(pc.Clients, provider.Client{ID: approvalClient, Secret: approvalClientSecret,
		RedirectURIs: []string{base + "/approvals/callback"}, GrantTypes: []string{provider.GrantAuthorizationCode}})
	// The provider is another site than the page (localhost against
	// 127.0.0.1), as in production: the session cookie (SameSite=Strict)
	// must survive the cross-site return from the provider.
	provAddr := freeLoopbackAddr(t)
	_, provPort, _ := net.SplitHostPort(provAddr)
	p := oidctest.Start(t, oidctest.WithConfig(pc), oidctest.WithArgs("-addr", provAddr, "-issuer", "http://localhost:"+provPort))

	// Live rights: alice asks, olivia approves; both hold every demo right.
	rightsFile := filepath.Join(dir, "rights.yaml")
	lr := liveRights{"acme": {requesterSubject: {true, allDemoRights}, approverSubject: {true, allDemoRights}}}
	if err := os.WriteFile(rightsFile, []byte(lr.yaml()), 0o600); err != nil {
		t.Fatal(err)
	}
	ks, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := ks.MarshalPrivate()
	if err != nil {
		t.Fatal(err)
	}
	keysFile := filepath.Join(dir, "assertion-keys.json")
	if err := os.WriteFile(keysFile, priv, 0o600); err != nil {
		t.Fatal(err)
	}

	// The demo upstream (verifying mcpgate's assertions); its handler is
	// set once the assertion issuer is known.
	var upstream http.Handler
	ds := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { upstream.ServeHTTP(w, r) }))
	t.Cleanup(ds.Close)

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = adminAddr
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams[0].URL = ds.URL + "/mcp"
	cfg.Upstreams[0].Audience = upstreamAudience
	cfg.Auth = &config.Auth{ResourceBaseURL: authBase, GatewayTokens: &config.GatewayTokens{},
		Issuers: []config.Issuer{{Issuer: p.Issuer, TenantClaim: "tenant"}}}
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	cfg.Rights = &config.Rights{File: &config.RightsFile{Path: rightsFile}}
	cfg.Assertion = config.Assertion{KeysFile: keysFile}
	cfg.Policy.Dirs = []string{approvalPolicyDir(t)}
	cfg.Audit.Log = config.AuditLogOff
	cfg.Approvals = &config.Approvals{
		BaseURL:             base,
		OIDC:                &config.ApprovalOIDC{Issuer: p.Issuer, ClientID: approvalClient, ClientSecret: approvalClientSecret},
		RequireSecondPerson: true,
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	verifier, err := assertion.NewVerifier(assertion.VerifierOptions{Issuer: cfg.Assertion.Issuer, Audience: upstreamAudience, Keys: ks.PublicJWKS()})
	if err != nil {
		t.Fatal(err)
	}
	up := demo.New(demo.Options{Assertions: verifier})
	mux := http.NewServeMux()
	mux.Handle("/mcp", up.Handler())
	upstream = mux

	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := app.Start(ctx, cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		cancel()
		t.Fatalf("gateway with the approval page on %s: %v", adminAddr, err)
	}
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = a.Shutdown(sctx)
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	cred, err := a.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: requesterSubject, Name: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	agent := connectSDK(t, "http://"+a.ProxyAddr+"/mcp", cred.Secret, "")

	// 1. The agent asks; nothing goes out; the preview names the page.
	notify := callTool(t, agent, demo.ToolSendBookingConfirmation, map[string]any{"booking_id": demo.InjectedBookingID})
	np := previewOf(t, notify)
	if np.Approval != gateway.ApprovalOutOfBand || !strings.HasPrefix(np.ApprovalURL, base+"/approvals/a/") {
		t.Fatalf("notify preview: approval %q approval_url %q, want out_of_band under %s/approvals/a/", np.Approval, np.ApprovalURL, base)
	}
	if strings.Contains(np.ApprovalURL, np.ConfirmToken) {
		t.Errorf("the confirm_token is in the approval link %s", np.ApprovalURL)
	}
	if !strings.Contains(resultText(notify), np.ApprovalURL) {
		t.Errorf("the preview's text does not give the person the link:\n%s", resultText(notify))
	}
	confirm := func(pv oobPreview) *sdk.CallToolResult {
		return callTool(t, agent, gateway.ToolConfirmAction, map[string]any{"confirm_token": pv.ConfirmToken, "confirm_summary": pv.ConfirmSummary})
	}
	if r := confirm(np); !r.IsError || !strings.Contains(resultText(r), "approval_pending") {
		t.Fatalf("confirm_action before approval: %s", resultText(r))
	}
	canary := `<img src=x onerror="window.__mcpgate_canary='img'"><script>window.__mcpgate_canary='script'</script>` +
		` <b>bold</b> ` + demo.InjectedInstruction
	wake := callTool(t, agent, demo.ToolPageTechnician, map[string]any{"technician_id": "T-11", "message": canary})
	wp := previewOf(t, wake)
	if wp.Approval != gateway.ApprovalOutOfBand || !strings.HasPrefix(wp.ApprovalURL, base+"/approvals/a/") || wp.ApprovalURL == np.ApprovalURL {
		t.Fatalf("wake preview: approval %q approval_url %q", wp.Approval, wp.ApprovalURL)
	}
	if n := up.Calls(demo.ToolSendBookingConfirmation) + up.Calls(demo.ToolPageTechnician); n != 0 {
		t.Fatalf("%d calls reached the upstream before anyone approved", n)
	}

	// 2. A person approves the first and rejects the second in Chromium.
	artifacts, err := filepath.Abs(browserArtifacts)
	if err != nil {
		t.Fatal(err)
	}
	shot := func(name string) string { return filepath.Join(artifacts, name) }
	const reason = "Not at night: the booking can wait until the morning."
	rep := runBrowser(t, node, browserPlan{
		Chromium: chromium, Subject: approverSubject, TimeoutMS: 20000, FailureShot: shot("failure.png"),
		Actions: []browserAction{
			{URL: np.ApprovalURL, Decision: "approve", LoginShot: shot("login.png"), PageShot: shot("approval.png"), ResultShot: shot("approved.png")},
			{URL: wp.ApprovalURL, Decision: "reject", Reason: reason, PageShot: shot("approval-markup.png"), ResultShot: shot("rejected.png")},
		},
	})
	t.Logf("Chromium %s; screenshots in %s", rep.Chromium, artifacts)
	if len(rep.Actions) != 2 {
		t.Fatalf("report has %d actions, want 2", len(rep.Actions))
	}
	str := func(s *string) string {
		if s == nil {
			return "<missing>"
		}
		return *s
	}
	first, second := rep.Actions[0], rep.Actions[1]
	if first.Login == nil || !strings.HasPrefix(first.Login.URL, p.Issuer+provider.PathLogin) {
		t.Errorf("the first link did not lead to the provider's sign-in page: %+v (navigations %v)", first.Login, rep.Navigations)
	}
	// The document requests of the sign-in, redirects included, in order.
	hops := []string{"GET " + np.ApprovalURL, "GET " + base + "/approvals/login?", "GET " + p.Issuer + "/authorize?",
		"GET " + p.Issuer + provider.PathLogin + "?", "POST " + p.Issuer + provider.PathLogin, "GET " + base + "/approvals/callback?", "GET " + np.ApprovalURL}
	at := 0
	for _, r := range rep.Requests {
		if at < len(hops) && strings.HasPrefix(r, hops[at]) {
			at++
		}
	}
	if at < len(hops) {
		t.Errorf("sign-in did not go %q; missing from %q on:\n%s", hops, hops[at], strings.Join(rep.Requests, "\n"))
	}
	if first.Landed != np.ApprovalURL {
		t.Errorf("after sign-in the browser is at %s, want back at %s", first.Landed, np.ApprovalURL)
	}
	if second.Login != nil {
		t.Errorf("the second link asked to sign in again: the session did not hold (%+v)", second.Login)
	}
	for i, s := range rep.Actions {
		if s.Summary == nil || s.Content == nil || s.Requester == nil || s.Expires == nil || !s.ApproveForm || !s.RejectForm {
			t.Errorf("action %d page lacks an element: summary %q content %q requester %q expires %q approve-form %v reject-form %v",
				i, str(s.Summary), str(s.Content), str(s.Requester), str(s.Expires), s.ApproveForm, s.RejectForm)
		}
		if s.CSRFFields < 2 {
			t.Errorf("action %d: %d forms carry a csrf field, want both", i, s.CSRFFields)
		}
		if !strings.Contains(str(s.Requester), requesterSubject) {
			t.Errorf("action %d: requester %q does not name %s", i, str(s.Requester), requesterSubject)
		}
		if s.Canary != nil || s.CanaryAfter != nil {
			t.Errorf("action %d: script from the action's text ran in the page (canary %v / %v)", i, s.Canary, s.CanaryAfter)
		}
		if s.Scripts != 0 {
			t.Errorf("action %d: the page has %d script elements, want none", i, s.Scripts)
		}
	}
	if !strings.Contains(str(first.Summary), demo.ToolSendBookingConfirmation) || !strings.Contains(str(first.Summary)+str(first.Content), demo.InjectedBookingID) {
		t.Errorf("notify summary/content do not say what goes out: %q / %q", str(first.Summary), str(first.Content))
	}
	if r := strings.ToLower(str(first.Result)); !strings.Contains(r, "approved") {
		t.Errorf("after approving, #result = %q", str(first.Result))
	}
	// The markup in the wake message is shown as text, marked untrusted.
	if !strings.Contains(str(second.Content), `<img src=x onerror=`) || !strings.Contains(str(second.Content), demo.InjectedInstruction) {
		t.Errorf("the wake message is not shown as the text it is: %q", str(second.Content))
	}
	for _, tag := range second.ContentTags {
		if tag == "img" || tag == "script" || tag == "b" {
			t.Errorf("markup from the action's text became a <%s> element in #content (tags %v)", tag, second.ContentTags)
		}
	}
	if !slices.ContainsFunc(second.Untrusted, func(s string) bool { return strings.Contains(s, demo.InjectedInstruction) }) {
		t.Errorf("the third-party text is not marked class=\"untrusted\": %q", second.Untrusted)
	}
	if r := strings.ToLower(str(second.Result)); !strings.Contains(r, "rejected") {
		t.Errorf("after rejecting, #result = %q", str(second.Result))
	}
	for _, e := range rep.PageErrors {
		t.Errorf("script error in the page: %s", e)
	}
	for _, c := range rep.Console {
		if strings.Contains(c.Text, "Content Security Policy") || strings.Contains(c.Text, "Content-Security-Policy") {
			t.Logf("console (CSP): %s", c.Text) // blocked, as it should be; listed for the record
		}
	}
	session := false
	for _, c := range rep.Cookies {
		if c.Name == "mcpgate_approval" {
			session = true
			if !c.HTTPOnly || c.SameSite != "Strict" || c.Secure {
				t.Errorf("session cookie: HttpOnly %v SameSite %q Secure %v, want HttpOnly, Strict, not Secure on http", c.HTTPOnly, c.SameSite, c.Secure)
			}
		}
	}
	if !session {
		t.Errorf("no mcpgate_approval session cookie in the browser: %+v", rep.Cookies)
	}

	// 3. The agent confirms: the approved call runs exactly once; the
	// rejected one never.
	if r := confirm(np); r.IsError {
		t.Fatalf("confirm_action after approval: %s", resultText(r))
	}
	if n := up.Calls(demo.ToolSendBookingConfirmation); n != 1 {
		t.Fatalf("send_booking_confirmation ran %d times after approval, want 1", n)
	}
	_ = confirm(np) // a second confirm: a replay or a refusal, never a second run
	if n := up.Calls(demo.ToolSendBookingConfirmation); n != 1 {
		t.Errorf("send_booking_confirmation ran %d times after a second confirm_action, want 1", n)
	}
	if r := confirm(wp); !r.IsError {
		t.Errorf("confirm_action of the rejected page ran: %s", resultText(r))
	}
	if n := up.Calls(demo.ToolPageTechnician); n != 0 {
		t.Errorf("page_technician ran %d times after it was rejected, want 0", n)
	}

	if os.Getenv(envUpdateShot) == "1" {
		b, err := os.ReadFile(shot("approval.png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(docsScreenshot, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("updated %s", docsScreenshot)
	}
}
