package draft

import (
	"fmt"
	"slices"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/lint"
	"github.com/mcpgate/mcpgate/policy"
)

// MostGuarded is the effect class proposed when the signals do not agree
// or say nothing: every call needs a person's confirmation, and the
// preview says the call deletes data, so nothing runs on a wrong guess.
const MostGuarded = policy.EffectDelete

// Guess is a proposed effect class for one tool.
type Guess struct {
	// Effect is one of policy.Effects.
	Effect string
	// Unsure is set when the signals disagree or none says anything:
	// Effect is then MostGuarded.
	Unsure bool
	// Reasons say, one line each, which signals led to Effect.
	Reasons []string
}

// ToolFacts are the parts of a tool definition the guess reads.
type ToolFacts struct {
	Name string
	// Annotations and InputSchema are the raw JSON as listed; nil when
	// absent.
	Annotations, InputSchema jsontext.Value
}

// Name verbs, by the effect class they suggest. A name's verb is its
// first word; when that is no known verb, its last word ("booking_cancel").
var (
	readVerbs = set("get", "list", "find", "search", "read", "fetch", "query", "describe", "show",
		"view", "lookup", "look", "count", "retrieve", "browse", "inspect", "explain", "summarize",
		"summarise", "check", "validate", "verify", "preview", "echo", "ping", "whoami", "diff",
		"compare", "calculate", "compute", "estimate", "analyze", "analyse", "download", "export",
		"render", "convert", "format", "parse", "translate", "is", "has", "can", "status", "info")
	writeVerbs = set("create", "update", "set", "add", "put", "patch", "edit", "modify", "write",
		"save", "upsert", "insert", "assign", "unassign", "move", "rename", "copy", "book",
		"schedule", "reschedule", "enable", "disable", "start", "stop", "restart", "run", "execute",
		"exec", "trigger", "upload", "import", "apply", "approve", "reject", "mark", "tag", "label",
		"merge", "commit", "push", "deploy", "toggle", "register", "link", "unlink", "attach",
		"detach", "install", "configure", "reset", "sync", "clone", "fork", "lock", "unlock",
		"close", "open", "reopen", "complete", "submit", "change", "replace", "store", "make", "new")
	notifyVerbs = set("send", "notify", "email", "mail", "message", "sms", "post", "publish",
		"broadcast", "reply", "respond", "invite", "announce", "remind", "tweet", "comment", "share",
		"forward", "dm", "chat")
	wakeVerbs     = set("page", "wake", "phone", "ring", "dial", "alert", "escalate")
	alertingVerbs = set("mute", "unmute", "silence", "unsilence", "snooze", "ack", "acknowledge",
		"suppress", "unsuppress")
	deleteVerbs = set("delete", "remove", "cancel", "destroy", "drop", "purge", "revoke", "erase",
		"wipe", "terminate", "kill", "truncate", "archive", "trash", "clear", "uninstall", "rm", "del",
		"expunge", "void")
	// alertingNouns in a writing tool's name mean it changes what alerts
	// fire ("update_alert_rule", "create_monitor").
	alertingNouns = set("alert", "alerts", "alarm", "alarms", "monitor", "monitors", "incident",
		"incidents", "oncall", "pager", "silences", "downtime", "downtimes")
	// recipientFields in a writing tool's arguments mean it messages
	// someone; "to" counts only beside a message field ("from"/"to" are
	// also a range).
	recipientFields = set("recipient", "recipients", "cc", "bcc")
	messageFields   = set("subject", "body", "message", "text", "content")
)

func set(ws ...string) map[string]bool {
	m := make(map[string]bool, len(ws))
	for _, w := range ws {
		m[w] = true
	}
	return m
}

// verbClass returns the class a name's verb suggests, and the verb; ""
// when neither its first nor its last word is a known verb.
func verbClass(ws []string) (class, verb string) {
	if len(ws) == 0 {
		return "", ""
	}
	if c := classOf(ws[0]); c != "" {
		return c, ws[0]
	}
	// The last word only for verbs that are not also common nouns
	// ("list_pages", "get_status" have their verb first anyway).
	last := ws[len(ws)-1]
	if len(ws) > 1 && !wakeVerbs[last] && !readVerbs[last] {
		if c := classOf(last); c != "" {
			return c, last
		}
	}
	return "", ""
}

func classOf(w string) string {
	switch {
	case readVerbs[w]:
		return policy.EffectRead
	case deleteVerbs[w]:
		return policy.EffectDelete
	case wakeVerbs[w]:
		return policy.EffectWake
	case alertingVerbs[w]:
		return policy.EffectAlerting
	case notifyVerbs[w]:
		return policy.EffectNotify
	case writeVerbs[w]:
		return policy.EffectSilentWrite
	}
	return ""
}

// hints are the annotations the guess reads; nil when absent or not a
// boolean.
type hints struct {
	ReadOnly, Destructive *bool
}

func readHints(raw jsontext.Value) hints {
	var m map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return hints{}
	}
	get := func(k string) *bool {
		if b, ok := m[k].(bool); ok {
			return &b
		}
		return nil
	}
	return hints{ReadOnly: get("readOnlyHint"), Destructive: get("destructiveHint")}
}

// GuessEffect proposes an effect class for a tool from the verb of its
// name, its annotations (hints only: they confirm or contradict the name,
// never decide alone) and its input schema (a recipient argument makes a
// write a notify). When the signals disagree, or the name has no known
// verb, it proposes MostGuarded and says why.
func GuessEffect(t ToolFacts) Guess {
	ws := lint.Words(t.Name)
	class, verb := verbClass(ws)
	h := readHints(t.Annotations)
	var reasons []string
	if class != "" {
		reasons = append(reasons, fmt.Sprintf("the name's verb %q suggests %s", verb, class))
	} else {
		reasons = append(reasons, "the name has no verb this guess knows")
	}

	// Refinements of a writing verb.
	if class == policy.EffectSilentWrite {
		if n := firstIn(ws, alertingNouns); n != "" {
			class = policy.EffectAlerting
			reasons = append(reasons, fmt.Sprintf("a write naming %q changes alerting", n))
		} else if f := recipientField(t.InputSchema); f != "" {
			class = policy.EffectNotify
			reasons = append(reasons, fmt.Sprintf("the input has a recipient argument %q: it messages someone", f))
		}
	}

	ro := h.ReadOnly != nil && *h.ReadOnly
	destructive := h.Destructive != nil && *h.Destructive && !ro
	conflict := ""
	switch {
	case class == "" && ro:
		reasons = append(reasons, "readOnlyHint: true, but an annotation alone is not trusted")
	case class == "" && destructive:
		reasons = append(reasons, "destructiveHint: true")
	case class == "":
	case class == policy.EffectRead && h.ReadOnly != nil && !*h.ReadOnly:
		conflict = "readOnlyHint: false contradicts the name"
	case class == policy.EffectRead && destructive:
		conflict = "destructiveHint: true contradicts the name"
	case class == policy.EffectRead && ro:
		reasons = append(reasons, "readOnlyHint: true agrees")
	case class != policy.EffectRead && ro:
		conflict = "readOnlyHint: true contradicts the name"
	case class == policy.EffectSilentWrite && destructive:
		conflict = "destructiveHint: true: the upstream says calls may destroy data"
	case class != policy.EffectRead && h.Destructive != nil:
		reasons = append(reasons, fmt.Sprintf("destructiveHint: %t", *h.Destructive))
	}
	if conflict != "" {
		reasons = append(reasons, conflict)
	}
	if class == "" || conflict != "" {
		reasons = append(reasons, fmt.Sprintf("unsure: proposing %s, the most guarded class (a person confirms every call); set the class the tool really has", MostGuarded))
		return Guess{Effect: MostGuarded, Unsure: true, Reasons: reasons}
	}
	if class == policy.EffectRead && h.ReadOnly == nil {
		reasons = append(reasons, "no readOnlyHint to confirm it")
	}
	return Guess{Effect: class, Reasons: reasons}
}

func firstIn(ws []string, m map[string]bool) string {
	for _, w := range ws {
		if m[w] {
			return w
		}
	}
	return ""
}

// recipientField returns the top-level argument of an input schema that
// names a message's recipient, or "".
func recipientField(schema jsontext.Value) string {
	if len(schema) == 0 {
		return ""
	}
	var s struct {
		Properties map[string]jsontext.Value `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return ""
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		names = append(names, n)
	}
	slices.Sort(names)
	hasMessage := slices.ContainsFunc(names, func(n string) bool { return messageFields[strings.ToLower(n)] })
	for _, n := range names {
		l := strings.ToLower(n)
		if recipientFields[l] || (hasMessage && (l == "to" || l == "send_to" || l == "sendto")) {
			return n
		}
	}
	return ""
}

// rightActions name the action part of a proposed right per class.
var rightActions = map[string]string{
	policy.EffectRead:        "read",
	policy.EffectSilentWrite: "write",
	policy.EffectNotify:      "notify",
	policy.EffectWake:        "wake",
	policy.EffectAlerting:    "manage",
	policy.EffectDelete:      "delete",
}

// ProposeRight proposes the right a tool needs: "<noun>:<action>", the
// noun from the name's words after its verb (singular), the action from
// the effect class, e.g. find_customers (read) → "customer:read". A name
// without a known verb or without a noun uses the upstream's name as the
// noun.
func ProposeRight(upstream, tool, effect string) string {
	ws := lint.Words(tool)
	var noun []string
	if c, verb := verbClass(ws); c != "" {
		for _, w := range ws {
			if w != verb {
				noun = append(noun, w)
			}
		}
	}
	n := strings.Join(noun, "_")
	if len(noun) > 0 {
		noun[len(noun)-1] = singular(noun[len(noun)-1])
		n = strings.Join(noun, "_")
	}
	if n == "" || !rightWord(n) {
		n = upstream
	}
	return n + ":" + rightActions[effect]
}

// rightWord reports whether s is made of a-z, 0-9 and "_".
func rightWord(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_'
	})
}

// singular undoes the common English plurals: bookings → booking,
// entries → entry, addresses → address; words ending in "ss", "us" or "is"
// are kept.
func singular(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") && !strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		return w[:len(w)-1]
	}
	return w
}
