package config

import (
	"fmt"
	"strings"
	"time"
)

// Duration is a length of time written as a Go duration string ("500ms",
// "30s", "1m30s", "0s"). The decoder refuses a value that does not parse
// or is negative, with the file position of the value. The zero Duration
// is unset (the key is absent, empty or ""), which ApplyDefaults replaces
// by the key's default; a Duration written in the file is set even when it
// is 0s, which some keys read as "none".
type Duration struct {
	d   time.Duration
	set bool
}

// DurationOf returns d as a set Duration.
func DurationOf(d time.Duration) Duration { return Duration{d: d, set: true} }

// ParseDuration parses a Go duration string that is not negative.
func ParseDuration(s string) (Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return Duration{}, fmt.Errorf("%q is not a duration; use a number with a unit: ms, s, m or h (e.g. \"30s\", \"1m30s\")", s)
	}
	if d < 0 {
		return Duration{}, fmt.Errorf("%q must not be negative", s)
	}
	return DurationOf(d), nil
}

// D is the duration; 0 when unset.
func (d Duration) D() time.Duration { return d.d }

// IsSet reports whether the duration was written (or defaulted).
func (d Duration) IsSet() bool { return d.set }

// orDefault sets d to def when it is unset.
func (d *Duration) orDefault(def time.Duration) {
	if !d.set {
		*d = DurationOf(def)
	}
}

// String is the duration as a Go duration string without zero trailing
// units ("5m", not "5m0s"); "" when unset.
func (d Duration) String() string {
	if !d.set {
		return ""
	}
	s := d.d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// MarshalText encodes d as its String.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a Go duration string that is not negative; ""
// leaves d unset.
func (d *Duration) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*d = Duration{}
		return nil
	}
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}
