package args

import (
	"strconv"
	"strings"
)

// step is one level of a path into the arguments: a member name, or an
// array index when index >= 0.
type step struct {
	name  string
	index int
}

func member(name string) step { return step{name: name, index: -1} }
func index(i int) step        { return step{index: i} }

// displayPath renders a path the way Problems and Warnings name arguments:
// members joined by ".", indexes as "[i]": "filter.limit", "ids[2]",
// "items[0].name". The top level is "".
func displayPath(path []step) string {
	var b strings.Builder
	for i, s := range path {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.name)
	}
	return b.String()
}

// pointer renders a path as a JSON pointer (RFC 6901).
func pointer(path []step) string {
	var b strings.Builder
	for _, s := range path {
		b.WriteByte('/')
		if s.index >= 0 {
			b.WriteString(strconv.Itoa(s.index))
		} else {
			b.WriteString(escapePointer(s.name))
		}
	}
	return b.String()
}

// instancePath turns the validator's instance location into steps, asking
// the arguments which tokens are array indexes.
func instancePath(root any, tokens []string) ([]step, any) {
	path := make([]step, 0, len(tokens))
	cur := root
	for _, tok := range tokens {
		switch c := cur.(type) {
		case []any:
			i, err := strconv.Atoi(tok)
			if err == nil && i >= 0 && i < len(c) {
				path = append(path, index(i))
				cur = c[i]
				continue
			}
			path = append(path, member(tok))
			cur = nil
		case map[string]any:
			path = append(path, member(tok))
			cur = c[tok]
		default:
			path = append(path, member(tok))
			cur = nil
		}
	}
	return path, cur
}

func appendStep(path []step, s step) []step {
	return append(path[:len(path):len(path)], s)
}
