package policy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A decision depends only on the parts of the input the policy reads and
// on the policy version (its modules and data, fixed once compiled) —
// unless the policy calls a builtin whose answer changes from call to call
// (time.now_ns, http.send, rand.intn, io.jwt.decode_verify, …). For a
// policy that calls none of those, decisionMemo keeps the decisions of
// recent inputs, keyed by the parts the policy reads (reads.go, keyPlan),
// so an input equal to a recent one in those parts — the same caller
// making the same call, another agent with the same rights, the same tool
// called with other arguments by a policy that reads none of their values
// — is answered without evaluating the Rego again, and without building
// its OPA input (BenchmarkDecideToolsCallMemo and
// BenchmarkDecideToolsCallNewArguments against BenchmarkDecideToolsCall
// measure the difference).

// memoEntries bounds a memo; when full, one entry is forgotten for each
// new one.
const memoEntries = 1024

// memoMaxArguments: inputs whose arguments' parts in the key are larger
// than this (bytes of JSON) are not remembered, which bounds the memo's
// memory (~ a few MiB).
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

// inputField is a member of the input document as inputValue builds it:
// an object whose members the key can take one by one (children), or a
// leaf taken whole (enc). Strings and raw JSON are written as a uvarint
// length and the bytes; a bool as one byte; a pointer as a presence byte
// and, when present, its fields; a list as a nil marker, its length and
// its elements. Every field of Input is in inputSchema
// (TestMemoKeyCoversEveryField changes each field in turn and fails on one
// the key does not see), under the name inputValue gives it
// (TestInputSchemaNames).
type inputField struct {
	name     string
	children []inputField
	enc      func(b []byte, in *Input) []byte
	// json marks message.arguments: raw JSON, whose members the key can
	// take by path (argsPlan).
	json bool
}

func str1(name string, get func(in *Input) string) inputField {
	return inputField{name: name, enc: func(b []byte, in *Input) []byte { return keyString(b, get(in)) }}
}

func strs(name string, get func(in *Input) []string) inputField {
	return inputField{name: name, enc: func(b []byte, in *Input) []byte { return keyStrings(b, get(in)) }}
}

var inputSchema = inputField{children: []inputField{
	str1("version", func(in *Input) string { return in.Version }),
	str1("phase", func(in *Input) string { return in.Phase }),
	{name: "transport", children: []inputField{
		str1("kind", func(in *Input) string { return in.Transport.Kind }),
		str1("http_method", func(in *Input) string { return in.Transport.HTTPMethod }),
		str1("path", func(in *Input) string { return in.Transport.Path }),
		str1("upstream", func(in *Input) string { return in.Transport.Upstream }),
		str1("tenant", func(in *Input) string { return in.Transport.Tenant }),
		str1("protocol_version", func(in *Input) string { return in.Transport.ProtocolVersion }),
		str1("origin", func(in *Input) string { return in.Transport.Origin }),
	}},
	{name: "message", children: []inputField{
		str1("kind", func(in *Input) string { return in.Message.Kind }),
		str1("method", func(in *Input) string { return in.Message.Method }),
		str1("name", func(in *Input) string { return in.Message.Name }),
		str1("uri", func(in *Input) string { return in.Message.URI }),
		{name: "arguments", json: true, enc: func(b []byte, in *Input) []byte { return keyRaw(b, in.Message.Arguments) }},
		strs("tenant_arguments", func(in *Input) []string { return in.Message.TenantArguments }),
		{name: "argument_problems", enc: func(b []byte, in *Input) []byte {
			m := &in.Message
			b = keyLen(b, m.ArgumentProblems == nil, len(m.ArgumentProblems))
			for i := range m.ArgumentProblems {
				pr := &m.ArgumentProblems[i]
				b = keyString(b, pr.Argument)
				b = keyString(b, pr.Code)
				b = keyString(b, pr.Message)
				b = keyStrings(b, pr.Allowed)
				b = keyString(b, pr.Expected)
			}
			return b
		}},
		{name: "client", enc: func(b []byte, in *Input) []byte {
			c := in.Message.Client
			b = keyBool(b, c != nil)
			if c != nil {
				b = keyString(b, c.Name)
				b = keyString(b, c.Version)
			}
			return b
		}},
		strs("uri_tenants", func(in *Input) []string { return in.Message.URITenants }),
		str1("uri_problem", func(in *Input) string { return in.Message.URIProblem }),
	}},
	{name: "tool", enc: func(b []byte, in *Input) []byte {
		b = keyBool(b, in.Tool != nil)
		if in.Tool != nil {
			b = keyTool(b, in.Tool)
		}
		return b
	}},
	{name: "finders", enc: func(b []byte, in *Input) []byte {
		b = keyLen(b, in.Finders == nil, len(in.Finders))
		for i := range in.Finders {
			b = keyTool(b, &in.Finders[i])
		}
		return b
	}},
	{name: "items", enc: func(b []byte, in *Input) []byte {
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
		return b
	}},
	{name: "principal", children: []inputField{
		{name: "authenticated", enc: func(b []byte, in *Input) []byte { return keyBool(b, in.Principal.Authenticated) }},
		str1("tenant", func(in *Input) string { return in.Principal.Tenant }),
		str1("subject", func(in *Input) string { return in.Principal.Subject }),
		strs("rights", func(in *Input) []string { return in.Principal.Rights }),
		strs("token_rights", func(in *Input) []string { return in.Principal.TokenRights }),
		strs("live_rights", func(in *Input) []string { return in.Principal.LiveRights }),
		str1("credential_kind", func(in *Input) string { return in.Principal.CredentialKind }),
		str1("credential_id", func(in *Input) string { return in.Principal.CredentialID }),
		str1("issuer", func(in *Input) string { return in.Principal.Issuer }),
		str1("client_id", func(in *Input) string { return in.Principal.ClientID }),
		str1("connection", func(in *Input) string { return in.Principal.Connection }),
		str1("toolset", func(in *Input) string { return in.Principal.Toolset }),
	}},
}}

// keyPlan builds the memo keys of one policy version from the parts of
// the input its rules read (readsOf): two inputs with the same key are
// the same document in every part the policy can read, so the policy
// decides them alike.
type keyPlan struct {
	steps []func(b []byte, in *Input) []byte
	// args takes members of the arguments by path; nil when the policy
	// reads them whole (a step) or not at all.
	args *argsPlan
	// argsWhole: a step writes the arguments whole.
	argsWhole bool
}

// newKeyPlan makes the plan for reads (whole: every field of Input).
func newKeyPlan(reads *readNode) *keyPlan {
	p := &keyPlan{}
	p.add(&inputSchema, reads)
	return p
}

func (p *keyPlan) add(f *inputField, r *readNode) {
	switch {
	case f.json && !r.whole:
		p.args = newArgsPlan(r)
	case r.whole || f.enc != nil:
		// an object read whole, or a leaf (read whole, by kind or by
		// members: taken whole)
		p.all(f)
	default:
		// an object of the document, always there: its kind says
		// nothing, its members are taken one by one
		for i := range f.children {
			if c := r.children[f.children[i].name]; c != nil {
				p.add(&f.children[i], c)
			} // a member the document never has is always undefined
		}
	}
}

// all adds f whole.
func (p *keyPlan) all(f *inputField) {
	if f.enc != nil {
		p.steps = append(p.steps, f.enc)
		p.argsWhole = p.argsWhole || f.json
		return
	}
	for i := range f.children {
		p.all(&f.children[i])
	}
}

// key appends in's key to b. It reports false when in is not to be
// remembered: its arguments are not valid JSON (evaluation refuses them),
// the parts of them in the key are larger than memoMaxArguments, or it
// has more than memoMaxItems list items or finders.
func (p *keyPlan) key(b []byte, in *Input) ([]byte, bool) {
	if len(in.Items) > memoMaxItems || len(in.Finders) > memoMaxItems {
		return b, false
	}
	for _, step := range p.steps {
		b = step(b, in)
	}
	args := in.Message.Arguments
	if p.argsWhole {
		return b, len(args) <= memoMaxArguments
	}
	plan := p.args
	if plan == nil {
		plan = validArguments
	}
	if len(args) == 0 { // absent: no path reached
		for range plan.whole {
			b = append(b, 0)
		}
		return b, true
	}
	if in.Message.ArgumentsStrict && plan.kindOnly() {
		return plan.strictKey(b, args)
	}
	return plan.key(b, args)
}

// kindOnly reports whether the plan reads no part of the arguments but,
// at most, their own kind (the default policy's).
func (p *argsPlan) kindOnly() bool {
	return p.root == nil || len(p.root.children) == 0 && !p.whole[p.root.slot]
}

// strictKey is key for a kindOnly plan and raw that a strict JSON reader
// accepted (Message.ArgumentsStrict): the kind is raw's first byte's, and
// strict JSON passes all of jsonValue's check but the range of numbers
// with an exponent, so raw is not read as JSON again.
func (p *argsPlan) strictKey(b []byte, raw []byte) ([]byte, bool) {
	if p.root != nil {
		b = append(b, byte(jsontext.Value(raw).Kind()))
	}
	return b, exponentsInRange(raw)
}

// exponentsInRange reports whether every number with an exponent in raw,
// strict JSON, is one OPA holds (ast.NumberChecked, as argScanner.value
// checks it): outside strings, a '-' or a digit starts a number, and the
// number's bytes run to the next byte no number holds.
func exponentsInRange(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case c == '"':
			for i++; i < len(raw) && raw[i] != '"'; i++ {
				if raw[i] == '\\' {
					i++
				}
			}
		case c == '-' || '0' <= c && c <= '9':
			j, exp := i, false
			for ; j < len(raw); j++ {
				d := raw[j]
				if d == 'e' || d == 'E' {
					exp = true
				} else if !(d == '-' || d == '+' || d == '.' || '0' <= d && d <= '9') {
					break
				}
			}
			if exp {
				if _, err := ast.NumberChecked(string(raw[i:j])); err != nil {
					return false
				}
			}
			i = j - 1
		}
	}
	return true
}

// inputValue builds the OPA input of in with only the parts of the
// arguments the policy reads (argsPlan.value); the rest as inputValue.
func (p *keyPlan) inputValue(in *Input, c *termCaches) (ast.Value, error) {
	if p.argsWhole {
		return inputValue(in, c)
	}
	plan := p.args
	if plan == nil {
		plan = validArguments
	}
	return inputValueArgs(in, c, plan)
}

// argsPlan takes the parts of a tools/call's arguments that the policy
// reads: for every path read (a node of the read tree, in a fixed order),
// the JSON kind of the value there (0: not there) and, for a path read
// whole, its bytes as sent. Reading them validates the whole of the
// arguments as inputValue would (jsonValue), so an input the evaluation
// would refuse is never answered from the memo.
type argsPlan struct {
	root  *argsNode // nil: the arguments are not read, only validated
	whole []bool    // by slot
}

type argsNode struct {
	slot     int
	children map[string]*argsNode
}

func newArgsPlan(r *readNode) *argsPlan {
	p := &argsPlan{}
	var build func(r *readNode) *argsNode
	build = func(r *readNode) *argsNode {
		n := &argsNode{slot: len(p.whole)}
		p.whole = append(p.whole, r.whole)
		if r.whole {
			return n
		}
		for _, k := range slices.Sorted(maps.Keys(r.children)) {
			if n.children == nil {
				n.children = map[string]*argsNode{}
			}
			n.children[k] = build(r.children[k])
		}
		return n
	}
	if r != nil {
		p.root = build(r)
	}
	return p
}

// validArguments reports whether raw is JSON that inputValue accepts.
var validArguments = &argsPlan{}

type argSlot struct {
	kind   jsontext.Kind
	lo, hi int64
}

// argScanner reads arguments for an argsPlan; pooled.
type argScanner struct {
	dec   jsontext.Decoder
	buf   bytes.Buffer
	slots []argSlot
	name  []byte
}

var argScanners = sync.Pool{New: func() any { return new(argScanner) }}

// scan reads raw with a pooled scanner, recording the plan's slots, and
// calls f with it; the error is raw's, when it is not what jsonValue
// accepts.
func (p *argsPlan) scan(raw []byte, f func(s *argScanner) error) error {
	s := argScanners.Get().(*argScanner)
	defer func() {
		s.dec.Reset(eofReader{})
		s.buf = bytes.Buffer{}
		argScanners.Put(s)
	}()
	s.buf = *bytes.NewBuffer(raw)
	s.dec.Reset(&s.buf)
	s.slots = append(s.slots[:0], make([]argSlot, len(p.whole))...)
	if err := s.value(p.root); err != nil {
		return err
	}
	if _, err := s.dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errTrailingData
		}
		return err
	}
	return f(s)
}

// slotBytes are the bytes of a value read whole.
func slotBytes(raw []byte, sl argSlot) []byte {
	return bytes.TrimLeft(raw[sl.lo:sl.hi], " \t\r\n:,")
}

// key appends the plan's parts of raw to b; false when raw is not valid
// (or its parts are too large to remember).
func (p *argsPlan) key(b []byte, raw []byte) ([]byte, bool) {
	size := 0
	err := p.scan(raw, func(s *argScanner) error {
		for i, sl := range s.slots {
			b = append(b, byte(sl.kind))
			if p.whole[i] && sl.kind != 0 {
				v := slotBytes(raw, sl)
				size += len(v)
				b = keyRaw(b, v)
			}
		}
		return nil
	})
	return b, err == nil && size <= memoMaxArguments
}

// value builds the OPA value of the plan's parts of raw (nil: the policy
// reads nothing of it): the paths read whole as they are, the objects on
// the way with only the members read, a value read only for its kind as
// the least value of that kind. The policy cannot tell it from the whole
// arguments (it reads nothing else), and evaluating it skips building the
// rest. An error is raw's, when it is not what jsonValue accepts.
func (p *argsPlan) value(raw []byte) (ast.Value, error) {
	var v ast.Value
	err := p.scan(raw, func(s *argScanner) error {
		if p.root == nil {
			return nil
		}
		var err error
		v, err = p.build(p.root, s.slots, raw)
		return err
	})
	return v, err
}

func (p *argsPlan) build(n *argsNode, slots []argSlot, raw []byte) (ast.Value, error) {
	sl := slots[n.slot]
	switch {
	case sl.kind == 0:
		return nil, nil
	case p.whole[n.slot]:
		return jsonValue(slotBytes(raw, sl))
	case sl.kind == '{' && len(n.children) > 0:
		pairs := make([][2]*ast.Term, 0, len(n.children))
		for k, c := range n.children {
			v, err := p.build(c, slots, raw)
			if err != nil {
				return nil, err
			}
			if v != nil {
				pairs = append(pairs, [2]*ast.Term{ast.StringTerm(k), ast.NewTerm(v)})
			}
		}
		return ast.NewObject(pairs...), nil
	}
	return kindValues[sl.kind], nil
}

// kindValues are the least values of each JSON kind, standing for a value
// the policy reads only the kind of.
var kindValues = map[jsontext.Kind]ast.Value{
	'{': ast.NewObject(), '[': ast.NewArray(), '"': ast.String(""), '0': ast.Number("0"),
	't': ast.Boolean(true), 'f': ast.Boolean(false), 'n': ast.NullValue,
}

// value reads one JSON value, recording it in n's slot.
func (s *argScanner) value(n *argsNode) error {
	start := s.dec.InputOffset()
	kind := s.dec.PeekKind()
	switch kind {
	case '{':
		if _, err := s.dec.ReadToken(); err != nil {
			return err
		}
		for s.dec.PeekKind() != '}' {
			name, err := s.dec.ReadValue()
			if err != nil {
				return err
			}
			var child *argsNode
			if n != nil && n.children != nil {
				child = n.child(name, &s.name)
			}
			if err := s.value(child); err != nil {
				return err
			}
		}
		if _, err := s.dec.ReadToken(); err != nil {
			return err
		}
	case '[':
		if _, err := s.dec.ReadToken(); err != nil {
			return err
		}
		for s.dec.PeekKind() != ']' {
			if err := s.value(nil); err != nil {
				return err
			}
		}
		if _, err := s.dec.ReadToken(); err != nil {
			return err
		}
	default:
		v, err := s.dec.ReadValue()
		if err != nil {
			return err
		}
		// Only numbers with an exponent can be out of OPA's range
		// (jsonValue refuses them).
		if kind == '0' && bytes.ContainsAny(v, "eE") {
			if _, err := ast.NumberChecked(string(v)); err != nil {
				return err
			}
		}
	}
	if n != nil {
		s.slots[n.slot] = argSlot{kind: kind, lo: start, hi: s.dec.InputOffset()}
	}
	return nil
}

// child returns the node of the member named by the quoted JSON string
// name, or nil.
func (n *argsNode) child(name []byte, scratch *[]byte) *argsNode {
	unq := name[1 : len(name)-1]
	if bytes.IndexByte(unq, '\\') >= 0 {
		u, err := jsontext.AppendUnquote((*scratch)[:0], name)
		if err != nil {
			return nil
		}
		*scratch, unq = u, u
	}
	return n.children[string(unq)]
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

// volatile reports whether name is in volatileBuiltins.
func volatile(name string) bool {
	for _, v := range volatileBuiltins {
		if strings.HasPrefix(name, v) {
			return true
		}
	}
	return false
}
