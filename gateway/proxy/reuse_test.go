package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/policy"
)

// Exchanges given back for reuse carry nothing of one request into
// another: concurrent callers with their own principals and arguments
// (one unauthenticated), whose calls end every way a call can — answered
// as JSON or SSE, through a virtual server, a write detached from its
// client, past their deadline, the upstream hanging up, the client
// leaving, refused locally or by the policy — each get their own answer,
// the upstream sees each request with its own caller's assertion and
// arguments only, and each audit record names one caller (traced).
func TestReusedExchangesKeepRequestsApart(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Arguments struct{ Caller, Nonce, Mode string } `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("upstream: %v: %s", err, body)
			return
		}
		a := m.Params.Arguments
		if got, want := r.Header.Get("Mcpgate-Assertion"), gatewaytest.CallerAssertion(a.Caller, "default"); got != want {
			t.Errorf("upstream: call %s of caller %s carries assertion %q, want %q", a.Nonce, a.Caller, got, want)
		}
		if got := r.Header.Values("Authorization"); len(got) != 0 {
			t.Errorf("upstream: call %s carries the client's credential %q", a.Nonce, got)
		}
		if got := r.Header.Values("X-Caller"); len(got) != 1 || got[0] != a.Caller {
			t.Errorf("upstream: call %s of caller %s carries X-Caller %q", a.Nonce, a.Caller, got)
		}
		if got := r.Header.Values("Accept-Encoding"); len(got) != 1 || got[0] != "identity" {
			t.Errorf("upstream: call %s carries Accept-Encoding %q", a.Nonce, got)
		}
		text := fmt.Sprintf("caller=%s nonce=%s assertion=%s", a.Caller, a.Nonce, r.Header.Get("Mcpgate-Assertion"))
		answer := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, m.ID, text)
		switch a.Mode {
		case "slow", "leave":
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
			return
		case "hangup":
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		case "sse":
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	var audits gatewaytest.Audits
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	decls := map[string]map[string]policy.ToolDeclaration{"default": {
		"get_status": {Effect: policy.EffectRead},
		"set_status": {Effect: policy.EffectSilentWrite},
	}}
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(gatewaytest.CallerAuth{}), gatewaytest.WithWrites(),
		gatewaytest.WithLimits(&gateway.Limits{DefaultDeadline: 300 * time.Millisecond}),
		gatewaytest.With(gateway.Options{Asserter: gatewaytest.PlainAsserter{}, Audit: audits.Record, Tracer: tp.Tracer("reuse"),
			Servers: []gateway.Server{{Name: "work", Members: []gateway.Member{{Upstream: "default", Prefix: "d"}}}}}))
	gw, hc := serveReuse(t, p, proxy.Route{Path: "/mcp", Upstream: "default", URL: u}, proxy.Route{Path: "/fed/mcp", Upstream: "work"})

	modes := []string{"json", "write", "sse", "json", "slow", "write", "hangup", "leave", "refused", "denied", "federated"}
	const callers, rounds = 7, 3
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(c)
			if c == callers-1 {
				caller = "anon"
			}
			for i := range rounds * len(modes) {
				mode := modes[(i+c)%len(modes)]
				id := fmt.Sprintf("%d%03d", c+1, i)
				nonce := fmt.Sprintf("n-%s-%s", caller, id)
				args := fmt.Sprintf(`{"caller":%q,"nonce":%q,"mode":%q}`, caller, nonce, mode)
				status, body, err := call(hc, gw+"/mcp", caller, id, args, mode)
				if mode == "leave" {
					if err == nil {
						t.Errorf("%s: the client left, yet got %d %s", nonce, status, body)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				}
				if !bytes.Contains(body, []byte(`"id":`+id)) {
					t.Errorf("%s (%s): answer of another request: %d %s", nonce, mode, status, body)
				}
				switch mode {
				case "json", "sse", "write", "federated":
					want := fmt.Sprintf("caller=%s nonce=%s assertion=%s", caller, nonce, gatewaytest.CallerAssertion(caller, "default"))
					if status != 200 || !bytes.Contains(body, []byte(want)) {
						t.Errorf("%s (%s): %d %s, want the text %q", nonce, mode, status, body, want)
					}
				case "slow", "hangup", "refused", "denied":
					if bytes.Contains(body, []byte("caller=")) {
						t.Errorf("%s (%s): %d %s, an upstream answer", nonce, mode, status, body)
					}
				}
			}
		}()
	}
	wg.Wait()
	records := audits.Records()
	if len(records) == 0 {
		t.Error("no audit records")
	}
	if len(rec.Ended()) == 0 {
		t.Error("no spans")
	}
	for _, r := range records {
		n, authenticated := strings.CutPrefix(r.Subject, "subject-")
		if authenticated && (r.Tenant != "tenant-"+n || r.Connection != "conn-"+n) || !authenticated && (r.Subject != "" || r.Tenant != "") {
			t.Errorf("audit record mixes callers: %+v", r)
		}
	}
}

// call sends one tools/call as caller and returns the answer. Mode
// "write" calls the write, "denied" a tool the policy refuses,
// "federated" the tool through a virtual server; "leave": the client goes away while the upstream works; "refused": its
// Mcp-Name names another tool than its body (refused locally).
func call(hc *http.Client, target, caller, id, args, mode string) (int, []byte, error) {
	tool := "get_status"
	switch mode {
	case "write":
		tool = "set_status" // a write: detached from the client, audited
	case "denied":
		tool = "drop_tables" // undeclared: refused by the policy
	case "federated":
		tool, target = "d_get_status", strings.TrimSuffix(target, "/mcp")+"/fed/mcp" // through a virtual server
	}
	ctx := context.Background()
	if mode == "leave" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
	}
	req, err := http.NewRequestWithContext(ctx, "POST", target, bytes.NewReader(callBody(id, tool, args)))
	if err != nil {
		return 0, nil, err
	}
	req.Header = http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {tool},
		"Authorization":        {"Bearer tok-" + caller},
		"X-Caller":             {caller},
	}
	if mode == "refused" {
		req.Header.Set("Mcp-Name", "other")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
