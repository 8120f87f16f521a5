package gateway

import (
	"os"
	"strings"
	"testing"
)

// The package doc lists the request stages in the order of requestStages.
func TestPackageDocListsStages(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(src), "# Request stages")
	section, _, _ := strings.Cut(after, "# Response phases")
	var listed []string
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Fields(strings.TrimPrefix(line, "//\t")); strings.HasPrefix(line, "//\t") && len(f) > 1 {
			listed = append(listed, f[0])
		}
	}
	var names []string
	for _, s := range requestStages {
		names = append(names, s.name)
	}
	if strings.Join(listed, " ") != strings.Join(names, " ") {
		t.Errorf("doc.go lists stages\n  %v\nrequestStages runs\n  %v", listed, names)
	}
}
