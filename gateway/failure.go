package gateway

import (
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
)

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
