package policy

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// The default policy calls only builtins whose answers depend on their
// operands: its versions have a memo, and every decision through the memo
// equals the evaluated one (IDs aside), for allowed, refused and list
// inputs, the first time and when repeated.
func TestDecisionMemoMatchesEvaluation(t *testing.T) {
	ctx := context.Background()
	memo := newDefaultEngine(t)
	if memo.current.Load().memo == nil {
		t.Fatal("the default policy has no decision memo: deterministic() found a volatile builtin")
	}
	plain, err := New(ctx, Options{Declarations: testDeclarations, NoDecisionMemo: true})
	if err != nil {
		t.Fatal(err)
	}
	var inputs []*Input
	for _, p := range []Principal{anonymous, alice, oauthToken("crm.read"), {Authenticated: true, Tenant: "acme", Subject: "bob"}} {
		for _, name := range allTools {
			inputs = append(inputs, callInput(name, p))
		}
		inputs = append(inputs, listInput("tools/list", p, allTools...), requestInput("ping"), requestInput("initialize"))
	}
	for round := range 3 {
		for i, in := range inputs {
			got, gerr := memo.Decide(ctx, in)
			want, werr := plain.Decide(ctx, in)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("round %d input %d: error %v, want %v", round, i, gerr, werr)
			}
			if got.ID == "" || got.ID == want.ID {
				t.Fatalf("round %d input %d: decision id %q", round, i, got.ID)
			}
			g, w := *got, *want
			g.ID, w.ID = "", ""
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("round %d input %d (%s %s by %q):\nmemo %+v\nwant %+v", round, i, in.Message.Method, in.Message.Name, in.Principal.Subject, g, w)
			}
		}
	}
}

// A repeat gets its own copy and its own ID; changing a returned decision
// does not change the next one; an input that differs in one right is not
// answered with another input's decision.
func TestDecisionMemoCopies(t *testing.T) {
	ctx := context.Background()
	e := newDefaultEngine(t)
	in := callInput("undeclared_tool", alice)
	first, _ := e.Decide(ctx, in)
	if first.Allow || len(first.Reasons) == 0 {
		t.Fatalf("undeclared tool: %+v", first)
	}
	code := first.Reasons[0].Code
	first.Reasons[0].Code = "changed by the caller"
	second, _ := e.Decide(ctx, in)
	if second.ID == first.ID || second.Reasons[0].Code != code {
		t.Fatalf("repeat: %+v (first %+v)", second, first)
	}

	withRight := callInput("search_contacts", alice)
	if d, _ := e.Decide(ctx, withRight); !d.Allow {
		t.Fatalf("alice may search: %+v", d)
	}
	noRight := alice
	noRight.Rights = []string{"crm.write"}
	if d, _ := e.Decide(ctx, callInput("search_contacts", noRight)); d.Allow {
		t.Fatalf("without crm.read the call was allowed (another input's decision?): %+v", d)
	}
}

// A policy that calls a builtin whose answer may change between calls
// (time, network, randomness, certificate checks against the clock, a
// builtin OPA does not know) gets no memo; a reload gets a fresh memo, so
// the new policy decides at once.
func TestDecisionMemoOff(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		rego string
		memo bool
	}{
		{`decision := {"allow": input.message.method == "ping"}`, true},
		{`decision := {"allow": count(input.principal.rights) > 0}`, true},
		{`decision := {"allow": time.now_ns() > 0}`, false},
		{`decision := {"allow": f(1)}
f(x) := y if { y := rand.intn("k", 10) >= x }`, false},
		{`decision := {"allow": count(crypto.x509.parse_and_verify_certificates("x")) > 0}`, false},
		{`decision := {"allow": count([x | some x in numbers.range(1, 3); uuid.rfc4122(sprintf("%d", [x])) != ""]) > 0}`, false},
	} {
		e, err := New(ctx, Options{Dirs: []string{policyDir(t, "package mcpgate\n\n"+tt.rego+"\n")}})
		if err != nil {
			t.Fatalf("%s: %v", tt.rego, err)
		}
		if got := e.current.Load().memo != nil; got != tt.memo {
			t.Errorf("%s: memo %v, want %v", tt.rego, got, tt.memo)
		}
	}

	dir := policyDir(t, "package mcpgate\n\ndecision := {\"allow\": true}\n")
	e, err := New(ctx, Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if d, _ := e.Decide(ctx, requestInput("ping")); !d.Allow {
			t.Fatalf("first policy refused: %+v", d)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "policy.rego"), []byte("package mcpgate\n\ndecision := {\"allow\": false, \"reasons\": [{\"code\": \"closed\", \"cause\": \"closed\"}]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := e.Decide(ctx, requestInput("ping")); d.Allow {
		t.Fatalf("after reload the previous policy's decision was served: %+v", d)
	}
}
