package gateway

import (
	"context"
	"reflect"
	"testing"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// offSwitches are kill switches that are all off.
type offSwitches struct{ changed chan struct{} }

func (offSwitches) Global() (bool, store.Switch)       { return false, store.Switch{} }
func (offSwitches) Tenant(string) (bool, store.Switch) { return false, store.Switch{} }
func (s offSwitches) Changed() <-chan struct{}         { return s.changed }

// Release reuses an exchange only after End, and never one that
// something besides the adapter may still reach: an SSE rewriter or a
// tool-list watch, a WatchSwitches goroutine, an upstream credential
// source. A reused exchange is zeroed first.
func TestReleaseReusesOnlyUnreachable(t *testing.T) {
	p := New(allowAll{}, Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64, Switches: offSwitches{make(chan struct{})}})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	start := func() *Exchange {
		t.Helper()
		h := mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"t"}}
		x, v := p.HandleRequest(context.Background(), &Request{Transport: TransportExtProc, Method: "POST", Path: "/mcp", Upstream: "u", Header: h, Body: []byte(body)})
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		if x.req == nil || x.msg == nil || x.msg.Name != "t" {
			t.Fatalf("exchange not set up: %+v", x.msg)
		}
		return x
	}
	kept := func(name string, x *Exchange) {
		t.Helper()
		if x.req == nil || x.msg == nil || x.msg.Name != "t" {
			t.Errorf("%s: Release zeroed an exchange that may still be reached", name)
		}
	}

	x := start()
	x.Release() // before End: kept
	kept("before End", x)
	x.End(nil)
	x.Release()
	if x.req != nil || x.msg != nil || x.ended || x.verdict.SetHeader != nil {
		t.Fatal("an ended exchange nothing else reaches was not zeroed for reuse")
	}

	for _, c := range []struct {
		name string
		hold func(x *Exchange)
	}{
		{"WatchSwitches", func(x *Exchange) {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			x.WatchSwitches(ctx, func([]byte) {})
		}},
		{"SSE rewriter", func(x *Exchange) { x.eventRewriter(context.Background()) }},
		{"tool-list watch", func(x *Exchange) { x.watchTools = true }},
		{"list stream", func(x *Exchange) { x.ls = &listStream{x: x} }},
		{"credential", func(x *Exchange) { x.cred = &upstreamCred{}; x.credCaller = &upstreamauth.Caller{} }},
	} {
		x := start()
		x.End(nil)
		c.hold(x) // what x did in its life; End leaves these set
		x.Release()
		kept(c.name, x)
	}
}

// The forwarded request's field map a released exchange keeps is empty
// when the exchange is reused, and one exchange hands it to one verdict
// only.
func TestReleaseKeepsForwardHeaderEmpty(t *testing.T) {
	p := New(allowAll{}, Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for i := range 3 {
		h := mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"t"}}
		x, v := p.HandleRequest(context.Background(), &Request{Transport: TransportExtProc, Method: "POST", Path: "/mcp", Upstream: "u", Header: h, Body: []byte(body)})
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		if _, ok := v.SetHeader["x-left-over"]; ok || len(v.SetHeader["accept-encoding"]) != 1 {
			t.Fatalf("round %d: forwarded fields %v", i, v.SetHeader)
		}
		v.SetHeader["x-left-over"] = []string{"from the last exchange"} // an adapter's change
		if a, b := x.forwardHeader(), x.forwardHeader(); reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(v.SetHeader).UnsafePointer() ||
			reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
			t.Fatal("an exchange's field map was handed out twice")
		}
		x.End(nil)
		if !x.Release() {
			t.Fatal("not released")
		}
		if len(x.fwdHeader) != 0 {
			t.Fatalf("kept map not emptied: %v", x.fwdHeader)
		}
	}
}

// allowInto is allowAll that can also decide into the caller's storage.
type allowInto struct{ allowAll }

func (allowInto) DecideInto(_ context.Context, _ *policy.Input, d *policy.Decision) error {
	*d = policy.Decision{ID: "into", Allow: true}
	return nil
}

// The request's decision is made in the exchange's own storage; a list's
// decision (which a notification stream's recheck makes from another
// goroutine) never is.
func TestRequestDecisionInExchange(t *testing.T) {
	p := New(allowInto{}, Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64})
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	h := mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"t"}}
	x, v := p.HandleRequest(context.Background(), &Request{Transport: TransportExtProc, Method: "POST", Path: "/mcp", Upstream: "u", Header: h, Body: []byte(body)})
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	if x.decision != &x.requestDecision || x.decision.ID != "into" {
		t.Fatalf("request decision %p %+v, want the exchange's storage", x.decision, x.decision)
	}
	if d := p.decide(context.Background(), x, policy.PhaseList, nil); d == &x.requestDecision {
		t.Fatal("a list decision was made in the request's storage")
	}
	x.End(nil)
}

// intoAuth authenticates into the caller's storage: it writes a
// principal, then refuses when refuse is set.
type intoAuth struct{ refuse bool }

func (a intoAuth) Authenticate(ctx context.Context, r *Request) (*policy.Principal, *AuthFailure) {
	var pr policy.Principal
	if f := a.AuthenticateInto(ctx, r, &pr); f != nil {
		return nil, f
	}
	return &pr, nil
}

func (a intoAuth) AuthenticateInto(_ context.Context, _ *Request, pr *policy.Principal) *AuthFailure {
	*pr = policy.Principal{Authenticated: true, Tenant: "acme", Subject: "alice", Connection: "c1", Rights: []string{"r"}}
	if a.refuse {
		return &AuthFailure{Status: 401, Code: AuthInvalidToken, Message: "no"}
	}
	return nil
}

func (intoAuth) InsufficientScope(*Request, []string) *AuthFailure { return nil }

// The principal is authenticated into the exchange's policy input; a
// refused credential leaves nothing of a principal there.
func TestAuthenticateIntoExchange(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, refuse := range []bool{false, true} {
		p := New(allowAll{}, Options{MaxBodyBytes: 1 << 20, MaxJSONDepth: 64, Authenticator: intoAuth{refuse: refuse}})
		h := mcp.Header{"content-type": {"application/json"}, "mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"tools/call"}, "mcp-name": {"t"}, "authorization": {"Bearer x"}}
		x, v := p.HandleRequest(context.Background(), &Request{Transport: TransportExtProc, Method: "POST", Path: "/mcp", Upstream: "u", Header: h, Body: []byte(body)})
		switch {
		case refuse && (v.Local == nil || x.Outcome() != OutcomeUnauthenticated || !reflect.ValueOf(x.input.Principal).IsZero()):
			t.Fatalf("refused: outcome %q, principal %+v", x.Outcome(), x.input.Principal)
		case !refuse && (v.Local != nil || x.input.Principal.Subject != "alice" || x.input.Principal.Connection != "c1"):
			t.Fatalf("allowed: %+v, principal %+v", v.Local, x.input.Principal)
		}
		x.End(nil)
	}
}
