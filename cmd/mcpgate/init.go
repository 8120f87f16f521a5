package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/draft"
	"github.com/mcpgate/mcpgate/internal/lint"
	"github.com/mcpgate/mcpgate/internal/stdio"
)

// defaultInitManifest is the manifest file init writes when the draft
// goes to stdout and --manifest is not given.
const defaultInitManifest = "mcpgate.manifest.json"

// cmdInit runs `mcpgate init`: list a live upstream's tools and write a
// draft configuration for a person to review, and its pinned manifest.
func cmdInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("init", stderr)
	upstream := fs.String("upstream", "", "the MCP server's endpoint `URL` (streamable HTTP), e.g. http://127.0.0.1:3000/mcp")
	upstreamCommand := fs.String("upstream-command", "", "a stdio MCP server's `command line` (as serve --upstream-command), which init starts to list its tools and drafts as upstreams[].command")
	out := fs.String("out", "", "write the draft to this `file` instead of stdout")
	manifest := fs.String("manifest", "", "write the pinned manifest to this `file` (default: beside --out, FILE.manifest.json; with stdout, "+defaultInitManifest+")")
	name := fs.String("name", "default", "the upstream's `name` in the draft (a-z, 0-9, _, -)")
	route := fs.String("route", "/mcp", "the `path` clients call on the gateway")
	force := fs.Bool("force", false, "overwrite --out and the manifest when they exist")
	timeout := fs.Duration("timeout", catalog.DefaultTimeout, "bound on listing the upstream")
	var headers headerFlag
	fs.Var(&headers, "header", "`'Name: value'` sent on every request to the upstream, e.g. its API key (repeatable; never written to the draft)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var problems []string
	var argv []string
	switch {
	case (*upstream == "") == (*upstreamCommand == ""):
		problems = append(problems, "give exactly one of --upstream and --upstream-command")
	case *upstreamCommand != "":
		var err error
		if argv, err = stdio.SplitCommand(*upstreamCommand); err != nil {
			problems = append(problems, "--upstream-command: "+err.Error())
		}
	default:
		if u, err := url.Parse(*upstream); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, "--upstream must be an http or https URL")
		}
	}
	header, err := headers.parse()
	if err != nil {
		problems = append(problems, err.Error())
	}
	if *timeout <= 0 {
		problems = append(problems, "--timeout must be positive")
	}
	if len(problems) == 0 {
		// The name, URL and route as the configuration checks them.
		skel := draft.Render(draft.Options{Upstream: *name, URL: *upstream, Command: argv, Route: *route, Snapshot: &catalog.Snapshot{}})
		if _, err := config.Parse(skel, "init"); err != nil {
			problems = append(problems, strings.ReplaceAll(err.Error(), "upstreams[0].", "--"))
		}
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(stderr, "init:", p)
		}
		fmt.Fprintln(stderr)
		fs.Usage()
		return errUsage
	}

	// Where the files go, and how the draft names the manifest.
	manifestPath, manifestRef, err := initManifestPath(*out, *manifest)
	if err != nil {
		return err
	}
	// The state store's file goes beside the manifest.
	storeRef := strings.TrimSuffix(manifestRef, ".manifest.json")
	storeRef = strings.TrimSuffix(storeRef, filepath.Ext(storeRef)) + ".state.db"
	if !*force {
		for _, p := range []string{*out, manifestPath} {
			if p == "" {
				continue
			}
			if _, err := os.Stat(p); err == nil {
				return fmt.Errorf("init: %s exists; give another path or --force to overwrite it", p)
			}
		}
	}

	u := catalog.Upstream{Name: *name, URL: *upstream}
	if argv != nil {
		// The server runs behind a bridge of its own while it is listed.
		bridges, err := startStdio(ctx, bridgeConfig(*name, argv), stderr)
		if err != nil {
			return fmt.Errorf("init: %w", err)
		}
		defer bridges.Close(context.WithoutCancel(ctx))
		u.URL = bridges.Resolve(bridgeConfig(*name, argv)).Upstreams[0].URL
		if header == nil {
			header = http.Header{}
		}
		for k, v := range bridges.Header(*name) {
			header[k] = v
		}
	}
	if len(header) > 0 {
		u.Header = func(context.Context) (http.Header, error) { return header, nil }
	}
	snap, err := catalog.List(ctx, u, catalog.ListOptions{Timeout: *timeout})
	if err != nil {
		hint := "is it an MCP server's streamable HTTP endpoint, such as http://host:port/mcp, and is it running?"
		switch msg := err.Error(); {
		case strings.Contains(msg, "Unauthorized") || strings.Contains(msg, "Forbidden"):
			hint = "the upstream wants credentials: pass them with --header 'Authorization: Bearer …' (or its API key's header)"
		case strings.Contains(msg, "connection refused"):
			hint = "nothing listens there: is the server running, on that host and port?"
		}
		return fmt.Errorf("init: cannot list the tools of %s: %w\n(%s)", redactURL(*upstream), err, hint)
	}
	defs := make([]jsontext.Value, len(snap.Tools))
	for i := range snap.Tools {
		defs[i] = snap.Tools[i].Definition
	}
	report := lint.Lint(defs, lint.Options{})

	text := draft.Render(draft.Options{
		Upstream: *name, URL: *upstream, Command: argv, Route: *route,
		Snapshot: snap, Lint: report, Manifest: manifestRef, Store: storeRef, Now: time.Now(),
	})
	if _, err := config.Parse(text, "draft"); err != nil {
		return fmt.Errorf("init: the draft does not load (a bug in init; please report it): %w", err)
	}
	m := catalog.PinSnapshots([]*catalog.Snapshot{snap}, time.Now())
	if err := m.Write(manifestPath); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if *out == "" {
		if _, err := stdout.Write(text); err != nil {
			return err
		}
	} else if err := writeFileAtomic(*out, text, 0o644); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	unsure := 0
	for _, t := range draft.Propose(*name, snap) {
		if t.Guess.Unsure {
			unsure++
		}
	}
	where := *out
	if where == "" {
		where = "stdout"
	}
	source := redactURL(*upstream)
	if argv != nil {
		source = *upstreamCommand
	}
	fmt.Fprintf(stderr, "init: %s of %s declared in %s (%d unsure, so proposed as %s, the most guarded class), %s pinned in %s; lint: %s, %s\n",
		pinCount(len(snap.Tools), "tool"), source, where, unsure, draft.MostGuarded,
		pinCount(len(snap.Tools), "tool"), manifestPath, plural(report.Errors(), "error"), plural(report.Warnings(), "warning"))
	if len(snap.Refused) > 0 {
		fmt.Fprintf(stderr, "init: %s refused by mcpgate (see the draft's comments)\n", pinCount(len(snap.Refused), "tool"))
	}
	if *out != "" {
		fmt.Fprintf(stderr, "init: review every guess, then: mcpgate validate --config %s && mcpgate serve --config %s\n", *out, *out)
	}
	return nil
}

// initManifestPath returns where the manifest is written and how the
// draft names it (catalog.manifest is relative to the configuration
// file's directory): beside --out by default, FILE.manifest.json.
func initManifestPath(out, manifest string) (path, ref string, err error) {
	switch {
	case manifest == "" && out != "":
		base := strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))
		return filepath.Join(filepath.Dir(out), base+".manifest.json"), base + ".manifest.json", nil
	case manifest == "":
		manifest = defaultInitManifest
	}
	if out != "" {
		abs, err1 := filepath.Abs(manifest)
		dir, err2 := filepath.Abs(filepath.Dir(out))
		if err := errors.Join(err1, err2); err != nil {
			return "", "", err
		}
		if rel, err := filepath.Rel(dir, abs); err == nil {
			return manifest, filepath.ToSlash(rel), nil
		}
		return manifest, abs, nil
	}
	// The draft goes to stdout, to be saved anywhere: name the manifest
	// by its absolute path.
	abs, err := filepath.Abs(manifest)
	if err != nil {
		return "", "", err
	}
	return manifest, abs, nil
}

// writeFileAtomic writes data to a temporary file beside path and
// renames it over path.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := io.Copy(f, bytes.NewReader(data))
	cerr := f.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp, mode)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// redactURL hides a URL's password.
func redactURL(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return s
}

// bridgeConfig is a configuration of one stdio upstream, name, running
// argv in the working directory.
func bridgeConfig(name string, argv []string) *config.Config {
	cfg := config.Default("")
	cfg.Upstreams[0].Name, cfg.Upstreams[0].Command = name, &config.Command{Argv: argv}
	cfg.ApplyDefaults()
	return cfg
}

// startStdio starts the stdio upstreams of cfg behind their bridges, as
// serve does, for a command that lists them (init, manifest pin), and
// waits for them to answer initialize; their problems are logged to
// stderr. Without stdio upstreams it starts nothing.
func startStdio(ctx context.Context, cfg *config.Config, stderr io.Writer) (*app.Bridges, error) {
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	bridges, err := app.StartBridges(cfg, log, nil)
	if err != nil {
		return nil, err
	}
	if err := bridges.WaitReady(ctx, cfg); err != nil {
		_ = bridges.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return bridges, nil
}
