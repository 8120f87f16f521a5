package config

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// Input bounds, checked before the YAML parser runs. A configuration is
// written by an operator, but a parser whose cost grows faster than its
// input should still not be handed an unbounded one.
const (
	// MaxConfigBytes is the largest configuration file accepted.
	MaxConfigBytes = 1 << 20
	// maxFlowDepth bounds the nesting of flow collections ([...] and {...}).
	maxFlowDepth = 64
	// maxIndent bounds the indentation of a line (spaces plus "- " and "? "
	// indicators before its first content), which bounds block nesting.
	maxIndent = 256
	// maxNodes bounds the values decoded, aliases expanded (an alias of a
	// list of aliases of ... would otherwise grow the configuration
	// geometrically). Real configurations are far below it: the quickstart
	// has about 150.
	maxNodes = 1 << 18
	// maxProblems bounds the problems reported; the rest are counted.
	maxProblems = 100
)

// precheck rejects input the YAML parser should not see: too large,
// not UTF-8, control characters, or nested deeper than any configuration
// needs. It returns at most one problem, positioned.
func precheck(data []byte) *FieldError {
	if len(data) > MaxConfigBytes {
		return &FieldError{Msg: fmt.Sprintf("larger than the limit of %d bytes", MaxConfigBytes)}
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return &FieldError{Line: line, Column: col, Msg: "invalid UTF-8"}
		case r == '\n':
			line, col = line+1, 0
		case r == '\t' || r == '\r':
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0xfeff:
			return &FieldError{Line: line, Column: col, Msg: fmt.Sprintf("control character %U is not allowed", r)}
		}
		i += size
		col++
	}
	return checkNesting(data)
}

// checkNesting is a conservative lexical bound on nesting depth. It
// tracks flow brackets outside quoted scalars and comments, and the
// indentation of each line; it does not need to understand YAML exactly,
// only never to reject a configuration a person would write.
func checkNesting(data []byte) *FieldError {
	depth := 0
	var quote byte // '\'' or '"' while inside a quoted scalar
	for n, ln := range bytes.Split(data, []byte("\n")) {
		line := n + 1
		if quote == 0 {
			indent := 0
			for indent < len(ln) && (ln[indent] == ' ' || ((ln[indent] == '-' || ln[indent] == '?') && indent+1 < len(ln) && ln[indent+1] == ' ')) {
				indent++
			}
			if indent > maxIndent {
				return &FieldError{Line: line, Column: 1, Msg: fmt.Sprintf("nested deeper than %d levels", maxIndent)}
			}
		}
		for i := 0; i < len(ln); i++ {
			c := ln[i]
			if quote != 0 {
				switch {
				case quote == '"' && c == '\\':
					i++
				case c == quote && quote == '\'' && i+1 < len(ln) && ln[i+1] == '\'':
					i++
				case c == quote:
					quote = 0
				}
				continue
			}
			switch c {
			case '#':
				if i == 0 || ln[i-1] == ' ' || ln[i-1] == '\t' {
					i = len(ln)
				}
			case '"', '\'':
				// A quote opens a quoted scalar only where a scalar can
				// start; inside a plain scalar (it's) it is just a char.
				if i == 0 || strings.IndexByte(" \t[{,:-?", ln[i-1]) >= 0 {
					quote = c
				}
			case '[', '{':
				depth++
				if depth > maxFlowDepth {
					return &FieldError{Line: line, Column: i + 1, Msg: fmt.Sprintf("flow collections nested deeper than %d levels", maxFlowDepth)}
				}
			case ']', '}':
				if depth > 0 {
					depth--
				}
			}
		}
	}
	return nil
}

// decoder checks a parsed YAML document against the Go type it will be
// decoded into and decodes it, collecting every problem with its key path
// rather than stopping at the first. It also records where each key path
// sits in the source so that Validate's problems can be positioned.
type decoder struct {
	errs    problems
	failed  []string // paths whose value could not be decoded
	pos     map[string]token.Position
	anchors map[string]ast.Node
	nodes   int
	inAlias int // > 0 while decoding the target of an alias
}

func newDecoder() *decoder {
	return &decoder{pos: map[string]token.Position{}, anchors: map[string]ast.Node{}}
}

func (d *decoder) fail(path string, n ast.Node, format string, args ...any) {
	e := &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)}
	if p, ok := nodePos(n); ok {
		e.Line, e.Column = p.Line, p.Column
	}
	d.errs = append(d.errs, e)
	d.failed = append(d.failed, path)
}

func (d *decoder) mark(path string, n ast.Node) {
	if d.inAlias > 0 {
		// Inside an alias the nodes sit at the anchor, elsewhere in the
		// file; problems there are placed at the alias (an ancestor).
		return
	}
	if _, ok := d.pos[path]; ok {
		return
	}
	if p, ok := nodePos(n); ok {
		d.pos[path] = p
	}
}

// position returns the source position of path, or of its nearest
// ancestor that appears in the document.
func (d *decoder) position(path string) (token.Position, bool) {
	for {
		if p, ok := d.pos[path]; ok {
			return p, true
		}
		if path == "" {
			return token.Position{}, false
		}
		path = parentPath(path)
	}
}

// nodePos is where a node starts: for a mapping, its first key (the
// mapping's own token is the first ':'), for an anchor the '&'.
func nodePos(n ast.Node) (token.Position, bool) {
	switch v := n.(type) {
	case nil:
		return token.Position{}, false
	case *ast.MappingNode:
		if len(v.Values) > 0 {
			return nodePos(v.Values[0].Key)
		}
	case *ast.MappingValueNode:
		return nodePos(v.Key)
	case *ast.AnchorNode:
		if v.Start != nil {
			return *v.Start.Position, true
		}
	case *ast.AliasNode:
		if v.Start != nil {
			return *v.Start.Position, true
		}
	case *ast.TagNode:
		if v.Start != nil {
			return *v.Start.Position, true
		}
	case *ast.LiteralNode:
		if v.Start != nil {
			return *v.Start.Position, true
		}
	}
	if tk := n.GetToken(); tk != nil && tk.Position != nil {
		return *tk.Position, true
	}
	return token.Position{}, false
}

var (
	stringType   = reflect.TypeFor[string]()
	durationType = reflect.TypeFor[Duration]()
)

// decode decodes n into v (settable), reporting problems under path.
func (d *decoder) decode(n ast.Node, v reflect.Value, path string) {
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.fail("", n, "document too large: more than %d values once aliases are expanded", maxNodes)
		}
		return
	}
	switch x := n.(type) {
	case nil:
		return
	case *ast.AnchorNode:
		d.anchors[x.Name.GetToken().Value] = x.Value
		d.decode(x.Value, v, path)
		return
	case *ast.AliasNode:
		name := x.Value.GetToken().Value
		target, ok := d.anchors[name]
		if !ok {
			d.fail(path, n, "alias *%s refers to no anchor defined before it", name)
			return
		}
		d.inAlias++
		d.decode(target, v, path)
		d.inAlias--
		return
	case *ast.TagNode:
		d.fail(path, n, "YAML tags (%s) are not supported; quote a value to make it a string", x.Start.Value)
		return
	case *ast.NullNode:
		// An empty value leaves the field unset: defaults apply.
		v.SetZero()
		return
	case *ast.CommentGroupNode:
		return
	}

	if v.Type() == durationType {
		d.decodeDuration(n, v, path)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		seq, ok := n.(*ast.SequenceNode)
		if !ok {
			d.fail(path, n, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(seq.Values), len(seq.Values))
		for i, item := range seq.Values {
			p := indexPath(path, i)
			d.mark(p, item)
			if _, null := item.(*ast.NullNode); null {
				d.fail(p, item, "empty list element")
				continue
			}
			d.decode(item, s.Index(i), p)
		}
		v.Set(s)
	case reflect.String:
		switch x := n.(type) {
		case *ast.StringNode:
			v.SetString(x.Value)
		case *ast.LiteralNode:
			v.SetString(x.Value.Value)
		default:
			d.fail(path, n, "expected a string, got %s%s", describe(n), stringHint(n))
		}
	case reflect.Bool:
		b, ok := n.(*ast.BoolNode)
		if !ok {
			d.fail(path, n, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b.Value)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, ok := n.(*ast.IntegerNode)
		if !ok {
			if s, isString := n.(*ast.StringNode); isString && s.Token != nil && s.Token.Type != token.DoubleQuoteType &&
				s.Token.Type != token.SingleQuoteType && strings.Trim(s.Value, "0123456789") == "" && s.Value != "" {
				d.fail(path, n, "integer %s is out of range", s.Value)
				return
			}
			d.fail(path, n, "expected an integer, got %s", describe(n))
			return
		}
		var x int64
		switch iv := i.Value.(type) {
		case int64:
			x = iv
		case uint64:
			if iv > math.MaxInt64 {
				d.fail(path, n, "integer %s is out of range", i.Token.Value)
				return
			}
			x = int64(iv)
		default:
			d.fail(path, n, "expected an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(x) {
			d.fail(path, n, "integer %s is out of range", i.Token.Value)
			return
		}
		v.SetInt(x)
	default:
		// Only reachable if a field of an unsupported type is added to
		// Config; TestDecoderCoversConfigTypes guards against that.
		d.fail(path, n, "internal error: cannot decode into %s", v.Type())
	}
}

// mapEntries returns the key/value pairs of a mapping node, reporting
// keys that are not plain strings and merge keys.
func (d *decoder) mapEntries(n ast.Node, path string) ([]*ast.MappingValueNode, bool) {
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	default:
		d.fail(path, n, "expected a mapping, got %s", describe(n))
		return nil, false
	}
	return values, true
}

// keyString returns the string of a mapping key.
func (d *decoder) keyString(k ast.MapKeyNode, path string) (string, bool) {
	var n ast.Node = k
	if mk, ok := n.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	switch x := n.(type) {
	case *ast.StringNode:
		return x.Value, true
	case *ast.MergeKeyNode:
		d.fail(path, k, "merge keys (<<) are not supported; use an alias (*name) for the whole value instead")
	default:
		d.fail(path, k, "keys must be strings, got %s", describe(n))
	}
	return "", false
}

func (d *decoder) decodeStruct(n ast.Node, v reflect.Value, path string) {
	entries, ok := d.mapEntries(n, path)
	if !ok {
		return
	}
	fields := yamlFields(v.Type())
	seen := map[string]bool{}
	for _, e := range entries {
		key, ok := d.keyString(e.Key, path)
		if !ok {
			continue
		}
		p := keyPath(path, key)
		if seen[key] {
			d.fail(p, e.Key, "duplicate key")
			continue
		}
		seen[key] = true
		idx, ok := fields.index[key]
		if !ok {
			d.fail(p, e.Key, "unknown field%s", suggest(key, fields.names))
			continue
		}
		d.mark(p, e.Key)
		d.decode(e.Value, v.Field(idx), p)
	}
}

func (d *decoder) decodeMap(n ast.Node, v reflect.Value, path string) {
	if v.Type().Key() != stringType {
		d.fail(path, n, "internal error: map key type %s", v.Type().Key())
		return
	}
	entries, ok := d.mapEntries(n, path)
	if !ok {
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(entries))
	for _, e := range entries {
		key, ok := d.keyString(e.Key, path)
		if !ok {
			continue
		}
		p := keyPath(path, key)
		kv := reflect.ValueOf(key)
		if m.MapIndex(kv).IsValid() {
			d.fail(p, e.Key, "duplicate key")
			continue
		}
		d.mark(p, e.Key)
		ev := reflect.New(v.Type().Elem()).Elem()
		d.decode(e.Value, ev, p)
		m.SetMapIndex(kv, ev)
	}
	v.Set(m)
}

// fieldSet maps YAML key names of a struct type to field indexes, named
// the way goccy/go-yaml names them (the yaml tag, else the json tag,
// else the lower-cased field name).
type fieldSet struct {
	index map[string]int
	names []string // in declaration order
}

func yamlFields(t reflect.Type) fieldSet {
	fs := fieldSet{index: map[string]int{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "" {
			tag = f.Tag.Get("json")
		}
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs.index[name] = i
		fs.names = append(fs.names, name)
	}
	return fs
}

// suggest returns a hint naming the closest known key, or listing them.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(key), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return " (known: " + strings.Join(known, ", ") + ")"
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// describe names the kind of a YAML node for an error message, with the
// value when it is a short scalar.
func describe(n ast.Node) string {
	switch x := n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode:
		if len(x.Value) <= 40 && !strings.ContainsAny(x.Value, "\n") {
			return "the string " + strconv.Quote(x.Value)
		}
		return "a string"
	case *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "the integer " + x.Token.Value
	case *ast.FloatNode:
		return "the number " + x.Token.Value
	case *ast.BoolNode:
		return "the boolean " + x.Token.Value
	case *ast.InfinityNode, *ast.NanNode:
		return "the number " + n.GetToken().Value
	case *ast.NullNode:
		return "null"
	}
	return strings.ToLower(n.Type().String())
}

// stringHint suggests quoting a scalar the YAML parser did not read as a
// string.
func stringHint(n ast.Node) string {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return " (quote it: " + strconv.Quote(n.GetToken().Value) + ")"
	}
	return ""
}

// decodeDuration decodes a Go duration string ("30s") into a Duration; ""
// leaves it unset.
func (d *decoder) decodeDuration(n ast.Node, v reflect.Value, path string) {
	s, ok := n.(*ast.StringNode)
	if !ok {
		hint := ""
		switch n.(type) {
		case *ast.IntegerNode, *ast.FloatNode:
			hint = fmt.Sprintf(` (durations need a unit, e.g. "%ss")`, n.GetToken().Value)
		}
		d.fail(path, n, "expected a duration, got %s%s", describe(n), hint)
		return
	}
	var dur Duration
	if err := dur.UnmarshalText([]byte(s.Value)); err != nil {
		d.fail(path, n, "%v", err)
		return
	}
	v.Set(reflect.ValueOf(dur))
}

// decodeRoot decodes the document's top-level node into c.
func (d *decoder) decodeRoot(n ast.Node, c *Config) {
	switch n.(type) {
	case *ast.MappingNode, *ast.MappingValueNode, *ast.AnchorNode, *ast.AliasNode:
		d.decode(n, reflect.ValueOf(c).Elem(), "")
	default:
		d.fail("", n, "the configuration must be a mapping of keys (%s), got %s", strings.Join(yamlFields(reflect.TypeFor[Config]()).names, ", "), describe(n))
	}
}
