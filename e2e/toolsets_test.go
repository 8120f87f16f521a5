package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/tokens"
)

// The toolsets, list_changed and resource-tenant tests run a real gateway
// (gateway tokens in bbolt, a rights file, an OpenID provider for OAuth, a
// pinned manifest) in front of a real Go SDK
// MCP server ("notes", stateless, 2026-07-28) whose tools are all reads,
// whose resources belong to two tenants and whose prompts the tests add
// to make it send something on an open subscriptions/listen stream.
// Clients reach it through the standalone proxy and through Envoy (the
// driver) + ext_proc.

// notesTools are the notes upstream's tools, in the order it lists them,
// with the right each needs.
var notesTools = []struct{ name, description, right string }{
	{"find_notes", "Find notes by text. Returns at most twenty notes, newest first, with their ids.", "notes:read"},
	{"get_note", "Get one note by its id.", "notes:read"},
	{"list_tags", "List the tags in use.", "notes:read"},
	{"get_report", "Get the monthly report of every note.", "reports:read"},
	{"get_links", "Get links to related notes.", "notes:read"},
	{"get_archive", "Get archived notes (added after the manifest was pinned).", "notes:read"},
}

// h2Env is the environment of these tests.
type h2Env struct {
	dir      string
	rights   string
	manifest string
	p        *oidctest.Provider
	up       *notesUpstream
	cfg      *config.Config
	app      *app.App
	proxy    string
	envoy    string
}

func (e *h2Env) vias() []via { return []via{{"proxy", e.proxy}, {"extproc", e.envoy}} }

// notesUpstream is the SDK server.
type notesUpstream struct {
	srv     *sdk.Server
	url     string
	mu      sync.Mutex
	prompts int
}

func startNotes(t *testing.T) *notesUpstream {
	t.Helper()
	u := &notesUpstream{}
	u.srv = sdk.NewServer(&sdk.Implementation{Name: "notes", Version: "1"}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{ListChanged: true}, Prompts: &sdk.PromptCapabilities{ListChanged: true},
			Resources: &sdk.ResourceCapabilities{ListChanged: true}},
	})
	for _, tl := range notesTools {
		name := tl.name
		u.srv.AddTool(&sdk.Tool{Name: name, Description: tl.description, InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)},
			func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				if name == "get_links" {
					return &sdk.CallToolResult{Content: []sdk.Content{
						&sdk.TextContent{Text: "Two related notes."},
						&sdk.ResourceLink{URI: "notes://acme/1", Name: "own"},
						&sdk.ResourceLink{URI: "notes://globex/2", Name: "foreign"},
					}}, nil
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: `{"tool":"` + name + `"}`}}}, nil
			})
	}
	for _, r := range []struct{ uri, name string }{{"notes://acme/1", "acme-1"}, {"notes://globex/2", "globex-2"}, {"file:///readme", "readme"}} {
		uri := r.uri
		u.srv.AddResource(&sdk.Resource{URI: uri, Name: r.name, MIMEType: "text/plain"},
			func(context.Context, *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
				return &sdk.ReadResourceResult{Contents: []*sdk.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "note " + uri}}}, nil
			})
	}
	u.addPrompt()
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return u.srv }, &sdk.StreamableHTTPOptions{Stateless: true})
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	u.url = s.URL
	return u
}

// addPrompt adds a prompt: the SDK then sends notifications/prompts/list_changed
// on the subscriptions/listen streams that asked for it — an upstream
// chunk on the stream.
func (u *notesUpstream) addPrompt() {
	u.mu.Lock()
	u.prompts++
	name := fmt.Sprintf("prompt_%d", u.prompts)
	u.mu.Unlock()
	u.srv.AddPrompt(&sdk.Prompt{Name: name}, func(context.Context, *sdk.GetPromptRequest) (*sdk.GetPromptResult, error) {
		return &sdk.GetPromptResult{Messages: []*sdk.PromptMessage{{Role: "user", Content: &sdk.TextContent{Text: "hi"}}}}, nil
	})
}

const h2Config = `
listeners:
  proxy: {address: 127.0.0.1:0}
  admin: {address: 127.0.0.1:0}
  extproc: {address: 127.0.0.1:0}
upstreams:
  - name: notes
    url: %s/mcp
    resource_tenant: ["notes://{tenant}/**"]
    tools:
      find_notes: {effect: read, rights: ["notes:read"]}
      get_note: {effect: read, rights: ["notes:read"]}
      list_tags: {effect: read, rights: ["notes:read"]}
      get_report: {effect: read, rights: ["reports:read"]}
      get_links: {effect: read, rights: ["notes:read"]}
      get_archive: {effect: read, rights: ["notes:read"]}
toolsets:
  core:
    description_chars: 30
    tools: [find_notes, get_note]
  standard:
    tools: [find_notes, get_note, list_tags, get_report]
auth:
  resource_base_url: %s
  gateway_tokens: {}
  issuers:
    - issuer: %s
      tenant_claim: tenant
      client_toolsets: {%s: core}
store:
  bolt: {path: %s}
rights:
  file: {path: %s}
audit: {log: "off"}
catalog:
  manifest: %s
  list_changed_check: 100ms
`

// h2Rights writes the rights file: alice (acme) holds rights.
func (e *h2Env) writeRights(t *testing.T, aliceRights ...string) {
	t.Helper()
	q := func(rs []string) string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = fmt.Sprintf("%q", r)
		}
		return "[" + strings.Join(out, ", ") + "]"
	}
	body := "tenants:\n  acme:\n    alice: {rights: " + q(aliceRights) + "}\n    gateway: {rights: " + q([]string{"notes:read", "reports:read"}) + "}\n"
	tmp := e.rights + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, e.rights); err != nil {
		t.Fatal(err)
	}
}

// pin writes the manifest approving the notes upstream's tools now,
// except the ones named.
func (e *h2Env) pin(t *testing.T, except ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := catalog.List(ctx, catalog.Upstream{Name: "notes", URL: e.up.url + "/mcp"}, catalog.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	snap.Tools = slices.DeleteFunc(snap.Tools, func(tl catalog.Tool) bool { return slices.Contains(except, tl.Name) })
	if err := catalog.PinSnapshots([]*catalog.Snapshot{snap}, time.Now()).Write(e.manifest); err != nil {
		t.Fatal(err)
	}
}

// startH2Env starts it all; the manifest leaves get_archive unpinned.
func startH2Env(t *testing.T, withProvider bool) *h2Env {
	t.Helper()
	e := newH2Env(t)
	e.start(t, withProvider, nil)
	return e
}

// newH2Env starts the upstream and writes the rights file and manifest.
func newH2Env(t *testing.T) *h2Env {
	t.Helper()
	e := &h2Env{dir: t.TempDir()}
	e.rights = filepath.Join(e.dir, "rights.yaml")
	e.manifest = filepath.Join(e.dir, "manifest.json")
	e.writeRights(t, "notes:read", "reports:read")
	e.up = startNotes(t)
	e.pin(t, "get_archive")
	return e
}

// config is the gateway's configuration (mutate, when set, changes it).
func (e *h2Env) config(t *testing.T, withProvider bool, mutate func(*config.Config)) *config.Config {
	t.Helper()
	issuer := "https://idp.invalid"
	if withProvider {
		if e.p == nil {
			e.p = oidctest.Start(t)
		}
		issuer = e.p.Issuer
	}
	yaml := fmt.Sprintf(h2Config, e.up.url, authBase, issuer, provider.ClientGateway, filepath.Join(e.dir, "state.db"), e.rights, e.manifest)
	if !withProvider {
		yaml = strings.Replace(yaml, "  issuers:\n    - issuer: https://idp.invalid\n      tenant_claim: tenant\n      client_toolsets: {gateway: core}\n", "", 1)
	}
	cfg, err := config.Parse([]byte(yaml), "h2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if mutate != nil {
		mutate(cfg)
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	return cfg
}

// start runs the gateway (stopped at cleanup) and an Envoy driver.
func (e *h2Env) start(t *testing.T, withProvider bool, mutate func(*config.Config)) {
	t.Helper()
	e.cfg = e.config(t, withProvider, mutate)
	e.app = startApp(t, e.cfg)
	e.proxy = "http://" + e.app.ProxyAddr
	srv, _ := startEnvoy(t, e.app.ExtProcAddr, e.up.url, "notes", 5*time.Second)
	e.envoy = srv.URL
}

// mint creates alice's gateway token bound to toolset ("" = none).
func (e *h2Env) mint(t *testing.T, toolset string) string {
	t.Helper()
	c, err := e.app.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Name: "h2", Toolset: toolset})
	if err != nil {
		t.Fatal(err)
	}
	return c.Secret
}

// rpc posts one 2026-07-28 request and returns the status and body.
func rpc(t *testing.T, base, token, method, name, params string) (int, []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{` + params +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	req, err := http.NewRequest("POST", base+"/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// The answer's data line.
		for _, line := range strings.Split(string(b), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id":1`) {
				b = []byte(d)
			}
		}
	}
	return resp.StatusCode, b
}

type h2Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func listNames(t *testing.T, base, token string) ([]h2Tool, string) {
	t.Helper()
	status, b := rpc(t, base, token, "tools/list", "", "")
	var resp struct {
		Result struct {
			Tools      []h2Tool `json:"tools"`
			NextCursor string   `json:"nextCursor"`
		} `json:"result"`
	}
	if status != 200 || json.Unmarshal(b, &resp) != nil {
		t.Fatalf("tools/list: %d %s", status, b)
	}
	if resp.Result.NextCursor != "" {
		t.Errorf("tools/list has a second page: %s", b)
	}
	var names []string
	for _, tl := range resp.Result.Tools {
		names = append(names, tl.Name)
	}
	return resp.Result.Tools, strings.Join(names, ",")
}

func TestToolsetsEndToEnd(t *testing.T) {
	e := startH2Env(t, false)
	core, standard, full := e.mint(t, "core"), e.mint(t, "standard"), e.mint(t, "")
	for _, v := range e.vias() {
		t.Run(v.name, func(t *testing.T) {
			cases := []struct{ token, want string }{
				{core, "find_notes,get_note"},
				// The catalog's order (the SDK lists by name).
				{standard, "find_notes,get_note,get_report,list_tags"},
				{full, "find_notes,get_links,get_note,get_report,list_tags"}, // get_archive is not pinned
			}
			for _, c := range cases {
				// Twice: the order is fixed.
				for range 2 {
					if _, got := listNames(t, v.base, c.token); got != c.want {
						t.Errorf("listed %s, want %s", got, c.want)
					}
				}
			}
			tools, _ := listNames(t, v.base, core)
			if d := tools[0].Description; d != "Find notes by text." {
				t.Errorf("core's short description %q", d)
			}
			if tools, _ := listNames(t, v.base, standard); tools[0].Description != notesTools[0].description {
				t.Errorf("standard's description %q", tools[0].Description)
			}
			// A standard tool called on a core connection: a tool error
			// naming the toolsets that hold it.
			status, b := rpc(t, v.base, core, "tools/call", "get_report", `"name":"get_report","arguments":{},`)
			var res struct {
				Result struct {
					IsError           bool `json:"isError"`
					StructuredContent struct {
						Error struct{ Code, Cause string } `json:"error"`
					} `json:"structuredContent"`
				} `json:"result"`
			}
			if status != 200 || json.Unmarshal(b, &res) != nil || !res.Result.IsError || res.Result.StructuredContent.Error.Code != "tool_not_in_toolset" ||
				!strings.Contains(res.Result.StructuredContent.Error.Cause, "standard") {
				t.Errorf("get_report on core: %d %s", status, b)
			}
			// Inside the toolset the call reaches the upstream.
			if status, b := rpc(t, v.base, core, "tools/call", "find_notes", `"name":"find_notes","arguments":{},`); status != 200 || !strings.Contains(string(b), `find_notes`) || strings.Contains(string(b), "isError") {
				t.Errorf("find_notes on core: %d %s", status, b)
			}
		})
	}
}

func TestToolsetUnknownOnTokenFailsClosed(t *testing.T) {
	e := newH2Env(t)
	// A gateway whose configuration defines the toolset "legacy" mints a
	// token bound to it, then stops.
	cfg := e.config(t, false, func(c *config.Config) {
		c.Toolsets["legacy"] = config.Toolset{Tools: []string{"find_notes"}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	old, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	c, err := old.Tokens.Create(ctx, tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Toolset: "legacy"})
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = old.Shutdown(sctx)
	scancel()
	if err != nil {
		t.Fatal(err)
	}
	// The gateway restarts on the same store without "legacy": the token
	// is refused, whatever it asks, with a clear error.
	e.start(t, false, nil)
	if _, err := e.app.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Toolset: "legacy"}); err == nil || !strings.Contains(err.Error(), "legacy") {
		t.Errorf("a token with an unknown toolset was minted: %v", err)
	}
	for _, v := range e.vias() {
		for _, m := range []struct{ method, name, params string }{{"tools/list", "", ""}, {"tools/call", "find_notes", `"name":"find_notes","arguments":{},`}} {
			status, b := rpc(t, v.base, c.Secret, m.method, m.name, m.params)
			if status != 403 || !strings.Contains(string(b), "unknown_toolset") || !strings.Contains(string(b), "legacy") {
				t.Errorf("%s %s: want 403 unknown_toolset, got %d %s", v.name, m.method, status, b)
			}
		}
	}
}

func TestToolsetForOAuthClient(t *testing.T) {
	e := startH2Env(t, true)
	token := e.p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, authBase+"/mcp", "notes:read", "reports:read")
	for _, v := range e.vias() {
		if _, got := listNames(t, v.base, token); got != "find_notes,get_note" {
			t.Errorf("%s: the gateway client (client_toolsets: core) sees %s", v.name, got)
		}
	}
}

func TestResourceTenantsEndToEnd(t *testing.T) {
	e := startH2Env(t, false)
	token := e.mint(t, "")
	for _, v := range e.vias() {
		t.Run(v.name, func(t *testing.T) {
			// resources/list: globex's entry is gone.
			status, b := rpc(t, v.base, token, "resources/list", "", "")
			if status != 200 || strings.Contains(string(b), "globex") || !strings.Contains(string(b), "notes://acme/1") || !strings.Contains(string(b), "file:///readme") {
				t.Errorf("resources/list: %d %s", status, b)
			}
			// Reading another tenant's resource: a JSON-RPC error.
			status, b = rpc(t, v.base, token, "resources/read", "notes://globex/2", `"uri":"notes://globex/2",`)
			var rr struct {
				Error struct {
					Data struct {
						Error struct{ Code string } `json:"error"`
					} `json:"data"`
				} `json:"error"`
			}
			if status != 200 || json.Unmarshal(b, &rr) != nil || rr.Error.Data.Error.Code != "tenant_mismatch" {
				t.Errorf("read globex: %d %s", status, b)
			}
			// A URI that cannot be parsed: refused (fail closed).
			status, b = rpc(t, v.base, token, "resources/read", "notes://acme/%zz", `"uri":"notes://acme/%zz",`)
			if status != 200 || !strings.Contains(string(b), "invalid_resource_uri") {
				t.Errorf("read bad URI: %d %s", status, b)
			}
			// The own tenant's resource is read.
			status, b = rpc(t, v.base, token, "resources/read", "notes://acme/1", `"uri":"notes://acme/1",`)
			if status != 200 || !strings.Contains(string(b), "note notes://acme/1") {
				t.Errorf("read acme: %d %s", status, b)
			}
			// Resource links of another tenant are removed from results.
			status, b = rpc(t, v.base, token, "tools/call", "get_links", `"name":"get_links","arguments":{},`)
			if status != 200 || strings.Contains(string(b), "notes://globex") || !strings.Contains(string(b), "notes://acme/1") || !strings.Contains(string(b), "resource_removed") {
				t.Errorf("get_links: %d %s", status, b)
			}
		})
	}
}
