package args

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"

	"github.com/mcpgate/mcpgate/gateway/clip"
)

// collect turns the validator's error tree into Problems.
func (c *checker) collect(err error) {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		c.add(Problem{Code: CodeInvalid, Message: "The arguments could not be checked: " + oneLine(err.Error())})
		return
	}
	for _, p := range c.problemsOf(verr) {
		c.add(p)
	}
}

// problemsOf converts one error (and its causes) into problems.
func (c *checker) problemsOf(e *jsonschema.ValidationError) []Problem {
	path, got := instancePath(c.root, e.InstanceLocation)
	if c.underUnknown(path) {
		return nil // the whole argument is refused already
	}
	arg := displayPath(path)
	subj := subject(arg)
	one := func(code, msg string) []Problem { return []Problem{{Argument: arg, Code: code, Message: msg}} }

	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference, *kind.AllOf, *kind.ContentSchema:
		if len(e.Causes) == 0 {
			return one(CodeInvalid, subj+" is not valid for this tool.")
		}
		var out []Problem
		for _, cause := range e.Causes {
			out = append(out, c.problemsOf(cause)...)
		}
		return out

	case *kind.AnyOf:
		return c.alternatives(e, path, got)
	case *kind.OneOf:
		if len(k.Subschemas) == 0 {
			return c.alternatives(e, path, got)
		}
		return one(CodeInvalid, fmt.Sprintf("%s fits more than one of its accepted forms (alternatives %d and %d), so its meaning is unclear; send a value that fits exactly one.", subj, k.Subschemas[0]+1, k.Subschemas[1]+1))
	case *kind.Not:
		return one(CodeInvalidValue, fmt.Sprintf("%s has a value this tool does not accept (%s).", subj, describe(got)))

	case *kind.FalseSchema:
		if arg == "" {
			return one(CodeInvalid, "This tool accepts no arguments of this shape.")
		}
		var allowed []string
		if len(path) == 1 {
			allowed = c.s.Properties()
		}
		return []Problem{unknownProblem(path, allowed)}
	case *kind.AdditionalProperties:
		var allowed []string
		if x := c.s.byLocation[e.SchemaURL]; x != nil {
			allowed = c.s.propertyOrder(x)
		}
		var out []Problem
		for _, name := range k.Properties {
			child := appendStep(path, member(name))
			if !c.underUnknown(child) {
				out = append(out, unknownProblem(child, allowed))
			}
		}
		return out
	case *kind.PropertyNames:
		if c.underUnknown([]step{member(k.Property)}) && len(path) == 0 {
			return nil
		}
		p := unknownProblem(appendStep(path, member(k.Property)), nil)
		p.Message = fmt.Sprintf("Argument %s is not accepted by this tool: its name is not allowed here.", quote(p.Argument))
		return []Problem{p}

	case *kind.Required:
		var out []Problem
		for _, name := range k.Missing {
			a := displayPath(appendStep(path, member(name)))
			out = append(out, Problem{Argument: a, Code: CodeMissingArgument, Message: fmt.Sprintf("Argument %s is required.", quote(a))})
		}
		return out
	case *kind.Dependency:
		return c.dependent(path, k.Prop, k.Missing)
	case *kind.DependentRequired:
		return c.dependent(path, k.Prop, k.Missing)

	case *kind.Type:
		want := nullLast(k.Want)
		expected := typeList(want)
		return []Problem{{Argument: arg, Code: CodeWrongType, Expected: strings.Join(want, " or "),
			Message: fmt.Sprintf("%s must be %s, got %s.", subj, expected, describe(got))}}

	case *kind.Enum:
		allowed := make([]string, len(k.Want))
		for i, w := range k.Want {
			allowed[i] = plain(w)
		}
		msg := fmt.Sprintf("%s must be one of %s; got %s.", subj, listValues(k.Want, 12), describe(got))
		if s, ok := got.(string); ok {
			if hint := closestEnum(s, k.Want); hint != "" {
				msg += fmt.Sprintf(" Did you mean %s?", quote(hint))
			}
		}
		return []Problem{{Argument: arg, Code: CodeInvalidValue, Allowed: allowed, Message: msg}}
	case *kind.Const:
		return []Problem{{Argument: arg, Code: CodeInvalidValue, Allowed: []string{plain(k.Want)},
			Message: fmt.Sprintf("%s must be %s; got %s.", subj, literal(k.Want), describe(got))}}
	case *kind.Format:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be a valid %s; got %s.", subj, k.Want, describe(got)))
	case *kind.Pattern:
		return one(CodeInvalidValue, fmt.Sprintf("%s must match the pattern %s; got %s.", subj, k.Want, quote(k.Got)))

	case *kind.MinLength:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be at least %s long; got %d.", subj, plural(k.Want, "character"), k.Got))
	case *kind.MaxLength:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be at most %s long; got %d.", subj, plural(k.Want, "character"), k.Got))
	case *kind.Minimum:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be at least %s; got %s.", subj, ratText(k.Want), numText(got, k.Got)))
	case *kind.Maximum:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be at most %s; got %s.", subj, ratText(k.Want), numText(got, k.Got)))
	case *kind.ExclusiveMinimum:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be greater than %s; got %s.", subj, ratText(k.Want), numText(got, k.Got)))
	case *kind.ExclusiveMaximum:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be less than %s; got %s.", subj, ratText(k.Want), numText(got, k.Got)))
	case *kind.MultipleOf:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be a multiple of %s; got %s.", subj, ratText(k.Want), numText(got, k.Got)))

	case *kind.MinItems:
		return one(CodeInvalidValue, fmt.Sprintf("%s must have at least %s; got %d.", subj, plural(k.Want, "item"), k.Got))
	case *kind.MaxItems:
		return one(CodeInvalidValue, fmt.Sprintf("%s must have at most %s; got %d.", subj, plural(k.Want, "item"), k.Got))
	case *kind.AdditionalItems:
		return one(CodeInvalidValue, fmt.Sprintf("%s has %s more than this tool accepts.", subj, plural(k.Count, "item")))
	case *kind.UniqueItems:
		return one(CodeInvalidValue, fmt.Sprintf("%s must not repeat items: items [%d] and [%d] are equal.", subj, k.Duplicates[0], k.Duplicates[1]))
	case *kind.Contains:
		return one(CodeInvalidValue, subj+" must contain at least one item of the required kind.")
	case *kind.MinContains:
		return one(CodeInvalidValue, fmt.Sprintf("%s must contain at least %s of the required kind; got %d.", subj, plural(k.Want, "item"), len(k.Got)))
	case *kind.MaxContains:
		return one(CodeInvalidValue, fmt.Sprintf("%s must contain at most %s of the required kind; got %d.", subj, plural(k.Want, "item"), len(k.Got)))
	case *kind.MinProperties:
		return one(CodeInvalidValue, fmt.Sprintf("%s must have at least %s; got %d.", subj, plural(k.Want, "member"), k.Got))
	case *kind.MaxProperties:
		return one(CodeInvalidValue, fmt.Sprintf("%s must have at most %s; got %d.", subj, plural(k.Want, "member"), k.Got))
	case *kind.ContentEncoding:
		return one(CodeInvalidValue, fmt.Sprintf("%s must be %s-encoded.", subj, k.Want))
	case *kind.ContentMediaType:
		return one(CodeInvalidValue, fmt.Sprintf("%s must hold %s content.", subj, k.Want))

	case *kind.RefCycle:
		return one(CodeInvalid, "The tool's input schema loops back on itself here, so mcpgate cannot check this call; report it to the tool's owner.")
	}
	return one(CodeInvalid, subj+" is not valid for this tool.")
}

// underUnknown reports whether path is, or is inside, a top-level argument
// already refused as unknown.
func (c *checker) underUnknown(path []step) bool {
	return len(path) > 0 && path[0].index < 0 && c.unknown[path[0].name]
}

// dependent reports the arguments that become required when prop is given.
func (c *checker) dependent(path []step, prop string, missing []string) []Problem {
	given := displayPath(appendStep(path, member(prop)))
	var out []Problem
	for _, name := range missing {
		a := displayPath(appendStep(path, member(name)))
		out = append(out, Problem{Argument: a, Code: CodeMissingArgument,
			Message: fmt.Sprintf("Argument %s is required when %s is given.", quote(a), quote(given))})
	}
	return out
}

// alternatives reports a value that fits none of anyOf's or oneOf's
// subschemas. If the value's type fits exactly one alternative, that
// alternative's own problems are the useful ones; if it fits none, one
// wrong_type problem lists every accepted type; otherwise one invalid
// problem quotes the first problem of each alternative.
func (c *checker) alternatives(e *jsonschema.ValidationError, path []step, got any) []Problem {
	arg := displayPath(path)
	var fitting [][]Problem
	var types []string
	var firsts []string
	for _, branch := range e.Causes {
		ps := c.problemsOf(branch)
		typeMiss := false
		for _, p := range ps {
			if p.Code == CodeWrongType && p.Argument == arg {
				typeMiss = true
				for _, t := range strings.Split(p.Expected, " or ") {
					if !containsString(types, t) {
						types = append(types, t)
					}
				}
			}
		}
		if !typeMiss {
			fitting = append(fitting, ps)
		}
		if len(ps) > 0 {
			firsts = append(firsts, ps[0].Message)
		}
	}
	switch {
	case len(fitting) == 1 && len(fitting[0]) > 0:
		return fitting[0]
	case len(fitting) == 0 && len(types) > 0:
		return []Problem{{Argument: arg, Code: CodeWrongType, Expected: strings.Join(types, " or "),
			Message: fmt.Sprintf("%s must be %s, got %s.", subject(arg), typeList(types), describe(got))}}
	}
	msg := fmt.Sprintf("%s fits none of its %d accepted forms.", subject(arg), len(e.Causes))
	for i, f := range firsts {
		if i == 3 {
			msg += " …"
			break
		}
		msg += fmt.Sprintf(" Form %d: %s", i+1, f)
	}
	return []Problem{{Argument: arg, Code: CodeInvalid, Message: msg}}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// unknownProblem refuses an argument the tool does not take.
func unknownProblem(path []step, allowed []string) Problem {
	arg := displayPath(path)
	msg := fmt.Sprintf("Argument %s is not accepted by this tool.", quote(arg))
	name := path[len(path)-1].name
	if hint := closestName(name, allowed); hint != "" {
		msg += fmt.Sprintf(" Did you mean %s?", quote(hint))
	}
	if len(allowed) > 0 {
		const shown = 30
		list := strings.Join(allowed[:min(len(allowed), shown)], ", ")
		if len(allowed) > shown {
			list += fmt.Sprintf(", … (%d more)", len(allowed)-shown)
		}
		msg += " Accepted here: " + list + "."
	} else {
		msg += " Remove it."
	}
	var list []string
	if len(allowed) > 0 {
		list = append(list, allowed...)
	}
	return Problem{Argument: arg, Code: CodeUnknownArgument, Message: msg, Allowed: list}
}

// closestName suggests the one allowed name that differs from name only
// in case, or, for names of four or more characters, by one edit (two for
// names of six or more).
func closestName(name string, allowed []string) string {
	best, bestDist, count := "", 3, 0
	n := utf8.RuneCountInString(name)
	for _, a := range allowed {
		if strings.EqualFold(a, name) {
			return a
		}
		m := min(n, utf8.RuneCountInString(a))
		limit := 0
		switch {
		case m >= 6:
			limit = 2
		case m >= 4:
			limit = 1
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(a), 2)
		if d > limit {
			continue
		}
		switch {
		case d < bestDist:
			best, bestDist, count = a, d, 1
		case d == bestDist:
			count++
		}
	}
	if count != 1 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or cap+1 when it is
// over cap.
func editDistance(a, b string, cap int) int {
	ra, rb := []rune(a), []rune(b)
	if d := len(ra) - len(rb); d > cap || -d > cap {
		return cap + 1
	}
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin > cap {
			return cap + 1
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// closestEnum returns the enum value s is a synonym of, if exactly one.
func closestEnum(s string, values []any) string {
	key := normaliseEnum(s)
	found := ""
	for _, v := range values {
		str, ok := v.(string)
		if !ok || normaliseEnum(str) != key {
			continue
		}
		if found != "" {
			return ""
		}
		found = str
	}
	return found
}

// subject names the argument at the start of a message.
func subject(arg string) string {
	if arg == "" {
		return "The arguments object"
	}
	return "Argument " + quote(arg)
}

// quote quotes s for a message, cut by clip.Value.
func quote(s string) string {
	return strconv.Quote(clip.Value(s))
}

// describe names a value for a message: `a string "ten"`, `the number
// 5.5`, `the boolean true`, `null`, `an array`, `an object`.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string " + quote(x)
	case json.Number:
		return "the number " + string(x)
	case bool:
		return "the boolean " + strconv.FormatBool(x)
	case []any:
		return fmt.Sprintf("an array of %s", plural(len(x), "item"))
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%v", v)
}

// nullLast orders type names as written, but with "null" last: "string or
// null" reads better than "null or string".
func nullLast(types []string) []string {
	out := make([]string, 0, len(types))
	hasNull := false
	for _, t := range types {
		if t == "null" {
			hasNull = true
			continue
		}
		out = append(out, t)
	}
	if hasNull {
		out = append(out, "null")
	}
	return out
}

// typeList renders JSON Schema type names with articles: "an integer",
// "a string or null".
func typeList(types []string) string {
	parts := make([]string, len(types))
	for i, t := range types {
		switch t {
		case "null":
			parts[i] = "null"
		case "integer", "object", "array":
			parts[i] = "an " + t
		default:
			parts[i] = "a " + t
		}
	}
	return strings.Join(parts, " or ")
}

// plain renders a schema value for an Allowed list: strings as they are,
// anything else as JSON.
func plain(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return literal(v)
}

// literal renders a schema value as JSON.
func literal(v any) string {
	switch x := v.(type) {
	case string:
		return quote(x)
	case json.Number:
		return string(x)
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

func listValues(values []any, max int) string {
	parts := make([]string, 0, min(len(values), max)+1)
	for i, v := range values {
		if i == max {
			parts = append(parts, fmt.Sprintf("… (%d more)", len(values)-max))
			break
		}
		parts = append(parts, literal(v))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// ratText renders a schema bound.
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.RatString()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// numText renders the number that broke a bound, as sent when possible.
func numText(v any, r *big.Rat) string {
	if n, ok := v.(json.Number); ok {
		return string(n)
	}
	return ratText(r)
}
