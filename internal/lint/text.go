package lint

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

func (l *linter) checkTitleAndHints(t *tool) {
	ann := obj(t.obj, "annotations")
	if strings.TrimSpace(str(t.obj, "title")) == "" && strings.TrimSpace(str(ann, "title")) == "" {
		l.add(t, "title-missing", "title", "the tool has no title: add a short human-readable one (e.g. %q); clients show it when they ask a person to approve a call", titleFor(t.name))
	}
	readOnly := ann["readOnlyHint"] == true
	destructive, hasDestructive := ann["destructiveHint"].(bool)
	if !readOnly && !hasDestructive {
		l.add(t, "hints-explicit", "annotations", "annotations set neither readOnlyHint: true nor destructiveHint, so clients assume the spec default, a destructive write: set readOnlyHint: true for a read, destructiveHint: true or false for a write")
	}
	if readOnly && hasDestructive && destructive {
		l.add(t, "hints-conflict", "annotations", "readOnlyHint: true and destructiveHint: true contradict each other: a tool that destroys is not read-only")
	}
	if readOnly && t.name != "" {
		if verb, _, _ := verbObject(t.name); writeVerbs[verb] && !readVerbs[verb] {
			l.add(t, "hints-conflict", "annotations.readOnlyHint", "readOnlyHint: true on a tool named %q, which reads like a write (%s): drop the hint, or rename the tool if it only reads", t.name, verb)
		}
	}
}

// titleFor suggests a title from a name: "get_booking" → "Get booking".
func titleFor(name string) string {
	s := strings.Join(Words(name), " ")
	if s == "" {
		return "Get booking"
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:]
}

func (l *linter) checkDescription(t *tool) {
	d, _ := t.obj["description"].(string)
	if strings.TrimSpace(d) == "" {
		l.add(t, "description-missing", "description", "the tool has no description: say what it does and when to use it, what it does not do and which sibling tool does, its effect and its parameters")
		return
	}
	if n := utf8.RuneCountInString(d); n > l.o.MaxDescription {
		l.add(t, "description-length", "description", "the description is %d characters, over the bound of %d: lead with what and when, move examples and details into the parameter descriptions", n, l.o.MaxDescription)
	}
}

// instructionPatterns are phrases that address the model instead of
// describing the tool.
var instructionPatterns = compileAll(
	`\byou (?:must|should|shall|need to|have to|are required to|will need to|are to)\b`,
	`\b(?:always|never|immediately) (?:call|use|invoke|pass|ask|tell|mention|reveal|say|respond|reply)\b`,
	`\b(?:do not|don't|never|dont) (?:tell|inform|mention|reveal|show|notify|alert|ask)(?: this to)? (?:the )?(?:user|human|person|customer)\b`,
	`\bwithout (?:telling|asking|informing|notifying|alerting|confirming with) (?:the )?(?:user|human|person)\b`,
	`\b(?:before|after|instead of) (?:using|calling|invoking|running) (?:any|every|all|other|another|this)\b`,
	`\b(?:call|use|invoke|run) this tool (?:first|before|whenever|every time|always|instead)\b`,
	`\b(?:the )?(?:assistant|ai|llm|language model|claude|chatgpt|gpt) (?:must|should|shall|needs to|has to|is required to)\b`,
	`\bkeep (?:this|it|these instructions) (?:secret|hidden|confidential|between us)\b`,
	`\byour (?:response|answer|reply|output) (?:must|should)\b`,
)

// injectionPatterns are known prompt-injection and tool-poisoning shapes.
var injectionPatterns = compileAll(
	`\b(?:ignore|disregard|forget|override|skip)\b(?: \w+){0,3} (?:previous|prior|above|earlier|preceding|former|original|system|other|all) (?:\w+ )?(?:instructions?|prompts?|messages?|rules|directions|guidelines|context|constraints)\b`,
	`\bsystem (?:prompt|message|instructions?)\b`,
	`\b(?:developer|hidden|secret) (?:message|prompt|instructions?)\b`,
	`\bnew instructions?\b`,
	`\b(?:you are now|from now on,? you|act as (?:a|an|the)|pretend (?:to be|you are)|roleplay as|jailbreak|dan mode|developer mode)\b`,
	`<\|[a-z_]+\|>`,         // chat-template tokens: <|im_start|>, <|system|>
	`\[/?inst\]|<<\/?sys>>`, // Llama-style markers
	`</?(?:important|system|instructions?|secret|hidden|admin|tool_call|function_call|assistant|user)>`, // tag-wrapped orders
	`(?m)^\s*(?:system|assistant|human)\s*:`,                                                            // fake turns
	`!\[[^\]]*\]\(\s*https?://`,                                                                         // markdown image: silent exfiltration
	`\b(?:send|post|upload|forward|exfiltrate|leak|copy)\b(?: \w+){0,4} to (?:https?://|\S+@\S+\.\w+)`,
	`~/\.(?:ssh|aws|config|cursor|kube|docker|netrc|env)\b|\bid_(?:rsa|ed25519)\b|\bmcp\.json\b|\.env\b`,
)

func compileAll(patterns ...string) []*regexp.Regexp {
	out := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		out[i] = regexp.MustCompile(`(?i)` + p)
	}
	return out
}

// matches returns up to three distinct phrases of text that match any of
// the patterns.
func matches(patterns []*regexp.Regexp, text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, re := range patterns {
		for _, m := range re.FindAllString(text, -1) {
			m = strings.TrimSpace(m)
			k := strings.ToLower(m)
			if seen[k] {
				continue
			}
			seen[k] = true
			out = append(out, m)
			if len(out) == 3 {
				return out
			}
		}
	}
	return out
}

// foldForMatching drops invisible characters and folds runs of white space
// to one space, so "ig\u200bnore  previous" still reads "ignore previous".
func foldForMatching(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if _, bad := invisible(r); bad {
			continue
		}
		if r == '\n' {
			b.WriteRune(r)
			space = false
			continue
		}
		if unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// text is a model-facing string of a tool definition.
type text struct {
	path, s string
}

// modelTexts returns the strings a model reads as guidance: the title,
// description and annotations.title, and every "title" and "description"
// string inside inputSchema and outputSchema.
func modelTexts(t *tool) []text {
	var out []text
	for _, k := range []string{"title", "description"} {
		if s, ok := t.obj[k].(string); ok {
			out = append(out, text{k, s})
		}
	}
	if s := str(obj(t.obj, "annotations"), "title"); s != "" {
		out = append(out, text{"annotations.title", s})
	}
	for _, k := range []string{"inputSchema", "outputSchema"} {
		walkSchemaTexts(t.obj[k], k, &out)
	}
	return out
}

func walkSchemaTexts(v any, path string, out *[]text) {
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			if s, ok := v[k].(string); ok && (k == "description" || k == "title") {
				*out = append(*out, text{joinPath(path, k), s})
				continue
			}
			walkSchemaTexts(v[k], joinPath(path, k), out)
		}
	case []any:
		for i, e := range v {
			walkSchemaTexts(e, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

func (l *linter) checkTexts(t *tool) {
	for _, tx := range modelTexts(t) {
		s := foldForMatching(tx.s)
		if m := matches(injectionPatterns, s); len(m) > 0 {
			l.add(t, "description-injection", tx.path, "%s reads like a prompt injection (%s): describe what the tool does, never address the model; mcpgate pins definitions, so a hostile text stays visible in review", tx.path, quoteAll(m))
		}
		if m := matches(instructionPatterns, s); len(m) > 0 {
			l.add(t, "description-instructions", tx.path, "%s gives the model orders (%s): describe what the tool does and when it fits; rules the upstream needs kept belong in its own checks, not in text the model may ignore", tx.path, quoteAll(m))
		}
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// invisibleNames names the invisible characters seen most often.
var invisibleNames = map[rune]string{
	0x00AD: "SOFT HYPHEN", 0x034F: "COMBINING GRAPHEME JOINER", 0x061C: "ARABIC LETTER MARK",
	0x115F: "HANGUL CHOSEONG FILLER", 0x1160: "HANGUL JUNGSEONG FILLER", 0x180E: "MONGOLIAN VOWEL SEPARATOR",
	0x200B: "ZERO WIDTH SPACE", 0x200C: "ZERO WIDTH NON-JOINER", 0x200D: "ZERO WIDTH JOINER",
	0x200E: "LEFT-TO-RIGHT MARK", 0x200F: "RIGHT-TO-LEFT MARK",
	0x202A: "LEFT-TO-RIGHT EMBEDDING", 0x202B: "RIGHT-TO-LEFT EMBEDDING", 0x202C: "POP DIRECTIONAL FORMATTING",
	0x202D: "LEFT-TO-RIGHT OVERRIDE", 0x202E: "RIGHT-TO-LEFT OVERRIDE",
	0x2060: "WORD JOINER", 0x2066: "LEFT-TO-RIGHT ISOLATE", 0x2067: "RIGHT-TO-LEFT ISOLATE",
	0x2068: "FIRST STRONG ISOLATE", 0x2069: "POP DIRECTIONAL ISOLATE",
	0x2800: "BRAILLE PATTERN BLANK", 0x3164: "HANGUL FILLER", 0xFEFF: "ZERO WIDTH NO-BREAK SPACE (BOM)",
	0xFFA0: "HALFWIDTH HANGUL FILLER",
}

// invisible reports whether r is a character a reader cannot see that can
// hide or reorder text: C0/C1 controls other than tab, LF and CR, format
// characters (zero-width, bidi controls, Unicode tags, soft hyphen, ...),
// variation selectors, and blank fillers.
func invisible(r rune) (string, bool) {
	if name, ok := invisibleNames[r]; ok {
		return name, true
	}
	switch {
	case r == '\t' || r == '\n' || r == '\r':
		return "", false
	case unicode.Is(unicode.Cc, r):
		return "control character", true
	case r >= 0xE0000 && r <= 0xE007F:
		return "TAG character", true
	case r >= 0xE0100 && r <= 0xE01EF, r >= 0xFE00 && r <= 0xFE0E:
		return "VARIATION SELECTOR", true
	case unicode.Is(unicode.Cf, r):
		return "format character", true
	}
	return "", false
}

// scanInvisible describes the invisible characters of s, "" if none.
func scanInvisible(s string) string {
	count := 0
	first := ""
	for i, r := range s {
		if name, bad := invisible(r); bad {
			if count == 0 {
				first = fmt.Sprintf("U+%04X %s at byte %d", r, name, i)
			}
			count++
		}
	}
	switch count {
	case 0:
		return ""
	case 1:
		return first
	}
	return fmt.Sprintf("%d of them, the first %s", count, first)
}

// checkInvisible walks every member name and string of v.
func (l *linter) checkInvisible(t *tool, path string, v any) {
	switch v := v.(type) {
	case string:
		if d := scanInvisible(v); d != "" {
			l.add(t, "invisible-characters", path, "the text at %s holds invisible characters (%s): they can hide instructions from a reviewer or reorder what a person sees; remove them", pathOrRoot(path), d)
		}
	case map[string]any:
		for _, k := range sortedKeys(v) {
			p := joinPath(path, k)
			if d := scanInvisible(k); d != "" {
				l.add(t, "invisible-characters", p, "the member name %q at %s holds invisible characters (%s): remove them", k, pathOrRoot(path), d)
			}
			l.checkInvisible(t, p, v[k])
		}
	case []any:
		for i, e := range v {
			l.checkInvisible(t, fmt.Sprintf("%s[%d]", path, i), e)
		}
	}
}

func pathOrRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}
