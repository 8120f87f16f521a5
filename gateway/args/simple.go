package args

import (
	"encoding/json"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Most tool schemas are plain: an object of typed properties, a required
// list, perhaps enums, bounds and nested objects or arrays of the same.
// For those, validation is a walk whose every step is evident, and the
// general validator — about ten allocations per call (its error values,
// scopes and evaluation bookkeeping) — is not needed to learn that valid
// arguments are valid.
//
// simpleNode is a compiled subschema that uses only such keywords. Its
// valid method answers "certainly valid" (true) or "not sure" (false);
// Check skips the validator only on true, and on false runs it exactly as
// before, so every problem a refused call gets is still the validator's.
// The shortcut is exact because true is returned only when every keyword
// of every subschema the validator would apply holds, checked the way the
// validator checks it (jsonschema v6 validator.go: type with its integer
// rule, enum, format through the same Format.Validate, pattern through the
// same compiled Regexp, lengths in runes, item and member counts, numeric
// bounds compared exactly, required, properties, additionalProperties,
// items). A keyword outside that list — any exported field of
// jsonschema.Schema not named in simpleFields, including fields a later
// version of the library adds — makes the subschema, and so the whole
// schema, not simple: the validator runs as before. TestSimpleMatchesValidator
// and FuzzSimpleValid compare the two on many schemas and values.
type simpleNode struct {
	types    simpleTypes // 0: any type
	enum     []string    // string enum (nil: none)
	format   *jsonschema.Format
	pattern  jsonschema.Regexp
	minLen   int // -1: none
	maxLen   int // -1: none
	minItems int // -1: none
	maxItems int // -1: none
	minProps int // -1: none
	maxProps int // -1: none
	// Numeric bounds as integers (exact for integer values; any other
	// number answers "not sure").
	bounds   []intBound
	required []string
	props    map[string]*simpleNode
	// additional applies to members not in props: nil with closed false
	// allows them, closed refuses them.
	additional *simpleNode
	closed     bool
	items      *simpleNode // every array item (nil: none)
}

// simpleTypes is a set of JSON Schema types (jsonschema v6's rule: a value
// of type number satisfies "integer" when it is an integer).
type simpleTypes uint8

const (
	stNull simpleTypes = 1 << iota
	stBoolean
	stNumber
	stInteger
	stString
	stArray
	stObject
)

var simpleTypeBits = map[string]simpleTypes{
	"null": stNull, "boolean": stBoolean, "number": stNumber, "integer": stInteger,
	"string": stString, "array": stArray, "object": stObject,
}

// intBound is one numeric bound: the value v compared with n must give a
// result for which ok holds.
type intBound struct {
	n  int64
	ok func(cmp int) bool
}

// simpleFields are the exported fields of jsonschema.Schema a simple
// subschema may set: annotations and bookkeeping that never change a
// validation result, and the keywords simpleNode checks. Every other
// exported field must hold its zero value.
var simpleFields = map[string]bool{
	// Bookkeeping and annotations.
	"DraftVersion": true, "Location": true, "Title": true, "Description": true,
	"Default": true, "Comment": true, "ReadOnly": true, "WriteOnly": true,
	"Examples": true, "Deprecated": true,
	// Keywords checked by simpleNode.
	"Types": true, "Enum": true, "Format": true, "Pattern": true,
	"MinLength": true, "MaxLength": true, "MinItems": true, "MaxItems": true,
	"MinProperties": true, "MaxProperties": true,
	"Minimum": true, "Maximum": true, "ExclusiveMinimum": true, "ExclusiveMaximum": true,
	"Required": true, "Properties": true, "AdditionalProperties": true,
	"Items": true, "Items2020": true,
}

// compileSimple returns the simple form of sch, nil when sch (or a
// subschema it applies) uses a keyword simpleNode does not check. depth
// bounds the recursion (a schema without $ref is a finite tree; the bound
// is only a guard).
func compileSimple(sch *jsonschema.Schema, depth int) *simpleNode {
	if sch == nil || depth > MaxSchemaDepth {
		return nil
	}
	rv := reflect.ValueOf(sch).Elem()
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		if !f.IsExported() || simpleFields[f.Name] {
			continue
		}
		if !rv.Field(i).IsZero() {
			return nil
		}
	}
	n := &simpleNode{minLen: -1, maxLen: -1, minItems: -1, maxItems: -1, minProps: -1, maxProps: -1,
		format: sch.Format, pattern: sch.Pattern, required: sch.Required}
	if sch.Types != nil {
		for _, t := range sch.Types.ToStrings() {
			bit, ok := simpleTypeBits[t]
			if !ok {
				return nil
			}
			n.types |= bit
		}
	}
	if sch.Enum != nil {
		n.enum = make([]string, 0, len(sch.Enum.Values))
		for _, v := range sch.Enum.Values {
			s, ok := v.(string)
			if !ok {
				return nil
			}
			n.enum = append(n.enum, s)
		}
	}
	for _, c := range []struct {
		src *int
		dst *int
	}{{sch.MinLength, &n.minLen}, {sch.MaxLength, &n.maxLen}, {sch.MinItems, &n.minItems},
		{sch.MaxItems, &n.maxItems}, {sch.MinProperties, &n.minProps}, {sch.MaxProperties, &n.maxProps}} {
		if c.src != nil {
			if *c.src < 0 {
				return nil
			}
			*c.dst = *c.src
		}
	}
	for _, b := range []struct {
		r  *big.Rat
		ok func(int) bool
	}{
		{sch.Minimum, func(c int) bool { return c >= 0 }},
		{sch.Maximum, func(c int) bool { return c <= 0 }},
		{sch.ExclusiveMinimum, func(c int) bool { return c > 0 }},
		{sch.ExclusiveMaximum, func(c int) bool { return c < 0 }},
	} {
		if b.r == nil {
			continue
		}
		if !b.r.IsInt() || !b.r.Num().IsInt64() {
			return nil
		}
		n.bounds = append(n.bounds, intBound{b.r.Num().Int64(), b.ok})
	}
	if len(sch.Properties) > 0 {
		n.props = make(map[string]*simpleNode, len(sch.Properties))
		for name, ps := range sch.Properties {
			c := compileSimple(ps, depth+1)
			if c == nil {
				return nil
			}
			n.props[name] = c
		}
	}
	switch a := sch.AdditionalProperties.(type) {
	case nil:
	case bool:
		n.closed = !a
	case *jsonschema.Schema:
		if n.additional = compileSimple(a, depth+1); n.additional == nil {
			return nil
		}
	default:
		return nil
	}
	var items *jsonschema.Schema
	if sch.DraftVersion < 2020 {
		switch it := sch.Items.(type) {
		case nil:
		case *jsonschema.Schema:
			items = it
		default: // positional items
			return nil
		}
		if sch.Items2020 != nil {
			return nil // not read by the validator in this draft; be safe
		}
	} else {
		if sch.Items != nil {
			return nil
		}
		items = sch.Items2020
	}
	if items != nil {
		if n.items = compileSimple(items, depth+1); n.items == nil {
			return nil
		}
	}
	return n
}

// valid reports whether v certainly satisfies the subschema; false means
// "not sure" (the validator decides).
func (n *simpleNode) valid(v any) bool {
	if n.types != 0 && !n.typeOK(v) {
		return false
	}
	if n.enum != nil {
		s, ok := v.(string)
		if !ok || !slices.Contains(n.enum, s) {
			return false
		}
	}
	if n.format != nil && n.format.Validate(v) != nil {
		return false
	}
	switch x := v.(type) {
	case string:
		if n.minLen >= 0 || n.maxLen >= 0 {
			l := utf8.RuneCountInString(x)
			if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
				return false
			}
		}
		if n.pattern != nil && !n.pattern.MatchString(x) {
			return false
		}
	case json.Number:
		if len(n.bounds) > 0 {
			i, ok := plainInteger(x)
			if !ok {
				return false
			}
			for _, b := range n.bounds {
				c := 0
				switch {
				case i < b.n:
					c = -1
				case i > b.n:
					c = 1
				}
				if !b.ok(c) {
					return false
				}
			}
		}
	case map[string]any:
		if (n.minProps >= 0 && len(x) < n.minProps) || (n.maxProps >= 0 && len(x) > n.maxProps) {
			return false
		}
		for _, r := range n.required {
			if _, ok := x[r]; !ok {
				return false
			}
		}
		for name, val := range x {
			if c, ok := n.props[name]; ok {
				if !c.valid(val) {
					return false
				}
				continue
			}
			if n.closed || (n.additional != nil && !n.additional.valid(val)) {
				return false
			}
		}
	case []any:
		if (n.minItems >= 0 && len(x) < n.minItems) || (n.maxItems >= 0 && len(x) > n.maxItems) {
			return false
		}
		if n.items != nil {
			for _, e := range x {
				if !n.items.valid(e) {
					return false
				}
			}
		}
	case bool, nil:
	default:
		return false // a value the parser never makes
	}
	return true
}

// typeOK is the validator's type rule for the value kinds the parser and
// the coercions make.
func (n *simpleNode) typeOK(v any) bool {
	var t simpleTypes
	switch x := v.(type) {
	case nil:
		t = stNull
	case bool:
		t = stBoolean
	case string:
		t = stString
	case map[string]any:
		t = stObject
	case []any:
		t = stArray
	case json.Number:
		if n.types&stNumber != 0 {
			return true
		}
		// "integer" alone: only a plain integer literal is certainly one
		// (the validator also accepts 1.0 and 1e2; it decides those).
		_, ok := plainInteger(x)
		return ok && n.types&stInteger != 0
	default:
		return false
	}
	return n.types&t != 0
}

// plainInteger reads a number literal made of an optional '-' and digits
// only, within int64.
func plainInteger(x json.Number) (int64, bool) {
	s := string(x)
	digits := s
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if digits == "" || !allDigits(digits) {
		return 0, false
	}
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}
