package proxy_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// Exchanges given back for reuse carry nothing of one caller's tasks into
// another's: concurrent callers start tasks (the upstream's handle is
// bound to the caller in the response phase), poll, fetch and cancel
// their own, list them, and try another caller's task ids, mixed with
// calls that end early (the client leaving, refused by the policy, an
// unasked handle withheld). Each caller gets its own handles and answers
// only; another caller's task id is "not found", never forwarded;
// tasks/list shows a caller its own tasks only; the upstream sees each
// task request with its owner's assertion; each audit record names one
// caller.
func TestReusedExchangesKeepTasksApart(t *testing.T) {
	play, p := gatewaytest.NewTaskPlay(t, "default")
	play.Run(t, proxySender(t, p, play.Up), 4)
}
