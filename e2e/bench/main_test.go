package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary play the floors: the bench starts its own
// executable with -floor-upstream or -extproc-floor.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "-floor-upstream" || os.Args[1] == "-extproc-floor") {
		if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchSmoke runs every mode of the bench briefly — both floors, the
// proxy and the ext_proc listener behind the Envoy driver, the memory
// floor and a short SSE stream — with profiles: every call must be
// answered (the bench fails a run with a failed call) and every figure
// printed. The figures themselves are not asserted.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mcpgate and libfloor")
	}
	// Building mcpgate and libfloor on a cold cache, while other packages'
	// tests build and run, can take minutes: the test's own deadline
	// (go test -timeout) bounds the run, less a margin to report it.
	ctx := t.Context()
	if deadline, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-15*time.Second))
		defer cancel()
	}
	var out bytes.Buffer
	err := run(ctx, []string{"-c", "2", "-n", "200", "-warmup", "20", "-sse-bytes", "2000000", "-profile", t.TempDir()}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"proxy-distinct", "extproc-distinct", "extproc-floor", "memory floor", "floor-c2.cpu.pprof", "extproc-floor-c2.cpu.pprof", "proxy-c2.cpu.pprof"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}

	// Without profiles the calls are split into rounds: a mode's row
	// counts the calls of all its rounds (101 in 3 rounds: 34, 34, 33).
	// Two whole runs end in a summary of the ratios over both.
	out.Reset()
	err = run(ctx, []string{"-c", "2", "-n", "101", "-rounds", "3", "-runs", "2", "-warmup", "10", "-sse-bytes", "0", "-libfloor=false", "-modes", "floor,proxy-distinct,extproc"}, &out)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"direct", "floor", "proxy-distinct", "extproc"} {
		if n := len(regexp.MustCompile(`(?m)^ *`+mode+` +2 +101 +0 `).FindAllString(out.String(), -1)); n != 2 {
			t.Errorf("%d rows of %s with 101 calls, 0 failed; want one a run", n, mode)
		}
	}
	if !regexp.MustCompile(`(?m)^summary of 2 runs.*\n.*\n *proxy-distinct +2 +floor +[0-9.]+× \([0-9.]+×–[0-9.]+×\)`).MatchString(out.String()) {
		t.Error("no summary of the two runs with proxy-distinct's CPU ratio")
	}
	if err := run(ctx, []string{"-runs", "2", "-profile", t.TempDir()}, &out); err == nil || !strings.Contains(err.Error(), "-runs") {
		t.Errorf("-runs 2 with -profile: %v", err)
	}
	if err := run(ctx, []string{"-n", "10", "-rounds", "11"}, &out); err == nil || !strings.Contains(err.Error(), "-rounds") {
		t.Errorf("-rounds over -n: %v", err)
	}
}
