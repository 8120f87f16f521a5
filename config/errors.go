package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FieldError is one problem in a configuration. Parse, Load and Validate
// return an errors.Join of FieldErrors, one per problem, in document order;
// use errors.As to inspect one, or the Unwrap() []error of the joined error
// to list them all.
//
// Its text is "source:line:column: path: message", with the parts that are
// unknown left out, e.g.
//
//	mcpgate.yaml:7:5: upstreams[0].tols: unknown field (did you mean "tools"?)
type FieldError struct {
	// Source names the file (as given to Load or Parse); "" when unknown.
	Source string
	// Line and Column are 1-based; 0 when unknown (Validate alone knows no
	// positions; Load and Parse fill them in).
	Line, Column int
	// Path is the key path, e.g. "upstreams[0].url", "policy.dirs[1]";
	// "" for the document as a whole.
	Path string
	// Msg says what is wrong and, where it helps, what to write instead.
	Msg string
	// Err is the underlying cause, if any (e.g. from url.Parse).
	Err error
}

// Error implements error.
func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
		if e.Line > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteByte(':')
				b.WriteString(strconv.Itoa(e.Column))
			}
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *FieldError) Unwrap() error { return e.Err }

// problems collects FieldErrors in order.
type problems []*FieldError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *problems) addErr(path string, err error, format string, args ...any) {
	*p = append(*p, &FieldError{Path: path, Msg: fmt.Sprintf(format, args...), Err: err})
}

// join returns the problems as one error, or nil.
func (p problems) join() error {
	if len(p) == 0 {
		return nil
	}
	errs := make([]error, len(p))
	for i, e := range p {
		errs[i] = e
	}
	return errors.Join(errs...)
}

// keyPath formats the path of a map entry or struct field below parent:
// parent.key when key is a plain identifier, parent["key"] otherwise.
func keyPath(parent, key string) string {
	if isPlainKey(key) {
		if parent == "" {
			return key
		}
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// indexPath formats the path of a sequence element below parent.
func indexPath(parent string, i int) string {
	return parent + "[" + strconv.Itoa(i) + "]"
}

func isPlainKey(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		default:
			return false
		}
	}
	return true
}

// under reports whether path is p itself or lies below it.
func under(path, p string) bool {
	if p == "" || path == p {
		return true
	}
	return strings.HasPrefix(path, p) && (path[len(p)] == '.' || path[len(p)] == '[')
}

// parentPath strips the last segment of a path built by keyPath/indexPath
// ("a.b[2]" -> "a.b", "a.b" -> "a", "a" -> ""). Quoted segments are
// handled: "t[\"x.y\"]" -> "t".
func parentPath(path string) string {
	if strings.HasSuffix(path, "]") {
		// Find the '[' that opens the last segment: for a quoted key it
		// is the one followed by the quote that strconv.Quote produced.
		if i := strings.LastIndex(path, "[\""); i >= 0 && strings.HasSuffix(path, "\"]") {
			if _, err := strconv.Unquote(path[i+1 : len(path)-1]); err == nil {
				return path[:i]
			}
		}
		if i := strings.LastIndexByte(path, '['); i >= 0 {
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}
