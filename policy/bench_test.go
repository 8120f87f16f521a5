package policy

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// cpuTime returns the CPU time (user + system) this process has used, in
// nanoseconds, or -1 where getrusage is unavailable.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// loop runs f b.N times and reports, beside ns/op (wall clock), cpu-ns/op:
// the CPU time the whole process spends per operation, on any core, GC
// included. It can exceed ns/op (GC runs beside the loop) and is less
// inflated than ns/op when other work shares the CPUs.
func loop(b *testing.B, f func()) {
	b.Helper()
	b.ReportAllocs()
	start := cpuTime()
	n := 0
	for b.Loop() {
		f()
		n++
	}
	if end := cpuTime(); start >= 0 && end >= 0 && n > 0 {
		b.ReportMetric(float64(end-start)/float64(n), "cpu-ns/op")
	}
}

// newEvalEngine is the default policy with the decision memo off: every
// Decide evaluates the Rego (the cost of an input not seen recently).
func newEvalEngine(b *testing.B) *Engine {
	b.Helper()
	e, err := New(context.Background(), Options{Declarations: testDeclarations, NoDecisionMemo: true})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// benchDecide decides in through e in a loop; want says whether a
// decision is the expected one (the benchmark fails on any other).
func benchDecide(b *testing.B, ctx context.Context, e *Engine, in *Input, want func(*Decision) bool) {
	b.Helper()
	loop(b, func() {
		if d, err := e.Decide(ctx, in); err != nil || !want(d) {
			b.Fatal(d, err)
		}
	})
}

func allowed(d *Decision) bool { return d.Allow }

// BenchmarkDecideToolsCall is the hot path: a tools/call with a few
// arguments through the default policy, from the typed Input (argument
// parsing included) to the typed Decision, evaluated every time (memo
// off; BenchmarkDecideToolsCallMemo is a repeat answered by the memo).
func BenchmarkDecideToolsCall(b *testing.B) {
	e := newEvalEngine(b)
	in := callInput("search_contacts", alice)
	benchDecide(b, context.Background(), e, in, allowed)
}

// BenchmarkDecideToolsCallMemo is the same call repeated: the input is
// built and compared with the remembered one, the decision copied
// (memo.go).
func BenchmarkDecideToolsCallMemo(b *testing.B) {
	e := newDefaultEngine(b)
	in := callInput("search_contacts", alice)
	benchDecide(b, context.Background(), e, in, allowed)
}

// BenchmarkDecideToolsCallNewArguments is the call with new arguments
// every time, memo on: the default policy reads no argument values, so
// the memo answers; the key takes the arguments' kind and validates them.
func BenchmarkDecideToolsCallNewArguments(b *testing.B) {
	e := newDefaultEngine(b)
	in := callInput("search_contacts", alice)
	args := make([]jsontext.Value, 4096)
	for i := range args {
		args[i] = jsontext.Value(fmt.Sprintf(`{"query":"acme %d","limit":%d,"min_score":0.75,"tags":["vip","emea"],"filters":{"active":true,"owner":null}}`, i, i))
	}
	n := 0
	ctx := context.Background()
	loop(b, func() {
		in.Message.Arguments = args[n%len(args)]
		n++
		if d, err := e.Decide(ctx, in); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	})
}

// BenchmarkDecideToolsCallCatalog is the call of the e2e benchmark's
// get_status: a read tool declaring a right and result_fields only, with
// mcpgate's catalog on (input.tool.catalog, approved), memo off.
func BenchmarkDecideToolsCallCatalog(b *testing.B) {
	e := newEvalEngine(b)
	in := callInput("get_status", alice)
	in.Tool = &Tool{Name: "get_status", Declared: true,
		ToolDeclaration: ToolDeclaration{Effect: EffectRead, Rights: []string{"crm.read"}, ResultFields: []string{"service", "state", "checked_at"}},
		Catalog:         &ToolCatalog{Listed: true, State: CatalogApproved, Hash: "sha256:0f1e2d"}}
	benchDecide(b, context.Background(), e, in, func(d *Decision) bool { return d.Allow && d.Result != nil })
}

// BenchmarkDecideToolsCallWrite is an allowed silent_write call of a tool
// declaring no result paths, memo off.
func BenchmarkDecideToolsCallWrite(b *testing.B) {
	e := newEvalEngine(b)
	in := callInput("update_contact", alice)
	benchDecide(b, context.Background(), e, in, func(d *Decision) bool { return d.Allow && d.Replay })
}

// BenchmarkDecideToolsCallDenied is a call the policy refuses (undeclared
// tool), which builds reasons.
func BenchmarkDecideToolsCallDenied(b *testing.B) {
	e := newEvalEngine(b)
	in := callInput("undeclared_tool", alice)
	benchDecide(b, context.Background(), e, in, func(d *Decision) bool { return !d.Allow })
}

// BenchmarkDecideToolsCallCancelable uses a cancelable request context, as
// a server handler has.
func BenchmarkDecideToolsCallCancelable(b *testing.B) {
	e := newEvalEngine(b)
	in := callInput("search_contacts", alice)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchDecide(b, ctx, e, in, allowed)
}

// BenchmarkDecideToolsList filters a six-tool tools/list result.
func BenchmarkDecideToolsList(b *testing.B) {
	e := newEvalEngine(b)
	in := listInput("tools/list", alice, allTools...)
	benchDecide(b, context.Background(), e, in, allowed)
}

// BenchmarkInputValue is the input conversion alone (arguments included).
func BenchmarkInputValue(b *testing.B) {
	in := callInput("search_contacts", alice)
	c := newTermCaches(testDeclarations)
	loop(b, func() {
		if _, err := inputValue(in, c); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkMemoKey builds the default policy's memo key of a tools/call
// (the parts it reads, the arguments validated).
func BenchmarkMemoKey(b *testing.B) {
	p, err := load(context.Background(), nil, testDeclarations)
	if err != nil {
		b.Fatal(err)
	}
	// scanned: the arguments read again as JSON; strict: read by a strict
	// parser before (Message.ArgumentsStrict, as the gateway sends them).
	for _, strict := range []bool{false, true} {
		b.Run(map[bool]string{false: "scanned", true: "strict"}[strict], func(b *testing.B) {
			in := callInput("search_contacts", alice)
			in.Message.ArgumentsStrict = strict
			buf := make([]byte, 0, 1024)
			loop(b, func() {
				var ok bool
				if buf, ok = p.keys.key(buf[:0], in); !ok {
					b.Fatal("not memoable")
				}
			})
		})
	}
}

// BenchmarkDecideArgumentPolicy is a policy that reads one argument,
// evaluated every time (memo off), for a call whose arguments also carry
// a ~2 KiB document the policy never reads.
func BenchmarkDecideArgumentPolicy(b *testing.B) {
	dir := policyDir(b, `package mcpgate

decision := {"allow": input.message.arguments.amount < 100, "reasons": []} if input.message.method == "tools/call"
`)
	e, err := New(context.Background(), Options{Dirs: []string{dir}, NoDecisionMemo: true})
	if err != nil {
		b.Fatal(err)
	}
	in := callInput("search_contacts", alice)
	var doc []byte
	for i := range 40 {
		doc = fmt.Appendf(doc, `,"line%d":{"text":"lorem ipsum dolor sit amet","n":%d}`, i, i)
	}
	in.Message.Arguments = jsontext.Value(`{"amount":42,"document":{"title":"x"` + string(doc) + `}}`)
	benchDecide(b, context.Background(), e, in, allowed)
}
