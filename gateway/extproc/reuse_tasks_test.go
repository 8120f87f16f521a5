package extproc_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// Exchanges, requests and header maps given back for reuse carry nothing
// of one caller's tasks into another's: on concurrent streams, callers
// start tasks (the upstream's handle is bound to the caller in the
// response phase), poll, fetch and cancel their own, list them, and try
// another caller's task ids, mixed with streams that end early (no
// answer, refused by the policy). Each caller gets its own handles and
// answers only; another caller's task id is "not found", never
// forwarded; tasks/list shows a caller its own tasks only; each task
// request goes upstream with its owner's assertion.
func TestReusedExchangesKeepTasksApart(t *testing.T) {
	// Its results are shaped (untrusted_text): every answer is inspected.
	decls := map[string]map[string]policy.ToolDeclaration{"crm": {"export_report": {Effect: policy.EffectRead, UntrustedText: []string{"note"}}}}
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(gatewaytest.CallerAuth{}), gatewaytest.WithTasks(time.Hour),
		gatewaytest.With(gateway.Options{Asserter: gatewaytest.PlainAsserter{}}), serverBounds)
	c := serve(t, p)
	var (
		mu     sync.Mutex
		owners = map[string]string{} // task id → caller, as the upstream made them
		board  = map[string]string{} // caller → a task id it was given
		steals int
	)
	task := func(id, owner, status string) string {
		return fmt.Sprintf(`{"taskId":%q,"status":%q,"statusMessage":"caller=%s","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttl":60000}`, id, status, owner)
	}
	// upstream answers a forwarded message as the upstream would, after
	// checking it carries the assertion of its caller or task owner.
	upstream := func(body []byte, assertion string) string {
		var m struct {
			Method string
			Params struct {
				TaskID    string          `json:"taskId"`
				Task      json.RawMessage `json:"task"`
				Arguments struct{ Caller, Nonce, Mode string }
			}
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("upstream: %v: %s", err, body)
			return ""
		}
		mu.Lock()
		defer mu.Unlock()
		caller := m.Params.Arguments.Caller
		if m.Method != "tools/call" {
			caller = owners[m.Params.TaskID]
		}
		if m.Method != "tasks/list" && assertion != gatewaytest.CallerAssertion(caller, "crm") {
			t.Errorf("upstream: %s %s of caller %q carries assertion %q", m.Method, m.Params.TaskID, caller, assertion)
		}
		switch m.Method {
		case "tools/call":
			if a := m.Params.Arguments; m.Params.Task == nil && a.Mode != "unasked" {
				return fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s nonce=%s"}]}`, caller, a.Nonce)
			}
			id := "task-" + m.Params.Arguments.Nonce // unasked: a handle for a call that asked for none
			owners[id] = caller
			return `{"task":` + task(id, caller, "working") + `}`
		case "tasks/get":
			return task(m.Params.TaskID, caller, "working")
		case "tasks/cancel":
			return task(m.Params.TaskID, caller, "cancelled")
		case "tasks/result":
			return fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s task=%s"}],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":%q}}}`, caller, m.Params.TaskID, m.Params.TaskID)
		case "tasks/list":
			var all []string
			for id, owner := range owners {
				all = append(all, task(id, owner, "working"))
			}
			return `{"tasks":[` + strings.Join(all, ",") + `]}`
		}
		t.Errorf("upstream: %s", body)
		return ""
	}

	modes := []string{"task", "get", "steal", "result", "early", "list", "plain", "task", "denied", "cancel", "unasked", "steal"}
	const callers, rounds = 6, 3
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(n)
			var own []string
			for i := range rounds * len(modes) {
				mode := modes[(i+n)%len(modes)]
				id := fmt.Sprintf("%d%03d", n+1, i)
				nonce := fmt.Sprintf("n-%s-%s", caller, id)
				mine := ""
				if len(own) > 0 {
					mine = own[len(own)-1]
				}
				var body, want string
				switch mode {
				case "task", "early", "denied", "plain", "unasked":
					tool, task := "export_report", `,"task":{"ttl":60000}`
					want = `"taskId":"task-` + nonce + `"`
					switch mode {
					case "denied":
						tool, want = "drop_tables", policy.CodeToolNotDeclared
					case "plain":
						task, want = "", "caller="+caller+" nonce="+nonce
					case "unasked":
						task = ""
					}
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"caller":%q,"nonce":%q,"mode":%q}%s}}`, id, tool, caller, nonce, mode, task)
				case "get", "cancel", "result":
					if mine == "" {
						continue
					}
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/%s","params":{"taskId":%q}}`, id, mode, mine)
					want = "caller=" + caller
				case "steal":
					mu.Lock()
					other := ""
					for c, tk := range board {
						if c != caller {
							other = tk
						}
					}
					if other != "" {
						steals++
					}
					mu.Unlock()
					if other == "" {
						continue
					}
					for _, m := range []string{"get", "result", "cancel"} {
						local, got, err := taskStream(c, caller, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/%s","params":{"taskId":%q}}`, id, m, other), false, upstream)
						if err != nil || local == nil || !strings.Contains(string(local), gateway.CodeTaskNotFound) || !strings.Contains(string(local), `"id":`+id) ||
							strings.Contains(string(local), "caller=") {
							t.Errorf("caller %s, tasks/%s of %s: %s %s %v, want it not found", caller, m, other, local, got, err)
						}
					}
					continue
				case "list":
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/list","params":{}}`, id)
				}
				local, got, err := taskStream(c, caller, body, mode == "early", upstream)
				switch {
				case err != nil:
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				case mode == "denied":
					if local == nil || !strings.Contains(string(local), want) || !strings.Contains(string(local), `"id":`+id) {
						t.Errorf("%s: %s %s, want its refusal", nonce, local, got)
					}
					continue
				case mode == "early":
					continue
				case mode == "unasked":
					// The upstream's handle is withheld (502), and not bound.
					if local == nil || strings.Contains(string(local), "taskId") || !strings.Contains(string(local), `"id":`+id) {
						t.Errorf("%s: %s %s, want the handle withheld", nonce, local, got)
					}
					local, _, err := taskStream(c, caller, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/get","params":{"taskId":"task-%s"}}`, id, nonce), false, upstream)
					if err != nil || !strings.Contains(string(local), gateway.CodeTaskNotFound) {
						t.Errorf("%s: tasks/get of its withheld handle: %s %v", nonce, local, err)
					}
					continue
				case local != nil || !strings.Contains(string(got), `"id":`+id) || !strings.Contains(string(got), want):
					t.Errorf("%s (%s): %s %s, want %q", nonce, mode, local, got, want)
					continue
				}
				switch mode {
				case "task":
					own = append(own, "task-"+nonce)
					mu.Lock()
					board[caller] = "task-" + nonce
					mu.Unlock()
				case "list":
					var l struct {
						Result struct {
							Tasks []struct {
								TaskID string `json:"taskId"`
							} `json:"tasks"`
						} `json:"result"`
					}
					if err := json.Unmarshal(got, &l); err != nil {
						t.Errorf("%s: %s: %v", nonce, got, err)
					}
					seen := map[string]bool{}
					for _, tk := range l.Result.Tasks {
						seen[tk.TaskID] = true
						if !strings.HasPrefix(tk.TaskID, "task-n-"+caller+"-") {
							t.Errorf("caller %s is shown task %s", caller, tk.TaskID)
						}
					}
					for _, tk := range own {
						if !seen[tk] {
							t.Errorf("caller %s is not shown its task %s: %s", caller, tk, got)
						}
					}
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(owners) == 0 || steals == 0 {
		t.Fatalf("%d tasks started, %d tried by another caller", len(owners), steals)
	}
}

// taskStream plays one 2025-11-25 message of caller on a stream of its
// own on the crm route. A local answer is returned as it is; a forwarded
// message is answered with the result upstream gives for it, unless
// early, when the stream ends with the request.
func taskStream(c extprocv3.ExternalProcessorClient, caller, body string, early bool, upstream func(body []byte, assertion string) string) (local, got []byte, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Process(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = s.CloseSend() }()
	hdrs := reqHeaders("/crm/mcp", nil, "mcp-protocol-version", mcp.Version20251125, "authorization", "Bearer tok-"+caller)
	if r, err := answer(s, hdrs); err != nil || r.GetRequestHeaders() == nil {
		return nil, nil, fmt.Errorf("request headers: %v %v", r, err)
	}
	r, err := answer(s, reqBody(body))
	if err != nil {
		return nil, nil, err
	}
	if ir := r.GetImmediateResponse(); ir != nil {
		return ir.GetBody(), nil, nil
	}
	cr := r.GetRequestBody().GetResponse()
	if r.GetRequestBody() == nil {
		return nil, nil, fmt.Errorf("request body: %v", r)
	}
	sent := []byte(body)
	if b := cr.GetBodyMutation().GetBody(); b != nil {
		sent = b
	}
	assertion, _ := header(cr.GetHeaderMutation(), gateway.AssertionHeader)
	result := upstream(sent, assertion)
	if early {
		return nil, nil, nil
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(sent, &m); err != nil {
		return nil, nil, err
	}
	rh := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: headers(":status", "200", "content-type", "application/json")}}}
	if r, err := answer(s, rh); err != nil || r.GetResponseHeaders() == nil {
		return nil, nil, fmt.Errorf("response headers: %v %v", r, err)
	}
	got = []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":` + result + `}`)
	rb := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: got, EndOfStream: true}}}
	r, err = answer(s, rb)
	if ir := r.GetImmediateResponse(); err == nil && ir != nil {
		return ir.GetBody(), nil, nil // the answer withheld
	}
	if err != nil || r.GetResponseBody() == nil {
		return nil, nil, fmt.Errorf("response body: %v %v", r, err)
	}
	if b := r.GetResponseBody().GetResponse().GetBodyMutation().GetBody(); b != nil {
		got = b
	}
	return nil, got, nil
}
