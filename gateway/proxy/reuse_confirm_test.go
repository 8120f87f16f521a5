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

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// confirmDecls: email_customer needs a person's confirmation (notify).
var confirmDecls = map[string]map[string]policy.ToolDeclaration{"default": {
	"email_customer": {Effect: policy.EffectNotify},
	"get_status":     {Effect: policy.EffectRead},
}}

const elicitCaps = `{"elicitation":{"form":{}}}`

// A pending confirmation, as its caller received it.
type pending struct{ caller, nonce, token, summary, state string }

// Exchanges given back for reuse carry nothing of one two-step write into
// another: concurrent callers previewing, confirming (confirm_action),
// rejecting and approving through input_required their own calls, mixed
// with calls that end early (the client leaving a confirmed call, its
// deadline, refused locally or by the policy), each get only their own
// previews and answers; another caller's confirm_token or requestState
// is unknown to them and shows nothing of its call; the upstream gets
// each confirmed call once, with its own caller's assertion and
// arguments and without mcpgate's state; each audit record, decision-log
// event and shadow decision names one caller with that caller's
// arguments.
func TestReusedExchangesKeepConfirmationsApart(t *testing.T) {
	var (
		mu       sync.Mutex
		sent     = map[string]int{} // nonce → calls the upstream got
		audits   []store.AuditRecord
		board    = map[string]pending{} // caller → its latest pending call
		rejected []string
		steals   int
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Name           string
				Arguments      struct{ Caller, Nonce, Mode string }
				RequestState   *string
				InputResponses json.RawMessage
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
		if got := r.Header.Values("X-Caller"); len(got) != 1 || got[0] != a.Caller {
			t.Errorf("upstream: call %s of caller %s carries X-Caller %q", a.Nonce, a.Caller, got)
		}
		if m.Params.RequestState != nil || m.Params.InputResponses != nil {
			t.Errorf("upstream: call %s carries mcpgate's state: %s", a.Nonce, body)
		}
		mu.Lock()
		sent[a.Nonce]++
		mu.Unlock()
		if a.Mode == "slow" || a.Mode == "leave" {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"caller=%s nonce=%s tool=%s"}]}}`, m.ID, a.Caller, a.Nonce, m.Params.Name)
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	obs := gatewaytest.NewObserved(t, confirmDecls)
	record := func(_ context.Context, r store.AuditRecord) {
		mu.Lock()
		defer mu.Unlock()
		audits = append(audits, r)
	}
	sealer := gatewaytest.Sealer(t)
	p := gatewaytest.New(t, gatewaytest.WithDecls(confirmDecls), gatewaytest.WithDecider(obs.Engine), gatewaytest.WithAuth(gatewaytest.CallerAuth{}),
		gatewaytest.WithWrites(func(w *gateway.WriteSafety) { w.Sealer = sealer }),
		gatewaytest.WithLimits(&gateway.Limits{DefaultDeadline: 300 * time.Millisecond}),
		gatewaytest.With(gateway.Options{Asserter: gatewaytest.PlainAsserter{}, Audit: record}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20,
		Routes: []proxy.Route{{Path: "/mcp", Upstream: "default", URL: u}}})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}

	// steal returns another caller's pending call of the kind asked
	// for (a requestState or a confirm_token), if one was shown.
	steal := func(caller string, state bool) (pending, bool) {
		mu.Lock()
		defer mu.Unlock()
		for c, pc := range board {
			if c != caller && (pc.state != "") == state {
				return pc, true
			}
		}
		return pending{}, false
	}
	post := func(pc pending) {
		mu.Lock()
		defer mu.Unlock()
		board[pc.caller] = pc
	}

	modes := []string{"confirm", "elicit", "reject", "confirm", "leave", "slow", "refused", "elicit", "denied"}
	const callers, rounds = 6, 2
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(n)
			c := confirmClient{hc: hc, url: gw.URL + "/mcp", caller: caller}
			for i := range rounds * len(modes) {
				mode := modes[(i+n)%len(modes)]
				id := fmt.Sprintf("%d%03d", n+1, 2*i)
				next := fmt.Sprintf("%d%03d", n+1, 2*i+1)
				nonce := fmt.Sprintf("n-%s-%s", caller, id)
				args := fmt.Sprintf(`{"caller":%q,"nonce":%q,"mode":%q}`, caller, nonce, mode)
				tool, name, caps := "email_customer", "email_customer", "{}"
				switch mode {
				case "refused":
					name = "other"
				case "denied":
					tool, name = "drop_tables", "drop_tables"
				case "elicit":
					caps = elicitCaps
				}
				status, body, err := c.do(context.Background(), id, tool, name, args, "", caps)
				if err != nil {
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				}
				if !bytes.Contains(body, []byte(`"id":`+id)) || bytes.Contains(body, []byte("caller=")) {
					t.Errorf("%s (%s): %d %s, not its own local answer", nonce, mode, status, body)
					continue
				}
				if mode == "refused" || mode == "denied" {
					continue
				}
				pc, err := pendingOf(body)
				if err != nil {
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				}
				pc.caller, pc.nonce = caller, nonce
				if mode != "elicit" && (!strings.Contains(pc.summary, `"nonce":"`+nonce+`"`) || !strings.Contains(pc.summary, `"caller":"`+caller+`"`)) {
					t.Errorf("%s: preview of another call: %q", nonce, pc.summary)
				}
				// Another caller's token or requestState is unknown here
				// and shows nothing of its call.
				if other, ok := steal(caller, mode == "elicit"); ok {
					var status int
					var got []byte
					var err error
					if mode == "elicit" {
						status, got, err = c.do(context.Background(), next, tool, name, args, retry(other.state), caps)
					} else {
						status, got, err = c.do(context.Background(), next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(other.token, other.summary), "", "{}")
					}
					mu.Lock()
					steals++
					mu.Unlock()
					switch {
					case err != nil:
						t.Errorf("%s steals from %s: %v", nonce, other.nonce, err)
					case bytes.Contains(got, []byte(other.nonce)) || bytes.Contains(got, []byte("caller=")):
						t.Errorf("%s steals from %s: %d %s", nonce, other.nonce, status, got)
					case !bytes.Contains(got, []byte("confirm_token_unknown")) && !bytes.Contains(got, []byte("request_state_mismatch")):
						t.Errorf("%s steals from %s: %d %s, want it unknown", nonce, other.nonce, status, got)
					}
				}
				post(pc)
				switch mode {
				case "reject":
					status, body, err = c.do(context.Background(), next, gateway.ToolRejectAction, gateway.ToolRejectAction, `{"confirm_token":"`+pc.token+`"}`, "", "{}")
					if err != nil || !bytes.Contains(body, []byte(`"id":`+next)) || !bytes.Contains(body, []byte("rejected")) {
						t.Errorf("%s: reject: %d %s %v", nonce, status, body, err)
					}
					mu.Lock()
					rejected = append(rejected, nonce)
					mu.Unlock()
					continue
				case "elicit":
					status, body, err = c.do(context.Background(), next, tool, name, args, retry(pc.state), caps)
				default:
					wait := time.Minute
					if mode == "leave" {
						wait = 50 * time.Millisecond
					}
					ctx, cancel := context.WithTimeout(context.Background(), wait)
					status, body, err = c.do(ctx, next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(pc.token, pc.summary), "", "{}")
					cancel()
				}
				switch {
				case mode == "leave":
					if err == nil {
						t.Errorf("%s: the client left, yet got %d %s", nonce, status, body)
					}
				case err != nil:
					t.Errorf("%s (%s): %v", nonce, mode, err)
				case !bytes.Contains(body, []byte(`"id":`+next)):
					t.Errorf("%s (%s): answer of another request: %d %s", nonce, mode, status, body)
				case mode == "slow":
					if bytes.Contains(body, []byte("caller=")) {
						t.Errorf("%s: past its deadline, yet %d %s", nonce, status, body)
					}
				default:
					if want := fmt.Sprintf("caller=%s nonce=%s tool=email_customer", caller, nonce); status != 200 || !bytes.Contains(body, []byte(want)) {
						t.Errorf("%s (%s): %d %s, want the text %q", nonce, mode, status, body, want)
					}
				}
			}
		}()
	}
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for nonce, n := range sent {
		if n != 1 {
			t.Errorf("the upstream got %s %d times", nonce, n)
		}
	}
	for _, nonce := range rejected {
		if sent[nonce] != 0 {
			t.Errorf("the rejected call %s was sent", nonce)
		}
	}
	if len(sent) == 0 || len(audits) == 0 || steals == 0 {
		t.Fatalf("%d calls sent, %d audit records, %d tokens or states tried by another caller", len(sent), len(audits), steals)
	}
	for _, r := range audits {
		n, _ := strings.CutPrefix(r.Subject, "subject-")
		if r.Tenant != "tenant-"+n || r.Connection != "conn-"+n {
			t.Errorf("audit record mixes callers: %+v", r)
		}
	}
	checkDecisionRecords(t, obs)
}

// checkDecisionRecords checks that each decision-log event of a call
// names one caller: its principal is the caller its arguments name, and
// the shadow policy evaluated that same input.
func checkDecisionRecords(t *testing.T, obs *gatewaytest.Observed) {
	t.Helper()
	events, shadow := obs.Records(t)
	calls := 0
	for _, ev := range events {
		nonce, _ := ev.Arguments["nonce"].(string)
		if nonce == "" {
			continue
		}
		calls++
		caller, _ := ev.Arguments["caller"].(string)
		if pr := ev.Principal; !strings.HasPrefix(nonce, "n-"+caller+"-") || pr.Subject != "subject-"+caller ||
			pr.Tenant != "tenant-"+caller || pr.Connection != "conn-"+caller {
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

// confirmClient sends one caller's tools/calls to the gateway.
type confirmClient struct {
	hc          *http.Client
	url, caller string
}

// do sends a tools/call of tool named name in its header, with extra
// params members and client capabilities caps.
func (c confirmClient) do(ctx context.Context, id, tool, name, args, extra, caps string) (int, []byte, error) {
	body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
	req, err := http.NewRequestWithContext(ctx, "POST", c.url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {name},
		"Authorization":        {"Bearer tok-" + c.caller},
		"X-Caller":             {c.caller},
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// pendingOf reads a preview (confirm_token, confirm_summary) or an
// input_required answer (requestState).
func pendingOf(body []byte) (pending, error) {
	var a struct {
		Result struct {
			ResultType        string `json:"resultType"`
			RequestState      string `json:"requestState"`
			StructuredContent struct {
				Status         string `json:"status"`
				ConfirmToken   string `json:"confirm_token"`
				ConfirmSummary string `json:"confirm_summary"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return pending{}, fmt.Errorf("%v: %s", err, body)
	}
	r := a.Result
	switch {
	case r.ResultType == "input_required" && r.RequestState != "":
		return pending{state: r.RequestState}, nil
	case r.StructuredContent.Status == "confirmation_required" && r.StructuredContent.ConfirmToken != "":
		return pending{token: r.StructuredContent.ConfirmToken, summary: r.StructuredContent.ConfirmSummary}, nil
	}
	return pending{}, fmt.Errorf("neither a preview nor input_required: %s", body)
}

func confirmArgs(token, summary string) string {
	b, _ := json.Marshal(map[string]string{"confirm_token": token, "confirm_summary": summary})
	return string(b)
}

// retry are the params members of a retry approving with state.
func retry(state string) string {
	return `"requestState":` + fmt.Sprintf("%q", state) + `,"inputResponses":{"` + gateway.ElicitInputKey + `":{"action":"accept","content":{"approve":true}}},`
}
