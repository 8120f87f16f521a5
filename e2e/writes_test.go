package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store/redistest"
)

// wrCall sends one tools/call with its own JSON-RPC id through a via and
// returns the answer with its JSON-RPC message.
func wrCall(t *testing.T, url, token, id, tool, args string) ctAnswer {
	t.Helper()
	a, _ := exchange(t, "POST", url, bearer(token, "tools/call", tool), call(id, tool, args))
	if a.Status != 200 {
		t.Fatalf("%s %s: status %d: %.500s", url, tool, a.Status, a.Body)
	}
	return ctAnswer{idAnswer: a, Msg: rpcMessage(a)}
}

// structured decodes a tool result's structuredContent into v.
func structured(t *testing.T, r ctToolResult, v any) {
	t.Helper()
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("structuredContent %s: %v", r.StructuredContent, err)
	}
}

// TestWriteReplay: a silent write sent twice with different JSON-RPC ids
// runs once; the second answer is the first result with replayed: true
// (replay protection on every silent write); two identical
// writes at once run once too. Through the proxy and the Envoy driver.
func TestWriteReplay(t *testing.T) {
	e := startContractEnv(t)
	g := e.gw
	for i, v := range g.vias("demo") {
		token := []string{g.token, g.token2}[i] // one connection per adapter
		t.Run(v.name, func(t *testing.T) {
			e.demo.Reset()
			args := `{"customer_id":"C-101","technician_id":"T-11","start":"2026-08-10T09:00:00+01:00","notes":"replay ` + v.name + `"}`
			first := wrCall(t, v.url, token, "1", demo.ToolCreateBooking, args).result(t)
			if first.IsError {
				t.Fatalf("first call failed: %+v", first)
			}
			second := wrCall(t, v.url, token, `"second"`, demo.ToolCreateBooking, args)
			r2 := second.result(t)
			if n := e.demo.Calls(demo.ToolCreateBooking); n != 1 {
				t.Fatalf("create_booking ran %d times, want 1", n)
			}
			if string(r2.Meta["io.mcpgate/replayed"]) != "true" {
				t.Errorf("second answer not marked replayed: %.800s", second.Body)
			}
			if !strings.Contains(second.Body, `"id":"second"`) {
				t.Errorf("replayed answer does not carry the repeat's id: %.300s", second.Body)
			}
			if !jsonEqual(first.StructuredContent, r2.StructuredContent) {
				t.Errorf("replayed result differs:\nfirst  %s\nsecond %s", first.StructuredContent, r2.StructuredContent)
			}
			if last := r2.Content[len(r2.Content)-1].Text; !strings.Contains(last, "replayed: true") {
				t.Errorf("no text telling the model it was replayed: %q", last)
			}
			// Other arguments are another write.
			other := strings.Replace(args, "replay", "other", 1)
			if r := wrCall(t, v.url, token, "3", demo.ToolCreateBooking, other).result(t); r.IsError || r.Meta["io.mcpgate/replayed"] != nil {
				t.Errorf("a write with other arguments was not run: %+v", r)
			}
			if n := e.demo.Calls(demo.ToolCreateBooking); n != 2 {
				t.Errorf("create_booking ran %d times, want 2", n)
			}

			// Two identical writes at once: one execution.
			e.demo.Reset()
			burst := strings.Replace(args, "replay", "burst", 1)
			var wg sync.WaitGroup
			answers := make([]ctAnswer, 4)
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, _ := exchange(t, "POST", v.url, bearer(token, "tools/call", demo.ToolCreateBooking), call(strconv.Itoa(10+i), demo.ToolCreateBooking, burst))
					answers[i] = ctAnswer{idAnswer: a, Msg: rpcMessage(a)}
				}()
			}
			wg.Wait()
			if n := e.demo.Calls(demo.ToolCreateBooking); n != 1 {
				t.Errorf("4 identical writes at once ran %d times, want 1", n)
			}
			for i, a := range answers {
				r := a.result(t)
				// Each answer is the result, a replay, "in progress", or
				// the concurrency cap (two calls in flight per credential).
				if r.IsError && !strings.Contains(a.Body, "in_progress") && !strings.Contains(a.Body, "too_many_in_flight") {
					t.Errorf("answer %d: %.500s", i, a.Body)
				}
			}
		})
	}
}

// TestWriteConfirmation: a notify tool answers with a preview and runs
// only through confirm_action with the exact summary, once; reject_action
// declines; another connection cannot use the token (two steps for
// notify, wake, alerting and delete).
func TestWriteConfirmation(t *testing.T) {
	e := startContractEnv(t)
	g := e.gw
	other, err := g.app.Tokens.Create(context.Background(), tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "e2e"},
		tokens.CreateRequest{Tenant: "acme", Subject: "alice", Name: "second connection"})
	if err != nil {
		t.Fatal(err)
	}
	type preview struct {
		Status         string `json:"status"`
		ConfirmToken   string `json:"confirm_token"`
		ConfirmSummary string `json:"confirm_summary"`
		Approval       string `json:"approval"`
	}
	for _, v := range g.vias("demo") {
		t.Run(v.name, func(t *testing.T) {
			e.demo.Reset()
			tool := demo.ToolSendBookingConfirmation
			pa := wrCall(t, v.url, g.token, "1", tool, `{"booking_id":"B-1001"}`)
			pr := pa.result(t)
			var p preview
			structured(t, pr, &p)
			if pr.IsError || p.Status != "confirmation_required" || !strings.HasPrefix(p.ConfirmToken, "mcpc_") || p.Approval != "client" {
				t.Fatalf("no preview: %.800s", pa.Body)
			}
			if !strings.Contains(p.ConfirmSummary, `{"booking_id":"B-1001"}`) || !strings.Contains(p.ConfirmSummary, tool) {
				t.Errorf("summary does not show what goes out: %q", p.ConfirmSummary)
			}
			if n := e.demo.Calls(tool); n != 0 {
				t.Fatalf("the preview ran the tool %d times", n)
			}
			send := func(tok, id, args string) ctAnswer {
				return wrCall(t, v.url, tok, id, "confirm_action", args)
			}
			args := func(token, summary string) string {
				b, _ := json.Marshal(map[string]string{"confirm_token": token, "confirm_summary": summary})
				return string(b)
			}
			send(g.token, "2", args(p.ConfirmToken, p.ConfirmSummary+" ")).refusal(t, "confirm_summary_mismatch")
			send(other.Secret, "3", args(p.ConfirmToken, p.ConfirmSummary)).refusal(t, "confirm_token_unknown")
			send(g.token, "4", args("mcpc_made_up", p.ConfirmSummary)).refusal(t, "confirm_token_unknown")
			send(g.token, "5", `{"confirm_token":"x","confirm_summary":"y","booking_id":"B-1001"}`).refusal(t, "invalid_arguments")
			if n := e.demo.Calls(tool); n != 0 {
				t.Fatalf("refused confirmations ran the tool %d times", n)
			}
			ok := send(g.token, "6", args(p.ConfirmToken, p.ConfirmSummary))
			if r := ok.result(t); r.IsError || !strings.Contains(string(r.StructuredContent), "B-1001") {
				t.Fatalf("confirmed call failed: %.800s", ok.Body)
			}
			if !strings.Contains(ok.Body, `"id":6`) {
				t.Errorf("the confirmed answer does not carry confirm_action's id: %.300s", ok.Body)
			}
			if n := e.demo.Calls(tool); n != 1 {
				t.Fatalf("confirmed tool ran %d times, want 1", n)
			}
			send(g.token, "7", args(p.ConfirmToken, p.ConfirmSummary)).refusal(t, "confirm_token_used")
			if n := e.demo.Calls(tool); n != 1 {
				t.Fatalf("a second confirmation ran the tool again (%d)", n)
			}

			// reject_action
			pa2 := wrCall(t, v.url, g.token, "8", demo.ToolCancelBooking, `{"booking_id":"B-1002"}`)
			var p2 preview
			structured(t, pa2.result(t), &p2)
			rj := wrCall(t, v.url, g.token, "9", "reject_action", `{"confirm_token":"`+p2.ConfirmToken+`","reason":"user said no"}`)
			if r := rj.result(t); r.IsError || !strings.Contains(string(r.StructuredContent), "rejected") {
				t.Fatalf("reject_action: %.500s", rj.Body)
			}
			send(g.token, "10", args(p2.ConfirmToken, p2.ConfirmSummary)).refusal(t, "action_rejected")
			if n := e.demo.Calls(demo.ToolCancelBooking); n != 0 {
				t.Fatalf("a rejected action ran (%d)", n)
			}

			// list_recent_changes shows the confirmed send.
			// (Audit records are written off the request path: poll.)
			var lr ctAnswer
			for range 40 {
				lr = wrCall(t, v.url, g.token, "11", "list_recent_changes", `{}`)
				if strings.Contains(lr.Body, tool) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if r := lr.result(t); r.IsError || !strings.Contains(string(r.StructuredContent), `"tool":"`+tool+`"`) {
				t.Errorf("list_recent_changes: %.800s", lr.Body)
			}
		})
	}
}

// TestWriteSafetyReplicas: two gateways on one real Redis (store and rate
// buckets): a write through one and its repeat through the other run
// once; a preview from one is confirmed through the other, once.
func TestWriteSafetyReplicas(t *testing.T) {
	rs := redistest.Start(t)
	e := startContractEnv(t)
	onRedis := func(c *config.Config) {
		// (The quickstart was parsed with bbolt, which chose memory.)
		c.Store, c.RateLimits.Backend = &config.Store{Redis: &config.RedisStore{URL: rs.URL}}, config.RateBackendRedis
	}
	a, b := e.startGateway(t, "a", onRedis), e.startGateway(t, "b", onRedis)
	e.demo.Reset()
	args := `{"customer_id":"C-102","technician_id":"T-12","start":"2026-08-11T09:00:00+01:00"}`
	first := wrCall(t, a.proxy+"/mcp", a.token, "1", demo.ToolCreateBooking, args).result(t)
	second := wrCall(t, b.envoy["demo"]+"/mcp", a.token, "2", demo.ToolCreateBooking, args).result(t)
	if n := e.demo.Calls(demo.ToolCreateBooking); n != 1 || first.IsError || string(second.Meta["io.mcpgate/replayed"]) != "true" {
		t.Errorf("create_booking ran %d times across replicas; second answer %+v", n, second)
	}

	pr := wrCall(t, a.proxy+"/mcp", a.token, "3", demo.ToolPageTechnician, `{"technician_id":"T-11","message":"replicas"}`).result(t)
	var p struct {
		Token   string `json:"confirm_token"`
		Summary string `json:"confirm_summary"`
	}
	structured(t, pr, &p)
	cargs, _ := json.Marshal(map[string]string{"confirm_token": p.Token, "confirm_summary": p.Summary})
	if r := wrCall(t, b.proxy+"/mcp", a.token, "4", "confirm_action", string(cargs)).result(t); r.IsError {
		t.Fatalf("confirmed through replica B: %+v", r)
	}
	wrCall(t, a.envoy["demo"]+"/mcp", a.token, "5", "confirm_action", string(cargs)).refusal(t, "confirm_token_used")
	if n := e.demo.Calls(demo.ToolPageTechnician); n != 1 {
		t.Errorf("page_technician ran %d times, want 1", n)
	}
}

// TestWriteClientGoneMidCall: a client that gives up while a silent write
// runs and then retries never runs it twice. Through the standalone proxy
// the write is not cancelled upstream: its answer is still read and kept,
// so the retry gets it, replayed. Through Envoy the upstream request may
// be cancelled with the client's: the retry then gets the result (if the
// upstream finished) or "outcome_unknown" — never a second run.
func TestWriteClientGoneMidCall(t *testing.T) {
	var runs atomic.Int64
	srv := sdk.NewServer(&sdk.Implementation{Name: "slow", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: "slow_write", Description: "Save a note slowly.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			time.Sleep(600 * time.Millisecond) // deliberately ignores ctx: a write that completes
			n := runs.Add(1)
			out := `{"saved":` + strconv.FormatInt(n, 10) + `}`
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: out}}, StructuredContent: json.RawMessage(out)}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)

	e := startContractEnv(t)
	e.base["slow"] = up.URL
	g := e.startGateway(t, "slow", func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "slow", URL: up.URL + "/slow/mcp", Route: "/slow/mcp",
			Tools: map[string]policy.ToolDeclaration{"slow_write": {Effect: policy.EffectSilentWrite, Rights: []string{ctLabRight}}}})
		c.Catalog.Unpinned = config.CatalogUnpinnedAllow
	})
	for i, v := range []ctVia{{"proxy", g.proxy + "/slow/mcp"}, {"extproc", g.envoy["slow"] + "/slow/mcp"}} {
		t.Run(v.name, func(t *testing.T) {
			token := []string{g.token, g.token2}[i]
			before := runs.Load()
			args := `{"text":"` + v.name + `"}`
			ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, "POST", v.url, bytes.NewReader(call("1", "slow_write", args)))
			req.Header = bearer(token, "tools/call", "slow_write")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				t.Fatalf("the client was not cut off (status %d)", resp.StatusCode)
			}
			cancel()
			time.Sleep(900 * time.Millisecond) // the upstream finishes (or was cancelled)
			retry := wrCall(t, v.url, token, "2", "slow_write", args)
			time.Sleep(700 * time.Millisecond)
			if n := runs.Load() - before; n > 1 {
				t.Fatalf("the write ran %d times", n)
			}
			r := retry.result(t)
			replayed := string(r.Meta["io.mcpgate/replayed"]) == "true"
			switch {
			case v.name == "proxy" && (!replayed || runs.Load()-before != 1):
				t.Errorf("proxy: the write was cancelled or its answer not kept: runs %d, retry %.600s", runs.Load()-before, retry.Body)
			case !replayed && !strings.Contains(retry.Body, "outcome_unknown"):
				t.Errorf("retry neither replayed nor outcome_unknown: %.600s", retry.Body)
			}
		})
	}
}

// TestWriteConfirmAfterRestart: the embedded store keeps a pending action
// across a restart; the preview given before it is confirmed after, once.
func TestWriteConfirmAfterRestart(t *testing.T) {
	e := startContractEnv(t)
	e.demo.Reset()
	g1 := e.startGateway(t, "restart", nil)
	pr := wrCall(t, g1.proxy+"/mcp", g1.token, "1", demo.ToolCancelBooking, `{"booking_id":"B-1003"}`).result(t)
	var p struct {
		Token   string `json:"confirm_token"`
		Summary string `json:"confirm_summary"`
	}
	structured(t, pr, &p)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g1.app.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	g2 := e.startGateway(t, "restart", nil) // the same bbolt file
	cargs, _ := json.Marshal(map[string]string{"confirm_token": p.Token, "confirm_summary": p.Summary})
	if r := wrCall(t, g2.envoy["demo"]+"/mcp", g1.token, "2", "confirm_action", string(cargs)).result(t); r.IsError {
		t.Fatalf("confirmation after the restart: %+v", r)
	}
	if n := e.demo.Calls(demo.ToolCancelBooking); n != 1 {
		t.Errorf("cancel_booking ran %d times, want 1", n)
	}
}

// TestWritesWhenRedisIsDown: with the store on Redis and Redis gone,
// every call fails closed with a clear, retryable answer and nothing
// reaches the upstream (gateway tokens live in Redis, so the credential
// itself cannot be checked).
func TestWritesWhenRedisIsDown(t *testing.T) {
	rs := redistest.Start(t)
	e := startContractEnv(t)
	g := e.startGateway(t, "redisdown", func(c *config.Config) {
		c.Store, c.RateLimits.Backend = &config.Store{Redis: &config.RedisStore{URL: rs.URL}}, config.RateBackendRedis
	})
	e.demo.Reset()
	if r := wrCall(t, g.proxy+"/mcp", g.token, "1", demo.ToolGetBooking, `{"booking_id":"B-1001"}`).result(t); r.IsError {
		t.Fatalf("before: %+v", r)
	}
	if err := syscall.Kill(rs.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	mark := e.demoUp.count()
	for _, v := range g.vias("demo") {
		for _, c := range []struct{ tool, args string }{
			{demo.ToolCreateBooking, `{"customer_id":"C-101","technician_id":"T-11","start":"2026-08-12T09:00:00+01:00"}`},
			{demo.ToolGetBooking, `{"booking_id":"B-1001"}`},
		} {
			a, _ := exchange(t, "POST", v.url, bearer(g.token, "tools/call", c.tool), call("3", c.tool, c.args))
			if a.Status != 503 || a.RetryAfter == "" || !strings.Contains(a.Body, `"id":3`) {
				t.Errorf("%s %s with Redis down: %d %q %.400s", v.name, c.tool, a.Status, a.RetryAfter, a.Body)
			}
		}
	}
	if n := e.demoUp.count() - mark; n != 0 {
		t.Errorf("%d request(s) reached the upstream with Redis down", n)
	}
}
