package config

import (
	"time"
)

// Defaults and bounds of the catalog section.
const (
	DefaultCatalogRefresh  = "5m"
	MinCatalogRefresh      = "10s"
	DefaultCatalogMaxPages = 50
	// DefaultListChangedCheck is catalog.list_changed_check.
	DefaultListChangedCheck = "10s"
	// MinListChangedCheck bounds catalog.list_changed_check from below
	// (0s turns the periodic check off).
	MinListChangedCheck = "100ms"
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
	// ListChangedCheck is how often mcpgate checks every open notification
	// stream (subscriptions/listen, older revisions' GET streams) for a
	// change of the tools its principal sees that has no event of its
	// own — rights changed at the rights source, a token changed — and
	// then sends notifications/tools/list_changed on it. Catalog, manifest
	// and policy changes are checked at once besides. "0s": only those.
	// Default DefaultListChangedCheck, else at least MinListChangedCheck.
	ListChangedCheck string `yaml:"list_changed_check"`
}

// ListChangedCheckDuration is ListChangedCheck as a time.Duration (0: off).
func (c Catalog) ListChangedCheckDuration() time.Duration {
	return durationOr(c.ListChangedCheck, DefaultListChangedCheck)
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
	if c.Catalog.ListChangedCheck == "" {
		c.Catalog.ListChangedCheck = DefaultListChangedCheck
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
	if d, err := time.ParseDuration(cat.ListChangedCheck); err != nil || d != 0 {
		checkDurationIn(p, "catalog.list_changed_check", cat.ListChangedCheck, durationRange{min: MinListChangedCheck})
	}
	if cat.Unpinned != CatalogUnpinnedRefuse && cat.Unpinned != CatalogUnpinnedAllow {
		p.add("catalog.unpinned", "%q must be %q or %q", cat.Unpinned, CatalogUnpinnedRefuse, CatalogUnpinnedAllow)
	}
}
