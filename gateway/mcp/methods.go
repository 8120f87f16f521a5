package mcp

// Method names a client may send to a server. The sets below are the union
// of the ClientRequest and ClientNotification types of the schemas in
// github.com/modelcontextprotocol/modelcontextprotocol, schema/<rev>/schema.ts,
// for revisions 2024-11-05, 2025-03-26, 2025-06-18, 2025-11-25 and
// 2026-07-28:
//
//   - 2024-11-05 … 2025-06-18: initialize, ping, completion/complete,
//     logging/setLevel, prompts/{list,get}, resources/{list,templates/list,
//     read,subscribe,unsubscribe}, tools/{list,call}; notifications
//     initialized, cancelled, progress, roots/list_changed.
//   - 2025-11-25 adds tasks/{get,result,list,cancel} and
//     notifications/tasks/status.
//   - 2026-07-28 adds server/discover and subscriptions/listen (and drops
//     initialize, ping, logging/setLevel, resources/subscribe,
//     resources/unsubscribe, tasks/* and every client notification except
//     notifications/cancelled; they stay known here because older
//     revisions still use them).
//
// Server-to-client methods (sampling/createMessage, elicitation/create,
// roots/list, notifications/message, notifications/elicitation/complete,
// notifications/*/list_changed of the server, ...) are not listed: a client
// never sends them to a server.
const (
	MethodInitialize             = "initialize"
	MethodPing                   = "ping"
	MethodServerDiscover         = "server/discover"
	MethodSubscriptionsListen    = "subscriptions/listen"
	MethodToolsList              = "tools/list"
	MethodToolsCall              = "tools/call"
	MethodPromptsList            = "prompts/list"
	MethodPromptsGet             = "prompts/get"
	MethodResourcesList          = "resources/list"
	MethodResourcesTemplatesList = "resources/templates/list"
	MethodResourcesRead          = "resources/read"
	MethodResourcesSubscribe     = "resources/subscribe"
	MethodResourcesUnsubscribe   = "resources/unsubscribe"
	MethodCompletionComplete     = "completion/complete"
	MethodLoggingSetLevel        = "logging/setLevel"
	MethodTasksGet               = "tasks/get"
	MethodTasksList              = "tasks/list"
	MethodTasksCancel            = "tasks/cancel"
	MethodTasksResult            = "tasks/result"

	NotificationInitialized      = "notifications/initialized"
	NotificationCancelled        = "notifications/cancelled"
	NotificationProgress         = "notifications/progress"
	NotificationRootsListChanged = "notifications/roots/list_changed"
	NotificationTasksStatus      = "notifications/tasks/status"
)

// clientRequests and clientNotifications map each known method to its
// canonical string, so that Parse can intern method names without
// allocating.
var (
	clientRequests      = map[string]string{}
	clientNotifications = map[string]string{}
)

func init() {
	for _, m := range []string{
		MethodInitialize, MethodPing, MethodServerDiscover, MethodSubscriptionsListen,
		MethodToolsList, MethodToolsCall, MethodPromptsList, MethodPromptsGet,
		MethodResourcesList, MethodResourcesTemplatesList, MethodResourcesRead,
		MethodResourcesSubscribe, MethodResourcesUnsubscribe, MethodCompletionComplete,
		MethodLoggingSetLevel, MethodTasksGet, MethodTasksList, MethodTasksCancel,
		MethodTasksResult,
	} {
		clientRequests[m] = m
	}
	for _, m := range []string{
		NotificationInitialized, NotificationCancelled, NotificationProgress,
		NotificationRootsListChanged, NotificationTasksStatus,
	} {
		clientNotifications[m] = m
	}
}

// removedIn20260728 are the client methods revision 2026-07-28 removed
// (SEP-2575: no initialize handshake, no ping, logging or per-resource
// subscriptions; the conformance suite's server-stateless scenario expects
// 404 / -32601 for them). Client notifications other than
// notifications/cancelled are gone too.
var removedIn20260728 = map[string]bool{
	MethodInitialize:           true,
	MethodPing:                 true,
	MethodLoggingSetLevel:      true,
	MethodResourcesSubscribe:   true,
	MethodResourcesUnsubscribe: true,
}

// KnownMethodIn is KnownMethod for one protocol revision: under 2026-07-28
// and later the methods that revision removed are unknown.
func KnownMethodIn(version, method string, kind Kind) bool {
	if !KnownMethod(method, kind) {
		return false
	}
	if version < Version20260728 || !IsSupportedVersion(version) {
		// An unsupported revision is answered with -32022 by
		// CheckHeaders, not judged by a method list it does not have.
		return true
	}
	if kind == KindNotification {
		return method == NotificationCancelled
	}
	return !removedIn20260728[method]
}

// KnownMethod reports whether method is one a client may send to a server
// as a message of the given kind in any revision from 2024-11-05 to
// 2026-07-28 (see the Method* and Notification* constants for the sets and
// their source). Requests and notifications are told apart: a request
// named "notifications/cancelled" or a notification named "tools/call" is
// unknown. It is always false for KindResponse, which has no method.
//
// The pipeline refuses unknown methods by default (404 / -32601 for
// requests).
func KnownMethod(method string, kind Kind) bool {
	switch kind {
	case KindRequest:
		_, ok := clientRequests[method]
		return ok
	case KindNotification:
		_, ok := clientNotifications[method]
		return ok
	}
	return false
}

// internMethod returns the canonical string for a known method name, or a
// fresh string otherwise.
func internMethod(b []byte) string {
	if s, ok := clientRequests[string(b)]; ok {
		return s
	}
	if s, ok := clientNotifications[string(b)]; ok {
		return s
	}
	return string(b)
}
