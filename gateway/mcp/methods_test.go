package mcp

import "testing"

func TestKnownMethod(t *testing.T) {
	requests := []string{
		"initialize", "ping", "server/discover", "subscriptions/listen",
		"tools/list", "tools/call", "prompts/list", "prompts/get",
		"resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "completion/complete",
		"logging/setLevel", "tasks/get", "tasks/list", "tasks/cancel", "tasks/result",
	}
	notifications := []string{
		"notifications/initialized", "notifications/cancelled", "notifications/progress",
		"notifications/roots/list_changed", "notifications/tasks/status",
	}
	for _, m := range requests {
		t.Run("request "+m, func(t *testing.T) {
			if !KnownMethod(m, KindRequest) {
				t.Error("not known as a request")
			}
			if KnownMethod(m, KindNotification) || KnownMethod(m, KindResponse) {
				t.Error("known as another kind")
			}
		})
	}
	for _, m := range notifications {
		t.Run("notification "+m, func(t *testing.T) {
			if !KnownMethod(m, KindNotification) {
				t.Error("not known as a notification")
			}
			if KnownMethod(m, KindRequest) || KnownMethod(m, KindResponse) {
				t.Error("known as another kind")
			}
		})
	}
	unknown := []string{
		"", "Tools/Call", "tools/call ", " tools/call", "tools/", "tools",
		"sampling/createMessage", "elicitation/create", "roots/list", // server to client
		"notifications/message", "notifications/tools/list_changed",
		"notifications/resources/updated", "notifications/elicitation/complete",
		"notifications/subscriptions/acknowledged", "tasks/update", "rpc.discover",
	}
	for _, m := range unknown {
		t.Run("unknown "+m, func(t *testing.T) {
			for _, k := range []Kind{KindRequest, KindNotification, KindResponse, 0} {
				if KnownMethod(m, k) {
					t.Errorf("known as %v", k)
				}
			}
		})
	}
}

func TestParseInternsKnownMethods(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		internMethod([]byte("tools/call"))
	})
	if allocs > 0 {
		t.Errorf("interning a known method allocates %v times", allocs)
	}
}
