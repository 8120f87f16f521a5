package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/stdio"
	"github.com/mcpgate/mcpgate/policy"
)

// shutdownGrace bounds how long in-flight exchanges may finish on shutdown.
const shutdownGrace = 10 * time.Second

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errUsage
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %s\n", strings.Join(fs.Args(), " "))
		return errUsage
	}
	return nil
}

// countSet counts the non-empty values.
func countSet(vals ...string) int {
	n := 0
	for _, v := range vals {
		if v != "" {
			n++
		}
	}
	return n
}

func cmdServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", stderr)
	cfgPath := fs.String("config", "", "configuration `file` (YAML)")
	upstream := fs.String("upstream", "", "one-line mode: the upstream MCP endpoint `URL`")
	upstreamCommand := fs.String("upstream-command", "", "one-line mode: a stdio MCP server's `command line`, which mcpgate starts and serves (plain words and quotes, split as a shell would; nothing expanded), e.g. \"npx -y @modelcontextprotocol/server-everything\"")
	listen := fs.String("listen", "", "proxy listener `address` (overrides the config)")
	admin := fs.String("admin", "", "admin listener `address` (overrides the config)")
	policyDir := fs.String("policy", "", "policy `directory` (overrides the config)")
	extprocAddr := fs.String("extproc", "", "Envoy ext_proc gRPC listener `address` (host:port or unix:/path; overrides the config)")
	noAuth := fs.Bool("no-auth", false, "run without authentication (explicit; logged loudly)")
	undeclared := fs.String("undeclared-tools", policy.UndeclaredConfirm, "one-line mode: what happens to tools nobody declared: `confirm` (listed; every call waits for a person's confirmation) or refuse (the policy sees them as undeclared: the default policy hides and refuses them, a --policy of your own decides)")
	var readTools namesFlag
	fs.Var(&readTools, "read-tools", "one-line mode: declare these tools (comma-separated `names`) as reads, called without confirmation; your word, never the upstream's annotations")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var problems []error
	var argv []string
	if *upstreamCommand != "" {
		var err error
		if argv, err = stdio.SplitCommand(*upstreamCommand); err != nil {
			problems = append(problems, fmt.Errorf("--upstream-command: %w", err))
		}
	}
	oneLine := *upstream != "" || *upstreamCommand != ""
	if n := countSet(*cfgPath, *upstream, *upstreamCommand); n != 1 {
		problems = append(problems, errors.New("give exactly one of --config, --upstream or --upstream-command"))
	}
	if len(readTools) > 0 && !oneLine {
		problems = append(problems, errors.New("--read-tools is for the one-line mode (--upstream); with --config, declare the tools under upstreams[].tools"))
	}
	undeclaredSet := false
	fs.Visit(func(f *flag.Flag) { undeclaredSet = undeclaredSet || f.Name == "undeclared-tools" })
	switch {
	case undeclaredSet && !oneLine:
		problems = append(problems, errors.New("--undeclared-tools is for the one-line mode (--upstream); with --config, set upstreams[].undeclared_tools"))
	case *undeclared != policy.UndeclaredConfirm && *undeclared != policy.UndeclaredRefuse:
		problems = append(problems, fmt.Errorf("--undeclared-tools %q: use %q or %q", *undeclared, policy.UndeclaredConfirm, policy.UndeclaredRefuse))
	}
	if len(problems) > 0 {
		return errors.Join(problems...)
	}
	var cfg *config.Config
	var err error
	if *cfgPath != "" {
		cfg, err = config.Load(*cfgPath)
		if err != nil {
			return err
		}
	} else {
		cfg = config.Default(*upstream)
		if argv != nil {
			cfg.Upstreams[0].URL, cfg.Upstreams[0].Command = "", &config.Command{Argv: argv}
			cfg.ApplyDefaults()
		}
		cfg.Upstreams[0].UndeclaredTools = *undeclared
		if len(readTools) > 0 {
			cfg.Upstreams[0].Tools = map[string]policy.ToolDeclaration{}
			for _, name := range readTools {
				cfg.Upstreams[0].Tools[name] = policy.ToolDeclaration{Effect: policy.EffectRead}
			}
		}
		// Undeclared tools wait for a person's confirmation, and pending
		// confirmations live in a store: a bolt file of this process,
		// removed at exit (a pending confirmation does not outlive it).
		dir, err := os.MkdirTemp("", "mcpgate-state-")
		if err != nil {
			return fmt.Errorf("state directory for confirmations: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}}
	}
	// The flags override the file, at start and on each reload (SIGHUP).
	override := func(cfg *config.Config) {
		if *listen != "" {
			cfg.Listeners.Proxy.Address = *listen
		}
		if *admin != "" {
			cfg.Listeners.Admin.Address = *admin
		}
		if *policyDir != "" {
			cfg.Policy.Dirs = []string{*policyDir}
		}
		if *extprocAddr != "" {
			cfg.Listeners.ExtProc.Address = *extprocAddr
		}
	}
	override(cfg)
	if err := cfg.Validate(); err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	if *noAuth && cfg.Auth != nil {
		// The start-up warning that authentication is off follows.
		log.Warn("--no-auth: the configuration's auth section is ignored")
		cfg.Auth = nil
	}
	reload := func(cfg *config.Config) error {
		override(cfg)
		if err := cfg.Validate(); err != nil {
			return err
		}
		if *noAuth {
			cfg.Auth = nil
		}
		return nil
	}
	var setup func(a *app.App) error
	if *cfgPath != "" {
		setup = func(a *app.App) error {
			a.SetConfigFile(*cfgPath, reload) // SIGHUP rereads it (internal/app/reload.go)
			return nil
		}
	}
	return serve(ctx, cfg, log, stdout, setup, nil)
}

// serve starts the gateway, runs setup (if set) before printing the ready
// line, reloads the policy on SIGHUP and shuts down gracefully when ctx
// ends. banner, if set, prints extra lines after the ready line.
func serve(ctx context.Context, cfg *config.Config, log *slog.Logger, stdout io.Writer, setup func(a *app.App) error, banner func(a *app.App)) error {
	a, err := app.Start(ctx, cfg, log)
	if err != nil {
		return err
	}
	if setup != nil {
		if err := setup(a); err != nil {
			_ = a.Shutdown(context.Background())
			return err
		}
	}
	extproc := "off"
	if a.ExtProcAddr != "" {
		extproc = a.ExtProcAddr
	}
	fmt.Fprintf(stdout, "mcpgate ready proxy=%s admin=%s extproc=%s\n", orOff(a.ProxyAddr), orOff(a.AdminAddr), extproc)
	if banner != nil {
		banner(a)
	}
	log.Info("mcpgate started", "proxy", a.ProxyAddr, "admin", a.AdminAddr, "extproc", a.ExtProcAddr, "version", version())

	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-hup:
			// Each part logs its own outcome (configuration, policy,
			// assertion keys); what fails keeps its previous state.
			_ = a.Reload(ctx)
		case err := <-a.Err():
			_ = a.Shutdown(context.Background())
			return err
		case <-ctx.Done():
			log.Info("shutting down")
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			if err := a.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			} else if err != nil {
				// Long-lived streams (GET streams, subscriptions/listen)
				// do not end by themselves: closing them at the end of the
				// grace period is a normal stop.
				log.Info("grace period over; remaining streams closed", "grace_seconds", shutdownGrace.Seconds())
			}
			return nil
		}
	}
}

func orOff(addr string) string {
	if addr == "" {
		return "off"
	}
	return "http://" + addr
}

func cmdValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("validate", stderr)
	cfgPath := fs.String("config", "", "configuration `file` (YAML)")
	var policyDirs stringsFlag
	fs.Var(&policyDirs, "policy-dir", "check this policy `directory` instead of policy.dirs (repeatable)")
	bundleFile := fs.String("bundle", "", "also check this OPA bundle `file` (.tar.gz)")
	bundleKey := fs.String("bundle-public-key", "", "PEM public key `file` the --bundle signature must verify against")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "validate: --config is required")
		return errUsage
	}
	var problems []error
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		problems = append(problems, err)
	}
	var dirs []string
	if cfg != nil {
		dirs = cfg.Policy.Dirs
	}
	if len(policyDirs) > 0 {
		dirs = policyDirs
	}
	if len(dirs) > 0 || *bundleFile == "" {
		if err := policy.Check(ctx, dirs); err != nil {
			problems = append(problems, fmt.Errorf("policy: %w", err))
		}
	}
	if *bundleFile != "" {
		var key []byte
		if *bundleKey != "" {
			if key, err = os.ReadFile(*bundleKey); err != nil {
				problems = append(problems, err)
			}
		}
		if err := policy.CheckBundle(ctx, *bundleFile, string(key), ""); err != nil {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s is not valid:\n%w", *cfgPath, errors.Join(problems...))
	}
	for _, w := range cfg.FederationWarnings() {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "%s: ok\n", *cfgPath)
	return nil
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// stringsFlag is a repeatable string flag.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// namesFlag is a comma-separated list of names; repeating the flag adds
// to it.
type namesFlag []string

func (n *namesFlag) String() string { return strings.Join(*n, ",") }

func (n *namesFlag) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*n = append(*n, name)
		}
	}
	return nil
}
