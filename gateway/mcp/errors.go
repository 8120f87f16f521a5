package mcp

import (
	"slices"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/gateway/clip"
)

// DefaultMaxDepth is the nesting limit Parse applies when it is given a
// non-positive maxDepth.
const DefaultMaxDepth = 64

// UnsupportedProtocolVersionData is the data member of a -32022
// (CodeUnsupportedProtocolVersion) error, as defined by the
// UnsupportedProtocolVersionError type of the 2026-07-28 schema:
// {"supported":["2026-07-28",...],"requested":"1999-01-01"}.
type UnsupportedProtocolVersionData struct {
	Supported []string `json:"supported"`
	Requested string   `json:"requested"`
}

// newParseError returns a 400 / -32700 error.
func newParseError(msg string) *Error {
	return &Error{Status: 400, Code: CodeParseError, Message: "Parse error: " + msg}
}

// newInvalidRequest returns a 400 / -32600 error.
func newInvalidRequest(msg string) *Error {
	return &Error{Status: 400, Code: CodeInvalidRequest, Message: "Invalid Request: " + msg}
}

// newInvalidParams returns a 400 / -32602 error. MCP 2026-07-28 (SEP-2575)
// maps InvalidParams to HTTP 400.
func newInvalidParams(msg string) *Error {
	return &Error{Status: 400, Code: CodeInvalidParams, Message: "Invalid params: " + msg}
}

// newHeaderMismatch returns a 400 / -32020 error.
func newHeaderMismatch(msg string) *Error {
	return &Error{Status: 400, Code: CodeHeaderMismatch, Message: "Header mismatch: " + msg}
}

// newUnsupportedVersion returns a 400 / -32022 error whose data lists
// SupportedVersions and the requested version.
func newUnsupportedVersion(requested, source string) *Error {
	return &Error{
		Status:  400,
		Code:    CodeUnsupportedProtocolVersion,
		Message: "Unsupported protocol version: " + source + " " + quoteTrunc(requested) + " is not supported",
		Data: UnsupportedProtocolVersionData{
			Supported: slices.Clone(SupportedVersions),
			Requested: requested,
		},
	}
}

// quoteTrunc quotes s for an error message: cut by clip.Value, then
// wrapped in single quotes with control characters, quotes and
// backslashes escaped so the message stays on one line.
func quoteTrunc(s string) string {
	return "'" + escapeForMessage(clip.Value(s)) + "'"
}

// escapeForMessage escapes control characters, invalid UTF-8, quotes and
// backslashes of s (\xNN, \', \\).
func escapeForMessage(s string) string {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, `\x`...)
			b = append(b, hexDigit(s[i]>>4), hexDigit(s[i]&0xf))
		case r == '\'' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20 || r == 0x7f:
			b = append(b, `\x`...)
			b = append(b, hexDigit(byte(r)>>4), hexDigit(byte(r)&0xf))
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return string(b)
}

func hexDigit(b byte) byte { return "0123456789abcdef"[b&0xf] }
