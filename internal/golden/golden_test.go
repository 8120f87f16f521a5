package golden

import "testing"

func TestFirstDifference(t *testing.T) {
	for _, tt := range []struct{ want, got, say string }{
		{"a\nb\n", "a\nc\n", `line 2: have "b", generated "c"`},
		{"a\n", "a\nb\n", `line 2: have "", generated "b"`},
		{"a\nb", "a", `line 2: have "b", generated ""`},
	} {
		if s := firstDifference([]byte(tt.want), []byte(tt.got)); s != tt.say {
			t.Errorf("firstDifference(%q, %q) = %s, want %s", tt.want, tt.got, s, tt.say)
		}
	}
}
