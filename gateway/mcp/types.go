// Package mcp is mcpgate's pure MCP message layer: strict JSON, JSON-RPC 2.0
// framing, the MCP fields the policy needs, and the streamable HTTP header
// rules. It performs no I/O and imports neither net/http nor gRPC.
package mcp

import (
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// JSON-RPC 2.0 error codes (JSON-RPC 2.0 §5.1) and the MCP transport codes of
// revision 2026-07-28 (SEP-2575, SEP-2243).
const (
	CodeParseError     = -32700
	CodeInvalidRequest = -32600
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternalError  = -32603
	// CodeHeaderMismatch: an Mcp-Method, Mcp-Name or MCP-Protocol-Version
	// header is missing, malformed or differs from the body.
	CodeHeaderMismatch = -32020
	// CodeMissingRequiredClientCapabilities: the request needs a client
	// capability the per-request _meta did not declare.
	CodeMissingRequiredClientCapabilities = -32021
	// CodeUnsupportedProtocolVersion: the requested revision is not served;
	// data carries {"supported":[...],"requested":"..."}.
	CodeUnsupportedProtocolVersion = -32022
)

// Protocol revisions mcpgate speaks, newest first.
const (
	Version20260728 = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
	Version20250326 = "2025-03-26"
	Version20241105 = "2024-11-05"
)

// SupportedVersions lists the protocol revisions mcpgate accepts, newest first.
var SupportedVersions = []string{Version20260728, Version20251125, Version20250618, Version20250326, Version20241105}

// IsSupportedVersion reports whether v is one of SupportedVersions.
func IsSupportedVersion(v string) bool {
	for _, s := range SupportedVersions {
		if s == v {
			return true
		}
	}
	return false
}

// Standard header names (streamable HTTP transport). Header keys are stored
// lower-case in Header.
const (
	HeaderProtocolVersion = "mcp-protocol-version"
	HeaderMethod          = "mcp-method"
	HeaderName            = "mcp-name"
	HeaderParamPrefix     = "mcp-param-"
	HeaderSessionID       = "mcp-session-id"
)

// _meta keys of revision 2026-07-28 (SEP-2575).
const (
	MetaKeyProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaKeyClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaKeyClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
)

// Header is a transport-neutral set of HTTP header fields. Keys are
// lower-case (as in HTTP/2 and Envoy); use the methods, which fold case.
type Header map[string][]string

// Get returns the first value of key, or "".
func (h Header) Get(key string) string {
	if v := h[strings.ToLower(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Values returns every value of key.
func (h Header) Values(key string) []string { return h[strings.ToLower(key)] }

// Has reports whether key is present (even with an empty value).
func (h Header) Has(key string) bool { _, ok := h[strings.ToLower(key)]; return ok }

// Set replaces the values of key with v.
func (h Header) Set(key, v string) { h[strings.ToLower(key)] = []string{v} }

// Add appends v to the values of key.
func (h Header) Add(key, v string) { k := strings.ToLower(key); h[k] = append(h[k], v) }

// Del removes key.
func (h Header) Del(key string) { delete(h, strings.ToLower(key)) }

// Clone returns a deep copy of h.
func (h Header) Clone() Header {
	c := make(Header, len(h))
	for k, v := range h {
		c[k] = append([]string(nil), v...)
	}
	return c
}

// Kind tells the three JSON-RPC 2.0 message kinds apart.
type Kind uint8

const (
	KindRequest      Kind = iota + 1 // has "method" and "id"
	KindNotification                 // has "method", no "id"
	KindResponse                     // has "result" or "error" and "id"
)

// String returns "request", "notification" or "response".
func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return "unknown"
}

// Implementation is the clientInfo / serverInfo object of MCP.
type Implementation struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	Title   string `json:"title,omitempty"`
}

// Meta holds the per-request _meta keys of revision 2026-07-28.
type Meta struct {
	// ProtocolVersion is _meta["io.modelcontextprotocol/protocolVersion"], "" if absent.
	ProtocolVersion string
	// ClientInfo is _meta["io.modelcontextprotocol/clientInfo"], nil if absent.
	ClientInfo *Implementation
	// ClientCapabilities is the raw JSON of
	// _meta["io.modelcontextprotocol/clientCapabilities"], nil if absent.
	ClientCapabilities jsontext.Value
}

// Message is one parsed JSON-RPC 2.0 message with the MCP fields mcpgate
// decides on. Raw fields alias the parsed body; do not modify them.
type Message struct {
	Kind Kind
	// ID is the id exactly as it appeared in the body (e.g. `0`, `-1`,
	// `12345678901234567890`, `"a"`, `null`); nil for notifications.
	ID jsontext.Value
	// Method is the JSON-RPC method ("" for responses).
	Method string
	// Params is the raw params value, nil if absent.
	Params jsontext.Value
	// Result and Error are the raw members of a response.
	Result, Error jsontext.Value

	// Name is params.name of tools/call and prompts/get.
	Name string
	// URI is params.uri of resources/read, resources/subscribe and
	// resources/unsubscribe.
	URI string
	// Arguments is the raw params.arguments object of tools/call and
	// prompts/get, nil if absent.
	Arguments jsontext.Value
	// Meta holds the 2026-07-28 per-request _meta keys.
	Meta Meta
	// InitializeVersion is params.protocolVersion of an initialize request
	// (revisions before 2026-07-28).
	InitializeVersion string
	// ClientInfo of an initialize request (params.clientInfo), if present.
	InitializeClientInfo *Implementation

	// Members of params Parse records on its pass (Param): raw values,
	// sub-slices of the body, nil when absent.
	task, requestState jsontext.Value
	recorded           bool // made by Parse, with params read
}

// Recorded params members (Param).
const (
	// ParamTask is params.task, the task augmentation of a request
	// (revision 2025-11-25 and later, schema.ts TaskMetadata).
	ParamTask = "task"
	// ParamRequestState is params.requestState of a retried tools/call
	// (revision 2026-07-28 multi-round requests).
	ParamRequestState = "requestState"
)

// Param returns the raw value of params member name (compared after
// unescaping, as every name Parse reads) as Parse recorded it on its
// single pass, and whether it is present. recorded is false when m was
// not made by Parse from a message with params, or name is not one of
// ParamTask and ParamRequestState: the caller then reads m.Params itself.
func (m *Message) Param(name string) (v jsontext.Value, ok, recorded bool) {
	if !m.recorded {
		return nil, false, false
	}
	switch name {
	case ParamTask:
		v = m.task
	case ParamRequestState:
		v = m.requestState
	default:
		return nil, false, false
	}
	return v, v != nil, true
}

// Target returns the name the Mcp-Name header carries for m: the tool or
// prompt name, or the resource URI; "" for other methods.
func (m *Message) Target() string {
	if m.URI != "" {
		return m.URI
	}
	return m.Name
}

// Error is a protocol fault with the HTTP status and JSON-RPC error the MCP
// specification gives for it. It is safe to show to the client.
type Error struct {
	Status  int    // HTTP status, e.g. 400
	Code    int    // JSON-RPC error code, e.g. -32020
	Message string // JSON-RPC error message
	Data    any    // optional JSON-RPC error data
}

func (e *Error) Error() string { return e.Message }
