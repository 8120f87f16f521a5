package config

import (
	"regexp"
	"time"
)

// Defaults and bounds of the tasks and extensions sections.
const (
	// DefaultTaskMaxTTL bounds how long a task binding lives when the
	// task's own ttl is longer, null (unlimited) or absent.
	DefaultTaskMaxTTL = time.Hour
	// MaxTaskMaxTTL caps tasks.max_ttl.
	MaxTaskMaxTTL = 168 * time.Hour
	// TasksExtension is the identifier of the tasks extension of revision
	// 2026-07-28 (SEP-2663). mcpgate does not handle it (yet): it is
	// always stripped, and cannot be allowed in extensions.allow.
	TasksExtension = "io.modelcontextprotocol/tasks"
)

// Tasks configures MCP tasks (revision 2025-11-25, "Tasks"): a tools/call
// with params.task answered by a task handle, its result fetched later
// with tasks/result. Off by default: task-augmented calls and the tasks/*
// methods are refused with an error telling the model to call the tool
// without task, and the upstream's tasks capability is hidden from
// clients.
type Tasks struct {
	// Turn tasks on. **Requires a [`store`](#store).**
	Enabled bool `yaml:"enabled"`
	// How long a task binding lives at most: the task's own `ttl` when
	// shorter; this bound when the task's `ttl` is longer, `null`
	// (unlimited) or missing. After it, the task is "not found" through
	// mcpgate. From `1s` to `168h`.
	//
	// Default: `1h`.
	MaxTTL Duration `yaml:"max_ttl"`
}

// Extensions configures which capability extensions pass between clients
// and upstreams. Extensions are named in capabilities.extensions (revision
// 2026-07-28 and the extensions framework, SEP-2133) and, as
// non-standard capabilities, in capabilities.experimental. mcpgate strips
// every one it does not handle from what clients declare (initialize
// params, the per-request clientCapabilities _meta of 2026-07-28) and from
// what upstreams declare (initialize and server/discover results): an
// extension changes what messages mean, and a gateway that does not
// understand them cannot enforce policy on them.
type Extensions struct {
	// Extension identifiers (`capabilities.extensions` keys such as
	// `io.modelcontextprotocol/ui`) and `experimental` capability names that
	// pass unchanged. `io.modelcontextprotocol/tasks` cannot be listed (see
	// [`tasks`](#tasks)).
	//
	// Default: `[]`.
	Allow []string `yaml:"allow"`
}

// extensionName is the form of an extension identifier or experimental
// capability name: an optional reverse-DNS prefix ending in "/", then a
// name of letters, digits, "-", "_" and "." (the _meta key naming rules of
// revision 2026-07-28).
var extensionName = regexp.MustCompile(`^([A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z]([A-Za-z0-9-]*[A-Za-z0-9])?)*/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)

func (c *Config) validateTasks(p *problems) {
	checkDurationIn(p, "tasks.max_ttl", c.Tasks.MaxTTL, durationRange{positive: true, min: time.Second, max: MaxTaskMaxTTL})
	if c.Tasks.Enabled && c.Store == nil {
		p.add("tasks.enabled", "tasks need a store section: each task id is bound there to the caller that started it")
	}
	seen := map[string]bool{}
	for i, name := range c.Extensions.Allow {
		path := indexPath("extensions.allow", i)
		switch {
		case name == TasksExtension:
			p.add(path, "%q cannot be allowed: mcpgate does not handle the 2026-07-28 tasks extension yet (tasks.enabled covers the tasks of revision 2025-11-25)", name)
		case !extensionName.MatchString(name):
			p.add(path, "%q is not an extension identifier such as \"com.example/feature\"", name)
		case seen[name]:
			p.add(path, "%q is listed twice", name)
		}
		seen[name] = true
	}
}
