package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits on JSON values. They bound the work a hostile schema or hostile
// arguments can cause; no real tool needs more.
const (
	// MaxSchemaBytes is the largest inputSchema Compile accepts.
	MaxSchemaBytes = 256 << 10
	// MaxSchemaDepth is the deepest JSON nesting of an inputSchema.
	MaxSchemaDepth = 64
	// MaxSubschemas is the most schema objects one inputSchema may hold.
	MaxSubschemas = 4096
	// MaxArgumentDepth is the deepest nesting of arguments Check accepts
	// (the arguments object itself is level 1).
	MaxArgumentDepth = 32
	// MaxNumberLength is the longest number literal accepted, in bytes,
	// in schemas and arguments; MaxExponent bounds its exponent. Longer or
	// larger numbers would make exact big-number checks slow, and numbers
	// beyond float64's range (exponents over 308) are what most upstreams
	// read as infinity or fail on.
	MaxNumberLength = 64
	MaxExponent     = 308
	// MaxProblems caps Result.Problems.
	MaxProblems = 20
	// MaxWork bounds one Check: the number of values in the arguments
	// times the most subschemas the schema may apply to one value (at
	// most MaxEvaluations, 1–5 for ordinary schemas). Arguments over it
	// are refused unchecked; with an ordinary schema that takes a few
	// hundred thousand values, more than a sane request body holds.
	MaxWork = 1 << 20
)

// errTooDeep and errNumber are the parser's own refusals; a syntax error
// from jsontext is returned as it is.
var (
	errTooDeep = errors.New("nested too deeply")
	errNumber  = errors.New("number too long or exponent too large")
)

// parseError is a refusal of the parser with the path where it happened,
// outermost token first.
type parseError struct {
	path []step
	err  error
}

func (e *parseError) Error() string { return e.err.Error() }
func (e *parseError) Unwrap() error { return e.err }

// parser turns strict JSON (no duplicate names, valid UTF-8: jsontext's
// defaults) into the value tree the validator works on: map[string]any,
// []any, string, json.Number, bool and nil.
type parser struct {
	dec      *jsontext.Decoder
	maxDepth int
	// orders, when not nil, receives the member order of every object that
	// is the value of a "properties" keyword, keyed by its JSON pointer
	// (schemas only; arguments keep their order through the raw bytes).
	orders map[string][]string
	// names interns member names (the schema's property names), sparing an
	// allocation per known name.
	names map[string]string
	// values counts the values read.
	values int
}

type pooledDecoder struct {
	buf bytes.Buffer
	dec jsontext.Decoder
}

var decoders = sync.Pool{New: func() any { return new(pooledDecoder) }}

// parseValue parses data as one JSON value nested at most maxDepth levels
// (a scalar is level 0, an object or array level 1).
func parseValue(data []byte, maxDepth int, orders map[string][]string) (any, error) {
	v, _, err := parseInterned(data, maxDepth, orders, nil)
	return v, err
}

// parseInterned is parseValue with an intern table for member names; it
// also returns the number of values read.
func parseInterned(data []byte, maxDepth int, orders map[string][]string, names map[string]string) (any, int, error) {
	pd := decoders.Get().(*pooledDecoder)
	defer func() {
		pd.buf.Reset()
		pd.dec.Reset(&pd.buf) // drop the reference to data
		decoders.Put(pd)
	}()
	pd.buf.Reset()
	pd.buf.Write(data)
	pd.dec.Reset(&pd.buf)
	p := parser{dec: &pd.dec, maxDepth: maxDepth, orders: orders, names: names}
	v, err := p.value(0, "", false)
	if err != nil {
		return nil, 0, err
	}
	if _, err := pd.dec.ReadToken(); err == nil {
		return nil, 0, errors.New("unexpected data after the top-level value")
	} else if !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	return v, p.values, nil
}

// value reads one value at nesting depth (number of enclosing containers).
// ptr is the value's JSON pointer, tracked only when p.orders is set;
// inProps tells that the value is the "properties" member of a schema.
func (p *parser) value(depth int, ptr string, inProps bool) (any, error) {
	p.values++
	switch p.dec.PeekKind() {
	case '{':
		if depth >= p.maxDepth {
			return nil, &parseError{err: errTooDeep}
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		m := make(map[string]any)
		var order []string
		for p.dec.PeekKind() != '}' {
			name, err := p.name()
			if err != nil {
				return nil, err
			}
			var childPtr string
			if p.orders != nil {
				childPtr = ptr + "/" + escapePointer(name)
				if inProps {
					order = append(order, name)
				}
			}
			v, err := p.value(depth+1, childPtr, p.orders != nil && !inProps && name == "properties")
			if err != nil {
				return nil, prefix(err, member(name))
			}
			m[name] = v
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		if inProps {
			p.orders[ptr] = order
		}
		return m, nil
	case '[':
		if depth >= p.maxDepth {
			return nil, &parseError{err: errTooDeep}
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		a := []any{}
		for i := 0; p.dec.PeekKind() != ']'; i++ {
			var childPtr string
			if p.orders != nil {
				childPtr = ptr + "/" + strconv.Itoa(i)
			}
			v, err := p.value(depth+1, childPtr, false)
			if err != nil {
				return nil, prefix(err, index(i))
			}
			a = append(a, v)
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		return a, nil
	case '"':
		tok, err := p.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		return tok.String(), nil
	case '0':
		tok, err := p.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		raw := tok.String()
		if !numberBounded(raw) {
			return nil, &parseError{err: errNumber}
		}
		return json.Number(raw), nil
	case 't', 'f':
		tok, err := p.dec.ReadToken()
		if err != nil {
			return nil, err
		}
		return tok.Bool(), nil
	case 'n':
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		return nil, nil
	default:
		// Invalid input or end of data: let ReadToken describe it.
		_, err := p.dec.ReadToken()
		if err == nil {
			err = errors.New("unexpected token")
		}
		return nil, err
	}
}

// name reads a member name.
func (p *parser) name() (string, error) {
	raw, err := p.dec.ReadValue()
	if err != nil {
		return "", err
	}
	if len(raw) >= 2 && bytes.IndexByte(raw, '\\') < 0 {
		inner := raw[1 : len(raw)-1]
		if s, ok := p.names[string(inner)]; ok {
			return s, nil
		}
		return string(inner), nil
	}
	b, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// prefix adds the token of the enclosing member to a parser refusal.
func prefix(err error, s step) error {
	var pe *parseError
	if errors.As(err, &pe) {
		pe.path = append([]step{s}, pe.path...)
	}
	return err
}

// numberBounded reports whether a JSON number literal (already checked by
// the decoder) is short enough and has a small enough exponent.
func numberBounded(raw string) bool {
	if len(raw) > MaxNumberLength {
		return false
	}
	i := strings.IndexAny(raw, "eE")
	if i < 0 {
		return true
	}
	exp := strings.TrimLeft(raw[i+1:], "+-")
	exp = strings.TrimLeft(exp, "0")
	if len(exp) > 4 {
		return false
	}
	n, _ := strconv.Atoi(exp)
	if n > MaxExponent {
		return false
	}
	// Within float64's range: 9e308 has a small exponent but is infinite
	// to an upstream reading float64 (strconv reports the range error).
	_, err := strconv.ParseFloat(raw, 64)
	return err == nil
}

func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
