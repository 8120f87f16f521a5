package app

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/policy"
)

// configSource is where a reload reads the configuration from: the file
// `mcpgate serve --config` loaded, and the command-line overrides that
// were applied to it (they apply again, so that a flag never shows up as a
// change).
type configSource struct {
	mu     sync.Mutex // serialises config reloads
	path   string
	adjust func(*config.Config) error
	count  *prometheus.CounterVec // mcpgate_config_reloads_total{result}
}

// newConfigReloads registers mcpgate_config_reloads_total.
func newConfigReloads(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_config_reloads_total",
		Help: "Reloads of the configuration file (SIGHUP), by result: success (the file is valid; its run-time settings apply) or failure (nothing changed).",
	}, []string{"result"})
	reg.MustRegister(c)
	c.WithLabelValues("success")
	c.WithLabelValues("failure")
	return c
}

// SetConfigFile makes Reload (SIGHUP) read the configuration file at path
// again. adjust, if set, applies the command-line overrides to each newly
// loaded (and validated) configuration, and validates the result again
// when the overrides need it; its error fails the reload. Without a call,
// Reload leaves the configuration alone (one-line mode, the demo).
func (a *App) SetConfigFile(path string, adjust func(*config.Config) error) {
	a.cfgSrc.mu.Lock()
	defer a.cfgSrc.mu.Unlock()
	a.cfgSrc.path, a.cfgSrc.adjust = path, adjust
}

// reloadConfig rereads the configuration file and applies what may change
// at run time (hotKey). An invalid file changes nothing: every problem is
// logged and the failure counted. The settings that need a restart are
// named in one log line and keep their old values.
func (a *App) reloadConfig(ctx context.Context) error {
	src := &a.cfgSrc
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.path == "" {
		return nil
	}
	err := a.applyConfigFile(ctx, src)
	result := "success"
	if err != nil {
		result = "failure"
		for _, e := range problemsOf(err) {
			a.log.Error("configuration reload failed; keeping the running configuration", "file", src.path, "problem", e.Error())
		}
		err = fmt.Errorf("config reload: %w", err)
	}
	if src.count != nil {
		src.count.WithLabelValues(result).Inc()
	}
	return err
}

func (a *App) applyConfigFile(ctx context.Context, src *configSource) error {
	next, err := config.Load(src.path)
	if err != nil {
		return err
	}
	if src.adjust != nil {
		if err := src.adjust(next); err != nil {
			return err
		}
	}
	next = a.bridges.Resolve(next) // stdio upstreams keep their bridges (stdio.go)
	prev := a.cfg
	hot, restart := diffConfig(prev, next)
	eff := mergeHot(prev, next)
	if len(restart) > 0 {
		a.log.Warn("configuration reload: these settings need a restart and keep their running values", "keys", strings.Join(restart, ", "))
	}
	if len(hot) == 0 {
		a.log.Info("configuration reloaded; no run-time setting changed", "file", src.path)
		return nil
	}
	o, err := a.pipelineOptions(eff)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(declarations(prev), o.Declarations) {
		// The policy's data first; the pipeline's input.tool follows.
		if err := a.Engine.SetDeclarations(ctx, o.Declarations); err != nil {
			return err
		}
	}
	a.Pipeline.Reconfigure(o)
	a.cfg = eff
	a.log.Info("configuration reloaded", "file", src.path, "applied", strings.Join(hot, ", "))
	return nil
}

// pipelineOptions are the pipeline's current options with the run-time
// settings of cfg.
func (a *App) pipelineOptions(cfg *config.Config) (gateway.Options, error) {
	o := a.Pipeline.Options()
	ts, err := newToolsets(cfg, a.log) // toolsets.go
	if err != nil {
		return o, err
	}
	o.Toolsets = ts
	o.Declarations = declarations(cfg)
	o.UndeclaredTools = undeclaredTools(cfg)
	o.TenantArguments = cfg.Policy.TenantArguments
	o.SecretNames = cfg.Policy.SecretNames
	o.MaxJSONDepth = cfg.Limits.MaxJSONDepth
	o.MaxSSEEventBytes = cfg.Limits.MaxSSEEventBytes
	o.Limits = reuseLimits(o.Limits, newLimits(cfg, a.id), a.cfg.RateLimits, cfg.RateLimits)
	if o.Writes != nil {
		// A copy: exchanges in flight keep theirs. The stores, the sealer
		// and the approval page's hooks are the same.
		w := *o.Writes
		w.ReplayWindow = cfg.WriteSafety.ReplayWindow.D()
		w.ConfirmTTL = cfg.WriteSafety.ConfirmTTL.D()
		w.WaitInFlight = cfg.WriteSafety.WaitInFlight.D()
		o.Writes = &w
	}
	return o, nil
}

// reuseLimits keeps the state of the running limits in the new ones: the
// limiter (its buckets' levels; the backend needs a restart) always, and
// the concurrency slots (calls in flight) when their sizes are unchanged.
func reuseLimits(old, next *gateway.Limits, oldCfg, nextCfg config.RateLimits) *gateway.Limits {
	if old == nil || next == nil {
		return next
	}
	next.Limiter = old.Limiter
	if oldCfg.Concurrency == nextCfg.Concurrency && oldCfg.ReservedForWrites == nextCfg.ReservedForWrites {
		next.Slots = old.Slots
	}
	return next
}

// undeclaredTools are the upstreams whose undeclared tools are listed and
// confirmed (upstreams[].undeclared_tools), upstream → setting.
func undeclaredTools(cfg *config.Config) map[string]string {
	m := map[string]string{}
	for _, u := range cfg.Upstreams {
		if u.UndeclaredTools == policy.UndeclaredConfirm {
			m[u.Name] = u.UndeclaredTools
		}
	}
	return m
}

// declarations are the per-tool declarations of cfg, upstream → tool.
func declarations(cfg *config.Config) map[string]map[string]policy.ToolDeclaration {
	decls := map[string]map[string]policy.ToolDeclaration{}
	for _, u := range cfg.Upstreams {
		decls[u.Name] = u.Tools
	}
	return decls
}

// hotKeys are the configuration keys applied at run time; every other
// change needs a restart. upstreams[NAME].tools stands for every
// upstream's tools.
var hotKeys = []string{
	"upstreams[].tools", "upstreams[].undeclared_tools",
	"rate_limits.disabled", "rate_limits.buckets", "rate_limits.concurrency", "rate_limits.reserved_for_writes",
	"rate_limits.loop_brake", "rate_limits.reads_when_unavailable", "rate_limits.default_deadline",
	"write_safety.replay_window", "write_safety.confirm_ttl", "write_safety.wait_in_flight",
	"policy.secret_names", "policy.tenant_arguments",
	"toolsets",
	"limits.max_json_depth", "limits.max_sse_event_bytes",
}

// hotKey reports whether a changed key (as diffConfig names it) applies
// at run time.
func hotKey(key string) bool {
	k := key
	if strings.HasPrefix(k, "upstreams[") {
		if i := strings.Index(k, "]"); i > 0 {
			k = "upstreams[]" + k[i+1:]
		}
	}
	for _, h := range hotKeys {
		if k == h || strings.HasPrefix(k, h+".") || strings.HasPrefix(k, h+"[") {
			return true
		}
	}
	return false
}

// diffConfig lists the keys whose values differ between a and b (dotted
// YAML paths; an upstream by its name, upstreams[NAME].tools), split into
// those applied at run time and those that need a restart. Upstreams
// added, removed or reordered are one restart key, "upstreams".
func diffConfig(a, b *config.Config) (hot, restart []string) {
	var keys []string
	diffValue("", reflect.ValueOf(*a), reflect.ValueOf(*b), &keys)
	for _, k := range keys {
		if hotKey(k) {
			hot = append(hot, k)
		} else {
			restart = append(restart, k)
		}
	}
	return hot, restart
}

var durationType = reflect.TypeFor[config.Duration]()

func diffValue(key string, a, b reflect.Value, out *[]string) {
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		if t == durationType {
			break // one value: compared whole below
		}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name := yamlName(f)
			if key != "" {
				name = key + "." + name
			}
			diffValue(name, a.Field(i), b.Field(i), out)
		}
		return
	case reflect.Pointer:
		if !a.IsNil() && !b.IsNil() {
			diffValue(key, a.Elem(), b.Elem(), out)
			return
		}
	case reflect.Slice:
		if ups, ok := a.Interface().([]config.Upstream); ok {
			diffUpstreams(key, ups, b.Interface().([]config.Upstream), out)
			return
		}
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, key)
	}
}

// diffUpstreams compares upstreams by name, in order.
func diffUpstreams(key string, a, b []config.Upstream, out *[]string) {
	same := len(a) == len(b)
	for i := 0; same && i < len(a); i++ {
		same = a[i].Name == b[i].Name
	}
	if !same {
		*out = append(*out, key)
		return
	}
	for i := range a {
		diffValue(key+"["+a[i].Name+"]", reflect.ValueOf(a[i]), reflect.ValueOf(b[i]), out)
	}
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "" || name == "-" {
		return strings.ToLower(f.Name)
	}
	return name
}

// mergeHot is prev with the run-time settings of next: what runs after a
// reload. The keys that need a restart keep prev's values.
func mergeHot(prev, next *config.Config) *config.Config {
	eff := *prev
	eff.Upstreams = slices.Clone(prev.Upstreams)
	for i := range eff.Upstreams {
		for _, n := range next.Upstreams {
			if n.Name == eff.Upstreams[i].Name {
				eff.Upstreams[i].Tools = n.Tools
				eff.Upstreams[i].UndeclaredTools = n.UndeclaredTools
			}
		}
	}
	backend := prev.RateLimits.Backend
	eff.RateLimits = next.RateLimits
	eff.RateLimits.Backend = backend
	sealing := prev.WriteSafety.SealingKeysFile
	eff.WriteSafety = next.WriteSafety
	eff.WriteSafety.SealingKeysFile = sealing
	eff.Policy.SecretNames = next.Policy.SecretNames
	eff.Policy.TenantArguments = next.Policy.TenantArguments
	eff.Toolsets = next.Toolsets
	eff.Limits.MaxJSONDepth = next.Limits.MaxJSONDepth
	eff.Limits.MaxSSEEventBytes = next.Limits.MaxSSEEventBytes
	return &eff
}

// problemsOf splits a joined error into its problems.
func problemsOf(err error) []error {
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, problemsOf(e)...)
		}
		return out
	}
	return []error{err}
}
