package approval

import "testing"

// The approval page shows each argument as stored, which is what goes
// upstream: numbers as written, never through float64.
func TestArgumentsKeepNumberLiterals(t *testing.T) {
	got := arguments([]byte(`{"n":9007199254740993,"f":0.1000000000000000000001,"e":1E400,"z":-0,"h":100.0,"o":{"k":1e2},"s":"x"}`))
	want := map[string]string{"n": "9007199254740993", "f": "0.1000000000000000000001", "e": "1E400", "z": "-0", "h": "100.0", "o": "{\n  \"k\": 1e2\n}"}
	if len(got) != len(want)+1 {
		t.Fatalf("arguments: %+v", got)
	}
	for _, a := range got {
		if a.IsText {
			if a.Name != "s" || a.Text != "x" {
				t.Errorf("text argument %+v", a)
			}
			continue
		}
		if a.JSON != want[a.Name] {
			t.Errorf("%s shown as %q, want %q", a.Name, a.JSON, want[a.Name])
		}
	}
}
