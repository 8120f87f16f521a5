package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// inputValue builds the OPA value of in directly, without a JSON round
// trip. The document equals what encoding/json makes of in (the same keys,
// omitempty rules and numbers), except that an empty Version becomes
// SchemaVersion.
func inputValue(in *Input) (ast.Value, error) {
	version := in.Version
	if version == "" {
		version = SchemaVersion
	}
	msg, err := messageValue(&in.Message)
	if err != nil {
		return nil, err
	}
	items := make([][2]*ast.Term, 0, 7)
	items = append(items,
		[2]*ast.Term{kVersion, ast.StringTerm(version)},
		[2]*ast.Term{kPhase, ast.StringTerm(in.Phase)},
		[2]*ast.Term{kTransport, ast.NewTerm(transportValue(&in.Transport))},
		[2]*ast.Term{kMessage, ast.NewTerm(msg)},
	)
	if in.Tool != nil {
		items = append(items, [2]*ast.Term{kTool, ast.NewTerm(toolValue(in.Tool))})
	}
	if len(in.Items) > 0 {
		terms := make([]*ast.Term, len(in.Items))
		for i := range in.Items {
			it := &in.Items[i]
			kv := make([][2]*ast.Term, 1, 2)
			kv[0] = [2]*ast.Term{kName, ast.StringTerm(it.Name)}
			if it.Tool != nil {
				kv = append(kv, [2]*ast.Term{kTool, ast.NewTerm(toolValue(it.Tool))})
			}
			terms[i] = ast.ObjectTerm(kv...)
		}
		items = append(items, [2]*ast.Term{kItems, ast.ArrayTerm(terms...)})
	}
	items = append(items, [2]*ast.Term{kPrincipal, ast.NewTerm(principalValue(&in.Principal))})
	return ast.NewObject(items...), nil
}

func transportValue(t *Transport) ast.Object {
	kv := make([][2]*ast.Term, 5, 6)
	kv[0] = [2]*ast.Term{kKind, ast.StringTerm(t.Kind)}
	kv[1] = [2]*ast.Term{kHTTPMethod, ast.StringTerm(t.HTTPMethod)}
	kv[2] = [2]*ast.Term{kPath, ast.StringTerm(t.Path)}
	kv[3] = [2]*ast.Term{kUpstream, ast.StringTerm(t.Upstream)}
	kv[4] = [2]*ast.Term{kProtocolVersion, ast.StringTerm(t.ProtocolVersion)}
	if t.Origin != "" {
		kv = append(kv, [2]*ast.Term{kOrigin, ast.StringTerm(t.Origin)})
	}
	return ast.NewObject(kv...)
}

func messageValue(m *Message) (ast.Object, error) {
	kv := make([][2]*ast.Term, 2, 6)
	kv[0] = [2]*ast.Term{kKind, ast.StringTerm(m.Kind)}
	kv[1] = [2]*ast.Term{kMethod, ast.StringTerm(m.Method)}
	if m.Name != "" {
		kv = append(kv, [2]*ast.Term{kName, ast.StringTerm(m.Name)})
	}
	if m.URI != "" {
		kv = append(kv, [2]*ast.Term{kURI, ast.StringTerm(m.URI)})
	}
	if len(m.Arguments) > 0 {
		args, err := jsonValue(m.Arguments)
		if err != nil {
			return nil, fmt.Errorf("message arguments: %w", err)
		}
		kv = append(kv, [2]*ast.Term{kArguments, ast.NewTerm(args)})
	}
	if m.Client != nil {
		ckv := make([][2]*ast.Term, 1, 2)
		ckv[0] = [2]*ast.Term{kName, ast.StringTerm(m.Client.Name)}
		if m.Client.Version != "" {
			ckv = append(ckv, [2]*ast.Term{kVersion, ast.StringTerm(m.Client.Version)})
		}
		kv = append(kv, [2]*ast.Term{kClient, ast.ObjectTerm(ckv...)})
	}
	return ast.NewObject(kv...), nil
}

func toolValue(t *Tool) ast.Object {
	kv := make([][2]*ast.Term, 3, 7)
	kv[0] = [2]*ast.Term{kName, ast.StringTerm(t.Name)}
	kv[1] = [2]*ast.Term{kDeclared, ast.InternedTerm(t.Declared)}
	kv[2] = [2]*ast.Term{kEffect, ast.StringTerm(t.Effect)}
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
	return ast.NewObject(kv...)
}

func principalValue(p *Principal) ast.Object {
	kv := make([][2]*ast.Term, 1, 4)
	kv[0] = [2]*ast.Term{kAuthenticated, ast.InternedTerm(p.Authenticated)}
	if p.Tenant != "" {
		kv = append(kv, [2]*ast.Term{kTenant, ast.StringTerm(p.Tenant)})
	}
	if p.Subject != "" {
		kv = append(kv, [2]*ast.Term{kSubject, ast.StringTerm(p.Subject)})
	}
	if len(p.Rights) > 0 {
		kv = append(kv, [2]*ast.Term{kRights, stringsTerm(p.Rights)})
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

// decoders reuses jsontext decoders (and their state stacks) across calls.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// errTrailingData reports bytes after the JSON value.
var errTrailingData = errors.New("unexpected data after the JSON value")

// jsonValue converts one JSON value to an OPA value by walking its jsontext
// tokens. Numbers keep their exact literal (like json.Number); duplicate
// object names and invalid UTF-8 are errors, as in gateway/mcp.
func jsonValue(raw jsontext.Value) (ast.Value, error) {
	dec := decoders.Get().(*jsontext.Decoder)
	// A *bytes.Buffer lets the decoder read raw in place, without copying.
	dec.Reset(bytes.NewBuffer(raw))
	defer func() {
		dec.Reset(eofReader{})
		decoders.Put(dec)
	}()
	v, err := readValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
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

func readValue(dec *jsontext.Decoder) (ast.Value, error) {
	tok, err := dec.ReadToken()
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
		return ast.Number(json.Number(tok.String())), nil
	case '{':
		obj := ast.NewObject()
		for dec.PeekKind() != '}' {
			k, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			// A token is valid only until the next read.
			key := ast.StringTerm(k.String())
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			obj.Insert(key, ast.NewTerm(v))
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		var terms []*ast.Term
		for dec.PeekKind() != ']' {
			v, err := readValue(dec)
			if err != nil {
				return nil, err
			}
			terms = append(terms, ast.NewTerm(v))
		}
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		return ast.NewArray(terms...), nil
	default:
		return nil, fmt.Errorf("unexpected JSON token %v", tok.Kind())
	}
}
