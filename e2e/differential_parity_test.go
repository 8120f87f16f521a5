package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/policy"
)

// parityHeaders are the response fields a client (or a browser acting for
// one) reads: CORS, method and authentication challenges, retry hints,
// session and caching. Date, Content-Length and transfer details differ by
// transport and are not compared.
var parityHeaders = []string{
	"Access-Control-Allow-Origin", "Access-Control-Allow-Methods", "Access-Control-Allow-Headers",
	"Access-Control-Expose-Headers", "Access-Control-Max-Age", "Vary",
	"Allow", "WWW-Authenticate", "Retry-After",
	"Mcp-Session-Id", "MCP-Protocol-Version", "Cache-Control", "Content-Encoding",
	"X-Content-Type-Options", "X-Accel-Buffering",
}

// parityAnswer is the status, body and parityHeaders of one answer.
type parityAnswer struct {
	Status int
	Header map[string][]string
	Body   string
}

func doParity(t *testing.T, method, url string, hdr http.Header, body []byte) parityAnswer {
	t.Helper()
	resp, b := roundTrip(t, method, url, hdr, body)
	a := parityAnswer{Status: resp.StatusCode, Header: map[string][]string{}, Body: maskDecisionID(b)}
	for _, k := range parityHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			a.Header[k] = v
		}
	}
	return a
}

// sameAnswer fails the test unless both paths answered with the same
// status, body and client-visible fields, and returns the proxy's answer.
func sameAnswer(t *testing.T, method, proxyURL, envoyURL string, hdr http.Header, body []byte) parityAnswer {
	t.Helper()
	direct := doParity(t, method, proxyURL, hdr, body)
	viaEnvoy := doParity(t, method, envoyURL, hdr, body)
	if direct.Status != viaEnvoy.Status || direct.Body != viaEnvoy.Body {
		t.Errorf("status or body differ:\nproxy:    %d %.300s\next_proc: %d %.300s", direct.Status, direct.Body, viaEnvoy.Status, viaEnvoy.Body)
	}
	for _, k := range parityHeaders {
		if d, e := strings.Join(direct.Header[k], " | "), strings.Join(viaEnvoy.Header[k], " | "); d != e {
			t.Errorf("%s differs (status %d): proxy %q, ext_proc %q", k, direct.Status, d, e)
		}
	}
	return direct
}

// TestDifferentialParityHeaders: every kind of answer — forwarded, refused
// by a gate, refused by policy, answered after the upstream's answer was
// withheld, 405, preflight, 401 — carries the same client-visible header
// fields through the standalone proxy and through Envoy + ext_proc.
func TestDifferentialParityHeaders(t *testing.T) {
	e := startDifferential(t, differentialUpstream{name: "answers", handler: http.HandlerFunc(answers),
		tools: map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}}})
	const origin = "http://localhost:3000"
	with := func(m map[string]string) http.Header {
		h := toHeader(m)
		h.Set("Origin", origin)
		h.Set("Accept-Encoding", "identity")
		return h
	}
	list := func(id string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{` + meta26 + `}}`)
	}
	route := func(upstream string) (string, string) {
		path := "/mcp"
		if upstream != "demo" {
			path = "/" + upstream + "/mcp"
		}
		return e.proxy + path, e.drivers[upstream].URL + path
	}
	tests := []struct {
		name, method, upstream string
		hdr                    http.Header
		body                   []byte
		status                 int
		want                   []string // fields that must be present
	}{
		{"forwarded SSE answer", "POST", "demo", with(v26("tools/call", "list_technicians")), call("1", "list_technicians", "{}"), 200, []string{"Access-Control-Allow-Origin"}},
		{"policy refusal", "POST", "demo", with(v26("tools/call", "cancel_booking")), call("2", "cancel_booking", `{"booking_id":"B-1001"}`), 200, []string{"Access-Control-Allow-Origin"}},
		{"header mismatch", "POST", "demo", with(v26("tools/call", "find_customers")), call("3", "cancel_booking", "{}"), 400, nil},
		{"unknown method", "POST", "demo", with(v26("x/y", "")), []byte(`{"jsonrpc":"2.0","id":4,"method":"x/y","params":{` + meta26 + `}}`), 404, nil},
		{"GET under 2026-07-28", "GET", "demo", with(map[string]string{"MCP-Protocol-Version": "2026-07-28"}), nil, 405, []string{"Allow"}},
		{"PUT", "PUT", "demo", with(v26("tools/list", "")), list("5"), 405, []string{"Allow"}},
		{"preflight", "OPTIONS", "demo", with(map[string]string{"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, mcp-method"}), nil, 204, []string{"Access-Control-Allow-Methods"}},
		{"foreign origin", "POST", "demo", http.Header{"Origin": {"https://evil.example"}}, call("6", "list_technicians", "{}"), 403, nil},
		{"gzip answer decoded", "POST", "answers", with(v26("tools/list", "")), list("1"), 200, []string{"Access-Control-Allow-Origin"}},
		{"undecodable answer withheld", "POST", "answers", with(v26("tools/list", "")), list("5"), 502, []string{"Access-Control-Allow-Origin"}},
		{"answer with another id withheld", "POST", "answers", with(v26("tools/list", "")), list("10"), 502, []string{"Access-Control-Allow-Origin"}},
		{"empty answer withheld", "POST", "answers", with(v26("tools/list", "")), list("13"), 502, []string{"Access-Control-Allow-Origin"}},
		{"cut SSE event", "POST", "answers", with(v26("tools/list", "")), list("12"), 200, []string{"Access-Control-Allow-Origin"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, x := route(tt.upstream)
			a := sameAnswer(t, tt.method, p, x, tt.hdr, tt.body)
			if a.Status != tt.status {
				t.Errorf("proxy: status %d, want %d (%.300s)", a.Status, tt.status, a.Body)
			}
			for _, k := range tt.want {
				if len(a.Header[k]) == 0 {
					t.Errorf("proxy: no %s", k)
				}
			}
		})
	}
}

// TestDifferentialParityAuthHeaders: the 401 challenge and the protected
// resource metadata carry the same fields through both adapters.
func TestDifferentialParityAuthHeaders(t *testing.T) {
	e := startAuthEnv(t, 0)
	origin := http.Header{"Origin": {"http://localhost:3000"}}
	h := bearer("", "tools/call", "list_technicians")
	h.Del("Authorization")
	h.Set("Origin", "http://localhost:3000")
	a := sameAnswer(t, "POST", e.proxy+"/mcp", e.drivers["demo"]+"/mcp", h, call("1", "list_technicians", "{}"))
	if a.Status != 401 || len(a.Header["WWW-Authenticate"]) == 0 {
		t.Errorf("proxy: %d %v, want 401 with a challenge", a.Status, a.Header)
	}
	md := "/.well-known/oauth-protected-resource/mcp"
	a = sameAnswer(t, "GET", e.proxy+md, e.drivers["demo"]+md, origin, nil)
	if a.Status != 200 || len(a.Header["Cache-Control"]) == 0 {
		t.Errorf("proxy: metadata %d %v", a.Status, a.Header)
	}
}
