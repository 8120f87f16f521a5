package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// principalAuth authenticates every request as the principal its
// Authorization header names ("Bearer <key>" → principals[key]). A test
// double: the real authenticator (internal/authn, with gateway tokens in a
// real store) is tested there and end to end; here the pipeline's use of
// the principal's toolset and tenant is.
type principalAuth struct {
	mu         sync.Mutex
	principals map[string]policy.Principal
}

func (a *principalAuth) Authenticate(_ context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pr, ok := a.principals[strings.TrimPrefix(r.Header.Get("authorization"), "Bearer ")]
	if !ok {
		return nil, &gateway.AuthFailure{Status: 401, Code: gateway.AuthInvalidToken, Message: "Bad token."}
	}
	return &pr, nil
}

func (a *principalAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure {
	return nil
}

func (a *principalAuth) set(key string, pr policy.Principal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.principals[key] = pr
}

var everyRight = []string{"bookings:read", "bookings:write", "bookings:delete"}

func toolsetPipeline(t *testing.T) *gateway.Pipeline {
	t.Helper()
	ts, err := gateway.NewToolsets([]gateway.ToolsetDef{
		{Name: "core", Tools: map[string][]string{"demo": {"get_booking"}}, DescriptionChars: 20},
		{Name: "standard", Tools: map[string][]string{"demo": {"get_booking", "create_booking"}},
			Descriptions: map[string]map[string]string{"demo": {"create_booking": "Book a visit."}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	auth := &principalAuth{principals: map[string]policy.Principal{}}
	for key, set := range map[string]string{"core": "core", "standard": "standard", "full": "", "ghost": "retired"} {
		auth.set(key, policy.Principal{Authenticated: true, Tenant: "acme", Subject: "alice", Rights: everyRight,
			CredentialKind: policy.CredentialGatewayToken, CredentialID: "tok_" + key, Connection: "tok_" + key, Toolset: set})
	}
	return gatewaytest.New(t, gatewaytest.WithDecls(catalogDecls), gatewaytest.WithAuth(auth), gatewaytest.WithCatalog(toolsetCatalog()),
		gatewaytest.With(gateway.Options{Toolsets: ts}))
}

func toolsetCatalog() *staticCatalog {
	c := newCatalog()
	c.tools[0].Description = "Reads one booking by its id. Use find_bookings to search."
	c.tools[1].Description = "Creates a booking."
	return c
}

type listedTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func listTools(t *testing.T, p *gateway.Pipeline, token string) []listedTool {
	t.Helper()
	_, v := p.HandleRequest(context.Background(), listReq(token, "2026-07-28", ""))
	if v.Local == nil || v.Local.Status != 200 {
		t.Fatalf("tools/list: %+v", v.Local)
	}
	var resp struct {
		Result struct {
			Tools []listedTool `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(v.Local.Body, &resp); err != nil {
		t.Fatal(err)
	}
	return resp.Result.Tools
}

func TestToolsetVisibility(t *testing.T) {
	p := toolsetPipeline(t)
	names := func(ts []listedTool) string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Name)
		}
		return strings.Join(out, ",")
	}
	cases := []struct{ token, want string }{
		{"core", "get_booking"},
		{"standard", "get_booking,create_booking"},
		{"full", "get_booking,create_booking"}, // cancel_booking changed, page unpinned, remote unusable
	}
	for _, c := range cases {
		t.Run(c.token, func(t *testing.T) {
			got := listTools(t, p, c.token)
			if names(got) != c.want {
				t.Errorf("listed %s, want %s", names(got), c.want)
			}
		})
	}
	t.Run("descriptions", func(t *testing.T) {
		core := listTools(t, p, "core")
		if d := core[0].Description; d != "Reads one booking…" {
			t.Errorf("core description %q, want the first sentence cut to 20 characters", d)
		}
		std := listTools(t, p, "standard")
		if std[0].Description != "Reads one booking by its id. Use find_bookings to search." || std[1].Description != "Book a visit." {
			t.Errorf("standard descriptions: %+v", std)
		}
	})
}

func TestToolsetCallOutsideRefused(t *testing.T) {
	p := toolsetPipeline(t)
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"create_booking","arguments":{"customer_id":"C-1"},` + meta2026 + `}}`
	_, v := p.HandleRequest(context.Background(), authReq("POST", "core", body, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "create_booking"))
	if v.Local == nil || v.Local.Status != 200 {
		t.Fatalf("want a tool error, got %+v", v.Local)
	}
	var resp struct {
		Result struct {
			IsError           bool `json:"isError"`
			StructuredContent struct {
				Error struct{ Code, Cause, Fix, NextTool string } `json:"error"`
			} `json:"structuredContent"`
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(v.Local.Body, &resp); err != nil {
		t.Fatal(err)
	}
	e := resp.Result.StructuredContent.Error
	if !resp.Result.IsError || e.Code != "tool_not_in_toolset" || !strings.Contains(e.Cause, `"core"`) || !strings.Contains(e.Cause, "standard") {
		t.Errorf("refusal: %s", v.Local.Body)
	}
	if !strings.HasPrefix(resp.Result.Content[0].Text, "Error: ") {
		t.Errorf("text: %q", resp.Result.Content[0].Text)
	}
	// A tool inside the toolset is forwarded.
	read := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1"},` + meta2026 + `}}`
	_, v = p.HandleRequest(context.Background(), authReq("POST", "core", read, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"))
	if v.Local != nil {
		t.Errorf("get_booking refused in core: %s", v.Local.Body)
	}
}

func TestUnknownToolsetFailsClosed(t *testing.T) {
	p := toolsetPipeline(t)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta2026 + `}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1"},` + meta2026 + `}}`,
	} {
		var m struct{ Method string }
		_ = json.Unmarshal([]byte(body), &m)
		kv := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", m.Method}
		if m.Method == "tools/call" {
			kv = append(kv, "mcp-name", "get_booking")
		}
		x, v := p.HandleRequest(context.Background(), authReq("POST", "ghost", body, kv...))
		if v.Local == nil || v.Local.Status != 403 || !strings.Contains(string(v.Local.Body), gateway.AuthUnknownToolset) ||
			!strings.Contains(string(v.Local.Body), `\"retired\"`) && !strings.Contains(string(v.Local.Body), `"retired"`) {
			t.Fatalf("%s: want 403 unknown_toolset, got %+v", m.Method, v.Local)
		}
		if x.Outcome() != gateway.OutcomeUnauthenticated {
			t.Errorf("outcome %q", x.Outcome())
		}
		var e struct{ Error mcp.Error }
		if err := json.Unmarshal(v.Local.Body, &e); err != nil || e.Error.Message == "" {
			t.Errorf("body: %s", v.Local.Body)
		}
	}
}

func TestShortDescription(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"Find customers by name. Returns at most 20.", 100, "Find customers by name."},
		{"Find customers by name", 100, "Find customers by name"},
		{"Version 1.2 of the tool. Next.", 100, "Version 1.2 of the tool."},
		{"Line one\nstill one.\n\nSecond paragraph.", 100, "Line one still one."},
		{"Find customers by their name or email address.", 25, "Find customers by their…"},
		{"Supercalifragilisticexpialidocious tool.", 12, "Supercalifr…"},
		{"Kurz.", 0, "Kurz."},
		{"Ünïcödé wörds ärë cöüntëd äs rünës.", 16, "Ünïcödé wörds…"},
	}
	for _, c := range cases {
		if got := gateway.ShortDescription(c.in, c.max); got != c.want {
			t.Errorf("ShortDescription(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}

func TestNewToolsetsRefusesFull(t *testing.T) {
	if _, err := gateway.NewToolsets([]gateway.ToolsetDef{{Name: "full"}}); err == nil {
		t.Error("a toolset named full was accepted")
	}
	var ts *gateway.Toolsets
	if !ts.Known("") || !ts.Known("full") || ts.Known("core") {
		t.Error("a nil Toolsets must know only full")
	}
}
