package policy

import (
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A policy's decision depends on the parts of input its rules can read.
// readsOf finds them by walking the compiled rules that data.mcpgate.decision
// can reach (rule bodies and heads, else branches, functions, comprehensions,
// with modifiers) and collecting the references to input: a reference
// input.a.b reads the value at a.b; a reference whose key is not a constant
// string (input.a[x], input.a[_], some … in input.a) reads all of the
// document before that key; input used as a whole value, a reference with a
// variable first key, or a `with input…` modifier reads everything. The memo
// key (memo.go) is then built from those parts only.

// readNode is one path of input the policy reads: all of its value
// (whole), only its JSON kind (a type check: is_object, is_string, …,
// type_name), and/or the values at some of its members (children).
type readNode struct {
	whole    bool
	kind     bool
	children map[string]*readNode
}

// add records a read of the value at path (its kind only when kindOnly).
func (n *readNode) add(path []string, kindOnly bool) {
	for _, k := range path {
		if n.whole {
			return
		}
		c := n.children[k]
		if c == nil {
			c = &readNode{}
			if n.children == nil {
				n.children = map[string]*readNode{}
			}
			n.children[k] = c
		}
		n = c
	}
	if kindOnly {
		n.kind = true
		return
	}
	n.whole, n.children = true, nil
}

// String lists the paths read, sorted, one per line: "message.name",
// "message.arguments (kind)", "" for the whole input.
func (n *readNode) String() string {
	var lines []string
	var walk func(prefix string, n *readNode)
	walk = func(prefix string, n *readNode) {
		switch {
		case n.whole:
			lines = append(lines, prefix)
			return
		case n.kind:
			lines = append(lines, prefix+" (kind)")
		}
		for k, c := range n.children {
			p := k
			if prefix != "" {
				p = prefix + "." + k
			}
			walk(p, c)
		}
	}
	walk("", n)
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// kindBuiltins answer from the JSON kind of their operand alone.
var kindBuiltins = map[string]bool{
	"is_object": true, "is_string": true, "is_number": true, "is_boolean": true,
	"is_array": true, "is_set": true, "is_null": true, "type_name": true,
}

// readsOf analyses the compiled policy: the parts of input the rules
// data.mcpgate.decision can reach may read (whole = everything), and
// whether they call only builtins whose answer depends on their operands
// (see volatile); memo says whether a decision may be remembered at all.
func readsOf(c *ast.Compiler) (reads *readNode, memo bool) {
	a := &readAnalysis{c: c, root: &readNode{}, seen: map[*ast.Rule]bool{}, memo: true}
	a.reach(decisionRef)
	for len(a.queue) > 0 {
		r := a.queue[len(a.queue)-1]
		a.queue = a.queue[:len(a.queue)-1]
		a.rule(r)
	}
	return a.root, a.memo
}

type readAnalysis struct {
	c     *ast.Compiler
	root  *readNode
	seen  map[*ast.Rule]bool
	queue []*ast.Rule
	memo  bool
	// aliases of the rule being walked: a variable assigned exactly once
	// from a reference to input (the compiler moves every call operand
	// into such a variable), by name → the path it holds.
	aliases map[ast.Var][]string
}

// reach queues the rules a reference into data can refer to: those at or
// under its constant prefix, and those whose documents hold it.
func (a *readAnalysis) reach(ref ast.Ref) {
	n := 1
	for n < len(ref) && ref[n].IsGround() {
		n++
	}
	for _, r := range a.c.GetRules(ref[:n]) {
		if !a.seen[r] {
			a.seen[r] = true
			a.queue = append(a.queue, r)
		}
	}
}

// everything makes the whole input part of the key.
func (a *readAnalysis) everything() { a.root.whole, a.root.children = true, nil }

// rule walks one rule and its else branches.
func (a *readAnalysis) rule(r *ast.Rule) {
	a.aliases = map[ast.Var][]string{}
	defs := map[ast.Var][][]string{}
	ast.WalkExprs(r, func(e *ast.Expr) bool {
		if v, path, ok := aliasDef(e); ok {
			defs[v] = append(defs[v], path)
			// the assignment itself fails when the path is undefined
			if len(path) > 0 {
				a.root.add(path, true)
			}
		}
		return false
	})
	for v, paths := range defs {
		if len(paths) == 1 {
			a.aliases[v] = paths[0]
			continue
		}
		for _, p := range paths { // unified twice: compares whole values
			a.root.add(p, false)
		}
	}
	for _, t := range r.Head.Reference {
		a.term(t)
	}
	vis := ast.NewGenericVisitor(a.visit)
	vis.Walk(r)
}

// aliasDef recognises `v = input.a.b` (either order), v a variable.
func aliasDef(e *ast.Expr) (ast.Var, []string, bool) {
	if !e.IsEquality() || e.Negated || len(e.With) > 0 {
		return "", nil, false
	}
	l, r := e.Operand(0), e.Operand(1)
	if _, ok := l.Value.(ast.Var); !ok {
		l, r = r, l
	}
	v, ok := l.Value.(ast.Var)
	if !ok || v.Equal(ast.InputRootDocument.Value) {
		return "", nil, false
	}
	path, ok := inputPath(r)
	return v, path, ok
}

// inputPath returns the path of a reference to input made only of
// constant strings (input itself: an empty path).
func inputPath(t *ast.Term) ([]string, bool) {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			return []string{}, true
		}
	case ast.Ref:
		if !v.HasPrefix(ast.InputRootRef) {
			return nil, false
		}
		path := make([]string, 0, len(v)-1)
		for _, k := range v[1:] {
			s, ok := k.Value.(ast.String)
			if !ok {
				return nil, false
			}
			path = append(path, string(s))
		}
		return path, true
	}
	return nil, false
}

// source returns the input path a term holds: a reference to input or an
// alias of one.
func (a *readAnalysis) source(t *ast.Term) ([]string, bool) {
	if v, ok := t.Value.(ast.Var); ok {
		p, ok := a.aliases[v]
		return p, ok
	}
	return inputPath(t)
}

func (a *readAnalysis) visit(x any) bool {
	switch x := x.(type) {
	case *ast.Expr:
		if _, _, ok := aliasDef(x); ok {
			return true // the alias's uses are the reads
		}
		for _, w := range x.With {
			if ref, ok := w.Target.Value.(ast.Ref); ok && ref.HasPrefix(ast.InputRootRef) {
				a.everything()
			}
		}
		if x.IsCall() {
			terms := x.Terms.([]*ast.Term)
			a.call(terms[0].Value.(ast.Ref), terms[1:])
			for _, w := range x.With {
				a.term(w.Target)
				a.term(w.Value)
			}
			return true
		}
	case *ast.Term:
		a.term(x)
		return true
	}
	return false
}

// term records what a term reads, walking into its parts.
func (a *readAnalysis) term(t *ast.Term) {
	switch v := t.Value.(type) {
	case ast.Var:
		if v.Equal(ast.InputRootDocument.Value) {
			a.everything()
		} else if p, ok := a.aliases[v]; ok {
			a.root.add(p, false) // the alias used as a value
		}
		return
	case ast.Ref:
		a.ref(v)
		return
	case ast.Call:
		a.call(v[0].Value.(ast.Ref), v[1:])
		return
	}
	ast.NewGenericVisitor(a.visit).Walk(t.Value)
}

// ref records a reference: into input (or an alias of it), into data (the
// rules it reaches), or a builtin named as a value (in a with modifier).
func (a *readAnalysis) ref(r ast.Ref) {
	head := r[0]
	var base []string
	switch {
	case head.Equal(ast.InputRootDocument):
		base = []string{}
	case head.Equal(ast.DefaultRootDocument):
		a.reach(r)
	default:
		if v, ok := head.Value.(ast.Var); !ok {
			a.term(head) // a call or a composite value, indexed
		} else if p, isAlias := a.aliases[v]; isAlias {
			base = p
		} else {
			a.builtin(r, false) // e.g. `with f as time.now_ns`
		}
	}
	if base != nil {
		path := slices.Clone(base)
		i := 1
		for ; i < len(r); i++ {
			s, ok := r[i].Value.(ast.String)
			if !ok {
				break
			}
			path = append(path, string(s))
		}
		if len(path) == 0 && len(r) > 1 || len(r) == 1 && len(base) == 0 {
			a.everything() // input[x], or input itself
		} else {
			a.root.add(path, false)
		}
	}
	for _, t := range r[1:] {
		a.term(t)
	}
}

// call records a call: a builtin's determinism, the paths its operands
// read, and the function of the policy it reaches.
func (a *readAnalysis) call(op ast.Ref, args []*ast.Term) {
	if op.HasPrefix(ast.DefaultRootRef) {
		a.reach(op)
	} else {
		a.builtin(op, true)
	}
	name := op.String()
	switch {
	case kindBuiltins[name] && len(args) > 0:
		if p, ok := a.source(args[0]); ok {
			if len(p) == 0 {
				a.everything()
			} else {
				a.root.add(p, true)
			}
			args = args[1:]
		}
	case name == "object.get" && len(args) >= 3:
		if p, ok := a.source(args[0]); ok {
			if key, ok := constantKey(args[1]); ok {
				a.root.add(append(slices.Clone(p), key...), false)
				// the operand's own kind decides between the value, the
				// default and an error
				if len(p) > 0 {
					a.root.add(p, true)
				}
				args = args[1:]
			}
		}
	}
	for _, t := range args {
		a.term(t)
	}
}

// constantKey returns object.get's key as a path: a string, or a
// non-empty array of strings.
func constantKey(t *ast.Term) ([]string, bool) {
	switch v := t.Value.(type) {
	case ast.String:
		return []string{string(v)}, true
	case *ast.Array:
		if v.Len() == 0 {
			return nil, false
		}
		path := make([]string, 0, v.Len())
		for i := range v.Len() {
			s, ok := v.Elem(i).Value.(ast.String)
			if !ok {
				return nil, false
			}
			path = append(path, string(s))
		}
		return path, true
	}
	return nil, false
}

// builtin turns the memo off when op names a builtin whose answer may
// change between two evaluations of the same input (a call, or a value in
// a with modifier), or is an operator OPA does not know (a custom builtin
// could do anything). A reference into a local variable is no builtin.
func (a *readAnalysis) builtin(op ast.Ref, call bool) {
	name := op.String()
	b, known := ast.BuiltinMap[name]
	switch {
	case !known && call:
		a.memo = false
	case known && (b.Nondeterministic || volatile(name)):
		a.memo = false
	}
}
