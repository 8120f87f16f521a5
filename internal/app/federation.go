package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/policy"
)

// memberItemsTTL is how long a member's prompts, resources and
// capabilities are reused before they are listed again (catalog.refresh
// when shorter: they are listed as often as the tools); a failed listing
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
			g.Members = append(g.Members, gateway.Member{Upstream: m.Upstream, Prefix: m.Prefix}) // unprefixed: ""
		}
		out = append(out, g)
	}
	return out
}

// members is the pipeline's MemberLister, nil without servers.
func (a *App) members(cfg *config.Config, id *identity, creds *upstreamCredentials, log *slog.Logger) gateway.MemberLister {
	if l := newMemberLister(cfg, catalogUpstreams(cfg, id, creds), log); l != nil {
		a.memberLists = l
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
	// ttl, retry, stale and wait are memberItemsTTL, memberRetry,
	// memberStale and memberWait (shorter in tests).
	ttl, retry, stale, wait time.Duration
}

type memberEntry struct {
	mu      sync.Mutex
	items   *catalog.Items // the last good listing
	good    time.Time      // when items was listed
	err     error          // why the last listing failed (nil: it did not)
	tried   time.Time      // when the last listing ended
	listing chan struct{}  // closed when the running listing ends; nil when none runs
}

// memberStale is how long the last good listing of a member that fails to
// list again is still served; memberWait bounds a list request's wait
// for a member's first listing.
const (
	memberStale = 10 * memberItemsTTL
	memberWait  = 3 * time.Second
)

var _ gateway.MemberLister = (*memberLister)(nil)

func newMemberLister(cfg *config.Config, ups []catalog.Upstream, log *slog.Logger) *memberLister {
	if len(cfg.Servers) == 0 {
		return nil
	}
	l := &memberLister{ups: map[string]catalog.Upstream{}, log: log, by: map[string]*memberEntry{},
		ttl: memberItemsTTL, retry: memberRetry, stale: memberStale, wait: memberWait}
	if r := cfg.Catalog.Refresh.D(); r > 0 && r < l.ttl {
		l.ttl = r
	}
	for _, u := range ups {
		if _, member := cfg.MemberOf(u.Name); member {
			l.ups[u.Name] = u
			l.by[u.Name] = &memberEntry{}
		}
	}
	return l
}

// warm lists every member once in the background (at start, after the
// listeners: a member may verify mcpgate's assertions with its JWKS).
func (l *memberLister) warm() {
	for name := range l.by {
		go func() { _, _ = l.get(context.Background(), name) }()
	}
}

// get returns the member's items: the last good listing while it is
// fresh, or while a new listing runs or fails (for up to memberStale);
// at most one listing runs per member, in the background, and a request
// waits for a member's first listing at most memberWait. A member that
// cannot be listed is retried after memberRetry.
func (l *memberLister) get(ctx context.Context, upstream string) (*catalog.Items, error) {
	e := l.by[upstream]
	u, ok := l.ups[upstream]
	if e == nil || !ok {
		return nil, fmt.Errorf("%q is not a member of a server", upstream)
	}
	e.mu.Lock()
	now := time.Now()
	fresh := e.items != nil && now.Sub(e.good) < l.ttl
	if !fresh && e.listing == nil && (e.tried.IsZero() || now.Sub(e.tried) >= l.retry) {
		e.listing = make(chan struct{})
		go l.list(upstream, u, e)
	}
	items, good, err, wait := e.items, e.good, e.err, e.listing
	e.mu.Unlock()
	switch {
	case items != nil && now.Sub(good) < l.stale:
		return items, nil
	case wait == nil && err != nil:
		return nil, err
	case wait == nil:
		return nil, errors.New("not listed yet")
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case <-wait:
	case <-t.C:
		return nil, errors.New("not listed yet")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.items != nil && time.Since(e.good) < l.stale {
		return e.items, nil
	}
	if e.err != nil {
		return nil, e.err
	}
	return nil, errors.New("not listed yet")
}

// list lists the member's items once (get) and records the outcome.
func (l *memberLister) list(upstream string, u catalog.Upstream, e *memberEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	items, err := catalog.ListItems(ctx, u, catalog.ListOptions{Timeout: 10 * time.Second})
	if err != nil {
		l.log.Warn("a member's prompts and resources could not be listed; they are left out of the server's lists", "upstream", upstream, "error", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.items, e.good = items, time.Now()
	}
	e.err, e.tried = err, time.Now()
	close(e.listing)
	e.listing = nil
}

// last is the member's last good listing, nil when none (or l is nil);
// it never lists.
func (l *memberLister) last(upstream string) *catalog.Items {
	if l == nil || l.by[upstream] == nil {
		return nil
	}
	e := l.by[upstream]
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.items
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
// listed (down, or not listed yet) or whose latest listing failed (down
// since: their last listed tools stay, and calls to them fail with the
// upstream's error): /readyz names them and
// mcpgate_federation_members_ready is 0 for them.
func membersMissing(cfg *config.Config, cat gateway.ToolCatalog) map[string][]string {
	out := map[string][]string{}
	failing, _ := cat.(gateway.ListingFailures)
	for _, s := range cfg.Servers {
		for _, m := range s.Members {
			if cat == nil {
				continue
			}
			if _, loaded := cat.Tools(m.Upstream); !loaded || failing != nil && failing.Failing(m.Upstream) {
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
	return "federation members not available (down or not listed yet): " + strings.Join(parts, "; ")
}

// federationCollector reports mcpgate_federation_members_ready and
// mcpgate_federation_hidden_names on scrape.
type federationCollector struct {
	cfg          *config.Config
	cat          gateway.ToolCatalog
	lists        *memberLister // nil in tests without one
	desc, hidden *prometheus.Desc
}

func newFederationCollector(cfg *config.Config, cat gateway.ToolCatalog, lists *memberLister) *federationCollector {
	return &federationCollector{cfg: cfg, cat: cat, lists: lists,
		desc: prometheus.NewDesc("mcpgate_federation_members_ready",
			"Whether a member upstream of a virtual server (servers[]) answered its latest tool listing (1) or is down or not listed yet (0): a member never listed has its tools, prompts and resources left out of the server's lists; one that failed since keeps its last listed tools, and calls to it fail with the upstream's error.",
			[]string{"server", "upstream"}, nil),
		hidden: prometheus.NewDesc("mcpgate_federation_hidden_names",
			"Tools, prompts and resources (kind) of a virtual server's unprefixed member whose names start with another member's prefix, in the latest listings: they resolve to that member, so they are neither listed nor callable.",
			[]string{"server", "upstream", "kind"}, nil)}
}

func (c *federationCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.hidden }

func (c *federationCollector) Collect(ch chan<- prometheus.Metric) {
	missing := membersMissing(c.cfg, c.cat)
	for _, s := range c.cfg.Servers {
		for _, m := range s.Members {
			v := 1.0
			if slices.Contains(missing[s.Name], m.Upstream) {
				v = 0
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, s.Name, m.Upstream)
			if m.Unprefixed {
				for kind, n := range c.hiddenNames(s, m.Upstream) {
					ch <- prometheus.MustNewConstMetric(c.hidden, prometheus.GaugeValue, float64(n), s.Name, m.Upstream, kind)
				}
			}
		}
	}
}

// hiddenNames counts, by kind (tool, prompt, resource, resource_template),
// the names of s's unprefixed member upstream another member's prefix
// hides (config.Server.ShadowedBy), in the catalog's and the member
// lister's latest listings.
func (c *federationCollector) hiddenNames(s config.Server, upstream string) map[string]int {
	out := map[string]int{"tool": 0, "prompt": 0, "resource": 0, "resource_template": 0}
	var decls map[string]policy.ToolDeclaration
	if k := slices.IndexFunc(c.cfg.Upstreams, func(u config.Upstream) bool { return u.Name == upstream }); k >= 0 {
		decls = c.cfg.Upstreams[k].Tools
	}
	if c.cat != nil {
		tools, _ := c.cat.Tools(upstream)
		for _, t := range tools {
			name := t.Name
			if d, ok := decls[name]; ok && d.Expose != nil && d.Expose.Name != "" {
				name = d.Expose.Name
			}
			if s.ShadowedBy(name, config.FederationSeparator) != "" {
				out["tool"]++
			}
		}
	}
	if it := c.lists.last(upstream); it != nil {
		count := func(kind, key, sep string, items []jsontext.Value) {
			for _, v := range items {
				var named map[string]any
				if json.Unmarshal(v, &named) != nil {
					continue
				}
				if n, _ := named[key].(string); s.ShadowedBy(n, sep) != "" {
					out[kind]++
				}
			}
		}
		count("prompt", "name", config.FederationSeparator, it.Prompts)
		count("resource", "uri", config.FederationURISeparator, it.Resources)
		count("resource_template", "uriTemplate", config.FederationURISeparator, it.ResourceTemplates)
	}
	return out
}

// memberSessionIdle is how long a member session of a client session
// mcpgate terminates lives unused before it is forgotten (and closed).
const memberSessionIdle = 30 * time.Minute

// memberSessions implements gateway.MemberSessions over HTTP: one
// upstream session per (client session, member), opened by mcpgate with
// initialize and notifications/initialized, closed with DELETE.
type memberSessions struct {
	urls map[string]string // member upstream → its MCP endpoint
	hc   *http.Client
	log  *slog.Logger
	mu   sync.Mutex
	by   map[memberKey]*memberSession
}

type memberKey struct{ client, upstream string }

type memberSession struct {
	mu     sync.Mutex // held while opening: one opening per member session
	id     string
	agreed string
	used   time.Time
}

var _ gateway.MemberSessions = (*memberSessions)(nil)

func newMemberSessions(cfg *config.Config, log *slog.Logger) *memberSessions {
	if len(cfg.Servers) == 0 {
		return nil
	}
	s := &memberSessions{urls: map[string]string{}, hc: &http.Client{Timeout: 30 * time.Second}, log: log, by: map[memberKey]*memberSession{}}
	for _, u := range cfg.Upstreams {
		if _, member := cfg.MemberOf(u.Name); member {
			s.urls[u.Name] = u.URL
		}
	}
	return s
}

// entry returns the member session record of k, made on first use; idle
// records are swept on the way.
func (s *memberSessions) entry(k memberKey) *memberSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for key, e := range s.by {
		if e.mu.TryLock() {
			if now.Sub(e.used) > memberSessionIdle {
				delete(s.by, key)
			}
			e.mu.Unlock()
		}
	}
	e := s.by[k]
	if e == nil {
		e = &memberSession{used: now}
		s.by[k] = e
	}
	return e
}

// Session implements gateway.MemberSessions.
func (s *memberSessions) Session(ctx context.Context, key, upstream, version string, header mcp.Header) (string, string, error) {
	url, ok := s.urls[upstream]
	if !ok {
		return "", "", fmt.Errorf("%q is not a member of a server", upstream)
	}
	e := s.entry(memberKey{key, upstream})
	e.mu.Lock()
	defer e.mu.Unlock()
	e.used = time.Now()
	if e.id != "" {
		return e.id, e.agreed, nil
	}
	id, agreed, err := s.open(ctx, url, version, header)
	if err != nil {
		return "", "", err
	}
	e.id, e.agreed = id, agreed
	return id, agreed, nil
}

// open initialises a session with the member at url.
func (s *memberSessions) open(ctx context.Context, url, version string, header mcp.Header) (string, string, error) {
	init := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":%q,"capabilities":{},"clientInfo":{"name":%q,"version":"1"}}}`, version, catalog.ClientName)
	resp, body, err := s.post(ctx, url, header, "", version, init)
	if err != nil {
		return "", "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("initialize: HTTP %d", resp.StatusCode)
	}
	id := resp.Header.Get(gateway.SessionHeader)
	var result struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if err := json.Unmarshal(lastJSON(body), &result); err != nil || result.Result.ProtocolVersion == "" {
		return "", "", fmt.Errorf("initialize: no result in the answer")
	}
	agreed := result.Result.ProtocolVersion
	if resp, _, err = s.post(ctx, url, header, id, agreed, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return "", "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", "", fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return id, agreed, nil
}

// post sends one JSON-RPC message to a member with header's fields (the
// forwarded request's assertion and credential) and returns the whole
// answer.
func (s *memberSessions) post(ctx context.Context, url string, header mcp.Header, session, version, body string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[http.CanonicalHeaderKey(k)] = v
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", version)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, b, err
}

// lastJSON is a JSON answer, or the data of the last event of an SSE
// answer.
func lastJSON(body []byte) []byte {
	out := body
	for line := range strings.Lines(string(body)) {
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data:"); ok {
			out = []byte(strings.TrimSpace(d))
		}
	}
	return out
}

// Reset implements gateway.MemberSessions.
func (s *memberSessions) Reset(key, upstream, id string) {
	e := s.entry(memberKey{key, upstream})
	e.mu.Lock()
	if e.id == id {
		e.id, e.agreed = "", ""
	}
	e.mu.Unlock()
}

// Close implements gateway.MemberSessions.
func (s *memberSessions) Close(ctx context.Context, key string) {
	s.mu.Lock()
	var ended []memberKey
	for k := range s.by {
		if k.client == key {
			ended = append(ended, k)
		}
	}
	entries := make([]*memberSession, len(ended))
	for i, k := range ended {
		entries[i] = s.by[k]
		delete(s.by, k)
	}
	s.mu.Unlock()
	for i, e := range entries {
		e.mu.Lock()
		id := e.id
		e.mu.Unlock()
		if id == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, "DELETE", s.urls[ended[i].upstream], nil)
		if err != nil {
			continue
		}
		req.Header.Set("Mcp-Session-Id", id)
		if resp, err := s.hc.Do(req); err == nil {
			resp.Body.Close()
		} else {
			s.log.Debug("a member session could not be closed; it expires on the member", "upstream", ended[i].upstream, "error", err)
		}
	}
}

// memberSessionsOf is the pipeline's MemberSessions, nil without servers.
func memberSessionsOf(cfg *config.Config, log *slog.Logger) gateway.MemberSessions {
	if s := newMemberSessions(cfg, log); s != nil {
		return s
	}
	return nil
}

// logServers says at start which route fronts which members under which
// prefixes: the names clients will see.
func logServers(cfg *config.Config, log *slog.Logger) {
	for _, s := range cfg.Servers {
		var members []string
		for _, m := range s.Members {
			if m.Unprefixed {
				members = append(members, fmt.Sprintf("%s (names and URIs as it lists them, unless they start with another member's prefix)", m.Upstream))
				continue
			}
			members = append(members, fmt.Sprintf("%s (%s_<tool>, %s+<uri>)", m.Upstream, m.Prefix, m.Prefix))
		}
		log.Info("virtual server: one route in front of several upstreams", "server", s.Name, "route", s.Route, "members", strings.Join(members, ", "))
	}
	for _, w := range cfg.FederationWarnings() {
		log.Warn("a declared tool of an unprefixed member is hidden by another member's prefix", "warning", w)
	}
}
