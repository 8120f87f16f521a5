package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/plugins"
	"github.com/open-policy-agent/opa/v1/plugins/logs"
	"github.com/open-policy-agent/opa/v1/server"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/prometheus/client_golang/prometheus"

	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// maskFile is the default decision-log mask policy in rego.Default; the
// policy loader leaves it out of the decision policy.
const maskFile = "mask.rego"

// DefaultDecisionLogQueue is how many decisions wait for the decision-log
// plugin before new ones are dropped (and counted).
const DefaultDecisionLogQueue = 10000

// DecisionLogPath is the path decision-log events carry ("path" in OPA's
// event format): the decision mcpgate evaluates.
const DecisionLogPath = "mcpgate/decision"

// DecisionLogOptions send every decision to OPA's decision-log plugin
// (OPA docs, "Decision Logs"): events in OPA's format (decision_id, path,
// input, result, bundles, timestamp, erased), masked by a mask policy
// (data.system.log.mask) before they leave the process, uploaded in
// gzipped batches to a service and/or written to the log.
type DecisionLogOptions struct {
	// URL, if set, is the full http(s) URL events are POSTed to (the
	// service is scheme://host, the resource the path), e.g.
	// https://logs.example.com/logs.
	URL string
	// BearerToken, if set, is sent as "Authorization: Bearer …" to URL.
	BearerToken string
	// Console writes each masked event to mcpgate's log as well.
	Console bool
	// MinDelay and MaxDelay bound the wait between uploads (OPA
	// defaults 300s and 600s when zero); whole seconds.
	MinDelay, MaxDelay time.Duration
	// MaskPolicy, if set, is Rego source replacing the default mask
	// policy (rego/mask.rego): package system.log, a set rule mask of
	// JSON pointers such as "/input/message/arguments" (OPA's mask
	// rule format). An event whose masking fails is not logged.
	MaskPolicy string
	// QueueSize bounds the decisions waiting to be logged; default
	// DefaultDecisionLogQueue. When full, decisions are dropped and
	// counted in mcpgate_decision_logs_dropped_total.
	QueueSize int
}

// DefaultMaskPolicy is the source of the default decision-log mask policy
// (rego/mask.rego).
func DefaultMaskPolicy() string {
	b, err := mcpgaterego.Default.ReadFile(maskFile)
	if err != nil {
		panic(err) // embedded at build time
	}
	return string(b)
}

func (o *DecisionLogOptions) opaConfig() ([]byte, error) {
	if o.URL == "" && !o.Console {
		return nil, fmt.Errorf("decision logs: neither a url nor console")
	}
	dl := map[string]any{"console": o.Console}
	cfg := map[string]any{"decision_logs": dl}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("decision logs: url %q is not an http(s) URL", o.URL)
		}
		s := map[string]any{"url": u.Scheme + "://" + u.Host}
		if o.BearerToken != "" {
			s["credentials"] = map[string]any{"bearer": map[string]any{"token": o.BearerToken}}
		}
		cfg["services"] = map[string]any{"logs": s}
		dl["service"] = "logs"
		if p := u.EscapedPath(); p != "" && p != "/" {
			dl["resource"] = p
		}
		if o.MinDelay > 0 || o.MaxDelay > 0 {
			minD, maxD := max(int64(o.MinDelay/time.Second), 1), int64(o.MaxDelay/time.Second)
			dl["reporting"] = map[string]any{"min_delay_seconds": minD, "max_delay_seconds": max(maxD, minD)}
		}
	}
	return json.Marshal(cfg)
}

// CheckMaskPolicy compiles a mask policy and returns its problems.
func CheckMaskPolicy(src string) error {
	m, err := ast.ParseModuleWithOpts(maskFile, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return problems("decision-log mask policy", errorList([]error{err}))
	}
	if got := m.Package.Path.String(); got != "data.system.log" {
		return fmt.Errorf("decision-log mask policy: package is %s, want system.log", got)
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(false)
	if c.Compile(map[string]*ast.Module{maskFile: m}); c.Failed() {
		return problems("decision-log mask policy", errorList(c.Errors))
	}
	return nil
}

// decisionLogger feeds decisions to OPA's logs plugin from one goroutine,
// so that masking and encoding stay off the request path.
type decisionLogger struct {
	*worker[logItem]
	manager *plugins.Manager
	plugin  *logs.Plugin
}

type logItem struct {
	input    ast.Value
	d        Decision
	err      error
	bundle   string
	revision string
	at       time.Time
}

func newDecisionLogger(ctx context.Context, o *DecisionLogOptions, log *slog.Logger, reg prometheus.Registerer) (*decisionLogger, error) {
	raw, err := o.opaConfig()
	if err != nil {
		return nil, err
	}
	mask := o.MaskPolicy
	if mask == "" {
		mask = DefaultMaskPolicy()
	}
	if err := CheckMaskPolicy(mask); err != nil {
		return nil, err
	}
	// The logs plugin evaluates the mask against its manager's store and
	// compiler: this manager holds the mask policy only, whatever the
	// decision policy or bundle holds.
	store := inmem.New()
	if err := storage.Txn(ctx, store, storage.WriteParams, func(txn storage.Transaction) error {
		return store.UpsertPolicy(ctx, txn, maskFile, []byte(mask))
	}); err != nil {
		return nil, err
	}
	opaLog := slogAdapter{log.With("component", "opa_decision_logs")}
	mgr, err := plugins.New(raw, "mcpgate", store,
		plugins.Logger(opaLog), plugins.ConsoleLogger(slogAdapter{log}),
		plugins.EnablePrintStatements(false),
		plugins.WithEnableVersionCheck(false))
	if err != nil {
		return nil, fmt.Errorf("decision logs: %w", err)
	}
	lcfg, err := logs.NewConfigBuilder().WithBytes(mgr.Config.DecisionLogs).
		WithServices(mgr.Services()).WithPlugins(mgr.Plugins()).Parse()
	if err != nil {
		return nil, fmt.Errorf("decision logs: %w", err)
	}
	lp := logs.New(lcfg, mgr)
	mgr.Register(logs.Name, lp)
	if err := mgr.Init(ctx); err != nil {
		return nil, fmt.Errorf("decision logs: %w", err)
	}
	if err := mgr.Start(context.Background()); err != nil {
		return nil, fmt.Errorf("decision logs: %w", err)
	}
	size := o.QueueSize
	if size <= 0 {
		size = DefaultDecisionLogQueue
	}
	dropped := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcpgate_decision_logs_dropped_total",
		Help: "Decisions not handed to the decision-log plugin because its queue was full.",
	})
	if reg != nil {
		if err := reg.Register(dropped); err != nil {
			return nil, err
		}
	}
	l := &decisionLogger{manager: mgr, plugin: lp}
	l.worker = newWorker(size, dropped, func(it logItem) {
		ctx := context.Background()
		if err := l.log(ctx, it); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "decision log failed",
				slog.String("decision_id", it.d.ID), slog.String("error", err.Error()))
		}
	})
	return l, nil
}

// log hands one decision to the plugin, which masks it (an event whose
// mask fails is dropped by the plugin, never logged unmasked).
func (l *decisionLogger) log(ctx context.Context, it logItem) error {
	input, err := ast.JSON(it.input)
	if err != nil {
		return err
	}
	b, err := json.Marshal(&it.d)
	if err != nil {
		return err
	}
	var result any
	if err := json.Unmarshal(b, &result); err != nil {
		return err
	}
	info := &server.Info{
		DecisionID: it.d.ID,
		Path:       DecisionLogPath,
		Input:      &input,
		InputAST:   it.input,
		Results:    &result,
		Timestamp:  it.at,
		Error:      it.err,
	}
	if it.bundle != "" {
		info.Bundles = map[string]server.BundleInfo{it.bundle: {Revision: it.revision}}
	}
	return l.plugin.Log(ctx, info)
}

// stop drains the queue and stops the plugin, which uploads what it holds
// until ctx ends.
func (l *decisionLogger) stop(ctx context.Context) {
	l.worker.stop(ctx)
	l.manager.Stop(ctx)
}

// FlushDecisionLogs uploads the buffered decision-log events now (after
// the queue before the plugin is drained). Tests and shutdown use it.
func (e *Engine) FlushDecisionLogs(ctx context.Context) error {
	if e.logs == nil {
		return nil
	}
	if err := e.logs.wait(ctx); err != nil {
		return err
	}
	return e.logs.plugin.Trigger(ctx)
}

// startOps starts decision logs and the shadow policy.
func (e *Engine) startOps(ctx context.Context, o Options) error {
	if o.DecisionLogs != nil {
		l, err := newDecisionLogger(ctx, o.DecisionLogs, e.log, o.Registerer)
		if err != nil {
			return err
		}
		e.logs = l
	}
	if o.Shadow != nil {
		s, err := newShadow(ctx, o, e.log)
		if err != nil {
			return err
		}
		e.shadow = s
	}
	return nil
}

// observe queues a decision for the decision logs and the shadow policy.
// It never blocks: full queues drop and count.
func (e *Engine) observe(in *Input, input ast.Value, p *policyVersion, d *Decision, err error) {
	snap := *d
	snap.Reasons = slices.Clone(d.Reasons)
	if e.logs != nil {
		e.logs.enqueue(logItem{input: input, d: snap, err: err, bundle: p.bundle, revision: p.revision, at: time.Now().UTC()})
	}
	if e.shadow != nil {
		e.shadow.enqueue(shadowItemFor(in, input, snap))
	}
}
