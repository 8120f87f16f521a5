package gateway

import (
	"bytes"
	"compress/gzip"
	"context"
	"slices"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// allowAll is a Decider that allows everything: these tests are about
// the forwarded header mutations, not the policy (tested with the real
// engine elsewhere).
type allowAll struct{}

func (allowAll) Decide(context.Context, *policy.Input) (*policy.Decision, error) {
	return &policy.Decision{Allow: true}, nil
}

// Verdicts of unchanged bodies share the snapshot's list of fields to
// remove; aliases and a changed body get their own list, and appending to
// one verdict's list never shows in another's.
func TestRemoveHeaderShared(t *testing.T) {
	p := New(allowAll{}, Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64, StripHeaders: []string{"x-tenant"}})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	verdict := func(extra mcp.Header, b []byte) Verdict {
		t.Helper()
		h := mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"t"}}
		for k, v := range extra {
			h[k] = v
		}
		_, v := p.HandleRequest(context.Background(), &Request{Transport: TransportProxy, Method: "POST", Path: "/mcp", Upstream: "u", Header: h, Body: b})
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		return v
	}
	plain := []string{AssertionHeader, UpstreamHeader, "x-tenant"}
	v1, v2 := verdict(nil, []byte(body)), verdict(nil, []byte(body))
	if !slices.Equal(v1.RemoveHeader, plain) || !slices.Equal(v2.RemoveHeader, plain) {
		t.Fatalf("plain: %q %q, want %q", v1.RemoveHeader, v2.RemoveHeader, plain)
	}
	v1.RemoveHeader = append(v1.RemoveHeader, "x-mine")
	v1.RemoveHeader[0] = "changed-by-v1"
	_ = v1
	if v3 := verdict(nil, []byte(body)); !slices.Equal(v3.RemoveHeader, plain) {
		t.Fatalf("after another verdict's append: %q", v3.RemoveHeader)
	}
	if alias := verdict(mcp.Header{"x_tenant": {"globex"}}, []byte(body)); !slices.Equal(alias.RemoveHeader, append(slices.Clone(plain), "x_tenant")) {
		t.Fatalf("alias: %q", alias.RemoveHeader)
	}
	if v4 := verdict(nil, []byte(body)); !slices.Equal(v4.RemoveHeader, plain) {
		t.Fatalf("after an alias: %q", v4.RemoveHeader)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(body))
	zw.Close()
	if dec := verdict(mcp.Header{"content-encoding": {"gzip"}}, gz.Bytes()); !dec.BodyChanged || !slices.Equal(dec.RemoveHeader, append([]string{"content-encoding"}, plain...)) {
		t.Fatalf("decoded body: changed %v, %q", dec.BodyChanged, dec.RemoveHeader)
	}
}

// paramMember answers what member(params, name) answers, whether it
// reads what mcp.Parse recorded or (for a message Parse did not make)
// scans params itself: escaped names, null values, a "task" nested in
// the arguments (not a params member), every method.
func TestParamMemberAgreesWithMember(t *testing.T) {
	params := []string{
		`{"name":"t","arguments":{}}`,
		`{"name":"t","arguments":{"task":{"ttl":1}},"requestState":"s"}`,
		`{"name":"t","task":{"ttl":60000}}`,
		`{"name":"t","\u0074ask":{},"request\u0053tate":"x"}`,
		`{"name":"t","task":null,"requestState":null}`,
		`{"name":"t","_meta":{"task":{}},"requestState":7}`,
		`{"name":"t","Task":{}}`,
		`{}`,
	}
	compared := 0
	for _, method := range []string{"tools/call", "tools/list", "prompts/get"} {
		for _, ps := range params {
			body := []byte(`{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + ps + `}`)
			msg, perr := mcp.Parse(body, 64)
			if perr != nil {
				continue // params.name missing: refused before any member is read
			}
			compared++
			handMade := &mcp.Message{Params: msg.Params}
			for _, name := range []string{mcp.ParamTask, mcp.ParamRequestState} {
				want, wantOK, err := member(msg.Params, name)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range []*mcp.Message{msg, handMade} {
					got, ok := paramMember(m, name)
					if ok != wantOK || !bytes.Equal(got, want) {
						t.Errorf("%s %s %s: %q %v, want %q %v", method, ps, name, got, ok, want, wantOK)
					}
				}
			}
			if _, _, recorded := msg.Param(mcp.ParamTask); !recorded {
				t.Errorf("%s %s: Parse recorded nothing", method, ps)
			}
		}
	}
	if compared < 20 {
		t.Fatalf("only %d messages compared", compared)
	}
}
