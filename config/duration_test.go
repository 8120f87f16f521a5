package config

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// dur is a Duration from a string the test knows is valid.
func dur(s string) Duration {
	d, err := ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want time.Duration
		str  string
	}{
		{"0s", 0, "0s"},
		{"250ms", 250 * time.Millisecond, "250ms"},
		{"60s", time.Minute, "1m"},
		{"1m30s", 90 * time.Second, "1m30s"},
		{"720h", 720 * time.Hour, "720h"},
		{"1h30m", 90 * time.Minute, "1h30m"},
	} {
		d, err := ParseDuration(tt.in)
		if err != nil || d.D() != tt.want || !d.IsSet() || d.String() != tt.str {
			t.Errorf("ParseDuration(%q) = %v (%s), %v; want %v (%s)", tt.in, d.D(), d, err, tt.want, tt.str)
		}
	}
	for in, msg := range map[string]string{
		"5 seconds": `"5 seconds" is not a duration`,
		"1d":        `"1d" is not a duration`,
		"30":        `"30" is not a duration`,
		"-1s":       `"-1s" must not be negative`,
	} {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParseDuration(%q) = %v, want %s", in, err, msg)
		}
	}
	var unset Duration
	if unset.IsSet() || unset.String() != "" || DurationOf(0).String() != "0s" {
		t.Errorf("unset %q, zero %q", unset, DurationOf(0))
	}
	// JSON (and YAML) encode a Duration as its string; "" stays unset.
	type s struct{ A, B, C Duration }
	b, err := json.Marshal(s{A: dur("5m"), B: DurationOf(0)})
	if err != nil || string(b) != `{"A":"5m","B":"0s","C":""}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back s
	if err := json.Unmarshal(b, &back); err != nil || back != (s{A: dur("5m"), B: DurationOf(0)}) {
		t.Errorf("Unmarshal = %+v, %v", back, err)
	}
}
