package lint

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ParseDump reads a saved tools/list answer: the result object
// ({"tools": [...]}), a JSON-RPC response wrapping it
// ({"jsonrpc": "2.0", "id": 1, "result": {"tools": [...]}}), or a bare array
// of tools. The JSON must be strict: valid UTF-8, no duplicate member names
// at any depth, nothing after the value. Every tool must be an object.
func ParseDump(data []byte) ([]jsontext.Value, error) {
	tools, _, err := ParseDumpPage(data)
	return tools, err
}

// ParseDumpPage is ParseDump that also returns the dump's nextCursor: a
// dump with one holds a single page of a longer list.
func ParseDumpPage(data []byte) (tools []jsontext.Value, nextCursor string, err error) {
	var top jsontext.Value
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, "", fmt.Errorf("the dump is not strict JSON: %w", err)
	}
	switch top.Kind() {
	case '[':
		tools, err := splitTools(top, "the array")
		return tools, "", err
	case '{':
	default:
		return nil, "", errors.New("the dump is neither a tools/list result object, a JSON-RPC response nor an array of tools")
	}
	var members map[string]jsontext.Value
	if err := json.Unmarshal(top, &members); err != nil {
		return nil, "", fmt.Errorf("the dump is not strict JSON: %w", err)
	}
	where := "the result"
	if _, rpc := members["jsonrpc"]; rpc {
		if e, ok := members["error"]; ok {
			var rpcErr struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(e, &rpcErr)
			return nil, "", fmt.Errorf("the dump is a JSON-RPC error response (code %d: %s), not a tools/list result", rpcErr.Code, rpcErr.Message)
		}
		res, ok := members["result"]
		if !ok || res.Kind() != '{' {
			return nil, "", errors.New("the dump is a JSON-RPC message without a result object")
		}
		members = nil
		if err := json.Unmarshal(res, &members); err != nil {
			return nil, "", err
		}
		where = "result"
	}
	raw, ok := members["tools"]
	if !ok {
		return nil, "", fmt.Errorf("%s has no \"tools\" member; save the answer of tools/list", where)
	}
	if raw.Kind() != '[' {
		return nil, "", fmt.Errorf("%s.tools is not an array", where)
	}
	if c, ok := members["nextCursor"]; ok && c.Kind() == '"' {
		if err := json.Unmarshal(c, &nextCursor); err != nil {
			return nil, "", err
		}
	}
	tools, err = splitTools(raw, where+".tools")
	return tools, nextCursor, err
}

// splitTools splits a JSON array into its elements, each an object.
func splitTools(arr jsontext.Value, where string) ([]jsontext.Value, error) {
	var elems []jsontext.Value
	if err := json.Unmarshal(arr, &elems); err != nil {
		return nil, err
	}
	for i, e := range elems {
		if e.Kind() != '{' {
			return nil, fmt.Errorf("%s[%d] is not an object", where, i)
		}
	}
	if elems == nil {
		elems = []jsontext.Value{}
	}
	return elems, nil
}
