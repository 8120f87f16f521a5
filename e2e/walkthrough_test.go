package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// walkthroughPage is the getting-started page TestDemoWalkthrough runs.
const walkthroughPage = "../docs/start/demo.md"

// walkStep is one ```sh block of the page and the ```text block that
// follows it (the output it must show).
type walkStep struct {
	line int      // the block's first line in the page
	sh   string   // the commands
	want []string // the expected output's lines
}

// walkSteps reads the ```sh blocks of a markdown page in order, each
// with the ```text block right after it (before the next ```sh block),
// if any.
func walkSteps(md string) []walkStep {
	var steps []walkStep
	kind, body := "", []string{}
	for i, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "```") {
			if kind != "" {
				body = append(body, line)
			}
			continue
		}
		if kind == "" {
			kind, body = strings.TrimSpace(strings.TrimPrefix(line, "```")), nil
			if kind == "sh" {
				steps = append(steps, walkStep{line: i + 2})
			}
			continue
		}
		switch {
		case kind == "sh":
			steps[len(steps)-1].sh = strings.Join(body, "\n")
		case kind == "text" && len(steps) > 0 && steps[len(steps)-1].want == nil:
			for _, w := range body {
				if strings.TrimSpace(w) != "" {
					steps[len(steps)-1].want = append(steps[len(steps)-1].want, w)
				}
			}
		}
		kind = ""
	}
	return steps
}

// expectIn checks that out shows the want lines in order: each line's
// pieces between "…" appear in order, after the previous line's.
func expectIn(out string, want []string) error {
	at := 0
	for _, w := range want {
		for _, piece := range strings.Split(w, "…") {
			piece = strings.TrimSpace(piece)
			if piece == "" {
				continue
			}
			i := strings.Index(out[at:], piece)
			if i < 0 {
				return fmt.Errorf("expected %q (of line %q) after offset %d", piece, w, at)
			}
			at += i + len(piece)
		}
	}
	return nil
}

// TestDemoWalkthrough runs docs/start/demo.md as written: its first
// command starts `mcpgate demo` (here the built binary, on free ports, in
// a scratch directory); every later ```sh block runs in order in one bash
// (set -e) with the variables the page sets, and each block's output must
// show the ```text block after it. `go run ./cmd/mcpgate` on the page runs
// the built binary. It needs bash, curl and jq; outside CI it skips
// without them.
func TestDemoWalkthrough(t *testing.T) {
	for _, prog := range []string{"bash", "curl", "jq", "sed", "grep"} {
		if _, err := exec.LookPath(prog); err != nil {
			// Where the browser test must run (CI, .ci/run), this one must too.
			if os.Getenv("CI") != "" || os.Getenv(envRequireBrowser) == "1" {
				t.Fatalf("the walkthrough needs %s: %v", prog, err)
			}
			t.Skipf("the walkthrough needs %s: %v", prog, err)
		}
	}
	src, err := os.ReadFile(walkthroughPage)
	if err != nil {
		t.Fatal(err)
	}
	steps := walkSteps(string(src))
	if len(steps) < 10 {
		t.Fatalf("%s: only %d ```sh blocks", walkthroughPage, len(steps))
	}

	// The first block starts the demo; the walkthrough gives it its
	// flags, the test adds free ports.
	start := strings.Fields(strings.TrimSpace(steps[0].sh))
	if len(start) < 4 || strings.Join(start[:4], " ") != "go run ./cmd/mcpgate demo" {
		t.Fatalf("%s:%d: the first command is %q, not `go run ./cmd/mcpgate demo …`", walkthroughPage, steps[0].line, steps[0].sh)
	}
	dir := t.TempDir()
	d := startDemoIn(t, dir, start[4:]...)
	// The page shows the default addresses; the demo here has its own.
	proxyHost, adminHost := strings.TrimPrefix(d.Endpoint, "http://"), strings.TrimPrefix(d.Admin, "http://")
	proxyHost = strings.TrimSuffix(proxyHost, "/mcp")
	var want []string
	for _, w := range steps[0].want {
		want = append(want, strings.NewReplacer("127.0.0.1:8080", proxyHost, "127.0.0.1:9090", adminHost).Replace(w))
	}
	if err := expectIn(strings.Join(d.Banner, "\n"), want); err != nil {
		t.Errorf("%s:%d: the demo's output: %v\n%s", walkthroughPage, steps[0].line, err, strings.Join(d.Banner, "\n"))
	}

	// One script: each block between markers carrying its number and,
	// after it, its exit status.
	var script strings.Builder
	script.WriteString("set -e\n")
	script.WriteString(`go() { if [ "$1" = run ] && [ "$2" = ./cmd/mcpgate ]; then shift 2; "$MCPGATE_BIN" "$@"; else command go "$@"; fi; }` + "\n")
	for i, s := range steps[1:] {
		fmt.Fprintf(&script, "printf '\\n@@step %d@@\\n'\n%s\n", i+1, s.sh)
	}
	script.WriteString("printf '\\n@@end@@\\n'\n")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "MCPGATE_BIN="+bin)
	started := time.Now()
	outb, err := cmd.CombinedOutput()
	out := string(outb)
	t.Logf("the walkthrough ran in %v", time.Since(started).Round(time.Millisecond))

	parts := regexp.MustCompile(`\n@@(step \d+|end)@@\n`).Split(out, -1)
	marks := regexp.MustCompile(`\n@@(step \d+|end)@@\n`).FindAllStringSubmatch(out, -1)
	for i, m := range marks {
		if m[1] == "end" {
			break
		}
		n, _ := strconv.Atoi(strings.TrimPrefix(m[1], "step "))
		s := steps[n]
		got := parts[i+1]
		if err := expectIn(got, s.want); err != nil {
			t.Errorf("%s:%d: %v\ncommands:\n%s\noutput:\n%s", walkthroughPage, s.line, err, s.sh, got)
		}
	}
	if err != nil || len(marks) == 0 || marks[len(marks)-1][1] != "end" {
		last := "before the first block"
		if len(marks) > 0 {
			n, _ := strconv.Atoi(strings.TrimPrefix(marks[len(marks)-1][1], "step "))
			last = fmt.Sprintf("in the block at %s:%d", walkthroughPage, steps[n].line)
		}
		t.Fatalf("the walkthrough stopped %s: %v\noutput:\n%s", last, err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo.env")); err != nil {
		t.Errorf("the env file: %v", err)
	}
}

// cleanEnv is the test's environment without the admin variables the
// page's env file sets (a developer's own must not leak in).
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MCPGATE_ADMIN_") {
			env = append(env, kv)
		}
	}
	return env
}
