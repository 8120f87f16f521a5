package extproc_test

import (
	"context"
	"strings"
	"testing"
)

// TestSingleValuedHeadersFromEnvoy: a repeated field arrives as separate
// header map entries, an inline header Envoy joined as one value with
// ","; the gate refuses both with 400 for the body's id, nothing
// forwarded.
func TestSingleValuedHeadersFromEnvoy(t *testing.T) {
	c := client(t)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`
	std := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"}
	for name, kv := range map[string][]string{
		"two mcp-session-id entries":  {"mcp-session-id", "mine", "mcp-session-id", "theirs"},
		"joined mcp-session-id":       {"mcp-session-id", "mine,theirs"},
		"joined authorization":        {"authorization", "Bearer a,Bearer b"},
		"two authorization entries":   {"authorization", "Bearer a", "Authorization", "Bearer b"},
		"joined origin":               {"origin", "http://localhost,https://evil.example"},
		"two mcp-name entries, equal": {"mcp-name", "get_booking"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := c.Process(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if r := exchange(t, s, reqHeaders("/crm/mcp", nil, append(append([]string{}, std...), kv...)...)); r.GetRequestHeaders() == nil {
				t.Fatalf("headers phase: %v", r)
			}
			ir := exchange(t, s, reqBody(call)).GetImmediateResponse()
			if ir.GetStatus().GetCode() != 400 || !strings.Contains(string(ir.GetBody()), `"id":5`) {
				t.Fatalf("want an immediate 400 for id 5, got %v %s", ir.GetStatus(), ir.GetBody())
			}
		})
	}
}

// TestQueryNotForwarded: the client's query never reaches the upstream:
// :path is set to the path alone, on the headers phase (no body) and on
// the body phase; a request without a query keeps its :path untouched.
func TestQueryNotForwarded(t *testing.T) {
	c := client(t)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"get_booking","arguments":{},` + meta + `}}`
	std := []string{"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "get_booking"}
	for path, want := range map[string]string{"/crm/mcp?x=1&tenant%5B%5D=": "", "/crm/mcp?a=1": "/crm/mcp", "/crm/mcp?": "/crm/mcp", "/crm/mcp": "-"} {
		s, err := c.Process(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		exchange(t, s, reqHeaders(path, nil, std...))
		r := exchange(t, s, reqBody(call))
		if want == "" { // tenant-like: refused
			if r.GetImmediateResponse().GetStatus().GetCode() != 400 {
				t.Errorf("%s: %v", path, r)
			}
			continue
		}
		got, ok := header(r.GetRequestBody().GetResponse().GetHeaderMutation(), ":path")
		if want == "-" && ok || want != "-" && got != want {
			t.Errorf("%s: :path %q (set %v), want %q", path, got, ok, want)
		}
	}
	// GET decided on the headers.
	s, err := c.Process(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	get := reqHeaders("/crm/mcp?x=1", nil, "mcp-session-id", "s")
	get.GetRequestHeaders().EndOfStream = true
	get.GetRequestHeaders().Headers.Headers[0].RawValue = []byte("GET")
	r := exchange(t, s, get)
	if got, _ := header(r.GetRequestHeaders().GetResponse().GetHeaderMutation(), ":path"); got != "/crm/mcp" {
		t.Errorf("GET: :path %q (%v)", got, r)
	}
}
