package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
)

// Tool is one tool as an upstream listed it in tools/list.
type Tool struct {
	// Name, Title and Description are the tool object's "name", "title"
	// and "description" members ("" when absent). Description is kept
	// verbatim, invisible and bidi characters included (manifest lint
	// reports them; the hash covers them).
	Name, Title, Description string
	// InputSchema, OutputSchema and Annotations are the raw JSON of the
	// "inputSchema", "outputSchema" and "annotations" members as listed
	// (member order and white space included); nil when the member is
	// absent or null.
	InputSchema, OutputSchema, Annotations jsontext.Value
	// Definition is the whole tool object as listed, including members
	// the hash leaves out (_meta, icons, execution, ...).
	Definition jsontext.Value
	// Hash identifies the definition: "sha256:" followed by the 64
	// lower-case hex digits of the SHA-256 digest of the RFC 8785 (JSON
	// Canonicalization Scheme) form of the JSON object made of the tool
	// object's members "name", "title", "description", "inputSchema",
	// "outputSchema" and "annotations", each with its value as listed; a
	// member that is absent or null is left out. Other members (_meta,
	// icons, execution, ...) are not hashed. RFC 8785 sorts object
	// members by name, removes white space, writes strings in their
	// minimal escaped form and numbers as IEEE 754 doubles (ECMAScript
	// formatting), so re-ordering members, re-indenting or writing 1.0 for
	// 1 does not change the hash; a change to any hashed value does.
	Hash string
}

// RefusedTool is a listed tool that the catalog left out of its snapshot.
type RefusedTool struct {
	// Name is the tool's name as listed (possibly empty or not UTF-8 safe
	// to print: quote it).
	Name string
	// Reason says why, in English.
	Reason string
}

// Snapshot is one successful listing of an upstream's tools. A Snapshot is
// immutable once returned: callers must not modify it.
type Snapshot struct {
	// Upstream is the upstream's name (Upstream.Name).
	Upstream string
	// Tools are the listed tools in the upstream's order (pages in order,
	// tools in page order), without the refused ones. Names are unique.
	Tools []Tool
	// Refused are the listed tools left out of Tools: names outside
	// [A-Za-z0-9_.-]{1,128} (see ValidToolName), and tools the MCP SDK
	// client excludes as invalid (bad x-mcp-header annotations).
	Refused []RefusedTool
	// FetchedAt is when the listing finished.
	FetchedAt time.Time
	// ProtocolVersion is the MCP revision the listing was made with.
	ProtocolVersion string

	index map[string]int // name → index in Tools; nil: linear search
}

// Lookup returns the tool named name, and false when the snapshot does not
// list it. A nil snapshot lists nothing.
func (s *Snapshot) Lookup(name string) (*Tool, bool) {
	if s == nil {
		return nil, false
	}
	if s.index != nil {
		i, ok := s.index[name]
		if !ok {
			return nil, false
		}
		return &s.Tools[i], true
	}
	for i := range s.Tools {
		if s.Tools[i].Name == name {
			return &s.Tools[i], true
		}
	}
	return nil, false
}

// buildIndex fills s.index; s.Tools must have unique names.
func (s *Snapshot) buildIndex() {
	s.index = make(map[string]int, len(s.Tools))
	for i := range s.Tools {
		s.index[s.Tools[i].Name] = i
	}
}

// MaxToolNameLength is the longest tool name the catalog accepts (the MCP
// specification's tool name guidance: 1 to 128 characters).
const MaxToolNameLength = 128

// ValidToolName reports whether name is 1 to 128 characters from
// A-Z, a-z, 0-9, "_", "-" and "." (the MCP specification's tool name
// guidance, revision 2025-11-25). Anything else (spaces, slashes, control,
// invisible or non-ASCII characters) could make one name look like
// another, or smuggle text into places where names are shown.
func ValidToolName(name string) bool {
	if len(name) == 0 || len(name) > MaxToolNameLength {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
		default:
			return false
		}
	}
	return true
}

// hashedMembers are the members of a tool object that Tool.Hash covers.
var hashedMembers = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// ParseTool reads one tool object as listed in a tools/list result (raw
// JSON) and computes its hash. The object must be valid I-JSON (RFC 7493:
// no duplicate member names, valid UTF-8), "name" must be a string, and
// "title" and "description", when present and not null, strings. It does
// not check the name (see ValidToolName). A number in a hashed member
// that is outside the range of an IEEE 754 double cannot be put in RFC 8785
// form: such a tool is an error too.
func ParseTool(raw jsontext.Value) (Tool, error) {
	var t Tool
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.ReadToken()
	if err != nil {
		return t, err
	}
	if tok.Kind() != '{' {
		return t, fmt.Errorf("a tool is a JSON object, not %s", kindName(tok.Kind()))
	}
	hashed := map[string]jsontext.Value{}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return t, err
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return t, err
		}
		v = v.Clone() // valid only until the next read
		if v.Kind() == 'n' {
			continue // null: as if absent
		}
		switch name {
		case "name", "title", "description":
			if v.Kind() != '"' {
				return t, fmt.Errorf("tool member %q is %s, not a string", name, kindName(v.Kind()))
			}
			s, err := jsontext.AppendUnquote(nil, v)
			if err != nil {
				return t, err
			}
			switch name {
			case "name":
				t.Name = string(s)
			case "title":
				t.Title = string(s)
			default:
				t.Description = string(s)
			}
		case "inputSchema":
			t.InputSchema = v
		case "outputSchema":
			t.OutputSchema = v
		case "annotations":
			t.Annotations = v
		default:
			continue
		}
		hashed[name] = v
	}
	if _, err := dec.ReadToken(); err != nil {
		return t, err
	}
	if _, err := dec.ReadToken(); err == nil {
		return t, errors.New("data after the tool object")
	}
	if _, ok := hashed["name"]; !ok {
		return t, errors.New(`tool has no "name"`)
	}
	t.Hash, err = definitionHash(hashed)
	if err != nil {
		return t, err
	}
	t.Definition = raw.Clone()
	return t, nil
}

// definitionHash is Tool.Hash of the hashed members: SHA-256 of their
// RFC 8785 form. RFC 8785 reads numbers as float64, so two definitions
// that differ only in a number beyond float64 precision share a hash (at
// most a schema bound at the edge of float64 precision); it stays RFC 8785
// because pinned manifests hold these hashes.
func definitionHash(members map[string]jsontext.Value) (string, error) {
	var b bytes.Buffer
	enc := jsontext.NewEncoder(&b)
	_ = enc.WriteToken(jsontext.BeginObject)
	for _, name := range hashedMembers {
		v, ok := members[name]
		if !ok {
			continue
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return "", err
		}
		if err := enc.WriteValue(v); err != nil {
			return "", err
		}
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return "", err
	}
	v := jsontext.Value(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
	if err := v.Canonicalize(); err != nil {
		return "", fmt.Errorf("canonical JSON (RFC 8785): %w", err)
	}
	sum := sha256.Sum256(v)
	return HashPrefix + hex.EncodeToString(sum[:]), nil
}

// HashPrefix starts every Tool.Hash and Pin.Hash.
const HashPrefix = "sha256:"

// validHash reports whether h is HashPrefix and 64 lower-case hex digits.
func validHash(h string) bool {
	if len(h) != len(HashPrefix)+2*sha256.Size || h[:len(HashPrefix)] != HashPrefix {
		return false
	}
	for _, c := range h[len(HashPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 'f', 't':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "invalid"
}
