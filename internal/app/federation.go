package app

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/catalog"
)

// memberItemsTTL is how long a member's prompts, resources and
// capabilities are reused before they are listed again; a failed listing
// is retried after memberRetry.
const (
	memberItemsTTL = 30 * time.Second
	memberRetry    = 2 * time.Second
)

// federationServers are cfg's virtual servers as the pipeline takes them.
func federationServers(cfg *config.Config) []gateway.Server {
	var out []gateway.Server
	for _, s := range cfg.Servers {
		g := gateway.Server{Name: s.Name}
		for _, m := range s.Members {
			g.Members = append(g.Members, gateway.Member{Upstream: m.Upstream, Prefix: m.Prefix})
		}
		out = append(out, g)
	}
	return out
}

// members is the pipeline's MemberLister, nil without servers.
func members(cfg *config.Config, id *identity, creds *upstreamCredentials, log *slog.Logger) gateway.MemberLister {
	if l := newMemberLister(cfg, catalogUpstreams(cfg, id, creds), log); l != nil {
		return l
	}
	return nil
}

// memberLister implements gateway.MemberLister: each member's items are
// listed with the catalog's client and identity (catalogUpstreams), at
// most one listing per member at a time, and reused for memberItemsTTL.
type memberLister struct {
	ups map[string]catalog.Upstream
	log *slog.Logger
	by  map[string]*memberEntry
}

type memberEntry struct {
	mu    sync.Mutex // held while listing: one listing per member
	items *catalog.Items
	err   error
	at    time.Time
}

var _ gateway.MemberLister = (*memberLister)(nil)

func newMemberLister(cfg *config.Config, ups []catalog.Upstream, log *slog.Logger) *memberLister {
	if len(cfg.Servers) == 0 {
		return nil
	}
	l := &memberLister{ups: map[string]catalog.Upstream{}, log: log, by: map[string]*memberEntry{}}
	for _, u := range ups {
		if _, member := cfg.MemberOf(u.Name); member {
			l.ups[u.Name] = u
			l.by[u.Name] = &memberEntry{}
		}
	}
	return l
}

func (l *memberLister) get(ctx context.Context, upstream string) (*catalog.Items, error) {
	e := l.by[upstream]
	u, ok := l.ups[upstream]
	if e == nil || !ok {
		return nil, fmt.Errorf("%q is not a member of a server", upstream)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ttl := memberItemsTTL
	if e.err != nil {
		ttl = memberRetry
	}
	if !e.at.IsZero() && time.Since(e.at) < ttl {
		return e.items, e.err
	}
	items, err := catalog.ListItems(ctx, u, catalog.ListOptions{Timeout: 10 * time.Second})
	if err != nil {
		l.log.Warn("a member's prompts and resources could not be listed; they are left out of the server's lists", "upstream", upstream, "error", err)
		if e.items != nil && time.Since(e.at) < 10*memberItemsTTL {
			// Keep serving the last good listing for a while.
			return e.items, nil
		}
	}
	e.items, e.err, e.at = items, err, time.Now()
	return items, err
}

// Items implements gateway.MemberLister.
func (l *memberLister) Items(ctx context.Context, upstream, kind string) ([]jsontext.Value, error) {
	it, err := l.get(ctx, upstream)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "prompts":
		return it.Prompts, nil
	case "resources":
		return it.Resources, nil
	case "resourceTemplates":
		return it.ResourceTemplates, nil
	}
	return nil, fmt.Errorf("unknown list %q", kind)
}

// Capabilities implements gateway.MemberLister.
func (l *memberLister) Capabilities(ctx context.Context, upstream string) (jsontext.Value, bool) {
	it, err := l.get(ctx, upstream)
	if err != nil || it == nil {
		return nil, false
	}
	return it.Capabilities, true
}

// membersMissing lists, per server, the members whose tools have not been
// listed (down, or not listed yet): /readyz names them and
// mcpgate_federation_members_ready is 0 for them.
func membersMissing(cfg *config.Config, cat gateway.ToolCatalog) map[string][]string {
	out := map[string][]string{}
	for _, s := range cfg.Servers {
		for _, m := range s.Members {
			if cat == nil {
				continue
			}
			if _, loaded := cat.Tools(m.Upstream); !loaded {
				out[s.Name] = append(out[s.Name], m.Upstream)
			}
		}
	}
	return out
}

// missingText is the /readyz line of membersMissing's answer, "" when
// every member is listed.
func missingText(missing map[string][]string) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(missing)) {
		parts = append(parts, fmt.Sprintf("server %s: %s", s, strings.Join(missing[s], ", ")))
	}
	if len(parts) == 0 {
		return ""
	}
	return "federation members not available (their tools are left out): " + strings.Join(parts, "; ")
}

// federationCollector reports mcpgate_federation_members_ready on scrape.
type federationCollector struct {
	cfg  *config.Config
	cat  gateway.ToolCatalog
	desc *prometheus.Desc
}

func newFederationCollector(cfg *config.Config, cat gateway.ToolCatalog) *federationCollector {
	return &federationCollector{cfg: cfg, cat: cat, desc: prometheus.NewDesc("mcpgate_federation_members_ready",
		"Whether a member upstream of a virtual server (servers[]) has its tools listed (1) or is down or not listed yet (0): its tools, prompts and resources are then left out of the server's lists.",
		[]string{"server", "upstream"}, nil)}
}

func (c *federationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *federationCollector) Collect(ch chan<- prometheus.Metric) {
	missing := membersMissing(c.cfg, c.cat)
	for _, s := range c.cfg.Servers {
		for _, m := range s.Members {
			v := 1.0
			if slices.Contains(missing[s.Name], m.Upstream) {
				v = 0
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.Name, m.Upstream)
		}
	}
}
