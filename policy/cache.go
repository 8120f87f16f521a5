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
	// catalogs shares the terms of catalog entries by (hash, listed,
	// state): the hash covers the title and the annotations.
	catalogs boundedCache[catalogKey]
}

type catalogKey struct {
	hash, state string
	listed      bool
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
			// Without a catalog entry toolValue cannot fail.
			t, _ := toolValue(&Tool{Name: name, Declared: true, ToolDeclaration: d}, nil)
			m[name] = toolEntry{decl: d, term: t}
		}
		c.tools[u] = m
	}
	return c
}

func (c *termCaches) tool(upstream string, t *Tool) (*ast.Term, error) {
	if c != nil && t.Declared && t.Catalog == nil && len(t.Toolsets) == 0 {
		if e, ok := c.tools[upstream][t.Name]; ok && sameDeclaration(&e.decl, &t.ToolDeclaration) {
			return e.term, nil
		}
	}
	return toolValue(t, c)
}

func sameDeclaration(a, b *ToolDeclaration) bool {
	return a.Effect == b.Effect && a.Hidden == b.Hidden &&
		a.Expensive == b.Expensive && a.MovesMoney == b.MovesMoney && a.LegallyBinding == b.LegallyBinding &&
		a.NotifyObject == b.NotifyObject && a.DeadlineMS == b.DeadlineMS &&
		slices.Equal(a.Rights, b.Rights) &&
		slices.Equal(a.UntrustedText, b.UntrustedText) &&
		slices.Equal(a.ResultFields, b.ResultFields)
}

// catalog returns the term of a catalog entry, shared by entries with the
// same definition hash.
func (c *termCaches) catalog(cat *ToolCatalog) (*ast.Term, error) {
	if c == nil || cat.Hash == "" {
		return catalogValue(cat)
	}
	k := catalogKey{hash: cat.Hash, state: cat.State, listed: cat.Listed}
	if t, ok := c.catalogs.m.Load(k); ok {
		return t.(*ast.Term), nil
	}
	t, err := catalogValue(cat)
	if err != nil {
		return nil, err
	}
	return c.catalogs.get(k, func(*catalogKey) *ast.Term { return t }), nil
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
