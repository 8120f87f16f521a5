package policy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	dto "github.com/prometheus/client_model/go"
)

// argumentValues and argumentNames make generated arguments: few enough
// that inputs repeat in the parts a policy reads and differ in others.
var (
	argumentNames  = []string{`"x"`, `"y"`, `"z"`, `"q"`, `"\u0079"`, `"x\u0000"`, `"w"`}
	argumentValues = []string{`1`, `1.0`, `2`, `"a"`, `"b"`, `true`, `null`, `[1,2]`, `{"x":1}`, `{}`, `1e3`, ` 1 `, `"é"`}
	// badArguments are arguments the evaluation refuses or that are not
	// an object.
	badArguments = []string{`{"x":1,"x":2}`, `{"x":1} x`, `{"x":1e99999999999}`, "{\"x\":\"\xff\"}", `{`, `[1]`, `"s"`, `null`, ` `, `{"y":[1,]}`}
	principals   = []Principal{anonymous, alice, oauthToken("crm.read"), {Authenticated: true, Tenant: "acme", Subject: "bob", Rights: []string{"crm.read"}, Connection: "c2"},
		{Authenticated: true, Tenant: "other", Subject: "alice", Rights: []string{"crm.read", "crm.write"}}}
	methods = []string{"tools/call", "tools/call", "tools/call", "tools/call", "prompts/get", "ping", "resources/read", "tools/list"}
)

func genArguments(r *rand.Rand) jsontext.Value {
	switch n := r.IntN(20); {
	case n == 0:
		return nil
	case n == 1:
		return jsontext.Value(badArguments[r.IntN(len(badArguments))])
	}
	b := []byte{'{'}
	used := map[int]bool{}
	for i := range r.IntN(4) {
		k := r.IntN(len(argumentNames))
		if used[k] || (k == 4 && used[1]) || (k == 1 && used[4]) { // "\u0079" is "y"
			continue
		}
		used[k] = true
		if i > 0 && len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, argumentNames[k]...)
		b = append(b, ':')
		b = append(b, argumentValues[r.IntN(len(argumentValues))]...)
	}
	return append(b, '}')
}

func genInput(r *rand.Rand) *Input {
	p := principals[r.IntN(len(principals))]
	method := methods[r.IntN(len(methods))]
	var in *Input
	switch method {
	case "tools/call":
		in = callInput(allTools[r.IntN(len(allTools))], p)
		in.Message.Arguments = genArguments(r)
		if r.IntN(10) == 0 {
			in.Message.TenantArguments = []string{"tenant"}
		}
		if r.IntN(4) == 0 { // equal members: a policy may compare them
			in.Message.URI = in.Message.Name
		}
		if r.IntN(10) == 0 {
			in.Message.ArgumentProblems = []ArgumentProblem{{Argument: "x", Code: "wrong_type", Message: "x", Expected: "string"}}
		}
	case "prompts/get":
		in = requestInput(method)
		in.Message.Name = "p"
		in.Message.Arguments = genArguments(r)
	case "resources/read":
		in = requestInput(method)
		in.Message.URI = []string{"", "file:///a", "file:///b"}[r.IntN(3)]
	case "tools/list":
		in = listInput(method, p, allTools[:1+r.IntN(len(allTools)-1)]...)
	default:
		in = requestInput(method)
	}
	in.Principal = p
	if r.IntN(4) == 0 {
		in.Message.Client = &Client{Name: fmt.Sprintf("c%d", r.IntN(3))}
	}
	return in
}

// memoHits reads the engine's memo hit counter.
func memoHits(t testing.TB, e *Engine) float64 {
	t.Helper()
	var m dto.Metric
	if err := e.memoHit.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// sameDecision compares two answers of Decide, IDs aside.
func sameDecision(got *Decision, gerr error, want *Decision, werr error) error {
	if (gerr == nil) != (werr == nil) {
		return fmt.Errorf("error %v, want %v", gerr, werr)
	}
	g, w := *got, *want
	g.ID, w.ID = "", ""
	if gerr != nil { // the reason's fix names the decision id
		g.Reasons, w.Reasons = codesOnly(g.Reasons), codesOnly(w.Reasons)
	}
	if !reflect.DeepEqual(g, w) {
		return fmt.Errorf("decision\n%+v\nwant\n%+v", g, w)
	}
	return nil
}

func codesOnly(rs []Reason) []Reason {
	out := make([]Reason, len(rs))
	for i, r := range rs {
		out[i] = Reason{Code: r.Code}
	}
	return out
}

// differentialEngines loads a policy three times: with the decision memo
// (evaluating, on a miss, the parts of the arguments the policy reads),
// without the memo but with those parts, and without either: the whole
// input evaluated every time. rego "" is the default policy.
func differentialEngines(t testing.TB, rego string) (memo, parts, plain *Engine) {
	t.Helper()
	o := Options{Declarations: testDeclarations}
	if rego != "" {
		o = Options{Dirs: []string{policyDir(t, "package mcpgate\n\n"+rego+"\n")}}
	}
	memo, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	o.NoDecisionMemo = true
	if parts, err = New(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if plain, err = New(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	plain.wholeInput = true
	return memo, parts, plain
}

// Memo on against memo off, over thousands of generated inputs, for the
// default policy and for policies that read input in every way the
// analysis knows (readsPolicies): every decision through the memo equals
// the evaluated one, from several goroutines at once. Inputs are drawn
// from a pool (repeats) and made anew (arguments that differ only where
// a policy does or does not look).
func TestDecisionMemoDifferential(t *testing.T) {
	policies := append([]struct {
		name  string
		rego  string
		reads string
		memo  bool
	}{{name: "default", memo: true}}, readsPolicies...)
	for _, pol := range policies {
		t.Run(pol.name, func(t *testing.T) {
			memo, parts, plain := differentialEngines(t, pol.rego)
			r := rand.New(rand.NewPCG(1, uint64(len(pol.name))))
			pool := make([]*Input, 200)
			// Half the inputs say their arguments were read strictly,
			// as the gateway's do (Message.ArgumentsStrict).
			strict := func(in *Input) *Input {
				in.Message.ArgumentsStrict = r.IntN(2) == 0 && jsontext.Value(in.Message.Arguments).IsValid()
				return in
			}
			for i := range pool {
				pool[i] = strict(genInput(r))
			}
			inputs := make([]*Input, 4000)
			for i := range inputs {
				if r.IntN(2) == 0 {
					inputs[i] = pool[r.IntN(len(pool))]
				} else {
					inputs[i] = strict(genInput(r))
				}
			}
			const workers = 4
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					ctx := context.Background()
					for i := w; i < len(inputs); i += workers {
						in := inputs[i]
						want, werr := plain.Decide(ctx, in)
						for name, e := range map[string]*Engine{"memo": memo, "parts": parts} {
							got, gerr := e.Decide(ctx, in)
							if !pol.memo { // the clock: decisions differ by the time
								got.Reasons, want.Reasons = nil, nil
							}
							if err := sameDecision(got, gerr, want, werr); err != nil {
								errs <- fmt.Errorf("%s, input %d (%s %s %s): %w", name, i, in.Message.Method, in.Message.Name, in.Message.Arguments, err)
								return
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			hits := memoHits(t, memo)
			switch {
			case pol.memo && hits == 0:
				t.Error("the memo answered nothing")
			case !pol.memo && hits != 0:
				t.Errorf("a policy reading the clock was answered %v times from the memo", hits)
			}
			t.Logf("%d inputs, %v memo hits", len(inputs), hits)
		})
	}
}

// A policy that reads input.message.arguments.x decides distinct x values
// separately, and reuses a decision across arguments that differ
// elsewhere. The default policy reuses its decision across calls whose
// arguments differ (it reads none of their values).
func TestDecisionMemoByArgument(t *testing.T) {
	ctx := context.Background()
	memo, _, plain := differentialEngines(t, readsPolicies[0].rego)
	in := callInput("search_contacts", alice)
	for i, tt := range []struct {
		args string
		hit  bool
	}{
		{`{"x":1}`, false},
		{`{"x":1}`, true},
		{`{"x":2}`, false},
		{`{"x": 1, "y": 7}`, true},
		{`{"\u0078":1}`, true},
		{`{"x":1.0}`, false},
		{`{"x":"1"}`, false},
		{`{"y":1}`, false},
		{`{"x":{"a":1}}`, false},
		{`{"x":{"a":2}}`, false},
		{`{"x":{"a":2}}`, true},
		{`{"x":2,"x":2}`, false},
	} {
		in.Message.Arguments = jsontext.Value(tt.args)
		before := memoHits(t, memo)
		got, gerr := memo.Decide(ctx, in)
		want, werr := plain.Decide(ctx, in)
		if err := sameDecision(got, gerr, want, werr); err != nil {
			t.Errorf("%d %s: %v", i, tt.args, err)
		}
		if hit := memoHits(t, memo) > before; hit != tt.hit {
			t.Errorf("%d %s: memo hit %v, want %v", i, tt.args, hit, tt.hit)
		}
	}

	def := newDefaultEngine(t)
	in = callInput("search_contacts", alice)
	for i := range 10 {
		in.Message.Arguments = jsontext.Value(fmt.Sprintf(`{"query":"q%d","limit":%d}`, i, i))
		if d, err := def.Decide(ctx, in); err != nil || !d.Allow {
			t.Fatalf("%s: %+v %v", in.Message.Arguments, d, err)
		}
	}
	if hits := memoHits(t, def); hits != 9 {
		t.Errorf("default policy, 10 calls with new arguments: %v memo hits, want 9", hits)
	}
	// Eight agents with their own tokens (subject, credential, connection
	// and client differ; tenant and rights are the same) share it too.
	for i := range 8 {
		p := alice
		p.Subject, p.CredentialID, p.Connection = fmt.Sprintf("agent-%d", i), fmt.Sprintf("tok_%d", i), fmt.Sprintf("tok_%d", i)
		in := callInput("search_contacts", p)
		in.Message.Client = &Client{Name: fmt.Sprintf("agent-%d", i)}
		in.Message.Arguments = jsontext.Value(fmt.Sprintf(`{"query":"a%d"}`, i))
		if d, err := def.Decide(ctx, in); err != nil || !d.Allow {
			t.Fatalf("agent %d: %+v %v", i, d, err)
		}
	}
	if hits := memoHits(t, def); hits != 17 {
		t.Errorf("default policy, 8 agents: %v memo hits in all, want 17", hits)
	}
}

// FuzzMemoKey drives random arguments, method and principal through the
// policies of readsPolicies (which chosen by the fuzzer), memo on against
// memo off: the memo never answers an input with another input's
// decision, and refuses what the evaluation refuses.
func FuzzMemoKey(f *testing.F) {
	type engines3 struct{ memo, parts, plain *Engine }
	m, pa, pl := differentialEngines(f, "") // the default policy: no argument read
	engines := []engines3{{m, pa, pl}}
	for _, pol := range readsPolicies {
		if pol.memo {
			m, pa, pl := differentialEngines(f, pol.rego)
			engines = append(engines, engines3{m, pa, pl})
		}
	}
	seeds := append(append([]string{}, badArguments...), `{"x":1}`, `{"x":1,"y":1}`, `{"x":2,"y":1}`, `{"\u0078":[1,{"x":2}]}`, `{"w":null}`, `{}`, ``)
	for i := range engines {
		for _, a := range seeds {
			f.Add([]byte(a), "tools/call", uint8(1), uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, args []byte, method string, who, policy uint8) {
		e := engines[int(policy)%len(engines)]
		in := callInput("search_contacts", principals[int(who)%len(principals)])
		in.Message.Method = method
		in.Message.Arguments = args
		want, werr := e.plain.Decide(context.Background(), in)
		for _, x := range []*Engine{e.memo, e.memo, e.parts} {
			got, gerr := x.Decide(context.Background(), in)
			if err := sameDecision(got, gerr, want, werr); err != nil {
				t.Fatalf("%q: %v", args, err)
			}
		}
		if jsontext.Value(args).IsValid() {
			// As the gateway sends them: read by a strict parser.
			in.Message.ArgumentsStrict = true
			for _, x := range []*Engine{e.memo, e.memo, e.parts} {
				got, gerr := x.Decide(context.Background(), in)
				if err := sameDecision(got, gerr, want, werr); err != nil {
					t.Fatalf("%q, strict: %v", args, err)
				}
			}
		}
	})
}
