package policy

import (
	"context"
	"os"
	"testing"
)

func BenchmarkHarness(b *testing.B) {
	dir := os.Getenv("POLICY_DIR")
	if dir == "" {
		b.Skip()
	}
	e, err := New(context.Background(), Options{Dirs: []string{dir}})
	if err != nil {
		b.Fatal(err)
	}
	in := callInput("search_contacts", alice)
	if d, err := e.Decide(context.Background(), in); err != nil || !d.Allow {
		b.Fatal(d, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		e.Decide(context.Background(), in)
	}
}
