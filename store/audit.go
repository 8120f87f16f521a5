package store

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"
)

// DefaultAuditWriteTimeout bounds one Auditor.Record's store write.
const DefaultAuditWriteTimeout = 5 * time.Second

// Auditor is the audit sink: every record goes to the store (for the admin
// API's queries, with retention) and to a structured log (for the log
// pipeline). Neither sink ever sees arguments: an AuditRecord has no field
// for them.
type Auditor struct {
	store   AuditStore
	log     *slog.Logger
	now     func() time.Time
	timeout time.Duration
}

// AuditorOption configures NewAuditor.
type AuditorOption func(*Auditor)

// WithAuditClock sets the clock that stamps records and computes retention
// cut-offs. Default time.Now.
func WithAuditClock(now func() time.Time) AuditorOption { return func(a *Auditor) { a.now = now } }

// NewAuditor writes to s and to log (see NewAuditLogger); a nil log
// discards the log side, a nil s the store side (records are only logged;
// RunRetention then returns at once).
func NewAuditor(s AuditStore, log *slog.Logger, opts ...AuditorOption) *Auditor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Auditor{store: s, log: log, now: time.Now, timeout: DefaultAuditWriteTimeout}
	for _, o := range opts {
		o(a)
	}
	return a
}

// NewAuditLogger is the audit log: JSON lines on w, one per record.
func NewAuditLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, nil))
}

// NewAuditID returns a new unique audit id: 32 hex digits, the first 16
// the microseconds of t, so ids sort by time.
func NewAuditID(t time.Time) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(t.UnixMicro()))
	_, _ = rand.Read(b[8:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Record stamps r (ID and Time when empty), stores it and logs it; it
// returns the record as stored. The store write is detached from ctx's
// cancellation (a client that hangs up must not erase the record of what
// it did) and bounded by the write timeout.
//
// The log line is written whether or not the store write succeeds (at
// level ERROR with store_error when it fails), so the log holds every
// record; the error is returned for the caller's metrics.
func (a *Auditor) Record(ctx context.Context, r AuditRecord) (AuditRecord, error) {
	if r.Time.IsZero() {
		r.Time = a.now()
	}
	r.Time = r.Time.Truncate(time.Microsecond).UTC()
	if r.ID == "" {
		r.ID = NewAuditID(r.Time)
	}
	if err := r.Validate(); err != nil {
		a.emit(ctx, r, err)
		return r, fmt.Errorf("audit: %w", err)
	}
	if a.store == nil {
		a.emit(ctx, r, nil)
		return r, nil
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	err := a.store.AppendAudit(wctx, r)
	a.emit(ctx, r, err)
	if err != nil {
		return r, fmt.Errorf("audit: %w", err)
	}
	return r, nil
}

// emit writes the record's log line: message "audit", time = the record's
// time, snake_case keys.
func (a *Auditor) emit(ctx context.Context, r AuditRecord, storeErr error) {
	level := slog.LevelInfo
	if storeErr != nil {
		level = slog.LevelError
	}
	h := a.log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	rec := slog.NewRecord(r.Time, level, "audit", 0)
	rec.AddAttrs(
		slog.String("audit_id", r.ID),
		slog.String("channel", r.Channel),
		slog.String("tenant", r.Tenant),
		slog.String("connection", r.Connection),
		slog.String("client", r.Client),
		slog.String("subject", r.Subject),
		slog.String("action", r.Action),
		slog.String("outcome", r.Outcome),
		slog.String("decision_id", r.DecisionID),
	)
	if len(r.PublicIDs) > 0 {
		ids := make([]any, 0, len(r.PublicIDs))
		for _, k := range slices.Sorted(maps.Keys(r.PublicIDs)) {
			ids = append(ids, slog.String(k, r.PublicIDs[k]))
		}
		rec.AddAttrs(slog.Group("public_ids", ids...))
	}
	if storeErr != nil {
		rec.AddAttrs(slog.String("store_error", storeErr.Error()))
	}
	_ = h.Handle(ctx, rec)
}

// RunRetention deletes records older than keep, now and then every every,
// until ctx ends; it returns nil then. Failures are logged (message "audit
// retention", level WARN) and retried at the next tick. Several replicas
// may run it at once.
func (a *Auditor) RunRetention(ctx context.Context, every, keep time.Duration) error {
	if a.store == nil {
		return nil
	}
	if every <= 0 || keep <= 0 {
		return fmt.Errorf("%w: audit retention every=%s keep=%s, both must be positive", ErrInvalid, every, keep)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		a.prune(ctx, keep)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (a *Auditor) prune(ctx context.Context, keep time.Duration) {
	before := a.now().Add(-keep)
	n, err := a.store.PruneAudit(ctx, before)
	switch {
	case err != nil && ctx.Err() == nil:
		a.log.LogAttrs(ctx, slog.LevelWarn, "audit retention", slog.Time("before", before),
			slog.Int("pruned", n), slog.String("error", err.Error()))
	case err == nil && n > 0:
		a.log.LogAttrs(ctx, slog.LevelInfo, "audit retention", slog.Time("before", before), slog.Int("pruned", n))
	}
}
