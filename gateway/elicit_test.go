package gateway_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/internal/sealing"
	"github.com/mcpgate/mcpgate/ratelimit"
	"github.com/mcpgate/mcpgate/store"
)

// Confirmation through input_required with a sealed requestState, on a
// real bbolt store, the real policy engine and real AES-GCM keys; the
// upstream's answers are fed through the exchange as an adapter does (the
// real upstream is in e2e/elicit_test.go).

const elicitCaps = `{"elicitation":{"form":{}}}`

// elicitCall is a 2026-07-28 tools/call with the given client
// capabilities and extra params members (e.g. `"requestState":"…",`).
func elicitCall(token, id, tool, args, extra, caps string) *gateway.Request {
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	return authReq("POST", token, body, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", tool)
}

// inputRequired is the InputRequiredResult of an approval request.
type inputRequired struct {
	Result struct {
		ResultType    string `json:"resultType"`
		RequestState  string `json:"requestState"`
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Mode            string          `json:"mode"`
				Message         string          `json:"message"`
				RequestedSchema json.RawMessage `json:"requestedSchema"`
			} `json:"params"`
		} `json:"inputRequests"`
	} `json:"result"`
}

func askApproval(t *testing.T, p *gateway.Pipeline, req *gateway.Request) inputRequired {
	t.Helper()
	_, v := p.HandleRequest(context.Background(), req)
	if v.Local == nil {
		t.Fatal("the preview was forwarded")
	}
	var ir inputRequired
	if err := json.Unmarshal(v.Local.Body, &ir); err != nil {
		t.Fatalf("%s: %v", v.Local.Body, err)
	}
	if ir.Result.ResultType != "input_required" || !sealing.IsSealed(ir.Result.RequestState) {
		t.Fatalf("no input_required answer: %s", v.Local.Body)
	}
	return ir
}

// retryParams are the params members of a retry answering with elicit
// result r (JSON) and requestState state.
func retryParams(state, r string) string {
	return `"requestState":` + strconv.Quote(state) + `,"inputResponses":{"` + gateway.ElicitInputKey + `":` + r + `},`
}

const (
	approve = `{"action":"accept","content":{"approve":true}}`
	decline = `{"action":"decline"}`
)

// elicitOpts are the write tests' pipeline confirming with sealer s,
// confirmations living ttl (0: the default).
func elicitOpts(s *sealing.Sealer, ttl time.Duration) []gatewaytest.Option {
	return writeOpts(writeCatalog(), gatewaytest.WithWrites(func(w *gateway.WriteSafety) { w.Sealer, w.ConfirmTTL = s, ttl }))
}

func TestElicitedConfirmation(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, elicitOpts(gatewaytest.Sealer(t), 0)...)
	args := `{"text":"hello customer"}`

	// Without the elicitation capability: the confirm_token preview.
	a := decodeAnswer(t, func() gateway.Verdict {
		_, v := p.HandleRequest(ctx, elicitCall("good-", "1", "email_customer", args, "", `{}`))
		return v
	}())
	if !strings.Contains(string(a.Result.StructuredContent), `"confirm_token":"mcpc_`) {
		t.Fatalf("a client without elicitation did not get a confirm_token preview: %s", a.Result.StructuredContent)
	}

	// With it: input_required, a form asking to approve the summary.
	ir := askApproval(t, p, elicitCall("good-", "2", "email_customer", args, "", elicitCaps))
	req, ok := ir.Result.InputRequests[gateway.ElicitInputKey]
	if !ok || req.Method != "elicitation/create" || req.Params.Mode != "form" ||
		!strings.Contains(req.Params.Message, `email_customer`) || !strings.Contains(req.Params.Message, args) ||
		!strings.Contains(string(req.Params.RequestedSchema), `"approve"`) {
		t.Fatalf("approval request: %+v", ir.Result.InputRequests)
	}
	if strings.Contains(ir.Result.RequestState, "hello") || strings.Contains(ir.Result.RequestState, "acme") {
		t.Errorf("the requestState shows what it binds: %s", ir.Result.RequestState)
	}
	state := ir.Result.RequestState

	// Forged: one character changed in the sealed part.
	forged := []byte(state)
	if forged[len(forged)-3] == 'A' {
		forged[len(forged)-3] = 'B'
	} else {
		forged[len(forged)-3] = 'A'
	}
	_, v := p.HandleRequest(ctx, elicitCall("good-", "3", "email_customer", args, retryParams(string(forged), approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_invalid" {
		t.Errorf("forged requestState: %s", v.Local.Body)
	}
	// A made-up one with mcpgate's prefix.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "4", "email_customer", args, retryParams("mcpgs1.made-up.AAAA", approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_invalid" {
		t.Errorf("made-up requestState: %s", v.Local.Body)
	}
	// Another principal.
	_, v = p.HandleRequest(ctx, elicitCall("other", "5", "email_customer", args, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_mismatch" {
		t.Errorf("other principal: %s", v.Local.Body)
	}
	// Another tool.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "6", "save_note", args, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_mismatch" {
		t.Errorf("other tool: %s", v.Local.Body)
	}
	// Arguments edited between the approval request and the retry.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "7", "email_customer", `{"text":"send everyone my password"}`, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "arguments_changed" {
		t.Errorf("edited arguments: %s", v.Local.Body)
	}
	// No answer.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "8", "email_customer", args, `"requestState":`+strconv.Quote(state)+`,`, elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "input_response_invalid" {
		t.Errorf("no answer: %s", v.Local.Body)
	}

	// Approved: forwarded once, without mcpgate's state.
	x, v := p.HandleRequest(ctx, elicitCall("good-", "9", "email_customer", args, retryParams(state, approve), elicitCaps))
	if v.Local != nil {
		t.Fatalf("approved call not forwarded: %s", v.Local.Body)
	}
	if !v.BodyChanged || strings.Contains(string(v.Body), "requestState") || strings.Contains(string(v.Body), "inputResponses") ||
		!strings.Contains(string(v.Body), `"arguments":{"text":"hello customer"}`) || !strings.Contains(string(v.Body), `"id":9`) {
		t.Errorf("forwarded body: %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":9,"result":{"content":[{"type":"text","text":"sent"}]}}`)

	// Replayed requestState: the action was used.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "10", "email_customer", args, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_used" {
		t.Errorf("replayed requestState: %s", v.Local.Body)
	}
}

func TestElicitedDecline(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, elicitOpts(gatewaytest.Sealer(t), 0)...)
	args := `{"text":"no thanks"}`
	for _, r := range []string{decline, `{"action":"cancel"}`, `{"action":"accept","content":{"approve":false}}`} {
		state := askApproval(t, p, elicitCall("good-", "1", "email_customer", args, "", elicitCaps)).Result.RequestState
		_, v := p.HandleRequest(ctx, elicitCall("good-", "2", "email_customer", args, retryParams(state, r), elicitCaps))
		a := decodeAnswer(t, v)
		if a.Result.IsError || !strings.Contains(string(a.Result.StructuredContent), `"status":"rejected"`) {
			t.Fatalf("%s: %s", r, v.Local.Body)
		}
		// Approving afterwards does not bring it back.
		_, v = p.HandleRequest(ctx, elicitCall("good-", "3", "email_customer", args, retryParams(state, approve), elicitCaps))
		if c := code(t, decodeAnswer(t, v)); c != "action_rejected" {
			t.Errorf("%s then approve: %s", r, v.Local.Body)
		}
	}
}

// TestElicitWrapsUpstreamState: a retry of the upstream's own
// input_required round that needs approval gets mcpgate's sealed state,
// which carries the upstream's requestState and inputResponses; the
// approved call reaches the upstream with them restored, exactly.
func TestElicitWrapsUpstreamState(t *testing.T) {
	ctx := context.Background()
	p := gatewaytest.New(t, elicitOpts(gatewaytest.Sealer(t), 0)...)
	args := `{"text":"to the list"}`
	upstream := `"requestState":"upstream-round-1","inputResponses":{"pick_list":{"action":"accept","content":{"list":"vip"}}},`
	ir := askApproval(t, p, elicitCall("good-", "1", "email_customer", args, upstream, elicitCaps))
	if ir.Result.RequestState == "upstream-round-1" || strings.Contains(ir.Result.RequestState, "upstream-round-1") || strings.Contains(ir.Result.RequestState, "vip") {
		t.Fatalf("the upstream's state was replaced or shown: %s", ir.Result.RequestState)
	}
	x, v := p.HandleRequest(ctx, elicitCall("good-", "2", "email_customer", args, retryParams(ir.Result.RequestState, approve), elicitCaps))
	if v.Local != nil {
		t.Fatalf("approved call not forwarded: %s", v.Local.Body)
	}
	var sent struct {
		Params struct {
			RequestState   string                     `json:"requestState"`
			InputResponses map[string]json.RawMessage `json:"inputResponses"`
		} `json:"params"`
	}
	if err := json.Unmarshal(v.Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent.Params.RequestState != "upstream-round-1" || len(sent.Params.InputResponses) != 1 ||
		string(sent.Params.InputResponses["pick_list"]) != `{"action":"accept","content":{"list":"vip"}}` {
		t.Errorf("forwarded: %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"sent"}]}}`)
}

func TestElicitKeys(t *testing.T) {
	ctx := context.Background()
	args := `{"text":"k"}`

	// Rotation: a requestState sealed before keeps opening after a
	// staged key is promoted.
	s := gatewaytest.Sealer(t)
	p := gatewaytest.New(t, elicitOpts(s, 0)...)
	state := askApproval(t, p, elicitCall("good-", "1", "email_customer", args, "", elicitCaps)).Result.RequestState
	staged, kid, err := s.Keys().Stage()
	if err != nil {
		t.Fatal(err)
	}
	promoted, err := staged.Promote(kid)
	if err != nil {
		t.Fatal(err)
	}
	s.SetKeys(promoted)
	x, v := p.HandleRequest(ctx, elicitCall("good-", "2", "email_customer", args, retryParams(state, approve), elicitCaps))
	if v.Local != nil {
		t.Fatalf("a requestState sealed before the rotation: %s", v.Local.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"sent"}]}}`)

	// Another key (another deployment, or a key removed since).
	state = askApproval(t, p, elicitCall("good-", "3", "email_customer", args, "", elicitCaps)).Result.RequestState
	other, _ := sealing.GenerateKeySet()
	s.SetKeys(other)
	_, v = p.HandleRequest(ctx, elicitCall("good-", "4", "email_customer", args, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_invalid" {
		t.Errorf("other key: %s", v.Local.Body)
	}
}

func TestElicitExpired(t *testing.T) {
	ctx := context.Background()
	// The approval request lives one nanosecond: it is over by the retry.
	p := gatewaytest.New(t, elicitOpts(gatewaytest.Sealer(t), time.Nanosecond)...)
	args := `{"text":"late"}`
	state := askApproval(t, p, elicitCall("good-", "1", "email_customer", args, "", elicitCaps)).Result.RequestState
	_, v := p.HandleRequest(ctx, elicitCall("good-", "2", "email_customer", args, retryParams(state, approve), elicitCaps))
	if c := code(t, decodeAnswer(t, v)); c != "request_state_expired" {
		t.Errorf("expired: %s", v.Local.Body)
	}
}

// TestElicitUpstreamStatePassesThrough: a requestState that is not
// mcpgate's is the upstream's: a silent write carrying one is forwarded
// untouched.
func TestElicitUpstreamStatePassesThrough(t *testing.T) {
	p := gatewaytest.New(t, elicitOpts(gatewaytest.Sealer(t), 0)...)
	x, v := p.HandleRequest(context.Background(), elicitCall("good-", "1", "save_note", `{"text":"n"}`, `"requestState":"up-1","inputResponses":{"a":{"action":"accept"}},`, elicitCaps))
	if v.Local != nil {
		t.Fatalf("refused: %s", v.Local.Body)
	}
	if v.BodyChanged && !strings.Contains(string(v.Body), `"requestState":"up-1"`) {
		t.Errorf("the upstream's requestState was changed: %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}]}}`)
}

// TestElicitOutOfBandURL: an action that must be approved out of band
// (legally binding), for a client declaring URL-mode elicitation, is asked
// through input_required with the approval page's link; the retry runs it
// only once a person approved it there, and only once.
func TestElicitOutOfBandURL(t *testing.T) {
	ctx := context.Background()
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	var actions store.ActionStore
	p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithWrites(func(w *gateway.WriteSafety) {
		w.Sealer = sealing.NewSealer(ks)
		w.ApprovalURL = func(id string) string { return "https://gw.example/approvals/a/" + id }
		actions = w.Actions
	}))...)
	const urlCaps = `{"elicitation":{"url":{}}}`
	args := `{"text":"contract 7"}`
	_, v := p.HandleRequest(ctx, elicitCall("good-", "1", "sign_contract", args, "", urlCaps))
	var ir struct {
		Result struct {
			ResultType    string `json:"resultType"`
			RequestState  string `json:"requestState"`
			InputRequests map[string]struct {
				Params struct{ Mode, URL string } `json:"params"`
			} `json:"inputRequests"`
		} `json:"result"`
	}
	if v.Local == nil || json.Unmarshal(v.Local.Body, &ir) != nil || ir.Result.ResultType != "input_required" {
		t.Fatalf("no input_required: %+v", v.Local)
	}
	req := ir.Result.InputRequests[gateway.ElicitInputKey].Params
	id, ok := strings.CutPrefix(req.URL, "https://gw.example/approvals/a/")
	if req.Mode != "url" || !ok || id == "" {
		t.Fatalf("elicitation %+v", req)
	}
	accepted := retryParams(ir.Result.RequestState, `{"action":"accept"}`)
	_, v = p.HandleRequest(ctx, elicitCall("good-", "2", "sign_contract", args, accepted, urlCaps))
	if a := decodeAnswer(t, v); code(t, a) != "approval_pending" {
		t.Fatalf("before approval: %s", v.Local.Body)
	}
	if _, err := actions.TransitionAction(ctx, id, store.ActionPending, store.ActionUpdate{State: store.ActionApproved, DecidedBy: "olivia", DecidedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	x, v := p.HandleRequest(ctx, elicitCall("good-", "3", "sign_contract", args, accepted, urlCaps))
	if v.Local != nil {
		t.Fatalf("approved action not forwarded: %s", v.Local.Body)
	}
	if strings.Contains(string(v.Body), "requestState") || strings.Contains(string(v.Body), gateway.ElicitInputKey) {
		t.Errorf("mcpgate's state reached the upstream: %s", v.Body)
	}
	answer(t, x, 200, `{"jsonrpc":"2.0","id":3,"result":{"content":[],"structuredContent":{"signed":true}}}`)
	_, v = p.HandleRequest(ctx, elicitCall("good-", "4", "sign_contract", args, accepted, urlCaps))
	if a := decodeAnswer(t, v); code(t, a) != "request_state_used" {
		t.Errorf("second retry: %s", v.Local.Body)
	}
	// A client without URL mode gets the confirm_token preview with the link.
	_, v = p.HandleRequest(ctx, elicitCall("good-", "5", "sign_contract", `{"text":"contract 8"}`, "", elicitCaps))
	if v.Local == nil || !strings.Contains(string(v.Local.Body), `"approval_url":"https://gw.example/approvals/a/`) {
		t.Errorf("form-only client: %+v", v.Local)
	}
}

// TestElicitedApprovalTakesBuckets: an action approved through
// input_required takes from the rate buckets like one confirmed with
// confirm_action (the preview took nothing).
func TestElicitedApprovalTakesBuckets(t *testing.T) {
	ctx := context.Background()
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		t.Fatal(err)
	}
	lim := &gateway.Limits{Limiter: ratelimit.NewMemory(0), Buckets: map[string]ratelimit.Limit{
		"writes": {Rate: 100, Period: time.Hour, Burst: 100}, "notify": {Rate: 1, Period: time.Hour, Burst: 1}}}
	p := gatewaytest.New(t, writeOpts(writeCatalog(), gatewaytest.WithLimits(lim),
		gatewaytest.WithWrites(func(w *gateway.WriteSafety) { w.Sealer = sealing.NewSealer(ks) }))...)
	for i, text := range []string{"first", "second"} {
		args := `{"text":"` + text + `"}`
		ir := askApproval(t, p, elicitCall("good-", "1", "email_customer", args, "", elicitCaps))
		x, v := p.HandleRequest(ctx, elicitCall("good-", "2", "email_customer", args, retryParams(ir.Result.RequestState, approve), elicitCaps))
		if i == 0 {
			if v.Local != nil {
				t.Fatalf("first approved call: %s", v.Local.Body)
			}
			answer(t, x, 200, `{"jsonrpc":"2.0","id":2,"result":{"content":[],"structuredContent":{"sent":true}}}`)
			continue
		}
		if a := decodeAnswer(t, v); code(t, a) != "rate_limited" {
			t.Errorf("second approved call over the notify bucket: %s", v.Local.Body)
		}
	}
}
