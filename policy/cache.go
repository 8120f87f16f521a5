package policy

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
)

// OPA never mutates input terms, so a term may serve any number of
// concurrent evaluations. termCaches shares the terms of the input parts
// that repeat from request to request, which makes building an input
// cheaper (see BenchmarkInputValue).
type termCaches struct {
	// tools maps upstream → tool → the declaration given to New and its
	// term; a Tool equal to it gets that term.
	tools      map[string]map[string]toolEntry
	transports boundedCache[Transport]
	clients    boundedCache[Client]
}

type toolEntry struct {
	decl ToolDeclaration
	term *ast.Term
}

// maxCached bounds each boundedCache. Transport and client facts are
// client-influenced (Origin, clientInfo), so the caches stop growing
// rather than grow without bound.
const maxCached = 256

func newTermCaches(declarations map[string]map[string]ToolDeclaration) *termCaches {
	c := &termCaches{tools: make(map[string]map[string]toolEntry, len(declarations))}
	for u, tools := range declarations {
		m := make(map[string]toolEntry, len(tools))
		for name, d := range tools {
			m[name] = toolEntry{decl: d, term: toolValue(&Tool{Name: name, Declared: true, ToolDeclaration: d})}
		}
		c.tools[u] = m
	}
	return c
}

func (c *termCaches) tool(upstream string, t *Tool) *ast.Term {
	if c != nil && t.Declared && t.Catalog == nil {
		if e, ok := c.tools[upstream][t.Name]; ok && sameDeclaration(&e.decl, &t.ToolDeclaration) {
			return e.term
		}
	}
	return toolValue(t)
}

func sameDeclaration(a, b *ToolDeclaration) bool {
	return a.Effect == b.Effect && a.Hidden == b.Hidden &&
		slices.Equal(a.Rights, b.Rights) &&
		slices.Equal(a.UntrustedText, b.UntrustedText) &&
		slices.Equal(a.ResultFields, b.ResultFields)
}

func (c *termCaches) transport(t *Transport) *ast.Term {
	if c == nil {
		return transportValue(t)
	}
	return c.transports.get(*t, transportValue)
}

func (c *termCaches) client(cl *Client) *ast.Term {
	if c == nil {
		return clientValue(cl)
	}
	return c.clients.get(*cl, clientValue)
}

// boundedCache memoises the terms of up to maxCached distinct values.
type boundedCache[K comparable] struct {
	m sync.Map // K → *ast.Term
	n atomic.Int32
}

func (b *boundedCache[K]) get(k K, build func(*K) *ast.Term) *ast.Term {
	if t, ok := b.m.Load(k); ok {
		return t.(*ast.Term)
	}
	t := build(&k)
	if b.n.Load() < maxCached {
		if _, loaded := b.m.LoadOrStore(k, t); !loaded {
			b.n.Add(1)
		}
	}
	return t
}
