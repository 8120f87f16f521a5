package config

import (
	"time"
)

// Defaults and bounds of the catalog section.
const (
	DefaultCatalogRefresh  = 5 * time.Minute
	MinCatalogRefresh      = 10 * time.Second
	DefaultCatalogMaxPages = 50
	// DefaultListChangedCheck is catalog.list_changed_check.
	DefaultListChangedCheck = 10 * time.Second
	// MinListChangedCheck bounds catalog.list_changed_check from below
	// (0s turns the periodic check off).
	MinListChangedCheck = 100 * time.Millisecond
	MaxCatalogMaxPages  = 1000
	// CatalogUnpinnedRefuse and CatalogUnpinnedAllow are the values of
	// catalog.unpinned.
	CatalogUnpinnedRefuse = "refuse"
	CatalogUnpinnedAllow  = "allow"
)

// Catalog configures mcpgate's own listing of each upstream's tools (the
// catalog): tools/list is answered from it, tools/call arguments are
// validated against the listed inputSchema, and a pinned manifest hides a
// tool whose definition changed after approval (rug-pull protection).
type Catalog struct {
	// Turn the catalog off: `tools/list` is forwarded and filtered,
	// arguments are not validated against the schema, nothing is pinned.
	// `serve --upstream` runs with it off.
	Disabled bool `yaml:"disabled"`
	// How often each upstream is listed again (also on
	// `notifications/tools/list_changed` seen from it, and on `SIGHUP`). At
	// least `10s`.
	Refresh Duration `yaml:"refresh"`
	// Bound on the pages of one listing; an upstream whose cursor never
	// advances or that needs more pages fails the listing (the previous
	// catalog stays). From 1 to 1000.
	MaxPages int `yaml:"max_pages"`
	// The pinned manifest written by `mcpgate manifest pin`; reread on
	// `SIGHUP`. A listed tool whose definition hash differs from its pin is
	// hidden and refused (`tool_changed`) until pinned again. `mcpgate
	// manifest pin --config F` writes it here by default; `serve` refuses to
	// start while it does not exist. Relative to the configuration file.
	//
	// Default: none: pinning off.
	Manifest string `yaml:"manifest"`
	// What happens to a listed tool the manifest does not pin: `refuse`
	// hides and refuses it (`tool_not_approved`) until pinned; `allow`
	// lists it. Only with `catalog.manifest`.
	Unpinned string `yaml:"unpinned"`
	// How often every open notification stream (`subscriptions/listen`
	// asking for `toolsListChanged`, older revisions' GET streams) is
	// checked for a change of the tools its principal sees that has no event
	// of its own (rights changed at the rights source, a token changed);
	// `notifications/tools/list_changed` is then sent on it. Catalog
	// listings that change, `SIGHUP` (manifest) and policy reloads are
	// checked at once besides. `0s`: only those; else at least `100ms`.
	ListChangedCheck Duration `yaml:"list_changed_check"`
}

func (c *Config) applyCatalogDefaults() {
	c.Catalog.Refresh.orDefault(DefaultCatalogRefresh)
	if c.Catalog.MaxPages == 0 {
		c.Catalog.MaxPages = DefaultCatalogMaxPages
	}
	if c.Catalog.Unpinned == "" {
		c.Catalog.Unpinned = CatalogUnpinnedRefuse
	}
	c.Catalog.ListChangedCheck.orDefault(DefaultListChangedCheck)
}

func (c *Config) validateCatalog(p *problems) {
	cat := c.Catalog
	checkDurationIn(p, "catalog.refresh", cat.Refresh, durationRange{positive: true, min: MinCatalogRefresh})
	if cat.MaxPages < 1 || cat.MaxPages > MaxCatalogMaxPages {
		p.add("catalog.max_pages", "%d must be from 1 to %d", cat.MaxPages, MaxCatalogMaxPages)
	}
	// catalog.manifest may not exist yet: `mcpgate manifest pin` writes
	// it (to this path by default); serve refuses to start without it.
	if !cat.ListChangedCheck.IsSet() || cat.ListChangedCheck.D() != 0 { // 0s: off
		checkDurationIn(p, "catalog.list_changed_check", cat.ListChangedCheck, durationRange{min: MinListChangedCheck})
	}
	if cat.Unpinned != CatalogUnpinnedRefuse && cat.Unpinned != CatalogUnpinnedAllow {
		p.add("catalog.unpinned", "%q must be %q or %q", cat.Unpinned, CatalogUnpinnedRefuse, CatalogUnpinnedAllow)
	}
}
