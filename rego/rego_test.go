package rego_test

import (
	"context"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// policySets are the directories of Default that form one policy each: the
// default policy at the root and every example under examples/.
func policySets(t *testing.T) []string {
	t.Helper()
	sets := []string{"."}
	entries, err := fs.ReadDir(mcpgaterego.Default, mcpgaterego.ExamplesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			sets = append(sets, path.Join(mcpgaterego.ExamplesDir, e.Name()))
		}
	}
	return sets
}

// load parses one policy set of Default, with or without its tests.
func load(t *testing.T, dir string, tests bool) map[string]*ast.Module {
	t.Helper()
	res, err := loader.NewFileLoader().
		WithFS(mcpgaterego.Default).
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true).
		Filtered([]string{dir}, func(p string, info fs.FileInfo, depth int) bool {
			if info.IsDir() {
				return dir == "." && depth > 0 && info.Name() == mcpgaterego.ExamplesDir
			}
			return !tests && strings.HasSuffix(p, "_test.rego")
		})
	if err != nil {
		t.Fatalf("load %s: %v", dir, err)
	}
	mods := map[string]*ast.Module{}
	for name, f := range res.Modules {
		mods[name] = f.Parsed
	}
	if len(mods) == 0 {
		t.Fatalf("no modules in %s", dir)
	}
	return mods
}

// TestRego runs every _test.rego file with OPA's tester, one policy set at a
// time (the sets all define data.mcpgate.decision and cannot share a
// compiler).
func TestRego(t *testing.T) {
	for _, dir := range policySets(t) {
		t.Run(dir, func(t *testing.T) {
			ctx := context.Background()
			store := inmem.New()
			txn := storage.NewTransactionOrDie(ctx, store)
			defer store.Abort(ctx, txn)

			ch, err := tester.NewRunner().
				SetDefaultRegoVersion(ast.RegoV1).
				SetStore(store).
				SetModules(load(t, dir, true)).
				RaiseBuiltinErrors(true).
				RunTests(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for r := range ch {
				n++
				if r.Fail || r.Error != nil {
					t.Errorf("%s.%s (%s): fail=%v err=%v", r.Package, r.Name, r.Location, r.Fail, r.Error)
					if len(r.Output) > 0 {
						t.Logf("output: %s", r.Output)
					}
				}
			}
			if n == 0 {
				t.Fatal("no Rego tests found")
			}
			t.Logf("%d Rego tests", n)
		})
	}
}

// TestStrict compiles every policy (without its tests) in OPA's strict mode:
// no unused variables, imports or deprecated built-ins.
func TestStrict(t *testing.T) {
	for _, dir := range policySets(t) {
		t.Run(dir, func(t *testing.T) {
			c := ast.NewCompiler().WithStrict(true).SetErrorLimit(0)
			if c.Compile(load(t, dir, false)); c.Failed() {
				t.Fatal(c.Errors)
			}
			rules := c.GetRulesExact(ast.MustParseRef("data.mcpgate.decision"))
			if len(rules) == 0 {
				t.Fatal("no rule defines data.mcpgate.decision")
			}
		})
	}
}

// TestOPATestCommand loads the policies from disk the way the OPA CLI
// does for the documented commands
//
//	opa test rego/ --ignore examples
//	opa test rego/examples/transparent
//
// and runs their tests.
func TestOPATestCommand(t *testing.T) {
	for _, c := range []struct {
		path   string
		filter loader.Filter
	}{
		{".", loader.GlobExcludeName(mcpgaterego.ExamplesDir, 1)},
		{"examples/transparent", nil},
	} {
		t.Run(c.path, func(t *testing.T) {
			ctx := context.Background()
			mods, store, err := tester.LoadWithRegoVersion([]string{c.path}, c.filter, ast.RegoV1)
			if err != nil {
				t.Fatal(err)
			}
			txn := storage.NewTransactionOrDie(ctx, store)
			defer store.Abort(ctx, txn)
			ch, err := tester.NewRunner().SetStore(store).SetModules(mods).RunTests(ctx, txn)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for r := range ch {
				n++
				if r.Fail || r.Error != nil {
					t.Errorf("%s.%s: fail=%v err=%v", r.Package, r.Name, r.Fail, r.Error)
				}
			}
			if n == 0 {
				t.Fatal("no tests")
			}
		})
	}
}
