// Package codec is the record encoding the store backends share, so that
// both store the same fields with the same precision.
package codec

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

// Micros is t in microseconds since the Unix epoch (floor).
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros is the UTC time of us microseconds since the Unix epoch.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// Norm is t as the store returns it: microsecond precision, UTC; zero stays
// zero.
func Norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return FromMicros(Micros(t))
}

// SortableTime encodes t (microseconds) in 8 bytes whose byte order is the
// time order, negative times included.
func SortableTime(t time.Time) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(Micros(t))^(1<<63))
	return b[:]
}

// ParseSortableTime decodes SortableTime.
func ParseSortableTime(b []byte) (time.Time, error) {
	if len(b) < 8 {
		return time.Time{}, fmt.Errorf("sortable time: %d bytes", len(b))
	}
	return FromMicros(int64(binary.BigEndian.Uint64(b[:8]) ^ (1 << 63))), nil
}

// Token hash fields (Redis hash fields; keys of the bolt JSON object).
const (
	FieldID      = "id"
	FieldTenant  = "tenant"
	FieldCreator = "creator"
	FieldName    = "name"
	FieldHash    = "hash"
	FieldRights  = "rights"
	FieldToolset = "toolset"
	FieldCreated = "created_us"
	FieldExpires = "expires_us"
	FieldRevoked = "revoked_us"
)

// TokenFields is the flat encoding of a token: string fields, times in
// decimal microseconds, the hash in hex, rights as a JSON array. Unset
// times are absent.
func TokenFields(t store.Token) map[string]string {
	rights, _ := json.Marshal(nonNil(t.Rights))
	m := map[string]string{
		FieldID:      t.ID,
		FieldTenant:  t.Tenant,
		FieldCreator: t.Creator,
		FieldName:    t.Name,
		FieldHash:    hex.EncodeToString(t.Hash[:]),
		FieldRights:  string(rights),
		FieldCreated: strconv.FormatInt(Micros(t.CreatedAt), 10),
	}
	if !t.ExpiresAt.IsZero() {
		m[FieldExpires] = strconv.FormatInt(Micros(t.ExpiresAt), 10)
	}
	if t.RevokedAt != nil {
		m[FieldRevoked] = strconv.FormatInt(Micros(*t.RevokedAt), 10)
	}
	if t.Toolset != "" {
		m[FieldToolset] = t.Toolset
	}
	return m
}

// TokenFromFields decodes TokenFields.
func TokenFromFields(m map[string]string) (store.Token, error) {
	t := store.Token{
		ID:      m[FieldID],
		Tenant:  m[FieldTenant],
		Creator: m[FieldCreator],
		Name:    m[FieldName],
		Toolset: m[FieldToolset],
	}
	h, err := hex.DecodeString(m[FieldHash])
	if err != nil || len(h) != len(t.Hash) {
		return store.Token{}, fmt.Errorf("decode token %q: bad hash", t.ID)
	}
	copy(t.Hash[:], h)
	if r := m[FieldRights]; r != "" {
		if err := json.Unmarshal([]byte(r), &t.Rights); err != nil {
			return store.Token{}, fmt.Errorf("decode token %q rights: %w", t.ID, err)
		}
	}
	if len(t.Rights) == 0 {
		t.Rights = nil
	}
	created, ok, err := micros(m, FieldCreated)
	if err != nil || !ok {
		return store.Token{}, fmt.Errorf("decode token %q: bad %s", t.ID, FieldCreated)
	}
	t.CreatedAt = created
	if exp, ok, err := micros(m, FieldExpires); err != nil {
		return store.Token{}, fmt.Errorf("decode token %q: %w", t.ID, err)
	} else if ok {
		t.ExpiresAt = exp
	}
	if rev, ok, err := micros(m, FieldRevoked); err != nil {
		return store.Token{}, fmt.Errorf("decode token %q: %w", t.ID, err)
	} else if ok {
		t.RevokedAt = &rev
	}
	return t, nil
}

func micros(m map[string]string, field string) (time.Time, bool, error) {
	s, ok := m[field]
	if !ok {
		return time.Time{}, false, nil
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("bad %s %q", field, s)
	}
	return FromMicros(us), true, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// token is the JSON form of a token (bbolt); its keys are the Field names.
type token struct {
	ID        string   `json:"id"`
	Tenant    string   `json:"tenant"`
	Creator   string   `json:"creator"`
	Name      string   `json:"name,omitempty"`
	Hash      string   `json:"hash"`
	Rights    []string `json:"rights,omitempty"`
	Toolset   string   `json:"toolset,omitempty"`
	CreatedUS int64    `json:"created_us"`
	ExpiresUS *int64   `json:"expires_us,omitempty"`
	RevokedUS *int64   `json:"revoked_us,omitempty"`
}

// MarshalToken encodes t as JSON, with the fields of TokenFields.
func MarshalToken(t store.Token) ([]byte, error) {
	w := token{
		ID: t.ID, Tenant: t.Tenant, Creator: t.Creator, Name: t.Name,
		Hash: hex.EncodeToString(t.Hash[:]), Rights: t.Rights, Toolset: t.Toolset, CreatedUS: Micros(t.CreatedAt),
	}
	if !t.ExpiresAt.IsZero() {
		us := Micros(t.ExpiresAt)
		w.ExpiresUS = &us
	}
	if t.RevokedAt != nil {
		us := Micros(*t.RevokedAt)
		w.RevokedUS = &us
	}
	return json.Marshal(w)
}

// UnmarshalToken decodes MarshalToken.
func UnmarshalToken(b []byte) (store.Token, error) {
	var w token
	if err := json.Unmarshal(b, &w); err != nil {
		return store.Token{}, fmt.Errorf("decode token: %w", err)
	}
	t := store.Token{ID: w.ID, Tenant: w.Tenant, Creator: w.Creator, Name: w.Name, Rights: w.Rights, Toolset: w.Toolset, CreatedAt: FromMicros(w.CreatedUS)}
	if n, err := hex.Decode(t.Hash[:], []byte(w.Hash)); err != nil || n != len(t.Hash) || len(w.Hash) != 2*len(t.Hash) {
		return store.Token{}, fmt.Errorf("decode token %q: bad hash", w.ID)
	}
	if len(t.Rights) == 0 {
		t.Rights = nil
	}
	if w.ExpiresUS != nil {
		t.ExpiresAt = FromMicros(*w.ExpiresUS)
	}
	if w.RevokedUS != nil {
		at := FromMicros(*w.RevokedUS)
		t.RevokedAt = &at
	}
	return t, nil
}

// audit is the JSON form of an audit record.
type audit struct {
	ID         string            `json:"id"`
	TimeUS     int64             `json:"time_us"`
	Channel    string            `json:"channel"`
	Tenant     string            `json:"tenant,omitempty"`
	Connection string            `json:"connection,omitempty"`
	Client     string            `json:"client,omitempty"`
	Subject    string            `json:"subject,omitempty"`
	Action     string            `json:"action,omitempty"`
	Outcome    string            `json:"outcome,omitempty"`
	DecisionID string            `json:"decision_id,omitempty"`
	PublicIDs  map[string]string `json:"public_ids,omitempty"`
}

// MarshalAudit encodes r as JSON.
func MarshalAudit(r store.AuditRecord) ([]byte, error) {
	return json.Marshal(audit{
		ID: r.ID, TimeUS: Micros(r.Time), Channel: r.Channel, Tenant: r.Tenant,
		Connection: r.Connection, Client: r.Client, Subject: r.Subject,
		Action: r.Action, Outcome: r.Outcome, DecisionID: r.DecisionID,
		PublicIDs: r.PublicIDs,
	})
}

// UnmarshalAudit decodes MarshalAudit.
func UnmarshalAudit(b []byte) (store.AuditRecord, error) {
	var a audit
	if err := json.Unmarshal(b, &a); err != nil {
		return store.AuditRecord{}, fmt.Errorf("decode audit record: %w", err)
	}
	if len(a.PublicIDs) == 0 {
		a.PublicIDs = nil
	}
	return store.AuditRecord{
		ID: a.ID, Time: FromMicros(a.TimeUS), Channel: a.Channel, Tenant: a.Tenant,
		Connection: a.Connection, Client: a.Client, Subject: a.Subject,
		Action: a.Action, Outcome: a.Outcome, DecisionID: a.DecisionID,
		PublicIDs: a.PublicIDs,
	}, nil
}
