package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// fakeSource is an upstream credential in x-api-key that records its
// callers and refusals.
type fakeSource struct {
	mu      sync.Mutex
	err     error
	callers []upstreamauth.Caller
	refused int
}

func (*fakeSource) Kind() string       { return upstreamauth.KindStatic }
func (*fakeSource) HeaderName() string { return "X-Api-Key" }

func (s *fakeSource) Header(_ context.Context, c *upstreamauth.Caller) (map[string][]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.callers = append(s.callers, *c)
	if s.err != nil {
		return nil, s.err
	}
	return map[string][]string{"x-api-key": {"k1"}}, nil
}

func (s *fakeSource) Refused(*upstreamauth.Caller) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused++
	return true
}

func credentialPipeline(t *testing.T, src upstreamauth.Source) *gateway.Pipeline {
	return gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}, UpstreamCredentials: map[string]upstreamauth.Source{"demo": src}})...)
}

func TestUpstreamCredentialForwarded(t *testing.T) {
	src := &fakeSource{}
	p := credentialPipeline(t, src)
	_, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"),
		append(callHeaders("get_booking"), "cookie", "c=1", "x-api-key", "client-copy", "x_api_key", "alias")...))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	if got := v.SetHeader["x-api-key"]; len(got) != 1 || got[0] != "k1" {
		t.Errorf("credential = %q", got)
	}
	if v.SetHeader.Get(gateway.AssertionHeader) == "" {
		t.Error("the assertion is gone")
	}
	for _, h := range []string{"authorization", "cookie", "x-api-key", "x_api_key", gateway.AssertionHeader} {
		if !slices.Contains(v.RemoveHeader, h) {
			t.Errorf("%s not removed: %v", h, v.RemoveHeader)
		}
	}
	if !slices.Contains(v.ResponseRemove, "www-authenticate") || !slices.Contains(v.ResponseRemove, "set-cookie") {
		t.Errorf("response fields kept: %v", v.ResponseRemove)
	}
	c := src.callers[0]
	if c.Subject != "svc" || c.Tenant != "acme" || c.AccessToken != "good-bookings:read" || c.Assertion == "" {
		t.Errorf("caller = %+v", c)
	}
}

func TestUpstreamCredentialUnavailable(t *testing.T) {
	for _, err := range []error{upstreamauth.ErrRefused, errors.New("dial tcp: refused")} {
		src := &fakeSource{err: fmt.Errorf("credential: %w", err)}
		p := credentialPipeline(t, src)
		x, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
		if v.Local == nil || v.Local.Status != 200 || !strings.Contains(string(v.Local.Body), `\"demo\"`) || !strings.Contains(string(v.Local.Body), `"isError":true`) {
			t.Fatalf("%v: %+v", err, v.Local)
		}
		if x.Outcome() != gateway.OutcomeError {
			t.Errorf("outcome %s", x.Outcome())
		}
		// Any other request: a JSON-RPC error, 502.
		_, v = p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read",
			`{"jsonrpc":"2.0","id":2,"method":"resources/list","params":{`+clientMeta+`}}`,
			"mcp-protocol-version", "2026-07-28", "mcp-method", "resources/list"))
		if v.Local == nil || v.Local.Status != 502 || !strings.Contains(string(v.Local.Body), `"demo\"`) {
			t.Fatalf("%v: resources/list: %+v", err, v.Local)
		}
	}
}

func TestUpstreamRefusedCredential(t *testing.T) {
	src := &fakeSource{}
	p := credentialPipeline(t, src)
	for _, status := range []int{401, 403} {
		x, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		_, err := x.ResponseHeaders(status, mcp.Header{"content-type": {"application/json"}, "www-authenticate": {"Bearer"}})
		if err == nil {
			t.Fatalf("%d accepted", status)
		}
		l := x.End(err)
		if l == nil || l.Status != 200 || !strings.Contains(string(l.Body), "upstream_refused_credential") || l.Header.Get("www-authenticate") != "" {
			t.Fatalf("%d: %+v", status, l)
		}
	}
	if src.refused != 2 {
		t.Errorf("Refused called %d times", src.refused)
	}
}

// A redirect from an upstream with a credential is answered with a 502
// JSON-RPC error; the Location never reaches the client. Without a
// credential the redirect passes as before.
func TestUpstreamCredentialRedirect(t *testing.T) {
	p := credentialPipeline(t, &fakeSource{})
	for _, status := range []int{301, 302, 303, 307, 308} {
		x, v := p.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
		if v.Local != nil {
			t.Fatalf("refused: %s", v.Local.Body)
		}
		_, err := x.ResponseHeaders(status, mcp.Header{"location": {"http://elsewhere.example/mcp"}})
		if err == nil {
			t.Fatalf("%d accepted", status)
		}
		l := x.End(err)
		if l == nil || l.Status != 502 || !strings.Contains(string(l.Body), "The upstream answered with a redirect") ||
			!strings.Contains(string(l.Body), `"id":1`) || l.Header.Get("location") != "" {
			t.Fatalf("%d: %+v %s", status, l, l.Body)
		}
	}
	plain := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}})...)
	x, v := plain.HandleRequest(context.Background(), authReq("POST", "good-bookings:read", callBody("1", "get_booking"), callHeaders("get_booking")...))
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	if mode, err := x.ResponseHeaders(307, mcp.Header{"location": {"http://elsewhere.example/mcp"}}); err != nil || mode != gateway.PassThrough {
		t.Fatalf("without a credential: %v %v", mode, err)
	}
}
