package config_test

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/mcpgate/mcpgate/config/internal/refgen"
)

// update is the -update flag of this package's tests (it also rewrites
// the golden files of testdata/).
func update() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

const referencePath = "../docs/reference/configuration.md"

// TestConfigurationReference checks that docs/reference/configuration.md
// is what the doc comments of the config types generate.
func TestConfigurationReference(t *testing.T) {
	got, err := refgen.Generate("..")
	if err != nil {
		t.Fatal(err)
	}
	if update() {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v; generate it with: go generate ./config", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("docs/reference/configuration.md is stale; regenerate it with: go generate ./config")
	}
}
