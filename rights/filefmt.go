package rights

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// maxFileNodes bounds the work of reading one rights file, counting each
// tenant, subject, member and right visited (aliases count each time
// they are used), so a small file cannot expand into a huge table.
const maxFileNodes = 1 << 22

// parseRightsFile parses and checks the content of a rights file (see
// FileSource for the format). Errors name the place of the problem as a
// path and a line and column, for example
// `tenants.acme.alice.rights[1] (line 3, column 25): must be a string, got an integer; quote it`.
func parseRightsFile(data []byte) (map[string]map[string]Live, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return nil, fmt.Errorf("file is empty: want a mapping with the key %q", "tenants")
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("file is not valid UTF-8")
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fmt.Errorf("syntax error: %s", yaml.FormatError(err, false, false))
	}
	if len(f.Docs) != 1 {
		return nil, fmt.Errorf("file has %d YAML documents: want exactly one", len(f.Docs))
	}
	if f.Docs[0].Body == nil {
		return nil, fmt.Errorf("file is empty: want a mapping with the key %q", "tenants")
	}
	w := &fileWalker{anchors: map[string]ast.Node{}}
	return w.root(f.Docs[0].Body)
}

type fileWalker struct {
	anchors map[string]ast.Node
	nodes   int
}

// problem is an error located at node n reached by path.
func problem(path string, n ast.Node, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if path == "" {
		path = "top level"
	}
	if n != nil {
		if tk := n.GetToken(); tk != nil && tk.Position != nil {
			return fmt.Errorf("%s (line %d, column %d): %s", path, tk.Position.Line, tk.Position.Column, msg)
		}
	}
	return fmt.Errorf("%s: %s", path, msg)
}

var plainSegment = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// child returns the path of member key under path.
func child(path, key string) string {
	seg := key
	if !plainSegment.MatchString(key) {
		seg = "[" + strconv.Quote(key) + "]"
	} else if path != "" {
		seg = "." + key
	}
	return path + seg
}

// resolve follows anchors (recording them) and aliases, and refuses tags.
func (w *fileWalker) resolve(path string, n ast.Node) (ast.Node, error) {
	for range 16 {
		w.nodes++
		if w.nodes > maxFileNodes {
			return nil, problem(path, n, "file expands to more than %d nodes", maxFileNodes)
		}
		switch v := n.(type) {
		case *ast.AnchorNode:
			if v.Name != nil {
				w.anchors[v.Name.GetToken().Value] = v.Value
			}
			n = v.Value
		case *ast.AliasNode:
			name := ""
			if v.Value != nil {
				name = v.Value.GetToken().Value
			}
			target, ok := w.anchors[name]
			if !ok {
				return nil, problem(path, n, "alias *%s refers to no earlier anchor", name)
			}
			n = target
		case *ast.TagNode:
			return nil, problem(path, n, "YAML tags such as %s are not supported", v.Start.Value)
		default:
			return n, nil
		}
	}
	return nil, problem(path, n, "too many nested anchors and aliases")
}

// mapping returns the members of n, which must be a mapping, in order,
// with their keys as text. Keys must be plain scalars; merge keys and
// complex keys are refused. Duplicate keys were refused by the parser.
func (w *fileWalker) mapping(path string, n ast.Node) ([]string, []*ast.MappingValueNode, error) {
	n, err := w.resolve(path, n)
	if err != nil {
		return nil, nil, err
	}
	var values []*ast.MappingValueNode
	switch v := n.(type) {
	case *ast.MappingNode:
		values = v.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{v}
	default:
		return nil, nil, problem(path, n, "must be a mapping, got %s", kind(n))
	}
	keys := make([]string, len(values))
	seen := make(map[string]bool, len(values))
	for i, mv := range values {
		key, err := keyText(path, mv.Key)
		if err != nil {
			return nil, nil, err
		}
		if seen[key] {
			return nil, nil, problem(child(path, key), mv.Key, "key %q is given twice", key)
		}
		seen[key] = true
		keys[i] = key
	}
	return keys, values, nil
}

// keyText returns the text of a mapping key as written (so 007 stays
// "007"), refusing anything but a non-empty scalar.
func keyText(path string, k ast.MapKeyNode) (string, error) {
	switch v := k.(type) {
	case *ast.MergeKeyNode:
		return "", problem(path, k, "merge keys (<<) are not supported")
	case *ast.StringNode:
		if v.Value == "" {
			return "", problem(path, k, "empty key")
		}
		return v.Value, nil
	case *ast.IntegerNode, *ast.FloatNode, *ast.BoolNode, *ast.InfinityNode, *ast.NanNode:
		return k.GetToken().Value, nil
	case *ast.NullNode:
		return "", problem(path, k, "key is null; quote it if it is a name")
	default:
		return "", problem(path, k, "key must be a plain name, got %s", kind(k))
	}
}

func (w *fileWalker) root(n ast.Node) (map[string]map[string]Live, error) {
	keys, values, err := w.mapping("", n)
	if err != nil {
		return nil, err
	}
	var tenantsNode ast.Node
	for i, key := range keys {
		if key != "tenants" {
			return nil, problem(child("", key), values[i].Key, "unknown key %q (allowed: tenants)", key)
		}
		tenantsNode = values[i].Value
	}
	if tenantsNode == nil {
		return nil, fmt.Errorf("missing key %q at the top level", "tenants")
	}
	tkeys, tvalues, err := w.mapping("tenants", tenantsNode)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]Live, len(tkeys))
	for i, tenant := range tkeys {
		tpath := child("tenants", tenant)
		skeys, svalues, err := w.mapping(tpath, tvalues[i].Value)
		if err != nil {
			return nil, err
		}
		subjects := make(map[string]Live, len(skeys))
		for j, subject := range skeys {
			l, err := w.entry(child(tpath, subject), svalues[j].Value)
			if err != nil {
				return nil, err
			}
			subjects[subject] = l
		}
		out[tenant] = subjects
	}
	return out, nil
}

// entry reads {rights: [...], active: bool}.
func (w *fileWalker) entry(path string, n ast.Node) (Live, error) {
	keys, values, err := w.mapping(path, n)
	if err != nil {
		return Live{}, err
	}
	l := Live{Active: true}
	for i, key := range keys {
		vpath := child(path, key)
		switch key {
		case "active":
			v, err := w.resolve(vpath, values[i].Value)
			if err != nil {
				return Live{}, err
			}
			b, ok := v.(*ast.BoolNode)
			if !ok {
				return Live{}, problem(vpath, v, "must be true or false, got %s", kind(v))
			}
			l.Active = b.Value
		case "rights":
			rs, err := w.rights(vpath, values[i].Value)
			if err != nil {
				return Live{}, err
			}
			l.Rights = rs
		default:
			return Live{}, problem(vpath, values[i].Key, "unknown key %q (allowed: rights, active)", key)
		}
	}
	return l, nil
}

func (w *fileWalker) rights(path string, n ast.Node) ([]string, error) {
	v, err := w.resolve(path, n)
	if err != nil {
		return nil, err
	}
	seq, ok := v.(*ast.SequenceNode)
	if !ok {
		return nil, problem(path, v, "must be a list of rights, got %s", kind(v))
	}
	if len(seq.Values) > MaxRights {
		return nil, problem(path, v, "%d rights, more than %d", len(seq.Values), MaxRights)
	}
	out := make([]string, 0, len(seq.Values))
	for i, item := range seq.Values {
		ipath := fmt.Sprintf("%s[%d]", path, i)
		item, err := w.resolve(ipath, item)
		if err != nil {
			return nil, err
		}
		s, ok := item.(*ast.StringNode)
		if !ok {
			return nil, problem(ipath, item, "must be a string, got %s; quote it", kind(item))
		}
		if why := checkRight(s.Value); why != "" {
			return nil, problem(ipath, item, "right %.64q %s", s.Value, why)
		}
		out = append(out, s.Value)
	}
	return dedupe(out), nil
}

// kind names the YAML type of n for error messages.
func kind(n ast.Node) string {
	switch n.(type) {
	case nil, *ast.NullNode:
		return "null"
	case *ast.MappingNode, *ast.MappingValueNode:
		return "a mapping"
	case *ast.SequenceNode:
		return "a list"
	case *ast.StringNode, *ast.LiteralNode:
		return "a string"
	case *ast.IntegerNode:
		return "an integer"
	case *ast.FloatNode, *ast.InfinityNode, *ast.NanNode:
		return "a number"
	case *ast.BoolNode:
		return "a boolean"
	default:
		return strings.ToLower(n.Type().String())
	}
}
