package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Plays of concurrent callers whose exchanges the gateway reuses, the
// same through either adapter: the upstream's side, each call's body,
// the checks of each answer and the final tallies. An adapter's test
// supplies how a call travels: a Sender.

// A Call is one MCP message of CallerAuth's caller Caller.
type Call struct {
	Caller string
	Fields []string // request header fields besides authorization, name/value pairs
	Body   string
	// Leave: the client goes once the request is forwarded, before any
	// answer.
	Leave bool
}

// Header is the call's request header: Fields and the caller's bearer
// token.
func (c Call) Header() http.Header {
	h := http.Header{"Authorization": {"Bearer tok-" + c.Caller}}
	for i := 0; i+1 < len(c.Fields); i += 2 {
		h.Add(c.Fields[i], c.Fields[i+1])
	}
	return h
}

// A Route is where an answer came from, as far as the client can tell.
type Route uint8

const (
	RouteUnseen   Route = iota // the client cannot tell (HTTP)
	RouteLocal                 // the gateway answered; nothing went upstream
	RouteUpstream              // forwarded; the upstream's answer as the gateway passed it on
	RouteWithheld              // forwarded; the gateway answered in the upstream's stead
)

func (r Route) String() string {
	return [...]string{"unseen", "local", "upstream", "withheld"}[r]
}

// A Reply is what the client got for a call.
type Reply struct {
	Status int
	Body   []byte
	Route  Route
}

// via reports whether r came by one of the routes want, or by one the
// client cannot see.
func (r Reply) via(want ...Route) bool {
	return r.Route == RouteUnseen || slices.Contains(want, r.Route)
}

func (r Reply) has(s string) bool { return bytes.Contains(r.Body, []byte(s)) }

func (r Reply) String() string { return fmt.Sprintf("%d %s (%v)", r.Status, r.Body, r.Route) }

// A Sender plays a call through an adapter. For a call that leaves, it
// returns a nil error only when the client went without an answer.
type Sender func(Call) (Reply, error)

// An Upstream answers what an adapter forwards: h and body are the
// request as the upstream gets it. hold: it answers nothing while the
// client stays (a slow upstream).
type Upstream interface {
	Answer(h http.Header, body []byte) (answer []byte, hold bool)
}

// Handler serves up over HTTP; an answer held is held until the client
// goes, or a second.
func Handler(up Upstream) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		a, hold := up.Answer(r.Header, body)
		if hold {
			select {
			case <-r.Context().Done():
			case <-time.After(time.Second):
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(a)
	})
}

// Audits collects audit records (Record is a gateway.Options.Audit).
type Audits struct {
	mu   sync.Mutex
	recs []store.AuditRecord
}

func (a *Audits) Record(_ context.Context, r store.AuditRecord) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, r)
}

// Records returns a copy of the records so far.
func (a *Audits) Records() []store.AuditRecord {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.recs)
}

// check reports each record whose tenant, subject and connection are
// not one caller's, and returns how many there are.
func (a *Audits) check(tb testing.TB) int {
	tb.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.recs {
		n, _ := strings.CutPrefix(r.Subject, "subject-")
		if r.Tenant != "tenant-"+n || r.Connection != "conn-"+n {
			tb.Errorf("audit record mixes callers: %+v", r)
		}
	}
	return len(a.recs)
}

// callers is how many callers a play runs at once.
const callers = 6

// each runs play for each caller n ("0", "1", …) at once.
func each(play func(n int, caller string)) {
	var wg sync.WaitGroup
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			play(n, fmt.Sprint(n))
		}()
	}
	wg.Wait()
}

// ---- Confirmations ----

// ConfirmPlay plays two-step writes: concurrent callers preview,
// confirm (confirm_action), reject and approve through input_required
// their own calls of email_customer (a notify tool), mixed with calls
// that end early, and try the confirm_token or requestState another
// caller was shown.
type ConfirmPlay struct {
	Up     *ConfirmUpstream
	Obs    *Observed
	Audits *Audits

	mu       sync.Mutex
	board    map[string]pending // caller → its latest pending call
	rejected []string
	steals   int
}

// A pending call as its caller was shown it: a preview's confirm_token
// and confirm_summary, or input_required's requestState.
type pending struct{ caller, nonce, token, summary, state string }

// NewConfirmPlay returns a play with the upstream named upstream, and a
// pipeline for it: email_customer needs confirmation, write safety seals
// tokens, CallerAuth, PlainAsserter, decisions logged and shadowed
// (Observed), audit records kept; opts add to that.
func NewConfirmPlay(t *testing.T, upstream string, opts ...Option) (*ConfirmPlay, *gateway.Pipeline) {
	t.Helper()
	decls := map[string]map[string]policy.ToolDeclaration{upstream: {"email_customer": {Effect: policy.EffectNotify}}}
	c := &ConfirmPlay{Up: NewConfirmUpstream(t, upstream), Obs: NewObserved(t, decls), Audits: new(Audits), board: map[string]pending{}}
	sealer := Sealer(t)
	p := New(t, append([]Option{WithDecls(decls), WithDecider(c.Obs.Engine), WithAuth(CallerAuth{}),
		WithWrites(func(w *gateway.WriteSafety) { w.Sealer = sealer }),
		With(gateway.Options{Asserter: PlainAsserter{}, Audit: c.Audits.Record})}, opts...)...)
	return c, p
}

// Run plays rounds of modes for each caller through send, then checks
// the tallies and records. Modes: confirm, elicit (input_required), reject,
// leave (the client goes before the confirmed call's answer), slow (the
// upstream holds the confirmed call past the gateway's deadline),
// refused (Mcp-Name is another tool's: refused locally), denied (an
// undeclared tool: refused by the policy).
func (c *ConfirmPlay) Run(t *testing.T, send Sender, modes []string, rounds int) {
	t.Helper()
	each(func(n int, caller string) {
		for i := range rounds * len(modes) {
			c.one(t, send, caller, modes[(i+n)%len(modes)], fmt.Sprintf("%d%03d", n+1, 2*i), fmt.Sprintf("%d%03d", n+1, 2*i+1))
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	sent := c.Up.sentCounts()
	for nonce, n := range sent {
		if n != 1 {
			t.Errorf("the upstream got %s %d times", nonce, n)
		}
	}
	for _, nonce := range c.rejected {
		if sent[nonce] != 0 {
			t.Errorf("the rejected call %s went upstream", nonce)
		}
	}
	if audits := c.Audits.check(t); len(sent) == 0 || audits == 0 || c.steals == 0 {
		t.Fatalf("%d calls sent, %d audit records, %d tokens or states tried by another caller", len(sent), audits, c.steals)
	}
	c.Obs.CheckCalls(t)
}

// one plays a call of mode with JSON-RPC id id, and the call that
// follows it (a confirmation, rejection or retry) with id next.
func (c *ConfirmPlay) one(t *testing.T, send Sender, caller, mode, id, next string) {
	nonce := fmt.Sprintf("n-%s-%s", caller, id)
	args := fmt.Sprintf(`{"caller":%q,"nonce":%q,"mode":%q}`, caller, nonce, mode)
	tool, name, caps := "email_customer", "email_customer", "{}"
	switch mode {
	case "refused":
		name = "other"
	case "denied":
		tool, name = "drop_tables", "drop_tables"
	case "elicit":
		caps = `{"elicitation":{"form":{}}}`
	}
	// call sends a tools/call of tool, named name in Mcp-Name, with extra
	// params members.
	call := func(id, tool, name, args, extra, caps string, leave bool) (Reply, error) {
		return send(Call{Caller: caller, Body: toolCall(id, tool, args, extra, caps), Leave: leave, Fields: []string{
			"mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", name, "x-caller", caller, "x-nonce", nonce}})
	}
	r, err := call(id, tool, name, args, "", caps, false)
	if err != nil {
		t.Errorf("%s (%s): %v", nonce, mode, err)
		return
	}
	if !r.via(RouteLocal) || !r.has(`"id":`+id) || r.has("caller=") {
		t.Errorf("%s (%s): %v, not its own local answer", nonce, mode, r)
		return
	}
	if mode == "refused" || mode == "denied" {
		return
	}
	pc, err := pendingOf(r.Body)
	if err != nil {
		t.Errorf("%s (%s): %v", nonce, mode, err)
		return
	}
	pc.caller, pc.nonce = caller, nonce
	if mode != "elicit" && (!strings.Contains(pc.summary, `"nonce":"`+nonce+`"`) || !strings.Contains(pc.summary, `"caller":"`+caller+`"`)) {
		t.Errorf("%s: preview of another call: %q", nonce, pc.summary)
	}
	// Another caller's token or requestState is unknown here and shows
	// nothing of its call.
	if other, ok := c.steal(caller, mode == "elicit"); ok {
		var got Reply
		if mode == "elicit" {
			got, err = call(next, tool, name, args, retry(other.state), caps, false)
		} else {
			got, err = call(next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(other.token, other.summary), "", "{}", false)
		}
		switch {
		case err != nil:
			t.Errorf("%s steals from %s: %v", nonce, other.nonce, err)
		case !got.via(RouteLocal) || got.has(other.nonce) || got.has("caller="):
			t.Errorf("%s steals from %s: %v", nonce, other.nonce, got)
		case !got.has("confirm_token_unknown") && !got.has("request_state_mismatch"):
			t.Errorf("%s steals from %s: %v, want it unknown", nonce, other.nonce, got)
		}
	}
	c.mu.Lock()
	c.board[caller] = pc
	c.mu.Unlock()
	switch mode {
	case "reject":
		r, err = call(next, gateway.ToolRejectAction, gateway.ToolRejectAction, `{"confirm_token":"`+pc.token+`"}`, "", "{}", false)
		if err != nil || !r.via(RouteLocal) || !r.has(`"id":`+next) || !r.has("rejected") {
			t.Errorf("%s: reject: %v %v", nonce, r, err)
		}
		c.mu.Lock()
		c.rejected = append(c.rejected, nonce)
		c.mu.Unlock()
		return
	case "elicit":
		r, err = call(next, tool, name, args, retry(pc.state), caps, false)
	default:
		r, err = call(next, gateway.ToolConfirmAction, gateway.ToolConfirmAction, confirmArgs(pc.token, pc.summary), "", "{}", mode == "leave")
	}
	switch {
	case err != nil:
		t.Errorf("%s (%s): %v", nonce, mode, err)
	case !r.via(RouteUpstream):
		t.Errorf("%s (%s): not forwarded: %v", nonce, mode, r)
	case mode == "leave":
	case !r.has(`"id":` + next):
		t.Errorf("%s (%s): answer of another request: %v", nonce, mode, r)
	case mode == "slow":
		if r.has("caller=") {
			t.Errorf("%s: past its deadline, yet %v", nonce, r)
		}
	default:
		if want := fmt.Sprintf("caller=%s nonce=%s tool=email_customer", caller, nonce); r.Status != 200 || !r.has(want) {
			t.Errorf("%s (%s): %v, want the text %q", nonce, mode, r, want)
		}
	}
}

// steal returns another caller's pending call of the kind asked for (a
// requestState or a confirm_token), if one was shown, and counts it.
func (c *ConfirmPlay) steal(caller string, state bool) (pending, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, pc := range c.board {
		if other != caller && (pc.state != "") == state {
			c.steals++
			return pc, true
		}
	}
	return pending{}, false
}

// ConfirmUpstream is the upstream of a ConfirmPlay. It checks that each
// call carries its caller's assertion (on upstream Name), X-Caller and
// X-Nonce once each and naming the call's arguments, the tool
// email_customer and none of mcpgate's state, counts it, and answers
// with the text caller=… nonce=… tool=…; it holds calls of mode slow
// and leave.
type ConfirmUpstream struct {
	Name string
	tb   testing.TB
	mu   sync.Mutex
	sent map[string]int // nonce → calls got
}

func NewConfirmUpstream(tb testing.TB, name string) *ConfirmUpstream {
	return &ConfirmUpstream{Name: name, tb: tb, sent: map[string]int{}}
}

func (u *ConfirmUpstream) Answer(h http.Header, body []byte) ([]byte, bool) {
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
		u.tb.Errorf("upstream: %v: %s", err, body)
		return nil, false
	}
	a := m.Params.Arguments
	if got, want := h.Get(gateway.AssertionHeader), CallerAssertion(a.Caller, u.Name); got != want {
		u.tb.Errorf("upstream: call %s of caller %s carries assertion %q, want %q", a.Nonce, a.Caller, got, want)
	}
	if got := h.Values("X-Caller"); len(got) != 1 || got[0] != a.Caller {
		u.tb.Errorf("upstream: call %s of caller %s carries X-Caller %q", a.Nonce, a.Caller, got)
	}
	if got := h.Values("X-Nonce"); len(got) != 1 || got[0] != a.Nonce {
		u.tb.Errorf("upstream: call %s of caller %s carries X-Nonce %q", a.Nonce, a.Caller, got)
	}
	if m.Params.Name != "email_customer" || m.Params.RequestState != nil || m.Params.InputResponses != nil {
		u.tb.Errorf("upstream: call %s is not its own, or carries mcpgate's state: %s", a.Nonce, body)
	}
	u.mu.Lock()
	u.sent[a.Nonce]++
	u.mu.Unlock()
	if a.Mode == "slow" || a.Mode == "leave" {
		return nil, true
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"caller=%s nonce=%s tool=%s"}]}}`, m.ID, a.Caller, a.Nonce, m.Params.Name), false
}

func (u *ConfirmUpstream) sentCounts() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return maps.Clone(u.sent)
}

// toolCall is a 2026-07-28 tools/call with extra params members (each
// ending in a comma) and client capabilities caps.
func toolCall(id, tool, args, extra, caps string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,` + extra +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":` + caps + `}}}`
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

// CheckCalls checks that each decision-log event of a call names one
// caller: its principal is the caller its arguments name, and the shadow
// policy evaluated that same input.
func (o *Observed) CheckCalls(t *testing.T) {
	t.Helper()
	events, shadow := o.Records(t)
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
		if got, want := shadow[ev.ID], ShadowCode(ev.Principal.Subject, nonce); len(got) != 1 || got[0] != want {
			t.Errorf("decision %s (%s): the shadow decided on %q, want %q", ev.ID, nonce, got, want)
		}
	}
	if calls == 0 {
		t.Error("no decision-log events of calls")
	}
}

// ---- Tasks ----

// TaskPlay plays MCP tasks (2025-11-25): concurrent callers start tasks
// (the upstream's handle is bound to the caller in the response phase),
// poll, fetch and cancel their own, list them, and try another caller's
// task ids, mixed with calls that end early, are refused, or get a
// handle they did not ask for.
type TaskPlay struct {
	Up     *TaskUpstream
	Audits *Audits

	mu     sync.Mutex
	board  map[string]string // caller → a task id it was given
	steals int
}

// taskModes are a TaskPlay round: task, get, result, cancel (of the
// caller's latest task), steal (get, result, cancel of another caller's),
// leave (the client goes before the answer), list, plain (a call without
// a task), denied (an undeclared tool: refused by the policy), unasked
// (the upstream answers a call without a task with a handle).
var taskModes = []string{"task", "get", "steal", "result", "leave", "list", "plain", "task", "denied", "cancel", "unasked", "steal"}

// NewTaskPlay returns a play with the upstream named upstream, and a
// pipeline for it: tasks on, export_report a read whose results are
// shaped (untrusted_text: every answer is inspected), CallerAuth,
// PlainAsserter, audit records kept; opts add to that.
func NewTaskPlay(t *testing.T, upstream string, opts ...Option) (*TaskPlay, *gateway.Pipeline) {
	t.Helper()
	decls := map[string]map[string]policy.ToolDeclaration{upstream: {"export_report": {Effect: policy.EffectRead, UntrustedText: []string{"note"}}}}
	c := &TaskPlay{Up: NewTaskUpstream(t, upstream), Audits: new(Audits), board: map[string]string{}}
	p := New(t, append([]Option{WithDecls(decls), WithAuth(CallerAuth{}), WithTasks(time.Hour),
		With(gateway.Options{Asserter: PlainAsserter{}, Audit: c.Audits.Record})}, opts...)...)
	return c, p
}

// Run plays rounds of the task modes for each caller through send, then
// checks the tallies and audit records.
func (c *TaskPlay) Run(t *testing.T, send Sender, rounds int) {
	t.Helper()
	each(func(n int, caller string) {
		var own []string // this caller's task ids
		for i := range rounds * len(taskModes) {
			own = c.one(t, send, caller, taskModes[(i+n)%len(taskModes)], fmt.Sprintf("%d%03d", n+1, i), own)
		}
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if tasks := c.Up.tasks(); tasks == 0 || c.steals == 0 {
		t.Fatalf("%d tasks started, %d tried by another caller", tasks, c.steals)
	}
	c.Audits.check(t)
}

// one plays a message of mode with JSON-RPC id id; own are the caller's
// task ids, returned with any it is given.
func (c *TaskPlay) one(t *testing.T, send Sender, caller, mode, id string, own []string) []string {
	nonce := fmt.Sprintf("n-%s-%s", caller, id)
	call := func(body string, leave bool) (Reply, error) {
		return send(Call{Caller: caller, Fields: []string{"mcp-protocol-version", mcp.Version20251125}, Body: body, Leave: leave})
	}
	var body, want string
	switch mode {
	case "task", "leave", "denied", "plain", "unasked":
		tool, task := "export_report", `,"task":{"ttl":60000}`
		want = `"taskId":"task-` + nonce + `"`
		switch mode {
		case "denied":
			tool, want = "drop_tables", policy.CodeToolNotDeclared
		case "plain":
			task, want = "", "caller="+caller+" nonce="+nonce
		case "unasked":
			task, want = "", "" // the upstream's handle is withheld
		}
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":%q,"arguments":{"caller":%q,"nonce":%q,"mode":%q}%s}}`, id, tool, caller, nonce, mode, task)
	case "get", "cancel", "result":
		if len(own) == 0 {
			return own
		}
		body, want = taskRequest(id, mode, own[len(own)-1]), "caller="+caller
	case "steal":
		other := c.steal(caller)
		if other == "" {
			return own
		}
		for _, m := range []string{"get", "result", "cancel"} {
			r, err := call(taskRequest(id, m, other), false)
			if err != nil || !r.via(RouteLocal) || !r.has(gateway.CodeTaskNotFound) || r.has("caller=") || !r.has(`"id":`+id) {
				t.Errorf("caller %s, tasks/%s of %s: %v %v, want it not found", caller, m, other, r, err)
			}
		}
		return own
	case "list":
		body = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/list","params":{}}`, id)
	}
	r, err := call(body, mode == "leave")
	switch {
	case err != nil:
		t.Errorf("%s (%s): %v", nonce, mode, err)
		return own
	case mode == "leave":
		if !r.via(RouteUpstream) {
			t.Errorf("%s: not forwarded: %v", nonce, r)
		}
		return own
	case mode == "denied" || mode == "unasked":
		route := RouteLocal
		if mode == "unasked" {
			route = RouteWithheld
		}
		if !r.via(route) || !r.has(`"id":`+id) || !r.has(want) || r.has("taskId") {
			t.Errorf("%s (%s): %v, want %q and no handle", nonce, mode, r, want)
		}
		// Nor was the handle bound.
		r, err := call(taskRequest(id, "get", "task-"+nonce), false)
		if err != nil || !r.has(gateway.CodeTaskNotFound) {
			t.Errorf("%s (%s): tasks/get of its withheld handle: %v %v", nonce, mode, r, err)
		}
		return own
	case !r.via(RouteUpstream) || !r.has(`"id":`+id) || !r.has(want):
		t.Errorf("%s (%s): %v, want %q", nonce, mode, r, want)
		return own
	}
	switch mode {
	case "task":
		own = append(own, "task-"+nonce)
		c.mu.Lock()
		c.board[caller] = "task-" + nonce
		c.mu.Unlock()
	case "list":
		checkList(t, caller, nonce, r.Body, own)
	}
	return own
}

// checkList checks that tasks/list's answer got shows caller its own
// tasks only, own among them.
func checkList(t *testing.T, caller, nonce string, got []byte, own []string) {
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

// steal returns a task id another caller was given, if any, and counts
// it.
func (c *TaskPlay) steal(caller string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for other, id := range c.board {
		if other != caller {
			c.steals++
			return id
		}
	}
	return ""
}

func taskRequest(id, method, taskID string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tasks/%s","params":{"taskId":%q}}`, id, method, taskID)
}

// TaskUpstream is the upstream of a TaskPlay. It checks that each
// message but tasks/list carries the assertion (on upstream Name) of its
// caller, or of the task's owner; it answers a tools/call with a task
// (or of mode unasked) with a handle task-<nonce> owned by the caller,
// one without with the text caller=… nonce=…, the tasks/ methods for
// the owner, and tasks/list with every caller's tasks; it holds calls of
// mode leave.
type TaskUpstream struct {
	Name   string
	tb     testing.TB
	mu     sync.Mutex
	owners map[string]string // task id → caller
}

func NewTaskUpstream(tb testing.TB, name string) *TaskUpstream {
	return &TaskUpstream{Name: name, tb: tb, owners: map[string]string{}}
}

func (u *TaskUpstream) Answer(h http.Header, body []byte) ([]byte, bool) {
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
		u.tb.Errorf("upstream: %v: %s", err, body)
		return nil, false
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	a := m.Params.Arguments
	caller := a.Caller
	if m.Method != "tools/call" {
		caller = u.owners[m.Params.TaskID]
	}
	if assertion := h.Get(gateway.AssertionHeader); m.Method != "tasks/list" && assertion != CallerAssertion(caller, u.Name) {
		u.tb.Errorf("upstream: %s %s of caller %q carries assertion %q", m.Method, m.Params.TaskID, caller, assertion)
	}
	task := func(id, owner, status string) string {
		return fmt.Sprintf(`{"taskId":%q,"status":%q,"statusMessage":"caller=%s","createdAt":"2025-11-25T10:30:00Z","lastUpdatedAt":"2025-11-25T10:30:00Z","ttl":60000}`, id, status, owner)
	}
	var result string
	switch m.Method {
	case "tools/call":
		if m.Params.Task == nil && a.Mode != "unasked" {
			result = fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s nonce=%s"}]}`, caller, a.Nonce)
			break
		}
		id := "task-" + a.Nonce // unasked: a handle for a call that asked for none
		u.owners[id] = caller
		result = `{"task":` + task(id, caller, "working") + `}`
	case "tasks/get":
		result = task(m.Params.TaskID, caller, "working")
	case "tasks/cancel":
		result = task(m.Params.TaskID, caller, "cancelled")
	case "tasks/result":
		result = fmt.Sprintf(`{"content":[{"type":"text","text":"caller=%s task=%s"}],"isError":false,"_meta":{"io.modelcontextprotocol/related-task":{"taskId":%q}}}`, caller, m.Params.TaskID, m.Params.TaskID)
	case "tasks/list":
		// Every caller's tasks: mcpgate shows each its own.
		var all []string
		for id, owner := range u.owners {
			all = append(all, task(id, owner, "working"))
		}
		result = `{"tasks":[` + strings.Join(all, ",") + `]}`
	default:
		u.tb.Errorf("upstream: %s", body)
		return nil, false
	}
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result), m.Method == "tools/call" && a.Mode == "leave"
}

func (u *TaskUpstream) tasks() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.owners)
}
