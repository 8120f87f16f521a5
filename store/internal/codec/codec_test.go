package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/store"
)

func TestSortableTimeOrder(t *testing.T) {
	times := []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC),
		time.Unix(0, 0),
		time.Unix(0, 1000),
		time.Date(2026, 7, 28, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 7, 28, 10, 0, 0, 1000, time.UTC),
		time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC),
	}
	for i := range times {
		got, err := ParseSortableTime(SortableTime(times[i]))
		if err != nil || !got.Equal(times[i]) {
			t.Errorf("round trip of %v = %v, %v", times[i], got, err)
		}
		if i > 0 && bytes.Compare(SortableTime(times[i-1]), SortableTime(times[i])) >= 0 {
			t.Errorf("%v does not sort before %v", times[i-1], times[i])
		}
	}
}

func TestNorm(t *testing.T) {
	in := time.Date(2026, 7, 28, 12, 0, 0, 123456789, time.FixedZone("x", 7200))
	got := Norm(in)
	if got.Location() != time.UTC || got.Nanosecond() != 123456000 || !got.Equal(in.Truncate(time.Microsecond)) {
		t.Errorf("Norm = %v", got)
	}
	if !Norm(time.Time{}).IsZero() {
		t.Error("Norm(zero) is not zero")
	}
}

func TestTokenFromFieldsRejectsGarbage(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"no hash":     {FieldID: "x", FieldCreated: "1"},
		"short hash":  {FieldID: "x", FieldHash: "abcd", FieldCreated: "1"},
		"no created":  {FieldID: "x", FieldHash: "0000000000000000000000000000000000000000000000000000000000000001"},
		"bad expires": {FieldID: "x", FieldHash: "0000000000000000000000000000000000000000000000000000000000000001", FieldCreated: "1", FieldExpires: "soon"},
		"bad rights":  {FieldID: "x", FieldHash: "0000000000000000000000000000000000000000000000000000000000000001", FieldCreated: "1", FieldRights: "{"},
	} {
		if _, err := TokenFromFields(m); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestTokenEncodingsAgree(t *testing.T) {
	rev := time.Date(2026, 7, 29, 0, 0, 0, 0, time.UTC)
	for _, tok := range []store.Token{
		{ID: "a", Tenant: "t", Creator: "c", Hash: [32]byte{1}, CreatedAt: time.Unix(0, 0).UTC()},
		{ID: "b", Tenant: "t", Creator: "c", Name: "n", Hash: [32]byte{31: 9}, Rights: []string{"x", "y"},
			CreatedAt: time.Date(2026, 7, 28, 0, 0, 0, 5000, time.UTC), ExpiresAt: time.Unix(0, 0).UTC(), RevokedAt: &rev},
	} {
		b, err := MarshalToken(tok)
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := UnmarshalToken(b)
		if err != nil {
			t.Fatal(err)
		}
		fromFields, err := TokenFromFields(TokenFields(tok))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		for k := range m {
			if _, ok := TokenFields(tok)[k]; !ok {
				t.Errorf("JSON key %q is not a field name", k)
			}
		}
		if fmt.Sprintf("%+v", fromJSON) != fmt.Sprintf("%+v", fromFields) || !reflect.DeepEqual(fromJSON.RevokedAt, fromFields.RevokedAt) {
			t.Errorf("encodings disagree:\n json   %+v\n fields %+v", fromJSON, fromFields)
		}
		if !fromJSON.ExpiresAt.Equal(tok.ExpiresAt) || fromJSON.ExpiresAt.IsZero() != tok.ExpiresAt.IsZero() {
			t.Errorf("expires_at %v, want %v", fromJSON.ExpiresAt, tok.ExpiresAt)
		}
	}
}
