package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/mcpgate/mcpgate/internal/admin"
)

func killSwitchSet(ctx context.Context, on bool, args []string, stdout, stderr io.Writer) error {
	verb := map[bool]string{true: "on", false: "off"}[on]
	fs := newFlagSet("killswitch "+verb, stderr)
	var af adminFlags
	af.register(fs)
	tenant := fs.String("tenant", "", "the `tenant` whose switch to set (default: the global switch)")
	reason := fs.String("reason", "", "why (`text` shown to every refused client; required for on)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if on && strings.TrimSpace(*reason) == "" {
		fmt.Fprintln(stderr, "mcpgate killswitch on needs --reason: it is shown to every client whose request is refused")
		return errUsage
	}
	c, err := af.client(stderr)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodPut, "/v1/killswitch", admin.SetSwitchRequest{Tenant: *tenant, On: &on, Reason: *reason})
	if err != nil {
		return err
	}
	if af.json {
		return writeRaw(stdout, raw)
	}
	var s admin.Switch
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("admin API: unexpected answer to killswitch %s: %s", verb, snippet(raw))
	}
	state := "OFF: MCP requests " + switchScope(s.Tenant) + " go through again"
	if s.On {
		state = "ON: MCP requests " + switchScope(s.Tenant) + " are refused (503) and running streams end"
	}
	fmt.Fprintf(stdout, "kill switch %s\nset by %s at %s\n", state, orDash(s.SetBy), formatTime(s.At))
	if s.Reason != "" {
		fmt.Fprintf(stdout, "reason: %s\n", s.Reason)
	}
	return nil
}

func switchScope(tenant string) string {
	if tenant == "" {
		return "of every tenant"
	}
	return "of tenant " + tenant
}

func killSwitchStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("killswitch status", stderr)
	var af adminFlags
	af.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c, err := af.client(stderr)
	if err != nil {
		return err
	}
	raw, err := c.do(ctx, http.MethodGet, "/v1/killswitch", nil)
	if err != nil {
		return err
	}
	if af.json {
		return writeRaw(stdout, raw)
	}
	var l admin.SwitchList
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("admin API: unexpected answer to killswitch status: %s", snippet(raw))
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tSTATE\tSINCE\tSET BY\tREASON")
	for _, s := range l.Switches {
		scope := "global"
		if s.Tenant != "" {
			scope = "tenant " + s.Tenant
		}
		state := "off"
		if s.On {
			state = "ON"
		}
		since := "-"
		if s.At != nil {
			since = formatTime(s.At)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", scope, state, since, orDash(s.SetBy), orDash(s.Reason))
	}
	return tw.Flush()
}
