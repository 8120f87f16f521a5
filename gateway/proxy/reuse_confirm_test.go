package proxy_test

import (
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// Exchanges given back for reuse carry nothing of one two-step write into
// another: concurrent callers previewing, confirming (confirm_action),
// rejecting and approving through input_required their own calls, mixed
// with calls that end early (the client leaving a confirmed call, its
// deadline, refused locally or by the policy), each get only their own
// previews and answers; another caller's confirm_token or requestState
// is unknown to them and shows nothing of its call; the upstream gets
// each confirmed call once, with its own caller's assertion and
// arguments and without mcpgate's state; each audit record, decision-log
// event and shadow decision names one caller with that caller's
// arguments.
func TestReusedExchangesKeepConfirmationsApart(t *testing.T) {
	play, p := gatewaytest.NewConfirmPlay(t, "default", gatewaytest.WithLimits(&gateway.Limits{DefaultDeadline: 300 * time.Millisecond}))
	modes := []string{"confirm", "elicit", "reject", "confirm", "leave", "slow", "refused", "elicit", "denied"}
	play.Run(t, proxySender(t, p, play.Up), modes, 2)
}
