package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// memAudit is an AuditStore in memory.
type memAudit struct {
	mu      sync.Mutex
	recs    []store.AuditRecord
	ctxErrs []error
	prunes  []time.Time
	fail    error
	pruned  chan time.Time
}

func (m *memAudit) AppendAudit(ctx context.Context, r store.AuditRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ctxErrs = append(m.ctxErrs, ctx.Err())
	if m.fail != nil {
		return m.fail
	}
	m.recs = append(m.recs, r)
	return nil
}

func (m *memAudit) QueryAudit(context.Context, store.AuditQuery) ([]store.AuditRecord, error) {
	return nil, errors.ErrUnsupported
}

func (m *memAudit) PruneAudit(_ context.Context, before time.Time) (int, error) {
	m.mu.Lock()
	m.prunes = append(m.prunes, before)
	fail := m.fail
	m.mu.Unlock()
	if m.pruned != nil {
		m.pruned <- before
	}
	if fail != nil {
		return 0, fail
	}
	return 3, nil
}

var (
	clockTime = time.Date(2026, 7, 28, 10, 0, 0, 123456789, time.UTC)
	clock     = func() time.Time { return clockTime }
	snake     = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
)

func logLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func checkSnake(t *testing.T, m map[string]any) {
	t.Helper()
	for k, v := range m {
		if !snake.MatchString(k) {
			t.Errorf("log key %q is not snake_case", k)
		}
		if sub, ok := v.(map[string]any); ok {
			checkSnake(t, sub)
		}
	}
}

func TestAuditorRecord(t *testing.T) {
	mem := &memAudit{}
	var buf bytes.Buffer
	a := store.NewAuditor(mem, store.NewAuditLogger(&buf), store.WithAuditClock(clock))

	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the client hung up: the record must still be stored
	got, err := a.Record(ctx, store.AuditRecord{
		Channel: store.ChannelMCP, Tenant: "acme", Connection: "tok-1", Client: "claude",
		Subject: "alice", Action: "tickets.create", Outcome: "ok", DecisionID: "dec-1",
		PublicIDs: map[string]string{"ticket_id": "T-1", "contact_id": "C-9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(got.ID) {
		t.Errorf("ID = %q, want 32 hex digits", got.ID)
	}
	if want := clockTime.Truncate(time.Microsecond); !got.Time.Equal(want) {
		t.Errorf("Time = %v, want %v", got.Time, want)
	}
	if len(mem.recs) != 1 || mem.recs[0].ID != got.ID {
		t.Fatalf("stored %+v, want the returned record", mem.recs)
	}
	if mem.ctxErrs[0] != nil {
		t.Errorf("store write saw a cancelled context: %v", mem.ctxErrs[0])
	}

	lines := logLines(t, &buf)
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1", len(lines))
	}
	l := lines[0]
	checkSnake(t, l)
	want := map[string]any{
		"msg": "audit", "level": "INFO", "audit_id": got.ID, "channel": "mcp", "tenant": "acme",
		"connection": "tok-1", "client": "claude", "subject": "alice", "action": "tickets.create",
		"outcome": "ok", "decision_id": "dec-1", "time": "2026-07-28T10:00:00.123456Z",
	}
	for k, v := range want {
		if l[k] != v {
			t.Errorf("log %s = %v, want %v", k, l[k], v)
		}
	}
	ids, _ := l["public_ids"].(map[string]any)
	if ids["ticket_id"] != "T-1" || ids["contact_id"] != "C-9" {
		t.Errorf("log public_ids = %v", l["public_ids"])
	}
	if len(l) != len(want)+1 {
		t.Errorf("log has keys beyond the record's: %v", l)
	}
}

func TestAuditorStoreFailure(t *testing.T) {
	mem := &memAudit{fail: errors.New("disk full")}
	var buf bytes.Buffer
	a := store.NewAuditor(mem, store.NewAuditLogger(&buf), store.WithAuditClock(clock))
	_, err := a.Record(t.Context(), store.AuditRecord{ID: "r1", Channel: store.ChannelAdmin, Action: "tokens.revoke"})
	if err == nil || !errors.Is(err, mem.fail) {
		t.Fatalf("Record: err = %v, want the store's", err)
	}
	lines := logLines(t, &buf)
	if len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["store_error"] != "disk full" || lines[0]["audit_id"] != "r1" {
		t.Errorf("log = %v, want one ERROR line with store_error", lines)
	}
}

func TestAuditorInvalid(t *testing.T) {
	mem := &memAudit{}
	a := store.NewAuditor(mem, nil, store.WithAuditClock(clock))
	_, err := a.Record(t.Context(), store.AuditRecord{Action: "x"}) // no channel
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("Record: err = %v, want ErrInvalid", err)
	}
	if len(mem.recs) != 0 {
		t.Errorf("an invalid record was stored")
	}
}

func TestRunRetention(t *testing.T) {
	mem := &memAudit{pruned: make(chan time.Time)}
	var buf bytes.Buffer
	a := store.NewAuditor(mem, store.NewAuditLogger(&buf), store.WithAuditClock(clock))
	if err := a.RunRetention(t.Context(), 0, time.Hour); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("every=0: err = %v, want ErrInvalid", err)
	}
	if err := a.RunRetention(t.Context(), time.Hour, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("keep=0: err = %v, want ErrInvalid", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.RunRetention(ctx, time.Millisecond, 24*time.Hour) }()
	for range 3 { // the first prune runs at once, the others on ticks
		if before := <-mem.pruned; !before.Equal(clockTime.Add(-24 * time.Hour)) {
			t.Errorf("PruneAudit(before = %v), want now - keep", before)
		}
	}
	cancel()
	go func() {
		for range mem.pruned { // a tick may race the cancellation
		}
	}()
	if err := <-done; err != nil {
		t.Errorf("RunRetention after cancel = %v, want nil", err)
	}
	close(mem.pruned)
	for _, l := range logLines(t, &buf) {
		checkSnake(t, l)
		if l["msg"] != "audit retention" || l["pruned"] != 3.0 {
			t.Errorf("retention log line %v", l)
		}
	}
}

func TestEffectiveLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{-5, store.DefaultAuditLimit}, {0, store.DefaultAuditLimit}, {1, 1},
		{store.MaxAuditLimit, store.MaxAuditLimit}, {store.MaxAuditLimit + 1, store.MaxAuditLimit},
	} {
		if got := (store.AuditQuery{Limit: tc.in}).EffectiveLimit(); got != tc.want {
			t.Errorf("EffectiveLimit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestTokenActive(t *testing.T) {
	now := clockTime
	rev := now.Add(-time.Minute)
	for _, tc := range []struct {
		name string
		tok  store.Token
		want bool
	}{
		{"no expiry", store.Token{}, true},
		{"before expiry", store.Token{ExpiresAt: now.Add(time.Second)}, true},
		{"at expiry", store.Token{ExpiresAt: now}, false},
		{"revoked", store.Token{RevokedAt: &rev}, false},
	} {
		if got := tc.tok.Active(now); got != tc.want {
			t.Errorf("%s: Active = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestTokenValidateJoinsProblems(t *testing.T) {
	err := store.Token{}.Validate()
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"id is empty", "tenant is empty", "creator is empty", "hash is zero", "created_at is zero"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}
