// Package refusal builds every answer mcpgate gives instead of forwarding a
// message: the tool-error result for a refused tools/call and the JSON-RPC
// error for other refused requests. One package builds them so that every path answers with the same error
// contract: a stable code, a cause, and the next call that can succeed.
package refusal

import (
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

// Details is the machine-readable part of a refusal. It is the last line of
// the tool-error text, the tool result's structuredContent, and the data of a
// JSON-RPC error.
type Details struct {
	Error DetailsError `json:"error"`
}

// DetailsError names what was refused and what to do next.
type DetailsError struct {
	Code       string `json:"code"`                  // first reason's code, e.g. "tool_not_declared"
	Cause      string `json:"cause"`                 // what is wrong
	Fix        string `json:"fix,omitempty"`         // what to do instead
	NextTool   string `json:"next_tool,omitempty"`   // the tool or method to call next
	DecisionID string `json:"decision_id,omitempty"` // policy decision id (logs, audit)
	// More holds the codes of further reasons, if the policy gave several.
	More []string `json:"more_codes,omitempty"`
	// Rights, for missing_rights and insufficient_scope, are the rights
	// the caller lacks.
	Rights []string `json:"rights,omitempty"`
}

// fallback is used when a deny decision carries no reason at all.
var fallback = policy.Reason{
	Code:  "denied",
	Cause: "The gateway's policy refused this request.",
	Fix:   "Do not retry the same call; ask the user or an administrator.",
}

func details(reasons []policy.Reason, decisionID string) Details {
	r := fallback
	if len(reasons) > 0 {
		r = reasons[0]
	}
	d := Details{Error: DetailsError{Code: r.Code, Cause: r.Cause, Fix: r.Fix, NextTool: r.NextTool, DecisionID: decisionID, Rights: r.Rights}}
	for _, more := range reasons[min(1, len(reasons)):] {
		d.Error.More = append(d.Error.More, more.Code)
	}
	return d
}

// toolResult is the CallToolResult of a refused tools/call.
type toolResult struct {
	Content           []textContent `json:"content"`
	StructuredContent Details       `json:"structuredContent"`
	IsError           bool          `json:"isError"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ToolError returns the JSON-RPC response body for a refused tools/call:
// HTTP 200, result.isError true, one text block
//
//	Error: <cause> Fix: <fix> Next: <next_tool>.
//	{"error":{...}}
//
// and the same JSON object as structuredContent, for the request id (raw,
// byte-exact).
func ToolError(id jsontext.Value, reasons []policy.Reason, decisionID string) []byte {
	d := details(reasons, decisionID)
	line, _ := json.Marshal(d) // cannot fail: strings only
	var b strings.Builder
	b.WriteString("Error: ")
	b.WriteString(sentence(d.Error.Cause))
	if d.Error.Fix != "" {
		b.WriteString(" Fix: ")
		b.WriteString(sentence(d.Error.Fix))
	}
	if d.Error.NextTool != "" {
		b.WriteString(" Next: call ")
		b.WriteString(d.Error.NextTool)
		b.WriteString(".")
	}
	b.WriteByte('\n')
	b.Write(line)
	res, _ := json.Marshal(toolResult{
		Content:           []textContent{{Type: "text", Text: b.String()}},
		StructuredContent: d,
		IsError:           true,
	})
	return mcp.ResultResponse(id, res)
}

// sentence ends s with a full stop unless it already ends a sentence.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasSuffix(s, ".") || strings.HasSuffix(s, "!") || strings.HasSuffix(s, "?") {
		return s
	}
	return s + "."
}

// Reason codes whose JSON-RPC error code is not the generic one.
var rpcCodes = map[string]int{
	"method_not_allowed": mcp.CodeMethodNotFound,
	"prompt_hidden":      mcp.CodeInvalidParams, // the spec's code for an unknown prompt name
	"tool_hidden":        mcp.CodeInvalidParams,
	"tool_not_declared":  mcp.CodeInvalidParams,
	"resource_hidden":    CodeResourceNotFound,
}

// CodeResourceNotFound is MCP's JSON-RPC code for an unknown resource URI.
const CodeResourceNotFound = -32002

// CodePolicyRefused is the JSON-RPC code of a policy refusal that has no
// more specific code: JSON-RPC's "Invalid Request", with the reasons in data.
const CodePolicyRefused = mcp.CodeInvalidRequest

// RPCError returns the JSON-RPC error response body for a request other than
// tools/call refused by policy (HTTP 200, same id). The code follows the MCP
// spec where one applies (-32601 for a method the policy does not allow,
// -32602 for an unknown or hidden prompt, -32002 for a hidden resource),
// otherwise -32600; data carries Details.
func RPCError(id jsontext.Value, reasons []policy.Reason, decisionID string) []byte {
	d := details(reasons, decisionID)
	code, ok := rpcCodes[d.Error.Code]
	if !ok {
		code = CodePolicyRefused
	}
	msg := sentence(d.Error.Cause)
	if d.Error.Fix != "" {
		msg += " " + sentence(d.Error.Fix)
	}
	return mcp.ErrorResponse(id, &mcp.Error{Code: code, Message: msg, Data: d})
}

// CodeUnauthorized is the JSON-RPC code of a request refused by
// authentication: HTTP 401 (no or invalid credential, details code
// missing_token, invalid_token or invalid_request), 403 (the token's scopes
// do not cover the call, insufficient_scope) or 503 (the credential cannot
// be checked now, auth_unavailable). JSON-RPC leaves -32000 to -32099 to
// implementations; MCP and its SDKs do not use -32030.
const CodeUnauthorized = -32030

// AuthError returns the JSON-RPC error response body of a request refused by
// authentication (the status and WWW-Authenticate header carry the
// challenge): code CodeUnauthorized, the first reason's cause and fix as the
// message, Details as data.
func AuthError(id jsontext.Value, reasons []policy.Reason, decisionID string) []byte {
	d := details(reasons, decisionID)
	msg := sentence(d.Error.Cause)
	if d.Error.Fix != "" {
		msg += " " + sentence(d.Error.Fix)
	}
	return mcp.ErrorResponse(id, &mcp.Error{Code: CodeUnauthorized, Message: msg, Data: d})
}
