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
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Exchanges given back for reuse carry nothing of one caller's tasks into
// another's: concurrent callers start tasks (the upstream's handle is
// bound to the caller in the response phase), poll, fetch and cancel
// their own, list them, and try another caller's task ids, mixed with
// calls that end early (the client leaving, refused locally). Each
// caller gets its own handles and answers only; another caller's task
// id is "not found", never forwarded; tasks/list shows a caller its own
// tasks only; the upstream sees each task request with its owner's
// assertion; each audit record names one caller.
func TestReusedExchangesKeepTasksApart(t *testing.T) {
	var (
		mu     sync.Mutex
		owners = map[string]string{} // task id → caller, as the upstream made them
		audits []store.AuditRecord
		board  = map[string]string{} // caller → a task id it was given
		steals int
	)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				TaskID    string                               `json:"taskId"`
				Task      json.RawMessage                      `json:"task"`
				Arguments struct{ Caller, Nonce, Mode string } `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("upstream: %v: %s", err, body)
			return
		}
		assertion := r.Header.Get("Mcpgate-Assertion")
		caller := m.Params.Arguments.Caller
		if m.Method != "tools/call" {
			mu.Lock()
			caller = owners[m.Params.TaskID]
			mu.Unlock()
		}
		if m.Method != "tasks/list" && assertion != gatewaytest.CallerAssertion(caller, "default") {
			t.Errorf("upstream: %s %s of caller %q carries assertion %q", m.Method, m.Params.TaskID, caller, assertion)
		}
		var result string
		task := func(id, owner, status string) string {
			return fmt.Sprintf(`{"taskId":%q,"status":%q,"statusMessage":"caller=%s","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttl":60000}`, id, status, owner)
		}
		switch m.Method {
		case "tools/call":
			a := m.Params.Arguments
			if a.Mode == "leave" {
				select {
				case <-r.Context().Done():
				case <-time.After(time.Second):
				}
				return
			}
			if m.Params.Task == nil && a.Mode != "unasked" {
				result = fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s nonce=%s"}]}`, a.Caller, a.Nonce)
				break
			}
			id := "task-" + a.Nonce // unasked: a handle for a call that asked for none
			mu.Lock()
			owners[id] = a.Caller
			mu.Unlock()
			result = `{"task":` + task(id, a.Caller, "working") + `}`
		case "tasks/get":
			result = task(m.Params.TaskID, caller, "working")
		case "tasks/cancel":
			result = task(m.Params.TaskID, caller, "cancelled")
		case "tasks/result":
			result = fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s task=%s"}],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":%q}}}`, caller, m.Params.TaskID, m.Params.TaskID)
		case "tasks/list":
			// Every caller's tasks: mcpgate shows each its own.
			mu.Lock()
			var all []string
			for id, owner := range owners {
				all = append(all, task(id, owner, "working"))
			}
			mu.Unlock()
			result = `{"tasks":[` + strings.Join(all, ",") + `]}`
		default:
			t.Errorf("upstream: %s", body)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}))
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	record := func(_ context.Context, r store.AuditRecord) {
		mu.Lock()
		defer mu.Unlock()
		audits = append(audits, r)
	}
	// Its results are shaped (untrusted_text): every answer is inspected.
	decls := map[string]map[string]policy.ToolDeclaration{"default": {"export_report": {Effect: policy.EffectRead, UntrustedText: []string{"note"}}}}
	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(gatewaytest.CallerAuth{}), gatewaytest.WithTasks(time.Hour),
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

	// send posts one 2025-11-25 message of caller.
	send := func(ctx context.Context, caller, body string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", gw.URL+"/mcp", strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Protocol-Version": {mcp.Version20251125},
			"Authorization":        {"Bearer tok-" + caller},
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		return io.ReadAll(resp.Body)
	}
	steal := func(caller string) string {
		mu.Lock()
		defer mu.Unlock()
		for c, id := range board {
			if c != caller {
				return id
			}
		}
		return ""
	}

	modes := []string{"task", "get", "steal", "result", "leave", "list", "plain", "task", "refused", "cancel", "unasked", "steal"}
	const callers, rounds = 6, 2
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			caller := fmt.Sprint(n)
			var own []string // this caller's task ids
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
				case "task", "leave", "refused", "plain", "unasked":
					tool, task := "export_report", `,"task":{"ttl":60000}`
					want = `"taskId":"task-` + nonce + `"`
					switch mode {
					case "refused":
						tool, want = "drop_tables", "" // undeclared: refused by the policy
					case "plain":
						task, want = "", "caller="+caller+" nonce="+nonce
					case "unasked":
						task, want = "", "" // the upstream's handle is withheld
					}
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"caller":%q,"nonce":%q,"mode":%q}%s}}`, id, tool, caller, nonce, mode, task)
				case "get", "cancel", "result":
					if mine == "" {
						continue
					}
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/%s","params":{"taskId":%q}}`, id, mode, mine)
					want = "caller=" + caller
				case "steal":
					other := steal(caller)
					if other == "" {
						continue
					}
					mu.Lock()
					steals++
					mu.Unlock()
					for _, m := range []string{"get", "result", "cancel"} {
						got, err := send(context.Background(), caller, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/%s","params":{"taskId":%q}}`, id, m, other))
						if err != nil || !bytes.Contains(got, []byte(gateway.CodeTaskNotFound)) || bytes.Contains(got, []byte("caller=")) ||
							!bytes.Contains(got, []byte(`"id":`+id)) {
							t.Errorf("caller %s, tasks/%s of %s: %s %v", caller, m, other, got, err)
						}
					}
					continue
				case "list":
					body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/list","params":{}}`, id)
				}
				wait := time.Minute
				if mode == "leave" {
					wait = 50 * time.Millisecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				got, err := send(ctx, caller, body)
				cancel()
				switch {
				case mode == "leave":
					if err == nil {
						t.Errorf("%s: the client left, yet got %s", nonce, got)
					}
					continue
				case err != nil:
					t.Errorf("%s (%s): %v", nonce, mode, err)
					continue
				case !bytes.Contains(got, []byte(`"id":`+id)) || !bytes.Contains(got, []byte(want)):
					t.Errorf("%s (%s): %s, want %q", nonce, mode, got, want)
				}
				switch mode {
				case "task":
					own = append(own, "task-"+nonce)
					mu.Lock()
					board[caller] = "task-" + nonce
					mu.Unlock()
				case "refused", "unasked":
					if bytes.Contains(got, []byte("taskId")) {
						t.Errorf("%s (%s): %s", nonce, mode, got)
					}
					// Nor was the handle bound.
					got, err := send(context.Background(), caller, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/get","params":{"taskId":"task-%s"}}`, id, nonce))
					if err != nil || !bytes.Contains(got, []byte(gateway.CodeTaskNotFound)) {
						t.Errorf("%s (%s): tasks/get of its withheld handle: %s %v", nonce, mode, got, err)
					}
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
	for _, r := range audits {
		n, _ := strings.CutPrefix(r.Subject, "subject-")
		if r.Tenant != "tenant-"+n || r.Connection != "conn-"+n {
			t.Errorf("audit record mixes callers: %+v", r)
		}
	}
}
