package policy

import (
	"context"
	"io/fs"
	"reflect"
	"strings"
	"testing"

	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// The default policy's answer to an allowed tools/call carries the result
// paths of the declaration and the write safety of the effect class
// (two-step confirmation for notify, wake, alerting and delete, replay
// protection for silent writes, rate buckets per effect class).
func TestDefaultPolicyWriteSafety(t *testing.T) {
	decls := map[string]map[string]ToolDeclaration{"crm": {
		"search_contacts": testDeclarations["crm"]["search_contacts"],
		"export_all":      {Effect: EffectRead, Expensive: true, ResultFields: []string{"url"}},
		"update_contact":  {Effect: EffectSilentWrite},
		"send_email":      {Effect: EffectNotify, NotifyObject: "contact_id"},
		"page_oncall":     {Effect: EffectWake},
		"mute_alerts":     {Effect: EffectAlerting},
		"delete_contact":  {Effect: EffectDelete},
		"refund_order":    {Effect: EffectSilentWrite, MovesMoney: true},
		"sign_contract":   {Effect: EffectNotify, LegallyBinding: true},
	}}
	e, err := New(context.Background(), Options{Declarations: decls})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]Decision{
		"search_contacts": {Effect: EffectRead, Buckets: []string{BucketReads},
			Result: &ResultPaths{UntrustedText: []string{"items[*].notes"}, Fields: []string{"items[*].id", "items[*].name", "items[*].notes"}}},
		"export_all":     {Effect: EffectRead, Buckets: []string{BucketExpensiveReads}, Result: &ResultPaths{Fields: []string{"url"}}},
		"update_contact": {Effect: EffectSilentWrite, Replay: true, Buckets: []string{BucketWrites}},
		"send_email":     {Effect: EffectNotify, Confirm: true, Approval: ApprovalClient, Buckets: []string{BucketWrites, BucketNotify}},
		"page_oncall":    {Effect: EffectWake, Confirm: true, Approval: ApprovalClient, Buckets: []string{BucketWrites, BucketWake}},
		"mute_alerts":    {Effect: EffectAlerting, Confirm: true, Approval: ApprovalClient, Buckets: []string{BucketWrites}},
		"delete_contact": {Effect: EffectDelete, Confirm: true, Approval: ApprovalClient, Buckets: []string{BucketWrites}},
		"refund_order":   {Effect: EffectSilentWrite, Confirm: true, Approval: ApprovalOutOfBand, Replay: true, Buckets: []string{BucketWrites}},
		"sign_contract":  {Effect: EffectNotify, Confirm: true, Approval: ApprovalOutOfBand, Buckets: []string{BucketWrites, BucketNotify}},
	} {
		t.Run(name, func(t *testing.T) {
			in := callInput(name, anonymous)
			in.Tool = &Tool{Name: name, Declared: true, ToolDeclaration: decls["crm"][name]}
			d, err := e.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			want.ID, want.Allow, want.Reasons = d.ID, true, nil
			if !reflect.DeepEqual(*d, want) {
				t.Errorf("got  %#v\nwant %#v", *d, want)
			}
		})
	}
}

// Steps that move money or are legally binding always use the approval
// page. A policy that answers otherwise (here: no confirmation,
// or approval in the client) is overruled by the engine, which logs it; a
// refusal is left alone, and so are tools without the marks.
func TestOutOfBandCannotBeOverruled(t *testing.T) {
	decls := map[string]map[string]ToolDeclaration{"crm": {
		"refund_order":  {Effect: EffectSilentWrite, MovesMoney: true},
		"sign_contract": {Effect: EffectNotify, LegallyBinding: true},
		"send_email":    {Effect: EffectNotify},
	}}
	policy := `package mcpgate

decision := {"allow": true, "effect": input.tool.effect, "confirm": false} if input.tool.name == "refund_order"
decision := {"allow": true, "effect": input.tool.effect, "confirm": true, "approval": "client"} if input.tool.name == "sign_contract"
decision := {"allow": true, "effect": input.tool.effect, "confirm": true, "approval": "client"} if input.tool.name == "send_email"
decision := {"allow": false, "reasons": [{"code": "no", "cause": "No."}]} if input.tool.name == "refused_refund"
`
	var logs logBuffer
	e, err := New(context.Background(), Options{Dirs: []string{policyDir(t, policy)}, Declarations: decls, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, decl ToolDeclaration) *Decision {
		t.Helper()
		in := callInput(name, alice)
		in.Tool = &Tool{Name: name, Declared: true, ToolDeclaration: decl}
		d, err := e.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, name := range []string{"refund_order", "sign_contract"} {
		d := call(name, decls["crm"][name])
		if !d.Allow || !d.Confirm || d.Approval != ApprovalOutOfBand {
			t.Errorf("%s: confirm %v approval %q, want true out_of_band", name, d.Confirm, d.Approval)
		}
		if l := logs.String(); !strings.Contains(l, `"decision_id":"`+d.ID+`"`) || !strings.Contains(l, `"tool":"`+name+`"`) || !strings.Contains(l, "approved out of band only") {
			t.Errorf("%s: the overrule is not logged:\n%s", name, l)
		}
	}
	if d := call("send_email", decls["crm"]["send_email"]); d.Approval != ApprovalClient {
		t.Errorf("send_email: approval %q, want the policy's client", d.Approval)
	}
	if d := call("refused_refund", ToolDeclaration{Effect: EffectSilentWrite, MovesMoney: true}); d.Allow || d.Confirm || d.Approval != "" {
		t.Errorf("a refusal was changed: %+v", d)
	}
}

// data.mcpgate.approval and data.mcpgate.tenants[t].approval choose the
// approval mode per effect class, the tenant's first; a wrong value makes
// the decision invalid (a deny, fail closed).
func TestApprovalData(t *testing.T) {
	decls := map[string]map[string]ToolDeclaration{"crm": {
		"send_email":     {Effect: EffectNotify},
		"delete_contact": {Effect: EffectDelete},
		"refund_order":   {Effect: EffectNotify, MovesMoney: true},
	}}
	dir := t.TempDir()
	writeFile(t, dir, "policy.rego", mustDefault(t))
	writeFile(t, dir, "approval.json", `{"mcpgate": {"approval": {"notify": "out_of_band", "delete": "client"}, "tenants": {"acme": {"approval": {"notify": "client"}}, "globex": {"approval": {"delete": "by_fax"}}}}}`)
	e, err := New(context.Background(), Options{Dirs: []string{dir}, Declarations: decls})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tenant, tool, approval string
		invalid                bool
	}{
		{"acme", "send_email", ApprovalClient, false},
		{"initech", "send_email", ApprovalOutOfBand, false},
		{"acme", "delete_contact", ApprovalClient, false},
		{"acme", "refund_order", ApprovalOutOfBand, false},
		{"globex", "delete_contact", "", true},
	} {
		p := alice
		p.Tenant, p.Rights = c.tenant, nil
		in := callInput(c.tool, p)
		in.Tool = &Tool{Name: c.tool, Declared: true, ToolDeclaration: decls["crm"][c.tool]}
		d, err := e.Decide(context.Background(), in)
		if c.invalid {
			if err == nil || d.Allow || d.Reasons[0].Code != CodeInvalidDecision {
				t.Errorf("%s %s: %+v %v, want invalid_decision", c.tenant, c.tool, d, err)
			}
			continue
		}
		if err != nil || !d.Allow || !d.Confirm || d.Approval != c.approval {
			t.Errorf("%s %s: %+v %v, want approval %q", c.tenant, c.tool, d, err, c.approval)
		}
	}
}

// mustDefault returns the embedded default policy's source.
func mustDefault(t *testing.T) string {
	t.Helper()
	b, err := fs.ReadFile(mcpgaterego.Default, "mcpgate.rego")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestIsPath(t *testing.T) {
	for p, want := range map[string]bool{
		"notes": true, "items[*].comment": true, "[0].title": true, "a.b.c": true, "a[1][*].b-c@d": true, "[*]": true,
		"": false, ".a": false, "a.": false, "a..b": false, "a[]": false, "a[x]": false, "a[1": false, "a.[1]": false,
		"$.a": false, "a b": false, "a[*]b": false, "a/b": false,
	} {
		if got := IsPath(p); got != want {
			t.Errorf("IsPath(%q) = %v, want %v", p, got, want)
		}
	}
}

// A tool nobody declared, on an upstream whose undeclared tools are
// confirmed, runs only after a person confirms, whatever the policy
// answers: a permissive policy is overruled (confirm, the delete class,
// approval in the client) and that is logged. A declared tool and a
// refusal are left alone.
func TestUndeclaredConfirmCannotBeOverruled(t *testing.T) {
	policy := `package mcpgate

decision := {"allow": true, "effect": "read", "confirm": false, "buckets": ["reads"]} if input.tool.name != "nope"
decision := {"allow": false, "reasons": [{"code": "no", "cause": "No."}]} if input.tool.name == "nope"
`
	var logs logBuffer
	e, err := New(context.Background(), Options{Dirs: []string{policyDir(t, policy)}, Logger: logs.logger()})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(tool *Tool) *Decision {
		t.Helper()
		in := callInput(tool.Name, alice)
		in.Tool = tool
		d, err := e.Decide(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for range 2 { // the second time from the memo
		d := decide(&Tool{Name: "drop_tables", Undeclared: UndeclaredConfirm})
		if !d.Allow || !d.Confirm || d.Effect != EffectDelete || d.Approval != ApprovalClient || d.Replay {
			t.Errorf("undeclared: %+v", d)
		}
		if l := logs.String(); !strings.Contains(l, `"decision_id":"`+d.ID+`"`) || !strings.Contains(l, "a tool nobody declared is called only after a person confirms") {
			t.Errorf("the overrule is not logged:\n%s", l)
		}
	}
	if d := decide(&Tool{Name: "search", Declared: true, ToolDeclaration: ToolDeclaration{Effect: EffectRead}}); d.Confirm || d.Effect != EffectRead {
		t.Errorf("declared read changed: %+v", d)
	}
	if d := decide(&Tool{Name: "nope", Undeclared: UndeclaredConfirm}); d.Allow || d.Confirm {
		t.Errorf("a refusal was changed: %+v", d)
	}
}
