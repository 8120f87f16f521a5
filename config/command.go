package config

import (
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Defaults of a stdio upstream (upstreams[].command).
const (
	DefaultCommandListen       = "127.0.0.1:0"
	DefaultCommandStartTimeout = 60 * time.Second
	DefaultCommandStopGrace    = 5 * time.Second
)

// CommandBaseEnv are the variables of mcpgate's own environment a stdio
// upstream inherits; everything else it gets from env and env_files.
var CommandBaseEnv = []string{"PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ"}

// Command is a stdio upstream: a process mcpgate starts that reads
// JSON-RPC messages from its standard input and writes them to its
// standard output, one per line (the MCP stdio transport). mcpgate runs
// one child per upstream, restarts it with backoff when it exits, and
// serves it to the pipeline as a streamable-HTTP endpoint on loopback, so
// every stage applies as for an HTTP upstream. Its standard error goes to
// mcpgate's log.
type Command struct {
	// The program and its arguments, e.g. `[npx, -y,
	// "@modelcontextprotocol/server-everything"]`. The program is looked
	// up in `PATH` unless it contains a `/`; no shell runs it.
	//
	// Required.
	Argv []string `yaml:"argv"`
	// The working directory, relative to the configuration file; it must
	// exist.
	//
	// Default: the configuration file's directory (mcpgate's working
	// directory in the one-line mode).
	Dir string `yaml:"dir"`
	// Environment variables of the child, besides `PATH`, `HOME`, `USER`,
	// `LANG`, `LC_ALL`, `TMPDIR` and `TZ`, which it inherits from mcpgate
	// (nothing else of mcpgate's environment reaches it). Names are letters,
	// digits and `_`, not starting with a digit. Values are logged; put
	// secrets in `env_files`.
	//
	// Default: none.
	Env map[string]string `yaml:"env"`
	// Environment variables whose values are read from files (surrounding
	// white space trimmed), relative to the configuration file, e.g.
	// `{GITHUB_TOKEN: /run/secrets/github}`: for secrets, which never
	// appear in logs or `mcpgate validate`. Read at each start of the
	// child; a name must not also be in `env`.
	//
	// Default: none.
	EnvFiles map[string]string `yaml:"env_files"`
	// The loopback address of the bridge that serves the child to the
	// pipeline: `127.0.0.1` or `[::1]` with a port. Port `0` picks a free
	// one, which the standalone proxy finds itself; under Envoy, whose
	// cluster must name the port, set a fixed one (e.g.
	// `127.0.0.1:7001`). Only requests carrying the per-process secret
	// that mcpgate's pipeline adds reach the child.
	//
	// Default: `127.0.0.1:0`.
	Listen string `yaml:"listen"`
	// How long the child has to answer `initialize` after it starts
	// (`npx` may download the package first). Until it has, the upstream
	// is not ready (`/readyz`) and calls get a JSON-RPC error.
	//
	// Default: `1m`.
	StartTimeout Duration `yaml:"start_timeout"`
	// At shutdown and restart: how long the child has to exit after its
	// standard input closes, and again after `SIGTERM`, before `SIGKILL`.
	// The signals go to its process group, so grandchildren (`npx` →
	// `node`) end too.
	//
	// Default: `5s`.
	StopGrace Duration `yaml:"stop_grace"`
}

// LogValue implements slog.LogValuer: argv, dir and the names of the
// variables; the values of env_files never.
func (c *Command) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("argv", c.Argv),
		slog.String("dir", c.Dir),
		slog.Any("env", slices.Sorted(maps.Keys(c.Env))),
		slog.Any("env_files", slices.Sorted(maps.Keys(c.EnvFiles))),
		slog.String("listen", c.Listen),
	)
}

// Environ is the child's environment: CommandBaseEnv from getenv, then
// Env, then EnvFiles read now. An env file that cannot be read is an
// error naming the variable and the file, never its content.
func (c *Command) Environ(getenv func(string) string) ([]string, error) {
	env := []string{}
	for _, k := range CommandBaseEnv {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		env = append(env, k+"="+c.Env[k])
	}
	for _, k := range slices.Sorted(maps.Keys(c.EnvFiles)) {
		b, err := os.ReadFile(c.EnvFiles[k])
		if err != nil {
			return nil, fmt.Errorf("env_files.%s: %w", k, err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(b)))
	}
	return env, nil
}

// envNamePattern is what a variable name of env and env_files may be.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// resolveCommandPaths makes dir and env_files relative to baseDir; an
// unset dir becomes baseDir.
func resolveCommandPaths(c *Config, baseDir string) {
	for i := range c.Upstreams {
		cmd := c.Upstreams[i].Command
		if cmd == nil {
			continue
		}
		if cmd.Dir == "" {
			cmd.Dir = baseDir
		} else if !filepath.IsAbs(cmd.Dir) {
			cmd.Dir = filepath.Join(baseDir, cmd.Dir)
		}
		for k, p := range cmd.EnvFiles {
			if p != "" && !filepath.IsAbs(p) {
				cmd.EnvFiles[k] = filepath.Join(baseDir, p)
			}
		}
	}
}

// applyCommandDefaults fills the unset keys of u's command.
func applyCommandDefaults(u *Upstream) {
	cmd := u.Command
	if cmd == nil {
		return
	}
	if cmd.Listen == "" {
		cmd.Listen = DefaultCommandListen
	}
	cmd.StartTimeout.orDefault(DefaultCommandStartTimeout)
	cmd.StopGrace.orDefault(DefaultCommandStopGrace)
}

// checkUpstreamTarget checks that u has exactly one of url and command,
// and the one it has.
func (c *Config) checkUpstreamTarget(p *problems, at string, u Upstream) {
	switch {
	case u.Command == nil:
		checkUpstreamURL(p, at+".url", u.URL)
		return
	case u.URL != "":
		p.add(at, "has both url and command; an upstream is either an HTTP endpoint (url) or a stdio server mcpgate starts (command)")
	}
	if u.Credential != nil && u.Credential.Kind != CredentialNone {
		p.add(at+".credential", "a stdio upstream (command) sees no HTTP header fields; give the child its secrets with command.env_files")
	}
	c.checkCommand(p, at+".command", u.Command)
}

// checkCommand checks an upstream's command section (at is its key
// path).
func (c *Config) checkCommand(p *problems, at string, cmd *Command) {
	switch {
	case len(cmd.Argv) == 0:
		p.add(at+".argv", "required (the program and its arguments, e.g. [npx, -y, \"@modelcontextprotocol/server-everything\"])")
	case cmd.Argv[0] == "":
		p.add(at+".argv[0]", "the program must not be empty")
	}
	for i, a := range cmd.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			p.add(indexPath(at+".argv", i), "must not contain a NUL byte")
		}
	}
	if cmd.Dir != "" {
		if fi, err := os.Stat(cmd.Dir); err != nil {
			p.addErr(at+".dir", err, "%v", err)
		} else if !fi.IsDir() {
			p.add(at+".dir", "%q is not a directory", cmd.Dir)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cmd.Env)) {
		if !envNamePattern.MatchString(k) {
			p.add(keyPath(at+".env", k), "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
		}
		if strings.IndexByte(cmd.Env[k], 0) >= 0 {
			p.add(keyPath(at+".env", k), "must not contain a NUL byte")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cmd.EnvFiles)) {
		path := keyPath(at+".env_files", k)
		if !envNamePattern.MatchString(k) {
			p.add(path, "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
		}
		if _, dup := cmd.Env[k]; dup {
			p.add(path, "%q is also in env; set it in one of env and env_files", k)
		}
		f := cmd.EnvFiles[k]
		if f == "" {
			p.add(path, "required (the file holding the value)")
			continue
		}
		if fh, err := os.Open(f); err != nil {
			p.addErr(path, err, "cannot read the file: %v", err)
		} else {
			if fi, err := fh.Stat(); err == nil && fi.IsDir() {
				p.add(path, "cannot read the file: %s is a directory", f)
			}
			_ = fh.Close()
		}
	}
	c.checkCommandListen(p, at+".listen", cmd.Listen)
	checkDuration(p, at+".start_timeout", cmd.StartTimeout)
	checkDuration(p, at+".stop_grace", cmd.StopGrace)
	if cmd.StartTimeout.D() <= 0 {
		p.add(at+".start_timeout", "must be more than 0s")
	}
}

// checkCommandListen checks a bridge address: a loopback IP and a port;
// under Envoy (listeners.extproc on) a fixed port.
func (c *Config) checkCommandListen(p *problems, path, addr string) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addErr(path, err, "%q is not host:port (e.g. %q)", addr, "127.0.0.1:7001")
		return
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.IsLoopback() {
		p.add(path, "%q must be a loopback IP address (127.0.0.1 or ::1): the child is reachable only from this host", host)
	}
	checkAddress(p, path, addr)
	if port == "0" && c.Listeners.ExtProc.Enabled() {
		p.add(path, "needs a fixed port when listeners.extproc is on: Envoy's cluster for this upstream names it (e.g. \"127.0.0.1:7001\")")
	}
}
