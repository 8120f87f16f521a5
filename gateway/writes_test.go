package gateway_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/redis/go-redis/v9"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/ratelimit"
)

// Write safety on a real bbolt store; the catalog is a fixed one (the
// real catalog is tested in internal/catalog and end to end in
// e2e/writes_test.go).

var writeDecls = map[string]map[string]policy.ToolDeclaration{"demo": {
	"save_note":      {Effect: policy.EffectSilentWrite},
	"save_keyed":     {Effect: policy.EffectSilentWrite},
	"email_customer": {Effect: policy.EffectNotify, NotifyObject: "text"},
	"get_note":       {Effect: policy.EffectRead},
	"get_report":     {Effect: policy.EffectRead, Expensive: true},
	"page_someone":   {Effect: policy.EffectWake},
	"sign_contract":  {Effect: policy.EffectNotify, LegallyBinding: true},
}}

func writeCatalog() *staticCatalog {
	obj := jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"}}}`)
	return &staticCatalog{loaded: true, tools: []gateway.CatalogTool{
		{Name: "save_note", Hash: "n1", State: policy.CatalogApproved, InputSchema: obj},
		{Name: "save_keyed", Hash: "k1", State: policy.CatalogApproved,
			InputSchema: jsontext.Value(`{"type":"object","properties":{"text":{"type":"string"},"idempotency_key":{"type":"string"}}}`)},
		{Name: "email_customer", Hash: "e1", State: policy.CatalogApproved, InputSchema: obj},
		{Name: "get_note", Hash: "g1", State: policy.CatalogApproved, InputSchema: obj},
		{Name: "get_report", Hash: "r1", State: policy.CatalogApproved, InputSchema: obj},
		{Name: "page_someone", Hash: "p1", State: policy.CatalogApproved, InputSchema: obj},
		{Name: "sign_contract", Hash: "s1", State: policy.CatalogApproved, InputSchema: obj},
	}}
}

// writeOpts are the write tests' pipeline: writeDecls, fakeAuth, the
// catalog cat and write safety on a bbolt store, then more.
func writeOpts(cat gateway.ToolCatalog, more ...gatewaytest.Option) []gatewaytest.Option {
	return append([]gatewaytest.Option{gatewaytest.WithDecls(writeDecls), gatewaytest.WithAuth(&fakeAuth{}),
		gatewaytest.WithCatalog(cat), gatewaytest.WithWrites()}, more...)
}

func toolCall(id, tool, args string) *gateway.Request {
	return authReq("POST", "good-", `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/call","params":{"name":"`+tool+`","arguments":`+args+`,`+meta2026+`}}`,
		"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool)
}

// answer runs the upstream's JSON answer through the exchange's response
// phase, as an adapter does. The answer is given the request's id (the
// tests share answer bodies between requests).
func answer(t *testing.T, x *gateway.Exchange, status int, body string) {
	t.Helper()
	if _, err := x.ResponseHeaders(status, mcp.Header{"content-type": {"application/json"}}); err != nil {
		t.Fatal(err)
	}
	if status < 300 {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		m["id"] = json.RawMessage(x.Message().ID)
		b, _ := json.Marshal(m)
		if _, _, err := x.ResponseBody(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	x.Finish()
}

type toolAnswer struct {
	Result struct {
		IsError           bool                       `json:"isError"`
		StructuredContent json.RawMessage            `json:"structuredContent"`
		Meta              map[string]json.RawMessage `json:"_meta"`
	} `json:"result"`
}

func decodeAnswer(t *testing.T, v gateway.Verdict) toolAnswer {
	t.Helper()
	if v.Local == nil {
		t.Fatal("forwarded, want a local answer")
	}
	var a toolAnswer
	if err := json.Unmarshal(v.Local.Body, &a); err != nil {
		t.Fatalf("%s: %v", v.Local.Body, err)
	}
	return a
}

func code(t *testing.T, a toolAnswer) string {
	t.Helper()
	var d struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(a.Result.StructuredContent, &d)
	return d.Error.Code
}

func TestReplayWindow(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, writeOpts(writeCatalog())...)
	result := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"{\"id\":\"N-1\"}"}],"structuredContent":{"id":"N-1"}}}`

	x, v := p.HandleRequest(ctx, toolCall("1", "save_note", `{"text":"a"}`))
	if v.Local != nil || !v.Detach {
		t.Fatalf("first call not forwarded detached: %+v", v)
	}
	answer(t, x, 200, result)

	// Same write, other id, members in another order: replayed.
	_, v = p.HandleRequest(ctx, toolCall(`"b"`, "save_note", `{ "text" : "a" }`))
	a := decodeAnswer(t, v)
	if string(a.Result.Meta[gateway.ReplayedMetaKey]) != "true" || string(a.Result.StructuredContent) != `{"id":"N-1"}` {
		t.Errorf("repeat: %s", v.Local.Body)
	}
	if !strings.Contains(string(v.Local.Body), `"id":"b"`) {
		t.Errorf("replayed answer keeps the first id: %s", v.Local.Body)
	}

	// A tool error is not kept: the repeat runs.
	x, _ = p.HandleRequest(ctx, toolCall("2", "save_note", `{"text":"err"}`))
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Error: no"}],"isError":true}}`)
	if _, v = p.HandleRequest(ctx, toolCall("3", "save_note", `{"text":"err"}`)); v.Local != nil {
		t.Errorf("a call that failed was not run again: %s", v.Local.Body)
	}

	// input_required is never replayed.
	x, _ = p.HandleRequest(ctx, toolCall("4", "save_note", `{"text":"ask"}`))
	answer(t, x, 200, `{"jsonrpc":"2.0","id":4,"result":{"resultType":"incomplete","inputRequests":{"a":{"method":"elicitation/create"}},"requestState":"s"}}`)
	if _, v = p.HandleRequest(ctx, toolCall("5", "save_note", `{"text":"ask"}`)); v.Local != nil {
		t.Errorf("an input_required answer was replayed: %s", v.Local.Body)
	}

	// The upstream refused (4xx): nothing ran, the repeat runs.
	x, _ = p.HandleRequest(ctx, toolCall("6", "save_note", `{"text":"4xx"}`))
	answer(t, x, 400, "")
	if _, v = p.HandleRequest(ctx, toolCall("7", "save_note", `{"text":"4xx"}`)); v.Local != nil {
		t.Errorf("a refused call was not run again: %s", v.Local.Body)
	}

	// No answer (client gone): the outcome is unknown and a repeat says so.
	x, _ = p.HandleRequest(ctx, toolCall("8", "save_note", `{"text":"gone"}`))
	x.Finish()
	_, v = p.HandleRequest(ctx, toolCall("9", "save_note", `{"text":"gone"}`))
	if a := decodeAnswer(t, v); !a.Result.IsError || code(t, a) != "outcome_unknown" {
		t.Errorf("repeat of an unknown outcome: %s", v.Local.Body)
	}

	// While the first runs, a repeat waits (100ms here) and is told it
	// is in progress.
	x, _ = p.HandleRequest(ctx, toolCall("10", "save_note", `{"text":"slow"}`))
	_, v = p.HandleRequest(ctx, toolCall("11", "save_note", `{"text":"slow"}`))
	if a := decodeAnswer(t, v); code(t, a) != "in_progress" {
		t.Errorf("repeat while running: %s", v.Local.Body)
	}
	answer(t, x, 200, result)

	// Reads are never kept.
	x, v = p.HandleRequest(ctx, toolCall("12", "get_note", `{"text":"a"}`))
	if v.Detach {
		t.Error("a read is forwarded detached")
	}
	answer(t, x, 200, result)
	if _, v = p.HandleRequest(ctx, toolCall("13", "get_note", `{"text":"a"}`)); v.Local != nil {
		t.Errorf("a read was answered from the window: %s", v.Local.Body)
	}
}

func TestIdempotencyKey(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, writeOpts(writeCatalog())...)
	x, _ := p.HandleRequest(ctx, toolCall("1", "save_keyed", `{"text":"a","idempotency_key":"k-1"}`))
	answer(t, x, 200, `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"id":"N-1"}}}`)
	_, v := p.HandleRequest(ctx, toolCall("2", "save_keyed", `{"text":"a","idempotency_key":"k-1"}`))
	if a := decodeAnswer(t, v); string(a.Result.Meta[gateway.ReplayedMetaKey]) != "true" {
		t.Errorf("same key, same arguments: %s", v.Local.Body)
	}
	_, v = p.HandleRequest(ctx, toolCall("3", "save_keyed", `{"text":"b","idempotency_key":"k-1"}`))
	if a := decodeAnswer(t, v); code(t, a) != "idempotency_key_reused" {
		t.Errorf("same key, other arguments: %s", v.Local.Body)
	}
}

type previewAnswer struct {
	Result struct {
		StructuredContent struct {
			Status         string `json:"status"`
			ConfirmToken   string `json:"confirm_token"`
			ConfirmSummary string `json:"confirm_summary"`
		} `json:"structuredContent"`
	} `json:"result"`
}

func previewOf(t *testing.T, v gateway.Verdict) (token, summary string) {
	t.Helper()
	if v.Local == nil {
		t.Fatal("a confirmable call was forwarded")
	}
	var a previewAnswer
	if err := json.Unmarshal(v.Local.Body, &a); err != nil || a.Result.StructuredContent.Status != "confirmation_required" {
		t.Fatalf("no preview: %s", v.Local.Body)
	}
	return a.Result.StructuredContent.ConfirmToken, a.Result.StructuredContent.ConfirmSummary
}

func confirmArgs(token, summary string) string {
	b, _ := json.Marshal(map[string]string{"confirm_token": token, "confirm_summary": summary})
	return string(b)
}

func TestConfirmation(t *testing.T) {
	ctx := context.Background()
	cat := writeCatalog()
	p := gatewaytest.New(t, writeOpts(cat)...)
	_, v := p.HandleRequest(ctx, toolCall("1", "email_customer", `{"text":"hi"}`))
	token, summary := previewOf(t, v)

	// Confirmed: the original call goes upstream with confirm_action's
	// id and the original tool's name.
	x, v := p.HandleRequest(ctx, toolCall("2", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil || !v.BodyChanged {
		t.Fatalf("confirmed call not forwarded: %+v", v.Local)
	}
	if got := v.SetHeader.Get("mcp-name"); got != "email_customer" {
		t.Errorf("Mcp-Name %q", got)
	}
	if !strings.Contains(string(v.Body), `"name":"email_customer"`) || !strings.Contains(string(v.Body), `"id":2`) || !strings.Contains(string(v.Body), `"text":"hi"`) {
		t.Errorf("forwarded body %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"sent":true}}}`)
	_, v = p.HandleRequest(ctx, toolCall("3", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_used" {
		t.Errorf("second confirmation: %s", v.Local.Body)
	}

	// Expired.
	pe := gatewaytest.New(t, writeOpts(cat, gatewaytest.WithWrites(func(w *gateway.WriteSafety) { w.ConfirmTTL = time.Millisecond }))...)
	_, v = pe.HandleRequest(ctx, toolCall("1", "email_customer", `{"text":"late"}`))
	token, summary = previewOf(t, v)
	time.Sleep(5 * time.Millisecond)
	_, v = pe.HandleRequest(ctx, toolCall("2", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_expired" {
		t.Errorf("expired token: %s", v.Local.Body)
	}

	// The tool changed between preview and confirmation (still approved,
	// e.g. re-pinned): a fresh preview, and the old token is dead.
	_, v = p.HandleRequest(ctx, toolCall("4", "email_customer", `{"text":"changed"}`))
	token, summary = previewOf(t, v)
	cat.tools[2].Hash = "e2"
	_, v = p.HandleRequest(ctx, toolCall("5", "confirm_action", confirmArgs(token, summary)))
	fresh, _ := previewOf(t, v)
	if fresh == token {
		t.Error("the same token was previewed again")
	}
	_, v = p.HandleRequest(ctx, toolCall("6", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_superseded" {
		t.Errorf("old token after a change: %s", v.Local.Body)
	}

	// Another connection cannot use a token.
	_, v = p.HandleRequest(ctx, toolCall("7", "email_customer", `{"text":"mine"}`))
	token, summary = previewOf(t, v)
	r := toolCall("8", "confirm_action", confirmArgs(token, summary))
	r.Header.Set("authorization", "Bearer other")
	_, v = p.HandleRequest(ctx, r)
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_unknown" {
		t.Errorf("other connection: %s", v.Local.Body)
	}

	// No answer for the confirmed call: the action is used up (failed,
	// outcome unknown), never run twice.
	x, _ = p.HandleRequest(ctx, toolCall("9", "confirm_action", confirmArgs(token, summary)))
	x.Finish()
	_, v = p.HandleRequest(ctx, toolCall("10", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_used" {
		t.Errorf("after an unknown outcome: %s", v.Local.Body)
	}
}

func TestWriteSafetyWithoutStore(t *testing.T) {
	p := gatewaytest.New(t, gatewaytest.WithDecls(writeDecls), gatewaytest.WithAuth(&fakeAuth{}), gatewaytest.WithCatalog(writeCatalog()))
	_, v := p.HandleRequest(context.Background(), toolCall("1", "email_customer", `{"text":"x"}`))
	if a := decodeAnswer(t, v); code(t, a) != "write_safety_unavailable" {
		t.Errorf("a notify tool without a store: %s", v.Local.Body)
	}
	// A silent write is forwarded, without replay protection (the app
	// warns at start).
	if _, v = p.HandleRequest(context.Background(), toolCall("2", "save_note", `{"text":"x"}`)); v.Local != nil || v.Detach {
		t.Errorf("a silent write without a store: %+v", v)
	}
}

func TestLimits(t *testing.T) {
	ctx := context.Background()
	lim := &gateway.Limits{
		Limiter:   ratelimit.NewMemory(0),
		Buckets:   map[string]ratelimit.Limit{"reads": {Rate: 60, Period: time.Minute, Burst: 100}, "writes": {Rate: 2, Period: time.Hour, Burst: 2}, "notify": {Rate: 1, Period: time.Hour, Burst: 1}},
		Slots:     ratelimit.NewSlots(2, 1),
		LoopBrake: 3,
	}
	p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithLimits(lim))...)
	ok := `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"id":"N-1"}}}`

	// Two writes per hour: the first runs, its repeat is a replay (takes
	// nothing), a preview takes nothing, its confirmation takes the
	// second, and a third write is refused with when to retry.
	x, v := p.HandleRequest(ctx, toolCall("1", "save_note", `{"text":"a"}`))
	if v.Local != nil {
		t.Fatalf("first write: %s", v.Local.Body)
	}
	answer(t, x, 200, ok)
	if _, v = p.HandleRequest(ctx, toolCall("2", "save_note", `{"text":"a"}`)); v.Local == nil || !strings.Contains(string(v.Local.Body), gateway.ReplayedMetaKey) {
		t.Fatalf("repeat: %+v", v)
	}
	// A preview takes nothing; its confirmation does.
	_, v = p.HandleRequest(ctx, toolCall("4", "email_customer", `{"text":"x"}`))
	token, summary := previewOf(t, v)
	_, v = p.HandleRequest(ctx, toolCall("5", "email_customer", `{"text":"y"}`))
	previewOf(t, v)
	x, v = p.HandleRequest(ctx, toolCall("6", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("confirmation refused: %s", v.Local.Body)
	}
	answer(t, x, 200, ok)
	_, v = p.HandleRequest(ctx, toolCall("3", "save_note", `{"text":"b"}`))
	if a := decodeAnswer(t, v); code(t, a) != "rate_limited" || !strings.Contains(string(v.Local.Body), "Retry the same call in ") {
		t.Errorf("third write: %s", v.Local.Body)
	}

	// Concurrency: two reads in flight use the read slot and refuse the
	// second; a write still has its slot.
	r1, v := p.HandleRequest(ctx, toolCall("7", "get_note", `{"text":"1"}`))
	if v.Local != nil {
		t.Fatal(string(v.Local.Body))
	}
	_, v = p.HandleRequest(ctx, toolCall("8", "get_note", `{"text":"2"}`))
	if a := decodeAnswer(t, v); code(t, a) != "too_many_in_flight" {
		t.Errorf("second read in flight: %s", v.Local.Body)
	}
	answer(t, r1, 200, ok)

	// Loop brake: an upstream failure twice, the third identical call is
	// not run.
	fail := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Error: no"}],"isError":true}}`
	for i := range 2 {
		x, v = p.HandleRequest(ctx, toolCall("9", "get_note", `{"text":"loop"}`))
		if v.Local != nil {
			t.Fatalf("failing call %d not run: %s", i, v.Local.Body)
		}
		answer(t, x, 200, fail)
	}
	_, v = p.HandleRequest(ctx, toolCall("10", "get_note", `{"text":"loop"}`))
	if a := decodeAnswer(t, v); code(t, a) != "stop_and_ask" {
		t.Errorf("third identical failing call: %s", v.Local.Body)
	}
	// Policy refusals: the third identical one says stop and ask, first.
	for i := range 3 {
		_, v = p.HandleRequest(ctx, toolCall("11", "get_note", `{"unknown":1}`))
		want := "invalid_arguments"
		if i == 2 {
			want = "stop_and_ask"
		}
		if a := decodeAnswer(t, v); code(t, a) != want {
			t.Errorf("refusal %d: %s", i+1, v.Local.Body)
		}
	}
}

// TestEachBucket bursts over every default bucket: reads and expensive
// reads per credential, notify per object (another object still goes),
// wake per tenant (another credential of the tenant is refused too).
func TestEachBucket(t *testing.T) {
	ctx := context.Background()
	one := ratelimit.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	lim := &gateway.Limits{Limiter: ratelimit.NewMemory(0), Buckets: map[string]ratelimit.Limit{
		"reads": one, "expensive_reads": one, "writes": {Rate: 100, Period: time.Hour, Burst: 100}, "notify": one, "wake": one}}
	p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithLimits(lim))...)
	run := func(id, tool, args, token string) gateway.Verdict {
		r := toolCall(id, tool, args)
		r.Header.Set("authorization", "Bearer "+token)
		x, v := p.HandleRequest(ctx, r)
		if v.Local == nil {
			answer(t, x, 200, `{"jsonrpc":"2.0","id":1,"result":{"content":[],"structuredContent":{"ok":true}}}`)
		}
		return v
	}
	confirmed := func(id, tool, args, token string) gateway.Verdict {
		tok, sum := previewOf(t, run(id, tool, args, token))
		return run(id+"1", "confirm_action", confirmArgs(tok, sum), token)
	}
	limited := func(what string, v gateway.Verdict) {
		t.Helper()
		if v.Local == nil {
			t.Errorf("%s: not limited", what)
			return
		}
		if a := decodeAnswer(t, v); code(t, a) != "rate_limited" {
			t.Errorf("%s: %s", what, v.Local.Body)
		}
	}
	for _, tool := range []string{"get_note", "get_report"} {
		if v := run("1", tool, `{"text":"a"}`, "good-"); v.Local != nil {
			t.Fatalf("%s first: %s", tool, v.Local.Body)
		}
		limited(tool+" second", run("2", tool, `{"text":"b"}`, "good-"))
	}
	if v := confirmed("3", "email_customer", `{"text":"cust-1"}`, "acme-a"); v.Local != nil {
		t.Fatalf("notify first: %s", v.Local.Body)
	}
	limited("notify to the same object from another credential", confirmed("4", "email_customer", `{"text":"cust-1"}`, "acme-b"))
	if v := confirmed("5", "email_customer", `{"text":"cust-2"}`, "acme-c"); v.Local != nil {
		t.Errorf("notify to another object: %s", v.Local.Body)
	}
	if v := confirmed("6", "page_someone", `{"text":"p"}`, "acme-d"); v.Local != nil {
		t.Fatalf("wake first: %s", v.Local.Body)
	}
	limited("wake from another credential of the tenant", confirmed("7", "page_someone", `{"text":"q"}`, "acme-e"))
}

// TestReadsWhenLimiterUnavailable: with the bucket backend unreachable
// (a Redis client aimed at a closed port), writes are refused and reads
// follow rate_limits.reads_when_unavailable.
func TestReadsWhenLimiterUnavailable(t *testing.T) {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { rdb.Close() })
	for _, allow := range []bool{false, true} {
		lim := &gateway.Limits{Limiter: ratelimit.NewRedis(rdb), ReadsWhenUnavailable: allow,
			Buckets: map[string]ratelimit.Limit{"reads": {Rate: 10, Period: time.Second, Burst: 10}, "writes": {Rate: 10, Period: time.Second, Burst: 10}}}
		p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithLimits(lim))...)
		_, v := p.HandleRequest(ctx, toolCall("1", "get_note", `{"text":"a"}`))
		if allow != (v.Local == nil) {
			t.Errorf("reads_when_unavailable %v: read answered %+v", allow, v.Local)
		}
		_, v = p.HandleRequest(ctx, toolCall("2", "save_note", `{"text":"a"}`))
		if a := decodeAnswer(t, v); code(t, a) != "rate_limiter_unavailable" {
			t.Errorf("reads_when_unavailable %v: write %s", allow, v.Local.Body)
		}
	}
}

// TestConfirmedCallNotSent: a confirmed call the upstream refused (4xx:
// nothing ran) can be confirmed again; a confirm_token is only good on
// the upstream route it was previewed on.
func TestConfirmedCallNotSent(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, writeOpts(writeCatalog())...)
	_, v := p.HandleRequest(ctx, toolCall("1", "email_customer", `{"text":"again"}`))
	token, summary := previewOf(t, v)

	other := toolCall("2", "confirm_action", confirmArgs(token, summary))
	other.Upstream = "other"
	_, v = p.HandleRequest(ctx, other)
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_unknown" {
		t.Errorf("confirmed on another upstream: %s", v.Local.Body)
	}

	x, v := p.HandleRequest(ctx, toolCall("3", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("confirmation refused: %s", v.Local.Body)
	}
	answer(t, x, 429, "")
	x, v = p.HandleRequest(ctx, toolCall("4", "confirm_action", confirmArgs(token, summary)))
	if v.Local != nil {
		t.Fatalf("a call the upstream refused cannot be confirmed again: %s", v.Local.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":4,"result":{"content":[],"structuredContent":{"sent":true}}}`)
	_, v = p.HandleRequest(ctx, toolCall("5", "confirm_action", confirmArgs(token, summary)))
	if a := decodeAnswer(t, v); code(t, a) != "confirm_token_used" {
		t.Errorf("after it ran: %s", v.Local.Body)
	}
}
