package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/admin"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
	"github.com/mcpgate/mcpgate/store/redisstore"
)

// identity holds the parts that know who is calling and remember what
// they did: the state store, the audit sink, the live rights source, the
// gateway token service, the assertion signer and the admin API. Each is
// nil when the configuration leaves it out.
type identity struct {
	store   store.Store
	auditor *store.Auditor
	audits  chan store.AuditRecord
	auditWG sync.WaitGroup
	// auditMu guards audits against close: a request or a catalog drift
	// still running at shutdown records directly instead of sending on a
	// closed channel.
	auditMu     sync.RWMutex
	auditClosed bool
	rights      rights.Source
	tokens      *tokens.Service
	signer      *assertion.Signer
	keys        string // assertion keys file, reread on reload
	admin       *admin.API
	// audiences maps an upstream name to the aud of its assertions.
	audiences map[string]string
	// keyReloads counts assertion key reloads by result.
	keyReloads *prometheus.CounterVec
}

// auditWorkers write audit records to the store off the request path; a
// full queue (auditQueue records) makes callers wait rather than lose one.
const (
	auditWorkers = 4
	auditQueue   = 1024
	// auditPruneEvery is how often expired audit records are deleted.
	auditPruneEvery = time.Hour
)

// newIdentity opens the store and builds the identity parts the
// configuration enables.
func newIdentity(ctx context.Context, cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*identity, error) {
	id := &identity{audiences: map[string]string{}}
	id.keyReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_assertion_key_reloads_total",
		Help: "Reloads of the assertion keys file (SIGHUP), by result.",
	}, []string{"result"})
	for _, r := range []string{"success", "failure"} {
		id.keyReloads.WithLabelValues(r)
	}
	if err := reg.Register(id.keyReloads); err != nil {
		return nil, err
	}
	for _, u := range cfg.Upstreams {
		id.audiences[u.Name] = upstreamAudience(u)
	}
	if cfg.Store != nil {
		st, err := openStore(ctx, cfg.Store)
		if err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
		id.store = st
	}
	var auditLog *slog.Logger
	switch cfg.Audit.Log {
	case "off":
	case "stdout":
		auditLog = store.NewAuditLogger(os.Stdout)
	default:
		auditLog = store.NewAuditLogger(os.Stderr)
	}
	var as store.AuditStore
	if id.store != nil {
		as = id.store
	}
	id.auditor = store.NewAuditor(as, auditLog)
	id.startAudit(ctx, log)
	if id.store != nil {
		go func() { _ = id.auditor.RunRetention(ctx, auditPruneEvery, cfg.Audit.Retention.D()) }()
	}

	if r := cfg.Rights; r != nil {
		src, err := newRightsSource(r, log, reg)
		if err != nil {
			id.close()
			return nil, fmt.Errorf("rights: %w", err)
		}
		id.rights = src
	}
	if cfg.Auth == nil {
		return id, nil
	}
	if gt := cfg.Auth.GatewayTokens; gt != nil {
		ts, err := tokens.New(tokens.Options{
			Store: id.store, Rights: id.rights, Auditor: id.auditor,
			DefaultTTL: gt.DefaultTTL.D(), MaxTTL: gt.MaxTTL.D(),
			Toolsets: sortedKeys(cfg.Toolsets),
		})
		if err != nil {
			id.close()
			return nil, fmt.Errorf("gateway tokens: %w", err)
		}
		id.tokens = ts
	}
	ks, err := id.loadKeys(cfg.Assertion, log)
	if err != nil {
		id.close()
		return nil, err
	}
	signer, err := assertion.NewSigner(ks, assertion.SignerOptions{Issuer: assertionIssuer(cfg), TTL: cfg.Assertion.TTL.D()})
	if err != nil {
		id.close()
		return nil, fmt.Errorf("assertion: %w", err)
	}
	id.signer = signer
	return id, nil
}

// loadKeys reads the assertion signing keys, or makes an ephemeral key when
// no keys file is configured (one instance only: replicas would not verify
// each other's assertions, and a restart changes the key).
func (id *identity) loadKeys(a config.Assertion, log *slog.Logger) (*assertion.KeySet, error) {
	id.keys = a.KeysFile
	if a.KeysFile == "" {
		log.Warn("assertion.keys_file is not set: identity assertions are signed with a key made for this process only; set it (mcpgate keys generate) when running replicas or when upstreams cache the JWKS across restarts")
		ks, err := assertion.GenerateKeySet("EdDSA")
		if err != nil {
			return nil, fmt.Errorf("assertion keys: %w", err)
		}
		return ks, nil
	}
	ks, err := assertion.LoadKeySet(a.KeysFile)
	if err != nil {
		return nil, fmt.Errorf("assertion keys: %w", err)
	}
	return ks, nil
}

// reloadKeys rereads the assertion keys file (SIGHUP): a rotated key set
// takes effect without a restart. A file that cannot be read or parsed
// keeps the keys in use. Logged and counted in
// mcpgate_assertion_key_reloads_total{result}. Without a keys file it does
// nothing.
func (id *identity) reloadKeys(ctx context.Context, log *slog.Logger) error {
	if id == nil || id.signer == nil || id.keys == "" {
		return nil
	}
	ks, err := assertion.LoadKeySet(id.keys)
	if err != nil {
		id.keyReloads.WithLabelValues("failure").Inc()
		log.ErrorContext(ctx, "assertion keys reload failed; the previous keys stay in use", "file", id.keys, "error", err)
		return fmt.Errorf("assertion keys: %w", err)
	}
	id.signer.SetKeys(ks)
	id.keyReloads.WithLabelValues("success").Inc()
	log.InfoContext(ctx, "assertion keys reloaded", "file", id.keys, "signing_kid", ks.SigningKeyID(), "kids", ks.KeyIDs())
	return nil
}

func openStore(ctx context.Context, s *config.Store) (store.Store, error) {
	switch {
	case s.Bolt != nil:
		return boltstore.Open(s.Bolt.Path, boltstore.Options{})
	case s.Redis != nil:
		return redisstore.Open(ctx, s.Redis.URL, redisstore.Options{})
	}
	return nil, errors.New("no backend configured")
}

func newRightsSource(r *config.Rights, log *slog.Logger, reg prometheus.Registerer) (rights.Source, error) {
	var (
		src  rights.Source
		name string
		err  error
	)
	switch {
	case r.HTTP != nil:
		h := make(map[string][]string, len(r.HTTP.Headers))
		for k, v := range r.HTTP.Headers {
			h[k] = []string{v}
		}
		name = "http"
		src, err = rights.NewHTTP(rights.HTTPOptions{URL: r.HTTP.URL, Timeout: r.HTTP.Timeout.D(), Header: h})
	case r.File != nil:
		name = "file"
		src, err = rights.NewFile(r.File.Path, rights.FileOptions{Logger: log})
	default:
		return nil, errors.New("no source configured")
	}
	if err != nil {
		return nil, err
	}
	src = rights.Instrument(src, name, rights.NewMetrics(reg))
	if d := r.MaxStaleness.D(); d > 0 {
		src = rights.NewCached(src, rights.CacheOptions{MaxStaleness: d})
	}
	return src, nil
}

// upstreamAudience is the aud of an upstream's assertions: upstreams[].audience,
// else its URL, else its name.
func upstreamAudience(u config.Upstream) string {
	switch {
	case u.Audience != "":
		return u.Audience
	case u.URL != "":
		return u.URL
	}
	return u.Name
}

func assertionIssuer(cfg *config.Config) string {
	switch {
	case cfg.Assertion.Issuer != "":
		return cfg.Assertion.Issuer
	case cfg.Auth != nil && cfg.Auth.ResourceBaseURL != "":
		return cfg.Auth.ResourceBaseURL
	}
	return "mcpgate"
}

// Assert implements gateway.Asserter with the assertion signer.
func (id *identity) Assert(p *policy.Principal, upstream, client string) (string, error) {
	aud, ok := id.audiences[upstream]
	if !ok {
		return "", fmt.Errorf("no audience for upstream %q", upstream)
	}
	return id.signer.Sign(assertion.Identity{
		Tenant: p.Tenant, Subject: p.Subject, Rights: p.Rights, Connection: p.Connection,
		Client: client, CredentialKind: p.CredentialKind,
	}, aud)
}

var _ gateway.Asserter = (*identity)(nil)

// startAudit starts the workers that write queued audit records.
func (id *identity) startAudit(ctx context.Context, log *slog.Logger) {
	id.audits = make(chan store.AuditRecord, auditQueue)
	for range auditWorkers {
		id.auditWG.Add(1)
		go func() {
			defer id.auditWG.Done()
			for r := range id.audits {
				if _, err := id.auditor.Record(context.WithoutCancel(ctx), r); err != nil {
					log.Error("audit record not stored", "error", err)
				}
			}
		}()
	}
}

// audit queues a record (gateway.Options.Audit): stamped now, written by a
// worker so the request does not wait for the store's write.
func (id *identity) audit(ctx context.Context, r store.AuditRecord) {
	r.Time = time.Now()
	id.auditMu.RLock()
	defer id.auditMu.RUnlock()
	if id.auditClosed {
		_, _ = id.auditor.Record(context.WithoutCancel(ctx), r)
		return
	}
	id.audits <- r
}

// close drains the audit queue and closes the store.
func (id *identity) close() {
	if id == nil {
		return
	}
	id.auditMu.Lock()
	if id.audits != nil && !id.auditClosed {
		id.auditClosed = true
		close(id.audits)
	}
	id.auditMu.Unlock()
	id.auditWG.Wait()
	if id.store != nil {
		_ = id.store.Close()
	}
}

// rightsStaleness is rights.max_staleness; 0 (no cache) without a rights
// section.
func rightsStaleness(cfg *config.Config) time.Duration {
	if cfg.Rights == nil {
		return 0
	}
	return cfg.Rights.MaxStaleness.D()
}
