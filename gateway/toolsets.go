package gateway

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/policy"
)

// ToolsetFull is the built-in toolset that holds every tool with its full
// description: the toolset of a connection that names none (toolsets
// are bound to the connection: a core set, a standard set, a full set).
const ToolsetFull = "full"

// AuthUnknownToolset is the code of the refusal of a credential bound to a
// toolset the configuration does not define (403; fail closed).
const AuthUnknownToolset = "unknown_toolset"

// ToolsetDef defines one named toolset (config toolsets.<name>).
type ToolsetDef struct {
	// Name is the toolset's name; never ToolsetFull.
	Name string
	// Tools are the toolset's tools: upstream name → tool names.
	Tools map[string][]string
	// DescriptionChars, when above 0, shortens the description tools/list
	// shows of the toolset's tools: its first sentence, cut at a word to
	// at most this many characters (ShortDescription). 0 lists the
	// upstream's description.
	DescriptionChars int
	// Descriptions are declared short descriptions, upstream → tool →
	// text; a tool listed here shows this text instead of its own
	// (DescriptionChars does not apply to it).
	Descriptions map[string]map[string]string
}

// Toolsets are the configured toolsets, compiled for lookups on every
// tools/list and tools/call. A nil *Toolsets knows only ToolsetFull.
type Toolsets struct {
	sets    map[string]*ToolsetDef
	members map[string]map[toolKey]bool // toolset → its tools
	holding map[toolKey][]string        // tool → the toolsets holding it, sorted
}

// NewToolsets compiles defs. Names must be unique, not empty and not
// ToolsetFull.
func NewToolsets(defs []ToolsetDef) (*Toolsets, error) {
	ts := &Toolsets{sets: map[string]*ToolsetDef{}, members: map[string]map[toolKey]bool{}, holding: map[toolKey][]string{}}
	var errs []error
	for i := range defs {
		d := &defs[i]
		switch {
		case d.Name == "" || d.Name == ToolsetFull:
			errs = append(errs, fmt.Errorf("toolset %q: the name must be set and not %q (built in)", d.Name, ToolsetFull))
			continue
		case ts.sets[d.Name] != nil:
			errs = append(errs, fmt.Errorf("toolset %q: defined twice", d.Name))
			continue
		}
		ts.sets[d.Name] = d
		m := map[toolKey]bool{}
		for u, names := range d.Tools {
			for _, n := range names {
				k := toolKey{u, n}
				if !m[k] {
					m[k] = true
					ts.holding[k] = append(ts.holding[k], d.Name)
				}
			}
		}
		ts.members[d.Name] = m
	}
	for _, names := range ts.holding {
		slices.Sort(names)
	}
	return ts, errors.Join(errs...)
}

// Known reports whether name is a toolset a connection may be bound to:
// "" and ToolsetFull always, else a configured one.
func (ts *Toolsets) Known(name string) bool {
	if name == "" || name == ToolsetFull {
		return true
	}
	return ts != nil && ts.sets[name] != nil
}

// Names returns the configured toolsets' names, sorted (ToolsetFull not
// included).
func (ts *Toolsets) Names() []string {
	if ts == nil {
		return nil
	}
	var out []string
	for n := range ts.sets {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Holding returns the names of the configured toolsets that hold the
// tool, sorted; nil when none does. The result is shared: do not modify.
func (ts *Toolsets) Holding(upstream, tool string) []string {
	if ts == nil {
		return nil
	}
	return ts.holding[toolKey{upstream, tool}]
}

// Contains reports whether toolset name holds the tool; ToolsetFull and
// "" hold every tool, an unknown name none.
func (ts *Toolsets) Contains(name, upstream, tool string) bool {
	if name == "" || name == ToolsetFull {
		return true
	}
	return ts != nil && ts.members[name][toolKey{upstream, tool}]
}

// Description is the description tools/list shows of a tool to a
// connection bound to toolset name: the declared short description, the
// shortened upstream description (DescriptionChars), or desc as it is.
func (ts *Toolsets) Description(name, upstream, tool, desc string) string {
	if ts == nil || name == "" || name == ToolsetFull {
		return desc
	}
	d := ts.sets[name]
	if d == nil {
		return desc
	}
	if s, ok := d.Descriptions[upstream][tool]; ok {
		return s
	}
	if d.DescriptionChars > 0 {
		return ShortDescription(desc, d.DescriptionChars)
	}
	return desc
}

// ShortDescription shortens a tool description for small models: the
// first sentence (up to the first ".", "!" or "?" followed by white space,
// or the first blank line), with white space runs folded to one space,
// then cut at a word boundary to at most max characters (runes), "…"
// marking a cut. max < 1 returns s unchanged.
func ShortDescription(s string, max int) string {
	if max < 1 {
		return s
	}
	s = strings.TrimSpace(s)
	if i := strings.Index(s, "\n\n"); i >= 0 {
		s = s[:i]
	}
	for i, r := range s {
		if r != '.' && r != '!' && r != '?' {
			continue
		}
		next, _ := utf8.DecodeRuneInString(s[i+1:])
		if i+1 == len(s) || unicode.IsSpace(next) {
			s = s[:i+1]
			break
		}
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	runes := []rune(s)
	cut := max - 1 // room for "…"
	if cut < 1 {
		return string(runes[:max])
	}
	end := cut
	for end > 0 && !unicode.IsSpace(runes[end]) {
		end--
	}
	if end < cut/2 { // one long word: cut inside it rather than lose most
		end = cut
	}
	return strings.TrimRight(string(runes[:end]), " ,;:") + "…"
}

// checkToolset refuses a principal bound to a toolset the configuration
// does not define (a gateway token minted before the toolset was removed,
// a client mapping gone stale): fail closed with 403 unknown_toolset,
// whatever the request.
func (p *Pipeline) checkToolset(x *Exchange) *Local {
	name := x.input.Principal.Toolset
	if p.opts.Toolsets.Known(name) {
		return nil
	}
	x.outcome = OutcomeUnauthenticated
	p.log.LogAttrs(x.ctx, slog.LevelWarn, "credential bound to an unknown toolset; refused", slog.String("connection", x.input.Principal.Connection))
	f := &AuthFailure{Status: 403, Code: AuthUnknownToolset,
		Message: "Your credential is bound to the toolset " + quote(name) + ", which this server does not define.",
		Fix:     "Ask an administrator for a new MCP token (or client configuration) bound to a toolset this server defines."}
	return authLocal(f, x.msg, []policy.Reason{{Code: f.Code, Cause: f.Message, Fix: f.Fix}}, "")
}
