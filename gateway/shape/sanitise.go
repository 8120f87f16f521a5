package shape

import (
	"strconv"
	"unicode/utf8"
)

// stripped reports whether Sanitise removes r:
//   - C0 controls except '\n' and '\t' (so '\r' goes too), DEL, C1 controls;
//   - zero-width and invisible format characters: U+180E, U+200B..U+200F
//     (which includes the LRM/RLM marks), U+2060..U+206F (word joiner,
//     invisible operators, deprecated format controls), U+FEFF,
//     U+FFF9..U+FFFB (interlinear annotation);
//   - bidi controls: U+061C, U+202A..U+202E, U+2066..U+2069;
//   - Unicode tag characters U+E0000..U+E007F.
func stripped(r rune) bool {
	switch {
	case r < 0x20:
		return r != '\n' && r != '\t'
	case r < 0x7f:
		return false
	case r <= 0x9f:
		return true
	case r < 0x061c:
		return false
	}
	switch {
	case r == 0x061c, r == 0x180e, r == 0xfeff:
		return true
	case r >= 0x200b && r <= 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	case r >= 0x2060 && r <= 0x206f:
		return true
	case r >= 0xfff9 && r <= 0xfffb:
		return true
	case r >= 0xe0000 && r <= 0xe007f:
		return true
	}
	return false
}

// textLimit turns a caller's bound into the one applied: 0 means
// DefaultMaxTextBytes, a negative value means no bound.
func textLimit(max int) int {
	switch {
	case max == 0:
		return DefaultMaxTextBytes
	case max < 0:
		return int(^uint(0) >> 1)
	}
	return max
}

// appendCutNote appends the ellipsis and note that end a text cut at max
// bytes.
func appendCutNote(dst []byte, max int) []byte {
	dst = append(dst, "… [cut by mcpgate: longer than "...)
	dst = strconv.AppendInt(dst, int64(max), 10)
	return append(dst, " bytes]"...)
}

// Sanitise returns s with the characters described at stripped removed,
// invalid UTF-8 replaced by U+FFFD, and, when the result is longer than max
// bytes, cut at the last rune boundary at or below max and followed by "…"
// and a note saying it was cut. max 0 means DefaultMaxTextBytes; a negative
// max means no bound. It returns s itself (no allocation) when nothing
// changes.
func Sanitise(s string, max int) string {
	max = textLimit(max)
	if len(s) <= max && cleanString(s) {
		return s
	}
	return string(appendSanitised(nil, []byte(s), max))
}

// cleanString reports whether s is valid UTF-8 without characters
// Sanitise removes.
func cleanString(s string) bool {
	return cleanBytes([]byte(s)) // cleanBytes neither keeps nor changes s: no copy
}

// cleanBytes is cleanString for a byte slice.
func cleanBytes(s []byte) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, n := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && n == 1 || stripped(r) {
			return false
		}
		i += n
	}
	return true
}

// appendSanitised appends the sanitised, bounded form of src to dst (see
// Sanitise); max is already resolved by textLimit.
func appendSanitised(dst, src []byte, max int) []byte {
	start := len(dst)
	for i := 0; i < len(src); {
		c := src[i]
		if c < utf8.RuneSelf {
			i++
			if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
				continue
			}
			if len(dst)-start+1 > max {
				return appendCutNote(dst, max)
			}
			dst = append(dst, c)
			continue
		}
		r, n := utf8.DecodeRune(src[i:])
		i += n
		if r != utf8.RuneError && stripped(r) {
			continue
		}
		// An invalid byte decodes as (RuneError, 1): one U+FFFD each.
		if len(dst)-start+utf8.RuneLen(r) > max {
			return appendCutNote(dst, max)
		}
		dst = utf8.AppendRune(dst, r)
	}
	return dst
}
