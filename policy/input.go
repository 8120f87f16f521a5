package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/open-policy-agent/opa/v1/ast"
)

// Keys of the input document, shared by every input built (OPA never
// mutates input terms).
var (
	kVersion         = ast.StringTerm("version")
	kPhase           = ast.StringTerm("phase")
	kTransport       = ast.StringTerm("transport")
	kKind            = ast.StringTerm("kind")
	kHTTPMethod      = ast.StringTerm("http_method")
	kPath            = ast.StringTerm("path")
	kUpstream        = ast.StringTerm("upstream")
	kProtocolVersion = ast.StringTerm("protocol_version")
	kOrigin          = ast.StringTerm("origin")
	kMessage         = ast.StringTerm("message")
	kMethod          = ast.StringTerm("method")
	kName            = ast.StringTerm("name")
	kURI             = ast.StringTerm("uri")
	kArguments       = ast.StringTerm("arguments")
	kTenantArguments = ast.StringTerm("tenant_arguments")
	kArgProblems     = ast.StringTerm("argument_problems")
	kArgument        = ast.StringTerm("argument")
	kAllowed         = ast.StringTerm("allowed")
	kExpected        = ast.StringTerm("expected")
	kCatalog         = ast.StringTerm("catalog")
	kListed          = ast.StringTerm("listed")
	kState           = ast.StringTerm("state")
	kClient          = ast.StringTerm("client")
	kTool            = ast.StringTerm("tool")
	kDeclared        = ast.StringTerm("declared")
	kEffect          = ast.StringTerm("effect")
	kRights          = ast.StringTerm("rights")
	kUntrustedText   = ast.StringTerm("untrusted_text")
	kResultFields    = ast.StringTerm("result_fields")
	kHidden          = ast.StringTerm("hidden")
	kItems           = ast.StringTerm("items")
	kPrincipal       = ast.StringTerm("principal")
	kAuthenticated   = ast.StringTerm("authenticated")
	kTenant          = ast.StringTerm("tenant")
	kSubject         = ast.StringTerm("subject")
	kCredentialKind  = ast.StringTerm("credential_kind")
	kIssuer          = ast.StringTerm("issuer")
	kClientID        = ast.StringTerm("client_id")
	kConnection      = ast.StringTerm("connection")
	kCredentialID    = ast.StringTerm("credential_id")
	kTokenRights     = ast.StringTerm("token_rights")
	kLiveRights      = ast.StringTerm("live_rights")
	kExpensive       = ast.StringTerm("expensive")
	kMovesMoney      = ast.StringTerm("moves_money")
	kLegallyBinding  = ast.StringTerm("legally_binding")
	kNotifyObject    = ast.StringTerm("notify_object")
	kDeadlineMS      = ast.StringTerm("deadline_ms")
	kHash            = ast.StringTerm("hash")
	kTitle           = ast.StringTerm("title")
	kAnnotations     = ast.StringTerm("annotations")
	kFinders         = ast.StringTerm("finders")
	kToolset         = ast.StringTerm("toolset")
	kToolsets        = ast.StringTerm("toolsets")
	kURITenants      = ast.StringTerm("uri_tenants")
	kURIProblem      = ast.StringTerm("uri_problem")
	kUndeclared      = ast.StringTerm("undeclared")
	kCalledAs        = ast.StringTerm("called_as")
)

// vocabulary holds ready terms for the strings that recur in inputs:
// phases, kinds, methods, transport facts and effect classes. Looking one
// up saves the two allocations of a new string term.
var vocabulary = func() map[string]*ast.Term {
	words := []string{
		"", "request", "list", "notification", "proxy", "extproc",
		"POST", "GET", "DELETE", "/mcp", SchemaVersion,
		"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05",
		"initialize", "ping", "server/discover", "subscriptions/listen",
		"tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "completion/complete",
		"logging/setLevel", "tasks/get", "tasks/list", "tasks/cancel", "tasks/result",
		"notifications/initialized", "notifications/cancelled", "notifications/progress",
		"notifications/roots/list_changed", "notifications/tasks/status",
	}
	words = append(words, CredentialOAuth, CatalogApproved, CatalogChanged, CatalogUnpinned, CatalogUnusable)
	words = append(words, Effects...)
	m := make(map[string]*ast.Term, len(words))
	for _, w := range words {
		m[w] = ast.StringTerm(w)
	}
	return m
}()

// str returns the term of s, shared when s is in the vocabulary.
func str(s string) *ast.Term {
	if t, ok := vocabulary[s]; ok {
		return t
	}
	return ast.StringTerm(s)
}

// anonymousTerm is the principal of every unauthenticated caller.
var anonymousTerm = ast.NewTerm(principalValue(&Principal{}))

// inputValue builds the OPA value of in directly, without a JSON round
// trip. The document equals what encoding/json makes of in (the same keys,
// omitempty rules and numbers), except that an empty Version becomes
// SchemaVersion. c (optional) supplies shared terms for parts that repeat.
func inputValue(in *Input, c *termCaches) (ast.Value, error) {
	return inputValueArgs(in, c, nil)
}

// inputValueArgs is inputValue with the arguments built by args (argsPlan:
// only the parts a policy reads; nil: all of them).
func inputValueArgs(in *Input, c *termCaches, args *argsPlan) (ast.Value, error) {
	version := in.Version
	if version == "" {
		version = SchemaVersion
	}
	msg, err := messageValue(&in.Message, c, args)
	if err != nil {
		return nil, err
	}
	items := make([][2]*ast.Term, 0, 7)
	items = append(items,
		[2]*ast.Term{kVersion, str(version)},
		[2]*ast.Term{kPhase, str(in.Phase)},
		[2]*ast.Term{kTransport, c.transport(&in.Transport)},
		[2]*ast.Term{kMessage, ast.NewTerm(msg)},
	)
	if in.Tool != nil {
		t, err := c.tool(in.Transport.Upstream, in.Tool)
		if err != nil {
			return nil, err
		}
		items = append(items, [2]*ast.Term{kTool, t})
	}
	if len(in.Finders) > 0 {
		terms := make([]*ast.Term, len(in.Finders))
		for i := range in.Finders {
			t, err := c.tool(in.Transport.Upstream, &in.Finders[i])
			if err != nil {
				return nil, err
			}
			terms[i] = t
		}
		items = append(items, [2]*ast.Term{kFinders, ast.ArrayTerm(terms...)})
	}
	if len(in.Items) > 0 {
		terms := make([]*ast.Term, len(in.Items))
		for i := range in.Items {
			it := &in.Items[i]
			if it.Tool == nil {
				if len(it.URITenants) > 0 {
					terms[i] = ast.ObjectTerm([2]*ast.Term{kName, ast.StringTerm(it.Name)}, [2]*ast.Term{kURITenants, stringsTerm(it.URITenants)})
					continue
				}
				terms[i] = ast.ObjectTerm([2]*ast.Term{kName, ast.StringTerm(it.Name)})
				continue
			}
			t, err := c.tool(in.Transport.Upstream, it.Tool)
			if err != nil {
				return nil, err
			}
			terms[i] = ast.ObjectTerm(
				[2]*ast.Term{kName, ast.StringTerm(it.Name)},
				[2]*ast.Term{kTool, t},
			)
		}
		items = append(items, [2]*ast.Term{kItems, ast.ArrayTerm(terms...)})
	}
	p := anonymousTerm
	if pr := &in.Principal; pr.Authenticated || pr.Tenant != "" || pr.Subject != "" || len(pr.Rights) > 0 ||
		len(pr.TokenRights) > 0 || pr.LiveRights != nil || pr.CredentialKind != "" || pr.CredentialID != "" ||
		pr.Issuer != "" || pr.ClientID != "" || pr.Connection != "" || pr.Toolset != "" {
		p = ast.NewTerm(principalValue(pr))
	}
	items = append(items, [2]*ast.Term{kPrincipal, p})
	return ast.NewObject(items...), nil
}

func transportValue(t *Transport) *ast.Term {
	kv := make([][2]*ast.Term, 5, 7)
	kv[0] = [2]*ast.Term{kKind, str(t.Kind)}
	kv[1] = [2]*ast.Term{kHTTPMethod, str(t.HTTPMethod)}
	kv[2] = [2]*ast.Term{kPath, str(t.Path)}
	kv[3] = [2]*ast.Term{kUpstream, ast.StringTerm(t.Upstream)}
	kv[4] = [2]*ast.Term{kProtocolVersion, str(t.ProtocolVersion)}
	if t.Tenant != "" {
		kv = append(kv, [2]*ast.Term{kTenant, ast.StringTerm(t.Tenant)})
	}
	if t.Origin != "" {
		kv = append(kv, [2]*ast.Term{kOrigin, ast.StringTerm(t.Origin)})
	}
	return ast.ObjectTerm(kv...)
}

func messageValue(m *Message, c *termCaches, argsPlan *argsPlan) (ast.Object, error) {
	kv := make([][2]*ast.Term, 2, 6)
	kv[0] = [2]*ast.Term{kKind, str(m.Kind)}
	kv[1] = [2]*ast.Term{kMethod, str(m.Method)}
	if m.Name != "" {
		kv = append(kv, [2]*ast.Term{kName, ast.StringTerm(m.Name)})
	}
	if m.URI != "" {
		kv = append(kv, [2]*ast.Term{kURI, ast.StringTerm(m.URI)})
	}
	if len(m.Arguments) > 0 {
		var args ast.Value
		var err error
		if argsPlan == nil {
			args, err = jsonValue(m.Arguments)
		} else {
			args, err = argsPlan.value(m.Arguments)
		}
		if err != nil {
			return nil, fmt.Errorf("message arguments: %w", err)
		}
		if args != nil {
			kv = append(kv, [2]*ast.Term{kArguments, ast.NewTerm(args)})
		}
	}
	if len(m.TenantArguments) > 0 {
		names := make([]*ast.Term, len(m.TenantArguments))
		for i, n := range m.TenantArguments {
			names[i] = ast.StringTerm(n)
		}
		kv = append(kv, [2]*ast.Term{kTenantArguments, ast.ArrayTerm(names...)})
	}
	if len(m.ArgumentProblems) > 0 {
		probs := make([]*ast.Term, len(m.ArgumentProblems))
		for i, pr := range m.ArgumentProblems {
			pkv := [][2]*ast.Term{{kArgument, ast.StringTerm(pr.Argument)}, {kCode, ast.StringTerm(pr.Code)}, {kMessage, ast.StringTerm(pr.Message)}}
			if len(pr.Allowed) > 0 {
				pkv = append(pkv, [2]*ast.Term{kAllowed, stringsTerm(pr.Allowed)})
			}
			if pr.Expected != "" {
				pkv = append(pkv, [2]*ast.Term{kExpected, ast.StringTerm(pr.Expected)})
			}
			probs[i] = ast.ObjectTerm(pkv...)
		}
		kv = append(kv, [2]*ast.Term{kArgProblems, ast.ArrayTerm(probs...)})
	}
	if m.Client != nil {
		kv = append(kv, [2]*ast.Term{kClient, c.client(m.Client)})
	}
	if len(m.URITenants) > 0 {
		kv = append(kv, [2]*ast.Term{kURITenants, stringsTerm(m.URITenants)})
	}
	if m.URIProblem != "" {
		kv = append(kv, [2]*ast.Term{kURIProblem, ast.StringTerm(m.URIProblem)})
	}
	return ast.NewObject(kv...), nil
}

func clientValue(cl *Client) *ast.Term {
	if cl.Version == "" {
		return ast.ObjectTerm([2]*ast.Term{kName, ast.StringTerm(cl.Name)})
	}
	return ast.ObjectTerm(
		[2]*ast.Term{kName, ast.StringTerm(cl.Name)},
		[2]*ast.Term{kVersion, ast.StringTerm(cl.Version)},
	)
}

// toolValue builds the term of a tool; c (optional) shares the terms of
// catalog entries.
func toolValue(t *Tool, c *termCaches) (*ast.Term, error) {
	kv := make([][2]*ast.Term, 3, 12)
	kv[0] = [2]*ast.Term{kName, ast.StringTerm(t.Name)}
	kv[1] = [2]*ast.Term{kDeclared, ast.InternedTerm(t.Declared)}
	kv[2] = [2]*ast.Term{kEffect, str(t.Effect)}
	if len(t.Rights) > 0 {
		kv = append(kv, [2]*ast.Term{kRights, stringsTerm(t.Rights)})
	}
	if len(t.UntrustedText) > 0 {
		kv = append(kv, [2]*ast.Term{kUntrustedText, stringsTerm(t.UntrustedText)})
	}
	if len(t.ResultFields) > 0 {
		kv = append(kv, [2]*ast.Term{kResultFields, stringsTerm(t.ResultFields)})
	}
	if t.Hidden {
		kv = append(kv, [2]*ast.Term{kHidden, ast.InternedTerm(true)})
	}
	if t.Expensive {
		kv = append(kv, [2]*ast.Term{kExpensive, ast.InternedTerm(true)})
	}
	if t.MovesMoney {
		kv = append(kv, [2]*ast.Term{kMovesMoney, ast.InternedTerm(true)})
	}
	if t.LegallyBinding {
		kv = append(kv, [2]*ast.Term{kLegallyBinding, ast.InternedTerm(true)})
	}
	if t.NotifyObject != "" {
		kv = append(kv, [2]*ast.Term{kNotifyObject, ast.StringTerm(t.NotifyObject)})
	}
	if t.DeadlineMS != 0 {
		kv = append(kv, [2]*ast.Term{kDeadlineMS, ast.IntNumberTerm(t.DeadlineMS)})
	}
	if len(t.Toolsets) > 0 {
		kv = append(kv, [2]*ast.Term{kToolsets, stringsTerm(t.Toolsets)})
	}
	if t.Undeclared != "" {
		kv = append(kv, [2]*ast.Term{kUndeclared, ast.StringTerm(t.Undeclared)})
	}
	if t.CalledAs != "" {
		kv = append(kv, [2]*ast.Term{kCalledAs, ast.StringTerm(t.CalledAs)})
	}
	if cat := t.Catalog; cat != nil {
		ct, err := c.catalog(cat)
		if err != nil {
			return nil, fmt.Errorf("tool %q catalog annotations: %w", t.Name, err)
		}
		kv = append(kv, [2]*ast.Term{kCatalog, ct})
	}
	return ast.ObjectTerm(kv...), nil
}

// catalogValue builds the term of a tool's catalog entry.
func catalogValue(cat *ToolCatalog) (*ast.Term, error) {
	ckv := make([][2]*ast.Term, 1, 5)
	ckv[0] = [2]*ast.Term{kListed, ast.InternedTerm(cat.Listed)}
	if cat.State != "" {
		ckv = append(ckv, [2]*ast.Term{kState, str(cat.State)})
	}
	if cat.Hash != "" {
		ckv = append(ckv, [2]*ast.Term{kHash, ast.StringTerm(cat.Hash)})
	}
	if cat.Title != "" {
		ckv = append(ckv, [2]*ast.Term{kTitle, ast.StringTerm(cat.Title)})
	}
	if len(cat.Annotations) > 0 {
		v, err := jsonValue(cat.Annotations)
		if err != nil {
			return nil, err
		}
		ckv = append(ckv, [2]*ast.Term{kAnnotations, ast.NewTerm(v)})
	}
	return ast.ObjectTerm(ckv...), nil
}

func principalValue(p *Principal) ast.Object {
	kv := make([][2]*ast.Term, 1, 12)
	kv[0] = [2]*ast.Term{kAuthenticated, ast.InternedTerm(p.Authenticated)}
	for _, f := range [...]struct {
		k *ast.Term
		v string
	}{{kTenant, p.Tenant}, {kSubject, p.Subject}, {kCredentialKind, p.CredentialKind}, {kCredentialID, p.CredentialID},
		{kIssuer, p.Issuer}, {kClientID, p.ClientID}, {kConnection, p.Connection}, {kToolset, p.Toolset}} {
		if f.v != "" {
			kv = append(kv, [2]*ast.Term{f.k, str(f.v)})
		}
	}
	if len(p.Rights) > 0 {
		kv = append(kv, [2]*ast.Term{kRights, stringsTerm(p.Rights)})
	}
	if len(p.TokenRights) > 0 {
		kv = append(kv, [2]*ast.Term{kTokenRights, stringsTerm(p.TokenRights)})
	}
	if p.LiveRights != nil {
		kv = append(kv, [2]*ast.Term{kLiveRights, stringsTerm(p.LiveRights)})
	}
	return ast.NewObject(kv...)
}

func stringsTerm(ss []string) *ast.Term {
	terms := make([]*ast.Term, len(ss))
	for i, s := range ss {
		terms[i] = ast.StringTerm(s)
	}
	return ast.ArrayTerm(terms...)
}

// argParser converts raw JSON to OPA values; pooled, with the decoder's
// state and scratch space reused across calls.
type argParser struct {
	dec   jsontext.Decoder
	pairs [][2]*ast.Term // members of the objects being read, innermost last
	elems []*ast.Term    // elements of the arrays being read, innermost last
}

var argParsers = sync.Pool{New: func() any { return new(argParser) }}

// errTrailingData reports bytes after the JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// jsonValue converts one JSON value to an OPA value by walking its jsontext
// tokens. Numbers keep their exact literal (like json.Number) and are
// refused where OPA's own conversion refuses them (exponents out of
// range); duplicate object names and invalid UTF-8 are errors, as in
// gateway/mcp.
func jsonValue(raw jsontext.Value) (ast.Value, error) {
	p := argParsers.Get().(*argParser)
	// A *bytes.Buffer lets the decoder read raw in place, without copying.
	p.dec.Reset(bytes.NewBuffer(raw))
	defer func() {
		p.dec.Reset(eofReader{})
		clear(p.pairs[:cap(p.pairs)])
		clear(p.elems[:cap(p.elems)])
		p.pairs, p.elems = p.pairs[:0], p.elems[:0]
		argParsers.Put(p)
	}()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.ReadToken(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errTrailingData
		}
		return nil, err
	}
	return v, nil
}

// eofReader detaches a pooled decoder from the last input.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (p *argParser) value() (ast.Value, error) {
	tok, err := p.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return ast.NullValue, nil
	case 'f':
		return ast.InternedValue(false), nil
	case 't':
		return ast.InternedValue(true), nil
	case '"':
		return ast.String(tok.String()), nil
	case '0':
		lit := tok.String()
		if t := ast.InternedIntNumberTermFromString(lit); t != nil {
			return t.Value, nil
		}
		// Refuses what OPA cannot evaluate (e.g. 1e9999999999), as its
		// own JSON conversion does.
		return ast.NumberChecked(lit)
	case '{':
		start := len(p.pairs)
		for p.dec.PeekKind() != '}' {
			k, err := p.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			// A token is valid only until the next read.
			key := ast.StringTerm(k.String())
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			p.pairs = append(p.pairs, [2]*ast.Term{key, ast.NewTerm(v)})
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		obj := ast.NewObject(p.pairs[start:]...) // copies the pairs
		p.pairs = p.pairs[:start]
		return obj, nil
	case '[':
		start := len(p.elems)
		for p.dec.PeekKind() != ']' {
			v, err := p.value()
			if err != nil {
				return nil, err
			}
			p.elems = append(p.elems, ast.NewTerm(v))
		}
		if _, err := p.dec.ReadToken(); err != nil {
			return nil, err
		}
		arr := ast.NewArray(slices.Clone(p.elems[start:])...) // keeps its slice
		p.elems = p.elems[:start]
		return arr, nil
	default:
		return nil, fmt.Errorf("unexpected JSON token %v", tok.Kind())
	}
}
