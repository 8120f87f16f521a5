// Package golden compares what a test generates with the copy checked
// into the repository (golden files, generated reference pages); run
// with -update, it rewrites the copy instead.
//
// Only tests import it: the -update flag it defines exists in test
// binaries alone.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files and generated reference pages instead of comparing")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Check compares got with the file at path. With -update it writes got to
// path (creating its directory) instead. regenerate is the command a
// reader runs to rewrite the file, named in the failure.
func Check(t testing.TB, path string, got []byte, regenerate string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; create it with: %s", err, regenerate)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (%s); regenerate it with: %s", path, firstDifference(want, got), regenerate)
	}
}

// firstDifference names the first line where the two texts differ.
func firstDifference(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return fmt.Sprintf("line %d: have %q, generated %q", i+1, wl, gl)
		}
	}
	return "same lines, other bytes"
}
