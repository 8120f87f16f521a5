package catalog

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestListItems: a server's prompts, resources and templates as listed,
// in its order, with the capabilities it announced and the Header fields
// on every request.
func TestListItems(t *testing.T) {
	srv, url := sdkUpstream(t, nil)
	for _, n := range []string{"b_prompt", "a_prompt"} {
		srv.AddPrompt(&mcp.Prompt{Name: n}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) { return nil, nil })
	}
	srv.AddResource(&mcp.Resource{URI: "file:///a", Name: "a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) { return nil, nil })
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "git+ssh://h/{repo}", Name: "repo"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return nil, nil
	})
	var sent atomic.Int32
	it, err := ListItems(context.Background(), Upstream{Name: "u", URL: url, Header: func(context.Context) (http.Header, error) {
		sent.Add(1)
		return http.Header{"X-Test": {"1"}}, nil
	}}, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(it.Prompts) != 2 || !strings.Contains(string(it.Prompts[0])+string(it.Prompts[1]), `"a_prompt"`) || !strings.Contains(string(it.Prompts[0])+string(it.Prompts[1]), `"b_prompt"`) {
		t.Errorf("prompts %s", it.Prompts)
	}
	if len(it.Resources) != 1 || !strings.Contains(string(it.Resources[0]), `"uri":"file:///a"`) {
		t.Errorf("resources %s", it.Resources)
	}
	if len(it.ResourceTemplates) != 1 || !strings.Contains(string(it.ResourceTemplates[0]), `"uriTemplate":"git+ssh://h/{repo}"`) {
		t.Errorf("templates %s", it.ResourceTemplates)
	}
	if !strings.Contains(string(it.Capabilities), `"prompts"`) || !strings.Contains(string(it.Capabilities), `"resources"`) {
		t.Errorf("capabilities %s", it.Capabilities)
	}
	if sent.Load() == 0 {
		t.Error("Header was never asked for")
	}
}
