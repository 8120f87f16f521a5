// Package stdiotest builds the repository's stdio MCP test server
// (internal/stdio/testserver, written with the MCP Go SDK's stdio
// transport) for the tests of both Go modules.
package stdiotest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	path string
	err  error
)

// Server returns the path of the test server's binary, built once per
// test process (into a temporary directory that is left for the system
// to clean: every test of the process shares it).
func Server(tb testing.TB) string {
	tb.Helper()
	once.Do(func() {
		var dir string
		if dir, err = os.MkdirTemp("", "mcpgate-stdio-testserver"); err != nil {
			return
		}
		path = filepath.Join(dir, "testserver")
		out, berr := exec.Command("go", "build", "-o", path, "github.com/mcpgate/mcpgate/internal/stdio/testserver").CombinedOutput()
		if berr != nil {
			err = fmt.Errorf("build the stdio test server: %v: %s", berr, out)
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	return path
}
