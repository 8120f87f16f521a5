package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"
)

func codes(d *Decision) []string {
	var out []string
	for _, r := range d.Reasons {
		out = append(out, r.Code)
	}
	return out
}

func TestDefaultPolicyRequests(t *testing.T) {
	e := newDefaultEngine(t)
	tests := []struct {
		name   string
		in     *Input
		allow  bool
		codes  []string
		effect string
	}{
		{name: "initialize", in: requestInput("initialize"), allow: true},
		{name: "ping", in: requestInput("ping"), allow: true},
		{name: "server/discover", in: requestInput("server/discover"), allow: true},
		{name: "tools/list", in: requestInput("tools/list"), allow: true},
		{name: "resources/templates/list", in: requestInput("resources/templates/list"), allow: true},
		{name: "tasks/result", in: requestInput("tasks/result"), allow: true},
		{name: "notifications/initialized", in: requestInput("notifications/initialized"), allow: true},
		{name: "notifications/cancelled", in: requestInput("notifications/cancelled"), allow: true},
		{name: "unknown method", in: requestInput("admin/shutdown"), codes: []string{CodeMethodNotAllowed}},
		{name: "server-only method", in: requestInput("sampling/createMessage"), codes: []string{CodeMethodNotAllowed}},
		{name: "server notification", in: requestInput("notifications/message"), codes: []string{CodeMethodNotAllowed}},
		{name: "request sent as notification", in: func() *Input { in := requestInput("ping"); in.Message.Kind = "notification"; return in }(), codes: []string{CodeMalformedMessage}},
		{name: "tools/call without name", in: requestInput("tools/call"), codes: []string{CodeMalformedMessage}},
		{name: "resources/read without uri", in: requestInput("resources/read"), codes: []string{CodeMalformedMessage}},
		{name: "resources/read", in: func() *Input { in := requestInput("resources/read"); in.Message.URI = "crm://contacts/42"; return in }(), allow: true},
		{name: "prompts/get", in: func() *Input {
			in := requestInput("prompts/get")
			in.Message.Name = "summary"
			in.Message.Arguments = jsontext.Value(`{"topic":"q3"}`)
			return in
		}(), allow: true},
		{name: "arguments not an object", in: func() *Input {
			in := callInput("search_contacts", anonymous)
			in.Message.Arguments = jsontext.Value(`["acme"]`)
			return in
		}(), codes: []string{CodeMalformedMessage}, effect: EffectRead},
		{name: "declared read tool", in: callInput("search_contacts", anonymous), allow: true, effect: EffectRead},
		{name: "declared notify tool", in: callInput("send_email", anonymous), allow: true, effect: EffectNotify},
		{name: "undeclared tool", in: callInput("undeclared_tool", anonymous), codes: []string{CodeToolNotDeclared}},
		{name: "tool missing from input", in: func() *Input { in := callInput("search_contacts", anonymous); in.Tool = nil; return in }(), codes: []string{CodeToolNotDeclared}},
		{name: "hidden tool", in: callInput("legacy_export", anonymous), codes: []string{CodeToolHidden}, effect: EffectRead},
		{name: "invalid declaration", in: func() *Input {
			in := callInput("search_contacts", anonymous)
			in.Tool.Effect = "readonly"
			return in
		}(), codes: []string{CodeInvalidToolDeclaration}},
		{name: "rights held", in: callInput("update_contact", alice), allow: true, effect: EffectSilentWrite},
		{name: "rights missing", in: callInput("delete_contact", alice), codes: []string{CodeMissingRights}, effect: EffectDelete},
		{name: "some rights missing", in: callInput("send_email", alice), codes: []string{CodeMissingRights}, effect: EffectNotify},
		{name: "unauthenticated skips rights", in: callInput("delete_contact", anonymous), allow: true, effect: EffectDelete},
		{name: "unknown phase", in: func() *Input { in := requestInput("ping"); in.Phase = "response"; return in }(), codes: []string{CodeInvalidInput}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allow != tt.allow || !slices.Equal(codes(d), tt.codes) || d.Effect != tt.effect {
				t.Errorf("got allow=%v codes=%v effect=%q, want allow=%v codes=%v effect=%q",
					d.Allow, codes(d), d.Effect, tt.allow, tt.codes, tt.effect)
			}
			for _, r := range d.Reasons {
				if r.Cause == "" || r.Fix == "" {
					t.Errorf("reason %s lacks cause or fix: %+v", r.Code, r)
				}
			}
		})
	}
}

func TestDefaultPolicyReasonText(t *testing.T) {
	e := newDefaultEngine(t)
	d, err := e.Decide(context.Background(), callInput("x", anonymous))
	if err != nil {
		t.Fatal(err)
	}
	want := Reason{
		Code:     CodeToolNotDeclared,
		Cause:    `Tool "x" is not available on this server: the gateway's operator has not declared what it does, and undeclared tools are refused.`,
		Fix:      "Call tools/list to see the tools you can use. If the user needs x, tell them to ask the gateway's operator to declare it in the gateway configuration, under the upstream " + strconv.Quote(callInput("x", anonymous).Transport.Upstream) + ": `tools: {\"x\": {effect: <effect>}}`, where <effect> is what the tool really does: read, silent_write, notify, wake, alerting or delete; or to set `undeclared_tools: confirm` on that upstream so every call of an undeclared tool waits for a person's confirmation.",
		NextTool: "tools/list",
	}
	if d.Allow || len(d.Reasons) != 1 || !reflect.DeepEqual(d.Reasons[0], want) {
		t.Errorf("got %+v, want one reason %+v", d, want)
	}
	d, err = e.Decide(context.Background(), callInput("send_email", Principal{Authenticated: true, Rights: []string{"crm.read"}}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := d.Reasons[0].Cause, `Tool "send_email" needs the rights "crm.write", "mail.send", which you do not hold.`; got != want {
		t.Errorf("cause %q, want %q", got, want)
	}
	if got := d.Reasons[0].Rights; !reflect.DeepEqual(got, []string{"crm.write", "mail.send"}) {
		t.Errorf("rights %q", got)
	}
	// An OAuth token's scopes: insufficient_scope, the missing scopes listed.
	d, err = e.Decide(context.Background(), callInput("send_email", oauthToken("crm.read", "mail.send")))
	if err != nil {
		t.Fatal(err)
	}
	if d.Allow || len(d.Reasons) != 1 || d.Reasons[0].Code != CodeInsufficientScope || !reflect.DeepEqual(d.Reasons[0].Rights, []string{"crm.write"}) {
		t.Errorf("oauth token lacking crm.write: %+v", d)
	}
}

func TestDefaultPolicyVisibility(t *testing.T) {
	e := newDefaultEngine(t)
	tests := []struct {
		name    string
		in      *Input
		visible []string
	}{
		{name: "unauthenticated: declared, not hidden", in: listInput("tools/list", anonymous, allTools...),
			visible: []string{"search_contacts", "update_contact", "send_email", "delete_contact"}},
		{name: "authenticated: rights held", in: listInput("tools/list", alice, allTools...),
			visible: []string{"search_contacts", "update_contact"}},
		{name: "order kept", in: listInput("tools/list", anonymous, "update_contact", "search_contacts"),
			visible: []string{"update_contact", "search_contacts"}},
		{name: "empty list", in: listInput("tools/list", anonymous), visible: []string{}},
		{name: "prompts visible", in: listInput("prompts/list", alice, "summary", "triage"), visible: []string{"summary", "triage"}},
		{name: "resources visible", in: listInput("resources/list", alice, "crm://contacts/1"), visible: []string{"crm://contacts/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allow || !slices.Equal(d.Visible, tt.visible) {
				t.Errorf("got allow=%v visible=%q, want %q", d.Allow, d.Visible, tt.visible)
			}
		})
	}
}

// A tool is in tools/list exactly when tools/call to it is allowed: one
// visibility rule serves both phases.
func TestDefaultPolicyListCallConsistency(t *testing.T) {
	e := newDefaultEngine(t)
	ctx := context.Background()
	for _, p := range []Principal{anonymous, alice, {Authenticated: true}, {Authenticated: true, Rights: []string{"crm.admin", "crm.read", "crm.write", "mail.send"}}} {
		list, err := e.Decide(ctx, listInput("tools/list", p, allTools...))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range allTools {
			call, err := e.Decide(ctx, callInput(name, p))
			if err != nil {
				t.Fatal(err)
			}
			if listed := slices.Contains(list.Visible, name); listed != call.Allow {
				t.Errorf("principal %+v, tool %s: listed=%v but call allow=%v (%v)", p, name, listed, call.Allow, codes(call))
			}
		}
	}
}

func TestDecisionIDs(t *testing.T) {
	e := newDefaultEngine(t)
	hex16 := regexp.MustCompile(`^[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 1000 {
		d, _ := e.Decide(context.Background(), requestInput("ping"))
		if !hex16.MatchString(d.ID) || seen[d.ID] {
			t.Fatalf("bad or repeated id %q", d.ID)
		}
		seen[d.ID] = true
	}
}

func TestUndefinedDecision(t *testing.T) {
	var logs logBuffer
	e, err := New(context.Background(), Options{
		Dirs:   []string{policyDir(t, "package mcpgate\n\nallow := true\n")},
		Logger: logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "no rule defines data.mcpgate.decision") {
		t.Errorf("no warning about the missing decision rule in %s", logs.String())
	}
	d, err := e.Decide(context.Background(), requestInput("ping"))
	if !errors.Is(err, ErrUndefinedDecision) {
		t.Errorf("err = %v, want ErrUndefinedDecision", err)
	}
	checkFailure(t, d, CodeUndefinedDecision)
	if !strings.Contains(logs.String(), d.ID) {
		t.Errorf("log lacks decision id %s: %s", d.ID, logs.String())
	}
}

// checkFailure checks the deny Decision of a failed evaluation.
func checkFailure(t *testing.T, d *Decision, code string) {
	t.Helper()
	if d == nil {
		t.Fatal("nil Decision")
	}
	if d.Allow || len(d.Reasons) != 1 || d.Reasons[0].Code != code || d.Reasons[0].Cause == "" || d.ID == "" || d.Effect != "" || d.Visible != nil {
		t.Errorf("got %+v, want a deny with the single reason %s", d, code)
	}
}

func TestInvalidDecision(t *testing.T) {
	tests := []struct {
		name     string
		decision string
		want     string // in the error
	}{
		{name: "not an object", decision: `"yes"`, want: "decision is string, want object"},
		{name: "boolean", decision: `true`, want: "decision is boolean"},
		{name: "allow missing", decision: `{"reasons": []}`, want: "allow is missing"},
		{name: "allow not boolean", decision: `{"allow": "true"}`, want: "allow is string, want boolean"},
		{name: "reasons not array", decision: `{"allow": false, "reasons": "nope"}`, want: "reasons is string, want array"},
		{name: "reason not object", decision: `{"allow": false, "reasons": ["nope"]}`, want: "reason is string"},
		{name: "reason without code", decision: `{"allow": false, "reasons": [{"cause": "c"}]}`, want: "code is missing"},
		{name: "code not snake_case", decision: `{"allow": false, "reasons": [{"code": "Tool-Hidden", "cause": "c"}]}`, want: "not snake_case"},
		{name: "cause missing", decision: `{"allow": false, "reasons": [{"code": "x"}]}`, want: "cause is missing"},
		{name: "cause empty", decision: `{"allow": false, "reasons": [{"code": "x", "cause": ""}]}`, want: "empty cause"},
		{name: "fix not string", decision: `{"allow": false, "reasons": [{"code": "x", "cause": "c", "fix": 1}]}`, want: "fix is number"},
		{name: "next_tool not string", decision: `{"allow": false, "reasons": [{"code": "x", "cause": "c", "next_tool": ["a"]}]}`, want: "next_tool is array"},
		{name: "effect unknown", decision: `{"allow": true, "effect": "readonly"}`, want: `effect "readonly" is not an effect class`},
		{name: "effect not string", decision: `{"allow": true, "effect": 3}`, want: "effect is number"},
		{name: "visible not array", decision: `{"allow": true, "visible": {"a": true}}`, want: "visible is object"},
		{name: "visible element", decision: `{"allow": true, "visible": ["a", 2]}`, want: "visible[1] is number"},
		{name: "rights not array", decision: `{"allow": false, "reasons": [{"code": "x", "cause": "c", "rights": "a"}]}`, want: "rights is string, want array"},
		{name: "rights element", decision: `{"allow": false, "reasons": [{"code": "x", "cause": "c", "rights": ["a", 1]}]}`, want: "rights[1] is number"},
		{name: "result not object", decision: `{"allow": true, "result": ["notes"]}`, want: "result is array, want object"},
		{name: "result path not string", decision: `{"allow": true, "result": {"untrusted_text": [1]}}`, want: "result.untrusted_text[0] is number"},
		{name: "result path does not parse", decision: `{"allow": true, "result": {"untrusted_text": ["items[*]..notes"]}}`, want: `result.untrusted_text[0] "items[*]..notes" is not well-formed`},
		{name: "result field does not parse", decision: `{"allow": true, "result": {"fields": ["$.id"]}}`, want: `result.fields[0] "$.id" is not well-formed`},
		{name: "result fields not array", decision: `{"allow": true, "result": {"fields": "id"}}`, want: "result.fields is string, want array"},
		{name: "result drop matches everything", decision: `{"allow": true, "result": {"drop": ["*"]}}`, want: `result.drop[0] "*" is not well-formed`},
		{name: "confirm not boolean", decision: `{"allow": true, "confirm": "yes"}`, want: "confirm is string, want boolean"},
		{name: "approval unknown", decision: `{"allow": true, "confirm": true, "approval": "email"}`, want: `approval "email" is neither "client" nor "out_of_band"`},
		{name: "approval not string", decision: `{"allow": true, "approval": true}`, want: "approval is boolean, want string"},
		{name: "replay not boolean", decision: `{"allow": true, "replay": 1}`, want: "replay is number, want boolean"},
		{name: "buckets not array", decision: `{"allow": true, "buckets": "writes"}`, want: "buckets is string, want array"},
		{name: "bucket not snake_case", decision: `{"allow": true, "buckets": ["Writes"]}`, want: `buckets[0] "Writes" is not well-formed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(context.Background(), Options{Dirs: []string{policyDir(t, "package mcpgate\n\ndecision := "+tt.decision+"\n")}})
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(context.Background(), requestInput("ping"))
			if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidDecision containing %q", err, tt.want)
			}
			checkFailure(t, d, CodeInvalidDecision)
		})
	}
}

func TestDecisionShapes(t *testing.T) {
	tests := []struct {
		name     string
		decision string
		want     Decision
	}{
		{name: "minimal", decision: `{"allow": true}`, want: Decision{Allow: true}},
		{name: "reasons as a set, read sorted", decision: `{"allow": false, "reasons": {{"code": "b", "cause": "B"}, {"code": "a", "cause": "A", "fix": "F", "next_tool": "tools/list"}}}`,
			want: Decision{Reasons: []Reason{{Code: "a", Cause: "A", Fix: "F", NextTool: "tools/list"}, {Code: "b", Cause: "B"}}}},
		{name: "reason rights, a set read sorted", decision: `{"allow": false, "reasons": [{"code": "insufficient_scope", "cause": "C", "rights": {"b", "a"}}]}`,
			want: Decision{Reasons: []Reason{{Code: "insufficient_scope", Cause: "C", Rights: []string{"a", "b"}}}}},
		{name: "visible as a set", decision: `{"allow": true, "visible": {"b", "a"}}`, want: Decision{Allow: true, Visible: []string{"a", "b"}}},
		{name: "empty visible", decision: `{"allow": true, "visible": []}`, want: Decision{Allow: true, Visible: []string{}}},
		{name: "unknown fields ignored", decision: `{"allow": true, "effect": "wake", "rate_bucket": "x"}`, want: Decision{Allow: true, Effect: EffectWake}},
		{name: "write safety", decision: `{"allow": true, "effect": "notify", "confirm": true, "approval": "client", "replay": false, "buckets": ["writes", "notify"]}`,
			want: Decision{Allow: true, Effect: EffectNotify, Confirm: true, Approval: ApprovalClient, Buckets: []string{"writes", "notify"}}},
		{name: "result paths", decision: `{"allow": true, "result": {"untrusted_text": ["items[*].notes", "[0].title"], "fields": {"id", "items[2].notes"}, "drop": ["email", "*_token"]}}`,
			want: Decision{Allow: true, Result: &ResultPaths{UntrustedText: []string{"items[*].notes", "[0].title"}, Fields: []string{"id", "items[2].notes"}, Drop: []string{"email", "*_token"}}}},
		{name: "empty result", decision: `{"allow": true, "result": {}}`, want: Decision{Allow: true, Result: &ResultPaths{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(context.Background(), Options{Dirs: []string{policyDir(t, "package mcpgate\n\ndecision := "+tt.decision+"\n")}})
			if err != nil {
				t.Fatal(err)
			}
			d, err := e.Decide(context.Background(), requestInput("ping"))
			if err != nil {
				t.Fatal(err)
			}
			tt.want.ID = d.ID
			if !reflect.DeepEqual(*d, tt.want) {
				t.Errorf("got %#v\nwant %#v", *d, tt.want)
			}
		})
	}
}

func TestPolicyError(t *testing.T) {
	// Two definitions that disagree: an evaluation (conflict) error.
	conflict := `package mcpgate

decision := {"allow": true} if input.phase == "request"

decision := {"allow": false} if input.message.method == "ping"
`
	e, err := New(context.Background(), Options{Dirs: []string{policyDir(t, conflict)}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), requestInput("ping"))
	if err == nil || errors.Is(err, ErrInvalidDecision) || errors.Is(err, ErrUndefinedDecision) {
		t.Errorf("err = %v, want an evaluation error", err)
	}
	checkFailure(t, d, CodePolicyError)
	if !strings.Contains(d.Reasons[0].Fix, d.ID) {
		t.Errorf("fix %q does not name the decision id %s", d.Reasons[0].Fix, d.ID)
	}

	// A cancelled context.
	e = newDefaultEngine(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err = e.Decide(ctx, requestInput("ping"))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	checkFailure(t, d, CodePolicyError)
}

func TestInvalidInput(t *testing.T) {
	e := newDefaultEngine(t)
	for _, args := range []string{`{"a":1,"a":2}`, `{"a":`, `{"a":1} x`, "{\"a\":\"\xff\"}", `nul`, `{"n":1e99999999999}`} {
		in := callInput("search_contacts", anonymous)
		in.Message.Arguments = jsontext.Value(args)
		d, err := e.Decide(context.Background(), in)
		if !errors.Is(err, ErrInvalidInput) {
			t.Errorf("arguments %q: err = %v, want ErrInvalidInput", args, err)
		}
		checkFailure(t, d, CodeInvalidInput)
	}
	d, err := e.Decide(context.Background(), nil)
	if !errors.Is(err, ErrInvalidInput) {
		t.Errorf("nil input: err = %v", err)
	}
	checkFailure(t, d, CodeInvalidInput)
}

func TestVersionStamped(t *testing.T) {
	dir := policyDir(t, `package mcpgate

decision := {"allow": input.version == "mcpgate.policy/v1"}
`)
	e, err := New(context.Background(), Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	in := requestInput("ping")
	in.Version = ""
	if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
		t.Errorf("empty Version not stamped: %+v, %v", d, err)
	}
}

func TestDeclarationsInData(t *testing.T) {
	dir := policyDir(t, `package mcpgate

decision := {"allow": true, "effect": data.mcpgate.upstreams[input.transport.upstream].tools[input.message.name].effect, "visible": [x | some x in data.mcpgate.extra]}
`)
	writeFile(t, dir, "mcpgate/data.json", `{"extra": ["from-data-file"]}`)
	e, err := New(context.Background(), Options{Dirs: []string{dir}, Declarations: testDeclarations})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Decide(context.Background(), callInput("send_email", anonymous))
	if err != nil {
		t.Fatal(err)
	}
	if d.Effect != EffectNotify || !slices.Equal(d.Visible, []string{"from-data-file"}) {
		t.Errorf("got %+v", d)
	}

	// The same tool declared in a data file and in the configuration.
	writeFile(t, dir, "mcpgate/upstreams.yaml", "upstreams:\n  crm:\n    tools:\n      send_email:\n        effect: read\n")
	_, err = New(context.Background(), Options{Dirs: []string{dir}, Declarations: testDeclarations})
	if err == nil || !strings.Contains(err.Error(), `data.mcpgate.upstreams["crm"].tools["send_email"] is declared both`) {
		t.Errorf("err = %v, want a double declaration", err)
	}

	// Invalid declarations are refused by New.
	_, err = New(context.Background(), Options{Declarations: map[string]map[string]ToolDeclaration{"crm": {"x": {Effect: "readonly"}, "y": {}}}})
	if err == nil || !strings.Contains(err.Error(), `tool "x"`) || !strings.Contains(err.Error(), `tool "y"`) {
		t.Errorf("err = %v, want both invalid declarations", err)
	}
}

func TestReload(t *testing.T) {
	dir := policyDir(t, `package mcpgate

decision := {"allow": true, "reasons": [{"code": "v1", "cause": "version 1"}]}
`)
	var logs logBuffer
	var oks, fails atomic.Int32
	var lastErr atomic.Value
	e, err := New(context.Background(), Options{
		Dirs:   []string{dir},
		Logger: logs.logger(),
		OnReload: func(ok bool, err error) {
			if ok {
				oks.Add(1)
				return
			}
			fails.Add(1)
			lastErr.Store(err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	version := func() string {
		t.Helper()
		d, err := e.Decide(context.Background(), requestInput("ping"))
		if err != nil {
			t.Fatal(err)
		}
		return d.Reasons[0].Code
	}
	if v := version(); v != "v1" {
		t.Fatalf("version %s", v)
	}

	writeFile(t, dir, "policy.rego", `package mcpgate

decision := {"allow": false, "reasons": [{"code": "v2", "cause": "version 2"}]}
`)
	if err := e.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != "v2" || oks.Load() != 1 {
		t.Fatalf("after reload: version %s, OnReload ok calls %d", v, oks.Load())
	}

	// A broken policy: the reload fails, v2 stays, the failure is reported.
	writeFile(t, dir, "policy.rego", "package mcpgate\n\ndecision := {\"allow\": \n")
	err = e.Reload(context.Background())
	if err == nil {
		t.Fatal("reload of a broken policy succeeded")
	}
	if v := version(); v != "v2" {
		t.Errorf("after failed reload: version %s, want v2 kept", v)
	}
	if fails.Load() != 1 || lastErr.Load().(error).Error() != err.Error() {
		t.Errorf("OnReload failures %d, last error %v", fails.Load(), lastErr.Load())
	}
	if !strings.Contains(logs.String(), "policy reload failed; keeping the previous policy") || !strings.Contains(logs.String(), "policy.rego:") {
		t.Errorf("failure not logged with its location: %s", logs.String())
	}
}

// Decide runs concurrently with reloads between two policy versions; every
// decision must come wholly from one of them (run with -race).
func TestAtomicSwap(t *testing.T) {
	v1 := `package mcpgate

decision := {"allow": true, "effect": "read", "reasons": [{"code": "v1", "cause": "one"}], "visible": ["one"]}
`
	v2 := `package mcpgate

decision := {"allow": false, "effect": "delete", "reasons": [{"code": "v2", "cause": "two"}], "visible": ["two", "three"]}
`
	dir := policyDir(t, v1)
	e, err := New(context.Background(), Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var decisions atomic.Int64
	seen := [2]atomic.Bool{}
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				d, err := e.Decide(context.Background(), callInput("search_contacts", anonymous))
				if err != nil {
					t.Error(err)
					return
				}
				decisions.Add(1)
				switch {
				case d.Allow && d.Effect == EffectRead && codes(d)[0] == "v1" && slices.Equal(d.Visible, []string{"one"}):
					seen[0].Store(true)
				case !d.Allow && d.Effect == EffectDelete && codes(d)[0] == "v2" && slices.Equal(d.Visible, []string{"two", "three"}):
					seen[1].Store(true)
				default:
					t.Errorf("torn decision %+v", d)
					return
				}
			}
		})
	}
	for i := range 20 {
		src := v1
		if i%2 == 0 {
			src = v2
		}
		writeFile(t, dir, "policy.rego", src)
		if err := e.Reload(context.Background()); err != nil {
			t.Error(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if !seen[0].Load() || !seen[1].Load() {
		t.Errorf("saw v1=%v v2=%v over %d decisions", seen[0].Load(), seen[1].Load(), decisions.Load())
	}
}

func TestWatch(t *testing.T) {
	dir := policyDir(t, `package mcpgate

decision := {"allow": false, "reasons": [{"code": "before", "cause": "c"}]}
`)
	reloaded := make(chan bool, 16)
	e, err := New(context.Background(), Options{
		Dirs:     []string{dir},
		OnReload: func(ok bool, _ error) { reloaded <- ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx) }()

	// Write until a reload is seen: the watcher may not be set up yet.
	after := `package mcpgate

decision := {"allow": true}
`
	deadline := time.After(10 * time.Second)
	for ok := false; !ok; {
		writeFile(t, dir, "policy.rego", after)
		select {
		case ok = <-reloaded:
		case <-time.After(3 * WatchDebounce):
		case <-deadline:
			t.Fatal("no reload after changing the policy file")
		}
	}
	d, err := e.Decide(context.Background(), requestInput("ping"))
	if err != nil || !d.Allow {
		t.Errorf("after watch reload: %+v, %v", d, err)
	}

	// A new subdirectory is watched too.
	writeFile(t, dir, "sub/extra.rego", "package mcpgate.extra\n\nx := 1\n")
	for ok := false; !ok; {
		select {
		case ok = <-reloaded:
		case <-deadline:
			t.Fatal("no reload after adding a file in a new directory")
		}
	}
	writeFile(t, dir, "sub/extra.rego", "package mcpgate.extra\n\nx := 2\n")
	for ok := false; !ok; {
		select {
		case ok = <-reloaded:
		case <-deadline:
			t.Fatal("no reload after changing a file in a new directory")
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Watch returned %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after cancel")
	}
}

func TestWatchWithoutDirs(t *testing.T) {
	e := newDefaultEngine(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := e.Watch(ctx); err != nil {
		t.Error(err)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	if err := Check(ctx, nil); err != nil {
		t.Errorf("embedded default policy: %v", err)
	}
	if err := Check(ctx, []string{"../rego/examples/transparent"}); err != nil {
		t.Errorf("transparent example: %v", err)
	}

	t.Run("every parse error", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "a.rego", "package mcpgate\n\ndecision := {\n")
		writeFile(t, dir, "b/b.rego", "package mcpgate\n\nx if {\n")
		writeFile(t, dir, "c.rego", "package mcpgate\n\ny := 1\n") // fine
		err := Check(ctx, []string{dir})
		if err == nil {
			t.Fatal("no error")
		}
		for _, want := range []string{"a.rego:", "b.rego:", "rego_parse_error"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %q:\n%v", want, err)
			}
		}
	})

	t.Run("every compile error", func(t *testing.T) {
		// OPA compiles in stages and stops after the first stage that
		// fails; every error of that stage is listed, past OPA's default
		// limit of 10.
		var a, b strings.Builder
		a.WriteString("package mcpgate\n")
		b.WriteString("package mcpgate.other\n")
		for i := range 7 {
			fmt.Fprintf(&a, "\nr%d if { x%d == 1 }\n", i, i)
			fmt.Fprintf(&b, "\ns%d if { y%d == 1 }\n", i, i)
		}
		dir := policyDir(t, a.String())
		writeFile(t, dir, "other.rego", b.String())
		err := Check(ctx, []string{dir})
		if err == nil {
			t.Fatal("no error")
		}
		if n := strings.Count(err.Error(), "rego_unsafe_var_error"); n != 14 {
			t.Errorf("%d unsafe variable errors, want 14:\n%v", n, err)
		}
		if !strings.Contains(err.Error(), "policy.rego:3") || !strings.Contains(err.Error(), "other.rego:15") {
			t.Errorf("error lacks a file's problem:\n%v", err)
		}
		if !strings.Contains(err.Error(), "14 problems") {
			t.Errorf("error does not count 14 problems:\n%v", err)
		}
		var aerr *ast.Error
		if !errors.As(err, &aerr) || aerr.Location == nil {
			t.Errorf("no *ast.Error with a location in %v", err)
		}
	})

	t.Run("type error", func(t *testing.T) {
		dir := policyDir(t, "package mcpgate\n\nz := undefined_function(1)\n")
		if err := Check(ctx, []string{dir}); err == nil || !strings.Contains(err.Error(), "policy.rego:3: rego_type_error: undefined function undefined_function") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("missing directory", func(t *testing.T) {
		if err := Check(ctx, []string{t.TempDir() + "/nope"}); err == nil {
			t.Error("no error")
		}
	})

	t.Run("no policy files", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "README.md", "nothing here")
		if err := Check(ctx, []string{dir}); err == nil || !strings.Contains(err.Error(), "no .rego files") {
			t.Errorf("err = %v", err)
		}
	})

	t.Run("tests and hidden files skipped", func(t *testing.T) {
		dir := policyDir(t, "package mcpgate\n\ndecision := {\"allow\": true}\n")
		writeFile(t, dir, "policy_test.rego", "package mcpgate\n\ntest_broken if {\n")
		writeFile(t, dir, "..data/policy.rego", "package mcpgate\n\ndecision := {\"allow\": false}\n")
		writeFile(t, dir, ".swp.rego", "garbage")
		if err := Check(ctx, []string{dir}); err != nil {
			t.Error(err)
		}
	})
}
