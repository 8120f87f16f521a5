package gateway_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/routes"
	"github.com/mcpgate/mcpgate/policy"
)

func TestCompileResourcePattern(t *testing.T) {
	cases := []struct {
		pattern string
		uri     string
		tenant  string // "" = no match
	}{
		{"crm://{tenant}/**", "crm://acme/customers/1", "acme"},
		{"crm://{tenant}/**", "crm://acme", "acme"},
		{"crm://{tenant}/**", "crmx://acme/a", ""},
		{"https://files.example.com/t/{tenant}/*", "https://files.example.com/t/acme/x.pdf", "acme"},
		{"https://files.example.com/t/{tenant}/*", "https://files.example.com/t/acme/a/b", ""},
		{"db://{tenant}.example/*", "db://globex.example/rows", "globex"},
	}
	for _, c := range cases {
		re, err := routes.CompileResourcePattern(c.pattern)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		m := re.FindStringSubmatch(c.uri)
		got := ""
		if m != nil {
			got = m[1]
		}
		if got != c.tenant {
			t.Errorf("%q on %q: tenant %q, want %q", c.pattern, c.uri, got, c.tenant)
		}
	}
	for _, bad := range []string{"crm://acme/**", "crm://{tenant}/{tenant}", "crm://{tenant}/x?y", "CRM://{tenant}/x", "{tenant}/x"} {
		if _, err := routes.CompileResourcePattern(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func resourcePipeline(t *testing.T) *gateway.Pipeline {
	t.Helper()
	auth := &principalAuth{principals: map[string]policy.Principal{
		"acme": {Authenticated: true, Tenant: "acme", Subject: "alice", Rights: everyRight, CredentialKind: policy.CredentialGatewayToken, Connection: "tok_a"},
	}}
	return gatewaytest.New(t, gatewaytest.WithDecls(catalogDecls), gatewaytest.WithAuth(auth),
		gatewaytest.With(gateway.Options{ResourceTenants: map[string][]string{"demo": {"crm://{tenant}/**"}}}))
}

func rpcRequest(method, params string) *gateway.Request {
	body := `{"jsonrpc":"2.0","id":7,"method":"` + method + `","params":{` + params + meta2026 + `}}`
	kv := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", method}
	var m struct {
		Params struct{ URI string } `json:"params"`
	}
	if err := json.Unmarshal([]byte(body), &m); err == nil && m.Params.URI != "" {
		kv = append(kv, "mcp-name", mcp.EncodeHeaderValue(m.Params.URI))
	}
	return authReq("POST", "acme", body, kv...)
}

func TestResourceURIsOfAnotherTenantRefused(t *testing.T) {
	p := resourcePipeline(t)
	cases := []struct {
		name, method, params, code string // code "": forwarded
	}{
		{"own tenant", "resources/read", `"uri":"crm://acme/customers/1",`, ""},
		{"no tenant in the URI", "resources/read", `"uri":"file:///readme",`, ""},
		{"other tenant", "resources/read", `"uri":"crm://globex/customers/1",`, "tenant_mismatch"},
		{"other tenant, encoded host (Go refuses it: fail closed)", "resources/read", `"uri":"crm://%67lobex/customers/1",`, "invalid_resource_uri"},
		{"tenant query parameter", "resources/read", `"uri":"file:///x?tenant=globex",`, "tenant_mismatch"},
		{"tenant query parameter, bracketed", "resources/read", `"uri":"file:///x?tenant[]=globex",`, "tenant_mismatch"},
		{"tenant query parameter, dotted", "resources/read", `"uri":"file:///x?org.id=globex",`, "tenant_mismatch"},
		{"unparseable", "resources/read", `"uri":"crm://acme/%zz\u0000",`, "invalid_resource_uri"},
		{"listen subscription", "subscriptions/listen", `"notifications":{"resourceSubscriptions":["crm://acme/a","crm://globex/b"]},`, "tenant_mismatch"},
		{"listen own", "subscriptions/listen", `"notifications":{"resourceSubscriptions":["crm://acme/a"]},`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, v := p.HandleRequest(context.Background(), rpcRequest(c.method, c.params))
			if c.code == "" {
				if v.Local != nil {
					t.Fatalf("refused: %s", v.Local.Body)
				}
				return
			}
			if v.Local == nil || v.Local.Status != 200 {
				t.Fatalf("want a JSON-RPC error, got %+v", v.Local)
			}
			var resp struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code int `json:"code"`
					Data struct {
						Error struct{ Code, Cause string } `json:"error"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(v.Local.Body, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Error.Data.Error.Code != c.code || string(resp.ID) != "7" {
				t.Errorf("got %s", v.Local.Body)
			}
		})
	}
}

func TestResourceListFilteredByTenant(t *testing.T) {
	p := resourcePipeline(t)
	ctx := context.Background()
	x, v := p.HandleRequest(ctx, rpcRequest("resources/list", ""))
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}})
	if err != nil || mode != gateway.BufferJSON {
		t.Fatalf("mode %v %v", mode, err)
	}
	body := `{"jsonrpc":"2.0","id":7,"result":{"resources":[{"uri":"crm://acme/a","name":"a"},{"uri":"crm://globex/b","name":"b"},{"uri":"file:///c","name":"c"},{"uri":"file:///d?org_id=globex","name":"d"}]}}`
	out, changed, err := x.ResponseBody(ctx, []byte(body))
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	var resp struct {
		Result struct {
			Resources []struct{ Name string } `json:"resources"`
		} `json:"result"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range resp.Result.Resources {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "a,c" {
		t.Errorf("listed %v, want a,c: %s", names, out)
	}
}

func TestResourceLinksOfAnotherTenantRemoved(t *testing.T) {
	p := resourcePipeline(t)
	ctx := context.Background()
	body := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1"},` + meta2026 + `}}`
	x, v := p.HandleRequest(ctx, authReq("POST", "acme", body, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"))
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	if mode, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil || mode != gateway.BufferJSON {
		t.Fatalf("mode %v %v", mode, err)
	}
	result := `{"jsonrpc":"2.0","id":8,"result":{"content":[{"type":"text","text":"see links"},` +
		`{"type":"resource_link","uri":"crm://acme/bookings/B-1","name":"own"},` +
		`{"type":"resource_link","uri":"crm://globex/bookings/B-2","name":"foreign"},` +
		`{"type":"resource","resource":{"uri":"crm://globex/notes/1","text":"secret"}}]}}`
	out, changed, err := x.ResponseBody(ctx, []byte(result))
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	s := string(out)
	if strings.Contains(s, "globex") || !strings.Contains(s, "crm://acme/bookings/B-1") || !strings.Contains(s, "see links") {
		t.Errorf("result: %s", s)
	}
	if !strings.Contains(s, gateway.ResourceWarningCode) || !strings.Contains(s, `removed 2 resource`) {
		t.Errorf("no warning in _meta: %s", s)
	}
}
