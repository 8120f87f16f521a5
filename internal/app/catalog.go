package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// toolCatalog is the pipeline's view (gateway.ToolCatalog) of the catalog
// and the pinned manifest: each snapshot is converted once, with every
// tool's pinning state, and read lock-free afterwards.
type toolCatalog struct {
	c              *catalog.Catalog
	manifestPath   string
	manifest       atomic.Pointer[catalog.Manifest]
	refuseUnpinned bool
	views          sync.Map // upstream → *catalogView
	// onChange announces changed listings on clients' streams (toolsets.go).
	onChange catalogChanged
}

type catalogView struct {
	snap  *catalog.Snapshot
	man   *catalog.Manifest
	tools []gateway.CatalogTool
	index map[string]int
}

var _ gateway.ToolCatalog = (*toolCatalog)(nil)

// catalogUpstreams are the upstreams of cfg as the catalog lists them:
// with the upstream's own credential as calls carry it (or its discovery
// credential) and mcpgate's own identity (an assertion for the catalog's
// principal when assertions are signed).
func catalogUpstreams(cfg *config.Config, id *identity, creds *upstreamCredentials) []catalog.Upstream {
	var ups []catalog.Upstream
	for _, u := range cfg.Upstreams {
		up := catalog.Upstream{Name: u.Name, URL: u.URL}
		// The upstream's own credential, as calls carry it (or its
		// discovery credential), beside the assertion.
		cred := creds.catalogHeader(u.Name)
		if id.signer != nil {
			aud := id.audiences[u.Name]
			up.Header = func(ctx context.Context) (http.Header, error) {
				tok, err := id.signer.Sign(assertion.Identity{Tenant: catalog.Tenant, Subject: catalog.Subject,
					Connection: catalog.Connection, CredentialKind: catalog.CredentialKind}, aud)
				if err != nil {
					return nil, err
				}
				h := http.Header{}
				if cred != nil {
					if h, err = cred(ctx); err != nil {
						return nil, err
					}
				}
				h.Set(assertion.Header, tok)
				return h, nil
			}
		} else if cred != nil {
			up.Header = cred
		}
		ups = append(ups, up)
	}
	return ups
}

// newToolCatalog builds the catalog of every upstream, listed as
// catalogUpstreams says.
func newToolCatalog(cfg *config.Config, id *identity, creds *upstreamCredentials, log *slog.Logger, reg prometheus.Registerer) (*toolCatalog, error) {
	tc := &toolCatalog{manifestPath: cfg.Catalog.Manifest, refuseUnpinned: cfg.Catalog.Unpinned == config.CatalogUnpinnedRefuse}
	if err := tc.loadManifest(); err != nil {
		return nil, err
	}
	ups := catalogUpstreams(cfg, id, creds)
	c, err := catalog.New(catalog.Options{
		Upstreams:  ups,
		Refresh:    cfg.Catalog.Refresh.D(),
		MaxPages:   cfg.Catalog.MaxPages,
		Logger:     log,
		Registerer: reg,
		Manifest:   tc.manifest.Load,
		OnChange:   func(upstream string, _, _ *catalog.Snapshot) { tc.onChange.fire(upstream) },
		OnDrift: func(d catalog.Drift) {
			id.audit(context.Background(), store.AuditRecord{Channel: "catalog", Action: "tool_" + string(d.State),
				Outcome: string(d.State), PublicIDs: map[string]string{"upstream": d.Upstream, "tool": d.Tool, "hash": d.Hash, "pinned_hash": d.PinnedHash}})
		},
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	tc.c = c
	return tc, nil
}

// loadManifest reads catalog.manifest (start and SIGHUP); a file that
// cannot be read keeps the manifest in use.
func (tc *toolCatalog) loadManifest() error {
	if tc.manifestPath == "" {
		return nil
	}
	m, err := catalog.LoadManifest(tc.manifestPath)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("catalog manifest %s does not exist: write it with `mcpgate manifest pin --config <this file>` after reviewing the upstreams' tools: %w", tc.manifestPath, err)
	}
	if err != nil {
		return fmt.Errorf("catalog manifest: %w", err)
	}
	tc.manifest.Store(m)
	return nil
}

// reload rereads the manifest and lists every upstream again (SIGHUP).
func (tc *toolCatalog) reload(ctx context.Context, cfg *config.Config, log *slog.Logger) error {
	if tc == nil {
		return nil
	}
	err := tc.loadManifest()
	if err != nil {
		log.ErrorContext(ctx, "catalog manifest reload failed; the previous manifest stays in force", "error", err)
	}
	for _, u := range cfg.Upstreams {
		if rerr := tc.c.Refresh(ctx, u.Name); rerr != nil {
			log.WarnContext(ctx, "catalog refresh failed; the previous listing stays in use", "upstream", u.Name, "error", rerr)
		}
	}
	return err
}

func (tc *toolCatalog) view(upstream string) *catalogView {
	snap := tc.c.Snapshot(upstream)
	if snap == nil {
		return nil
	}
	man := tc.manifest.Load()
	if v, ok := tc.views.Load(upstream); ok {
		if cv := v.(*catalogView); cv.snap == snap && cv.man == man {
			return cv
		}
	}
	cv := &catalogView{snap: snap, man: man, tools: make([]gateway.CatalogTool, len(snap.Tools)), index: make(map[string]int, len(snap.Tools))}
	for i := range snap.Tools {
		t := &snap.Tools[i]
		state := policy.CatalogApproved
		if man != nil {
			switch man.State(upstream, t) {
			case catalog.StateChanged:
				state = policy.CatalogChanged
			case catalog.StateUnpinned:
				if tc.refuseUnpinned {
					state = policy.CatalogUnpinned
				}
			}
		}
		cv.tools[i] = gateway.CatalogTool{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Hash: t.Hash, State: state}
		cv.index[t.Name] = i
	}
	tc.views.Store(upstream, cv)
	return cv
}

// Tools implements gateway.ToolCatalog.
func (tc *toolCatalog) Tools(upstream string) ([]gateway.CatalogTool, bool) {
	cv := tc.view(upstream)
	if cv == nil {
		return nil, false
	}
	return cv.tools, true
}

// Failing reports whether the latest listing of upstream failed.
func (tc *toolCatalog) Failing(upstream string) bool { return tc.c.Failing(upstream) }

// Tool implements gateway.ToolCatalog.
func (tc *toolCatalog) Tool(upstream, name string) (gateway.CatalogTool, bool, bool) {
	cv := tc.view(upstream)
	if cv == nil {
		return gateway.CatalogTool{}, false, false
	}
	i, ok := cv.index[name]
	if !ok {
		return gateway.CatalogTool{}, false, true
	}
	return cv.tools[i], true, true
}

// firstListingTimeout bounds the wait, at start, for the first listing of
// the upstreams: an upstream that is down then does not hold up the start
// (its calls are answered 503 until it has been listed).
const firstListingTimeout = 10 * time.Second

// firstListing lists every upstream once, in parallel, before the gateway
// reports ready, so that the first calls do not meet an empty catalog.
func (tc *toolCatalog) firstListing(ctx context.Context, cfg *config.Config, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, firstListingTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, u := range cfg.Upstreams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := tc.c.Refresh(ctx, u.Name); err != nil {
				log.Warn("the upstream's tools could not be listed at start; its calls are refused (503) until they are", "upstream", u.Name, "error", err)
			}
		}()
	}
	wg.Wait()
}

// refreshSoon lists an upstream again after it announced a change
// (gateway.Options.OnToolsChanged); it does not block the relay.
func (tc *toolCatalog) refreshSoon(log *slog.Logger) func(string) {
	return func(upstream string) {
		go func() {
			if err := tc.c.Refresh(context.Background(), upstream); err != nil && !errors.Is(err, context.Canceled) {
				log.Warn("catalog refresh after tools/list_changed failed", "upstream", upstream, "error", err)
			}
		}()
	}
}
