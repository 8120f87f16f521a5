package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one verb of the CLI: a top-level command, a group of
// subcommands (subs), or one of those. The table dispatches, and it
// writes every help text: `mcpgate help [COMMAND...]`, `mcpgate GROUP
// help`, `mcpgate COMMAND -h` and docs/reference/cli.md.
type command struct {
	name  string // "serve", "tokens", "create"
	args  string // the synopsis after the name, e.g. "--config FILE"
	short string // one line, without a final period
	long  string // paragraphs shown above a group's verbs or below a verb's usage
	// footer follows a group's list of verbs.
	footer string
	// run runs a verb with the arguments after its name; nil for a group.
	// Every verb with flags makes its flag set with newFlagSet(path), so
	// that -h prints the verb's help from this table and its flags.
	run  func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	subs []*command
}

const adminVerbFlags = `Every verb takes:
  --admin URL   the admin listener (default $MCPGATE_ADMIN_URL, else ` + defaultAdminURL + `)
  --token T     an OIDC access token for the admin API or an admin token
                (default $MCPGATE_ADMIN_TOKEN; prefer the variable: flags show in ps)
  --json        print the API's JSON answer instead of text`

// commands is the CLI, in the order help lists it. It is filled in init:
// the verbs' flag sets look their help up in it.
var commands []*command

func init() {
	commands = []*command{
		{
			name:  "serve",
			args:  "(--config FILE | --upstream URL | --upstream-command CMD) [--listen ADDR] [--admin ADDR] [--extproc ADDR] [--policy DIR] [--no-auth]",
			short: "serve MCP clients through the gateway",
			long: `With --config, serve with a configuration file (docs/reference/configuration.md).
With --upstream, serve in front of one MCP server with the built-in
defaults: one upstream named "default" on route /mcp, the embedded default
policy, no catalog. With --upstream-command, the same in front of a stdio
MCP server that mcpgate starts (docs/guides/stdio-upstreams.md). --listen,
--admin, --extproc and --policy override the
configuration; --extproc also serves Envoy ext_proc on host:port or
unix:/path. --no-auth ignores the configuration's auth section: every
caller is anonymous, and the log says so at start.`,
			run: cmdServe,
		},
		{
			name:  "validate",
			args:  "--config FILE [--policy-dir DIR]... [--bundle FILE [--bundle-public-key PEM]]",
			short: "load the configuration, compile the Rego (or a bundle), list every problem",
			long: `Reads the configuration as serve does, compiles the policy with the tool
declarations and reports every problem at once; serves nothing. Exit
status 0 when valid, 1 otherwise.`,
			run: cmdValidate,
		},
		{
			name:  "init",
			args:  "(--upstream URL | --upstream-command CMD) [--out FILE] [--name NAME] [--route /mcp] [--manifest FILE] [--header 'Name: value']... [--force]",
			short: "list a live MCP server's tools and write a draft configuration to review",
			long: `Connects to the upstream (streamable HTTP; or starts a stdio server with
--upstream-command, drafted as upstreams[].command), lists its tools the way the
gateway does and writes a configuration with one upstream and a
declaration per tool: a proposed effect class (from the tool's name, its
annotations, taken as hints only, and its input schema; the most guarded
class, delete, where they disagree or say nothing), a proposed right and
untrusted_text paths from the output schema's prose fields. Every guess
carries its reason in a comment, and the lint findings of each tool
(manifest lint) stand beside it. The manifest is pinned: written to
--manifest (default: beside --out as FILE.manifest.json) and named in
catalog.manifest. The draft loads as written (mcpgate validate) and
serves the listed tools (mcpgate serve --config). Neither file is
overwritten without --force. See docs/guides/init.md.`,
			run: cmdInit,
		},
		{
			name:  "demo",
			args:  "[--listen ADDR] [--admin ADDR] [--upstream-listen ADDR] [--extproc ADDR] [--env-file FILE]",
			short: "run the bundled demo upstream behind the gateway",
			long: `Starts a demo MCP server (a field-service CRM with bookings,
customers and technicians) and the gateway in front of it with
config/examples/quickstart.yaml, mints gateway tokens for the demo's
persons and prints them with the steps to try; Ctrl-C stops both.
--env-file also writes the addresses and tokens as export lines
(MCP, TOKEN, ALICE_TOKEN, GINA_TOKEN, ALICE_SIGNIN, GINA_SIGNIN,
MCPGATE_ADMIN_URL, MCPGATE_ADMIN_TOKEN, RIGHTS, UPSTREAM) for another
shell to source; the file is removed when the demo stops.`,
			run: cmdDemo,
		},
		{
			name:  "tokens",
			short: "gateway-issued MCP tokens, for MCP clients that cannot do OAuth",
			long: `The verbs call the admin API. A person creates, lists and revokes their own
tokens with their own OIDC access token; a tenant admin manages their
tenant's tokens, a platform admin everyone's.`,
			footer: adminVerbFlags,
			subs: []*command{
				{
					name:  "create",
					args:  "[--tenant T] [--subject S] [--name N] [--rights a,b] [--expires-in 720h] [--toolset core]",
					short: "create a token; its secret is printed once and cannot be shown again",
					long: `Rights default to all the creator's current rights; the lifetime to the
gateway's default; the toolset (a name from the gateway's toolsets
section) to full, every tool.`,
					run: tokensCreate,
				},
				{name: "list", args: "[--tenant T] [--creator S]", short: "the tokens you may see (never their secrets)", run: tokensList},
				{name: "revoke", args: "ID", short: "revoke a token; calls made with it fail from the next one on", run: tokensRevoke},
			},
		},
		{
			name:  "killswitch",
			short: "stop MCP traffic in an incident",
			long: `While a switch is on, every new MCP request it covers is refused with 503,
Retry-After and a JSON-RPC error that shows the reason; streams already
running end with an error event; nothing reaches the MCP servers. The
global switch covers every tenant; a tenant's switch covers that tenant's
credentials. On Redis, every replica applies a change within a second.`,
			footer: `Without --tenant the verbs act on the global switch (platform admins
only); a tenant admin gives their own tenant.

` + adminVerbFlags,
			subs: []*command{
				{
					name: "on", args: "[--tenant T] --reason R",
					short: "turn a switch on (the reason is required and shown to clients)",
					run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
						return killSwitchSet(ctx, true, args, stdout, stderr)
					},
				},
				{
					name: "off", args: "[--tenant T] [--reason R]", short: "turn it off again",
					run: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
						return killSwitchSet(ctx, false, args, stdout, stderr)
					},
				},
				{name: "status", short: "the switches you may see", run: killSwitchStatus},
			},
		},
		{
			name:  "keys",
			short: "the key file that signs identity assertions for upstreams",
			long: `The key file is a private JWK Set shared by every gateway replica (mount it
from a Secret). Its first key signs; every key is published at
/.well-known/jwks.json, where upstreams fetch them.`,
			footer: `rotate, promote and remove rewrite FILE in place (atomically, mode 0600); run
them on a working copy and update the Secret from it.`,
			subs: []*command{
				{
					name: "generate", args: "[--alg EdDSA|ES256] [--out FILE]",
					short: "a new key file with one fresh key; to FILE (mode 0600, never overwritten) or stdout",
					run:   noContext(keysGenerate),
				},
				{
					name: "rotate", args: "--in FILE [--alg EdDSA|ES256] [--stage]",
					short: "add a fresh key first: it signs from the next reload on",
					long: `Older keys stay published so assertions they signed keep verifying.
--stage adds the key last instead (published, not signing); promote it
once every replica has reloaded and upstream JWKS caches have refreshed
(10 minutes with the defaults). Use --stage when several replicas reload
the file at different times.`,
					run: noContext(keysRotate),
				},
				{name: "promote", args: "--in FILE --kid KID", short: "make the key KID the signing key", run: noContext(keysPromote)},
				{
					name: "remove", args: "--in FILE --kid KID", short: "drop an old key",
					long: `Do it only after the assertion lifetime plus the upstreams' JWKS cache
time have passed since the key stopped signing (30 minutes is safe with
the defaults).`,
					run: noContext(keysRemove),
				},
				{name: "public", args: "--in FILE", short: "print the public JWKS (for upstreams configured with static keys)", run: noContext(keysPublic)},
			},
		},
		{
			name:  "sealing-keys",
			short: "the keys file that seals approval requests",
			long: `The file (write_safety.sealing_keys_file) holds AES-256-GCM keys shared by
every gateway replica (mount it from a Secret). They seal the requestState
of approvals asked through input_required; its first key seals, every key
opens. SIGHUP rereads it.`,
			footer: `rotate, promote and remove rewrite FILE in place (atomically, mode 0600).`,
			subs: []*command{
				{
					name: "generate", args: "[--out FILE]",
					short: "a new keys file with one fresh key; to FILE (mode 0600, never overwritten) or stdout",
					run:   noContext(sealingKeysGenerate),
				},
				{
					name: "rotate", args: "--in FILE [--stage]",
					short: "add a fresh key first: it seals from the next reload on; older keys still open",
					long: `--stage adds it last instead (opens, does not seal); promote it once every
replica has reloaded the file. Use --stage with several replicas.`,
					run: sealingKeysVerb("rotate"),
				},
				{name: "promote", args: "--in FILE --kid KID", short: "make the key KID the sealing key", run: sealingKeysVerb("promote")},
				{
					name: "remove", args: "--in FILE --kid KID",
					short: "drop an old key once write_safety.confirm_ttl has passed since it stopped sealing",
					long:  `What the key sealed no longer opens.`,
					run:   sealingKeysVerb("remove"),
				},
			},
		},
		{
			name:  "manifest",
			short: "the pinned tool manifest (rug-pull protection)",
			long: `The manifest (JSON, catalog.manifest in the configuration) pins the
definition hash of every tool of every upstream. The gateway hides and
refuses a tool whose definition differs from its pin, and (catalog.unpinned:
refuse) a tool with no pin, until it is pinned again. Review the output (and
the file's diff) before deploying it.`,
			subs: []*command{
				{
					name: "pin", args: "--config FILE [--out FILE] [--upstream NAME]... [--timeout 30s]",
					short: "list the upstreams' tools, show what changed, pin them",
					long: `Lists the tools of every upstream of the configuration (or only the named
ones: the other upstreams' pins stay as they are) the way the gateway does,
with mcpgate's own identity assertion; prints what changed against the
manifest file (tools added, changed with the old and new title and
description, removed); approves every listed tool as it is now and writes
the file (atomically; not rewritten when nothing changed). --out defaults
to catalog.manifest. Exits 1, writing nothing, when an upstream cannot be
listed.`,
					run: manifestPin,
				},
				{
					name: "lint", args: "[--json] [--fail-on error|warning] (FILE | --url URL [--header 'Name: value']...)",
					short: "check tool definitions against the tool-design rules",
					long: `Checks a saved tools/list answer (FILE, "-" for stdin: the result object,
a JSON-RPC response wrapping it, or an array) or a live upstream (--url,
every page) against the rules of internal/lint/RULES.md.

Exit status: 0 when no finding is at or above --fail-on, 1 when one is or
the list cannot be read, 2 for usage errors.`,
					run: cmdManifestLint,
				},
			},
		},
		{
			name:  "version",
			short: "print the version",
			run: func(_ context.Context, _ []string, stdout, _ io.Writer) error {
				fmt.Fprintln(stdout, "mcpgate", version())
				return nil
			},
		},
		{
			name:  "help",
			args:  "[COMMAND...]",
			short: "print this help, or a command's",
			run:   cmdHelp,
		},
	}
}

// aliases are other spellings of top-level verbs.
var aliases = map[string]string{"--version": "version", "-v": "version", "--help": "help", "-h": "help"}

func noContext(f func(args []string, stdout, stderr io.Writer) error) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error { return f(args, stdout, stderr) }
}

func sealingKeysVerb(verb string) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(_ context.Context, args []string, stdout, stderr io.Writer) error {
		return sealingKeysChange(verb, args, stdout, stderr)
	}
}

// run is the testable entry point: it finds the verb in the table, runs
// it and returns when it ends (ctx cancelled for servers).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		writeUsage(stderr)
		return errUsage
	}
	name := args[0]
	if a, ok := aliases[name]; ok {
		name = a
	}
	c := find(commands, name)
	if c == nil {
		fmt.Fprintf(stderr, "unknown command %q\n\n", args[0])
		writeUsage(stderr)
		return errUsage
	}
	if c.run != nil {
		return c.run(ctx, args[1:], stdout, stderr)
	}
	// A group: its verb follows.
	if len(args) == 1 {
		writeGroupHelp(stderr, c)
		return errUsage
	}
	switch args[1] {
	case "help", "--help", "-h":
		writeGroupHelp(stdout, c)
		return nil
	}
	sub := find(c.subs, args[1])
	if sub == nil {
		fmt.Fprintf(stderr, "unknown %s command %q\n\n", c.name, args[1])
		writeGroupHelp(stderr, c)
		return errUsage
	}
	return sub.run(ctx, args[2:], stdout, stderr)
}

// cmdHelp runs `mcpgate help [COMMAND [VERB]]`.
func cmdHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		writeUsage(stdout)
		return nil
	}
	c := find(commands, args[0])
	if c != nil && len(args) > 1 {
		c = find(c.subs, args[1])
	}
	if c == nil || len(args) > 2 {
		fmt.Fprintf(stderr, "no help for %q\n\n", strings.Join(args, " "))
		writeUsage(stderr)
		return errUsage
	}
	if c.run == nil {
		writeGroupHelp(stdout, c)
		return nil
	}
	writeVerbHelp(ctx, stdout, strings.Join(args, " "))
	return nil
}

func find(cs []*command, name string) *command {
	for _, c := range cs {
		if c.name == name {
			return c
		}
	}
	return nil
}

// lookup finds a verb by its path, e.g. "tokens create".
func lookup(path string) *command {
	cs, parts := commands, strings.Fields(path)
	var c *command
	for _, p := range parts {
		if c = find(cs, p); c == nil {
			return nil
		}
		cs = c.subs
	}
	return c
}

// writeUsage writes the list of every verb.
func writeUsage(w io.Writer) {
	fmt.Fprint(w, "mcpgate — MCP policy gateway\n\nUsage:\n")
	for _, c := range commands {
		if c.run != nil {
			writeSynopsis(w, c.name, c)
			continue
		}
		for _, s := range c.subs {
			writeSynopsis(w, c.name+" "+s.name, s)
		}
	}
	fmt.Fprint(w, "\n\"mcpgate help COMMAND\" (or \"mcpgate COMMAND -h\") tells more about a command and lists its flags.\n")
}

func writeSynopsis(w io.Writer, path string, c *command) {
	fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace("mcpgate "+path+" "+c.args), c.short)
}

// writeGroupHelp writes a group's description and verbs.
func writeGroupHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "mcpgate %s — %s\n\n", c.name, c.short)
	if c.long != "" {
		fmt.Fprintf(w, "%s\n\n", c.long)
	}
	fmt.Fprint(w, "Usage:\n")
	for _, s := range c.subs {
		writeSynopsis(w, c.name+" "+s.name, s)
	}
	if c.footer != "" {
		fmt.Fprintf(w, "\n%s\n", c.footer)
	}
}

// newFlagSet makes the flag set of the verb at path ("tokens create"):
// -h, and a usage error, print the verb's help with its flags.
func newFlagSet(path string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		c := lookup(path)
		if c == nil {
			fs.PrintDefaults()
			return
		}
		w := fs.Output()
		writeVerbHeader(w, path, c)
		var flags bytes.Buffer
		fs.SetOutput(&flags)
		fs.PrintDefaults()
		fs.SetOutput(w)
		if flags.Len() > 0 {
			fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
		}
	}
	return fs
}

func writeVerbHeader(w io.Writer, path string, c *command) {
	fmt.Fprintf(w, "mcpgate %s — %s\n\nUsage:\n  %s\n", path, c.short, strings.TrimSpace("mcpgate "+path+" "+c.args))
	if c.long != "" {
		fmt.Fprintf(w, "\n%s\n", c.long)
	}
}

// writeVerbHelp writes a verb's help: it runs the verb with -h, which
// prints the help with the verb's real flags; a verb without flags gets
// its description only.
func writeVerbHelp(ctx context.Context, w io.Writer, path string) {
	c := lookup(path)
	var help bytes.Buffer
	_ = c.run(ctx, []string{"-h"}, io.Discard, &help)
	if help.Len() == 0 {
		writeVerbHeader(&help, path, c)
	}
	_, _ = w.Write(help.Bytes())
}
