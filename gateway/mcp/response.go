package mcp

import (
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ErrorResponse returns the body of a JSON-RPC 2.0 error response (JSON-RPC
// 2.0 §5, §5.1):
//
//	{"jsonrpc":"2.0","id":<id>,"error":{"code":<e.Code>,"message":<e.Message>,"data":<e.Data>}}
//
// id is written byte-exact as Parse returned it; a nil id, or one that is
// not a valid JSON string, number or null, is written as null. "data" is
// omitted when e.Data is nil or cannot be marshalled; a jsontext.Value
// Data is embedded as is when it is valid JSON. Invalid UTF-8 in the
// message is replaced with U+FFFD. A nil e is answered as an internal
// error (-32603).
func ErrorResponse(id jsontext.Value, e *Error) []byte {
	if e == nil {
		e = &Error{Status: 500, Code: CodeInternalError, Message: "Internal error"}
	}
	b := make([]byte, 0, 96+len(id)+len(e.Message))
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = appendID(b, id)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(e.Code), 10)
	b = append(b, `,"message":`...)
	b, _ = jsontext.AppendQuote(b, e.Message) // invalid UTF-8 becomes U+FFFD
	if data := marshalData(e.Data); data != nil {
		b = append(b, `,"data":`...)
		b = append(b, data...)
	}
	return append(b, "}}"...)
}

// ResultResponse returns the body of a JSON-RPC 2.0 success response:
//
//	{"jsonrpc":"2.0","id":<id>,"result":<result>}
//
// id is treated as by ErrorResponse. result must be a valid JSON value (an
// object for MCP); it is copied as is, and a nil or empty result is
// written as {}.
func ResultResponse(id jsontext.Value, result []byte) []byte {
	// Exactly the bytes written: one allocation, no growth.
	b := make([]byte, 0, len(resultPrefix)+max(len(id), len("null"))+len(`,"result":`)+max(len(result), len("{}"))+len(ResultTail))
	b = AppendResultHead(b, id)
	if len(result) == 0 {
		b = append(b, "{}"...)
	} else {
		b = append(b, result...)
	}
	return append(b, ResultTail...)
}

// AppendResultHead appends what ResultResponse writes before the result,
// {"jsonrpc":"2.0","id":<id>,"result":, for a caller that writes the
// result itself and then ResultTail.
func AppendResultHead(b []byte, id jsontext.Value) []byte {
	b = append(b, resultPrefix...)
	b = appendID(b, id)
	return append(b, `,"result":`...)
}

// ResultTail is what ResultResponse writes after the result.
const ResultTail = "}"

const resultPrefix = `{"jsonrpc":"2.0","id":`

func appendID(b []byte, id jsontext.Value) []byte {
	if len(id) == 0 {
		return append(b, "null"...)
	}
	if plainID(id) {
		return append(b, id...)
	}
	switch id.Kind() {
	case '"', '0', 'n':
		if id.IsValid() {
			return append(b, id...)
		}
	}
	return append(b, "null"...)
}

// plainID reports whether id is an id that is valid JSON on sight: a
// non-negative integer without leading zeros, or a string of printable
// ASCII without escapes (what clients send). Anything else is left to
// jsontext's validation.
func plainID(id []byte) bool {
	switch {
	case len(id) == 0:
		return false
	case id[0] == '"':
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
				return false
			}
		}
		return true
	case id[0] == '0':
		return len(id) == 1
	}
	for _, c := range id {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func marshalData(d any) []byte {
	switch v := d.(type) {
	case nil:
		return nil
	case jsontext.Value:
		if len(v) > 0 && v.IsValid() {
			return v
		}
		return nil
	}
	out, err := json.Marshal(d, json.Deterministic(true))
	if err != nil {
		return nil
	}
	return out
}
