package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Errors Decide returns beside a deny Decision when the policy fails.
var (
	// ErrUndefinedDecision: data.mcpgate.decision is undefined for the input.
	ErrUndefinedDecision = errors.New("policy: decision is undefined")
	// ErrInvalidDecision: the decision document has the wrong shape; the
	// error wrapping it says what is wrong.
	ErrInvalidDecision = errors.New("policy: invalid decision")
	// ErrInvalidInput: the Input could not be converted to a policy input.
	ErrInvalidInput = errors.New("policy: invalid input")
)

// Keys of the decision document.
var (
	kAllow    = ast.StringTerm("allow")
	kReasons  = ast.StringTerm("reasons")
	kVisible  = ast.StringTerm("visible")
	kCode     = ast.StringTerm("code")
	kCause    = ast.StringTerm("cause")
	kFix      = ast.StringTerm("fix")
	kNextTool = ast.StringTerm("next_tool")
	kResult   = ast.StringTerm("result")
	kFields   = ast.StringTerm("fields")
	kDrop     = ast.StringTerm("drop")
	kConfirm  = ast.StringTerm("confirm")
	kApproval = ast.StringTerm("approval")
	kReplay   = ast.StringTerm("replay")
	kBuckets  = ast.StringTerm("buckets")
)

// newID returns 16 random lower-case hex digits.
func newID() string {
	const hexdigits = "0123456789abcdef"
	var b [16]byte
	n := rand.Uint64()
	for i := range b {
		b[i] = hexdigits[n&0xf]
		n >>= 4
	}
	return string(b[:])
}

// readDecision fills d from the decision document t, checking every field's
// type (in the manner of opa-envoy-plugin's response getters). On error d is
// left for the caller to reset.
func readDecision(t *ast.Term, d *Decision) error {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf("%w: decision is %s, want object", ErrInvalidDecision, ast.ValueName(t.Value))
	}
	allow, err := getBool(obj, kAllow, "allow", true)
	if err != nil {
		return err
	}
	d.Allow = allow
	if v := obj.Get(kReasons); v != nil {
		reasons, err := elems(v, "reasons")
		if err != nil {
			return err
		}
		if len(reasons) > 0 {
			d.Reasons = make([]Reason, len(reasons))
		}
		for i, r := range reasons {
			if err := readReason(r, &d.Reasons[i]); err != nil {
				return fmt.Errorf("%w (reasons[%d])", err, i)
			}
		}
	}
	if d.Effect, err = getString(obj, kEffect, "effect", false); err != nil {
		return err
	}
	if d.Effect != "" && !slices.Contains(Effects, d.Effect) {
		return fmt.Errorf("%w: effect %q is not an effect class", ErrInvalidDecision, d.Effect)
	}
	if v := obj.Get(kVisible); v != nil {
		if d.Visible, err = getStrings(v, "visible", nil); err != nil {
			return err
		}
		if d.Visible == nil {
			d.Visible = []string{}
		}
	}
	if v := obj.Get(kResult); v != nil {
		d.Result = new(ResultPaths)
		if err := readResult(v, d.Result); err != nil {
			return err
		}
	}
	if d.Confirm, err = getBool(obj, kConfirm, "confirm", false); err != nil {
		return err
	}
	if d.Approval, err = getString(obj, kApproval, "approval", false); err != nil {
		return err
	}
	switch d.Approval {
	case "", ApprovalClient, ApprovalOutOfBand:
	default:
		return fmt.Errorf("%w: approval %q is neither %q nor %q", ErrInvalidDecision, d.Approval, ApprovalClient, ApprovalOutOfBand)
	}
	if d.Replay, err = getBool(obj, kReplay, "replay", false); err != nil {
		return err
	}
	if v := obj.Get(kBuckets); v != nil {
		if d.Buckets, err = getStrings(v, "buckets", isCode); err != nil {
			return err
		}
	}
	return nil
}

// readResult fills r from the decision's result object: untrusted_text
// and fields must be paths (declarations.schema.json#/$defs/path), drop
// non-empty names.
func readResult(t *ast.Term, r *ResultPaths) error {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf("%w: result is %s, want object", ErrInvalidDecision, ast.ValueName(t.Value))
	}
	var err error
	if v := obj.Get(kUntrustedText); v != nil {
		if r.UntrustedText, err = getStrings(v, "result.untrusted_text", IsPath); err != nil {
			return err
		}
	}
	if v := obj.Get(kFields); v != nil {
		if r.Fields, err = getStrings(v, "result.fields", IsPath); err != nil {
			return err
		}
	}
	if v := obj.Get(kDrop); v != nil {
		if r.Drop, err = getStrings(v, "result.drop", isName); err != nil {
			return err
		}
	}
	return nil
}

// getStrings reads an array (or set) of strings, each accepted by valid
// when valid is set; nil for an empty one.
func getStrings(t *ast.Term, name string, valid func(string) bool) ([]string, error) {
	terms, err := elems(t, name)
	if err != nil || len(terms) == 0 {
		return nil, err
	}
	out := make([]string, len(terms))
	for i, e := range terms {
		s, ok := e.Value.(ast.String)
		if !ok {
			return nil, fmt.Errorf("%w: %s[%d] is %s, want string", ErrInvalidDecision, name, i, ast.ValueName(e.Value))
		}
		if valid != nil && !valid(string(s)) {
			return nil, fmt.Errorf("%w: %s[%d] %q is not well-formed", ErrInvalidDecision, name, i, string(s))
		}
		out[i] = string(s)
	}
	return out, nil
}

// IsPath reports whether p is a result path (declarations.schema.json
// #/$defs/path): field names of letters, digits, '_', '-' and '@' joined by
// '.', each step optionally an index [N] or [*]; "notes",
// "items[*].comment", "[0].title".
func IsPath(p string) bool {
	if p == "" {
		return false
	}
	i, first := 0, true
	for i < len(p) {
		switch {
		case p[i] == '[':
			j := i + 1
			if j < len(p) && p[j] == '*' {
				j++
			} else {
				for j < len(p) && p[j] >= '0' && p[j] <= '9' {
					j++
				}
				if j == i+1 {
					return false
				}
			}
			if j >= len(p) || p[j] != ']' {
				return false
			}
			i = j + 1
		case !first && p[i] == '.':
			j := i + 1
			for j < len(p) && isNameByte(p[j]) {
				j++
			}
			if j == i+1 {
				return false
			}
			i = j
		case first && isNameByte(p[i]):
			for i < len(p) && isNameByte(p[i]) {
				i++
			}
		default:
			return false
		}
		first = false
	}
	return true
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '@'
}

// isName reports whether s can name result members to drop: not empty and
// not only '*', '_', '-', '.' and spaces (which would match every name or
// none).
func isName(s string) bool {
	return strings.Trim(s, "*_-. ") != ""
}

func readReason(t *ast.Term, r *Reason) error {
	obj, ok := t.Value.(ast.Object)
	if !ok {
		return fmt.Errorf("%w: reason is %s, want object", ErrInvalidDecision, ast.ValueName(t.Value))
	}
	var err error
	if r.Code, err = getString(obj, kCode, "code", true); err != nil {
		return err
	}
	if !isCode(r.Code) {
		return fmt.Errorf("%w: reason code %q is not snake_case", ErrInvalidDecision, r.Code)
	}
	if r.Cause, err = getString(obj, kCause, "cause", true); err != nil {
		return err
	}
	if r.Cause == "" {
		return fmt.Errorf("%w: reason %q has an empty cause", ErrInvalidDecision, r.Code)
	}
	if r.Fix, err = getString(obj, kFix, "fix", false); err != nil {
		return err
	}
	if r.NextTool, err = getString(obj, kNextTool, "next_tool", false); err != nil {
		return err
	}
	if v := obj.Get(kRights); v != nil {
		rights, err := elems(v, "rights")
		if err != nil {
			return err
		}
		if len(rights) > 0 {
			r.Rights = make([]string, len(rights))
		}
		for i, t := range rights {
			s, ok := t.Value.(ast.String)
			if !ok {
				return fmt.Errorf("%w: rights[%d] is %s, want string", ErrInvalidDecision, i, ast.ValueName(t.Value))
			}
			r.Rights[i] = string(s)
		}
	}
	return nil
}

// isCode reports whether s matches ^[a-z][a-z0-9_]*$ (decision.schema.json).
func isCode(s string) bool {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '_' {
			return false
		}
	}
	return true
}

func getBool(obj ast.Object, key *ast.Term, name string, required bool) (bool, error) {
	v := obj.Get(key)
	if v == nil {
		if required {
			return false, fmt.Errorf("%w: %s is missing", ErrInvalidDecision, name)
		}
		return false, nil
	}
	b, ok := v.Value.(ast.Boolean)
	if !ok {
		return false, fmt.Errorf("%w: %s is %s, want boolean", ErrInvalidDecision, name, ast.ValueName(v.Value))
	}
	return bool(b), nil
}

func getString(obj ast.Object, key *ast.Term, name string, required bool) (string, error) {
	v := obj.Get(key)
	if v == nil {
		if required {
			return "", fmt.Errorf("%w: %s is missing", ErrInvalidDecision, name)
		}
		return "", nil
	}
	s, ok := v.Value.(ast.String)
	if !ok {
		return "", fmt.Errorf("%w: %s is %s, want string", ErrInvalidDecision, name, ast.ValueName(v.Value))
	}
	return string(s), nil
}

// elems returns the elements of an array, or of a set in its sorted order
// (policies often build reasons as sets).
func elems(t *ast.Term, name string) ([]*ast.Term, error) {
	var arr *ast.Array
	switch v := t.Value.(type) {
	case *ast.Array:
		arr = v
	case ast.Set:
		arr = v.Sorted()
	default:
		return nil, fmt.Errorf("%w: %s is %s, want array", ErrInvalidDecision, name, ast.ValueName(t.Value))
	}
	out := make([]*ast.Term, arr.Len())
	for i := range out {
		out[i] = arr.Elem(i)
	}
	return out, nil
}

// Texts of the reasons mcpgate itself gives when the policy fails; they are
// safe to show the model and carry no internal detail.
const (
	causePolicyFailed = "The server could not decide on this request."
	fixPolicyFailed   = "Retry later; if it keeps failing, report decision %s to the server's administrators."
	causeInvalidInput = "The server could not read this request for its policy."
	fixInvalidInput   = "Check that the request's params are valid JSON of the right shape, then retry."
)

// deny turns d into a refusal with one reason of the given code.
func (d *Decision) deny(code string) {
	cause, fix := causePolicyFailed, fmt.Sprintf(fixPolicyFailed, d.ID)
	if code == CodeInvalidInput {
		cause, fix = causeInvalidInput, fixInvalidInput
	}
	*d = Decision{ID: d.ID, Reasons: []Reason{{Code: code, Cause: cause, Fix: fix}}}
}
