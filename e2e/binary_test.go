package e2e

import (
	"os/exec"
	"strings"
	"testing"
)

// TestMethodDeadCode checks that the linker removed the methods mcpgate never
// calls. When any reachable code calls reflect.Value.MethodByName with a
// name known only at run time (text/template's executor does, so html/template
// and gRPC's x/net/trace pages do), the linker keeps every exported method of
// every type converted to an interface: go-redis's whole command set among
// them, about 16 MB more binary (docs/operations/memory.md).
func TestMethodDeadCode(t *testing.T) {
	out, err := exec.Command("go", "tool", "nm", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	present := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 3 {
			present[f[len(f)-1]] = true
		}
	}
	for _, sym := range []string{
		// The executor of text/template (and so html/template).
		"text/template.(*state).evalField",
		// A go-redis command mcpgate does not send: linked only when
		// every exported method is kept.
		"github.com/redis/go-redis/v9.(*Client).GeoAdd",
	} {
		if present[sym] {
			t.Errorf("%s is linked: something reachable calls reflect.Value.MethodByName (find it with go build -tags grpcnotrace -ldflags=-dumpdep ./cmd/mcpgate 2>&1 | grep ReflectMethod)", sym)
		}
	}
}
