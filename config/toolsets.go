package config

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/gateway/routes"
)

// Bounds of the toolsets section.
const (
	// ToolsetFull is the built-in toolset holding every tool (the default
	// of a connection that names none); it cannot be defined.
	ToolsetFull = "full"
	// MinDescriptionChars and MaxDescriptionChars bound
	// toolsets.<name>.description_chars (0 lists full descriptions).
	MinDescriptionChars = 20
	MaxDescriptionChars = 2000
	// MaxToolsetDescription bounds a declared short description, in
	// characters.
	MaxToolsetDescription = 1000
)

// toolsetNamePattern is what a toolset name may look like: it travels in
// tokens, the policy input and logs.
var toolsetNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Toolset is a named set of tools a connection can be bound to, e.g. a
// core set of about 20 tools with short descriptions for small and local
// models, a standard set and the full set. A gateway token carries its
// toolset (mcpgate tokens create --toolset); an OAuth client gets one from
// auth.issuers[].client_toolsets. tools/list then shows only the toolset's
// tools the caller may use, on one page in the catalog's order, and a
// call to another tool is refused (tool_not_in_toolset).
type Toolset struct {
	// The toolset's tools: the tool's name with one upstream,
	// `<upstream>/<tool>` with several. Each must be declared in
	// `upstreams[].tools` (with `catalog.disabled`, an undeclared name is
	// logged as a warning at start).
	//
	// Required.
	Tools []string `yaml:"tools"`
	// Short descriptions for small models: `tools/list` shows the first
	// sentence, cut at a word to at most this many characters (`…` marks a
	// cut). 20 to 2000.
	//
	// Default: `0`: the upstream's description.
	DescriptionChars int `yaml:"description_chars"`
	// Declared short descriptions (at most 1000 characters), replacing the
	// upstream's description for this toolset; tools named as in `tools`.
	//
	// Default: none.
	Descriptions map[string]string `yaml:"descriptions"`
}

// toolRef resolves a tool name of the toolsets section: "<upstream>/<tool>",
// or a bare tool name when there is one upstream.
func (c *Config) toolRef(name string) (upstream, tool string, err error) {
	if u, t, ok := strings.Cut(name, "/"); ok && c.upstreamIndex(u) >= 0 {
		return u, t, nil
	}
	switch len(c.Upstreams) {
	case 0:
		return "", "", fmt.Errorf("%q: no upstream is configured", name)
	case 1:
		return c.Upstreams[0].Name, name, nil
	}
	return "", "", fmt.Errorf("%q: with several upstreams, name tools as <upstream>/<tool> (upstreams: %s)", name, strings.Join(c.upstreamNames(), ", "))
}

func (c *Config) upstreamIndex(name string) int {
	for i, u := range c.Upstreams {
		if u.Name == name {
			return i
		}
	}
	return -1
}

func (c *Config) upstreamNames() []string {
	var out []string
	for _, u := range c.Upstreams {
		out = append(out, u.Name)
	}
	return out
}

func (c *Config) validateToolsets(p *problems) {
	for _, name := range sortedKeys(c.Toolsets) {
		ts := c.Toolsets[name]
		at := "toolsets." + name
		switch {
		case name == ToolsetFull:
			p.add(at, "%q is built in (every tool) and cannot be defined", ToolsetFull)
			continue
		case !toolsetNamePattern.MatchString(name):
			p.add(at, "%q is not a toolset name: use lower-case letters, digits, '_' and '-' (1–63 characters)", name)
			continue
		}
		if len(ts.Tools) == 0 {
			p.add(at+".tools", "required: the toolset's tools")
		}
		seen := map[string]bool{}
		for i, n := range ts.Tools {
			path := fmt.Sprintf("%s.tools[%d]", at, i)
			u, t, err := c.toolRef(n)
			if err != nil {
				p.add(path, "%v", err)
				continue
			}
			if seen[u+"/"+t] {
				p.add(path, "%q is listed twice", n)
			}
			seen[u+"/"+t] = true
			if _, ok := c.Upstreams[c.upstreamIndex(u)].Tools[t]; !ok && !c.Catalog.Disabled {
				p.add(path, "%q is not declared in upstreams[%d].tools (an undeclared tool is never listed)", n, c.upstreamIndex(u))
			}
		}
		if d := ts.DescriptionChars; d != 0 && (d < MinDescriptionChars || d > MaxDescriptionChars) {
			p.add(at+".description_chars", "%d must be 0 (full descriptions) or from %d to %d", d, MinDescriptionChars, MaxDescriptionChars)
		}
		for _, k := range sortedKeys(ts.Descriptions) {
			path := at + ".descriptions." + k
			u, t, err := c.toolRef(k)
			switch {
			case err != nil:
				p.add(path, "%v", err)
			case !seen[u+"/"+t]:
				p.add(path, "%q is not one of the toolset's tools", k)
			case strings.TrimSpace(ts.Descriptions[k]) == "":
				p.add(path, "must not be empty")
			case utf8.RuneCountInString(ts.Descriptions[k]) > MaxToolsetDescription:
				p.add(path, "longer than %d characters", MaxToolsetDescription)
			}
		}
	}
	if c.Auth != nil {
		for i, is := range c.Auth.Issuers {
			for _, client := range sortedKeys(is.ClientToolsets) {
				ts := is.ClientToolsets[client]
				if _, ok := c.Toolsets[ts]; !ok && ts != ToolsetFull {
					p.add(fmt.Sprintf("auth.issuers[%d].client_toolsets.%s", i, client), "%q is not a toolset of this configuration (toolsets: %s)", ts, strings.Join(c.ToolsetNames(), ", "))
				}
			}
		}
	}
	for i, u := range c.Upstreams {
		for j, pat := range u.ResourceTenant {
			if _, err := routes.CompileResourcePattern(pat); err != nil {
				p.add(fmt.Sprintf("upstreams[%d].resource_tenant[%d]", i, j), "%v", err)
			}
		}
	}
}

// ToolsetWarnings are what validation tolerates but an operator should
// see: with the catalog off, toolset tools no upstream declares.
func (c *Config) ToolsetWarnings() []string {
	if !c.Catalog.Disabled {
		return nil
	}
	var out []string
	for _, name := range sortedKeys(c.Toolsets) {
		for _, n := range c.Toolsets[name].Tools {
			u, t, err := c.toolRef(n)
			if err != nil {
				continue
			}
			if _, ok := c.Upstreams[c.upstreamIndex(u)].Tools[t]; !ok {
				out = append(out, fmt.Sprintf("toolsets.%s: tool %q is not declared in upstream %q", name, n, u))
			}
		}
	}
	return out
}

// ToolsetNames returns the names a connection may be bound to: "full"
// and every defined toolset, sorted.
func (c *Config) ToolsetNames() []string {
	out := append([]string{ToolsetFull}, mapKeys(c.Toolsets)...)
	slices.Sort(out)
	return out
}

// ResolvedToolset is a toolset with its tool names resolved to
// upstreams (what gateway.ToolsetDef needs).
type ResolvedToolset struct {
	Name             string
	Tools            map[string][]string          // upstream → tools
	DescriptionChars int                          // 0: full descriptions
	Descriptions     map[string]map[string]string // upstream → tool → short description
}

// ResolvedToolsets resolves the toolsets section, sorted by name. Call it
// on a validated configuration (names that do not resolve are left out).
func (c *Config) ResolvedToolsets() []ResolvedToolset {
	var out []ResolvedToolset
	for _, name := range sortedKeys(c.Toolsets) {
		ts := c.Toolsets[name]
		d := ResolvedToolset{Name: name, Tools: map[string][]string{}, DescriptionChars: ts.DescriptionChars,
			Descriptions: map[string]map[string]string{}}
		for _, n := range ts.Tools {
			if u, t, err := c.toolRef(n); err == nil {
				d.Tools[u] = append(d.Tools[u], t)
			}
		}
		for k, text := range ts.Descriptions {
			if u, t, err := c.toolRef(k); err == nil {
				if d.Descriptions[u] == nil {
					d.Descriptions[u] = map[string]string{}
				}
				d.Descriptions[u][t] = text
			}
		}
		out = append(out, d)
	}
	return out
}

// ClientToolsets returns auth.issuers[].client_toolsets as issuer → client
// id → toolset; nil without auth or mappings.
func (c *Config) ClientToolsets() map[string]map[string]string {
	if c.Auth == nil {
		return nil
	}
	var out map[string]map[string]string
	for _, is := range c.Auth.Issuers {
		if len(is.ClientToolsets) == 0 {
			continue
		}
		if out == nil {
			out = map[string]map[string]string{}
		}
		out[is.Issuer] = is.ClientToolsets
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := mapKeys(m)
	slices.Sort(out)
	return out
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
