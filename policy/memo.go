package policy

import (
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A decision depends only on the input and on the policy version (its
// modules and data, fixed once compiled) — unless the policy calls a
// builtin whose answer changes from call to call (time.now_ns, http.send,
// rand.intn, io.jwt.decode_verify, …). For a policy that calls none of
// those, decisionMemo keeps the decisions of recent inputs, so a repeat of
// an input — the same caller making the same call, listing tools again,
// pinging — is answered without evaluating the Rego again. Evaluating the
// default policy is most of a tools/call's own CPU: BenchmarkDecideToolsCall
// (310 allocations) costs about seven times BenchmarkDecideToolsCallMemo
// (90 allocations, most of them building the input).
//
// A hit needs an input equal, term by term, to the remembered one
// (ast.Compare, not only its hash), so two inputs that differ in anything
// the policy can read — a right, an argument, the tenant, the catalog
// state — never share a decision. Each Decide still gets a fresh ID, its
// own copy of the decision, the out-of-band rule and its decision-log
// record. Every policy version has its own memo: a reload never serves a
// decision of the previous policy.

// memoEntries bounds a memo; when full, one entry is forgotten for each
// new one.
const memoEntries = 1024

// memoMaxArguments: inputs whose arguments are larger than this (bytes of
// JSON) are not remembered, which bounds the memo's memory (~ a few MiB).
const memoMaxArguments = 2048

// memoMaxItems: a list-phase input with more items is not remembered.
const memoMaxItems = 256

type decisionMemo struct {
	mu sync.RWMutex
	m  map[int]memoEntry // by the input's hash
}

type memoEntry struct {
	input ast.Value
	d     Decision // without ID, before the out-of-band rule
}

func newDecisionMemo() *decisionMemo { return &decisionMemo{m: make(map[int]memoEntry)} }

// memoable reports whether in may be remembered (its size is bounded).
func memoable(in *Input) bool {
	return len(in.Message.Arguments) <= memoMaxArguments && len(in.Items) <= memoMaxItems && len(in.Finders) <= memoMaxItems
}

// get copies the decision remembered for input into d (keeping d.ID).
func (m *decisionMemo) get(input ast.Value, hash int, d *Decision) bool {
	m.mu.RLock()
	e, ok := m.m[hash]
	m.mu.RUnlock()
	if !ok || ast.Compare(e.input, input) != 0 {
		return false
	}
	id := d.ID
	*d = e.d.clone()
	d.ID = id
	return true
}

// put remembers d for input.
func (m *decisionMemo) put(input ast.Value, hash int, d *Decision) {
	e := memoEntry{input: input, d: d.clone()}
	e.d.ID = ""
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[hash]; !ok && len(m.m) >= memoEntries {
		for k := range m.m { // an arbitrary entry: Go's map order is random
			delete(m.m, k)
			break
		}
	}
	m.m[hash] = e
}

// clone is a deep copy of d: callers may change their decision's slices.
func (d Decision) clone() Decision {
	c := d
	if d.Reasons != nil {
		c.Reasons = make([]Reason, len(d.Reasons))
		for i, r := range d.Reasons {
			r.Rights = slices.Clone(r.Rights)
			c.Reasons[i] = r
		}
	}
	c.Visible = slices.Clone(d.Visible)
	c.Buckets = slices.Clone(d.Buckets)
	if d.Result != nil {
		c.Result = &ResultPaths{
			UntrustedText: slices.Clone(d.Result.UntrustedText),
			Fields:        slices.Clone(d.Result.Fields),
			Drop:          slices.Clone(d.Result.Drop),
		}
	}
	return c
}

// volatileBuiltins are builtins whose answers may change between two
// evaluations of the same input but that OPA does not mark
// Nondeterministic: certificate checks read the clock, print and trace
// have effects. The memo is off for a policy calling any of them.
var volatileBuiltins = []string{"crypto.x509.parse_and_verify", "print", "trace", "internal.print"}

// deterministic reports whether the compiled modules call only builtins
// whose answer depends on their operands alone: none marked
// Nondeterministic by OPA, none in volatileBuiltins, and no function
// unknown to OPA's builtin table (a custom builtin could do anything).
// Calls of the policy's own functions (data.…) are fine; their bodies are
// checked with the rest.
func deterministic(c *ast.Compiler) bool {
	ok := true
	check := func(op ast.Ref) {
		if len(op) > 0 && op[0].Equal(ast.DefaultRootDocument) {
			return // a function of the policy
		}
		name := op.String()
		b, known := ast.BuiltinMap[name]
		if !known || b.Nondeterministic {
			ok = false
			return
		}
		for _, v := range volatileBuiltins {
			if name == v || strings.HasPrefix(name, v) {
				ok = false
				return
			}
		}
	}
	for _, mod := range c.Modules {
		ast.WalkExprs(mod, func(e *ast.Expr) bool {
			if e.IsCall() {
				check(e.Operator())
			}
			return !ok
		})
		ast.WalkTerms(mod, func(t *ast.Term) bool {
			if call, isCall := t.Value.(ast.Call); isCall && len(call) > 0 {
				if r, isRef := call[0].Value.(ast.Ref); isRef {
					check(r)
				}
			}
			return !ok
		})
		if !ok {
			return false
		}
	}
	return ok
}
