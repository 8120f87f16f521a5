package policy

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

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
		names, err := elems(v, "visible")
		if err != nil {
			return err
		}
		d.Visible = make([]string, len(names))
		for i, n := range names {
			s, ok := n.Value.(ast.String)
			if !ok {
				return fmt.Errorf("%w: visible[%d] is %s, want string", ErrInvalidDecision, i, ast.ValueName(n.Value))
			}
			d.Visible[i] = string(s)
		}
	}
	return nil
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
