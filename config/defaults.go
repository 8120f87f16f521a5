package config

import (
	"log/slog"
	"net/url"

	"github.com/mcpgate/mcpgate/policy"
)

// DefaultUpstreamName is the name of the one upstream of Default.
const DefaultUpstreamName = "default"

// ApplyDefaults fills every unset key with its default (the Default...
// constants). Unset means the zero value: an absent key, an empty value
// (key:), "" or 0. It never overwrites a value that is set, so applying it
// twice changes nothing.
func (c *Config) ApplyDefaults() {
	if c.Listeners.Proxy.Address == "" {
		c.Listeners.Proxy.Address = DefaultProxyAddress
	}
	if c.Listeners.Admin.Address == "" {
		c.Listeners.Admin.Address = DefaultAdminAddress
	}
	c.Listeners.ExtProc.MessageBudget.orDefault(DefaultMessageBudget)
	c.Listeners.ExtProc.MaxMessageBudget.orDefault(DefaultMaxMessageBudget)
	if c.Listeners.ExtProc.UpstreamHeader == "" {
		c.Listeners.ExtProc.UpstreamHeader = DefaultUpstreamHeader
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if _, member := c.MemberOf(u.Name); u.Route == "" && !member {
			u.Route = DefaultRoutePath
		}
		u.Timeout.orDefault(DefaultUpstreamTimeout)
		if u.UndeclaredTools == "" {
			u.UndeclaredTools = policy.UndeclaredRefuse
		}
		if u.Audience == "" {
			u.Audience = defaultAudience(*u)
		}
		applyCommandDefaults(u) // command.go
	}
	for i := range c.Servers {
		if c.Servers[i].Route == "" {
			c.Servers[i].Route = DefaultRoutePath
		}
	}
	applyCredentialDefaults(c)
	if c.Policy.Watch == nil {
		watch := true
		c.Policy.Watch = &watch
	}
	if c.Limits.MaxBodyBytes == 0 {
		c.Limits.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.Limits.MaxJSONDepth == 0 {
		c.Limits.MaxJSONDepth = DefaultMaxJSONDepth
	}
	if c.Limits.MaxSSEEventBytes == 0 {
		c.Limits.MaxSSEEventBytes = DefaultMaxSSEEventBytes
	}
	c.Limits.ReadHeaderTimeout.orDefault(DefaultReadHeaderTimeout)
	c.Limits.ReadTimeout.orDefault(DefaultReadTimeout)
	if c.Log.Format == "" {
		c.Log.Format = DefaultLogFormat
	}
	if c.Log.Level == "" {
		c.Log.Level = DefaultLogLevel
	}
	if c.Auth != nil {
		c.Auth.applyDefaults()
	}
	c.applyIdentityDefaults()
	c.applyCatalogDefaults()
	c.applyWriteDefaults()
	c.applyApprovalDefaults()
	c.Tasks.MaxTTL.orDefault(DefaultTaskMaxTTL)
}

// Default returns the built-in configuration of the one-line mode
// `mcpgate serve --upstream URL`: one upstream named "default" at
// upstreamURL, served on route /mcp, its undeclared tools listed and
// called only after a person confirms (undeclared_tools: confirm), every
// other key at its default (no tool declarations, the embedded default
// policy). Confirmation needs a store, which it leaves to the caller
// (serve puts a bolt file in a fresh temporary directory). It does not
// validate: call Validate, which reports a bad URL and a missing store.
func Default(upstreamURL string) *Config {
	// No tool is declared in this mode and the upstream is anything: the
	// catalog (schema validation, pinning) is off.
	c := &Config{Upstreams: []Upstream{{Name: DefaultUpstreamName, URL: upstreamURL, UndeclaredTools: policy.UndeclaredConfirm}}, Catalog: Catalog{Disabled: true}}
	c.ApplyDefaults()
	return c
}

// WatchEnabled reports whether policy files are watched for changes:
// Watch, or true when it is unset.
func (p Policy) WatchEnabled() bool {
	return p.Watch == nil || *p.Watch
}

// LogValue implements slog.LogValuer: an upstream logs as its name, route
// and URL with any password in the URL redacted.
func (u Upstream) LogValue() slog.Value {
	redacted := "(invalid URL)" // an unparsable URL might hide a password
	if parsed, err := url.Parse(u.URL); err == nil {
		redacted = parsed.Redacted()
	}
	if u.Command != nil {
		return slog.GroupValue(slog.String("name", u.Name), slog.String("route", u.Route), slog.Any("command", u.Command))
	}
	return slog.GroupValue(
		slog.String("name", u.Name),
		slog.String("route", u.Route),
		slog.String("url", redacted),
	)
}
