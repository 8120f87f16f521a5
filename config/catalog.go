package config

import (
	"time"
)

// Defaults and bounds of the catalog section.
const (
	DefaultCatalogRefresh  = "5m"
	MinCatalogRefresh      = "10s"
	DefaultCatalogMaxPages = 50
	MaxCatalogMaxPages     = 1000
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
	// Disabled turns the catalog off: tools/list is forwarded and
	// filtered, arguments are not validated, nothing is pinned. `serve
	// --upstream` (the one-line mode) runs with it off.
	Disabled bool `yaml:"disabled"`
	// Refresh is how often each upstream is listed again (besides on
	// notifications/tools/list_changed and SIGHUP). Default
	// DefaultCatalogRefresh, at least MinCatalogRefresh.
	Refresh string `yaml:"refresh"`
	// MaxPages bounds the pages of one listing (an upstream whose cursor
	// never advances is an error). Default DefaultCatalogMaxPages.
	MaxPages int `yaml:"max_pages"`
	// Manifest is the pinned manifest (mcpgate manifest pin). "": pinning
	// off, every listed tool counts as approved.
	Manifest string `yaml:"manifest"`
	// Unpinned says what happens to a listed tool the manifest does not
	// pin: CatalogUnpinnedRefuse (default; hidden and refused until pinned)
	// or CatalogUnpinnedAllow. A tool whose definition differs from its
	// pin is always refused.
	Unpinned string `yaml:"unpinned"`
}

// RefreshDuration is Refresh as a time.Duration; on a value that does not
// parse it returns the default.
func (c Catalog) RefreshDuration() time.Duration { return durationOr(c.Refresh, DefaultCatalogRefresh) }

func (c *Config) applyCatalogDefaults() {
	if c.Catalog.Refresh == "" {
		c.Catalog.Refresh = DefaultCatalogRefresh
	}
	if c.Catalog.MaxPages == 0 {
		c.Catalog.MaxPages = DefaultCatalogMaxPages
	}
	if c.Catalog.Unpinned == "" {
		c.Catalog.Unpinned = CatalogUnpinnedRefuse
	}
}

func (c *Config) validateCatalog(p *problems) {
	cat := c.Catalog
	checkDurationIn(p, "catalog.refresh", cat.Refresh, durationRange{positive: true, min: MinCatalogRefresh})
	if cat.MaxPages < 1 || cat.MaxPages > MaxCatalogMaxPages {
		p.add("catalog.max_pages", "%d must be from 1 to %d", cat.MaxPages, MaxCatalogMaxPages)
	}
	// catalog.manifest may not exist yet: `mcpgate manifest pin` writes
	// it (to this path by default); serve refuses to start without it.
	if cat.Unpinned != CatalogUnpinnedRefuse && cat.Unpinned != CatalogUnpinnedAllow {
		p.add("catalog.unpinned", "%q must be %q or %q", cat.Unpinned, CatalogUnpinnedRefuse, CatalogUnpinnedAllow)
	}
}
