package policy

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// Declarations of the fictional upstream "crm" used across the tests.
var testDeclarations = map[string]map[string]ToolDeclaration{
	"crm": {
		"search_contacts": {Effect: EffectRead, Rights: []string{"crm.read"}, UntrustedText: []string{"items[*].notes"}, ResultFields: []string{"items[*].id", "items[*].name", "items[*].notes"}},
		"update_contact":  {Effect: EffectSilentWrite, Rights: []string{"crm.write"}},
		"send_email":      {Effect: EffectNotify, Rights: []string{"crm.write", "mail.send"}},
		"delete_contact":  {Effect: EffectDelete, Rights: []string{"crm.admin"}},
		"legacy_export":   {Effect: EffectRead, Hidden: true},
	},
}

// tool returns the input.tool the gateway would build for name.
func tool(name string) *Tool {
	d, ok := testDeclarations["crm"][name]
	return &Tool{Name: name, Declared: ok, ToolDeclaration: d}
}

var (
	anonymous = Principal{Authenticated: false}
	alice     = Principal{Authenticated: true, Tenant: "acme", Subject: "alice", Rights: []string{"crm.read", "crm.write"}}
)

// oauthToken is the principal of an OAuth access token with the scopes.
func oauthToken(scopes ...string) Principal {
	return Principal{Authenticated: true, Tenant: "acme", Subject: "svc-1", Rights: scopes, CredentialKind: CredentialOAuth,
		Issuer: "https://idp.example.com", ClientID: "agent", Connection: "oauth_0123456789abcdef0123456789abcdef"}
}

func transport() Transport {
	return Transport{Kind: "proxy", HTTPMethod: "POST", Path: "/mcp", Upstream: "crm", ProtocolVersion: "2026-07-28"}
}

func requestInput(method string) *Input {
	kind := "request"
	if len(method) > 14 && method[:14] == "notifications/" {
		kind = "notification"
	}
	return &Input{
		Version:   SchemaVersion,
		Phase:     "request",
		Transport: transport(),
		Message:   Message{Kind: kind, Method: method, Client: &Client{Name: "claude-code", Version: "2.1.0"}},
		Principal: anonymous,
	}
}

func callInput(name string, p Principal) *Input {
	in := requestInput("tools/call")
	in.Message.Name = name
	in.Message.Arguments = jsontext.Value(`{"query":"acme","limit":25,"min_score":0.75,"tags":["vip","emea"],"filters":{"active":true,"owner":null}}`)
	in.Tool = tool(name)
	in.Principal = p
	return in
}

func listInput(method string, p Principal, names ...string) *Input {
	in := requestInput(method)
	in.Phase = "list"
	in.Principal = p
	for _, n := range names {
		it := Item{Name: n}
		if method == "tools/list" {
			it.Tool = tool(n)
		}
		in.Items = append(in.Items, it)
	}
	return in
}

var allTools = []string{"search_contacts", "update_contact", "send_email", "delete_contact", "legacy_export", "undeclared_tool"}

func newDefaultEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := New(context.Background(), Options{Declarations: testDeclarations})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// writeFile writes content to dir/name, creating directories.
func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// policyDir returns a temporary directory holding one policy file.
func policyDir(t testing.TB, rego string) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, "policy.rego", rego)
	return dir
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
