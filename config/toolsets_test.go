package config

import (
	"strings"
	"testing"
)

const toolsetsBase = `
upstreams:
  - name: crm
    url: http://crm.internal/mcp
    route: /crm
    tools:
      find_customers: {effect: read}
      get_customer: {effect: read}
  - name: billing
    url: http://billing.internal/mcp
    route: /billing
    resource_tenant: ["billing://{tenant}/**"]
    tools:
      get_invoice: {effect: read}
`

func TestToolsetsValid(t *testing.T) {
	cfg, err := Parse([]byte(toolsetsBase+`
toolsets:
  core:
    description_chars: 80
    tools: [crm/find_customers, billing/get_invoice]
    descriptions:
      crm/find_customers: "Find customers by name."
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rs := cfg.ResolvedToolsets()
	if len(rs) != 1 || rs[0].Name != "core" || strings.Join(rs[0].Tools["crm"], ",") != "find_customers" ||
		strings.Join(rs[0].Tools["billing"], ",") != "get_invoice" || rs[0].Descriptions["crm"]["find_customers"] != "Find customers by name." {
		t.Errorf("resolved: %+v", rs)
	}
	if got := strings.Join(cfg.ToolsetNames(), ","); got != "core,full" {
		t.Errorf("names %s", got)
	}
}

func TestToolsetsInvalid(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"toolsets:\n  full: {tools: [crm/find_customers]}\n", `toolsets.full: "full" is built in`},
		{"toolsets:\n  Core: {tools: [crm/find_customers]}\n", `toolsets.Core: "Core" is not a toolset name`},
		{"toolsets:\n  core: {tools: [find_customers]}\n", `with several upstreams, name tools as <upstream>/<tool>`},
		{"toolsets:\n  core: {tools: [crm/delete_all]}\n", `"crm/delete_all" is not declared in upstreams[0].tools`},
		{"toolsets:\n  core: {tools: [crm/get_customer, crm/get_customer]}\n", `is listed twice`},
		{"toolsets:\n  core: {}\n", `toolsets.core.tools: required`},
		{"toolsets:\n  core: {tools: [crm/get_customer], description_chars: 5}\n", `toolsets.core.description_chars: 5 must be 0`},
		{"toolsets:\n  core: {tools: [crm/get_customer], descriptions: {crm/find_customers: x}}\n", `is not one of the toolset's tools`},
		{"catalog: {list_changed_check: 1ms}\n", `catalog.list_changed_check: "1ms" is below the minimum`},
		{"auth:\n  resource_base_url: https://mcp.example.com\n  issuers:\n    - issuer: https://idp.example.com\n      client_toolsets: {agent: small}\n", `client_toolsets.agent: "small" is not a toolset`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(toolsetsBase+c.yaml), "t.yaml")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\nwant an error containing %q, got %v", c.yaml, c.want, err)
		}
	}
	_, err := Parse([]byte(strings.Replace(toolsetsBase, `["billing://{tenant}/**"]`, `["billing://acme/**"]`, 1)), "t.yaml")
	if err == nil || !strings.Contains(err.Error(), "upstreams[1].resource_tenant[0]") {
		t.Errorf("a pattern without {tenant}: %v", err)
	}
	if _, err := Parse([]byte(toolsetsBase+"catalog: {list_changed_check: 0s}\n"), "t.yaml"); err != nil {
		t.Errorf("0s: %v", err)
	}
}
