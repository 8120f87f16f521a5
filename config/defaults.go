package config

import (
	"log/slog"
	"net/url"
	"time"
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
	if c.Listeners.ExtProc.MessageBudget == "" {
		c.Listeners.ExtProc.MessageBudget = DefaultMessageBudget
	}
	if c.Listeners.ExtProc.MaxMessageBudget == "" {
		c.Listeners.ExtProc.MaxMessageBudget = DefaultMaxMessageBudget
	}
	if c.Listeners.ExtProc.UpstreamHeader == "" {
		c.Listeners.ExtProc.UpstreamHeader = DefaultUpstreamHeader
	}
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Route == "" {
			u.Route = DefaultRoutePath
		}
		if u.Timeout == "" {
			u.Timeout = DefaultUpstreamTimeout
		}
		if u.Audience == "" {
			u.Audience = defaultAudience(*u)
		}
	}
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
	if c.Limits.ReadHeaderTimeout == "" {
		c.Limits.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.Limits.ReadTimeout == "" {
		c.Limits.ReadTimeout = DefaultReadTimeout
	}
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
}

// Default returns the built-in configuration of the one-line mode
// `mcpgate serve --upstream URL`: one upstream named "default" at
// upstreamURL, served on route /mcp, every other key at its default (no
// tool declarations, the embedded default policy). It does not validate:
// call Validate, which reports a bad URL.
func Default(upstreamURL string) *Config {
	// No tool is declared in this mode and the upstream is anything: the
	// catalog (schema validation, pinning) is off.
	c := &Config{Upstreams: []Upstream{{Name: DefaultUpstreamName, URL: upstreamURL}}, Catalog: Catalog{Disabled: true}}
	c.ApplyDefaults()
	return c
}

// ReadHeaderTimeoutDuration is ReadHeaderTimeout as a time.Duration; 0
// means no timeout. On a value that does not parse (only possible on a
// configuration that failed Validate) it returns the default.
func (l Limits) ReadHeaderTimeoutDuration() time.Duration {
	return durationOr(l.ReadHeaderTimeout, DefaultReadHeaderTimeout)
}

// ReadTimeoutDuration is ReadTimeout as a time.Duration; 0 means no
// timeout. On a value that does not parse it returns the default.
func (l Limits) ReadTimeoutDuration() time.Duration {
	return durationOr(l.ReadTimeout, DefaultReadTimeout)
}

// MessageBudgetDuration is MessageBudget as a time.Duration; on a value
// that does not parse it returns the default.
func (e ExtProcListener) MessageBudgetDuration() time.Duration {
	return durationOr(e.MessageBudget, DefaultMessageBudget)
}

// MaxMessageBudgetDuration is MaxMessageBudget as a time.Duration; 0
// means never extend. On a value that does not parse it returns the
// default.
func (e ExtProcListener) MaxMessageBudgetDuration() time.Duration {
	return durationOr(e.MaxMessageBudget, DefaultMaxMessageBudget)
}

// TimeoutDuration is Timeout as a time.Duration; 0 means no timeout. On a
// value that does not parse it returns the default.
func (u Upstream) TimeoutDuration() time.Duration {
	return durationOr(u.Timeout, DefaultUpstreamTimeout)
}

// WatchEnabled reports whether policy files are watched for changes:
// Watch, or true when it is unset.
func (p Policy) WatchEnabled() bool {
	return p.Watch == nil || *p.Watch
}

func durationOr(s, def string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return d
	}
	d, _ := time.ParseDuration(def)
	return d
}

// LogValue implements slog.LogValuer: an upstream logs as its name, route
// and URL with any password in the URL redacted.
func (u Upstream) LogValue() slog.Value {
	redacted := "(invalid URL)" // an unparsable URL might hide a password
	if parsed, err := url.Parse(u.URL); err == nil {
		redacted = parsed.Redacted()
	}
	return slog.GroupValue(
		slog.String("name", u.Name),
		slog.String("route", u.Route),
		slog.String("url", redacted),
	)
}
