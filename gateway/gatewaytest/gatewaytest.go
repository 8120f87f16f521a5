// Package gatewaytest builds gateway pipelines for tests. New sets what
// most tests share once: the default policy engine over the pipeline's
// declarations, the request and event bounds below, and a bbolt store in
// the test's temporary directory when write safety or tasks need one.
// Options set what differs, in order:
//
//	p := gatewaytest.New(t, gatewaytest.WithDecls(decls), gatewaytest.WithAuth(auth),
//		gatewaytest.WithCatalog(cat), gatewaytest.With(gateway.Options{ListTTL: time.Second}))
//
// Only tests import it.
package gatewaytest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/sealing"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// The bounds a pipeline gets unless an option sets others.
const (
	MaxBodyBytes     = 1 << 16 // bytes of a request body
	MaxJSONDepth     = 16
	MaxSSEEventBytes = 1 << 20 // bytes of one server-sent event
)

// WaitInFlight is how long write safety waits for a duplicate call still
// in flight (gateway.WriteSafety.WaitInFlight) unless WithWrites changes it.
const WaitInFlight = 100 * time.Millisecond

// An Option sets one difference from the defaults; options apply in order.
type Option func(*config)

type config struct {
	opts     gateway.Options
	dirs     []string
	decider  gateway.Decider
	store    *boltstore.Store
	writes   []func(*gateway.WriteSafety)
	writesOn bool
	taskTTL  time.Duration
	tasksOn  bool
}

// New returns a pipeline built from the defaults and opts. Unless
// WithDecider gives another, it decides with the default policy over the
// pipeline's declarations (and the policy directories of WithPolicyDirs).
func New(tb testing.TB, opts ...Option) *gateway.Pipeline {
	tb.Helper()
	c := config{opts: gateway.Options{MaxBodyBytes: MaxBodyBytes, MaxJSONDepth: MaxJSONDepth, MaxSSEEventBytes: MaxSSEEventBytes}}
	for _, o := range opts {
		o(&c)
	}
	if c.writesOn {
		st := c.storeFor(tb)
		w := &gateway.WriteSafety{Replays: st, Actions: st, Audit: st, WaitInFlight: WaitInFlight}
		for _, f := range c.writes {
			f(w)
		}
		c.opts.Writes = w
	}
	if c.tasksOn {
		c.opts.Tasks = gateway.TaskOptions{Enabled: true, Store: c.storeFor(tb), MaxTTL: c.taskTTL}
	}
	d := c.decider
	if d == nil {
		d = Engine(tb, c.opts.Declarations, c.dirs...)
	}
	return gateway.New(d, c.opts)
}

func (c *config) storeFor(tb testing.TB) *boltstore.Store {
	if c.store == nil {
		c.store = Store(tb)
	}
	return c.store
}

// WithDecls sets the per-tool declarations, of the pipeline and of the
// default policy.
func WithDecls(d map[string]map[string]policy.ToolDeclaration) Option {
	return func(c *config) { c.opts.Declarations = d }
}

// WithPolicyDirs adds policy directories to the default policy.
func WithPolicyDirs(dirs ...string) Option {
	return func(c *config) { c.dirs = append(c.dirs, dirs...) }
}

// WithDecider decides with d instead of the default policy.
func WithDecider(d gateway.Decider) Option {
	return func(c *config) { c.decider = d }
}

// WithAuth authenticates callers with a.
func WithAuth(a gateway.Authenticator) Option {
	return func(c *config) { c.opts.Authenticator = a }
}

// WithCatalog answers tools/list from cat and checks arguments against it.
func WithCatalog(cat gateway.ToolCatalog) Option {
	return func(c *config) { c.opts.Catalog = cat }
}

// WithLimits sets the rate limits, slots and loop brake.
func WithLimits(l *gateway.Limits) Option {
	return func(c *config) { c.opts.Limits = l }
}

// WithMetrics records metrics into reg (a new registry when nil).
func WithMetrics(reg prometheus.Registerer) Option {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	return func(c *config) { c.opts.Metrics = gateway.NewMetrics(reg) }
}

// WithStore makes write safety and tasks keep their state in st instead
// of a store of their own.
func WithStore(st *boltstore.Store) Option {
	return func(c *config) { c.store = st }
}

// WithWrites turns write safety on, on the store (replays, actions,
// audit), waiting WaitInFlight for a duplicate in flight; each edit then
// changes the settings, in order.
func WithWrites(edits ...func(*gateway.WriteSafety)) Option {
	return func(c *config) {
		c.writesOn = true
		c.writes = append(c.writes, edits...)
	}
}

// WithTasks turns MCP tasks on, on the store, with tasks living at most
// maxTTL.
func WithTasks(maxTTL time.Duration) Option {
	return func(c *config) { c.tasksOn, c.taskTTL = true, maxTTL }
}

// With sets every field of o that is not its zero value (a bound of 0
// keeps the default).
func With(o gateway.Options) Option {
	return func(c *config) {
		src, dst := reflect.ValueOf(o), reflect.ValueOf(&c.opts).Elem()
		for i := range src.NumField() {
			if f := src.Field(i); !f.IsZero() {
				dst.Field(i).Set(f)
			}
		}
	}
}

// Engine returns the default policy over decls and the policy
// directories dirs.
func Engine(tb testing.TB, decls map[string]map[string]policy.ToolDeclaration, dirs ...string) *policy.Engine {
	tb.Helper()
	eng, err := policy.New(context.Background(), policy.Options{Dirs: dirs, Declarations: decls})
	if err != nil {
		tb.Fatal(err)
	}
	return eng
}

// Store opens a bbolt store in the test's temporary directory, closed when
// the test ends.
func Store(tb testing.TB) *boltstore.Store {
	tb.Helper()
	st, err := boltstore.Open(filepath.Join(tb.TempDir(), "state.db"), boltstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// Sealer returns a sealer with a new key set (confirm tokens, request
// state).
func Sealer(tb testing.TB) *sealing.Sealer {
	tb.Helper()
	ks, err := sealing.GenerateKeySet()
	if err != nil {
		tb.Fatal(err)
	}
	return sealing.NewSealer(ks)
}

// AllowAll is a decider that allows every message, for tests of what
// happens around the decision.
type AllowAll struct{}

// Decide allows.
func (AllowAll) Decide(context.Context, *policy.Input) (*policy.Decision, error) {
	return &policy.Decision{Allow: true}, nil
}

// CallerAuth admits "Bearer tok-<n>" as caller n (tenant-<n>, subject-<n>,
// conn-<n>, the right right-<n>), written into the exchange's storage
// (AuthenticateInto) as internal/authn does; "Bearer tok-anon" is
// admitted unauthenticated (no assertion is forwarded for it).
type CallerAuth struct{}

func (CallerAuth) Authenticate(ctx context.Context, r *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	pr := new(policy.Principal)
	if f := (CallerAuth{}).AuthenticateInto(ctx, r, pr); f != nil {
		return nil, f
	}
	return pr, nil
}

func (CallerAuth) AuthenticateInto(_ context.Context, r *gateway.Request, pr *policy.Principal) *gateway.AuthFailure {
	n, ok := strings.CutPrefix(r.Header.Get("authorization"), "Bearer tok-")
	if !ok {
		return &gateway.AuthFailure{Status: 401, Code: gateway.AuthInvalidToken, Message: "no token"}
	}
	if n == "anon" {
		*pr = policy.Principal{}
		return nil
	}
	*pr = policy.Principal{Authenticated: true, Tenant: "tenant-" + n, Subject: "subject-" + n, Connection: "conn-" + n,
		Rights: []string{"right-" + n}}
	return nil
}

func (CallerAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

// PlainAsserter asserts the principal as plain text, so that a test can
// tell whose request an upstream got or a mutation is for.
type PlainAsserter struct{}

func (PlainAsserter) Assert(p *policy.Principal, upstream, _ string) (string, error) {
	return PlainAssertion(p.Tenant, p.Subject, p.Connection, strings.Join(p.Rights, ","), upstream), nil
}

// PlainAssertion is PlainAsserter's assertion of those fields.
func PlainAssertion(tenant, subject, connection, rights, upstream string) string {
	return strings.Join([]string{tenant, subject, connection, rights, upstream}, "|")
}

// CallerAssertion is PlainAsserter's assertion for CallerAuth's caller n
// on upstream ("" for the unauthenticated caller).
func CallerAssertion(n, upstream string) string {
	if n == "anon" {
		return ""
	}
	return PlainAssertion("tenant-"+n, "subject-"+n, "conn-"+n, "right-"+n, upstream)
}

// Observed is a policy engine with decision logs and a shadow policy on,
// for tests of what the records name: the default policy over decls
// decides; every decision goes, unmasked but for the credential id, to
// a real HTTP decision-log service, and to a shadow policy that denies
// each call with the reason code seen_<subject>_<nonce> (its input's
// principal.subject and message.arguments.nonce, '-' as '_'; seen_none
// without them), so that each logged difference says whose input the
// shadow evaluated.
type Observed struct {
	*policy.Engine
	srv    *httptest.Server
	mu     sync.Mutex
	events []DecisionEvent
	log    bytes.Buffer
}

// A DecisionEvent is what one decision-log event names.
type DecisionEvent struct {
	ID        string `json:"decision_id"`
	Principal struct {
		Tenant, Subject, Connection string
	}
	Method, Tool string
	Arguments    map[string]any
}

const shadowPolicy = `package mcpgate

default code := "seen_none"

code := concat("_", ["seen", replace(input.principal.subject, "-", "_"), replace(input.message.arguments.nonce, "-", "_")])

decision := {"allow": false, "reasons": [{"code": code, "cause": "The shadow names its input."}]}
`

// NewObserved starts the engine, closed when the test ends.
func NewObserved(tb testing.TB, decls map[string]map[string]policy.ToolDeclaration) *Observed {
	tb.Helper()
	o := &Observed{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var batch []struct {
			ID    string `json:"decision_id"`
			Input struct {
				Principal struct{ Tenant, Subject, Connection string }
				Message   struct {
					Method, Name string
					Arguments    map[string]any
				}
			}
		}
		if err := json.NewDecoder(zr).Decode(&batch); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, e := range batch {
			ev := DecisionEvent{ID: e.ID, Principal: e.Input.Principal, Method: e.Input.Message.Method, Tool: e.Input.Message.Name, Arguments: e.Input.Message.Arguments}
			o.events = append(o.events, ev)
		}
	}))
	tb.Cleanup(o.srv.Close)
	dir := tb.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "shadow.rego"), []byte(shadowPolicy), 0o600); err != nil {
		tb.Fatal(err)
	}
	eng, err := policy.New(context.Background(), policy.Options{
		Declarations: decls,
		Logger:       slog.New(slog.NewJSONHandler(lockedWriter{o}, nil)),
		DecisionLogs: &policy.DecisionLogOptions{URL: o.srv.URL + "/logs", MaskPolicy: "package system.log\n\nmask contains \"/input/principal/credential_id\"\n"},
		Shadow:       &policy.ShadowOptions{Dirs: []string{dir}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { eng.Close(context.Background()) })
	o.Engine = eng
	return o
}

type lockedWriter struct{ o *Observed }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	return w.o.log.Write(b)
}

// Records waits for the queued decisions and returns the decision-log
// events and, by decision id, the reason codes of the shadow's decisions.
func (o *Observed) Records(tb testing.TB) ([]DecisionEvent, map[string][]string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.FlushDecisionLogs(ctx); err != nil {
		tb.Fatal(err)
	}
	if err := o.WaitShadow(ctx); err != nil {
		tb.Fatal(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	shadow := map[string][]string{}
	for _, line := range bytes.Split(o.log.Bytes(), []byte("\n")) {
		var l struct {
			Msg   string   `json:"msg"`
			ID    string   `json:"decision_id"`
			Codes []string `json:"shadow_codes"`
		}
		if json.Unmarshal(line, &l) == nil && l.Msg == "shadow policy decides differently" {
			shadow[l.ID] = l.Codes
		}
	}
	return slices.Clone(o.events), shadow
}

// ShadowCode is the code the shadow gives a call of subject with nonce.
func ShadowCode(subject, nonce string) string {
	return strings.ReplaceAll("seen_"+subject+"_"+nonce, "-", "_")
}
