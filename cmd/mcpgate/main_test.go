package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), err
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	brokenPolicy := filepath.Join(dir, "policy")
	if err := os.Mkdir(brokenPolicy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(brokenPolicy, "p.rego"), []byte("package mcpgate\n\ndecision := {\"allow\": true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", "upstreams:\n  - name: crm\n    url: http://127.0.0.1:3000/mcp\n")
	twoProblems := write("bad.yaml", "upstreams:\n  - name: Bad Name\n    url: ftp://x\n    tols: {}\n")
	badPolicy := write("badpolicy.yaml", "upstreams:\n  - name: crm\n    url: http://127.0.0.1:3000/mcp\npolicy:\n  dirs: [policy]\n")

	t.Run("valid", func(t *testing.T) {
		out, _, err := runCmd("validate", "--config", good)
		if err != nil || !strings.Contains(out, "ok") {
			t.Fatalf("err %v, out %q", err, out)
		}
	})
	t.Run("every config problem listed", func(t *testing.T) {
		_, _, err := runCmd("validate", "--config", twoProblems)
		if err == nil {
			t.Fatal("invalid config accepted")
		}
		for _, want := range []string{"upstreams[0].name", "upstreams[0].url", "upstreams[0].tols"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error lacks %s:\n%v", want, err)
			}
		}
	})
	t.Run("policy that does not compile", func(t *testing.T) {
		_, _, err := runCmd("validate", "--config", badPolicy)
		if err == nil || !strings.Contains(err.Error(), "p.rego") {
			t.Fatalf("want a compile error naming p.rego, got %v", err)
		}
	})
	t.Run("missing flag", func(t *testing.T) {
		_, _, err := runCmd("validate")
		if !errors.Is(err, errUsage) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"serve", "--bogus"}, {"serve", "extra-arg", "--upstream", "http://x"}} {
		if _, _, err := runCmd(args...); !errors.Is(err, errUsage) {
			t.Errorf("%v: got %v, want usage error", args, err)
		}
	}
	if _, _, err := runCmd("serve"); err == nil || !strings.Contains(err.Error(), "--config, --upstream or --upstream-command") {
		t.Errorf("serve without source: %v", err)
	}
	out, _, err := runCmd("version")
	if err != nil || !strings.HasPrefix(out, "mcpgate ") {
		t.Errorf("version: %q %v", out, err)
	}
}
