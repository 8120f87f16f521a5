package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// memberCatalog is a fixed catalog of several upstreams; an upstream it
// does not hold has not been listed.
type memberCatalog map[string][]gateway.CatalogTool

func (c memberCatalog) Tools(upstream string) ([]gateway.CatalogTool, bool) {
	t, ok := c[upstream]
	return t, ok
}

func (c memberCatalog) Tool(upstream, name string) (gateway.CatalogTool, bool, bool) {
	tools, ok := c[upstream]
	for _, t := range tools {
		if t.Name == name {
			return t, true, true
		}
	}
	return gateway.CatalogTool{}, false, ok
}

// federatedPipeline fronts members upstreams named m0, m1, ... with
// prefixes p0, p1, ... on server "work", each with tools get_status (as
// exchangeCatalog) and t1 … tN-1, all declared reads.
func federatedPipeline(tb testing.TB, members, tools int, more ...gatewaytest.Option) *gateway.Pipeline {
	cat := memberCatalog{}
	decls := map[string]map[string]policy.ToolDeclaration{}
	srv := gateway.Server{Name: "work"}
	base := exchangeCatalog().tools[0]
	for i := range members {
		up := fmt.Sprintf("m%d", i)
		decls[up] = map[string]policy.ToolDeclaration{"get_status": exchangeDecls["demo"]["get_status"]}
		list := []gateway.CatalogTool{base}
		for j := 1; j < tools; j++ {
			t := base
			t.Name, t.Hash = fmt.Sprintf("t%d", j), fmt.Sprintf("sha256:%d", j)
			list = append(list, t)
			decls[up][t.Name] = policy.ToolDeclaration{Effect: policy.EffectRead, Rights: []string{"status:read"}}
		}
		cat[up] = list
		srv.Members = append(srv.Members, gateway.Member{Upstream: up, Prefix: fmt.Sprintf("p%d", i)})
	}
	opts := exchangeOpts(cat, nil)
	opts = append(opts, gatewaytest.WithDecls(decls), gatewaytest.With(gateway.Options{Servers: []gateway.Server{srv}}))
	return gatewaytest.New(tb, append(opts, more...)...)
}

func federatedRequest(method, name string, body []byte) *gateway.Request {
	r := exchangeRequest("good-status:read", body)
	r.Upstream = "work"
	r.Header.Set("mcp-method", method)
	if name == "" {
		delete(r.Header, "mcp-name")
	} else {
		r.Header.Set("mcp-name", name)
	}
	return r
}

func TestFederatedPipeline(t *testing.T) {
	p := federatedPipeline(t, 2, 2)
	ctx := context.Background()

	t.Run("tools/list", func(t *testing.T) {
		_, v := p.HandleRequest(ctx, federatedRequest("tools/list", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta26+`}}`)))
		var res struct {
			Result struct {
				Tools []struct {
					Name  string `json:"name"`
					Title string `json:"title"`
				} `json:"tools"`
			} `json:"result"`
		}
		if v.Local == nil || json.Unmarshal(v.Local.Body, &res) != nil {
			t.Fatalf("%+v", v)
		}
		var names []string
		for _, tl := range res.Result.Tools {
			names = append(names, tl.Name)
			if strings.Contains(tl.Title, "P0") || strings.Contains(tl.Title, "P1") {
				t.Errorf("title %q shows the prefix", tl.Title)
			}
		}
		if want := []string{"p0_get_status", "p0_t1", "p1_get_status", "p1_t1"}; !slices.Equal(names, want) {
			t.Errorf("tools/list = %v, want %v", names, want)
		}
	})

	t.Run("tools/call", func(t *testing.T) {
		body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"p1_get_status"`, 1)
		r := federatedRequest("tools/call", "p1_get_status", []byte(body))
		r.Header.Set(gateway.UpstreamHeader, "m0")
		x, v := p.HandleRequest(ctx, r)
		defer x.Finish()
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		if v.Upstream != "m1" {
			t.Errorf("Verdict.Upstream = %q, want m1", v.Upstream)
		}
		if !v.BodyChanged || !bytes.Contains(v.Body, []byte(`"name":"get_status"`)) || bytes.Contains(v.Body, []byte("p1_")) {
			t.Errorf("body %s", v.Body)
		}
		if got := v.SetHeader.Get(mcp.HeaderName); got != "get_status" {
			t.Errorf("Mcp-Name set to %q", got)
		}
		if !slices.Contains(v.RemoveHeader, gateway.UpstreamHeader) {
			t.Errorf("the client's %s is not removed: %q", gateway.UpstreamHeader, v.RemoveHeader)
		}
		if x.Decision() == nil || !x.Decision().Allow {
			t.Errorf("decision %+v", x.Decision())
		}
	})

	for _, tc := range []struct{ name, suggests string }{
		{"p2_get_status", "p0_get_status"}, {"get_status", "p1_get_status"}, {"p1_nothing", ""}, {"p1", ""},
	} {
		t.Run("unknown "+tc.name, func(t *testing.T) {
			body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"`+tc.name+`"`, 1)
			_, v := p.HandleRequest(ctx, federatedRequest("tools/call", tc.name, []byte(body)))
			if v.Local == nil || !bytes.Contains(v.Local.Body, []byte(`"isError":true`)) || !bytes.Contains(v.Local.Body, []byte(tc.suggests)) {
				t.Fatalf("%s: %s", tc.name, v.Local.Body)
			}
			if tc.suggests != "" && !bytes.Contains(v.Local.Body, []byte("Did you mean")) {
				t.Errorf("%s: no close match named: %s", tc.name, v.Local.Body)
			}
		})
	}
}

const meta26 = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// BenchmarkFederatedToolsCallExchange is BenchmarkToolsCallExchange on a
// federated route of five members: the difference is what resolving the
// member (and rewriting the name in the body) costs per call.
func BenchmarkFederatedToolsCallExchange(b *testing.B) {
	p := federatedPipeline(b, 5, 1)
	body := []byte(strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"p3_get_status"`, 1))
	answer := []byte(exchangeAnswer)
	ctx := context.Background()
	respHeader := mcp.Header{"content-type": {"application/json"}}
	b.ReportAllocs()
	for b.Loop() {
		x, v := p.HandleRequest(ctx, federatedRequest("tools/call", "p3_get_status", body))
		if v.Local != nil || v.Upstream != "m3" {
			b.Fatalf("refused: %+v", v)
		}
		if _, err := x.ResponseHeaders(200, respHeader); err != nil {
			b.Fatal(err)
		}
		if _, _, err := x.ResponseBody(ctx, answer); err != nil {
			b.Fatal(err)
		}
		x.Finish()
	}
}

// BenchmarkFederatedToolsList is tools/list of a federated route with 5
// members of 50 tools each, answered from the catalog.
func BenchmarkFederatedToolsList(b *testing.B) {
	p := federatedPipeline(b, 5, 50)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + meta26 + `}}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, v := p.HandleRequest(ctx, federatedRequest("tools/list", "", body))
		if v.Local == nil || !bytes.Contains(v.Local.Body, []byte("p4_t49")) {
			b.Fatalf("%+v", v.Local)
		}
	}
}

// fakeMemberSessions records the pipeline's use of gateway.MemberSessions
// (the HTTP side is internal/app's, tested end to end).
type fakeMemberSessions struct {
	opened, reset, closed []string
}

func (f *fakeMemberSessions) Session(_ context.Context, key, upstream, version string, header mcp.Header) (string, string, error) {
	f.opened = append(f.opened, key+">"+upstream)
	return "member-" + upstream, version, nil
}

func (f *fakeMemberSessions) Reset(key, upstream, id string) {
	f.reset = append(f.reset, key+">"+upstream+">"+id)
}

func (f *fakeMemberSessions) Close(_ context.Context, key string) { f.closed = append(f.closed, key) }

func TestFederatedSessions(t *testing.T) {
	ms := &fakeMemberSessions{}
	p := federatedPipeline(t, 2, 1, gatewaytest.With(gateway.Options{MemberSessions: ms}))
	ctx := context.Background()
	older := func(method, name, session string, body string) *gateway.Request {
		r := federatedRequest(method, name, []byte(body))
		r.Header.Set("mcp-protocol-version", "2025-11-25")
		if method == "" {
			delete(r.Header, "mcp-method") // a response
		}
		if session != "" {
			r.Header.Set(gateway.SessionHeader, session)
		}
		return r
	}

	_, v := p.HandleRequest(ctx, older("initialize", "", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`))
	sid := ""
	if v.Local != nil {
		sid = v.Local.Header.Get(gateway.SessionHeader)
	}
	if v.Local == nil || sid == "" || !bytes.Contains(v.Local.Body, []byte(`"protocolVersion":"2025-11-25"`)) {
		t.Fatalf("initialize: %+v", v.Local)
	}

	x, v := p.HandleRequest(ctx, older("tools/call", "p1_get_status", sid, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"p1_get_status","arguments":{"service":"db"}}}`))
	if v.Local != nil || v.Upstream != "m1" || v.SetHeader.Get(gateway.SessionHeader) != "member-m1" {
		t.Fatalf("tools/call: %+v", v)
	}
	if _, err := x.ResponseHeaders(404, mcp.Header{"content-type": {"application/json"}}); err != nil {
		t.Log(err)
	}
	x.Finish()
	if want := []string{sid + ">m1>member-m1"}; !slices.Equal(ms.reset, want) {
		t.Errorf("after the member's 404: reset %q, want %q", ms.reset, want)
	}

	// A client's answer to a server-to-client request goes back to the
	// member whose prefix its id carries, with the member's own id.
	x, v = p.HandleRequest(ctx, older("", "", sid, `{"jsonrpc":"2.0","id":"p0/17","result":{"action":"accept"}}`))
	if v.Local != nil || v.Upstream != "m0" || !bytes.Contains(v.Body, []byte(`"id":17`)) {
		t.Fatalf("client response: %+v %s", v.Local, v.Body)
	}
	x.Finish()
	if _, v := p.HandleRequest(ctx, older("", "", sid, `{"jsonrpc":"2.0","id":"zz/17","result":{}}`)); v.Local == nil || v.Local.Status != 400 {
		t.Errorf("a response for no member: %+v", v)
	}

	r := older("", "", sid, "")
	r.Method, r.Body = "DELETE", nil
	delete(r.Header, "content-type")
	if _, v := p.HandleRequest(ctx, r); v.Local == nil || v.Local.Status != 200 || !slices.Equal(ms.closed, []string{sid}) {
		t.Errorf("DELETE: %+v, closed %q", v.Local, ms.closed)
	}
}

func TestFederatedCompletion(t *testing.T) {
	p := federatedPipeline(t, 2, 1)
	body := `{"jsonrpc":"2.0","id":3,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"p1_greet"},"argument":{"name":"a","value":"x"},` + meta26 + `}}`
	x, v := p.HandleRequest(context.Background(), federatedRequest("completion/complete", "", []byte(body)))
	if v.Local != nil || v.Upstream != "m1" || !bytes.Contains(v.Body, []byte(`"ref":{"type":"ref/prompt","name":"greet"}`)) {
		t.Fatalf("%+v %s", v.Local, v.Body)
	}
	x.Finish()
	body = strings.Replace(body, "p1_greet", "p9_greet", 1)
	if _, v := p.HandleRequest(context.Background(), federatedRequest("completion/complete", "", []byte(body))); v.Local == nil || !bytes.Contains(v.Local.Body, []byte("Unknown reference")) {
		t.Errorf("unknown ref: %+v", v.Local)
	}
}

// routeAuth is fakeAuth that records the upstream of the requests it
// authenticates.
type routeAuth struct {
	fakeAuth
	seen []string
}

func (a *routeAuth) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	a.seen = append(a.seen, r.Upstream)
	return a.fakeAuth.Authenticate(ctx, r)
}

// TestFederatedAuthenticatesForTheRoute: a call resolved to a member is
// authenticated for the virtual server's route (its token audience), not
// for the member, which has no route.
func TestFederatedAuthenticatesForTheRoute(t *testing.T) {
	a := &routeAuth{}
	p := federatedPipeline(t, 2, 1, gatewaytest.WithAuth(a))
	body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"p1_get_status"`, 1)
	x, v := p.HandleRequest(context.Background(), federatedRequest("tools/call", "p1_get_status", []byte(body)))
	if v.Local != nil || v.Upstream != "m1" {
		t.Fatalf("%+v", v.Local)
	}
	x.Finish()
	if !slices.Equal(a.seen, []string{"work"}) {
		t.Errorf("authenticated for %q, want the server's route [work]", a.seen)
	}
}

// toolsetAuth binds every caller to toolset core.
type toolsetAuth struct{ fakeAuth }

func (a *toolsetAuth) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	pr, f := a.fakeAuth.Authenticate(ctx, r)
	if pr != nil {
		pr.Toolset = "core"
	}
	return pr, f
}

// TestFederatedToolset: a toolset naming tools of two members (as
// <upstream>/<tool>) shows exactly those, under their prefixes, and a
// tool it does not hold is refused on call whichever member it is on.
func TestFederatedToolset(t *testing.T) {
	ts, err := gateway.NewToolsets([]gateway.ToolsetDef{{Name: "core", Tools: map[string][]string{"m0": {"get_status"}, "m1": {"t1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	p := federatedPipeline(t, 2, 2, gatewaytest.WithAuth(&toolsetAuth{}), gatewaytest.With(gateway.Options{Toolsets: ts}))
	ctx := context.Background()
	_, v := p.HandleRequest(ctx, federatedRequest("tools/list", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta26+`}}`)))
	var res struct {
		Result struct {
			Tools []struct {
				Name string `json:"name"`
			} `json:"tools"`
		} `json:"result"`
	}
	if v.Local == nil || json.Unmarshal(v.Local.Body, &res) != nil {
		t.Fatalf("%+v", v)
	}
	var listed []string
	for _, tl := range res.Result.Tools {
		listed = append(listed, tl.Name)
	}
	if want := []string{"p0_get_status", "p1_t1"}; !slices.Equal(listed, want) {
		t.Fatalf("tools/list = %v, want %v", listed, want)
	}
	for _, name := range []string{"p0_get_status", "p0_t1", "p1_get_status", "p1_t1"} {
		body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"`+name+`"`, 1)
		x, v := p.HandleRequest(ctx, federatedRequest("tools/call", name, []byte(body)))
		called := v.Local == nil
		if called {
			x.Finish()
		}
		if called != slices.Contains(listed, name) {
			t.Errorf("%s: listed %v, called %v", name, slices.Contains(listed, name), called)
		}
	}
}

// TestFederatedTaskRefused: a task-augmented call on a federated route is
// refused (its tasks/* follow-ups could name no member) and never
// forwarded.
func TestFederatedTaskRefused(t *testing.T) {
	p := federatedPipeline(t, 2, 1)
	body := strings.Replace(exchangeCall, `"name":"get_status",`, `"name":"p1_get_status","task":{"ttl":60000},`, 1)
	_, v := p.HandleRequest(context.Background(), federatedRequest("tools/call", "p1_get_status", []byte(body)))
	if v.Local == nil || !bytes.Contains(v.Local.Body, []byte("task-augmented")) {
		t.Fatalf("%+v", v.Local)
	}
}

// TestFederatedConfirmation: a notify tool of a member is previewed under
// its exposed name; mcpgate's confirm_action (listed without prefix) on
// the same route sends the original call to that member under the
// tool's own name. A member's tool named like a gateway tool stays the
// member's.
func TestFederatedConfirmation(t *testing.T) {
	obj := jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	cat := memberCatalog{
		"mail": {{Name: "email_customer", Hash: "e1", State: policy.CatalogApproved, InputSchema: obj}},
		"odd":  {{Name: "confirm_action", Hash: "c1", State: policy.CatalogApproved, InputSchema: obj}},
	}
	decls := map[string]map[string]policy.ToolDeclaration{
		"mail": {"email_customer": {Effect: policy.EffectNotify, NotifyObject: "text"}},
		"odd":  {"confirm_action": {Effect: policy.EffectRead}},
	}
	srv := gateway.Server{Name: "work", Members: []gateway.Member{{Upstream: "mail", Prefix: "mail"}, {Upstream: "odd", Prefix: "odd"}}}
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(&fakeAuth{}), gatewaytest.WithCatalog(cat), gatewaytest.WithWrites(),
		gatewaytest.With(gateway.Options{Servers: []gateway.Server{srv}}))
	ctx := context.Background()
	call := func(id, tool, args string) *gateway.Request {
		r := toolCall(id, tool, args)
		r.Upstream = "work"
		return r
	}
	_, v := p.HandleRequest(ctx, call("1", "mail_email_customer", `{"text":"hi"}`))
	token, summary := previewOf(t, v)
	x, v := p.HandleRequest(ctx, call("2", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil || v.Upstream != "mail" || !bytes.Contains(v.Body, []byte(`"name":"email_customer"`)) {
		t.Fatalf("confirmed call: %+v %s", v.Local, v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"sent"}]}}`)

	r := call("4", "tools/list", "")
	r.Body = []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{` + meta26 + `}}`)
	r.Header.Set("mcp-method", "tools/list")
	delete(r.Header, "mcp-name")
	_, v = p.HandleRequest(ctx, r)
	for _, name := range []string{`"mail_email_customer"`, `"odd_confirm_action"`, `"confirm_action"`} {
		if v.Local == nil || !bytes.Contains(v.Local.Body, []byte(`"name":`+name)) {
			t.Errorf("tools/list lacks %s: %+v", name, v.Local)
		}
	}

	x, v = p.HandleRequest(ctx, call("3", "odd_confirm_action", `{"text":"x"}`))
	if v.Local != nil || v.Upstream != "odd" || !bytes.Contains(v.Body, []byte(`"name":"confirm_action"`)) {
		t.Fatalf("a member's confirm_action: %+v %s", v.Local, v.Body)
	}
	x.Finish()
}

// TestFederatedCancellation: notifications/cancelled for a call in flight
// goes to the member that has it; once the call is over (or for an id
// never sent) it stays with mcpgate (202).
func TestFederatedCancellation(t *testing.T) {
	p := federatedPipeline(t, 2, 1)
	ctx := context.Background()
	body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"p1_get_status"`, 1)
	x, v := p.HandleRequest(ctx, federatedRequest("tools/call", "p1_get_status", []byte(body)))
	if v.Local != nil || v.Upstream != "m1" {
		t.Fatalf("%+v", v.Local)
	}
	cancel := func(id string) gateway.Verdict {
		r := federatedRequest("notifications/cancelled", "", []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+id+`,`+meta26+`}}`))
		cx, v := p.HandleRequest(ctx, r)
		if v.Local == nil {
			cx.Finish()
		}
		return v
	}
	if v := cancel("7"); v.Local != nil || v.Upstream != "m1" {
		t.Errorf("cancellation of the call in flight: %+v", v.Local)
	}
	if v := cancel("8"); v.Local == nil || v.Local.Status != 202 {
		t.Errorf("cancellation of an id never sent: %+v", v)
	}
	x.Finish()
	if v := cancel("7"); v.Local == nil || v.Local.Status != 202 {
		t.Errorf("cancellation after the call ended: %+v", v)
	}
}

// TestFederatedNameTooLong: a member's tool whose prefixed name would be
// longer than MCP allows is neither listed nor callable.
func TestFederatedNameTooLong(t *testing.T) {
	long := strings.Repeat("x", 126) // "p0_" + 126 = 129 characters
	base := exchangeCatalog().tools[0]
	lt := base
	lt.Name, lt.Hash = long, "sha256:long"
	cat := memberCatalog{"m0": {base, lt}}
	decls := map[string]map[string]policy.ToolDeclaration{"m0": {"get_status": exchangeDecls["demo"]["get_status"], long: {Effect: policy.EffectRead, Rights: []string{"status:read"}}}}
	p := gatewaytest.New(t, append(exchangeOpts(cat, nil), gatewaytest.WithDecls(decls),
		gatewaytest.With(gateway.Options{Servers: []gateway.Server{{Name: "work", Members: []gateway.Member{{Upstream: "m0", Prefix: "p0"}}}}}))...)
	ctx := context.Background()
	_, v := p.HandleRequest(ctx, federatedRequest("tools/list", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta26+`}}`)))
	if v.Local == nil || !bytes.Contains(v.Local.Body, []byte(`"p0_get_status"`)) || bytes.Contains(v.Local.Body, []byte(long)) {
		t.Fatalf("tools/list: %+v", v.Local)
	}
	body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"p0_`+long+`"`, 1)
	_, v = p.HandleRequest(ctx, federatedRequest("tools/call", "p0_"+long, []byte(body)))
	if v.Local == nil || !bytes.Contains(v.Local.Body, []byte(`"isError":true`)) {
		t.Fatalf("tools/call: %+v", v)
	}
}

// An unprefixed member's result that links a URI reading as another
// member's (<prefix>+…) loses that item: read back, the URI would reach
// the other member. Its other URIs pass as listed; a prefixed member's
// gain the prefix.
func TestFederatedUnprefixedResultURIs(t *testing.T) {
	p := federatedPipeline(t, 2, 1, gatewaytest.With(gateway.Options{Servers: []gateway.Server{{Name: "work",
		Members: []gateway.Member{{Upstream: "m0"}, {Upstream: "m1", Prefix: "p1"}}}}}))
	ctx := context.Background()
	const result = `{"jsonrpc":"2.0","id":7,"result":{"content":[` +
		`{"type":"resource_link","uri":"p1+file:///other","name":"o"},` +
		`{"type":"resource_link","uri":"file:///own","name":"n"}]}}`
	for _, tc := range []struct {
		name       string
		keep, drop []string
	}{
		{"get_status", []string{`"uri":"file:///own"`}, []string{`p1+file:///other`}},
		{"p1_get_status", []string{`"uri":"p1+file:///own"`, `"uri":"p1+p1+file:///other"`}, []string{`removed`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := strings.Replace(exchangeCall, `"name":"get_status"`, `"name":"`+tc.name+`"`, 1)
			x, v := p.HandleRequest(ctx, federatedRequest("tools/call", tc.name, []byte(body)))
			defer x.Finish()
			if v.Local != nil {
				t.Fatalf("refused: %s", v.Local.Body)
			}
			if _, err := x.ResponseHeaders(200, mcp.Header{"content-type": {"application/json"}}); err != nil {
				t.Fatal(err)
			}
			out, _, err := x.ResponseBody(ctx, []byte(result))
			if err != nil {
				t.Fatal(err)
			}
			if out == nil {
				out = []byte(result)
			}
			for _, k := range tc.keep {
				if !bytes.Contains(out, []byte(k)) {
					t.Errorf("%s lacks %s", out, k)
				}
			}
			for _, d := range tc.drop {
				if bytes.Contains(out, []byte(d)) {
					t.Errorf("%s holds %s", out, d)
				}
			}
		})
	}
}
