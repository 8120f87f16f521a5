// Command mcpgate is an MCP gateway: it puts Rego policy in front of MCP
// servers, as a standalone reverse proxy or as an Envoy ext_proc service.
// Its verbs are the table in commands.go, which also writes their help and
// docs/reference/cli.md (go generate ./cmd/mcpgate).
package main

//go:generate go test -run ^TestCLIReference$ -update .

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, errUsage) {
		fmt.Fprintln(os.Stderr, "mcpgate:", err)
	}
	if err != nil {
		os.Exit(exitCode(err))
	}
}

var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}
