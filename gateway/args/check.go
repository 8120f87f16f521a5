package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// Options tune Check for one call.
type Options struct {
	// Write is true for tools that are not read-only: coercions that could
	// change a write's meaning are not applied (enum synonyms).
	Write bool
}

// Warning reports a coercion Check applied. Codes: coerced_boolean,
// coerced_integer, coerced_number, parsed_array, parsed_object,
// enum_synonym.
type Warning struct {
	Argument string // path, as in Problem
	Code     string
	Message  string // for the model: what was sent, how it was read
}

// Problem is one reason the arguments are refused. Codes:
//
//	not_an_object     the arguments are not a JSON object (Argument "")
//	unknown_argument  an argument the tool does not take; Allowed lists
//	                  the names it does take at that level
//	missing_argument  a required argument is absent
//	wrong_type        Expected names the type(s), e.g. "integer"
//	invalid_value     enum, const, pattern, format, bounds, lengths, item
//	                  and member counts; Allowed lists enum values
//	invalid           anything else: not JSON, nested too deeply, no
//	                  alternative of anyOf/oneOf fits, too many problems
type Problem struct {
	// Argument is the path of the argument: "limit", "filter.limit",
	// "ids[2]"; "" for the arguments as a whole.
	Argument string
	Code     string
	Message  string // one or two sentences for the model
	Allowed  []string
	Expected string
}

// Result is the outcome of Check.
type Result struct {
	// Arguments is nil when the arguments are forwarded unchanged, else the
	// re-encoded arguments with the coercions applied (member order and all
	// other values as sent, white space compacted).
	Arguments []byte
	Warnings  []Warning // sorted by Argument
	Problems  []Problem // empty: valid; sorted by Argument, at most MaxProblems
}

// Problem and warning codes.
const (
	CodeNotAnObject     = "not_an_object"
	CodeUnknownArgument = "unknown_argument"
	CodeMissingArgument = "missing_argument"
	CodeWrongType       = "wrong_type"
	CodeInvalidValue    = "invalid_value"
	CodeInvalid         = "invalid"

	CodeCoercedBoolean = "coerced_boolean"
	CodeCoercedInteger = "coerced_integer"
	CodeCoercedNumber  = "coerced_number"
	CodeParsedArray    = "parsed_array"
	CodeParsedObject   = "parsed_object"
	CodeEnumSynonym    = "enum_synonym"
)

// coercion is one value Check replaced, keyed by JSON pointer.
type coercion struct {
	parsed bool           // a string holding JSON, replaced by that JSON
	raw    jsontext.Value // otherwise: the new value
}

// checker holds the state of one Check.
type checker struct {
	s         *Schema
	opts      Options
	root      map[string]any
	problems  []Problem
	seen      map[string]bool
	warnings  []Warning
	coercions map[string]coercion
	ancestors map[string]bool // pointers above a coercion
	unknown   map[string]bool // refused top-level names: not coerced
	values    int             // values read, parsed strings included
}

// Check validates the arguments of one tools/call. Empty (absent)
// arguments are read as {}; JSON null, arrays and scalars are refused
// with not_an_object. See the package documentation for the rules.
func (s *Schema) Check(arguments []byte, o Options) Result {
	data := arguments
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	v, values, err := parseInterned(data, MaxArgumentDepth, nil, s.names)
	if err != nil {
		return Result{Problems: []Problem{parseProblem(err)}}
	}
	if values*s.evaluations > MaxWork {
		return tooMuchWork(values)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return Result{Problems: []Problem{{
			Code:    CodeNotAnObject,
			Message: fmt.Sprintf("The arguments must be a JSON object of named arguments, got %s.", describe(v)),
		}}}
	}
	c := checker{s: s, opts: o, root: obj, values: values}

	// Unknown top-level arguments, whatever additionalProperties says.
	if len(s.props) > 0 {
		for name := range obj {
			if !s.known(name) {
				c.add(unknownProblem([]step{member(name)}, s.props))
				if c.unknown == nil {
					c.unknown = map[string]bool{}
				}
				c.unknown[name] = true
			}
		}
	}

	// Coercions, before validation.
	if s.root != nil {
		c.walkObject(obj, s.root, nil, 1)
		if c.values*s.evaluations > MaxWork {
			return tooMuchWork(c.values)
		}
	}

	// A simple schema that certainly holds needs no validator run
	// (simple.go); any doubt runs it, so problems stay the validator's.
	if s.simple == nil || !s.simple.valid(obj) {
		if err := s.validate(obj); err != nil {
			c.collect(err)
			if len(c.problems) == 0 {
				// Fail closed: the validator refused, so must Check.
				c.add(Problem{Code: CodeInvalid, Message: "The arguments object is not valid for this tool."})
			}
		}
	}

	res := Result{Warnings: c.warnings, Problems: c.finish()}
	slices.SortStableFunc(res.Warnings, func(a, b Warning) int { return strings.Compare(a.Argument, b.Argument) })
	if len(c.coercions) > 0 {
		out, err := reencode(data, c.coercions, c.ancestors)
		if err != nil {
			// Cannot happen for input that parsed; refuse rather than
			// forward something else than what was checked.
			res.Problems = append(res.Problems, Problem{Code: CodeInvalid, Message: "The arguments could not be rewritten after coercion: " + err.Error()})
		}
		res.Arguments = out
	}
	return res
}

func tooMuchWork(values int) Result {
	return Result{Problems: []Problem{{
		Code:    CodeInvalid,
		Message: fmt.Sprintf("The arguments hold %d values, too many to check against this tool's schema; send less per call.", values),
	}}}
}

// validate runs the validator, turning a panic into an error: a call that
// cannot be checked is refused, never forwarded.
func (s *Schema) validate(obj map[string]any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the validator failed: %v", r)
		}
	}()
	return s.sch.Validate(obj)
}

// known reports whether name is a top-level argument of the tool.
func (s *Schema) known(name string) bool {
	if _, ok := s.propSet[name]; ok {
		return true
	}
	for _, re := range s.patterns {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func parseProblem(err error) Problem {
	var pe *parseError
	if errors.As(err, &pe) {
		p := Problem{Argument: displayPath(pe.path)}
		switch {
		case errors.Is(err, errTooDeep):
			p.Code = CodeInvalid
			p.Message = fmt.Sprintf("The arguments are nested more than %d levels deep", MaxArgumentDepth)
			if p.Argument != "" {
				p.Message += " (at " + quote(p.Argument) + ")"
			}
			p.Message += "; send a flatter value."
		case errors.Is(err, errNumber):
			p.Code = CodeInvalidValue
			p.Message = fmt.Sprintf("%s holds a number longer than %d characters or beyond the range of a 64-bit float (exponent over %d).", subject(p.Argument), MaxNumberLength, MaxExponent)
		}
		return p
	}
	msg := strings.TrimPrefix(err.Error(), "jsontext: ")
	return Problem{Code: CodeInvalid, Message: "The arguments are not valid JSON: " + msg + "."}
}

// add records a problem once.
func (c *checker) add(p Problem) {
	key := p.Argument + "\x00" + p.Code + "\x00" + p.Message
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	if c.seen[key] {
		return
	}
	c.seen[key] = true
	c.problems = append(c.problems, p)
}

// finish sorts the problems by argument and caps them at MaxProblems, the
// last one then saying how many more there were.
func (c *checker) finish() []Problem {
	ps := c.problems
	slices.SortStableFunc(ps, func(a, b Problem) int { return strings.Compare(a.Argument, b.Argument) })
	if len(ps) > MaxProblems {
		more := len(ps) - (MaxProblems - 1)
		ps = append(ps[:MaxProblems-1:MaxProblems-1], Problem{
			Code:    CodeInvalid,
			Message: fmt.Sprintf("%d more problems are not listed; fix these first.", more),
		})
	}
	return ps
}

// walkObject applies coercions to the members of obj, at nesting depth
// (obj itself is at depth; the top-level object is 1).
func (c *checker) walkObject(obj map[string]any, vw *view, path []step, depth int) {
	for name, val := range obj {
		if depth == 1 && c.unknown[name] {
			continue
		}
		cv := vw.member(name)
		if cv == nil {
			continue
		}
		if nv, changed := c.walk(val, cv, path, member(name), depth); changed {
			obj[name] = nv
		}
	}
}

func (c *checker) walkArray(arr []any, vw *view, path []step, depth int) {
	for i, val := range arr {
		cv := vw.item(i)
		if cv == nil {
			continue
		}
		if nv, changed := c.walk(val, cv, path, index(i), depth); changed {
			arr[i] = nv
		}
	}
}

// walk coerces v, the member or item at of the container at parent, which
// sits inside depth containers, and descends into it. The path is built
// only when needed.
func (c *checker) walk(v any, vw *view, parent []step, at step, depth int) (any, bool) {
	switch x := v.(type) {
	case string:
		if vw.target == toNothing && vw.enum == nil {
			return v, false
		}
		return c.coerceString(x, vw, appendStep(parent, at), depth)
	case map[string]any:
		if depth < MaxArgumentDepth {
			c.walkObject(x, vw, appendStep(parent, at), depth+1)
		}
	case []any:
		if depth < MaxArgumentDepth {
			c.walkArray(x, vw, appendStep(parent, at), depth+1)
		}
	}
	return v, false
}

// coerceString applies the coercion the view allows to a string value.
func (c *checker) coerceString(x string, vw *view, path []step, depth int) (any, bool) {
	switch vw.target {
	case toBoolean:
		if x == "true" || x == "false" {
			c.record(path, coercion{raw: jsontext.Value(x)}, CodeCoercedBoolean,
				fmt.Sprintf("%s was sent as the string %s and read as the boolean %s; send true or false without quotes.", subject(displayPath(path)), quote(x), x))
			return x == "true", true
		}
	case toInteger:
		if n, ok := integerText(x); ok {
			c.record(path, coercion{raw: jsontext.Value(n)}, CodeCoercedInteger,
				fmt.Sprintf("%s was sent as the string %s and read as the integer %s; send numbers without quotes.", subject(displayPath(path)), quote(x), n))
			return json.Number(n), true
		}
	case toNumber:
		if numberText(x) {
			c.record(path, coercion{raw: jsontext.Value(x)}, CodeCoercedNumber,
				fmt.Sprintf("%s was sent as the string %s and read as the number %s; send numbers without quotes.", subject(displayPath(path)), quote(x), x))
			return json.Number(x), true
		}
	case toArray, toObject:
		t := strings.TrimSpace(x)
		open, code, what := byte('['), CodeParsedArray, "array"
		if vw.target == toObject {
			open, code, what = '{', CodeParsedObject, "object"
		}
		if t == "" || t[0] != open || depth >= MaxArgumentDepth {
			break
		}
		parsed, n, err := parseInterned([]byte(t), MaxArgumentDepth-depth, nil, c.s.names)
		if err != nil {
			break
		}
		c.values += n
		c.record(path, coercion{parsed: true}, code,
			fmt.Sprintf("%s was sent as a string holding a JSON %s and read as that %s; send the %s itself, not a string.", subject(displayPath(path)), what, what, what))
		switch x := parsed.(type) {
		case []any:
			c.walkArray(x, vw, path, depth+1)
		case map[string]any:
			c.walkObject(x, vw, path, depth+1)
		}
		return parsed, true
	}
	if !c.opts.Write {
		if syn, ok := vw.synonym(x); ok {
			raw, _ := jsontext.AppendQuote(nil, syn)
			c.record(path, coercion{raw: raw}, CodeEnumSynonym,
				fmt.Sprintf("%s was sent as %s and read as %s; use the exact value.", subject(displayPath(path)), quote(x), quote(syn)))
			return syn, true
		}
	}
	return x, false
}

func (c *checker) record(path []step, co coercion, code, msg string) {
	if c.coercions == nil {
		c.coercions = map[string]coercion{}
		c.ancestors = map[string]bool{}
	}
	c.coercions[pointer(path)] = co
	for i := range path {
		c.ancestors[pointer(path[:i])] = true
	}
	c.warnings = append(c.warnings, Warning{Argument: displayPath(path), Code: code, Message: msg})
}

// integerText accepts a string holding an integer in JSON's number syntax,
// optionally with a zero fraction ("5", "-12", "5.0"); no sign "+", no
// white space, no leading zeros, no exponent. It returns the integer.
func integerText(s string) (string, bool) {
	if len(s) > MaxNumberLength {
		return "", false
	}
	intPart, frac, hasFrac := strings.Cut(s, ".")
	digits := strings.TrimPrefix(intPart, "-")
	if digits == "" || !allDigits(digits) || (len(digits) > 1 && digits[0] == '0') {
		return "", false
	}
	if hasFrac && (frac == "" || strings.Trim(frac, "0") != "") {
		return "", false
	}
	return intPart, true
}

// numberText accepts a string that is exactly a JSON number (RFC 8259
// grammar: no "+", no white space, no leading zeros, no NaN or Infinity),
// within MaxNumberLength and MaxExponent.
func numberText(s string) bool {
	if s == "" || !numberBounded(s) {
		return false
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	return i == len(s)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
