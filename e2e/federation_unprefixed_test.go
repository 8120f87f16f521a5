package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/policy"
)

// unprefixedYAML is a virtual server whose conformance everything-server
// member is unprefixed and whose clash member has prefix "json": the
// everything-server's tool json_schema_2020_12_tool starts with "json_",
// so it is a collision (hidden, and the name resolves to the clash member).
const unprefixedYAML = `
upstreams:
  - name: everything
    url: "%EVERYTHING%"
    tools:
      test_simple_text: {effect: read}
      json_schema_2020_12_tool: {effect: read}
  - name: clash
    url: "%CLASH%"
    tools:
      echo: {effect: read}
servers:
  - name: mixed
    route: /mcp
    members:
      - {upstream: everything, unprefixed: true}
      - {upstream: clash, prefix: json}
`

// TestFederationUnprefixed: an unprefixed member's names and URIs are
// exposed as it lists them, through the proxy and through Envoy alike; its
// name that starts with another member's prefix is hidden, resolves to
// that member, and is reported (validate, the metric).
func TestFederationUnprefixed(t *testing.T) {
	clash := startClash(t)
	every := startEverythingStateless(t)
	text := strings.NewReplacer("%EVERYTHING%", every, "%CLASH%", clash.url).Replace(unprefixedYAML)

	file := filepath.Join(t.TempDir(), "mixed.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := runBin(t, "validate", "--config", file); !strings.Contains(out, `warning: servers[0].members[0]: tool "json_schema_2020_12_tool" of unprefixed upstream "everything" starts with member prefix "json"`) {
		t.Errorf("validate does not warn of the collision:\n%s", out)
	}

	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := config.Parse([]byte(text), "mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	cfg.Listeners.ExtProc.Address = "127.0.0.1:0"
	cfg.Upstreams, cfg.Servers = mixed.Upstreams, mixed.Servers
	cfg.Upstreams[1].Tools["undeclared_thing"] = policy.ToolDeclaration{Effect: policy.EffectRead}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, cfg)
	e := &fedEnv{server: "mixed", proxy: "http://" + a.ProxyAddr + "/mcp", admin: "http://" + a.AdminAddr, clash: clash, extproc: a.ExtProcAddr,
		targets: map[string]string{"everything": strings.TrimSuffix(every, "/mcp"), "clash": strings.TrimSuffix(clash.url, "/mcp")}}
	_, front := e.startDriver(t, extprocfilterv3.ExternalProcessor_DEFAULT)
	proxy, envoy := *e, *e
	envoy.proxy = front + "/mcp"

	poll.Until(t, config.MinCatalogRefresh, "both members listed", func() bool {
		tools := proxy.list(t, "tools/list", "tools", "name")
		return slices.Contains(tools, "test_simple_text") && slices.Contains(tools, "json_echo")
	})
	for _, via := range []*fedEnv{&proxy, &envoy} {
		tools := via.list(t, "tools/list", "tools", "name")
		if slices.Contains(tools, "json_schema_2020_12_tool") || !slices.Contains(tools, "json_undeclared_thing") {
			t.Errorf("%s: tools/list %v (the colliding tool listed, or the prefixed member's missing)", via.proxy, tools)
		}
		if isErr, text := via.callTool(t, "test_simple_text", `{}`); isErr || text == "" {
			t.Errorf("%s: test_simple_text: isError %v, %q", via.proxy, isErr, text)
		}
		if isErr, text := via.callTool(t, "json_echo", `{"q":"x"}`); isErr || text != "clash:echo" {
			t.Errorf("%s: json_echo: isError %v, %q", via.proxy, isErr, text)
		}
		// The colliding name is the json member's: it has no such tool.
		before := clashCalls(clash)
		if isErr, text := via.callTool(t, "json_schema_2020_12_tool", `{}`); !isErr || !strings.Contains(text, "tool_not_declared") {
			t.Errorf("%s: json_schema_2020_12_tool: isError %v, %q", via.proxy, isErr, text)
		}
		if clashCalls(clash) != before {
			t.Errorf("%s: the colliding name reached a member", via.proxy)
		}
		prompts := via.list(t, "prompts/list", "prompts", "name")
		if !slices.Contains(prompts, "test_simple_prompt") || !slices.Contains(prompts, "json_greet") {
			t.Errorf("%s: prompts/list %v", via.proxy, prompts)
		}
		uris := via.list(t, "resources/list", "resources", "uri")
		if !slices.Contains(uris, "json+file:///notes.txt") || !slices.ContainsFunc(uris, func(u string) bool { return strings.HasPrefix(u, "test://") }) {
			t.Errorf("%s: resources/list %v", via.proxy, uris)
		}
		_, m := via.rpc(t, "resources/read", "json+file:///notes.txt", `{"uri":"json+file:///notes.txt",`+meta26+`}`)
		if res, _ := m["result"].(map[string]any); res == nil || !strings.Contains(strings.Join(texts(res), ""), "clash notes") {
			t.Errorf("%s: resources/read: %v", via.proxy, m)
		}
	}
	for _, l := range [][3]string{{"tools/list", "tools", "name"}, {"prompts/list", "prompts", "name"}, {"resources/list", "resources", "uri"}} {
		if p, v := proxy.list(t, l[0], l[1], l[2]), envoy.list(t, l[0], l[1], l[2]); !slices.Equal(p, v) {
			t.Errorf("%s: proxy %v, Envoy %v", l[0], p, v)
		}
	}
	_, metrics := roundTrip(t, "GET", e.admin+"/metrics", nil, nil)
	if w := `mcpgate_federation_hidden_names{kind="tool",server="mixed",upstream="everything"} 1`; !strings.Contains(string(metrics), w) {
		t.Errorf("metrics lack %s", w)
	}
}

// texts are the "text" members of a resources/read result's contents.
func texts(res map[string]any) []string {
	var out []string
	contents, _ := res["contents"].([]any)
	for _, c := range contents {
		if s, ok := c.(map[string]any)["text"].(string); ok {
			out = append(out, s)
		}
	}
	return out
}
