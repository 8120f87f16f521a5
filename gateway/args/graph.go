package args

import (
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// graph is what Compile learns from the compiled schema graph.
type graph struct {
	ids        map[*jsonschema.Schema]int
	byLocation map[string]*jsonschema.Schema
	// evaluations is the largest number of subschemas the schema may
	// apply to one value of the arguments (see boundEvaluations).
	evaluations int
}

// node is one compiled schema with its edges: same applies other schemas
// to the same value ($ref, allOf, ...); the down edges apply them one
// level below, split by how they meet a single child value.
type node struct {
	s    *jsonschema.Schema
	same []int
	// For one member of an object: at most one of props applies, every
	// one of each may.
	props []int
	each  []int
	// For one item of an array: at most one of items applies, every one
	// of itemsEach may.
	items     []int
	itemsEach []int
}

// analyse indexes every schema reachable from root, refuses reference
// cycles that never descend into the value, and bounds the number of
// subschema evaluations per value (MaxEvaluations).
func analyse(root *jsonschema.Schema) (*graph, error) {
	g := &graph{ids: map[*jsonschema.Schema]int{}, byLocation: map[string]*jsonschema.Schema{}}
	var all []*jsonschema.Schema
	add := func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		if _, ok := g.ids[s]; ok {
			return
		}
		g.ids[s] = len(all)
		all = append(all, s)
		g.byLocation[s.Location] = s
	}
	add(root)
	for i := 0; i < len(all); i++ {
		if len(all) > 4*MaxSubschemas {
			return nil, compileErr(ErrSchemaTooComplex, "more than %d compiled subschemas", 4*MaxSubschemas)
		}
		sameLevel(all[i], add)
		downLevel(all[i], add, add)
	}

	// $dynamicRef and $recursiveRef resolve at validation time to any
	// schema with the matching anchor: count them all.
	dynamic := map[string][]int{}
	var recursive []int
	for i, s := range all {
		if s.DynamicAnchor != "" {
			dynamic[s.DynamicAnchor] = append(dynamic[s.DynamicAnchor], i)
		}
		if s.RecursiveAnchor {
			recursive = append(recursive, i)
		}
	}

	nodes := make([]node, len(all))
	for i, s := range all {
		n := &nodes[i]
		n.s = s
		sameLevel(s, func(x *jsonschema.Schema) {
			if x != nil {
				n.same = append(n.same, g.ids[x])
			}
		})
		if s.DynamicRef != nil && s.DynamicRef.Anchor != "" {
			n.same = append(n.same, dynamic[s.DynamicRef.Anchor]...)
		}
		if s.RecursiveRef != nil {
			n.same = append(n.same, recursive...)
		}
		id := func(dst *[]int) func(*jsonschema.Schema) {
			return func(x *jsonschema.Schema) {
				if x != nil {
					*dst = append(*dst, g.ids[x])
				}
			}
		}
		downObject(s, id(&n.props), id(&n.each))
		downArray(s, id(&n.items), id(&n.itemsEach))
		slices.Sort(n.same)
		n.same = slices.Compact(n.same)
	}

	var err error
	order, cyc := topoOrder(nodes)
	if cyc >= 0 {
		return nil, compileErr(ErrRefCycle, "at %s", displayRef(all[cyc].Location))
	}
	g.evaluations, err = boundEvaluations(nodes, order)
	if err != nil {
		return nil, err
	}
	return g, nil
}

// sameLevel calls f with every schema s applies to the value s itself is
// applied to. "not" and "if" count: they are evaluated too.
func sameLevel(s *jsonschema.Schema, f func(*jsonschema.Schema)) {
	f(s.Ref)
	f(s.RecursiveRef)
	if s.DynamicRef != nil {
		f(s.DynamicRef.Ref)
	}
	f(s.Not)
	for _, x := range s.AllOf {
		f(x)
	}
	for _, x := range s.AnyOf {
		f(x)
	}
	for _, x := range s.OneOf {
		f(x)
	}
	f(s.If)
	f(s.Then)
	f(s.Else)
	for _, name := range sortedKeys(anyMap(s.DependentSchemas)) {
		f(s.DependentSchemas[name])
	}
	for _, name := range sortedKeys(s.Dependencies) {
		if x, ok := s.Dependencies[name].(*jsonschema.Schema); ok {
			f(x)
		}
	}
}

// downLevel calls one with each schema of which at most one applies to a
// given child value and each with the schemas that may all apply to it.
func downLevel(s *jsonschema.Schema, one, each func(*jsonschema.Schema)) {
	downObject(s, one, each)
	downArray(s, one, each)
}

func downObject(s *jsonschema.Schema, one, each func(*jsonschema.Schema)) {
	for _, name := range sortedKeys(anyMap(s.Properties)) {
		one(s.Properties[name])
	}
	for _, x := range s.PatternProperties {
		each(x)
	}
	if x, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		each(x)
	}
	each(s.UnevaluatedProperties)
	each(s.PropertyNames) // applied to the member name, counted as if to the value
}

func downArray(s *jsonschema.Schema, one, each func(*jsonschema.Schema)) {
	switch items := s.Items.(type) {
	case *jsonschema.Schema:
		one(items)
	case []*jsonschema.Schema:
		for _, x := range items {
			one(x)
		}
	}
	if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		one(x)
	}
	for _, x := range s.PrefixItems {
		one(x)
	}
	one(s.Items2020)
	each(s.Contains)
	each(s.UnevaluatedItems)
	each(s.ContentSchema)
}

// topoOrder orders nodes so that every same-level target comes before the
// schema pointing at it; on a cycle it returns the index of a schema on it.
func topoOrder(nodes []node) ([]int, int) {
	const (
		white = iota
		grey
		black
	)
	colour := make([]uint8, len(nodes))
	order := make([]int, 0, len(nodes))
	type frame struct{ n, next int }
	for start := range nodes {
		if colour[start] != white {
			continue
		}
		stack := []frame{{start, 0}}
		colour[start] = grey
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.next < len(nodes[top.n].same) {
				m := nodes[top.n].same[top.next]
				top.next++
				switch colour[m] {
				case grey:
					return nil, m
				case white:
					colour[m] = grey
					stack = append(stack, frame{m, 0})
				}
				continue
			}
			colour[top.n] = black
			order = append(order, top.n)
			stack = stack[:len(stack)-1]
		}
	}
	return order, -1
}

// boundEvaluations computes, for every depth j up to MaxArgumentDepth, an
// upper bound of how many subschemas applying the root to the arguments
// applies to one value j levels down, and refuses the schema when any bound
// exceeds MaxEvaluations; else it returns the largest bound. The root is
// nodes[0].
func boundEvaluations(nodes []node, order []int) (int, error) {
	const limit = MaxEvaluations + 1 // saturate just above the cap
	sat := func(x int) int { return min(x, limit) }
	prev := make([]int, len(nodes))
	cur := make([]int, len(nodes))
	worst := 0
	for depth := 0; depth <= MaxArgumentDepth; depth++ {
		for _, i := range order {
			n := &nodes[i]
			total := 0
			if depth == 0 {
				total = 1
			} else {
				maxOf := func(ids []int) int {
					m := 0
					for _, x := range ids {
						m = max(m, prev[x])
					}
					return m
				}
				sumOf := func(ids []int) int {
					t := 0
					for _, x := range ids {
						t = sat(t + prev[x])
					}
					return t
				}
				total = max(sat(maxOf(n.props)+sumOf(n.each)), sat(maxOf(n.items)+sumOf(n.itemsEach)))
			}
			for _, x := range n.same {
				total = sat(total + cur[x])
			}
			cur[i] = total
		}
		if cur[0] > MaxEvaluations {
			return 0, compileErr(ErrSchemaTooComplex, "one value %d levels down could be checked against more than %d subschemas", depth, MaxEvaluations)
		}
		worst = max(worst, cur[0])
		prev, cur = cur, prev
	}
	return worst, nil
}
