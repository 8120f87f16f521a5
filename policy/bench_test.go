package policy

import (
	"context"
	"testing"
)

// BenchmarkDecideToolsCall is the hot path: a tools/call with a few
// arguments through the default policy, from the typed Input (argument
// parsing included) to the typed Decision.
func BenchmarkDecideToolsCall(b *testing.B) {
	e := newDefaultEngine(b)
	in := callInput("search_contacts", alice)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		d, err := e.Decide(ctx, in)
		if err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkDecideToolsCallCancelable adds a cancelable request context, as
// a server handler has.
func BenchmarkDecideToolsCallCancelable(b *testing.B) {
	e := newDefaultEngine(b)
	in := callInput("search_contacts", alice)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := e.Decide(ctx, in); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

func BenchmarkDecideToolsList(b *testing.B) {
	e := newDefaultEngine(b)
	in := listInput("tools/list", alice, allTools...)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := e.Decide(ctx, in); err != nil || !d.Allow {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkInputValue is the input conversion alone.
func BenchmarkInputValue(b *testing.B) {
	in := callInput("search_contacts", alice)
	c := newTermCaches(testDeclarations)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := inputValue(in, c); err != nil {
			b.Fatal(err)
		}
	}
}
