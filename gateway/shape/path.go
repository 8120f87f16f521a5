package shape

import (
	"fmt"
	"strings"
)

// step is one step of a path: a member name, or every element of an array.
type step struct {
	name string // member name; empty for an array step
	each bool   // "[*]": every element of an array
}

// parsePath splits a declaration path into steps.
//
// Grammar: path = segment *("." segment); segment = name *"[*]". A name is
// one or more characters other than '.', '[', ']', whitespace and control
// characters. The first step is always a name: structuredContent is an
// object, so a path cannot start with "[*]".
func parsePath(p string) ([]step, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	var steps []step
	for i, seg := range strings.Split(p, ".") {
		if seg == "" {
			if i == 0 {
				return nil, fmt.Errorf("path starts with '.'")
			}
			return nil, fmt.Errorf("empty member name (\"..\" or a trailing '.')")
		}
		end := strings.IndexByte(seg, '[')
		if end < 0 {
			end = len(seg)
		}
		name := seg[:end]
		if name == "" {
			return nil, fmt.Errorf("%q has no member name before \"[*]\"", seg)
		}
		for _, r := range name {
			switch {
			case r == ']':
				return nil, fmt.Errorf("unexpected ']' in %q", seg)
			case r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029:
				return nil, fmt.Errorf("whitespace or control character in member name %q", name)
			}
		}
		steps = append(steps, step{name: name})
		rest := seg[end:]
		for rest != "" {
			if !strings.HasPrefix(rest, "[*]") {
				if strings.HasPrefix(rest, "[") && !strings.Contains(rest, "]") {
					return nil, fmt.Errorf("unclosed '[' in %q", seg)
				}
				return nil, fmt.Errorf("%q: only \"[*]\" (every element) may follow a name", seg)
			}
			steps = append(steps, step{each: true})
			rest = rest[len("[*]"):]
		}
	}
	return steps, nil
}

// node is one position in the compiled path tree. The allowlist and the
// untrusted-text paths share one tree; flags tell which paths pass through
// or end at a node.
type node struct {
	members map[string]*node // object members below this node
	each    *node            // array elements below this node
	allow   bool             // an allowlisted path passes through or ends here
	keep    bool             // an allowlisted path ends here: keep the whole value
	wrap    bool             // an untrusted-text path ends here
	// under: an untrusted-text path passes through or ends here;
	// underMember, underEach: one continues to a member, to the elements.
	under, underMember, underEach bool
}

// child returns (creating) the node below n for st.
func (n *node) child(st step) *node {
	if st.each {
		if n.each == nil {
			n.each = &node{}
		}
		return n.each
	}
	if n.members == nil {
		n.members = make(map[string]*node)
	}
	c := n.members[st.name]
	if c == nil {
		c = &node{}
		n.members[st.name] = c
	}
	return c
}

// fits reports whether a value of kind k may stand at an allowlisted
// position that is only a container (allow without keep): an object when
// names continue below, an array when "[*]" does, null always (it carries
// no data, and says "absent" better than a missing member).
func (n *node) fits(k byte) bool {
	switch k {
	case 'n':
		return true
	case '{':
		return len(n.members) > 0
	case '[':
		return n.each != nil
	}
	return false
}

// mismatch reports whether a value of kind k at n does not have the shape
// the untrusted-text paths through n describe: a string where a path goes
// on below, an object where paths expect only an array, an array where
// they expect only an object. The value's text cannot be told apart from
// the declared text then, so all of it is wrapped (never passed raw).
func (n *node) mismatch(k byte) bool {
	if n == nil || !n.under {
		return false
	}
	switch k {
	case '"':
		return n.underMember || n.underEach
	case '{':
		return n.underEach && !n.underMember
	case '[':
		return n.underMember && !n.underEach
	}
	return false
}
