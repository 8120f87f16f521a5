package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Exchanges, requests and header maps given back for reuse carry nothing
// of one stream's two-step write into another: concurrent callers
// preview, confirm (confirm_action), reject and approve through
// input_required their own calls, on streams mixed with streams that end
// early (no answer for a confirmed call, refused locally or by the
// policy). Each stream gets only its own previews and answers; another
// caller's confirm_token or requestState is unknown and shows nothing of
// its call; each confirmed call goes upstream once, with its own
// caller's assertion and arguments and without mcpgate's state; each
// audit record, decision-log event and shadow decision names one caller
// with that caller's arguments.
func TestReusedExchangesKeepConfirmationsApart(t *testing.T) {
	decls := map[string]map[string]policy.ToolDeclaration{"tickets": {"email_customer": {Effect: policy.EffectNotify}}}
	obs := gatewaytest.NewObserved(t, decls)
	var (
		mu       sync.Mutex
		audits   []store.AuditRecord
		sent     = map[string]int{} // nonce → calls forwarded
		rejected []string
		board    = map[string]shown{} // caller → its latest pending call
		steals   int
	)
	record := func(_ context.Context, r store.AuditRecord) {
		mu.Lock()
		defer mu.Unlock()
		audits = append(audits, r)
	}
	sealer := gatewaytest.Sealer(t)
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithDecider(obs.Engine), gatewaytest.WithAuth(gatewaytest.CallerAuth{}),
		gatewaytest.WithWrites(func(w *gateway.WriteSafety) { w.Sealer = sealer }),
		gatewaytest.With(gateway.Options{Asserter: gatewaytest.PlainAsserter{}, Audit: record}), serverBounds)
	c := serve(t, p)
	steal := func(caller string, state bool) (shown, bool) {
		mu.Lock()
		defer mu.Unlock()
		for other, s := range board {
			if other != caller && (s.state != "") == state {
				return s, true
			}
		}
		return shown{}, false
	}
	// forwarded checks what goes upstream and counts it.
	forwarded := func(caller, nonce string, f *forward) {
		if want := gatewaytest.CallerAssertion(caller, "tickets"); f.assertion != want {
			t.Errorf("%s: forwarded with assertion %q, want %q", nonce, f.assertion, want)
		}
		var m struct {
			Params struct {
				Name           string
				Arguments      struct{ Caller, Nonce string }
				RequestState   *string
				InputResponses json.RawMessage
			}
		}
		if err := json.Unmarshal(f.body, &m); err != nil || m.Params.Name != "email_customer" || m.Params.Arguments.Caller != caller ||
			m.Params.Arguments.Nonce != nonce || m.Params.RequestState != nil || m.Params.InputResponses != nil {
			t.Errorf("%s: forwarded %s (%v)", nonce, f.body, err)
		}
		mu.Lock()
		sent[m.Params.Arguments.Nonce]++
		mu.Unlock()
	}

	modes := []string{"confirm", "elicit", "reject", "early", "confirm", "refused", "elicit", "denied"}
	const callers, rounds = 6, 3
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(n)
			for i := range rounds * len(modes) {
				mode := modes[(i+n)%len(modes)]
				id := fmt.Sprintf("%d%03d", n+1, 2*i)
				next := fmt.Sprintf("%d%03d", n+1, 2*i+1)
				nonce := fmt.Sprintf("n-%s-%s", caller, id)
				s := confirmStream{c: c, caller: caller}
				args := fmt.Sprintf(`{"caller":%q,"nonce":%q}`, caller, nonce)
				tool, name, caps := "email_customer", "email_customer", "{}"
				switch mode {
				case "refused":
					name = "other"
				case "denied":
					tool, name = "drop_tables", "drop_tables"
				case "elicit":
					caps = `{"elicitation":{"form":{}}}`
				}
				local, _, err := s.call(id, tool, name, args, "", caps, false)
				if err != nil || local == nil || !strings.Contains(string(local), `"id":`+id) {
					t.Errorf("%s (%s): %s %v, want its own local answer", nonce, mode, local, err)
					continue
				}
				if mode == "refused" || mode == "denied" {
					continue
				}
				sh, err := shownOf(local)
				if err != nil {
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				}
				sh.caller, sh.nonce = caller, nonce
				if mode != "elicit" && !strings.Contains(sh.summary, `"nonce":"`+nonce+`"`) {
					t.Errorf("%s: preview of another call: %q", nonce, sh.summary)
				}
				if other, ok := steal(caller, mode == "elicit"); ok {
					mu.Lock()
					steals++
					mu.Unlock()
					var got []byte
					var f *forward
					if mode == "elicit" {
						got, f, err = s.call(next, tool, name, args, retry(other.state), caps, false)
					} else {
						got, f, err = s.call(next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(other.token, other.summary), "", "{}", false)
					}
					if err != nil || f != nil || strings.Contains(string(got), other.nonce) ||
						!strings.Contains(string(got), "confirm_token_unknown") && !strings.Contains(string(got), "request_state_mismatch") {
						t.Errorf("%s steals from %s: %s %v, want it unknown", nonce, other.nonce, got, err)
					}
				}
				mu.Lock()
				board[caller] = sh
				mu.Unlock()
				var got []byte
				var f *forward
				switch mode {
				case "reject":
					got, _, err = s.call(next, gateway.ToolRejectAction, gateway.ToolRejectAction, `{"confirm_token":"`+sh.token+`"}`, "", "{}", false)
					if err != nil || !strings.Contains(string(got), `"id":`+next) || !strings.Contains(string(got), "rejected") {
						t.Errorf("%s: reject: %s %v", nonce, got, err)
					}
					mu.Lock()
					rejected = append(rejected, nonce)
					mu.Unlock()
					continue
				case "elicit":
					got, f, err = s.call(next, tool, name, args, retry(sh.state), caps, false)
				default:
					got, f, err = s.call(next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(sh.token, sh.summary), "", "{}", mode == "early")
				}
				if err != nil || f == nil {
					t.Errorf("%s (%s): not forwarded: %s %v", nonce, mode, got, err)
					continue
				}
				forwarded(caller, nonce, f)
				if mode != "early" && (!strings.Contains(string(f.answer), "caller="+caller+" nonce="+nonce) || !strings.Contains(string(f.answer), `"id":`+next)) {
					t.Errorf("%s (%s): answer of another request: %s", nonce, mode, f.answer)
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for nonce, n := range sent {
		if n != 1 {
			t.Errorf("%s went upstream %d times", nonce, n)
		}
	}
	for _, nonce := range rejected {
		if sent[nonce] != 0 {
			t.Errorf("the rejected call %s went upstream", nonce)
		}
	}
	if len(sent) == 0 || len(audits) == 0 || steals == 0 {
		t.Fatalf("%d calls forwarded, %d audit records, %d tokens or states tried by another caller", len(sent), len(audits), steals)
	}
	for _, r := range audits {
		n, _ := strings.CutPrefix(r.Subject, "subject-")
		if r.Tenant != "tenant-"+n || r.Connection != "conn-"+n {
			t.Errorf("audit record mixes callers: %+v", r)
		}
	}
	events, shadow := obs.Records(t)
	calls := 0
	for _, ev := range events {
		nonce, _ := ev.Arguments["nonce"].(string)
		if nonce == "" {
			continue
		}
		calls++
		caller, _ := ev.Arguments["caller"].(string)
		if pr := ev.Principal; !strings.HasPrefix(nonce, "n-"+caller+"-") || pr.Subject != "subject-"+caller || pr.Connection != "conn-"+caller {
			t.Errorf("decision-log event mixes callers: %+v", ev)
		}
		if got, want := shadow[ev.ID], gatewaytest.ShadowCode(ev.Principal.Subject, nonce); len(got) != 1 || got[0] != want {
			t.Errorf("decision %s (%s): the shadow decided on %q, want %q", ev.ID, nonce, got, want)
		}
	}
	if calls == 0 {
		t.Error("no decision-log events of calls")
	}
}

// shown is a pending call as its caller was shown it: a preview's
// confirm_token and confirm_summary, or input_required's requestState.
type shown struct{ caller, nonce, token, summary, state string }

func shownOf(body []byte) (shown, error) {
	var a struct {
		Result struct {
			ResultType        string `json:"resultType"`
			RequestState      string `json:"requestState"`
			StructuredContent struct {
				ConfirmToken   string `json:"confirm_token"`
				ConfirmSummary string `json:"confirm_summary"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return shown{}, fmt.Errorf("%v: %s", err, body)
	}
	r := a.Result
	switch {
	case r.ResultType == "input_required" && r.RequestState != "":
		return shown{state: r.RequestState}, nil
	case r.StructuredContent.ConfirmToken != "":
		return shown{token: r.StructuredContent.ConfirmToken, summary: r.StructuredContent.ConfirmSummary}, nil
	}
	return shown{}, fmt.Errorf("neither a preview nor input_required: %s", body)
}

func confirmArgs(token, summary string) string {
	b, _ := json.Marshal(map[string]string{"confirm_token": token, "confirm_summary": summary})
	return string(b)
}

// retry are the params members of a retry approving with state.
func retry(state string) string {
	return `"requestState":` + strconv.Quote(state) + `,"inputResponses":{"` + gateway.ElicitInputKey + `":{"action":"accept","content":{"approve":true}}},`
}

// confirmStream plays one caller's tools/calls, each on a stream of its
// own, as Envoy does, on the tickets route.
type confirmStream struct {
	c      extprocv3.ExternalProcessorClient
	caller string
}

// forward is what a forwarded call sent upstream, and what the client got
// of the upstream's answer (nothing when the stream ended first).
type forward struct {
	assertion    string
	body, answer []byte
}

// call sends a tools/call of tool, named name in its header, with extra
// params members and client capabilities caps. A local answer is
// returned as it is; a forwarded call is answered as the upstream would
// (its arguments' caller and nonce) unless early, when the stream ends
// with the request.
func (s confirmStream) call(id, tool, name, args, extra, caps string, early bool) ([]byte, *forward, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := s.c.Process(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = st.CloseSend() }()
	hdrs := reqHeaders("/tickets/mcp", nil, "mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", name,
		"authorization", "Bearer tok-"+s.caller, "x-caller", s.caller)
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	if r, err := answer(st, hdrs); err != nil || r.GetRequestHeaders() == nil {
		return nil, nil, fmt.Errorf("request headers: %v %v", r, err)
	}
	r, err := answer(st, reqBody(body))
	if err != nil {
		return nil, nil, err
	}
	if ir := r.GetImmediateResponse(); ir != nil {
		return ir.GetBody(), nil, nil
	}
	cr := r.GetRequestBody().GetResponse()
	if cr == nil {
		return nil, nil, fmt.Errorf("request body: %v", r)
	}
	f := &forward{body: []byte(body)}
	f.assertion, _ = header(cr.GetHeaderMutation(), gateway.AssertionHeader)
	if b := cr.GetBodyMutation().GetBody(); b != nil {
		f.body = b
	}
	if early {
		return nil, f, nil
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Params struct {
			Arguments struct{ Caller, Nonce string }
		}
	}
	if err := json.Unmarshal(f.body, &m); err != nil {
		return nil, nil, err
	}
	rh := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "application/json")}}}
	if r, err := answer(st, rh); err != nil || r.GetResponseHeaders() == nil {
		return nil, nil, fmt.Errorf("response headers: %v %v", r, err)
	}
	result := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"caller=%s nonce=%s"}]}}`, m.ID, m.Params.Arguments.Caller, m.Params.Arguments.Nonce)
	rb := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte(result), EndOfStream: true}}}
	r, err = answer(st, rb)
	if err != nil || r.GetResponseBody() == nil {
		return nil, nil, fmt.Errorf("response body: %v %v", r, err)
	}
	f.answer = []byte(result)
	if b := r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(); b != nil {
		f.answer = b
	}
	return nil, f, nil
}
