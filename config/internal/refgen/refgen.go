// Package refgen writes the configuration reference,
// docs/reference/configuration.md, from one source: the configuration
// types of package config. It walks config.Config through its yaml keys
// (as the strict decoder does), takes each key's text from the doc
// comment of its struct field, its default from config.Config.ApplyDefaults,
// and fills the tables into the hand-written prose of configuration.md.tmpl.
//
// A field's doc comment may end with a paragraph that fills the default
// column instead of the value ApplyDefaults sets:
//
//	Default: `0s`: no cache.
//	Required.
//
// When ApplyDefaults sets a value, such a paragraph must show it.
package refgen

import (
	"bytes"
	_ "embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/mcpgate/mcpgate/config"
)

//go:embed configuration.md.tmpl
var tmpl string

// Module is the module path; packages under it are read from the module
// root given to Generate.
const Module = "github.com/mcpgate/mcpgate"

// Key is one configuration key as the reference lists it.
type Key struct {
	Path    string // upstreams[].tools.<tool>.effect
	Type    string // string, duration, list of strings, …
	Default string // markdown; "" when none is stated
	Doc     string // markdown, one paragraph
	Field   string // the Go field: package path, type and field name
}

// Keys lists every key of config.Config in file order, reading doc
// comments from the Go sources under root (the module root).
func Keys(root string) ([]Key, error) {
	g := &gen{root: root, docs: map[string]string{}, typeDocs: map[string]string{}, parsed: map[string]bool{}}
	skel := reflect.New(reflect.TypeFor[config.Config]()).Elem()
	fill(skel, 0)
	cfg := skel.Addr().Interface().(*config.Config)
	cfg.ApplyDefaults()
	if err := g.walk(reflect.ValueOf(*cfg), ""); err != nil {
		return nil, err
	}
	if len(g.problems) > 0 {
		return g.keys, fmt.Errorf("configuration reference:\n%s", strings.Join(g.problems, "\n"))
	}
	return g.keys, nil
}

// Generate renders the reference page.
func Generate(root string) ([]byte, error) {
	keys, err := Keys(root)
	if err != nil {
		return nil, err
	}
	used := map[string]int{}
	t, err := template.New("configuration.md.tmpl").Funcs(template.FuncMap{
		// keys renders the table of every key at or under each prefix.
		"keys": func(prefixes ...string) string {
			var b strings.Builder
			b.WriteString("| key | type | default | meaning |\n|---|---|---|---|\n")
			for _, k := range keys {
				if !slices.ContainsFunc(prefixes, func(p string) bool { return under(k.Path, p) }) {
					continue
				}
				used[k.Path]++
				fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.Path, cell(k.Type), cell(k.Default), cell(k.Doc))
			}
			return strings.TrimSuffix(b.String(), "\n")
		},
	}).Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, nil); err != nil {
		return nil, err
	}
	var missing []string
	for _, k := range keys {
		if used[k.Path] != 1 {
			missing = append(missing, fmt.Sprintf("%s (in %d tables)", k.Path, used[k.Path]))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("configuration.md.tmpl must list every key in exactly one table: %s", strings.Join(missing, ", "))
	}
	return out.Bytes(), nil
}

func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+".") || strings.HasPrefix(path, prefix+"[")
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

type gen struct {
	root     string
	docs     map[string]string // pkg.Type.Field → doc
	typeDocs map[string]string // pkg.Type → doc
	parsed   map[string]bool
	keys     []Key
	problems []string
}

// fill makes every pointer non-nil, every slice one element long and
// every map one entry large, so that ApplyDefaults reaches every key.
func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isScalar(v.Type().Elem()) {
			return // nil: ApplyDefaults sets it
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), depth+1)
	case reflect.Slice:
		if isScalar(v.Type().Elem()) {
			return
		}
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0), depth+1)
	case reflect.Map:
		if isScalar(v.Type().Elem()) {
			return
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(reflect.ValueOf("x").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	}
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer:
		return isScalar(t.Elem())
	case reflect.Struct, reflect.Slice, reflect.Map:
		return false
	}
	return true
}

// yamlName is the key of a struct field as the decoder reads it.
func yamlName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	if tag == "" {
		tag = f.Tag.Get("json")
	}
	name, _, _ := strings.Cut(tag, ",")
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name
}

func (g *gen) walk(v reflect.Value, prefix string) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		name := yamlName(f)
		if !f.IsExported() || name == "-" {
			continue
		}
		path := strings.TrimPrefix(prefix+"."+name, ".")
		doc, err := g.fieldDoc(t, f)
		if err != nil {
			return err
		}
		fv := v.Field(i)
		k := Key{Path: path, Type: typeName(f.Type, path), Field: t.PkgPath() + "." + t.Name() + "." + f.Name}
		k.Doc, k.Default = splitDefault(doc)
		if k.Doc == "" {
			g.problems = append(g.problems, fmt.Sprintf("%s (%s.%s): no doc comment", path, t.Name(), f.Name))
		}
		// A default under a map placeholder is that of the made-up
		// entry the skeleton holds, not one to show.
		if def, ok := value(fv); ok && !strings.Contains(path, "<") {
			if k.Default == "" {
				k.Default = def
			} else if !strings.Contains(k.Default, def) {
				g.problems = append(g.problems, fmt.Sprintf("%s (%s.%s): the comment's default %q does not show %s, the value ApplyDefaults sets", path, t.Name(), f.Name, k.Default, def))
			}
		}
		g.keys = append(g.keys, k)
		if err := g.walkInto(fv, path); err != nil {
			return err
		}
	}
	return nil
}

// walkInto descends into the value of a key: struct fields, the element
// of a list, the value of a map.
func (g *gen) walkInto(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return g.walkInto(v.Elem(), path)
	case reflect.Struct:
		if isLeafStruct(v.Type()) {
			return nil
		}
		return g.walk(v, path)
	case reflect.Slice:
		if v.Len() == 0 || isScalar(v.Type().Elem()) {
			return nil
		}
		return g.walkInto(v.Index(0), path+"[]")
	case reflect.Map:
		if v.Len() == 0 || isScalar(v.Type().Elem()) {
			return nil
		}
		it := v.MapRange()
		it.Next()
		return g.walkInto(it.Value(), path+"."+mapKey(path))
	}
	return nil
}

// isLeafStruct reports a struct type decoded from one scalar (a duration
// type, say) rather than from a mapping.
func isLeafStruct(t reflect.Type) bool {
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			return false
		}
	}
	return true
}

// mapKey is the placeholder of a map key in a path: <tool> under tools,
// <name> elsewhere.
func mapKey(path string) string {
	if strings.HasSuffix(path, ".tools") {
		return "<tool>"
	}
	return "<name>"
}

func typeName(t reflect.Type, path string) string {
	if t.Name() == "Duration" {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem(), path)
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Struct:
		if isLeafStruct(t) {
			return strings.ToLower(t.Name())
		}
		return "mapping"
	case reflect.Slice:
		e := typeName(t.Elem(), path)
		if e == "mapping" {
			return "list of mappings"
		}
		return "list of " + e + "s"
	case reflect.Map:
		return fmt.Sprintf("mapping: %s → %s", strings.Trim(mapKey(path), "<>"), typeName(t.Elem(), path))
	}
	return t.String()
}

// value formats the value ApplyDefaults left in a key, if it is one to
// show: a set scalar, or a non-empty list of scalars.
func value(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || !isScalar(v.Type()) {
			return "", false
		}
		return value(v.Elem())
	case reflect.String:
		if v.String() == "" {
			return "", false
		}
		return "`" + v.String() + "`", true
	case reflect.Bool:
		return "`" + strconv.FormatBool(v.Bool()) + "`", true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			return "", false
		}
		return "`" + strconv.FormatInt(v.Int(), 10) + "`", true
	case reflect.Slice:
		if v.Len() == 0 || !isScalar(v.Type().Elem()) {
			return "", false
		}
		var parts []string
		for i := range v.Len() {
			parts = append(parts, fmt.Sprint(v.Index(i).Interface()))
		}
		return "`[" + strings.Join(parts, ", ") + "]`", true
	case reflect.Struct:
		if s, ok := v.Interface().(fmt.Stringer); ok && isLeafStruct(v.Type()) && !v.IsZero() {
			return "`" + s.String() + "`", true
		}
	}
	return "", false
}

// splitDefault turns a doc comment into one markdown paragraph, and takes
// off its last paragraph when that states the default ("Default: …") or
// that the key is required ("Required…").
func splitDefault(doc string) (text, def string) {
	paras := strings.Split(strings.TrimSpace(doc), "\n\n")
	last := strings.TrimSpace(paras[len(paras)-1])
	switch {
	case strings.HasPrefix(last, "Default: "):
		def = strings.TrimSuffix(strings.TrimPrefix(last, "Default: "), ".")
		paras = paras[:len(paras)-1]
	case strings.HasPrefix(last, "Required"):
		def = "— (" + strings.ToLower(last[:1]) + strings.TrimSuffix(last[1:], ".") + ")"
		paras = paras[:len(paras)-1]
	}
	return strings.Join(strings.Fields(strings.Join(paras, " ")), " "), strings.Join(strings.Fields(def), " ")
}

// fieldDoc is the doc comment of a struct field: the comment above it,
// else the one beside it, else the doc of the field's struct type.
func (g *gen) fieldDoc(t reflect.Type, f reflect.StructField) (string, error) {
	if err := g.parse(t.PkgPath()); err != nil {
		return "", err
	}
	if d := g.docs[t.PkgPath()+"."+t.Name()+"."+f.Name]; d != "" {
		return stripName(d, f.Name), nil
	}
	et := f.Type
	for et.Kind() == reflect.Pointer || et.Kind() == reflect.Slice || et.Kind() == reflect.Map {
		et = et.Elem()
	}
	if et.Kind() == reflect.Struct && et.PkgPath() != "" {
		if err := g.parse(et.PkgPath()); err != nil {
			return "", err
		}
		return stripName(g.typeDocs[et.PkgPath()+"."+et.Name()], et.Name()), nil
	}
	return "", nil
}

// stripName turns "Proxy is the …" into "The …": a Go comment names
// its field, a table row need not.
func stripName(doc, name string) string {
	for _, verb := range []string{" is ", " are "} {
		if rest, ok := strings.CutPrefix(doc, name+verb); ok && rest != "" {
			return strings.ToUpper(rest[:1]) + rest[1:]
		}
	}
	return doc
}

// parse reads the doc comments of a package of this module.
func (g *gen) parse(pkgPath string) error {
	if g.parsed[pkgPath] {
		return nil
	}
	g.parsed[pkgPath] = true
	rel, ok := strings.CutPrefix(pkgPath, Module)
	if !ok {
		return fmt.Errorf("type from package %s outside module %s", pkgPath, Module)
	}
	dir := filepath.Join(g.root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fset := token.NewFileSet()
	for _, n := range names {
		file, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				doc := ts.Doc.Text()
				if doc == "" && len(gd.Specs) == 1 {
					doc = gd.Doc.Text()
				}
				g.typeDocs[pkgPath+"."+ts.Name.Name] = doc
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, field := range st.Fields.List {
					d := field.Doc.Text()
					if d == "" {
						d = field.Comment.Text()
					}
					for _, id := range field.Names {
						g.docs[pkgPath+"."+ts.Name.Name+"."+id.Name] = d
					}
				}
			}
		}
	}
	return nil
}
