package extproc_test

import (
	"testing"

	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
)

// Exchanges, requests and header maps given back for reuse carry nothing
// of one stream's two-step write into another: concurrent callers
// preview, confirm (confirm_action), reject and approve through
// input_required their own calls, on streams mixed with streams that end
// early (no answer for a confirmed call, refused locally or by the
// policy). Each stream gets only its own previews and answers; another
// caller's confirm_token or requestState is unknown and shows nothing of
// its call; each confirmed call goes upstream once, with its own
// caller's assertion and arguments and without mcpgate's state; each
// audit record, decision-log event and shadow decision names one caller
// with that caller's arguments.
func TestReusedExchangesKeepConfirmationsApart(t *testing.T) {
	play, p := gatewaytest.NewConfirmPlay(t, "tickets", serverBounds)
	modes := []string{"confirm", "elicit", "reject", "leave", "confirm", "refused", "elicit", "denied"}
	play.Run(t, streamSender(serve(t, p), "/tickets/mcp", play.Up), modes, 3)
}
