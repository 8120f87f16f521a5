package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docPrograms are the programs the getting-started pages may run besides
// mcpgate; a new one needs a look (and a line here). docs/start/demo.md
// runs for real in e2e (TestDemoWalkthrough).
var docPrograms = map[string]bool{
	"curl": true, "sed": true, "export": true, "go": true, // go build, go run: checked below
	".": true, "echo": true, "sleep": true, // the shell's own
	"call": true, "tools": true, // shell functions docs/start/demo.md defines
}

// TestGettingStartedCommands checks every command of the ```sh blocks of
// docs/start/*.md: each runs a known program, each mcpgate invocation
// names a verb of the command table with flags that verb has, and each
// `mcpgate validate` is run for real against the repository's files.
func TestGettingStartedCommands(t *testing.T) {
	pages, err := filepath.Glob("../../docs/start/*.md")
	if err != nil || len(pages) < 3 {
		t.Fatalf("getting-started pages: %v %q", err, pages)
	}
	seen := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range shellCommands(string(src)) {
			words := shellWords(line)
			if len(words) == 0 || strings.HasSuffix(words[0], "()") || words[0] == "}" {
				continue // a shell function's definition and body
			}
			if regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
				continue // a variable assignment
			}
			args, isMcpgate := mcpgateArgs(words)
			if !isMcpgate {
				if !docPrograms[words[0]] && !strings.HasPrefix(words[0], "-") {
					t.Errorf("%s: %q runs %s, which no test knows", page, line, words[0])
				}
				continue
			}
			seen++
			checkInvocation(t, page, line, args)
		}
	}
	if seen < 5 {
		t.Errorf("only %d mcpgate commands found in docs/start", seen)
	}
}

// mcpgateArgs returns the arguments of an mcpgate invocation: `mcpgate
// …`, `./mcpgate …` or `go run ./cmd/mcpgate …`.
func mcpgateArgs(words []string) ([]string, bool) {
	switch {
	case words[0] == "mcpgate" || words[0] == "./mcpgate":
		return words[1:], true
	case len(words) > 2 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/mcpgate":
		return words[3:], true
	}
	return nil, false
}

func checkInvocation(t *testing.T, page, line string, args []string) {
	t.Helper()
	path := []string{}
	c := (*command)(nil)
	cs := commands
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && (c == nil || c.run == nil) {
		if c = find(cs, args[0]); c == nil {
			t.Errorf("%s: %q: no verb %q", page, line, strings.Join(append(path, args[0]), " "))
			return
		}
		path, args, cs = append(path, args[0]), args[1:], c.subs
	}
	if c == nil || c.run == nil {
		t.Errorf("%s: %q names no verb", page, line)
		return
	}
	flags := verbFlags(strings.Join(path, " "))
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !flags[name] {
			t.Errorf("%s: %q: mcpgate %s has no flag -%s", page, line, strings.Join(path, " "), name)
		}
	}
	if path[0] == "validate" {
		// Run it, with the paths relative to the repository's root.
		var rooted []string
		for _, a := range args {
			if _, err := os.Stat(filepath.Join("../..", a)); err == nil && !strings.HasPrefix(a, "-") {
				a = filepath.Join("../..", a)
			}
			rooted = append(rooted, a)
		}
		var out, errb bytes.Buffer
		if err := run(context.Background(), append([]string{"validate"}, rooted...), &out, &errb); err != nil {
			t.Errorf("%s: %q: %v\n%s", page, line, err, errb.String())
		}
	}
}

// verbFlags lists the flags of a verb, from the help its -h prints.
func verbFlags(path string) map[string]bool {
	var help bytes.Buffer
	_ = lookup(path).run(context.Background(), []string{"-h"}, io.Discard, &help)
	flags := map[string]bool{}
	_, list, _ := strings.Cut(help.String(), "\nFlags:\n")
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(list, -1) {
		flags[m[1]] = true
	}
	return flags
}

// shellCommands returns the commands of the ```sh blocks of a markdown
// page: continuation lines joined, comments and blank lines dropped.
func shellCommands(md string) []string {
	var cmds []string
	in, cur := false, ""
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in && strings.TrimSpace(strings.TrimPrefix(line, "```")) == "sh"
			continue
		}
		if !in {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line = strings.TrimSpace(cur + line)
		cur = ""
		if line != "" && !strings.HasPrefix(line, "#") {
			cmds = append(cmds, line)
		}
	}
	return cmds
}

// shellWords splits a command line into words the way a shell would for
// these pages: quotes group, a comment ends the line.
func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord:
			return append(words, splitDone(&cur, inWord)...)
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	return append(words, splitDone(&cur, inWord)...)
}

func splitDone(cur *strings.Builder, inWord bool) []string {
	if !inWord {
		return nil
	}
	return []string{cur.String()}
}
