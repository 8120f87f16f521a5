package extproc_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// Exchanges, requests and header maps given back for reuse carry nothing
// of one caller's tasks into another's: on concurrent streams, callers
// start tasks (the upstream's handle is bound to the caller in the
// response phase), poll, fetch and cancel their own, list them, and try
// another caller's task ids, mixed with streams that end early (no
// answer, refused by the policy, an unasked handle withheld). Each
// caller gets its own handles and answers only; another caller's task id
// is "not found", never forwarded; tasks/list shows a caller its own
// tasks only; each task request goes upstream with its owner's
// assertion; each audit record names one caller.
func TestReusedExchangesKeepTasksApart(t *testing.T) {
	play, p := gatewaytest.NewTaskPlay(t, "crm", serverBounds)
	play.Run(t, streamSender(serve(t, p), "/crm/mcp", play.Up), 3)
}
