// Command mcpgate is an MCP gateway: it puts Rego policy in front of MCP
// servers, as a standalone reverse proxy (and, later, an Envoy ext_proc
// service).
//
//	mcpgate serve --config FILE
//	mcpgate serve --upstream URL [--listen ADDR] [--admin ADDR] [--policy DIR]
//	mcpgate validate --config FILE
//	mcpgate demo [--listen ADDR] [--admin ADDR] [--upstream-listen ADDR]
//	mcpgate version
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
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

const usage = `mcpgate — MCP policy gateway

Usage:
  mcpgate serve --config FILE                 serve with a configuration file
  mcpgate serve --upstream URL [--listen ADDR] [--admin ADDR] [--extproc ADDR] [--policy DIR] [--no-auth]
                                              serve in front of one MCP server with the built-in defaults
                                              (--extproc: also serve Envoy ext_proc on host:port or unix:/path)
  mcpgate validate --config FILE [--policy-dir DIR]... [--bundle FILE [--bundle-public-key PEM]]
                                              load the config, compile the Rego (or a bundle), list every problem
  mcpgate demo [--listen ADDR] [--admin ADDR] [--upstream-listen ADDR] [--extproc ADDR]
                                              run the bundled demo upstream behind the gateway
  mcpgate tokens create [--tenant T] [--subject S] [--name N] [--rights a,b] [--expires-in 720h]
  mcpgate tokens list [--tenant T] [--creator S]
  mcpgate tokens revoke ID                    gateway-issued MCP tokens, through the admin API
                                              (--admin URL, --token T, --json; or $MCPGATE_ADMIN_URL,
                                              $MCPGATE_ADMIN_TOKEN; "mcpgate tokens help" for more)
  mcpgate killswitch on|off [--tenant T] --reason R
  mcpgate killswitch status                   stop MCP traffic in an incident, through the admin API
                                              (same flags as tokens; "mcpgate killswitch help" for more)
  mcpgate manifest pin --config FILE [--out FILE] [--upstream NAME]...
                                              list the upstreams' tools, show what changed, pin them
  mcpgate manifest lint [--json] (FILE | --url URL)   check tool definitions against the design rules
                                              ("mcpgate manifest help" for more)
  mcpgate version                             print the version
`

// run is the testable entry point: it parses args, runs the subcommand and
// returns when it ends (ctx cancelled for servers).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "serve":
		return cmdServe(ctx, args[1:], stdout, stderr)
	case "validate":
		return cmdValidate(ctx, args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(ctx, args[1:], stdout, stderr)
	case "tokens":
		return cmdTokens(ctx, args[1:], stdout, stderr)
	case "killswitch":
		return cmdKillSwitch(ctx, args[1:], stdout, stderr)
	case "keys":
		return cmdKeys(ctx, args[1:], stdout, stderr)
	case "sealing-keys":
		return cmdSealingKeys(ctx, args[1:], stdout, stderr)
	case "manifest":
		return cmdManifest(ctx, args[1:], stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "mcpgate", version())
		return nil
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "unknown command %q\n\n%s", args[0], usage)
	return errUsage
}
