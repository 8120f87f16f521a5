package extproc_test

import (
	"context"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/policy"
)

// queryAuth refuses every request, recording the query it saw.
type queryAuth struct{ query string }

func (q *queryAuth) Authenticate(_ context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	q.query = r.RawQuery
	return nil, &gateway.AuthFailure{Status: 401, WWWAuthenticate: `Bearer resource_metadata="https://gw/.well-known/oauth-protected-resource/crm/mcp"`, Code: gateway.AuthMissingToken, Message: "No token."}
}

func (q *queryAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

// TestAuthAndMetadata: the protected resource metadata is answered on a
// path no upstream is routed to; a refused credential is an
// ImmediateResponse 401 with the challenge; the query reaches the
// authenticator.
func TestAuthAndMetadata(t *testing.T) {
	qa := &queryAuth{}
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), serverBounds, gatewaytest.WithAuth(qa), gatewaytest.With(gateway.Options{ResourceMetadata: gateway.StaticMetadata(map[string][]byte{"/.well-known/oauth-protected-resource/crm/mcp": []byte(`{"resource":"https://gw/crm/mcp"}`)})}))
	c := serve(t, p)

	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	get := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers:     headers(":method", "GET", ":path", "/.well-known/oauth-protected-resource/crm/mcp", ":authority", "gw", ":scheme", "https"),
		EndOfStream: true,
	}}}
	ir := exchange(t, s, get).GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 200 || string(ir.GetBody()) != `{"resource":"https://gw/crm/mcp"}` {
		t.Fatalf("metadata: %v", ir)
	}
	if ct, _ := header(ir.GetHeaders(), "content-type"); ct != "application/json" {
		t.Errorf("content-type %q", ct)
	}

	s, err = c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := exchange(t, s, reqHeaders("/crm/mcp?access_token=x", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/list")); r.GetRequestHeaders() == nil {
		t.Fatalf("want a headers response, got %v", r)
	}
	ir = exchange(t, s, reqBody(`{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{`+meta+`}}`)).GetImmediateResponse()
	if ir == nil || ir.GetStatus().GetCode() != 401 || !strings.Contains(string(ir.GetBody()), `"id":3`) {
		t.Fatalf("401: %v", ir)
	}
	if www, _ := header(ir.GetHeaders(), "www-authenticate"); !strings.HasPrefix(www, `Bearer resource_metadata=`) {
		t.Errorf("www-authenticate %q", www)
	}
	if qa.query != "access_token=x" {
		t.Errorf("query %q", qa.query)
	}
}
