package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestValue(t *testing.T) {
	a63 := strings.Repeat("a", 63)
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"https://app.example", "https://app.example"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 64) + "…"},
		// A two-byte rune across the limit is left out whole.
		{a63 + "é", a63 + "…"},
		{a63 + "éb", a63 + "…"},
		{strings.Repeat("a", 62) + "é", strings.Repeat("a", 62) + "é"},
		// Three- and four-byte runes at the boundary.
		{strings.Repeat("a", 62) + "€x", strings.Repeat("a", 62) + "…"},
		{strings.Repeat("a", 61) + "€", strings.Repeat("a", 61) + "€"},
		{strings.Repeat("a", 61) + "😀", strings.Repeat("a", 61) + "…"},
		{strings.Repeat("é", 40), strings.Repeat("é", 32) + "…"},
		// Invalid bytes become U+FFFD.
		{"a\xffb", "a\uFFFDb"},
		{"\xe2\x82", "\uFFFD\uFFFD"},
	} {
		got := Value(tt.in)
		if got != tt.want {
			t.Errorf("Value(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !utf8.ValidString(got) || strings.ContainsRune(got, utf8.RuneError) && utf8.ValidString(tt.in) {
			t.Errorf("Value(%q) = %q: not valid UTF-8 or a replacement character appeared", tt.in, got)
		}
	}
}

func TestTo(t *testing.T) {
	if got := To("abcdef", 3); got != "abc…" {
		t.Errorf("To = %q", got)
	}
	if got := To("a€b", 3); got != "a…" {
		t.Errorf("To = %q", got)
	}
}

func FuzzValue(f *testing.F) {
	for _, s := range []string{"", "abc", strings.Repeat("é", 40), strings.Repeat("a", 63) + "😀", "a\xffb\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Value(s)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 %q", got)
		}
		body, cut := strings.CutSuffix(got, Marker)
		if len(body) > Limit {
			t.Fatalf("%d bytes", len(body))
		}
		if utf8.ValidString(s) {
			if cut && !strings.HasPrefix(s, body) || !cut && got != s {
				t.Fatalf("Value(%q) = %q is not a prefix of the value", s, got)
			}
		}
	})
}
