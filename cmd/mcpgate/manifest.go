package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/catalog"
)

// pinNamesFlag is a repeatable string flag.
type pinNamesFlag []string

func (s *pinNamesFlag) String() string     { return strings.Join(*s, ",") }
func (s *pinNamesFlag) Set(v string) error { *s = append(*s, v); return nil }

func manifestPin(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("manifest pin", stderr)
	cfgPath := fs.String("config", "", "configuration `file` (YAML)")
	out := fs.String("out", "", "manifest `file` to write (default: the configuration's catalog.manifest)")
	var only pinNamesFlag
	fs.Var(&only, "upstream", "pin only this upstream `name` (repeatable; the other upstreams' pins are kept)")
	timeout := fs.Duration("timeout", catalog.DefaultTimeout, "bound on listing one upstream")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgPath == "" {
		fmt.Fprintln(stderr, "manifest pin: --config is required")
		return errUsage
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	path := *out
	if path == "" {
		path = cfg.Catalog.Manifest
	}
	if path == "" {
		fmt.Fprintln(stderr, "manifest pin: --out is required (the configuration sets no catalog.manifest)")
		return errUsage
	}
	bridges, err := startStdio(ctx, cfg, stderr) // stdio upstreams run while they are listed (init.go)
	if err != nil {
		return fmt.Errorf("manifest pin: %w", err)
	}
	defer bridges.Close(context.WithoutCancel(ctx))
	cfg = bridges.Resolve(cfg)
	ups, err := pinUpstreams(cfg, only)
	if err != nil {
		fmt.Fprintln(stderr, "manifest pin:", err)
		return errUsage
	}
	if err := catalogHeaders(cfg, ups); err != nil {
		return err
	}
	for i := range ups {
		ups[i].Header = bridges.WithHeader(ups[i].Name, ups[i].Header)
	}
	old, err := catalog.LoadManifest(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		old = nil
	case err != nil:
		return fmt.Errorf("%w (fix or move the file; pin does not overwrite a manifest it cannot read)", err)
	}

	snaps, failed := pinListAll(ctx, ups, catalog.ListOptions{MaxPages: cfg.Catalog.MaxPages, Timeout: *timeout})
	for i, err := range failed {
		if err != nil {
			fmt.Fprintf(stderr, "upstream %s (%s): cannot be listed: %v\n", ups[i].Name, ups[i].URL, err)
		}
	}
	if n := pinFailures(failed); n > 0 {
		return fmt.Errorf("%d of %d upstreams could not be listed; %s was not written", n, len(ups), path)
	}

	next := catalog.PinSnapshots(snaps, time.Now())
	if len(only) > 0 && old != nil {
		for name, pins := range old.Upstreams {
			if !slices.Contains(only, name) {
				next.Upstreams[name] = pins
			}
		}
	}
	if old == nil {
		fmt.Fprintf(stdout, "%s does not exist yet: every listed tool is new\n", path)
	}
	for i, s := range snaps {
		printPinDiff(stdout, ups[i], s, old)
	}
	if old != nil && len(only) == 0 {
		for _, name := range slices.Sorted(maps.Keys(old.Upstreams)) {
			if _, ok := next.Upstreams[name]; !ok {
				fmt.Fprintf(stdout, "upstream %s: not in the configuration any more; its pins (%s) are removed\n", name, pinCount(len(old.Upstreams[name].Tools), "tool"))
			}
		}
	}
	tools := 0
	for _, p := range next.Upstreams {
		tools += len(p.Tools)
	}
	if old != nil && old.Equal(next) {
		fmt.Fprintf(stdout, "%s unchanged (%s, %s pinned); not rewritten\n", path, pinCount(len(next.Upstreams), "upstream"), pinCount(tools, "tool"))
		return nil
	}
	if err := next.Write(path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, %s pinned)\n", path, pinCount(len(next.Upstreams), "upstream"), pinCount(tools, "tool"))
	return nil
}

// pinUpstreams returns the configured upstreams to list: all, or the ones
// named by --upstream (each must be configured).
func pinUpstreams(cfg *config.Config, only []string) ([]pinTarget, error) {
	var out []pinTarget
	for _, u := range cfg.Upstreams {
		if len(only) == 0 || slices.Contains(only, u.Name) {
			out = append(out, pinTarget{Upstream: catalog.Upstream{Name: u.Name, URL: u.URL}, audience: u.Audience})
		}
	}
	for _, name := range only {
		if !slices.ContainsFunc(cfg.Upstreams, func(u config.Upstream) bool { return u.Name == name }) {
			return nil, fmt.Errorf("--upstream %q is not an upstream of the configuration", name)
		}
	}
	return out, nil
}

type pinTarget struct {
	catalog.Upstream
	audience string
}

// catalogHeaders gives every upstream the catalog's identity assertion,
// signed the way the gateway signs (assertion.keys_file, assertion.issuer
// and ttl, upstreams[].audience). Without an auth section the gateway
// sends no assertion, and neither does pin. With one, a keys file is
// required: an upstream that verifies assertions trusts the gateway's
// published keys, and a key made for this command would be refused.
func catalogHeaders(cfg *config.Config, ups []pinTarget) error {
	if cfg.Auth == nil {
		return nil
	}
	if cfg.Assertion.KeysFile == "" {
		return errors.New("manifest pin: assertion.keys_file is not set, so the gateway signs its identity assertions with a key made per process, and an upstream that verifies assertions would refuse one made by this command; set assertion.keys_file (mcpgate keys generate) and run pin with the same configuration")
	}
	ks, err := assertion.LoadKeySet(cfg.Assertion.KeysFile)
	if err != nil {
		return fmt.Errorf("assertion keys: %w", err)
	}
	signer, err := assertion.NewSigner(ks, assertion.SignerOptions{Issuer: cfg.Assertion.Issuer, TTL: cfg.Assertion.TTL.D()})
	if err != nil {
		return fmt.Errorf("assertion: %w", err)
	}
	for i := range ups {
		ups[i].Header = catalog.SignedHeader(signer, ups[i].audience)
	}
	return nil
}

// pinListAll lists the upstreams concurrently; results in order.
func pinListAll(ctx context.Context, ups []pinTarget, o catalog.ListOptions) ([]*catalog.Snapshot, []error) {
	snaps := make([]*catalog.Snapshot, len(ups))
	errs := make([]error, len(ups))
	var wg sync.WaitGroup
	for i := range ups {
		wg.Go(func() { snaps[i], errs[i] = catalog.List(ctx, ups[i].Upstream, o) })
	}
	wg.Wait()
	return snaps, errs
}

func pinFailures(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}

// printPinDiff prints what pinning s changes against old: tools added,
// changed (title and description old → new when they differ; otherwise
// the schemas or annotations changed), removed, and refused.
func printPinDiff(w io.Writer, u pinTarget, s *catalog.Snapshot, old *catalog.Manifest) {
	var prev map[string]catalog.Pin
	if old != nil {
		prev = old.Upstreams[s.Upstream].Tools
	}
	var lines []string
	added, changed, removed := 0, 0, 0
	for i := range s.Tools {
		t := &s.Tools[i]
		p, ok := prev[t.Name]
		switch {
		case !ok:
			added++
			lines = append(lines, fmt.Sprintf("  + %s%s", t.Name, pinTitleDesc(t.Title, t.Description)))
		case p.Hash != t.Hash:
			changed++
			var what []string
			if p.Title != t.Title {
				what = append(what, fmt.Sprintf("      title:       %s\n                 → %s", pinQuote(p.Title), pinQuote(t.Title)))
			}
			if p.Description != t.Description {
				what = append(what, fmt.Sprintf("      description: %s\n                 → %s", pinQuote(p.Description), pinQuote(t.Description)))
			}
			if len(what) == 0 {
				lines = append(lines, fmt.Sprintf("  ~ %s: definition changed (input or output schema, or annotations)", t.Name))
			} else {
				lines = append(lines, fmt.Sprintf("  ~ %s: changed", t.Name))
				lines = append(lines, what...)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := s.Lookup(name); !ok {
			removed++
			lines = append(lines, fmt.Sprintf("  - %s: no longer listed; its pin is removed", name))
		}
	}
	for _, r := range s.Refused {
		lines = append(lines, fmt.Sprintf("  ! %s: refused (%s); not pinned, the gateway never shows it", pinQuote(r.Name), r.Reason))
	}
	summary := "no changes"
	if added+changed+removed > 0 {
		summary = fmt.Sprintf("%d added, %d changed, %d removed", added, changed, removed)
	}
	if len(s.Refused) > 0 {
		summary += fmt.Sprintf(", %d refused", len(s.Refused))
	}
	fmt.Fprintf(w, "upstream %s (%s, MCP %s): %s listed, %s\n", u.Name, u.URL, s.ProtocolVersion, pinCount(len(s.Tools), "tool"), summary)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// pinCount is "1 tool", "2 tools".
func pinCount(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// pinTitleDesc formats a new tool's title and description for the summary.
func pinTitleDesc(title, desc string) string {
	var b strings.Builder
	if title != "" {
		b.WriteString(" " + pinQuote(title))
	}
	if desc != "" {
		b.WriteString(": " + pinQuote(desc))
	}
	return b.String()
}

// pinQuote quotes s the Go way, so invisible, bidi and control characters
// show as escapes (\u200b, \u202e) instead of hiding in the terminal.
func pinQuote(s string) string {
	return fmt.Sprintf("%q", s)
}
