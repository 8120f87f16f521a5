package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/util"

	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// Query is the policy entry point mcpgate evaluates.
const Query = "data.mcpgate.decision"

var decisionRef = ast.MustParseRef(Query)

// compileMu serialises compileVersion.
var compileMu sync.Mutex

// policyVersion is one loaded policy: the query prepared once, evaluated by
// every Decide until the next successful reload.
type policyVersion struct {
	query   rego.PreparedEvalQuery
	modules int  // number of Rego modules
	defined bool // some rule defines data.mcpgate.decision
	// bundle and revision name the OPA bundle this version came from
	// ("" for dirs); decision logs carry them.
	bundle, revision string
	// memo remembers this version's recent decisions (memo.go); nil when
	// the policy calls a builtin whose answer may change between calls.
	memo *decisionMemo
	// keys builds memo keys from the parts of input the policy reads
	// (reads.go); reads lists them.
	keys  *keyPlan
	reads *readNode
}

// Check compiles the policies in dirs (the embedded default policy when
// dirs is empty) without keeping them, and returns every problem found,
// each with file and line: all parse errors of all files or, when every
// file parses, all errors of the first compile stage that fails (OPA's
// compiler stops there, so fixing them may reveal later-stage ones). The
// error lists one problem per line and unwraps (errors.Join) to them,
// *ast.Error where OPA gives one. It is the check `mcpgate validate` runs.
func Check(ctx context.Context, dirs []string) error {
	_, err := load(ctx, dirs, nil)
	return err
}

// load reads, compiles and prepares a policy. declarations become
// data.mcpgate.upstreams[u].tools[t].
func load(ctx context.Context, dirs []string, declarations map[string]map[string]ToolDeclaration) (*policyVersion, error) {
	modules, docs, err := loadFiles(dirs)
	if err != nil {
		return nil, err
	}
	return compileVersion(ctx, modules, docs, declarations)
}

// compileVersion compiles and prepares parsed modules and their data
// (dirs or a bundle); declarations become data.mcpgate.upstreams[u].tools[t].
func compileVersion(ctx context.Context, modules map[string]*ast.Module, docs map[string]any, declarations map[string]map[string]ToolDeclaration) (*policyVersion, error) {
	// OPA's type checker merges rule types into values that two compilers
	// running at once share (the race detector reports writes in
	// ast.mergeTypes): compiles take turns. They are rare (start, reload).
	compileMu.Lock()
	defer compileMu.Unlock()
	if err := mergeDeclarations(docs, declarations); err != nil {
		return nil, err
	}

	store := inmem.NewFromObjectWithOpts(docs, inmem.OptReturnASTValuesOnRead(true))
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)

	compiler := ast.NewCompiler().
		WithDefaultRegoVersion(ast.RegoV1).
		SetErrorLimit(0).
		// print() output could carry arguments into logs; policies are
		// debugged with `opa test` or go test, where print works.
		WithEnablePrintStatements(false).
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn))
	if compiler.Compile(modules); compiler.Failed() {
		return nil, problems("compile policy", errorList(compiler.Errors))
	}

	pq, err := rego.New(
		rego.Query(Query),
		rego.Compiler(compiler),
		rego.Store(store),
		rego.Transaction(txn),
	).PrepareForEval(ctx)
	if err != nil {
		return nil, problems("prepare policy query", []error{err})
	}
	pv := &policyVersion{
		query:   pq,
		modules: len(modules),
		defined: len(compiler.GetRulesExact(decisionRef)) > 0,
	}
	if reads, memo := readsOf(compiler); memo {
		pv.memo, pv.keys, pv.reads = newDecisionMemo(), newKeyPlan(reads), reads
	}
	return pv, nil
}

// loadFiles parses the .rego files of dirs and merges their data files
// (.json, .yaml, .yml; placed under data by their directory, as `opa run`
// does). Files named *_test.rego and names starting with "." are left out
// (a Kubernetes ConfigMap volume keeps its real files in ..data/). With no
// dirs it loads the embedded default policy, without examples/.
func loadFiles(dirs []string) (map[string]*ast.Module, map[string]any, error) {
	fl := loader.NewFileLoader().
		WithRegoVersion(ast.RegoV1).
		WithProcessAnnotation(true)
	paths := dirs
	embedded := len(dirs) == 0
	if embedded {
		fl = fl.WithFS(mcpgaterego.Default)
		paths = []string{"."}
	}
	res, err := fl.Filtered(paths, func(path string, info fs.FileInfo, depth int) bool {
		name := info.Name()
		if depth > 0 && strings.HasPrefix(name, ".") {
			return true
		}
		if info.IsDir() {
			return embedded && depth > 0 && name == mcpgaterego.ExamplesDir
		}
		if embedded && name == maskFile {
			return true // the decision-log mask policy (decisionlog.go)
		}
		return strings.HasSuffix(name, "_test.rego")
	})
	if err != nil {
		var lerrs loader.Errors
		if errors.As(err, &lerrs) {
			return nil, nil, problems("load policy", errorList(lerrs))
		}
		return nil, nil, fmt.Errorf("load policy: %w", err)
	}
	if len(res.Modules) == 0 {
		return nil, nil, fmt.Errorf("load policy: no .rego files in %s", strings.Join(dirs, ", "))
	}
	modules := make(map[string]*ast.Module, len(res.Modules))
	for name, f := range res.Modules {
		modules[name] = f.Parsed
	}
	return modules, res.Documents, nil
}

// errorList flattens OPA's error lists (ast.Errors nested in loader.Errors)
// so that every problem is one error.
func errorList[E error](errs []E) []error {
	var out []error
	for _, err := range errs {
		var aerrs ast.Errors
		if errors.As(error(err), &aerrs) {
			for _, a := range aerrs {
				out = append(out, a)
			}
			continue
		}
		out = append(out, err)
	}
	return out
}

// problems joins errs under one heading; errors.Join keeps each reachable
// with errors.As and prints one per line.
func problems(what string, errs []error) error {
	noun := "problems"
	if len(errs) == 1 {
		noun = "problem"
	}
	return fmt.Errorf("%s: %d %s:\n%w", what, len(errs), noun, errors.Join(errs...))
}

// mergeDeclarations adds the per-tool declarations to the data document at
// mcpgate.upstreams[u].tools[t]. A tool also declared in a data file is an
// error, as is a non-object on the way.
func mergeDeclarations(docs map[string]any, declarations map[string]map[string]ToolDeclaration) error {
	var errs []error
	for _, u := range slices.Sorted(maps.Keys(declarations)) {
		tools, err := objectAt(docs, "mcpgate", "upstreams", u, "tools")
		if err != nil {
			return err
		}
		for _, t := range slices.Sorted(maps.Keys(declarations[u])) {
			if _, ok := tools[t]; ok {
				errs = append(errs, fmt.Errorf("data.mcpgate.upstreams[%q].tools[%q] is declared both in a policy data file and in the configuration", u, t))
				continue
			}
			v, err := jsonData(declarations[u][t])
			if err != nil {
				return err
			}
			tools[t] = v
		}
	}
	if len(errs) > 0 {
		return problems("load declarations", errs)
	}
	return nil
}

// objectAt returns the object at path in doc, creating missing objects.
func objectAt(doc map[string]any, path ...string) (map[string]any, error) {
	for i, key := range path {
		v, ok := doc[key]
		if !ok {
			m := map[string]any{}
			doc[key] = m
			doc = m
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("load declarations: data.%s is not an object", strings.Join(path[:i+1], "."))
		}
		doc = m
	}
	return doc, nil
}

// jsonData converts v to the JSON data model OPA stores (json.Number for
// numbers).
func jsonData(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	return out, util.UnmarshalJSON(b, &out)
}
