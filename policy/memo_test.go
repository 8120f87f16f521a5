package policy

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
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

// fillInput sets every field of v (an Input, recursively) to a non-zero
// value: strings distinct, bools true, numbers 7, pointers to filled
// values, lists of one filled element, raw JSON a small object.
func fillInput(v reflect.Value, n *int) {
	switch v.Kind() {
	case reflect.String:
		*n++
		v.SetString(fmt.Sprintf("s%d", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int:
		v.SetInt(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillInput(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if hiddenFromPolicy(v.Type().Field(i)) {
				continue
			}
			fillInput(v.Field(i), n)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // jsontext.Value
			*n++
			v.SetBytes(fmt.Appendf(nil, `{"a":%d}`, *n))
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fillInput(v.Index(0), n)
	default:
		panic("fillInput: a field of kind " + v.Kind().String() + " (teach memoKey and this test about it)")
	}
}

// mutateInput changes the target-th change point of v (counted by *at in
// walk order) and reports whether it found it; with target < 0 it only
// counts. Change points: every string, bool, number and raw JSON value;
// every pointer set to nil; every list grown by one element.
func mutateInput(v reflect.Value, at *int, target int, path string) (string, bool) {
	hit := func() bool { *at++; return *at-1 == target }
	switch v.Kind() {
	case reflect.String:
		if hit() {
			v.SetString(v.String() + "x")
			return path, true
		}
	case reflect.Bool:
		if hit() {
			v.SetBool(!v.Bool())
			return path, true
		}
	case reflect.Int:
		if hit() {
			v.SetInt(v.Int() + 1)
			return path, true
		}
	case reflect.Pointer:
		if hit() {
			v.Set(reflect.Zero(v.Type()))
			return path + "=nil", true
		}
		return mutateInput(v.Elem(), at, target, path)
	case reflect.Struct:
		for i := range v.NumField() {
			if hiddenFromPolicy(v.Type().Field(i)) {
				continue
			}
			if p, ok := mutateInput(v.Field(i), at, target, path+"."+v.Type().Field(i).Name); ok {
				return p, true
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if hit() {
				v.SetBytes([]byte(`{"b":2}`))
				return path, true
			}
			return "", false
		}
		if hit() {
			v.Set(reflect.Append(v, reflect.Zero(v.Type().Elem())))
			return path + "+1", true
		}
		for i := range v.Len() {
			if p, ok := mutateInput(v.Index(i), at, target, fmt.Sprintf("%s[%d]", path, i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

// hiddenFromPolicy reports a field the policy never sees (json:"-", e.g.
// ToolDeclaration.Expose): not part of the memo key.
func hiddenFromPolicy(f reflect.StructField) bool { return f.Tag.Get("json") == "-" }

// fullInput is an Input with every field set, and its variants: each
// differs from it in exactly one place (one per change point).
func fullInput(t *testing.T) (*Input, []*Input, []string) {
	t.Helper()
	newFull := func() *Input {
		in := new(Input)
		n := 0
		fillInput(reflect.ValueOf(in).Elem(), &n)
		return in
	}
	count := 0
	mutateInput(reflect.ValueOf(newFull()).Elem(), &count, -1, "")
	var variants []*Input
	var paths []string
	for i := range count {
		in := newFull()
		at := 0
		p, ok := mutateInput(reflect.ValueOf(in).Elem(), &at, i, "Input")
		if !ok {
			t.Fatalf("change point %d not found", i)
		}
		variants, paths = append(variants, in), append(paths, p)
	}
	if count < 80 {
		t.Fatalf("only %d change points: the walk misses fields", count)
	}
	return newFull(), variants, paths
}

// The memo key sees every field of Input (memo.go): an Input that differs
// from another in any one field, at any depth — a string, a flag, a
// number, raw JSON, a pointer left nil, a list one longer — has another
// key. A field added to Input without being added to memoKey fails here.
func TestMemoKeyCoversEveryField(t *testing.T) {
	base, variants, paths := fullInput(t)
	key := string(memoKey(nil, base))
	if again := string(memoKey(nil, base)); again != key {
		t.Fatal("memoKey is not deterministic")
	}
	seen := map[string]string{key: "base"}
	for i, v := range variants {
		k := string(memoKey(nil, v))
		if prev, dup := seen[k]; dup {
			t.Errorf("%s: same memo key as %s", paths[i], prev)
		}
		seen[k] = paths[i]
	}
	// Moving bytes from one string to its neighbour keeps the total but
	// not the key (lengths are part of it).
	a, b := callInput("search_contacts", alice), callInput("search_contacts", alice)
	a.Principal.Tenant, a.Principal.Subject = "acmealice", ""
	b.Principal.Tenant, b.Principal.Subject = "acme", "alice"
	if string(memoKey(nil, a)) == string(memoKey(nil, b)) {
		t.Error("neighbouring strings share a key")
	}
	// A nil list and an empty one: live_rights absent vs [] differ for
	// the policy (no rights source vs a subject with no rights).
	a, b = callInput("search_contacts", alice), callInput("search_contacts", alice)
	a.Principal.LiveRights, b.Principal.LiveRights = nil, []string{}
	if string(memoKey(nil, a)) == string(memoKey(nil, b)) {
		t.Error("live_rights nil and [] share a key")
	}
}

// echoPolicy's decision carries the whole input it saw: a decision served
// for another input would show it.
const echoPolicy = `package mcpgate

decision := {"allow": true, "reasons": [{"code": "echo", "cause": json.marshal(input)}]}
`

// Through the real engine and OPA: with the memo holding the decision of
// the full input, each variant (one field changed) gets the decision of
// its own input, first and when repeated — never the remembered one.
func TestDecisionMemoNeverServesAnotherInput(t *testing.T) {
	ctx := context.Background()
	dir := policyDir(t, echoPolicy)
	memo, err := New(ctx, Options{Dirs: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	if memo.current.Load().memo == nil {
		t.Fatal("the echo policy has no memo")
	}
	plain, err := New(ctx, Options{Dirs: []string{dir}, NoDecisionMemo: true})
	if err != nil {
		t.Fatal(err)
	}
	base, variants, paths := fullInput(t)
	for i, v := range append([]*Input{base}, variants...) {
		name := "base"
		if i > 0 {
			name = paths[i-1]
		}
		want, werr := plain.Decide(ctx, v)
		for round := range 2 {
			if _, err := memo.Decide(ctx, base); (err == nil) != (werr == nil) && i == 0 {
				t.Fatalf("base: %v", err)
			}
			got, gerr := memo.Decide(ctx, v)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("%s round %d: error %v, want %v", name, round, gerr, werr)
			}
			if werr != nil {
				continue // an input OPA cannot take: failures are never remembered
			}
			if len(got.Reasons) != 1 || got.Reasons[0].Cause != want.Reasons[0].Cause {
				t.Fatalf("%s round %d: decided for\n%s\nwant\n%s", name, round, got.Reasons[0].Cause, want.Reasons[0].Cause)
			}
		}
	}
}

// clone copies every list: changing or growing a copy's list changes
// neither the original nor the copy's other lists (they share one backing
// array), and nil and empty lists stay as they were.
func TestDecisionCloneIsDeep(t *testing.T) {
	orig := Decision{ID: "x", Allow: true,
		Reasons: []Reason{{Code: "a", Rights: []string{"r1", "r2"}}, {Code: "b"}},
		Visible: []string{"v1"}, Buckets: []string{}, Result: &ResultPaths{UntrustedText: []string{"u1"}, Fields: []string{"f1", "f2"}, Drop: nil}}
	want := Decision{ID: "x", Allow: true,
		Reasons: []Reason{{Code: "a", Rights: []string{"r1", "r2"}}, {Code: "b"}},
		Visible: []string{"v1"}, Buckets: []string{}, Result: &ResultPaths{UntrustedText: []string{"u1"}, Fields: []string{"f1", "f2"}, Drop: nil}}
	c := orig.clone()
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("clone %+v, want %+v", c, want)
	}
	c.Reasons[0].Rights[0] = "changed"
	c.Reasons[0].Rights = append(c.Reasons[0].Rights, "grown")
	c.Visible[0] = "changed"
	c.Visible = append(c.Visible, "grown")
	c.Buckets = append(c.Buckets, "grown")
	c.Result.UntrustedText = append(c.Result.UntrustedText, "grown")
	c.Result.Fields[1] = "changed"
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("the original changed: %+v", orig)
	}
	if c.Visible[0] != "changed" || c.Result.UntrustedText[0] != "u1" || c.Result.Fields[0] != "f1" || c.Reasons[0].Rights[1] != "r2" {
		t.Fatalf("growing one list of the copy ran into another: %+v %+v", c, c.Result)
	}
	// An allowed call's decision (a bucket, result paths) is copied in one
	// allocation, lists beside the paths; a larger one as deep as ever.
	allowed := Decision{Allow: true, Buckets: []string{"reads"}, Result: &ResultPaths{Fields: []string{"a", "b", "c"}, Drop: []string{}}}
	if n := testing.AllocsPerRun(50, func() { _ = allowed.clone() }); n > 1 {
		t.Errorf("clone of an allowed decision: %v allocations, want at most 1", n)
	}
	for _, d := range []Decision{allowed, {Buckets: []string{"b1", "b2"}, Result: &ResultPaths{Fields: []string{"1", "2", "3", "4", "5", "6", "7"}}}} {
		c := d.clone()
		if !reflect.DeepEqual(c, d) {
			t.Fatalf("clone %+v, want %+v", c, d)
		}
		c.Buckets = append(c.Buckets, "grown") // must not run into Fields
		if !reflect.DeepEqual(c.Result.Fields, d.Result.Fields) {
			t.Fatalf("growing Buckets changed Fields: %q", c.Result.Fields)
		}
		c.Result.Fields[0] = "changed"
		c.Result.Fields = append(c.Result.Fields, "grown")
		if d.Result.Fields[0] == "changed" {
			t.Fatalf("copy and original share lists: %+v %+v", c.Result, d.Result)
		}
	}
}

// The memo stays within memoEntries entries and memoMaxBytes of keys,
// and what it keeps is still exact.
func TestDecisionMemoBounded(t *testing.T) {
	m := newDecisionMemo()
	tail := func(k string) string { return k[max(0, len(k)-8):] }
	big := make([]byte, memoMaxBytes/3)
	for i := range 3 * memoEntries {
		key := fmt.Appendf(nil, "k%d", i)
		if i%500 == 0 {
			key = append(big[:0:0], big...)
			key = fmt.Appendf(key, "%d", i)
		}
		m.put(key, &Decision{Effect: tail(string(key))})
		total := 0
		for k := range m.m {
			total += len(k)
		}
		if len(m.m) > memoEntries || total > memoMaxBytes || total != m.bytes {
			t.Fatalf("after %d puts: %d entries, %d key bytes (counted %d)", i+1, len(m.m), total, m.bytes)
		}
	}
	for k, d := range m.m {
		if d.Effect != tail(k) {
			t.Fatalf("entry %q holds %+v", k, d)
		}
	}
}

// mcpgate_policy_decision_memo_total counts a first decision as a miss, its
// repeat as a hit, and a decision of a policy without a memo as off.
func TestDecisionMemoCounted(t *testing.T) {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	e, err := New(ctx, Options{Declarations: testDeclarations, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	in := callInput("search_contacts", alice)
	for range 3 {
		if _, err := e.Decide(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	volatile, err := New(ctx, Options{Dirs: []string{policyDir(t, "package mcpgate\n\ndecision := {\"allow\": time.now_ns() > 0}\n")}, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := volatile.Decide(ctx, requestInput("ping")); err != nil {
		t.Fatal(err)
	}
	for result, want := range map[string]float64{"hit": 2, "miss": 1, "off": 0} {
		if got := counterValue(t, e.memoCounter(result)); got != want {
			t.Errorf("%s: %v, want %v", result, got, want)
		}
	}
	if got := counterValue(t, volatile.memoOff); got != 1 {
		t.Errorf("volatile policy: off %v, want 1", got)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "mcpgate_policy_decision_memo_total" {
			series = len(mf.GetMetric())
		}
	}
	if series != 3 {
		t.Errorf("registered series of mcpgate_policy_decision_memo_total: %d, want 3", series)
	}
}

func (e *Engine) memoCounter(result string) prometheus.Counter {
	return map[string]prometheus.Counter{"hit": e.memoHit, "miss": e.memoMiss, "off": e.memoOff}[result]
}

// memoKey appends the key of every field of in to b: the key of a policy
// that reads the whole input.
func memoKey(b []byte, in *Input) []byte {
	for _, step := range wholeKeyPlan.steps {
		b = step(b, in)
	}
	return b
}

var wholeKeyPlan = newKeyPlan(&readNode{whole: true})

// TestExponentsInRangeMatchesScan holds the memo's shortcut for strict
// arguments (Message.ArgumentsStrict, argsPlan.strictKey) to the full
// read it replaces, on strict JSON with numbers in and out of OPA's range,
// in strings and out.
func TestExponentsInRangeMatchesScan(t *testing.T) {
	cases := []string{
		`{}`, `{"a":1}`, `{"a":1e3}`, `{"a":-1.5E+300}`, `{"a":1e999999999}`, `{"a":-2E-999999999}`,
		`{"a":"1e999999999"}`, `{"a":"x\"1e999999999"}`, `{"a\\":[1e999999999]}`, `{"e":[0,-0.0e0,true,false,null]}`,
		`{"a":{"b":[{"c":1E400}]}}`, `{"a":12345678901234567890e-5}`, ` { "a" : 7e1 , "b" : [ 1e2 ] } `,
		`[1e999999999]`, `"s"`, `12`, `-1e3`, `-1e999999999`, `null`, `true`, ` [] `,
	}
	r := rand.New(rand.NewPCG(7, 11))
	parts := []string{`1`, `-0`, `2.5`, `1e5`, `1E999999999`, `-3e-999999999`, `"1e999999999"`, `"\"1e9"`, `"\\"`, `true`, `null`, `"é"`}
	var gen func(depth int) string
	gen = func(depth int) string {
		if depth > 3 || r.IntN(3) == 0 {
			return parts[r.IntN(len(parts))]
		}
		n := r.IntN(4)
		if r.IntN(2) == 0 {
			s := "["
			for i := range n {
				if i > 0 {
					s += ","
				}
				s += gen(depth + 1)
			}
			return s + "]"
		}
		s := "{"
		for i := range n {
			if i > 0 {
				s += ","
			}
			s += fmt.Sprintf(`"k%d":%s`, i, gen(depth+1))
		}
		return s + "}"
	}
	for range 3000 {
		cases = append(cases, `{"x":`+gen(0)+`}`)
	}
	for _, c := range cases {
		raw := []byte(c)
		if !jsontext.Value(raw).IsValid() {
			t.Fatalf("case %s is not strict JSON", c)
		}
		// No part read (validArguments), and the kind alone (the
		// default policy's plan).
		for _, plan := range []*argsPlan{validArguments, newArgsPlan(&readNode{})} {
			if !plan.kindOnly() {
				t.Fatal("plan reads parts")
			}
			wantKey, want := plan.key(nil, raw)
			gotKey, got := plan.strictKey(nil, raw)
			if got != want || got && !bytes.Equal(gotKey, wantKey) {
				t.Errorf("%s: strictKey %q %v, full read %q %v", c, gotKey, got, wantKey, want)
			}
		}
	}
}
