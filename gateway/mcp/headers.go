package mcp

import (
	"encoding/base64"
	"errors"
	"strings"
	"unicode/utf8"
)

// The base64 form of a header value (SEP-2243, "Value Encoding" of the
// streamable HTTP transport, 2026-07-28): =?base64?<std base64 of UTF-8>?=.
// The markers are case-sensitive.
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

var (
	errHeaderChars  = errors.New("header value contains characters outside visible ASCII, space and tab")
	errHeaderBase64 = errors.New("malformed =?base64?...?= header value")
	errHeaderUTF8   = errors.New("base64 header value does not decode to valid UTF-8")
)

// DecodeHeaderValue decodes an Mcp-Method, Mcp-Name or Mcp-Param-* header
// value (SEP-2243 value encoding). A value that starts with "=?base64?" and
// ends with "?=" is the standard (padded) base64 of a UTF-8 string; any other
// value is taken as is.
//
// It fails when the value holds a byte other than visible ASCII, space or
// tab (RFC 9110 field values; obs-text is refused), when the base64 form is
// malformed (bad alphabet, bad padding, non-canonical trailing bits, or a
// value such as "=?base64?=" that is only the overlapping markers), or
// when the decoded bytes are not valid UTF-8. Callers answer such failures
// with 400 / -32020.
func DecodeHeaderValue(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c > 0x7e {
			return "", errHeaderChars
		}
	}
	if !strings.HasPrefix(v, base64Prefix) || !strings.HasSuffix(v, base64Suffix) {
		return v, nil
	}
	if len(v) < len(base64Prefix)+len(base64Suffix) {
		return "", errHeaderBase64
	}
	enc := v[len(base64Prefix) : len(v)-len(base64Suffix)]
	for i := 0; i < len(enc); i++ {
		// The decoder skips CR and LF; refuse them and every other
		// byte outside the alphabet ourselves.
		c := enc[i]
		if !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/' || c == '=') {
			return "", errHeaderBase64
		}
	}
	dec, err := base64.StdEncoding.Strict().DecodeString(enc)
	if err != nil {
		return "", errHeaderBase64
	}
	if !utf8.Valid(dec) {
		return "", errHeaderUTF8
	}
	return string(dec), nil
}

// EncodeHeaderValue encodes s for an Mcp-Name or Mcp-Param-* header
// (SEP-2243): s itself when it is printable ASCII (0x20-0x7E) without a
// leading or trailing space and does not look like the base64 form;
// otherwise "=?base64?" + standard base64 of s + "?=". For valid UTF-8 s,
// DecodeHeaderValue(EncodeHeaderValue(s)) == s.
func EncodeHeaderValue(s string) string {
	if !needsBase64(s) {
		return s
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return true
		}
	}
	// A plain value that matches the sentinel pattern must be encoded too.
	return strings.HasPrefix(s, base64Prefix) && strings.HasSuffix(s, base64Suffix)
}

// isModern reports whether revision v uses the 2026-07-28 rules (per-request
// _meta, Mcp-Method / Mcp-Name required). Revisions are dates, so they
// compare as strings.
func isModern(v string) bool { return v >= Version20260728 }

// EffectiveVersion returns the protocol revision that governs m: the
// per-request _meta protocol version (2026-07-28 style), else the
// MCP-Protocol-Version header, else params.protocolVersion of an
// initialize request, else "2025-03-26" — the revision the streamable
// HTTP transport tells servers to assume when the header is absent
// (2025-06-18 and later, "Protocol Version Header"). m may be nil.
func EffectiveVersion(h Header, m *Message) string {
	if m != nil && m.Meta.ProtocolVersion != "" {
		return m.Meta.ProtocolVersion
	}
	if v := h.Get(HeaderProtocolVersion); v != "" {
		return v
	}
	if m != nil && m.Kind == KindRequest && m.Method == MethodInitialize && m.InitializeVersion != "" {
		return m.InitializeVersion
	}
	return Version20250326
}

// requiresName reports whether Mcp-Name is required for method under
// 2026-07-28 (streamable HTTP, "Standard Request Headers").
func requiresName(method string) bool {
	switch method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead:
		return true
	}
	return false
}

// hasTarget reports whether Parse sets Name or URI for method, so that an
// Mcp-Name header can be compared with the body.
func hasTarget(method string) bool {
	switch method {
	case MethodToolsCall, MethodPromptsGet, MethodResourcesRead, MethodResourcesSubscribe, MethodResourcesUnsubscribe:
		return true
	}
	return false
}

// CheckHeaders applies the streamable HTTP header rules of MCP 2026-07-28
// (SEP-2575 per-request metadata, SEP-2243 standard headers; transport
// "Request Metadata" and "Server Validation") to a message Parse accepted.
// It returns nil when the headers agree with the body. The body is the
// truth: a header never adds information, it can only be refused.
//
// All failures are HTTP 400, checked in this order:
//
//  1. MCP-Protocol-Version, Mcp-Method or Mcp-Name sent more than once, or
//     holding a byte other than visible ASCII, space or tab: -32020.
//  2. MCP-Protocol-Version present and not in SupportedVersions: -32022
//     (CodeUnsupportedProtocolVersion) with data
//     UnsupportedProtocolVersionData{Supported: SupportedVersions,
//     Requested: header}. The same for an unsupported _meta
//     "io.modelcontextprotocol/protocolVersion".
//  3. _meta protocol version present and the header missing or different:
//     -32020 (CodeHeaderMismatch).
//  4. The header says 2026-07-28 or later and a request (not a
//     notification or response, not initialize) has no _meta protocol
//     version: -32020.
//  5. Mcp-Method and Mcp-Name values are decoded with DecodeHeaderValue;
//     a malformed value is -32020. When the effective version (see
//     EffectiveVersion) is 2026-07-28 or later, requests and
//     notifications need Mcp-Method equal to the method, and tools/call,
//     prompts/get and resources/read requests need Mcp-Name equal to
//     params.name / params.uri: missing or different is -32020.
//  6. For every revision, a header that is present must equal the body,
//     even where the revision does not define it (older revisions, a
//     response, resources/subscribe): a lying header is never legitimate.
//     Mcp-Name on a method without a name or uri is -32020.
//
// Mcp-Param-* headers are not checked here (they need the tool's
// inputSchema). A nil m is refused with 400 / -32600.
func CheckHeaders(h Header, m *Message) *Error {
	if m == nil {
		return newInvalidRequest("no message")
	}
	for _, k := range [...]string{HeaderProtocolVersion, HeaderMethod, HeaderName} {
		vs := h.Values(k)
		if len(vs) > 1 {
			return newHeaderMismatch(canonicalHeader(k) + " header sent more than once")
		}
		if len(vs) == 1 {
			if _, err := DecodeHeaderValue(vs[0]); errors.Is(err, errHeaderChars) {
				return newHeaderMismatch(canonicalHeader(k) + " " + err.Error())
			}
		}
	}

	hv, hasHV := headerValue(h, HeaderProtocolVersion)
	mv := m.Meta.ProtocolVersion
	switch {
	case mv != "" && !hasHV:
		return newHeaderMismatch("MCP-Protocol-Version header is required when _meta carries " + MetaKeyProtocolVersion + " (" + quoteTrunc(mv) + ")")
	case mv != "" && hv != mv:
		// A disagreement is reported as such even when one side names a
		// version mcpgate does not serve (SEP-2575 server-stateless).
		return newHeaderMismatch("MCP-Protocol-Version header value " + quoteTrunc(hv) + " does not match body _meta " + MetaKeyProtocolVersion + " value " + quoteTrunc(mv))
	case hasHV && !IsSupportedVersion(hv):
		return newUnsupportedVersion(hv, "MCP-Protocol-Version header")
	case mv == "" && hasHV && isModern(hv) && m.Kind == KindRequest && m.Method != MethodInitialize:
		// Revision 2026-07-28 requests carry their version in _meta; a
		// request without it has invalid params (SEP-2575).
		return &Error{Status: 400, Code: CodeInvalidParams, Message: "Invalid params: MCP-Protocol-Version is " + quoteTrunc(hv) + " but params._meta has no " + MetaKeyProtocolVersion}
	}

	modern := isModern(EffectiveVersion(h, m))
	needsMethod := modern && (m.Kind == KindRequest || m.Kind == KindNotification)
	if e := checkMirrored(h, HeaderMethod, m.Method, m.Kind != KindResponse, needsMethod); e != nil {
		return e
	}
	needsName := modern && m.Kind == KindRequest && requiresName(m.Method)
	comparable := m.Kind != KindResponse && hasTarget(m.Method)
	return checkMirrored(h, HeaderName, m.Target(), comparable, needsName)
}

// checkMirrored checks one header that mirrors a body value. comparable
// says whether the body has the value at all; required whether the header
// must be present.
func checkMirrored(h Header, key, body string, comparable, required bool) *Error {
	raw, ok := headerValue(h, key)
	name := canonicalHeader(key)
	if !ok {
		if required {
			return newHeaderMismatch("missing required " + name + " header (body value " + quoteTrunc(body) + ")")
		}
		return nil
	}
	v := raw
	if key != HeaderMethod {
		// Only Mcp-Name (and Mcp-Param-*) may use the =?base64?…?= form;
		// method names are plain ASCII (SEP-2243).
		var err error
		if v, err = DecodeHeaderValue(raw); err != nil {
			return newHeaderMismatch(name + " header: " + err.Error())
		}
	}
	if !comparable {
		return newHeaderMismatch(name + " header value " + quoteTrunc(v) + " has no counterpart in the body")
	}
	if v != body {
		return newHeaderMismatch(name + " header value " + quoteTrunc(v) + " does not match body value " + quoteTrunc(body))
	}
	return nil
}

func headerValue(h Header, key string) (string, bool) {
	vs, ok := h[key]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

func canonicalHeader(key string) string {
	switch key {
	case HeaderProtocolVersion:
		return "MCP-Protocol-Version"
	case HeaderMethod:
		return "Mcp-Method"
	case HeaderName:
		return "Mcp-Name"
	}
	return key
}
