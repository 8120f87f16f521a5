package app

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/stdio"
	"github.com/mcpgate/mcpgate/policy"
)

// maxNamedTools bounds the tool names a start-up line or an instructions
// note spells out.
const maxNamedTools = 10

// toolListings remember, per upstream, the names of the tools it listed
// at start, for the gateway's instructions note when the catalog is off
// (with the catalog on, its current listing is used).
type toolListings struct {
	mu    sync.Mutex
	names map[string][]string // upstream → listed tool names; absent: not listed
}

func (l *toolListings) set(upstream string, names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.names == nil {
		l.names = map[string][]string{}
	}
	l.names[upstream] = names
}

func (l *toolListings) get(upstream string) ([]string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.names[upstream]
	return n, ok
}

// listedTools returns the names of the tools upstream lists: the catalog's
// listing, or the one made at start; ok false when none is known.
func (a *App) listedTools(upstream string) ([]string, bool) {
	if a.catalog != nil {
		snap := a.catalog.c.Snapshot(upstream)
		if snap == nil {
			return nil, false
		}
		names := make([]string, len(snap.Tools))
		for i := range snap.Tools {
			names[i] = snap.Tools[i].Name
		}
		return names, true
	}
	return a.listings.get(upstream)
}

// undeclared splits names into the tools upstream's declarations in o name
// and those they do not.
func undeclaredOf(decls map[string]policy.ToolDeclaration, names []string) (declared int, undeclared []string) {
	for _, n := range names {
		if _, ok := decls[n]; ok {
			declared++
		} else {
			undeclared = append(undeclared, n)
		}
	}
	return declared, undeclared
}

// instructionsNote is the gateway's note for an upstream's initialize and
// server/discover results (gateway.Options.Instructions): which listed
// tools are hidden because nobody declared them and what the operator can
// add, or, with undeclared_tools: confirm, that their calls wait for a
// person. "" when every listed tool is declared or no listing is known.
func (a *App) instructionsNote(upstream string) string {
	names, ok := a.listedTools(upstream)
	if !ok {
		return ""
	}
	o := a.Pipeline.Options()
	_, undeclared := undeclaredOf(o.Declarations[upstream], names)
	if len(undeclared) == 0 {
		return ""
	}
	if o.UndeclaredTools[upstream] == policy.UndeclaredConfirm {
		return fmt.Sprintf("mcpgate: %s of this server (%s) %s not declared by the gateway's operator: each call of one first answers with a preview of the exact arguments and runs only after a person confirms it (confirm_action, or the client's own prompt).",
			countTools(len(undeclared)), namesList(undeclared), isAre(len(undeclared)))
	}
	return fmt.Sprintf("mcpgate: %s this server offers %s hidden by the gateway because its operator has not declared %s (%s). To use one, the operator declares it in the gateway configuration under the upstream %q, e.g. `tools: {%q: {effect: <effect>}}` with its real effect (read, silent_write, notify, wake, alerting or delete), or sets `undeclared_tools: confirm` on that upstream so each call waits for a person's confirmation.",
		countTools(len(undeclared)), isAre(len(undeclared)), itThem(len(undeclared)), namesList(undeclared), upstream, undeclared[0])
}

// reportTools logs, per upstream, how many tools it lists, how many are
// usable and under which rule, and the next step. Without the catalog it
// lists once each upstream whose undeclared tools are confirmed (what
// instructionsNote then uses; other upstreams are not asked anything the
// configuration did not ask for); an upstream that cannot be listed gets
// a warning, not a failed start.
func (a *App) reportTools(ctx context.Context, cfg *config.Config) {
	ups := catalogUpstreams(cfg, a.id, a.creds)
	var wg sync.WaitGroup
	for i, u := range cfg.Upstreams {
		wg.Go(func() {
			names, ok := a.listedTools(u.Name)
			if !ok && a.catalog == nil && u.UndeclaredTools == policy.UndeclaredConfirm {
				snap, err := catalog.List(ctx, ups[i], catalog.ListOptions{Timeout: firstListingTimeout, MaxPages: cfg.Catalog.MaxPages})
				if err != nil {
					a.log.Warn("the upstream's tools could not be listed at start, so the gateway cannot say which of them are declared; its calls fail until it answers", "upstream", u.Name, "error", err)
					return
				}
				for _, t := range snap.Tools {
					names = append(names, t.Name)
				}
				a.listings.set(u.Name, names)
				ok = true
			}
			if ok {
				a.logTools(u, names)
			}
		})
	}
	wg.Wait()
}

// logTools writes the start-up lines of one upstream's tools.
func (a *App) logTools(u config.Upstream, names []string) {
	declared, undeclared := undeclaredOf(u.Tools, names)
	usable := declared
	if u.UndeclaredTools == policy.UndeclaredConfirm {
		usable += len(undeclared)
	}
	a.log.Info("upstream tools", "upstream", u.Name, "listed", len(names), "declared", declared, "undeclared", len(undeclared),
		"usable", usable, "undeclared_tools", u.UndeclaredTools)
	if len(undeclared) == 0 {
		return
	}
	next := fmt.Sprintf("next step: `mcpgate init %s --out mcpgate.yaml` drafts a declaration per tool; review each effect (upstreams[].tools.<name>.effect: read, silent_write, notify, wake, alerting or delete), then `mcpgate serve --config mcpgate.yaml`", initSource(u))
	if u.UndeclaredTools == policy.UndeclaredConfirm {
		a.log.Info(fmt.Sprintf("%s %s listed but not declared: every call of one shows a preview with its exact arguments and runs only after a person confirms it (confirm_action or the client's prompt)", countTools(len(undeclared)), isAre(len(undeclared))),
			"upstream", u.Name, "tools", namesList(undeclared))
		a.log.Info(next, "upstream", u.Name)
		return
	}
	a.log.Warn(fmt.Sprintf("%s the upstream lists %s hidden and refused because nobody declared %s; declare each under upstreams[].tools, or set upstreams[].undeclared_tools: confirm so each call waits for a person's confirmation", countTools(len(undeclared)), isAre(len(undeclared)), itThem(len(undeclared))),
		"upstream", u.Name, "tools", namesList(undeclared), "example", fmt.Sprintf("tools: {%q: {effect: <effect>}}", undeclared[0]))
	a.log.Info(next, "upstream", u.Name)
}

// initSource is the flag of mcpgate init that reaches u, quoted for a
// shell: its URL, or for a stdio upstream its command line (its url is
// the bridge's, which lives only as long as this process and refuses
// requests without the process's secret).
func initSource(u config.Upstream) string {
	if u.Command == nil {
		return "--upstream " + u.URL
	}
	line := stdio.JoinCommand(u.Command.Argv)
	if !strings.ContainsAny(line, "'\"$`\\!") {
		return `--upstream-command "` + line + `"`
	}
	return "--upstream-command '" + strings.ReplaceAll(line, "'", `'\''`) + "'"
}

// namesList is up to maxNamedTools names, sorted, comma-separated, with
// "…" when there are more.
func namesList(names []string) string {
	s := slices.Sorted(slices.Values(names))
	if len(s) > maxNamedTools {
		return strings.Join(s[:maxNamedTools], ", ") + ", …"
	}
	return strings.Join(s, ", ")
}

func countTools(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return fmt.Sprintf("%d tools", n)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func itThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
