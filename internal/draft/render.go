package draft

import (
	"bytes"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/lint"
	"github.com/mcpgate/mcpgate/policy"
)

// Options describe the draft Render writes.
type Options struct {
	// Upstream is the upstream's name in the draft (upstreams[].name).
	Upstream string
	// URL is the upstream's MCP endpoint; Route the path clients call.
	URL, Route string
	// Command, when set, is the argv of a stdio upstream, written as
	// upstreams[].command.argv in place of url.
	Command []string
	// Snapshot is the upstream's listing.
	Snapshot *catalog.Snapshot
	// Lint is the lint report of the snapshot's tools.
	Lint lint.Report
	// Manifest is catalog.manifest as written in the draft (relative to
	// the draft's directory, or absolute); "" leaves pinning off.
	Manifest string
	// Store is store.bolt.path as written in the draft; "" leaves the
	// store out (then write safety is off: confirmed classes are refused).
	Store string
	// Now stamps the header.
	Now time.Time
}

// Tool is the proposal for one listed tool.
type Tool struct {
	Name  string
	Guess Guess
	Right string
	Text  TextPaths
}

// Propose makes the proposal for every tool of a snapshot, in listing
// order.
func Propose(upstream string, s *catalog.Snapshot) []Tool {
	out := make([]Tool, 0, len(s.Tools))
	for i := range s.Tools {
		t := &s.Tools[i]
		g := GuessEffect(ToolFacts{Name: t.Name, Annotations: t.Annotations, InputSchema: t.InputSchema})
		out = append(out, Tool{
			Name:  t.Name,
			Guess: g,
			Right: ProposeRight(upstream, t.Name, g.Effect),
			Text:  OutputTextPaths(t.OutputSchema),
		})
	}
	return out
}

// commentWidth is where comment lines are wrapped.
const commentWidth = 78

// Render writes the draft configuration: one upstream with a declaration
// per listed tool, every guess and its reasons as comments, the lint
// findings beside the tool they concern, and catalog.manifest.
func Render(o Options) []byte {
	var b bytes.Buffer
	s := o.Snapshot
	tools := Propose(o.Upstream, s)
	unsure := 0
	counts := map[string]int{}
	for _, t := range tools {
		counts[t.Guess.Effect]++
		if t.Guess.Unsure {
			unsure++
		}
	}

	c := func(indent int, format string, args ...any) { comment(&b, indent, fmt.Sprintf(format, args...)) }
	where := "at " + o.URL
	if o.Command != nil {
		where = "started with " + strings.Join(o.Command, " ")
	}
	c(0, "mcpgate draft configuration for the MCP server %s, written by `mcpgate init` on %s from its tools/list (%s, MCP %s).",
		where, o.Now.UTC().Format(time.RFC3339), plural(len(s.Tools), "tool"), orUnknown(s.ProtocolVersion))
	b.WriteString("#\n")
	c(0, "REVIEW IT BEFORE USE. Every effect class, right and untrusted_text path below is a guess made from the tool's name, its annotations and its schemas; the comment above each says why. Where the signals disagree or say nothing, the draft proposes %s, the most guarded class: a person confirms every call (%d of %d tools here). Annotations are the upstream's own claims, taken as hints only.",
		MostGuarded, unsure, len(tools))
	b.WriteString("#\n")
	c(0, "Effect classes: read (only reads), silent_write (changes data, nobody is told), notify (messages a person), wake (interrupts a person now), alerting (changes what alerts fire), delete (removes or cancels). notify, wake, alerting and delete need a person's confirmation of every call.")
	b.WriteString("#\n")
	c(0, "Proposed here: %s.", effectCounts(counts))
	b.WriteString("#\n")
	c(0, "Check it with `mcpgate validate --config FILE`, run it with `mcpgate serve --config FILE`. There is no auth section: every caller is anonymous and rights are not checked until you add one (docs/guides/gateway-tokens.md, docs/guides/oauth.md). docs/reference/configuration.md lists every key.")
	b.WriteString("\n")

	b.WriteString("listeners:\n")
	b.WriteString("  proxy:\n    address: 127.0.0.1:8080            # where MCP clients connect\n")
	b.WriteString("  admin:\n    address: 127.0.0.1:9090            # /metrics, /healthz, /readyz, admin API\n\n")

	b.WriteString("upstreams:\n")
	fmt.Fprintf(&b, "  - name: %s\n", quote(o.Upstream))
	if o.Command != nil {
		// A stdio server (docs/guides/stdio-upstreams.md): mcpgate starts it.
		args := make([]string, len(o.Command))
		for i, a := range o.Command {
			args[i] = quote(a)
		}
		fmt.Fprintf(&b, "    command:                           # a stdio server mcpgate starts; secrets go in env_files\n      argv: [%s]\n", strings.Join(args, ", "))
	} else {
		fmt.Fprintf(&b, "    url: %s\n", quote(o.URL))
	}
	fmt.Fprintf(&b, "    route: %s\n", quote(o.Route))
	if len(tools) == 0 {
		b.WriteString("    # The upstream listed no tools.\n    tools: {}\n")
	} else {
		b.WriteString("    tools:\n")
	}
	findings := map[string][]lint.Finding{}
	var listFindings []lint.Finding
	for _, f := range o.Lint.Findings {
		if f.Tool == "" {
			listFindings = append(listFindings, f)
			continue
		}
		findings[f.Tool] = append(findings[f.Tool], f)
	}
	for i, t := range tools {
		def := &s.Tools[i]
		b.WriteString("\n")
		fmt.Fprintf(&b, "      %s:\n", quote(t.Name))
		if def.Title != "" {
			c(8, "title: %s", clip(def.Title, 120))
		}
		if def.Description != "" {
			c(8, "description: %s", clip(def.Description, 300))
		}
		label := "guess"
		if t.Guess.Unsure {
			label = "UNSURE"
		}
		c(8, "effect (%s): %s.", label, strings.Join(t.Guess.Reasons, "; "))
		fmt.Fprintf(&b, "        effect: %s\n", t.Guess.Effect)
		c(8, "rights (guess): the name's noun and the class; rename to your scheme.")
		fmt.Fprintf(&b, "        rights: [%s]\n", quote(t.Right))
		switch {
		case len(t.Text.Proposed) > 0:
			c(8, "untrusted_text (guess): the outputSchema's free-text string fields (no enum, format or pattern) whose names say they hold prose.")
			b.WriteString("        untrusted_text:\n")
			for _, p := range t.Text.Proposed {
				fmt.Fprintf(&b, "          - %s\n", quote(p))
			}
		case len(def.OutputSchema) == 0:
			c(8, "untrusted_text: no outputSchema, so no field is proposed; add the paths of text third parties write (see config/examples/quickstart.yaml).")
		default:
			c(8, "untrusted_text: no prose field in the outputSchema.")
		}
		if len(t.Text.Other) > 0 {
			c(8, "Other free strings in the output, not proposed (add them if third parties write them): %s.", strings.Join(t.Text.Other, ", "))
		}
		if fs := findings[t.Name]; len(fs) > 0 {
			c(8, "lint (%s):", plural(len(fs), "finding"))
			for _, f := range fs {
				writeFinding(&b, 8, f)
			}
		}
	}
	if len(s.Refused) > 0 {
		b.WriteString("\n")
		c(6, "Listed but refused by mcpgate, so never shown to clients (not declared here):")
		for _, r := range s.Refused {
			c(6, "  %q: %s", r.Name, r.Reason)
		}
	}
	if len(listFindings) > 0 {
		b.WriteString("\n")
		c(4, "lint of the whole list:")
		for _, f := range listFindings {
			writeFinding(&b, 4, f)
		}
	}
	c(4, "lint: %s, %s, %s (rules: internal/lint/RULES.md; `mcpgate manifest lint --url URL` runs it again).",
		plural(o.Lint.Tools, "tool"), plural(o.Lint.Errors(), "error"), plural(o.Lint.Warnings(), "warning"))

	if o.Store != "" {
		b.WriteString("\n")
		c(0, "The state store keeps pending confirmations and replay records: without it, write safety is off and every tool of a confirmed class (notify, wake, alerting, delete) is refused. One gateway process per file; use store.redis for several.")
		b.WriteString("store:\n  bolt:\n")
		fmt.Fprintf(&b, "    path: %s\n", quote(o.Store))
	}
	b.WriteString("\n")
	if o.Manifest != "" {
		c(0, "The manifest pins each tool's definition as listed now (rug-pull protection): a tool whose definition changes is hidden and refused until pinned again; a new tool is refused until pinned (unpinned: refuse). After review, re-pin with `mcpgate manifest pin --config FILE`.")
		b.WriteString("catalog:\n")
		fmt.Fprintf(&b, "  manifest: %s\n", quote(o.Manifest))
		b.WriteString("  unpinned: refuse\n")
	}
	return b.Bytes()
}

func writeFinding(b *bytes.Buffer, indent int, f lint.Finding) {
	s := fmt.Sprintf("- %s %s: %s", f.Severity, f.Rule, f.Message)
	if f.Path != "" && f.Path != "tools" {
		s += " [" + f.Path + "]"
	}
	comment(b, indent, s)
}

// comment writes text as YAML comment lines at indent, wrapped at
// commentWidth; characters that are not printable (line breaks,
// controls, bidi and zero-width marks) are escaped, so upstream text
// cannot end a comment or hide in it.
func comment(b *bytes.Buffer, indent int, text string) {
	text = printable(text)
	pad := strings.Repeat(" ", indent)
	cont := ""
	if strings.HasPrefix(text, "- ") {
		cont = "  "
	}
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && indent+2+len(line)+1+len(w) > commentWidth {
			b.WriteString(pad + "# " + line + "\n")
			line = cont
		}
		if line == "" || line == cont {
			line += w
		} else {
			line += " " + w
		}
	}
	if strings.TrimSpace(line) != "" {
		b.WriteString(pad + "# " + line + "\n")
	}
}

// printable escapes the runes of s that are not printable as \uXXXX.
func printable(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == ' ' || (unicode.IsPrint(r) && !unicode.IsSpace(r)):
			b.WriteRune(r)
		case r > 0xFFFF:
			fmt.Fprintf(&b, `\U%08X`, r)
		default:
			fmt.Fprintf(&b, `\u%04X`, r)
		}
	}
	return b.String()
}

// quote writes s as a YAML double-quoted scalar (JSON string syntax,
// which YAML 1.2 reads the same).
func quote(s string) string {
	// Invalid UTF-8 is an error, but the quoted form (with U+FFFD in its
	// place) is returned all the same.
	q, _ := jsontext.AppendQuote(nil, s)
	return string(q)
}

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func orUnknown(s string) string {
	if s == "" {
		return "revision unknown"
	}
	return s
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func effectCounts(m map[string]int) string {
	var parts []string
	for _, e := range policy.Effects {
		if m[e] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", m[e], e))
		}
	}
	if len(parts) == 0 {
		return "no tools"
	}
	return strings.Join(parts, ", ")
}
