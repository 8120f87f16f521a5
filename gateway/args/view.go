package args

import (
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A view is what coercion needs to know about one position in the
// arguments: the conjunction of the schemas that all apply there (a schema,
// what its $ref points to, the members of its allOf — recursively), the one
// type they leave for a value that is a string but should not be, and the
// string enum they require. anyOf, oneOf, not and if/then/else are
// alternatives or conditions; they never make a type unambiguous, so
// coercion ignores them (validation does not).
type view struct {
	conj   []*jsonschema.Schema
	target target
	// enum maps a normalised enum value to its index in enumVals, or -1 when
	// two values normalise alike (no synonym then).
	enum     map[string]int
	enumVals []string

	cache *viewCache
	once  sync.Once
	// Filled on first use by init.
	props   map[string]*view // declared member names
	dynamic bool             // some conjunct has patternProperties
	other   *view            // members not declared, when !dynamic
	prefix  []*view          // positional items
	items   *view            // items after the positional ones
}

// target is the type a string may be coerced to.
type target uint8

const (
	toNothing target = iota
	toBoolean
	toInteger
	toNumber
	toArray
	toObject
)

// JSON Schema type bits.
const (
	tNull = 1 << iota
	tBoolean
	tObject
	tArray
	tNumber
	tInteger
	tString
	tAll = tNull | tBoolean | tObject | tArray | tNumber | tInteger | tString
)

var typeBits = map[string]int{
	"null": tNull, "boolean": tBoolean, "object": tObject, "array": tArray,
	"number": tNumber | tInteger, "integer": tInteger, "string": tString,
}

// viewCache shares views between positions that see the same conjunction,
// so recursive schemas make a finite set of views.
type viewCache struct {
	ids   map[*jsonschema.Schema]int
	mu    sync.Mutex
	views map[string]*view
}

func newViewCache(ids map[*jsonschema.Schema]int) *viewCache {
	return &viewCache{ids: ids, views: map[string]*view{}}
}

// maxViews bounds the cache; past it, views are made but not kept.
const maxViews = 4 * MaxSubschemas

// get returns the view of a conjunction, nil for an empty one.
func (c *viewCache) get(conj []*jsonschema.Schema) *view {
	if len(conj) == 0 {
		return nil
	}
	ids := make([]int, len(conj))
	for i, s := range conj {
		ids[i] = c.ids[s]
	}
	slices.Sort(ids)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(strconv.Itoa(id))
		b.WriteByte(',')
	}
	key := b.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.views[key]; ok {
		return v
	}
	v := newView(conj, c)
	if len(c.views) < maxViews {
		c.views[key] = v
	}
	return v
}

// conjuncts returns s and every schema that must hold wherever s does:
// its $ref target (in drafts before 2019-09 the target replaces s, whose
// other keywords are ignored) and its allOf members, recursively.
func conjuncts(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	var walk func(*jsonschema.Schema)
	walk = func(x *jsonschema.Schema) {
		if x == nil || slices.Contains(out, x) {
			return
		}
		if x.Ref != nil && x.DraftVersion < 2019 {
			walk(x.Ref)
			return
		}
		out = append(out, x)
		walk(x.Ref)
		for _, a := range x.AllOf {
			walk(a)
		}
	}
	walk(s)
	return out
}

func conjunctsOf(schemas []*jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range schemas {
		for _, c := range conjuncts(s) {
			if !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}

func newView(conj []*jsonschema.Schema, cache *viewCache) *view {
	v := &view{conj: conj, cache: cache}
	types := tAll
	constrained := false
	for _, s := range conj {
		if s.Bool != nil && !*s.Bool {
			return v // nothing is valid here; coercing cannot help
		}
		if s.Types == nil || s.Types.IsEmpty() {
			continue
		}
		bits := 0
		for _, t := range s.Types.ToStrings() {
			bits |= typeBits[t]
		}
		types &= bits
		constrained = true
	}
	if constrained && types&tString == 0 {
		switch types &^ tNull {
		case tBoolean:
			v.target = toBoolean
		case tInteger:
			v.target = toInteger
		case tNumber | tInteger:
			v.target = toNumber
		case tArray:
			v.target = toArray
		case tObject:
			v.target = toObject
		}
	}
	if types&tString != 0 {
		v.enumSynonyms()
	}
	return v
}

// enumSynonyms fills the synonym table from the first all-string enum of the
// conjunction, keeping only values every other enum also allows.
func (v *view) enumSynonyms() {
	var enums [][]any
	for _, s := range v.conj {
		if s.Enum != nil {
			enums = append(enums, s.Enum.Values)
		}
	}
	if len(enums) == 0 {
		return
	}
	for _, val := range enums[0] {
		str, ok := val.(string)
		if !ok {
			continue
		}
		allowed := true
		for _, other := range enums[1:] {
			if !slices.Contains(other, any(str)) {
				allowed = false
				break
			}
		}
		if !allowed {
			continue
		}
		if v.enum == nil {
			v.enum = map[string]int{}
		}
		key := normaliseEnum(str)
		if _, dup := v.enum[key]; dup {
			v.enum[key] = -1
			continue
		}
		v.enum[key] = len(v.enumVals)
		v.enumVals = append(v.enumVals, str)
	}
}

// normaliseEnum is the synonym key: case folded, surrounding white space
// trimmed, '-' and ' ' read as '_'.
func normaliseEnum(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return '_'
		}
		return r
	}, s)
}

// synonym returns the enum value s stands for, if exactly one.
func (v *view) synonym(s string) (string, bool) {
	if v.enum == nil {
		return "", false
	}
	if slices.Contains(v.enumVals, s) {
		return "", false
	}
	i, ok := v.enum[normaliseEnum(s)]
	if !ok || i < 0 {
		return "", false
	}
	return v.enumVals[i], true
}

// init computes the child views of declared members and positional items.
func (v *view) init() {
	v.once.Do(func() {
		names := map[string]bool{}
		maxPrefix := 0
		for _, s := range v.conj {
			for name := range s.Properties {
				names[name] = true
			}
			if len(s.PatternProperties) > 0 {
				v.dynamic = true
			}
			maxPrefix = max(maxPrefix, len(s.PrefixItems))
			if items, ok := s.Items.([]*jsonschema.Schema); ok {
				maxPrefix = max(maxPrefix, len(items))
			}
		}
		if len(names) > 0 {
			v.props = make(map[string]*view, len(names))
			for name := range names {
				v.props[name] = v.cache.get(v.memberSchemas(name, true))
			}
		}
		if !v.dynamic {
			v.other = v.cache.get(v.memberSchemas("", false))
		}
		for i := range maxPrefix {
			v.prefix = append(v.prefix, v.cache.get(v.itemSchemas(i)))
		}
		v.items = v.cache.get(v.itemSchemas(maxPrefix))
	})
}

// memberSchemas returns the conjunction that applies to member name: in
// each conjunct, properties[name] and the matching patternProperties, or
// else a schema-valued additionalProperties. With declared false, name is
// one no conjunct declares (and, when no conjunct has patternProperties,
// stands for every such name).
func (v *view) memberSchemas(name string, declared bool) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range v.conj {
		matched := false
		if p, ok := s.Properties[name]; ok && declared {
			out = append(out, p)
			matched = true
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(name) {
				out = append(out, p)
				matched = true
			}
		}
		if !matched {
			if p, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
				out = append(out, p)
			}
		}
	}
	return conjunctsOf(out)
}

// itemSchemas returns the conjunction that applies to item i.
func (v *view) itemSchemas(i int) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, s := range v.conj {
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			out = append(out, items)
		case []*jsonschema.Schema:
			if i < len(items) {
				out = append(out, items[i])
			} else if p, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
				out = append(out, p)
			}
		}
		if i < len(s.PrefixItems) {
			out = append(out, s.PrefixItems[i])
		} else if s.Items2020 != nil {
			out = append(out, s.Items2020)
		}
	}
	return conjunctsOf(out)
}

// member returns the view of member name.
func (v *view) member(name string) *view {
	v.init()
	if c, ok := v.props[name]; ok {
		return c
	}
	if !v.dynamic {
		return v.other
	}
	return v.cache.get(v.memberSchemas(name, false))
}

// item returns the view of item i.
func (v *view) item(i int) *view {
	v.init()
	if i < len(v.prefix) {
		return v.prefix[i]
	}
	return v.items
}
