package app

import (
	"context"
	"log/slog"
	"slices"
	"sync/atomic"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
)

// newToolsets compiles the toolsets section for the pipeline and logs
// what validation tolerated (toolset tools no upstream declares, with the
// catalog off).
func newToolsets(cfg *config.Config, log *slog.Logger) (*gateway.Toolsets, error) {
	for _, w := range cfg.ToolsetWarnings() {
		log.Warn("toolset names an undeclared tool; it is never listed by the default policy", "warning", w)
	}
	var defs []gateway.ToolsetDef
	for _, r := range cfg.ResolvedToolsets() {
		defs = append(defs, gateway.ToolsetDef{Name: r.Name, Tools: r.Tools, DescriptionChars: r.DescriptionChars, Descriptions: r.Descriptions})
	}
	return gateway.NewToolsets(defs)
}

// resourceTenants are the upstreams' resource_tenant patterns.
func resourceTenants(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	for _, u := range cfg.Upstreams {
		if len(u.ResourceTenant) > 0 {
			out[u.Name] = u.ResourceTenant
		}
	}
	return out
}

// watchToolLists announces tool list changes on the clients' open
// notification streams: when a listing of the catalog changes, and every
// catalog.list_changed_check (rights at the rights source have no event).
// SIGHUP (Reload) checks every stream too.
func (a *App) watchToolLists(ctx context.Context) {
	if a.catalog == nil {
		return
	}
	p := a.Pipeline
	a.catalog.onChange.Store(&p)
	if d := a.cfg.Catalog.ListChangedCheck.D(); d > 0 {
		go p.WatchToolLists(ctx, d)
	}
}

// catalogChanged is the catalog's OnChange hook: the pipeline set by
// watchToolLists rechecks the upstream's streams.
type catalogChanged struct {
	atomic.Pointer[*gateway.Pipeline]
}

func (c *catalogChanged) fire(upstream string) {
	if p := c.Load(); p != nil {
		(*p).ToolsChanged(upstream)
	}
}

// sortedKeys returns the names of the toolsets section, sorted.
func sortedKeys(m map[string]config.Toolset) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
