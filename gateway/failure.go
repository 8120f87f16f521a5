package gateway

import (
	"errors"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
)

// Answers mcpgate gives in place of the upstream's: a dependency that
// cannot answer now (503), an upstream that failed or whose answer is
// withheld (502), a tool call past its deadline, an adapter that cannot
// serve the request (500). End chooses among them for both adapters.

// RetryAfterSeconds is the Retry-After value of 503 answers the gateway
// gives when a dependency (token verification, rights source, state
// store) cannot answer now.
const RetryAfterSeconds = "5"

// unavailable is the 503 answer (with Retry-After) to a message the
// gateway cannot decide on now; fail closed.
func unavailable(msg *mcp.Message, cause string) *Local {
	f := &AuthFailure{Status: 503, Code: "unavailable", Message: cause, Fix: "Retry in a few seconds."}
	return authLocal(f, msg, []policy.Reason{{Code: f.Code, Cause: f.Message, Fix: f.Fix}}, "")
}

// upstreamFailure is the JSON-RPC error message of the 502 that answers
// when the upstream cannot be reached or its response cannot be inspected.
const upstreamFailure = "The upstream MCP server could not be reached or answered with something mcpgate cannot check."

// answerFailure is the answer in place of an upstream response that
// ResponseHeaders or ResponseBody refused (err): 502 with a
// JSON-RPC error for the request's id (null when the exchange answers no
// request) whose message says why, when the pipeline knows.
func (x *Exchange) answerFailure(err error) *Local {
	msg := upstreamFailure
	if ae := (*answerError)(nil); errors.As(err, &ae) {
		msg = ae.message
	}
	return local(502, mcp.ErrorResponse(x.answeredID(), &mcp.Error{Code: mcp.CodeInternalError, Message: msg}))
}

// answeredID is the id of the request the exchange forwarded, null when
// it forwarded none (a notification, a client's response, a GET stream).
func (x *Exchange) answeredID() []byte {
	if x.msg == nil || x.msg.Kind != mcp.KindRequest {
		return jsonNull
	}
	return x.msg.ID
}

// Misconfigured is the 500 answer (a JSON-RPC error, id null) an adapter
// gives when its own configuration, or the proxy's in front of it, does
// not let it serve the request; message says what is wrong.
func Misconfigured(message string) *Local {
	return local(500, mcp.ErrorResponse(jsonNull, &mcp.Error{Code: mcp.CodeInternalError, Message: message}))
}

// failure is the answer to an exchange whose upstream failed (err): the
// pipeline's refusal of the answer (ErrUpstreamResponse, answerFailure),
// or 502 with upstreamFailure for the request's id; a 502 without a body
// when the exchange answers no request.
func (x *Exchange) failure(err error) *Local {
	if errors.Is(err, errCredentialRefused) {
		return x.credentialRefusedAnswer()
	}
	if errors.Is(err, ErrUpstreamResponse) {
		return x.answerFailure(err)
	}
	if !x.answersRequest() {
		return &Local{Status: 502}
	}
	return local(502, mcp.ErrorResponse(x.msg.ID, &mcp.Error{Code: mcp.CodeInternalError, Message: upstreamFailure}))
}

// deadlineExceeded is the answer to a tools/call whose upstream did not
// answer within its deadline (d): a tool error saying the call may still
// have taken effect; nil for other messages (End answers 502).
func (x *Exchange) deadlineExceeded(d time.Duration) *Local {
	if x.msg == nil || x.msg.Method != "tools/call" {
		return nil
	}
	x.outcome = OutcomeError
	reason := policy.Reason{
		Code:  "deadline_exceeded",
		Cause: "The tool did not answer within " + d.String() + "; the gateway stopped waiting.",
		Fix:   "Retry in 30 seconds if it only reads.",
	}
	if x.write != nil {
		reason.Fix = "It may have taken effect: check before calling it again."
		reason.NextTool = ToolListRecentChanges
	}
	return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{reason}, ""))
}

// withExtra adds the exchange's response fields (Verdict.ResponseExtra:
// CORS) to End's answer in place of the upstream's, so that an adapter
// sends it with the fields the upstream's answer would have got. (Answers
// of the request side get them in HandleRequest.)
func (x *Exchange) withExtra(l *Local) *Local {
	if len(x.verdict.ResponseExtra) == 0 {
		return l
	}
	if l.Header == nil {
		l.Header = mcp.Header{}
	}
	for k, vals := range x.verdict.ResponseExtra {
		l.Header[k] = vals
	}
	return l
}
