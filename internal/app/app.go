// Package app wires a loaded configuration into running listeners: the
// policy engine, the pipeline, the standalone proxy and the admin listener
// (/metrics, /healthz, /readyz). The CLI's serve and demo commands use it.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/extproc"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/internal/approval"
	"github.com/mcpgate/mcpgate/internal/killswitch"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/internal/tracing"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// App is a running gateway.
type App struct {
	Engine      *policy.Engine
	Pipeline    *gateway.Pipeline
	Registry    *prometheus.Registry
	reg         *registry // Registry, remembering what registers (metrics.go)
	ProxyAddr   string    // "" when the proxy listener is disabled
	AdminAddr   string    // "" when the admin listener is disabled
	ExtProcAddr string    // "" when the ext_proc listener is off; "unix:/path" for a socket
	// Approvals is the approval page (config approvals), nil when off;
	// the demo registers its sign-in links on it.
	Approvals *approval.Page
	// Tokens is the gateway token service, nil unless auth.gateway_tokens
	// is configured (the demo mints its tokens with it).
	Tokens *tokens.Service

	log     *slog.Logger
	cfg     *config.Config
	id      *identity
	catalog *toolCatalog // nil when catalog.disabled
	// listings are the tools each upstream listed at start, when the
	// catalog is off (undeclared.go).
	listings toolListings
	// creds are the upstreams' own credentials (credentials.go).
	creds *upstreamCredentials
	// sealing seals the requestState of approvals asked through
	// input_required (sealing.go).
	sealing *sealingKeys

	// switches keeps the kill switches fresh (killswitch.go); nil
	// without a state store.
	switches *killswitch.Watcher

	// tracer exports the pipeline's spans (config tracing); nil: off.
	tracer *tracing.Provider

	// bridges serve the stdio upstreams on loopback (stdio.go).
	bridges *Bridges

	// cfgSrc is the configuration file SIGHUP rereads (reload.go).
	cfgSrc configSource

	servers []*http.Server
	grpc    *grpcServer
	ready   atomic.Bool
	// federation reports the virtual servers' members (federation.go);
	// nil without servers.
	federation *federationCollector
	// memberLists lists the members' prompts and resources (nil
	// without servers).
	memberLists *memberLister
	wg          sync.WaitGroup
	errc        chan error
}

// maxResponseBytes bounds a buffered JSON response the pipeline inspects.
const maxResponseBytes = 64 << 20

// Start compiles the policy, builds the pipeline and starts every listener
// the configuration enables. The returned App serves until ctx ends or
// Shutdown is called.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*App, error) {
	a := &App{log: log, cfg: cfg, Registry: prometheus.NewRegistry(), errc: make(chan error, 4)}
	a.reg = &registry{Registry: a.Registry}
	a.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := gateway.NewMetrics(a.reg)
	a.cfgSrc.count = newConfigReloads(a.reg) // reload.go

	// The stdio upstreams first: their bridges' URLs stand for their
	// url in everything below (stdio.go).
	bridges, err := StartBridges(cfg, log, newStdioMetrics(a.reg))
	if err != nil {
		return nil, err
	}
	started := false
	defer func() {
		if !started {
			_ = bridges.Close(context.Background())
		}
	}()
	a.bridges = bridges
	cfg = bridges.Resolve(cfg)
	a.cfg = cfg

	decls := map[string]map[string]policy.ToolDeclaration{}
	for _, u := range cfg.Upstreams {
		decls[u.Name] = u.Tools
	}
	bundle, err := cfg.Policy.Bundle.BundleOptions() // config/policyops.go
	if err != nil {
		return nil, err
	}
	decisionLogs, err := cfg.Policy.DecisionLogs.DecisionLogOptions()
	if err != nil {
		return nil, err
	}
	shadow, err := cfg.Policy.Shadow.ShadowOptions()
	if err != nil {
		return nil, err
	}
	eng, err := policy.New(ctx, policy.Options{
		Dirs:         cfg.Policy.Dirs,
		Declarations: decls,
		Logger:       log,
		OnReload:     metrics.PolicyReloaded,
		Bundle:       bundle,
		DecisionLogs: decisionLogs,
		Shadow:       shadow,
		Registerer:   a.reg,
	})
	if err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	a.Engine = eng
	id, err := newIdentity(ctx, cfg, log, a.reg)
	if err != nil {
		return nil, err
	}
	a.id = id
	a.Tokens = id.tokens
	var authenticator gateway.Authenticator
	var metadata func(path string) ([]byte, bool)
	var asserter gateway.Asserter
	var jwks func() []byte
	var strip []string
	tenantHeader := ""
	if cfg.Auth != nil {
		an, v, err := newAuthenticator(ctx, cfg, id, log)
		if err != nil {
			id.close()
			return nil, err
		}
		authenticator, metadata = an, an.ResourceMetadata
		asserter, jwks = id, id.signer.JWKS
		if h := cfg.Auth.TenantHeader; h != "" {
			tenantHeader = strings.ToLower(h)
			strip = append(strip, tenantHeader)
		}
		if cfg.AdminAPI != nil {
			if err := id.newAdmin(cfg, v, log); err != nil {
				id.close()
				return nil, err
			}
		}
	} else {
		log.Warn("authentication is OFF: the configuration has no auth section, so every caller is anonymous and client credentials are forwarded as they are; do not expose this listener")
	}
	var sessions store.SessionStore
	if cfg.Auth != nil && id.store != nil {
		sessions = id.store
	}
	creds, err := newUpstreamCredentials(cfg, log, a.reg) // credentials.go
	if err != nil {
		id.close()
		return nil, err
	}
	if err := creds.watch(ctx); err != nil {
		id.close()
		return nil, err
	}
	bridges.addCredentials(creds)
	a.creds = creds
	var cat gateway.ToolCatalog
	var onToolsChanged func(string)
	if !cfg.Catalog.Disabled {
		tc, err := newToolCatalog(cfg, id, creds, log, a.reg)
		if err != nil {
			id.close()
			return nil, err
		}
		a.catalog = tc
		cat, onToolsChanged = tc, tc.refreshSoon(log)

	}
	if err := a.startKillSwitch(ctx); err != nil {
		id.close()
		return nil, err
	}
	tp, err := tracing.Start(ctx, cfg.Tracing, buildVersion(), log)
	if err != nil {
		a.switches.Stop()
		id.close()
		return nil, err
	}
	a.tracer = tp
	toolsets, err := newToolsets(cfg, log) // toolsets.go
	if err != nil {
		id.close()
		return nil, err
	}
	sk, err := newSealingKeys(cfg, a.reg, log) // sealing.go
	if err != nil {
		id.close()
		return nil, err
	}
	a.sealing = sk
	writes := newWriteSafety(cfg, id, log)
	if writes != nil {
		writes.Sealer = sk.sealer
	}
	if a.Approvals, err = a.newApprovalPage(cfg, writes, decls, log); err != nil { // approval.go
		id.close()
		return nil, err
	}
	a.Pipeline = gateway.New(eng, gateway.Options{
		Toolsets:            toolsets,
		ResourceTenants:     resourceTenants(cfg),
		Switches:            a.gatewaySwitches(),
		Catalog:             cat,
		Writes:              writes,
		Limits:              newLimits(cfg, id),
		ListTTL:             rightsStaleness(cfg),
		OnToolsChanged:      onToolsChanged,
		Declarations:        decls,
		UndeclaredTools:     undeclaredTools(cfg),
		Instructions:        a.instructionsNote, // undeclared.go
		MaxBodyBytes:        cfg.Limits.MaxBodyBytes,
		MaxJSONDepth:        cfg.Limits.MaxJSONDepth,
		MaxSSEEventBytes:    cfg.Limits.MaxSSEEventBytes,
		AllowedOrigins:      cfg.Transport.AllowedOrigins,
		TenantArguments:     cfg.Policy.TenantArguments,
		SecretNames:         cfg.Policy.SecretNames,
		Authenticator:       authenticator,
		ResourceMetadata:    metadata,
		Asserter:            asserter,
		UpstreamCredentials: creds.calls,
		JWKS:                jwks,
		Sessions:            sessions,
		Tasks:               taskOptions(cfg, id.store),
		Extensions:          cfg.Extensions.Allow,
		SessionTTL:          sessionTTL(cfg),
		StripHeaders:        strip,
		TenantHeader:        tenantHeader,
		Audit:               id.audit,
		Logger:              log,
		Metrics:             metrics,
		Tracer:              tp.Tracer(),
		Servers:             federationServers(cfg), // federation.go
		Members:             a.members(cfg, id, creds, log),
		MemberSessions:      memberSessionsOf(cfg, log),
	})
	if len(cfg.Servers) > 0 {
		a.federation = newFederationCollector(cfg, cat, a.memberLists)
		a.reg.MustRegister(a.federation)
		logServers(cfg, log)
	}
	a.watchToolLists(ctx)
	if cfg.Policy.WatchEnabled() && len(cfg.Policy.Dirs) > 0 {
		go func() {
			if err := eng.Watch(ctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("policy watch stopped", "error", err)
			}
		}()
	}

	var routes []proxy.Route
	for _, u := range cfg.Upstreams {
		target, err := url.Parse(u.URL)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
		}
		routes = append(routes, proxy.Route{Path: u.Route, Upstream: u.Name, URL: target, Timeout: u.Timeout.D()})
	}
	for _, s := range cfg.Servers {
		routes = append(routes, proxy.Route{Path: s.Route, Upstream: s.Name})
	}
	if !cfg.Listeners.Proxy.Disabled {
		h, err := proxy.New(proxy.Options{
			Pipeline:         a.Pipeline,
			Routes:           routes,
			MaxBodyBytes:     cfg.Limits.MaxBodyBytes,
			ReadTimeout:      cfg.Limits.ReadTimeout.D(),
			MaxResponseBytes: maxResponseBytes,
			AllowedHosts:     cfg.ProxyAllowedHosts(),
			Metrics:          metrics,
			Logger:           log,
		})
		if err != nil {
			a.Shutdown(context.Background())
			return nil, err
		}
		addr, err := a.listen(cfg.Listeners.Proxy.Address, h, cfg.Limits.ReadHeaderTimeout.D())
		if err != nil {
			a.Shutdown(context.Background())
			return nil, fmt.Errorf("proxy listener: %w", err)
		}
		a.ProxyAddr = addr
	}
	if e := cfg.Listeners.ExtProc; e.Enabled() {
		var ups []extproc.Upstream
		for _, u := range cfg.Upstreams {
			if u.Route != "" {
				ups = append(ups, extproc.Upstream{Name: u.Name, Route: u.Route})
			}
		}
		for _, s := range cfg.Servers {
			ups = append(ups, extproc.Upstream{Name: s.Name, Route: s.Route})
		}
		srv, err := extproc.New(extproc.Options{
			Pipeline:         a.Pipeline,
			Upstreams:        ups,
			UpstreamHeader:   e.UpstreamHeader,
			MessageBudget:    e.MessageBudget.D(),
			MaxMessageBudget: e.MaxMessageBudget.D(),
			Metrics:          metrics,
			Logger:           log,
		})
		if err != nil {
			a.Shutdown(context.Background())
			return nil, err
		}
		g, err := startGRPC(e, srv, cfg.Limits.MaxBodyBytes, a.errc)
		if err != nil {
			a.Shutdown(context.Background())
			return nil, fmt.Errorf("extproc listener: %w", err)
		}
		a.grpc = g
		a.ExtProcAddr = g.addr
	}
	if !cfg.Listeners.Admin.Disabled {
		addr, err := a.listen(cfg.Listeners.Admin.Address, a.adminHandler(), cfg.Limits.ReadHeaderTimeout.D())
		if err != nil {
			a.Shutdown(context.Background())
			return nil, fmt.Errorf("admin listener: %w", err)
		}
		a.AdminAddr = addr
	}
	if err := bridges.WaitReady(ctx, cfg); err != nil {
		log.Warn("starting without a stdio upstream; it keeps being restarted and /readyz says not ready until it answers", "error", err)
	}
	if a.catalog != nil {
		// After the listeners: an upstream may verify mcpgate's
		// assertions with the JWKS on the admin listener.
		a.catalog.firstListing(ctx, cfg, log)
		go a.catalog.c.Run(ctx)
	}
	if a.memberLists != nil {
		a.memberLists.warm() // federation.go
	}
	a.reportTools(ctx, cfg) // undeclared.go
	a.ready.Store(true)
	started = true
	return a, nil
}

// listen starts one HTTP server. No read or write timeout covers a whole
// exchange: MCP streams are long-lived; the proxy bounds body reads itself.
func (a *App) listen(addr string, h http.Handler, readHeader time.Duration) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: readHeader,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	a.servers = append(a.servers, srv)
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.errc <- err
		}
	}()
	return ln.Addr().String(), nil
}

func (a *App) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.Registry, promhttp.HandlerOpts{Registry: a.Registry}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		// A stdio upstream first: at start mcpgate waits for its child,
		// and says which one and why.
		if why := a.bridges.notReady(); why != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", why)
			return
		}
		if !a.ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready")
			return
		}
		if !a.Engine.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready: policy bundle not activated yet")
			return
		}
		if st := a.id.store; st != nil {
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := st.Ping(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprintln(w, "not ready: state store:", err)
				return
			}
		}
		fmt.Fprintln(w, "ready")
		if f := a.federation; f != nil {
			// A member that is down does not take its server down: the
			// gateway stays ready and names it.
			if text := missingText(membersMissing(f.cfg, f.cat)); text != "" {
				fmt.Fprintln(w, text)
			}
		}
	})
	if s := a.id.signer; s != nil {
		mux.Handle(gateway.JWKSPath, s.JWKSHandler())
	}
	if api := a.id.admin; api != nil {
		mux.Handle("/v1/", api.Handler())
	}
	if a.Approvals != nil {
		mux.Handle(approval.Prefix, a.Approvals.Handler())
	}
	return mux
}

// Reload rereads the configuration file (SetConfigFile; its run-time
// settings, reload.go), recompiles the policy and rereads the assertion
// keys file (SIGHUP). Each part logs and counts its outcome; a part that
// fails keeps its previous state, and the errors are returned joined.
func (a *App) Reload(ctx context.Context) error {
	err := errors.Join(a.reloadConfig(ctx), a.Engine.Reload(ctx), a.id.reloadKeys(ctx, a.log), a.sealing.reload(ctx, a.log), a.creds.reload(ctx), a.catalog.reload(ctx, a.cfg, a.log))
	// Pins and policy may have changed what principals see: announce it
	// on their open notification streams (listchanged.go).
	a.Pipeline.ToolsChanged("")
	return err
}

// RefreshCatalog lists every upstream's tools again now and waits for it
// (nil when the catalog is off). Tests use it when an upstream starts after
// the gateway.
func (a *App) RefreshCatalog(ctx context.Context) error {
	if a.catalog == nil {
		return nil
	}
	var errs []error
	for _, u := range a.cfg.Upstreams {
		errs = append(errs, a.catalog.c.Refresh(ctx, u.Name))
	}
	return errors.Join(errs...)
}

// Err reports a listener that stopped unexpectedly.
func (a *App) Err() <-chan error { return a.errc }

// Shutdown stops accepting, marks the gateway not ready, and waits for
// in-flight exchanges until ctx ends.
func (a *App) Shutdown(ctx context.Context) error {
	a.ready.Store(false)
	var errs []error
	if a.grpc != nil {
		a.grpc.stop(ctx)
	}
	for _, s := range a.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = s.Close()
		}
	}
	a.wg.Wait()
	if err := a.bridges.Close(ctx); err != nil { // the stdio upstreams' children
		errs = append(errs, err)
	}
	if a.Approvals != nil {
		a.Approvals.Close() // the webhook sender
	}
	a.Engine.Close(ctx) // bundle polling, decision logs (flushed), shadow
	a.switches.Stop()   // before the store closes
	a.id.close()
	// The spans of the last exchanges are flushed to the collector.
	if err := a.tracer.Shutdown(ctx); err != nil {
		a.log.Warn("tracing: spans lost at shutdown", "error", err)
	}
	return errors.Join(errs...)
}

// buildVersion is mcpgate's module version for service.version, "dev" in
// a development build.
func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// taskOptions are the pipeline's task settings (config tasks section):
// tasks need the store their bindings live in.
func taskOptions(cfg *config.Config, st store.Store) gateway.TaskOptions {
	if !cfg.Tasks.Enabled || st == nil {
		return gateway.TaskOptions{}
	}
	return gateway.TaskOptions{Enabled: true, Store: st, MaxTTL: cfg.Tasks.MaxTTL.D()}
}
