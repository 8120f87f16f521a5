// Package clip cuts the values mcpgate repeats in its error messages — an
// Origin, a header value, a method, tool or argument name a client sent, a
// cursor an upstream returned — so that an answer stays short and is valid
// UTF-8 whatever the value held.
package clip

import "unicode/utf8"

// Limit is the most bytes (UTF-8) of a value an error message repeats,
// the Marker not counted.
const Limit = 64

// Marker ends a value that was cut.
const Marker = "…"

// Value returns s as an error message may repeat it: at most Limit bytes,
// cut on a rune boundary and followed by Marker when cut; each byte that
// is not part of valid UTF-8 becomes U+FFFD. A valid s within Limit is
// returned as is.
func Value(s string) string { return To(s, Limit) }

// To is Value with a limit of n bytes (n > 0), for longer texts such as a
// parser's message.
func To(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, min(len(s), n)+len(Marker))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		w := size
		if r == utf8.RuneError && size == 1 {
			w = utf8.RuneLen(utf8.RuneError)
		}
		if len(b)+w > n {
			return string(append(b, Marker...))
		}
		if w != size {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
