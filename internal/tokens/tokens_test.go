package tokens_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
	"github.com/mcpgate/mcpgate/store/boltstore"
)

// memRights is an in-memory rights source for tests: live rights by
// tenant and subject, and a switch that makes every lookup fail (the
// source is down).
type memRights struct {
	mu   sync.Mutex
	live map[[2]string]rights.Live
	down bool
}

func (m *memRights) Lookup(_ context.Context, tenant, subject string) (rights.Live, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return rights.Live{}, errors.New("rights source down")
	}
	l, ok := m.live[[2]string{tenant, subject}]
	if !ok {
		return rights.Live{Active: false}, nil
	}
	l.Rights = slices.Clone(l.Rights)
	return l, nil
}

func (m *memRights) set(tenant, subject string, active bool, rs ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live[[2]string{tenant, subject}] = rights.Live{Active: active, Rights: rs}
}

func (m *memRights) setDown(down bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.down = down
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// lockedBuffer collects the audit log.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	svc    *tokens.Service
	store  *boltstore.Store
	path   string
	rights *memRights
	clock  *clock
	log    *lockedBuffer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mcpgate.db")
	st, err := boltstore.Open(path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fixture{
		store:  st,
		path:   path,
		rights: &memRights{live: map[[2]string]rights.Live{}},
		clock:  &clock{now: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)},
		log:    &lockedBuffer{},
	}
	f.rights.set("acme", "alice", true, "tickets:read", "tickets:write", "mail:send")
	f.rights.set("acme", "carol", true, "tickets:read")
	f.rights.set("acme", "dave", false, "tickets:read")
	f.rights.set("acme", "erin", true)
	f.rights.set("globex", "bob", true, "tickets:read")
	aud := store.NewAuditor(st, store.NewAuditLogger(f.log), store.WithAuditClock(f.clock.Now))
	f.svc, err = tokens.New(tokens.Options{Store: st, Rights: f.rights, Auditor: aud, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var (
	alice       = tokens.Actor{Role: tokens.RolePerson, Tenant: "acme", Subject: "alice", Name: "cli"}
	carol       = tokens.Actor{Role: tokens.RolePerson, Tenant: "acme", Subject: "carol"}
	bob         = tokens.Actor{Role: tokens.RolePerson, Tenant: "globex", Subject: "bob"}
	acmeAdmin   = tokens.Actor{Role: tokens.RoleTenantAdmin, Tenant: "acme", Subject: "ada"}
	acmeStatic  = tokens.Actor{Role: tokens.RoleTenantAdmin, Tenant: "acme", Name: "bootstrap-acme"}
	globexAdmin = tokens.Actor{Role: tokens.RoleTenantAdmin, Tenant: "globex", Subject: "gus"}
	platform    = tokens.Actor{Role: tokens.RolePlatformAdmin, Name: "bootstrap"}
)

// wantErr asserts err is a *tokens.Error wrapping sentinel with code.
func wantErr(t *testing.T, err, sentinel error, code string) *tokens.Error {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
	var e *tokens.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not a *tokens.Error", err)
	}
	if code != "" && e.Code != code {
		t.Fatalf("code %q, want %q (%v)", e.Code, code, err)
	}
	if e.Message == "" || e.Fix == "" {
		t.Errorf("error without message or fix: %+v", e)
	}
	return e
}

func TestCreateVerifyAndStorage(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Name: "laptop agent"})
	if err != nil {
		t.Fatal(err)
	}
	tok := c.Token
	if !tokens.HasPrefix(c.Secret) || len(c.Secret) != tokens.SecretLen || tokens.SecretLen != len("mcpg_")+43 {
		t.Errorf("secret %q: wrong shape", c.Secret)
	}
	if !tokens.ValidID(tok.ID) || !strings.HasPrefix(tok.ID, "tok_") || len(tok.ID) != 36 {
		t.Errorf("id %q: wrong shape", tok.ID)
	}
	if tok.Tenant != "acme" || tok.Creator != "alice" || tok.Name != "laptop agent" ||
		!slices.Equal(tok.Rights, []string{"tickets:read", "tickets:write", "mail:send"}) {
		t.Errorf("token = %+v", tok)
	}
	if !tok.CreatedAt.Equal(f.clock.Now()) || !tok.ExpiresAt.Equal(f.clock.Now().Add(30*24*time.Hour)) {
		t.Errorf("created %s expires %s, want now and now+30d", tok.CreatedAt, tok.ExpiresAt)
	}

	// The store holds only the hash: the stored token carries it, and the
	// secret appears nowhere in the database file.
	stored, err := f.store.TokenByID(ctx, tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.Hash != store.HashSecret(c.Secret) {
		t.Error("stored hash is not the SHA-256 of the secret")
	}
	raw, err := os.ReadFile(f.path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(c.Secret)) || bytes.Contains(raw, []byte(c.Secret[len(tokens.Prefix):])) {
		t.Error("the secret is in the store file")
	}
	if !bytes.Contains(raw, []byte(tok.ID)) {
		t.Error("the token id is not in the store file (wrong file read?)")
	}

	got, err := f.svc.Verify(ctx, c.Secret)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if got.ID != tok.ID || got.Creator != "alice" {
		t.Errorf("Verify = %+v", got)
	}

	// Two tokens never share id or secret.
	c2, err := f.svc.Create(ctx, alice, tokens.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if c2.Secret == c.Secret || c2.Token.ID == tok.ID {
		t.Error("second token repeats the first")
	}
}

func TestCreateScope(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		actor   tokens.Actor
		req     tokens.CreateRequest
		err     error
		code    string
		tenant  string
		creator string
	}{
		{"person for self, explicit", alice, tokens.CreateRequest{Tenant: "acme", Subject: "alice"}, nil, "", "acme", "alice"},
		{"person for another subject", alice, tokens.CreateRequest{Subject: "carol"}, tokens.ErrForbidden, "not_your_token", "", ""},
		{"person for another tenant", alice, tokens.CreateRequest{Tenant: "globex"}, tokens.ErrForbidden, "not_your_token", "", ""},
		{"tenant admin for a subject of the tenant", acmeAdmin, tokens.CreateRequest{Subject: "carol"}, nil, "", "acme", "carol"},
		{"tenant admin, explicit own tenant", acmeAdmin, tokens.CreateRequest{Tenant: "acme", Subject: "carol"}, nil, "", "acme", "carol"},
		{"tenant admin for another tenant", acmeAdmin, tokens.CreateRequest{Tenant: "globex", Subject: "bob"}, tokens.ErrForbidden, "other_tenant", "", ""},
		{"static tenant admin without subject", acmeStatic, tokens.CreateRequest{}, tokens.ErrInvalid, "subject_required", "", ""},
		{"static tenant admin with subject", acmeStatic, tokens.CreateRequest{Subject: "alice"}, nil, "", "acme", "alice"},
		{"platform admin, any tenant", platform, tokens.CreateRequest{Tenant: "globex", Subject: "bob"}, nil, "", "globex", "bob"},
		{"platform admin without tenant", platform, tokens.CreateRequest{Subject: "bob"}, tokens.ErrInvalid, "tenant_and_subject_required", "", ""},
		{"platform admin without subject", platform, tokens.CreateRequest{Tenant: "globex"}, tokens.ErrInvalid, "tenant_and_subject_required", "", ""},
		{"unknown role", tokens.Actor{Role: "owner", Tenant: "acme", Subject: "alice"}, tokens.CreateRequest{}, tokens.ErrForbidden, "unknown_role", "", ""},
		{"person without subject", tokens.Actor{Role: tokens.RolePerson, Tenant: "acme"}, tokens.CreateRequest{}, tokens.ErrForbidden, "unknown_role", "", ""},
		{"tenant admin without tenant", tokens.Actor{Role: tokens.RoleTenantAdmin, Subject: "x"}, tokens.CreateRequest{Tenant: "acme", Subject: "alice"}, tokens.ErrForbidden, "unknown_role", "", ""},
		{"tenant with NUL", platform, tokens.CreateRequest{Tenant: "ac\x00me", Subject: "alice"}, tokens.ErrInvalid, "invalid_tenant", "", ""},
		{"subject too long", platform, tokens.CreateRequest{Tenant: "acme", Subject: strings.Repeat("a", store.MaxIDLen+1)}, tokens.ErrInvalid, "invalid_subject", "", ""},
		{"unknown subject is not active", platform, tokens.CreateRequest{Tenant: "acme", Subject: "nobody"}, tokens.ErrForbidden, "inactive", "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := f.svc.Create(ctx, tc.actor, tc.req)
			if tc.err != nil {
				wantErr(t, err, tc.err, tc.code)
				if c.Secret != "" || c.Token.ID != "" {
					t.Errorf("refused create returned %+v", c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Token.Tenant != tc.tenant || c.Token.Creator != tc.creator {
				t.Errorf("tenant %q creator %q, want %q %q", c.Token.Tenant, c.Token.Creator, tc.tenant, tc.creator)
			}
		})
	}
}

func TestCreateRightsAndLifetime(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	t.Run("subset, order kept, repeats dropped", func(t *testing.T) {
		c, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Rights: []string{"mail:send", "tickets:read", "mail:send"}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(c.Token.Rights, []string{"mail:send", "tickets:read"}) {
			t.Errorf("rights = %q", c.Token.Rights)
		}
	})
	t.Run("more than live is refused, naming them", func(t *testing.T) {
		_, err := f.svc.Create(ctx, acmeAdmin, tokens.CreateRequest{Subject: "carol",
			Rights: []string{"tickets:read", "tickets:write", "admin:all"}})
		e := wantErr(t, err, tokens.ErrForbidden, "rights_not_held")
		if !slices.Equal(e.Missing, []string{"tickets:write", "admin:all"}) {
			t.Errorf("missing = %q", e.Missing)
		}
		if !strings.Contains(e.Message, `"tickets:write"`) || !strings.Contains(e.Message, `"admin:all"`) {
			t.Errorf("message %q does not name the rights", e.Message)
		}
	})
	t.Run("inactive person", func(t *testing.T) {
		_, err := f.svc.Create(ctx, acmeAdmin, tokens.CreateRequest{Subject: "dave"})
		e := wantErr(t, err, tokens.ErrForbidden, "inactive")
		if !strings.Contains(e.Message, "not active") {
			t.Errorf("message %q", e.Message)
		}
	})
	t.Run("no live rights", func(t *testing.T) {
		_, err := f.svc.Create(ctx, acmeAdmin, tokens.CreateRequest{Subject: "erin"})
		wantErr(t, err, tokens.ErrForbidden, "no_rights")
	})
	t.Run("source down", func(t *testing.T) {
		f.rights.setDown(true)
		defer f.rights.setDown(false)
		_, err := f.svc.Create(ctx, alice, tokens.CreateRequest{})
		wantErr(t, err, tokens.ErrUnavailable, "rights_unavailable")
	})
	t.Run("bad rights", func(t *testing.T) {
		for _, rs := range [][]string{{""}, {"a b"}, {"a\nb"}, {"\xff"}, slices.Repeat([]string{"x"}, tokens.MaxRights+1)} {
			_, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Rights: rs})
			wantErr(t, err, tokens.ErrInvalid, "invalid_rights")
		}
	})
	t.Run("bad names", func(t *testing.T) {
		for _, n := range []string{strings.Repeat("n", tokens.MaxNameLen+1), "a\x00b", "tab\there", "\xff"} {
			_, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Name: n})
			wantErr(t, err, tokens.ErrInvalid, "invalid_name")
		}
		if _, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Name: "Gérard's agent ✓"}); err != nil {
			t.Errorf("unicode name: %v", err)
		}
	})
	t.Run("lifetimes", func(t *testing.T) {
		c, err := f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if d := c.Token.ExpiresAt.Sub(c.Token.CreatedAt); d != time.Hour {
			t.Errorf("lifetime %s, want 1h", d)
		}
		if _, err := f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: 90 * 24 * time.Hour}); err != nil {
			t.Errorf("max lifetime: %v", err)
		}
		_, err = f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: 90*24*time.Hour + time.Second})
		wantErr(t, err, tokens.ErrInvalid, "expiry_too_long")
		_, err = f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: -time.Second})
		wantErr(t, err, tokens.ErrInvalid, "invalid_expiry")
		for _, d := range []time.Duration{time.Nanosecond, time.Millisecond, tokens.MinTTL - 1} {
			_, err = f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: d})
			wantErr(t, err, tokens.ErrInvalid, "invalid_expiry")
		}
		if _, err := f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: tokens.MinTTL}); err != nil {
			t.Errorf("min lifetime: %v", err)
		}
	})
}

func TestListAndRevokeScope(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	mk := func(a tokens.Actor, r tokens.CreateRequest) store.Token {
		t.Helper()
		c, err := f.svc.Create(ctx, a, r)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Second)
		return c.Token
	}
	a1 := mk(alice, tokens.CreateRequest{Name: "a1"})
	c1 := mk(carol, tokens.CreateRequest{Name: "c1"})
	b1 := mk(bob, tokens.CreateRequest{Name: "b1"})
	a2 := mk(acmeAdmin, tokens.CreateRequest{Subject: "alice", Name: "a2"})

	ids := func(ts []store.Token) []string {
		var out []string
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	lists := []struct {
		name   string
		actor  tokens.Actor
		filter store.TokenFilter
		want   []string
		err    error
	}{
		{"platform admin sees all", platform, store.TokenFilter{}, []string{a1.ID, c1.ID, b1.ID, a2.ID}, nil},
		{"platform admin filters", platform, store.TokenFilter{Tenant: "acme", Creator: "alice"}, []string{a1.ID, a2.ID}, nil},
		{"tenant admin sees its tenant", acmeAdmin, store.TokenFilter{}, []string{a1.ID, c1.ID, a2.ID}, nil},
		{"tenant admin filters by creator", acmeAdmin, store.TokenFilter{Creator: "carol"}, []string{c1.ID}, nil},
		{"tenant admin of another tenant", globexAdmin, store.TokenFilter{}, []string{b1.ID}, nil},
		{"tenant admin asks for another tenant", globexAdmin, store.TokenFilter{Tenant: "acme"}, nil, tokens.ErrForbidden},
		{"person sees own", alice, store.TokenFilter{}, []string{a1.ID, a2.ID}, nil},
		{"person asks for another creator", alice, store.TokenFilter{Creator: "carol"}, nil, tokens.ErrForbidden},
		{"person asks for another tenant", alice, store.TokenFilter{Tenant: "globex"}, nil, tokens.ErrForbidden},
		{"bad role", tokens.Actor{Role: "x"}, store.TokenFilter{}, nil, tokens.ErrForbidden},
	}
	for _, tc := range lists {
		t.Run("list/"+tc.name, func(t *testing.T) {
			ts, err := f.svc.List(ctx, tc.actor, tc.filter)
			if tc.err != nil {
				wantErr(t, err, tc.err, "")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(ts), tc.want) {
				t.Errorf("ids = %q, want %q", ids(ts), tc.want)
			}
		})
	}

	revokes := []struct {
		name  string
		actor tokens.Actor
		id    string
		err   error
	}{
		{"person, another's token", carol, a1.ID, tokens.ErrNotFound},
		{"person, another tenant's token", alice, b1.ID, tokens.ErrNotFound},
		{"tenant admin, another tenant's token", globexAdmin, a1.ID, tokens.ErrNotFound},
		{"unknown id", platform, "tok_00000000000000000000000000000000", tokens.ErrNotFound},
		{"malformed id", platform, "tok_../../x", tokens.ErrNotFound},
		{"empty id", platform, "", tokens.ErrNotFound},
		{"person, own token", alice, a1.ID, nil},
		{"tenant admin, token of its tenant", acmeAdmin, c1.ID, nil},
		{"platform admin, any token", platform, b1.ID, nil},
	}
	for _, tc := range revokes {
		t.Run("revoke/"+tc.name, func(t *testing.T) {
			got, err := f.svc.Revoke(ctx, tc.actor, tc.id)
			if tc.err != nil {
				wantErr(t, err, tc.err, "token_not_found")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != tc.id || got.RevokedAt == nil || got.Active(f.clock.Now()) {
				t.Errorf("revoked token = %+v", got)
			}
		})
	}
	t.Run("revoke twice keeps the first time", func(t *testing.T) {
		first, err := f.store.TokenByID(ctx, a1.ID)
		if err != nil {
			t.Fatal(err)
		}
		f.clock.Advance(time.Hour)
		again, err := f.svc.Revoke(ctx, platform, a1.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !again.RevokedAt.Equal(*first.RevokedAt) {
			t.Errorf("revoked at %s, first %s", again.RevokedAt, first.RevokedAt)
		}
	})
	t.Run("untouched tokens stay active", func(t *testing.T) {
		got, err := f.store.TokenByID(ctx, a2.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.RevokedAt != nil {
			t.Error("a2 revoked")
		}
	})
}

func TestVerifyRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c, err := f.svc.Create(ctx, alice, tokens.CreateRequest{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.svc.Create(ctx, alice, tokens.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}

	malformed := []string{
		"",
		"mcpg_",
		c.Secret[:len(c.Secret)-1],
		c.Secret + "A",
		"MCPG_" + c.Secret[5:],
		"xxxx_" + c.Secret[5:],
		c.Secret[:len(c.Secret)-1] + "=",
		"mcpg_" + strings.Repeat("A", 42) + "B", // non-canonical: the unused low bits are set
		"mcpg_" + strings.Repeat("+", 43),       // standard, not URL, alphabet
		"eyJhbGciOiJSUzI1NiJ9.e30.sig",
	}
	for _, raw := range malformed {
		_, err := f.svc.Verify(ctx, raw)
		wantErr(t, err, tokens.ErrInvalidToken, "invalid_token")
		if errors.Is(err, tokens.ErrRevoked) || errors.Is(err, tokens.ErrExpired) {
			t.Errorf("%q: %v", raw, err)
		}
	}
	// Well-formed but never issued.
	_, err = f.svc.Verify(ctx, "mcpg_"+strings.Repeat("A", 43))
	wantErr(t, err, tokens.ErrInvalidToken, "invalid_token")

	// Revocation takes effect on the next call.
	if _, err := f.svc.Verify(ctx, other.Secret); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Revoke(ctx, alice, other.Token.ID); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Verify(ctx, other.Secret)
	wantErr(t, err, tokens.ErrRevoked, "token_revoked")
	if !errors.Is(err, tokens.ErrInvalidToken) {
		t.Error("revoked does not match ErrInvalidToken")
	}

	// Expiry.
	f.clock.Advance(time.Hour - time.Microsecond)
	if _, err := f.svc.Verify(ctx, c.Secret); err != nil {
		t.Fatalf("just before expiry: %v", err)
	}
	f.clock.Advance(time.Microsecond)
	_, err = f.svc.Verify(ctx, c.Secret)
	wantErr(t, err, tokens.ErrExpired, "token_expired")
	if !errors.Is(err, tokens.ErrInvalidToken) || errors.Is(err, tokens.ErrRevoked) {
		t.Errorf("expired: %v", err)
	}

	// Store down: unavailable, never valid.
	if err := f.store.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = f.svc.Verify(ctx, c.Secret)
	wantErr(t, err, tokens.ErrUnavailable, "unavailable")
	if errors.Is(err, tokens.ErrInvalidToken) {
		t.Error("store failure reported as an invalid token")
	}
	_, err = f.svc.List(ctx, platform, store.TokenFilter{})
	wantErr(t, err, tokens.ErrUnavailable, "unavailable")
}

func TestAudit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c, err := f.svc.Create(ctx, tokens.Actor{Role: tokens.RolePerson, Tenant: "acme", Subject: "alice", Name: "mcpgate-cli"},
		tokens.CreateRequest{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Second)
	if _, err := f.svc.Create(ctx, alice, tokens.CreateRequest{Rights: []string{"root"}}); err == nil {
		t.Fatal("create with rights not held succeeded")
	}
	f.clock.Advance(time.Second)
	if _, err := f.svc.Create(ctx, bob, tokens.CreateRequest{Tenant: "acme"}); err == nil {
		t.Fatal("cross-tenant create succeeded")
	}
	f.clock.Advance(time.Second)
	if _, err := f.svc.Revoke(ctx, bob, c.Token.ID); err == nil {
		t.Fatal("cross-tenant revoke succeeded")
	}
	f.clock.Advance(time.Second)
	if _, err := f.svc.Revoke(ctx, platform, c.Token.ID); err != nil {
		t.Fatal(err)
	}
	f.rights.setDown(true)
	f.clock.Advance(time.Second)
	if _, err := f.svc.Create(ctx, alice, tokens.CreateRequest{}); err == nil {
		t.Fatal("create with the rights source down succeeded")
	}

	recs, err := f.store.QueryAudit(ctx, store.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(recs) // oldest first
	type want struct {
		tenant, subject, client, action, outcome string
		ids                                      map[string]string
	}
	wants := []want{
		{"acme", "alice", "mcpgate-cli", "tokens.create", "ok",
			map[string]string{"token_id": c.Token.ID, "creator": "alice", "role": "person"}},
		{"acme", "alice", "cli", "tokens.create", "denied",
			map[string]string{"creator": "alice", "role": "person", "reason": "rights_not_held"}},
		{"globex", "bob", "", "tokens.create", "denied",
			map[string]string{"role": "person", "reason": "not_your_token"}},
		{"globex", "bob", "", "tokens.revoke", "denied",
			map[string]string{"token_id": c.Token.ID, "role": "person", "reason": "token_not_found"}},
		{"acme", "bootstrap", "", "tokens.revoke", "ok",
			map[string]string{"token_id": c.Token.ID, "creator": "alice", "role": "platform_admin"}},
		{"acme", "alice", "cli", "tokens.create", "error",
			map[string]string{"creator": "alice", "role": "person", "reason": "rights_unavailable"}},
	}
	if len(recs) != len(wants) {
		t.Fatalf("%d audit records, want %d: %+v", len(recs), len(wants), recs)
	}
	for i, w := range wants {
		r := recs[i]
		got := want{r.Tenant, r.Subject, r.Client, r.Action, r.Outcome, r.PublicIDs}
		if r.Channel != store.ChannelAdmin || got.tenant != w.tenant || got.subject != w.subject ||
			got.client != w.client || got.action != w.action || got.outcome != w.outcome ||
			!equalMaps(got.ids, w.ids) {
			t.Errorf("record %d = %+v\nwant %+v", i, r, w)
		}
	}
	all, _ := json.Marshal(recs)
	if strings.Contains(string(all), c.Secret) || strings.Contains(f.log.String(), c.Secret) {
		t.Error("the secret is in the audit records or the audit log")
	}
	if n := strings.Count(f.log.String(), `"msg":"audit"`); n != len(wants) {
		t.Errorf("%d audit log lines, want %d", n, len(wants))
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestNewOptions(t *testing.T) {
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "s.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	aud := store.NewAuditor(st, nil)
	src := &memRights{live: map[[2]string]rights.Live{}}
	if _, err := tokens.New(tokens.Options{}); err == nil ||
		!strings.Contains(err.Error(), "store") || !strings.Contains(err.Error(), "rights") || !strings.Contains(err.Error(), "auditor") {
		t.Errorf("New(empty) = %v, want every missing part named", err)
	}
	for _, o := range []tokens.Options{
		{MaxTTL: -time.Hour},
		{MaxTTL: time.Hour, DefaultTTL: 2 * time.Hour},
		{DefaultTTL: -time.Hour},
	} {
		o.Store, o.Rights, o.Auditor = st, src, aud
		if _, err := tokens.New(o); err == nil {
			t.Errorf("New(max %s, default %s) succeeded", o.MaxTTL, o.DefaultTTL)
		}
	}
	s, err := tokens.New(tokens.Options{Store: st, Rights: src, Auditor: aud, MaxTTL: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxTTL() != 24*time.Hour || s.DefaultTTL() != 24*time.Hour {
		t.Errorf("max %s default %s, want 24h both (default capped at max)", s.MaxTTL(), s.DefaultTTL())
	}
	s, err = tokens.New(tokens.Options{Store: st, Rights: src, Auditor: aud})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxTTL() != 90*24*time.Hour || s.DefaultTTL() != 30*24*time.Hour {
		t.Errorf("defaults: max %s default %s", s.MaxTTL(), s.DefaultTTL())
	}
}

func TestHasPrefix(t *testing.T) {
	for raw, want := range map[string]bool{"mcpg_x": true, "mcpg_": true, "MCPG_x": false, "eyJ": false, "": false} {
		if got := tokens.HasPrefix(raw); got != want {
			t.Errorf("HasPrefix(%q) = %v", raw, got)
		}
	}
}
