package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/policy"
)

// headerRecorder is an upstream that answers every tools/call with a plain
// result and keeps what it received: the query and the header fields of
// each request.
type headerRecorder struct {
	mu   sync.Mutex
	seen []*http.Request
}

func (h *headerRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	h.mu.Lock()
	h.seen = append(h.seen, r.Clone(r.Context()))
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ok"}]}}`, req.ID)
}

// take returns the requests received since the last take.
func (h *headerRecorder) take() []*http.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.seen
	h.seen = nil
	return s
}

// TestDifferentialHeaders: through the standalone proxy and through Envoy
// (the driver) + ext_proc, a header field the gateway binds or compares on
// that is repeated, joined with a comma or spelled with underscores is
// refused with the same 400 and the upstream receives nothing; a
// tenant-like query parameter in any spelling frameworks read is refused
// the same way; an allowed request's query never reaches the upstream; a
// long Origin is repeated cut on a rune boundary.
func TestDifferentialHeaders(t *testing.T) {
	rec := &headerRecorder{}
	e := startDifferential(t, differentialUpstream{name: "hdrs", handler: rec,
		tools: map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}}})
	body := call("21", "lookup", "{}")
	// Every route crosses the ext_proc stream (checkStreams).
	e.both(t, "demo", toHeader(v26("tools/call", "list_technicians")), call("1", "list_technicians", "{}"))
	e.both(t, "synthetic", toHeader(v26("tools/call", "lookup")), body)
	with := func(kv ...string) http.Header {
		h := toHeader(v26("tools/call", "lookup"))
		for i := 0; i+1 < len(kv); i += 2 {
			h[kv[i]] = append(h[kv[i]], kv[i+1])
		}
		return h
	}
	set := func(k, v string) http.Header {
		h := toHeader(v26("tools/call", "lookup"))
		h[k] = []string{v}
		return h
	}

	refused := map[string]struct {
		hdr  http.Header
		code int
	}{
		"two Mcp-Session-Id fields":       {with("Mcp-Session-Id", "mine", "Mcp-Session-Id", "theirs"), -32600},
		"Mcp-Session-Id joined":           {set("Mcp-Session-Id", "mine, theirs"), -32600},
		"Mcp_Session_Id":                  {set("Mcp_Session_Id", "theirs"), -32600},
		"two MCP-Protocol-Version fields": {with("Mcp-Protocol-Version", "2026-07-28"), -32020},
		"MCP-Protocol-Version joined":     {set("Mcp-Protocol-Version", "2026-07-28,2025-06-18"), -32020},
		"two Mcp-Method fields":           {with("Mcp-Method", "tools/call"), -32020},
		"Mcp-Method joined":               {set("Mcp-Method", "tools/call,tools/list"), -32020},
		"two Mcp-Name fields, equal":      {with("Mcp-Name", "lookup"), -32020},
		"two Mcp-Param fields":            {with("Mcp-Param-Q", "a", "Mcp-Param-Q", "b"), -32020},
		"two Authorization fields":        {with("Authorization", "Bearer a", "Authorization", "Bearer b"), -32600},
		"Authorization joined":            {set("Authorization", "Bearer a,Bearer b"), -32600},
		"two Origin fields":               {with("Origin", "http://localhost", "Origin", "https://evil.example"), -32600},
		"Origin joined":                   {set("Origin", "http://localhost,https://evil.example"), -32600},
	}
	for name, tt := range refused {
		t.Run(name, func(t *testing.T) {
			direct, _ := e.both(t, "hdrs", tt.hdr, body)
			checkRefusal(t, direct, 400, tt.code)
			if got := rec.take(); len(got) != 0 {
				t.Errorf("the upstream received %d requests", len(got))
			}
		})
	}

	for _, q := range []string{"tenant=globex", "tenant[]=globex", "tenant[x]=globex", "tenant%5B%5D=globex", "tenant.id=globex",
		"org.id=globex", "%74enant=globex", "%2574enant=globex", "tenant%00=globex", "TENANT=globex", "Tenant_Id=globex", "a=1&tenant%20=globex"} {
		t.Run("query "+q, func(t *testing.T) {
			direct := e.bothQuery(t, "hdrs", q, toHeader(v26("tools/call", "lookup")), body)
			checkRefusal(t, direct, 400, -32600)
			if !strings.Contains(direct.Body, "would choose a tenant") {
				t.Errorf("answer %s", direct.Body)
			}
			if got := rec.take(); len(got) != 0 {
				t.Errorf("the upstream received %d requests", len(got))
			}
		})
	}

	t.Run("an allowed request's query is not forwarded", func(t *testing.T) {
		direct := e.bothQuery(t, "hdrs", "api-version=2&x[]=1", toHeader(v26("tools/call", "lookup")), body)
		if direct.Status != 200 {
			t.Fatalf("status %d: %s", direct.Status, direct.Body)
		}
		got := rec.take()
		if len(got) != 2 {
			t.Fatalf("the upstream received %d requests, want 2", len(got))
		}
		for i, r := range got {
			if r.URL.RawQuery != "" || strings.Contains(r.RequestURI, "?") {
				t.Errorf("request %d reached the upstream with the query %q (%s)", i, r.URL.RawQuery, r.RequestURI)
			}
		}
	})

	t.Run("client copies of the gateway's fields are not forwarded", func(t *testing.T) {
		direct, _ := e.both(t, "hdrs", set("Accept-Encoding", "gzip"), body)
		h := set("Mcpgate-Assertion", "forged")
		h["Mcpgate_Assertion"] = []string{"forged"}
		e.both(t, "hdrs", h, body)
		if direct.Status != 200 {
			t.Fatalf("status %d: %s", direct.Status, direct.Body)
		}
		got := rec.take()
		if len(got) != 4 {
			t.Fatalf("the upstream received %d requests, want 4", len(got))
		}
		for i, r := range got {
			if ae := r.Header.Values("Accept-Encoding"); len(ae) != 1 || ae[0] != "identity" {
				t.Errorf("request %d: Accept-Encoding %q", i, ae)
			}
			if a := r.Header.Get("Mcpgate-Assertion") + r.Header.Get("Mcpgate_assertion"); a != "" {
				t.Errorf("request %d: the client's assertion %q was forwarded", i, a)
			}
		}
	})

	t.Run("a long Origin is cut on a rune boundary", func(t *testing.T) {
		for _, n := range []int{54, 55, 56, 71, 72} {
			origin := "https://" + strings.Repeat("a", n) + "é" + strings.Repeat("b", 40) + ".example"
			direct, _ := e.both(t, "hdrs", set("Origin", origin), body)
			if direct.Status != 403 || !utf8.ValidString(direct.Body) || strings.Contains(direct.Body, "\uFFFD") || !strings.Contains(direct.Body, "…") {
				t.Errorf("%d: %d %s", n, direct.Status, direct.Body)
			}
		}
		if got := rec.take(); len(got) != 0 {
			t.Errorf("the upstream received %d requests", len(got))
		}
	})
	e.checkStreams(t)
}

// checkRefusal fails unless s is a JSON-RPC error with the given status and
// code for the request id 21.
func checkRefusal(t *testing.T, s seen, status, code int) {
	t.Helper()
	var e struct {
		ID    json.RawMessage `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	if s.Status != status || json.Unmarshal([]byte(s.Body), &e) != nil || string(e.ID) != "21" || e.Error.Code != code {
		t.Errorf("answer %d %s, want %d with error %d for id 21", s.Status, s.Body, status, code)
	}
}

// bothQuery is both for a request URL with the query q.
func (e *differentialEnv) bothQuery(t *testing.T, upstream, q string, hdr http.Header, body []byte) seen {
	t.Helper()
	path := "/" + upstream + "/mcp?" + q
	direct := doHeader(t, "POST", e.proxy+path, hdr, body)
	viaEnvoy := doHeader(t, "POST", e.drivers[upstream].URL+path, hdr, body)
	if direct.Status != viaEnvoy.Status || direct.ContentType != viaEnvoy.ContentType || direct.Body != viaEnvoy.Body {
		t.Errorf("proxy and ext_proc differ:\nproxy:   %d %q %.400s\next_proc: %d %q %.400s", direct.Status, direct.ContentType, direct.Body, viaEnvoy.Status, viaEnvoy.ContentType, viaEnvoy.Body)
	}
	return direct
}
