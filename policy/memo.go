package policy

import (
	"encoding/binary"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A decision depends only on the input and on the policy version (its
// modules and data, fixed once compiled) — unless the policy calls a
// builtin whose answer changes from call to call (time.now_ns, http.send,
// rand.intn, io.jwt.decode_verify, …). For a policy that calls none of
// those, decisionMemo keeps the decisions of recent inputs, so a repeat of
// an input — the same caller making the same call, listing tools again,
// pinging — is answered without evaluating the Rego again, and without
// building its OPA input (BenchmarkDecideToolsCallMemo against
// BenchmarkDecideToolsCall measures the difference).

// memoEntries bounds a memo; when full, one entry is forgotten for each
// new one.
const memoEntries = 1024

// memoMaxArguments: inputs whose arguments are larger than this (bytes of
// JSON) are not remembered, which bounds the memo's memory (~ a few MiB).
const memoMaxArguments = 2048

// memoMaxItems: a list-phase input with more items is not remembered.
const memoMaxItems = 256

// memoMaxBytes bounds the bytes of all of a memo's keys together (a list
// input's key holds every item's declaration): above it, entries are
// forgotten until the new one fits.
const memoMaxBytes = 4 << 20

type decisionMemo struct {
	mu    sync.RWMutex
	m     map[string]Decision // by memoKey; without ID, before the out-of-band rule
	bytes int                 // len of every key in m
}

func newDecisionMemo() *decisionMemo { return &decisionMemo{m: make(map[string]Decision)} }

// memoable reports whether in may be remembered (its size is bounded).
func memoable(in *Input) bool {
	return len(in.Message.Arguments) <= memoMaxArguments && len(in.Items) <= memoMaxItems && len(in.Finders) <= memoMaxItems
}

// get copies the decision remembered for key into d (keeping d.ID).
func (m *decisionMemo) get(key []byte, d *Decision) bool {
	m.mu.RLock()
	e, ok := m.m[string(key)] // compares the whole key; no allocation
	m.mu.RUnlock()
	if !ok {
		return false
	}
	id := d.ID
	*d = e.clone()
	d.ID = id
	return true
}

// put remembers d for key.
func (m *decisionMemo) put(key []byte, d *Decision) {
	e := d.clone()
	e.ID = ""
	if len(key) > memoMaxBytes {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.m[string(key)]; !ok {
		for k := range m.m { // arbitrary entries: Go's map order is random
			if len(m.m) < memoEntries && m.bytes+len(key) <= memoMaxBytes {
				break
			}
			delete(m.m, k)
			m.bytes -= len(k)
		}
		m.bytes += len(key)
	}
	m.m[string(key)] = e
}

// memoKeys are the pooled buffers keys are built in (a key lives only for
// one Decide: the memo stores its own copy).
var memoKeys = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// memoKey appends the memo key of in to b: every field of Input, nested
// ones included, in declaration order. Strings and raw JSON are written
// as a uvarint length and the bytes; a bool as one byte; a pointer as a
// presence byte and, when present, its fields; a list as a nil marker,
// its length and its elements. A field added to Input must be added here
// (TestMemoKeyCoversEveryField changes each field in turn and fails on
// one the key does not see).
func memoKey(b []byte, in *Input) []byte {
	b = keyString(b, in.Version)
	b = keyString(b, in.Phase)
	t := &in.Transport
	for _, s := range [...]string{t.Kind, t.HTTPMethod, t.Path, t.Upstream, t.Tenant, t.ProtocolVersion, t.Origin} {
		b = keyString(b, s)
	}
	m := &in.Message
	for _, s := range [...]string{m.Kind, m.Method, m.Name, m.URI} {
		b = keyString(b, s)
	}
	b = keyRaw(b, m.Arguments)
	b = keyStrings(b, m.TenantArguments)
	b = keyLen(b, m.ArgumentProblems == nil, len(m.ArgumentProblems))
	for i := range m.ArgumentProblems {
		pr := &m.ArgumentProblems[i]
		b = keyString(b, pr.Argument)
		b = keyString(b, pr.Code)
		b = keyString(b, pr.Message)
		b = keyStrings(b, pr.Allowed)
		b = keyString(b, pr.Expected)
	}
	b = keyBool(b, m.Client != nil)
	if m.Client != nil {
		b = keyString(b, m.Client.Name)
		b = keyString(b, m.Client.Version)
	}
	b = keyStrings(b, m.URITenants)
	b = keyString(b, m.URIProblem)
	b = keyBool(b, in.Tool != nil)
	if in.Tool != nil {
		b = keyTool(b, in.Tool)
	}
	b = keyLen(b, in.Finders == nil, len(in.Finders))
	for i := range in.Finders {
		b = keyTool(b, &in.Finders[i])
	}
	b = keyLen(b, in.Items == nil, len(in.Items))
	for i := range in.Items {
		it := &in.Items[i]
		b = keyString(b, it.Name)
		b = keyBool(b, it.Tool != nil)
		if it.Tool != nil {
			b = keyTool(b, it.Tool)
		}
		b = keyStrings(b, it.URITenants)
	}
	pr := &in.Principal
	b = keyBool(b, pr.Authenticated)
	for _, s := range [...]string{pr.Tenant, pr.Subject} {
		b = keyString(b, s)
	}
	b = keyStrings(b, pr.Rights)
	b = keyStrings(b, pr.TokenRights)
	b = keyStrings(b, pr.LiveRights)
	for _, s := range [...]string{pr.CredentialKind, pr.CredentialID, pr.Issuer, pr.ClientID, pr.Connection, pr.Toolset} {
		b = keyString(b, s)
	}
	return b
}

func keyTool(b []byte, t *Tool) []byte {
	b = keyString(b, t.Name)
	b = keyString(b, t.CalledAs)
	b = keyBool(b, t.Declared)
	b = keyString(b, t.Undeclared)
	d := &t.ToolDeclaration
	b = keyString(b, d.Effect)
	b = keyStrings(b, d.Rights)
	b = keyStrings(b, d.UntrustedText)
	b = keyStrings(b, d.ResultFields)
	for _, f := range [...]bool{d.Hidden, d.Expensive, d.MovesMoney, d.LegallyBinding} {
		b = keyBool(b, f)
	}
	b = keyString(b, d.NotifyObject)
	b = binary.AppendVarint(b, int64(d.DeadlineMS))
	b = keyBool(b, t.Catalog != nil)
	if c := t.Catalog; c != nil {
		b = keyBool(b, c.Listed)
		for _, s := range [...]string{c.State, c.Hash, c.Title} {
			b = keyString(b, s)
		}
		b = keyRaw(b, c.Annotations)
	}
	return keyStrings(b, t.Toolsets)
}

func keyString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// keyRaw writes raw JSON like a string (nil and empty alike: inputValue
// leaves both out).
func keyRaw(b []byte, v []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(v))), v...)
}

func keyBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// keyLen writes a list's nil marker and length.
func keyLen(b []byte, isNil bool, n int) []byte {
	return binary.AppendUvarint(keyBool(b, isNil), uint64(n))
}

func keyStrings(b []byte, ss []string) []byte {
	b = keyLen(b, ss == nil, len(ss))
	for _, s := range ss {
		b = keyString(b, s)
	}
	return b
}

// clone is a deep copy of d: callers may change their decision's slices.
// The string lists share one new backing array, each capped at its own
// length (appending to one copies it, never runs into the next).
func (d Decision) clone() Decision {
	c := d
	n := len(d.Visible) + len(d.Buckets)
	for _, r := range d.Reasons {
		n += len(r.Rights)
	}
	if d.Result != nil {
		n += len(d.Result.UntrustedText) + len(d.Result.Fields) + len(d.Result.Drop)
	}
	var backing []string
	var rp *ResultPaths
	switch {
	case d.Result != nil && n <= len(resultBlock{}.backing):
		// An allowed call's few lists and its result paths in one
		// allocation.
		blk := new(resultBlock)
		rp, backing = &blk.rp, blk.backing[:0:n]
	case d.Result != nil:
		rp = new(ResultPaths)
	}
	if backing == nil && n > 0 {
		backing = make([]string, 0, n)
	}
	// cp copies ss into backing (nil stays nil, empty stays empty).
	cp := func(ss []string) []string {
		if len(ss) == 0 {
			return ss[:0:0] // nil or empty, sharing nothing
		}
		start := len(backing)
		backing = append(backing, ss...)
		return backing[start:len(backing):len(backing)]
	}
	if d.Reasons != nil {
		c.Reasons = make([]Reason, len(d.Reasons))
		for i, r := range d.Reasons {
			r.Rights = cp(r.Rights)
			c.Reasons[i] = r
		}
	}
	c.Visible = cp(d.Visible)
	c.Buckets = cp(d.Buckets)
	if d.Result != nil {
		*rp = ResultPaths{
			UntrustedText: cp(d.Result.UntrustedText),
			Fields:        cp(d.Result.Fields),
			Drop:          cp(d.Result.Drop),
		}
		c.Result = rp
	}
	return c
}

// resultBlock is a clone's ResultPaths with room for the backing array of
// its string lists (clone).
type resultBlock struct {
	rp      ResultPaths
	backing [6]string
}

// volatileBuiltins are builtins whose answers may change between two
// evaluations of the same input but that OPA does not mark
// Nondeterministic: certificate checks read the clock, print and trace
// have effects. The memo is off for a policy calling any of them.
var volatileBuiltins = []string{"crypto.x509.parse_and_verify", "print", "trace", "internal.print"}

// deterministic reports whether the compiled modules call only builtins
// whose answer depends on their operands alone: none marked
// Nondeterministic by OPA, none in volatileBuiltins, and no function
// unknown to OPA's builtin table (a custom builtin could do anything).
// Calls of the policy's own functions (data.…) are fine; their bodies are
// checked with the rest.
func deterministic(c *ast.Compiler) bool {
	ok := true
	check := func(op ast.Ref) {
		if len(op) > 0 && op[0].Equal(ast.DefaultRootDocument) {
			return // a function of the policy
		}
		name := op.String()
		b, known := ast.BuiltinMap[name]
		if !known || b.Nondeterministic {
			ok = false
			return
		}
		for _, v := range volatileBuiltins {
			if name == v || strings.HasPrefix(name, v) {
				ok = false
				return
			}
		}
	}
	for _, mod := range c.Modules {
		ast.WalkExprs(mod, func(e *ast.Expr) bool {
			if e.IsCall() {
				check(e.Operator())
			}
			return !ok
		})
		ast.WalkTerms(mod, func(t *ast.Term) bool {
			if call, isCall := t.Value.(ast.Call); isCall && len(call) > 0 {
				if r, isRef := call[0].Value.(ast.Ref); isRef {
					check(r)
				}
			}
			return !ok
		})
		if !ok {
			return false
		}
	}
	return ok
}
