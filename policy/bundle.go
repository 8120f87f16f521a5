package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"
	"github.com/open-policy-agent/opa/v1/logging"
	"github.com/open-policy-agent/opa/v1/plugins"
	bundleplugin "github.com/open-policy-agent/opa/v1/plugins/bundle"
	"github.com/open-policy-agent/opa/v1/plugins/status"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
)

// BundleName is the name mcpgate gives its policy bundle in OPA's
// configuration, status reports and decision logs.
const BundleName = "mcpgate"

// BundleOptions take the policy from an OPA bundle server, through OPA's
// plugin manager and bundle plugin (OPA docs, "Bundles"): polling with
// ETag (If-None-Match, 304 keeps the active bundle), optional signature
// verification (.signatures.json, "Bundle Signing"), status reports by
// OPA's status plugin.
type BundleOptions struct {
	// URL is the bundle's full http(s) URL, e.g.
	// https://bundles.example.com/mcpgate/bundle.tar.gz.
	URL string
	// MinDelay and MaxDelay bound the wait between polls (OPA default
	// 60s and 120s when zero); whole seconds.
	MinDelay, MaxDelay time.Duration
	// BearerToken, if set, is sent as "Authorization: Bearer …" to the
	// bundle server (and to StatusURL).
	BearerToken string
	// PublicKey, if set, turns verification on: a PEM public key (RSA or
	// EC) or, for HS algorithms, the shared secret. A bundle without
	// signatures, or whose signature or file digests do not verify, is
	// refused and the active policy stays.
	PublicKey string
	// KeyID names the key in OPA's keys configuration and the bundle's
	// "keyid" claim; default "mcpgate".
	KeyID string
	// Algorithm is the JWS algorithm of the signature (default RS256).
	Algorithm string
	// Scope, if set, must equal the signature's "scope" claim.
	Scope string
	// StatusURL, if set, is a service OPA's status plugin reports to
	// (POST {StatusURL}/status); otherwise status goes to the log.
	StatusURL string
}

// opaConfig is the OPA configuration (JSON) for o: services, bundles,
// keys and status.
func (o *BundleOptions) opaConfig() ([]byte, error) {
	u, err := url.Parse(o.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("policy bundle: url %q is not an http(s) URL", o.URL)
	}
	resource := u.EscapedPath()
	if u.RawQuery != "" {
		resource += "?" + u.RawQuery
	}
	service := func(raw string) map[string]any {
		s := map[string]any{"url": raw}
		if o.BearerToken != "" {
			s["credentials"] = map[string]any{"bearer": map[string]any{"token": o.BearerToken}}
		}
		return s
	}
	services := map[string]any{"bundle": service(u.Scheme + "://" + u.Host)}
	b := map[string]any{"service": "bundle", "resource": resource}
	if o.MinDelay > 0 || o.MaxDelay > 0 {
		minD, maxD := int64(o.MinDelay/time.Second), int64(o.MaxDelay/time.Second)
		if minD < 1 {
			minD = 1
		}
		if maxD < minD {
			maxD = minD
		}
		b["polling"] = map[string]any{"min_delay_seconds": minD, "max_delay_seconds": maxD}
	}
	cfg := map[string]any{
		"services": services,
		"bundles":  map[string]any{BundleName: b},
	}
	if o.PublicKey != "" {
		kid := o.KeyID
		if kid == "" {
			kid = "mcpgate"
		}
		alg := o.Algorithm
		if alg == "" {
			alg = "RS256"
		}
		signing := map[string]any{"keyid": kid}
		if o.Scope != "" {
			signing["scope"] = o.Scope
		}
		b["signing"] = signing
		cfg["keys"] = map[string]any{kid: map[string]any{"key": o.PublicKey, "algorithm": alg}}
	}
	if o.StatusURL != "" {
		services["status"] = service(strings.TrimSuffix(o.StatusURL, "/"))
		cfg["status"] = map[string]any{"service": "status"}
	} else {
		cfg["status"] = map[string]any{"console": true}
	}
	return json.Marshal(cfg)
}

// bundleSource is a running OPA plugin manager with the bundle and status
// plugins. OPA activates each bundle into the manager's store after
// compiling it (a bundle that fails to download, verify or compile is not
// activated); mcpgate then compiles the activated modules and data with
// its declarations into a new prepared query and swaps it in.
type bundleSource struct {
	manager *plugins.Manager
	plugin  *bundleplugin.Plugin

	mu       sync.Mutex
	lastAct  time.Time // LastSuccessfulActivation seen
	lastCode string    // Code of the last failure reported, to report a failure once
	ready    chan struct{}
	once     sync.Once
}

// notLoaded is the policy in force until the first bundle activates:
// every message is denied (fail closed) with a reason saying why.
const notLoaded = `package mcpgate

decision := {"allow": false, "reasons": [{"code": "policy_not_loaded",
	"cause": "The gateway has not loaded its policy bundle yet.",
	"fix": "Try again in a moment."}]}
`

func (e *Engine) startBundle(ctx context.Context, o *BundleOptions) error {
	raw, err := o.opaConfig()
	if err != nil {
		return err
	}
	mod, err := ast.ParseModuleWithOpts("not_loaded.rego", notLoaded, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return err
	}
	p, err := compileVersion(ctx, map[string]*ast.Module{"not_loaded.rego": mod}, map[string]any{}, nil)
	if err != nil {
		return err
	}
	e.current.Store(p)

	store := inmem.NewWithOpts(inmem.OptRoundTripOnWrite(false))
	mgr, err := plugins.New(raw, "mcpgate", store,
		plugins.Logger(slogAdapter{e.log.With("component", "opa")}),
		plugins.ConsoleLogger(slogAdapter{e.log.With("component", "opa")}),
		plugins.EnablePrintStatements(false),
		plugins.WithEnableVersionCheck(false),
	)
	if err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	bcfg, err := bundleplugin.NewConfigBuilder().WithBytes(mgr.Config.Bundles).
		WithServices(mgr.Services()).WithKeyConfigs(mgr.PublicKeys()).Parse()
	if err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	scfg, err := status.NewConfigBuilder().WithBytes(mgr.Config.Status).
		WithServices(mgr.Services()).WithPlugins(mgr.Plugins()).Parse()
	if err != nil {
		return fmt.Errorf("policy bundle status: %w", err)
	}
	bp := bundleplugin.New(bcfg, mgr)
	mgr.Register(bundleplugin.Name, bp)
	mgr.Register(status.Name, status.New(scfg, mgr))
	src := &bundleSource{manager: mgr, plugin: bp, ready: make(chan struct{})}
	e.bundle = src
	bp.Register("mcpgate", func(st bundleplugin.Status) { e.bundleStatus(context.Background(), st) })
	if err := mgr.Init(ctx); err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "policy bundle polling started", slog.String("url", redactURL(o.URL)),
		slog.Bool("verify_signatures", o.PublicKey != ""))
	return nil
}

// bundleStatus handles one report of the bundle plugin: a new activation
// is compiled and swapped in; a failure is counted once per failure run.
func (e *Engine) bundleStatus(ctx context.Context, st bundleplugin.Status) {
	src := e.bundle
	src.mu.Lock()
	defer src.mu.Unlock()
	if st.Code != "" {
		if st.Code+st.Message == src.lastCode {
			return // the same failure again on the next poll
		}
		src.lastCode = st.Code + st.Message
		err := fmt.Errorf("policy bundle %s: %s", BundleName, st.Message)
		for _, x := range st.Errors {
			err = fmt.Errorf("%w; %v", err, x)
		}
		e.log.LogAttrs(ctx, slog.LevelError, "policy bundle refused; keeping the previous policy",
			slog.String("code", st.Code), slog.String("http_code", string(st.HTTPCode)), slog.String("error", err.Error()))
		if e.onReload != nil {
			e.onReload(false, err)
		}
		return
	}
	src.lastCode = ""
	if st.LastSuccessfulActivation.IsZero() || !st.LastSuccessfulActivation.After(src.lastAct) {
		return // 304 Not Modified, or nothing new
	}
	src.lastAct = st.LastSuccessfulActivation
	e.reloadMu.Lock()
	err := e.swapBundle(ctx, st.ActiveRevision)
	e.reloadMu.Unlock()
	if e.onReload != nil {
		e.onReload(err == nil, err)
	}
	if err == nil {
		src.once.Do(func() { close(src.ready) })
	}
}

// swapBundle compiles what OPA activated (modules and data of the
// manager's store) with the declarations and swaps it in. Callers hold
// reloadMu.
func (e *Engine) swapBundle(ctx context.Context, revision string) error {
	start := time.Now()
	modules, docs, err := readActivated(ctx, e.bundle.manager.Store)
	var p *policyVersion
	if err == nil {
		p, err = compileVersion(ctx, modules, docs, e.declarations)
	}
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelError, "policy bundle cannot be used; keeping the previous policy",
			slog.String("revision", revision), slog.String("error", err.Error()))
		return err
	}
	p.bundle, p.revision = BundleName, revision
	e.current.Store(p)
	e.log.LogAttrs(ctx, slog.LevelInfo, "policy bundle activated",
		slog.String("revision", revision), slog.Int("modules", p.modules),
		slog.Float64("duration_seconds", time.Since(start).Seconds()))
	if !p.defined {
		e.log.LogAttrs(ctx, slog.LevelWarn, "no rule defines "+Query+" in the bundle; every message will be denied")
	}
	return nil
}

// reloadBundle (SIGHUP with a bundle) recompiles the active bundle; the
// bundle plugin fetches new ones on its own schedule.
func (e *Engine) reloadBundle(ctx context.Context) error {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	var err error
	if e.current.Load().bundle == "" {
		err = errors.New("policy bundle: no bundle activated yet")
	} else {
		err = e.swapBundle(ctx, e.current.Load().revision)
	}
	if e.onReload != nil {
		e.onReload(err == nil, err)
	}
	return err
}

// readActivated reads the modules and data OPA's bundle activation wrote
// to store, leaving out OPA's own bookkeeping under data.system.bundles
// and data.system.modules. Modules are parsed as Rego v1.
func readActivated(ctx context.Context, store storage.Store) (map[string]*ast.Module, map[string]any, error) {
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer store.Abort(ctx, txn)
	ids, err := store.ListPolicies(ctx, txn)
	if err != nil {
		return nil, nil, err
	}
	modules := make(map[string]*ast.Module, len(ids))
	var errs []error
	for _, id := range ids {
		bs, err := store.GetPolicy(ctx, txn, id)
		if err != nil {
			return nil, nil, err
		}
		m, err := ast.ParseModuleWithOpts(id, string(bs), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		modules[id] = m
	}
	if len(errs) > 0 {
		return nil, nil, problems("parse bundle", errs)
	}
	v, err := store.Read(ctx, txn, storage.Path{})
	if err != nil {
		return nil, nil, err
	}
	docs, err := jsonData(v)
	if err != nil {
		return nil, nil, err
	}
	data, _ := docs.(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	if sys, ok := data["system"].(map[string]any); ok {
		delete(sys, "bundles")
		delete(sys, "modules")
		if len(sys) == 0 {
			delete(data, "system")
		}
	}
	return modules, data, nil
}

// WaitBundle waits until the first bundle is active (immediately without
// a bundle), or ctx ends.
func (e *Engine) WaitBundle(ctx context.Context) error {
	if e.bundle == nil {
		return nil
	}
	select {
	case <-e.bundle.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("policy bundle not activated: %w", ctx.Err())
	}
}

// Ready reports whether a policy is in force: always with dirs; with a
// bundle once the first one is active (until then every message is
// denied with policy_not_loaded).
func (e *Engine) Ready() bool {
	if e.bundle == nil {
		return true
	}
	select {
	case <-e.bundle.ready:
		return true
	default:
		return false
	}
}

// BundleRevision is the revision of the active bundle ("" without one).
func (e *Engine) BundleRevision() string { return e.current.Load().revision }

// Close stops the bundle, decision-log and shadow machinery (a no-op for
// an engine with none). Queued decision logs are flushed until ctx ends.
func (e *Engine) Close(ctx context.Context) {
	if e.shadow != nil {
		e.shadow.stop(ctx)
		e.shadow.engine.Close(ctx)
	}
	if e.logs != nil {
		e.logs.stop(ctx)
	}
	if e.bundle != nil {
		e.bundle.manager.Stop(ctx)
	}
}

// redactURL drops credentials and query from u for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// slogAdapter gives OPA's plugins mcpgate's logger.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Debug(f string, v ...any) { a.l.Debug(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Info(f string, v ...any)  { a.l.Info(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Warn(f string, v ...any)  { a.l.Warn(fmt.Sprintf(f, v...)) }
func (a slogAdapter) Error(f string, v ...any) { a.l.Error(fmt.Sprintf(f, v...)) }
func (a slogAdapter) WithFields(f map[string]any) logging.Logger {
	l := a.l
	for _, k := range slices.Sorted(maps.Keys(f)) {
		l = l.With(k, f[k])
	}
	return slogAdapter{l}
}
func (a slogAdapter) GetLevel() logging.Level {
	ctx := context.Background()
	switch {
	case a.l.Enabled(ctx, slog.LevelDebug):
		return logging.Debug
	case a.l.Enabled(ctx, slog.LevelInfo):
		return logging.Info
	case a.l.Enabled(ctx, slog.LevelWarn):
		return logging.Warn
	}
	return logging.Error
}
func (slogAdapter) SetLevel(logging.Level) {}

// CheckBundle reads a bundle file (.tar.gz, as `opa build` writes it) with
// OPA's bundle reader and compiles it as mcpgate would activate it,
// returning every problem; with publicKey (PEM) its signature must verify
// under keyID (default "mcpgate"). It is what `mcpgate validate --bundle`
// runs in a policy repository's CI.
func CheckBundle(ctx context.Context, file, publicKey, keyID string) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("policy bundle: %w", err)
	}
	defer f.Close()
	r := bundle.NewReader(f).WithRegoVersion(ast.RegoV1).WithProcessAnnotations(true)
	if publicKey != "" {
		if keyID == "" {
			keyID = "mcpgate"
		}
		r = r.WithBundleVerificationConfig(bundle.NewVerificationConfig(
			map[string]*keys.Config{keyID: {Key: publicKey, Algorithm: "RS256"}}, keyID, "", nil))
	} else {
		r = r.WithSkipBundleVerification(true)
	}
	b, err := r.Read()
	if err != nil {
		return fmt.Errorf("policy bundle %s: %w", file, err)
	}
	modules := make(map[string]*ast.Module, len(b.Modules))
	for _, m := range b.Modules {
		modules[m.Path] = m.Parsed
	}
	if len(modules) == 0 {
		return fmt.Errorf("policy bundle %s: no Rego modules", file)
	}
	data := b.Data
	if data == nil {
		data = map[string]any{}
	}
	p, err := compileVersion(ctx, modules, data, nil)
	if err != nil {
		return err
	}
	if !p.defined {
		return fmt.Errorf("policy bundle %s: no rule defines %s", file, Query)
	}
	return nil
}
