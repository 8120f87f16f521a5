// Package stdiotest builds the repository's stdio MCP test server
// (internal/stdio/testserver, written with the MCP Go SDK's stdio
// transport) for the tests of both Go modules.
package stdiotest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// ProcessGroup lists the processes of process group pgid, zombies
// included (Linux: /proc/<pid>/stat).
func ProcessGroup(pgid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: state ppid pgrp.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
