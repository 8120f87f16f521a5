package lint

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength is the longest tool name the rules accept (the connector
// review criteria's limit; clients cut or refuse longer names).
const MaxNameLength = 64

var snakeCase = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// readVerbs start the names of tools that only read.
var readVerbs = set(
	"get", "list", "find", "search", "read", "fetch", "query", "lookup", "look",
	"count", "check", "describe", "show", "view", "preview", "validate",
	"estimate", "calculate", "compute", "export", "download", "summarize",
	"compare", "explain", "suggest", "recommend", "inspect", "diff", "test",
	"verify", "render",
)

// writeVerbs start the names of tools that change something.
var writeVerbs = set(
	"create", "add", "new", "insert", "upsert", "update", "edit", "patch",
	"modify", "set", "change", "replace", "rename", "delete", "remove",
	"cancel", "archive", "unarchive", "restore", "purge", "clear", "send",
	"notify", "email", "sms", "message", "reply", "post", "publish",
	"unpublish", "page", "call", "wake", "alert", "mute", "unmute", "snooze",
	"pause", "resume", "silence", "ack", "acknowledge", "assign", "unassign",
	"reassign", "confirm", "approve", "reject", "decline", "accept",
	"schedule", "reschedule", "book", "reserve", "release", "move", "copy",
	"duplicate", "clone", "merge", "split", "import", "upload", "attach",
	"detach", "link", "unlink", "tag", "untag", "label", "mark", "flag",
	"close", "open", "reopen", "start", "stop", "restart", "enable",
	"disable", "activate", "deactivate", "invite", "revoke", "grant", "submit",
	"complete", "finish", "escalate", "trigger", "run", "execute", "sync",
	"generate", "refund", "charge", "pay", "transfer", "void", "issue",
	"register", "unregister", "subscribe", "unsubscribe", "block", "unblock",
	"lock", "unlock", "apply", "commit", "revert", "rollback", "deploy",
	"install", "uninstall", "log", "record", "save", "store", "write", "put",
	"push", "pull", "share", "unshare", "rate", "comment", "resolve",
	"reset", "rotate", "increment", "decrement", "enqueue", "dispatch",
)

// trailingVerbs are verbs that, last in a name, are rarely nouns
// (booking_create); the name-verb-object rule suggests moving them first.
var trailingVerbs = set("create", "update", "delete", "remove", "get", "list", "find", "fetch", "edit", "cancel", "add")

// batchWords mark batch tools; as a first word they prefix the verb
// (bulk_update_bookings).
var batchWords = set("batch", "bulk")

// updateVerbs start the names of tools that change an existing object and
// so must carry the version the caller read.
var updateVerbs = set("update", "edit", "patch", "modify")

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// Words splits a name into lowercase words at "_", "-", ".", "/", spaces
// and camelCase boundaries: "getBookingV2" → get, booking, v2.
func Words(name string) []string {
	var out []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			out = append(out, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || r == '.' || r == '/' || unicode.IsSpace(r):
			flush()
			continue
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
			(unicode.IsUpper(rs[i-1]) && i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush()
		}
		cur = append(cur, r)
	}
	flush()
	return out
}

// normName folds an argument name for comparisons: lowercase, without "_"
// and "-" (tenant_id, tenantId and Tenant-ID are equal).
func normName(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' {
			return -1
		}
		return unicode.ToLower(r)
	}, s)
}

// toSnake suggests a snake_case spelling of a name.
func toSnake(name string) string {
	var ws []string
	for _, w := range Words(name) {
		w = strings.Map(func(r rune) rune {
			if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
				return r
			}
			return -1
		}, w)
		if w != "" {
			ws = append(ws, w)
		}
	}
	s := strings.Join(ws, "_")
	if s != "" && (s[0] < 'a' || s[0] > 'z') {
		s = "tool_" + s
	}
	return s
}

// verbObject splits a name into its verb and object, skipping a leading
// batch/bulk word: "bulk_update_bookings" → ("update", "bookings", true).
func verbObject(name string) (verb, object string, batch bool) {
	ws := Words(name)
	for len(ws) > 0 && batchWords[ws[0]] {
		ws = ws[1:]
		batch = true
	}
	if slices.ContainsFunc(ws, func(w string) bool { return batchWords[w] }) {
		batch = true
	}
	if len(ws) == 0 {
		return "", "", batch
	}
	return ws[0], strings.Join(ws[1:], "_"), batch
}

func (l *linter) checkName(t *tool) {
	v, present := t.obj["name"]
	if !present || v == nil || v == "" {
		l.add(t, "name-missing", "name", "the tool has no name; give it a snake_case verb_object name such as get_booking")
		return
	}
	if t.name == "" {
		return // tool-shape reported it
	}
	name := t.name
	if n := utf8.RuneCountInString(name); n > MaxNameLength {
		l.add(t, "name-length", "name", "the name is %d characters; clients accept at most %d: shorten it", n, MaxNameLength)
	}
	if !snakeCase.MatchString(name) {
		hint := ""
		if s := toSnake(name); s != "" && s != name {
			hint = fmt.Sprintf(", e.g. %q", s)
		}
		l.add(t, "name-snake-case", "name", "the name %q is not snake_case: use lowercase letters a-z, digits and single underscores, starting with a letter%s", name, hint)
	}
	ws := Words(name)
	switch {
	case len(ws) == 1 && (readVerbs[ws[0]] || writeVerbs[ws[0]]):
		l.add(t, "name-verb-object", "name", "the name %q is a verb without an object: say what it acts on, e.g. %s_bookings", name, ws[0])
	case len(ws) == 1:
		l.add(t, "name-verb-object", "name", "the name %q is a single word: name the tool verb_object, e.g. get_%s or list_%s", name, ws[0], ws[0])
	default:
		first, last := ws[0], ws[len(ws)-1]
		if !readVerbs[first] && !writeVerbs[first] && !batchWords[first] && trailingVerbs[last] {
			l.add(t, "name-verb-object", "name", "the name %q puts the verb last: lead with it, e.g. %s_%s", name, last, strings.Join(ws[:len(ws)-1], "_"))
		}
	}
}
