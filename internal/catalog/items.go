package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Items is what a member of a federated route lists besides its tools:
// its prompts, resources and resource templates as JSON objects, in its
// order, and the capabilities it announced.
type Items struct {
	Capabilities      jsontext.Value
	Prompts           []jsontext.Value
	Resources         []jsontext.Value
	ResourceTemplates []jsontext.Value
}

// ListItems connects to u as List does (the MCP SDK client, u.Header on
// every request) and lists its prompts, resources and resource templates,
// each only when the upstream announces the capability. A list that
// fails fails the whole listing.
func ListItems(ctx context.Context, u Upstream, o ListOptions) (*Items, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	base := o.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	hc := *base
	hc.Transport = &headerTransport{base: base.Transport, header: u.Header}
	info := ClientInfo
	client := mcp.NewClient(&info, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: u.URL, HTTPClient: &hc, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u.URL, err)
	}
	defer cs.Close()
	it := &Items{}
	var caps *mcp.ServerCapabilities
	if r := cs.InitializeResult(); r != nil {
		caps = r.Capabilities
	}
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	if it.Capabilities, err = encode(caps); err != nil {
		return nil, err
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("prompts/list: %w", err)
			}
			if it.Prompts, err = appendEncoded(it.Prompts, p); err != nil {
				return nil, err
			}
		}
	}
	if caps.Resources != nil {
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/list: %w", err)
			}
			if it.Resources, err = appendEncoded(it.Resources, r); err != nil {
				return nil, err
			}
		}
		for r, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return nil, fmt.Errorf("resources/templates/list: %w", err)
			}
			if it.ResourceTemplates, err = appendEncoded(it.ResourceTemplates, r); err != nil {
				return nil, err
			}
		}
	}
	return it, nil
}

func encode(v any) (jsontext.Value, error) {
	b, err := json.Marshal(v)
	return jsontext.Value(b), err
}

func appendEncoded(list []jsontext.Value, v any) ([]jsontext.Value, error) {
	b, err := encode(v)
	if err != nil {
		return list, err
	}
	return append(list, b), nil
}

// headerTransport sets Upstream.Header's fields on every request.
type headerTransport struct {
	base   http.RoundTripper
	header func(context.Context) (http.Header, error)
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	if t.header == nil {
		return base.RoundTrip(req)
	}
	h, err := t.header(req.Context())
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	for k, v := range h {
		req.Header[k] = v
	}
	return base.RoundTrip(req)
}
