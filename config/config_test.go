package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/mcpgate/mcpgate/internal/golden"
	"github.com/mcpgate/mcpgate/policy"
)

// TestInvalid loads every testdata/invalid/*.yaml and checks that each
// line of the .err file beside it is a substring of the error.
func TestInvalid(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no invalid test files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load(%s) succeeded, want an error", file)
			}
			if cfg != nil {
				t.Errorf("Load returned a config along with the error")
			}
			errFile := strings.TrimSuffix(file, ".yaml") + ".err"
			if golden.Update() {
				if err := os.WriteFile(errFile, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, rerr := os.ReadFile(errFile)
			if rerr != nil {
				t.Fatalf("%v (run go test -update to create it)", rerr)
			}
			for line := range strings.Lines(string(want)) {
				line = strings.TrimRight(line, "\r\n")
				if line == "" {
					continue
				}
				if !strings.Contains(err.Error(), line) {
					t.Errorf("error does not contain %q; got:\n%v", line, err)
				}
			}
			// Every problem is a positioned *FieldError naming the file.
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Errorf("problem %q is %T, want *FieldError", e, e)
					continue
				}
				if fe.Source != file {
					t.Errorf("problem %q: Source = %q, want %q", e, fe.Source, file)
				}
			}
		})
	}
}

// TestValid loads every testdata/valid/*.yaml and compares the effective
// configuration (defaults applied) with the .json file beside it.
func TestValid(t *testing.T) {
	files, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid test files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			cfg, err := Load(file)
			if err != nil {
				t.Fatalf("Load(%s): %v", file, err)
			}
			got, err := json.MarshalIndent(cfg, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, strings.TrimSuffix(file, ".yaml")+".json", got, "go test ./config -run TestValid -update")
			checkLoaded(t, cfg)
		})
	}
}

// exampleData are the files in examples/ that are not configurations but
// data a configuration there points to.
var exampleData = []string{
	"rights.yaml", // rights.file.path of tokens.yaml
}

// exampleConfigs lists the configuration files in examples/.
func exampleConfigs(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("examples/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(files, func(f string) bool { return slices.Contains(exampleData, filepath.Base(f)) })
}

// TestExamples loads every configuration in examples/ (among them
// quickstart.yaml, which `mcpgate demo` embeds).
func TestExamples(t *testing.T) {
	entries, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) || slices.Contains(exampleData, e.Name()) {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			cfg, err := Load(filepath.Join("examples", e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			checkLoaded(t, cfg)
		})
	}
	if n == 0 {
		t.Fatal("no examples found")
	}
	t.Run("embedded quickstart", func(t *testing.T) {
		cfg, err := Parse(Quickstart, "quickstart.yaml")
		if err != nil {
			t.Fatal(err)
		}
		checkLoaded(t, cfg)
	})
}

// checkLoaded checks the properties every successfully loaded
// configuration has.
func checkLoaded(t *testing.T, cfg *Config) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate of a loaded config: %v", err)
	}
	again := clone(t, cfg)
	again.ApplyDefaults()
	if !reflect.DeepEqual(cfg, again) {
		t.Errorf("ApplyDefaults on a loaded config changed it:\n%+v\n%+v", cfg, again)
	}
}

// TestDecodersAgree checks that the schema walker and goccy/go-yaml's
// strict decoder decode every valid file to the same value.
func TestDecodersAgree(t *testing.T) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	for _, file := range append(files, exampleConfigs(t)...) {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		r := decodeConfig(data)
		if len(r.errs) > 0 {
			t.Errorf("%s: %v", file, r.errs.join())
			continue
		}
		if !reflect.DeepEqual(r.checked, r.cfg) {
			t.Errorf("%s: decoders disagree:\nwalker: %+v\ngoccy:  %+v", file, r.checked, r.cfg)
		}
	}
}

func TestDefault(t *testing.T) {
	cfg := Default("http://127.0.0.1:3000/mcp")
	// Undeclared tools are listed and confirmed, which needs a store: the
	// caller (serve) adds one.
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `upstreams[0].undeclared_tools: "confirm" needs the store section`) {
		t.Fatalf("Validate without a store = %v", err)
	}
	cfg.Store = &Store{Bolt: &BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := Upstream{Name: "default", URL: "http://127.0.0.1:3000/mcp", Route: "/mcp", Timeout: DurationOf(DefaultUpstreamTimeout), Audience: "http://127.0.0.1:3000/mcp", UndeclaredTools: policy.UndeclaredConfirm}
	if len(cfg.Upstreams) != 1 || !reflect.DeepEqual(cfg.Upstreams[0], want) {
		t.Errorf("Upstreams = %+v, want [%+v]", cfg.Upstreams, want)
	}
	if cfg.Listeners.Proxy.Address != DefaultProxyAddress || cfg.Listeners.Admin.Address != DefaultAdminAddress {
		t.Errorf("Listeners = %+v", cfg.Listeners)
	}
	if len(cfg.Policy.Dirs) != 0 || !cfg.Policy.WatchEnabled() {
		t.Errorf("Policy = %+v", cfg.Policy)
	}
	checkLoaded(t, cfg)

	// The one-line mode reports a bad URL through Validate.
	err := Default("localhost:3000/mcp").Validate()
	if err == nil || !strings.Contains(err.Error(), `upstreams[0].url: scheme must be http or https`) || !strings.Contains(err.Error(), `"http://localhost:3000/mcp"`) {
		t.Errorf("Default(bad URL).Validate() = %v", err)
	}
}

func TestApplyDefaults(t *testing.T) {
	var c Config
	c.Upstreams = []Upstream{{Name: "a", URL: "http://a"}}
	c.ApplyDefaults()
	want := Config{
		Listeners: Listeners{Proxy: Listener{Address: DefaultProxyAddress}, Admin: Listener{Address: DefaultAdminAddress}, ExtProc: ExtProcListener{MessageBudget: DurationOf(DefaultMessageBudget), MaxMessageBudget: DurationOf(DefaultMaxMessageBudget), UpstreamHeader: DefaultUpstreamHeader}},
		Upstreams: []Upstream{{Name: "a", URL: "http://a", Route: DefaultRoutePath, Timeout: DurationOf(DefaultUpstreamTimeout), Audience: "http://a", UndeclaredTools: policy.UndeclaredRefuse}},
		Policy:    Policy{Watch: ptr(true)},
		Limits: Limits{
			MaxBodyBytes: DefaultMaxBodyBytes, MaxJSONDepth: DefaultMaxJSONDepth, MaxSSEEventBytes: DefaultMaxSSEEventBytes,
			ReadHeaderTimeout: DurationOf(DefaultReadHeaderTimeout), ReadTimeout: DurationOf(DefaultReadTimeout),
		},
		Log:         Log{Format: DefaultLogFormat, Level: DefaultLogLevel},
		Audit:       Audit{Retention: DurationOf(DefaultAuditRetention), Log: DefaultAuditLog},
		Assertion:   Assertion{Issuer: DefaultAssertionIssuer, TTL: DurationOf(DefaultAssertionTTL)},
		Catalog:     Catalog{Refresh: DurationOf(DefaultCatalogRefresh), MaxPages: DefaultCatalogMaxPages, Unpinned: CatalogUnpinnedRefuse, ListChangedCheck: DurationOf(DefaultListChangedCheck)},
		WriteSafety: WriteSafety{ReplayWindow: DurationOf(DefaultReplayWindow), ConfirmTTL: DurationOf(DefaultConfirmTTL), WaitInFlight: DurationOf(DefaultWaitInFlight)},
		RateLimits: RateLimits{Backend: RateBackendMemory, Buckets: maps.Clone(DefaultBuckets), Concurrency: DefaultConcurrency,
			ReservedForWrites: DefaultReservedForWrites, LoopBrake: DefaultLoopBrake, DefaultDeadline: DurationOf(DefaultToolDeadline)},
		Tasks: Tasks{MaxTTL: DurationOf(DefaultTaskMaxTTL)},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("ApplyDefaults:\ngot  %+v\nwant %+v", c, want)
	}
	// Set values are kept.
	set := Config{Policy: Policy{Watch: ptr(false)}, Limits: Limits{ReadTimeout: dur("0s"), MaxJSONDepth: 3}, Log: Log{Level: "debug"}}
	set.ApplyDefaults()
	if set.Policy.WatchEnabled() || set.Limits.ReadTimeout != dur("0s") || set.Limits.MaxJSONDepth != 3 || set.Log.Level != "debug" {
		t.Errorf("ApplyDefaults overwrote a set value: %+v", set)
	}
}

func TestWatchEnabled(t *testing.T) {
	if !(Policy{}).WatchEnabled() || !(Policy{Watch: ptr(true)}).WatchEnabled() || (Policy{Watch: ptr(false)}).WatchEnabled() {
		t.Error("WatchEnabled: want unset → true, true → true, false → false")
	}
}

// TestValidate checks each rule of Validate on configurations built in
// Go, so that it is covered without YAML in between.
func TestValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string // substrings, one per expected problem; nil: valid
	}{
		{"valid", func(c *Config) {}, nil},
		{"no upstreams", func(c *Config) { c.Upstreams = nil }, []string{"upstreams: at least one upstream is required"}},
		{"name pattern", func(c *Config) { c.Upstreams[0].Name = "Bad.Name" }, []string{`upstreams[0].name: "Bad.Name" must be 1 to 63`}},
		{"name too long", func(c *Config) { c.Upstreams[0].Name = strings.Repeat("a", 64) }, []string{"upstreams[0].name:"}},
		{"name 63", func(c *Config) { c.Upstreams[0].Name = strings.Repeat("a", 63) }, nil},
		{"name leading dash", func(c *Config) { c.Upstreams[0].Name = "-a" }, []string{"upstreams[0].name:"}},
		{"name missing", func(c *Config) { c.Upstreams[0].Name = "" }, []string{"upstreams[0].name: required"}},
		{"duplicate name and route", func(c *Config) { c.Upstreams = append(c.Upstreams, c.Upstreams[0]) }, []string{
			`upstreams[1].name: "a" is also the name of upstreams[0]`,
			`upstreams[1].route: "/mcp" is also the route of upstreams[0]; routes must be unique (an upstream without a route gets /mcp`,
		}},
		{"url missing", func(c *Config) { c.Upstreams[0].URL = "" }, []string{"upstreams[0].url: required"}},
		{"url scheme", func(c *Config) { c.Upstreams[0].URL = "ws://a/mcp" }, []string{`upstreams[0].url: scheme must be http or https, got "ws"`}},
		{"url no host", func(c *Config) { c.Upstreams[0].URL = "http:///mcp" }, []string{"upstreams[0].url: has no host"}},
		{"url unparsable", func(c *Config) { c.Upstreams[0].URL = "http://a b/" }, []string{"upstreams[0].url: not a URL"}},
		{"url fragment", func(c *Config) { c.Upstreams[0].URL = "http://a/mcp#x" }, []string{"upstreams[0].url: must not have a #fragment"}},
		{"route relative", func(c *Config) { c.Upstreams[0].Route = "mcp" }, []string{`upstreams[0].route: "mcp" must start with "/"`}},
		{"route query", func(c *Config) { c.Upstreams[0].Route = "/mcp?x=1" }, []string{"upstreams[0].route:", "without ? or #"}},
		{"route space", func(c *Config) { c.Upstreams[0].Route = "/m cp" }, []string{"upstreams[0].route:", "spaces"}},
		{"timeout negative", func(c *Config) { c.Upstreams[0].Timeout = DurationOf(-time.Second) }, []string{`upstreams[0].timeout: "-1s" must not be negative`}},
		{"timeout empty", func(c *Config) { c.Upstreams[0].Timeout = Duration{} }, []string{"upstreams[0].timeout: required"}},
		{"tool declaration", func(c *Config) {
			c.Upstreams[0].Tools = map[string]policy.ToolDeclaration{"ok": {Effect: "read"}, "bad": {Effect: "read", Rights: []string{""}}}
		}, []string{"upstreams[0].tools.bad.rights[0]:"}},
		{"both listeners disabled", func(c *Config) { c.Listeners.Proxy.Disabled, c.Listeners.Admin.Disabled = true, true }, []string{"listeners: proxy and admin are both disabled"}},
		{"proxy disabled", func(c *Config) { c.Listeners.Proxy = Listener{Disabled: true, Address: "junk"} }, nil},
		{"address missing port", func(c *Config) { c.Listeners.Proxy.Address = "127.0.0.1" }, []string{`listeners.proxy.address: "127.0.0.1" is not host:port`}},
		{"address bad port", func(c *Config) { c.Listeners.Admin.Address = "localhost:http" }, []string{`listeners.admin.address: port "http" is not a number`}},
		{"address port range", func(c *Config) { c.Listeners.Admin.Address = ":65536" }, []string{`listeners.admin.address: port "65536"`}},
		{"address any interface", func(c *Config) { c.Listeners.Proxy.Address = ":8080" }, nil},
		{"address ipv6", func(c *Config) { c.Listeners.Proxy.Address = "[::1]:8080" }, nil},
		{"address port 0 twice", func(c *Config) { c.Listeners.Proxy.Address, c.Listeners.Admin.Address = "127.0.0.1:0", "127.0.0.1:0" }, nil},
		{"same address", func(c *Config) { c.Listeners.Admin.Address = c.Listeners.Proxy.Address }, []string{"listeners.admin.address:", "also the proxy address"}},
		{"policy dirs", func(c *Config) { c.Policy.Dirs = []string{dir, "", filepath.Join(dir, "missing"), file, dir} }, []string{
			"policy.dirs[1]: empty path",
			"policy.dirs[2]: directory", "does not exist",
			"policy.dirs[3]:", "is not a directory",
			"policy.dirs[4]:", "listed twice (also policy.dirs[0])",
		}},
		{"limits", func(c *Config) {
			c.Limits.MaxBodyBytes, c.Limits.MaxJSONDepth, c.Limits.MaxSSEEventBytes = -1, -2, -3
			c.Limits.ReadHeaderTimeout, c.Limits.ReadTimeout = Duration{}, DurationOf(-5*time.Minute)
		}, []string{
			"limits.max_body_bytes: must be greater than 0, got -1",
			"limits.max_json_depth: must be greater than 0, got -2",
			"limits.max_sse_event_bytes: must be greater than 0, got -3",
			`limits.read_header_timeout: required`,
			`limits.read_timeout: "-5m" must not be negative`,
		}},
		{"origins good", func(c *Config) {
			c.Transport.AllowedOrigins = []string{"https://app.example.com", "http://localhost:3000", "http://[::1]:8080", "vscode-webview://abc", "https://Other.example.com", "https://third.example.com/"}
		}, nil},
		{"origins bad", func(c *Config) {
			c.Transport.AllowedOrigins = []string{"https://app.example.com/mcp", "app.example.com", "https://A", "http://a:80", "https://a:0", "*", "null", "", "https://a?x", "https://u@a", "https://a", "https://a/", "https://a:"}
		}, []string{
			"transport.allowed_origins[0]:", "no path",
			"transport.allowed_origins[1]:", "is not an origin",
			"transport.allowed_origins[10]:", "listed twice (also transport.allowed_origins[2])",
			"transport.allowed_origins[3]:", `write "http://a"`,
			"transport.allowed_origins[4]:", "bad port",
			"transport.allowed_origins[5]:", "transport.allowed_origins[6]:", "transport.allowed_origins[7]: empty origin",
			"transport.allowed_origins[8]:", "transport.allowed_origins[9]:",
			"transport.allowed_origins[11]:", "listed twice",
			"transport.allowed_origins[12]:", "empty port",
		}},
		{"log", func(c *Config) { c.Log = Log{Format: "JSON", Level: "trace"} }, []string{
			`log.format: "JSON" must be one of text, json`,
			`log.level: "trace" must be one of debug, info, warn, error`,
		}},
		{"not defaulted", func(c *Config) { *c = Config{Upstreams: c.Upstreams} }, []string{
			"listeners.proxy.address: required", "listeners.admin.address: required",
			"limits.max_body_bytes", "limits.read_timeout: required", "log.format", "log.level",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default("http://127.0.0.1:3000/mcp")
			c.Upstreams[0].Name = "a"
			c.Store = &Store{Bolt: &BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
			tt.modify(c)
			err := c.Validate()
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate succeeded, want problems")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not contain %q; got:\n%v", w, err)
				}
			}
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) || fe.Path == "" {
					t.Errorf("problem %q has no key path", e)
				}
			}
		})
	}
}

// TestLoadResolvesPolicyDirs checks that relative policy directories are
// relative to the configuration file in Load and to the working directory
// in Parse.
func TestLoadResolvesPolicyDirs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "rego"), 0o755); err != nil {
		t.Fatal(err)
	}
	abs := t.TempDir()
	data := []byte("upstreams: [{name: a, url: 'http://a'}]\npolicy: {dirs: [rego, " + abs + "]}\n")
	file := filepath.Join(dir, "mcpgate.yaml")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(dir, "rego"), abs}; !slices.Equal(cfg.Policy.Dirs, want) {
		t.Errorf("Dirs = %q, want %q", cfg.Policy.Dirs, want)
	}
	_, err = Parse(data, "inline")
	if err == nil || !strings.Contains(err.Error(), `policy.dirs[0]: directory "rego" does not exist`) {
		t.Errorf("Parse: %v, want rego resolved against the working directory", err)
	}
}

func TestLoadErrors(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("# padding\n"), MaxConfigBytes/10+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Errorf("Load(big) = %v", err)
	}
}

func TestParseBounds(t *testing.T) {
	t.Run("problems capped", func(t *testing.T) {
		in := "upstreams: [{name: a, url: 'http://a'}]\ntransport:\n  allowed_origins:\n" + strings.Repeat("    - '*'\n", 150)
		_, err := Parse([]byte(in), "many.yaml")
		if n := len(unjoin(err)); n != maxProblems+1 {
			t.Errorf("%d problems reported, want %d", n, maxProblems+1)
		}
		if err == nil || !strings.Contains(err.Error(), "many.yaml: 50 more problems not shown") {
			t.Errorf("no summary line: %v", err)
		}
	})
	t.Run("alias expansion bounded", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("upstreams:\n- &u {name: a, url: 'http://a', tools: {t: {effect: read, rights: &r [" + strings.Repeat("a,", 999) + "a]}")
		for i := range 500 {
			fmt.Fprintf(&b, ", t%d: {effect: read, rights: *r}", i)
		}
		b.WriteString("}}\n" + strings.Repeat("- *u\n", 500))
		_, err := Parse([]byte(b.String()), "bomb.yaml")
		if err == nil || !strings.Contains(err.Error(), "document too large") || len(unjoin(err)) != 1 {
			t.Errorf("Parse(alias bomb) = %.500v", err)
		}
	})
}

func TestFieldError(t *testing.T) {
	tests := []struct {
		e    FieldError
		want string
	}{
		{FieldError{Source: "c.yaml", Line: 3, Column: 5, Path: "upstreams[0].tols", Msg: "unknown field"}, "c.yaml:3:5: upstreams[0].tols: unknown field"},
		{FieldError{Source: "c.yaml", Path: "upstreams", Msg: "required"}, "c.yaml: upstreams: required"},
		{FieldError{Path: "log.level", Msg: "bad"}, "log.level: bad"},
		{FieldError{Line: 2, Column: 1, Msg: "tab"}, "2:1: tab"},
		{FieldError{Source: "c.yaml", Msg: "empty"}, "c.yaml: empty"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	cause := errors.New("cause")
	if !errors.Is(&FieldError{Err: cause}, cause) {
		t.Error("FieldError does not unwrap to its cause")
	}
}

func TestPaths(t *testing.T) {
	tests := []struct{ path, parent string }{
		{"upstreams[0].tools.get", "upstreams[0].tools"},
		{"upstreams[0].tools", "upstreams[0]"},
		{"upstreams[0]", "upstreams"},
		{"upstreams", ""},
		{`upstreams[0].tools["a.b"]`, "upstreams[0].tools"},
		{`t["x[\"y"]`, "t"},
		{`t["a]"]`, "t"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := parentPath(tt.path); got != tt.parent {
			t.Errorf("parentPath(%q) = %q, want %q", tt.path, got, tt.parent)
		}
	}
	if got := keyPath("tools", "get-thing_2"); got != "tools.get-thing_2" {
		t.Errorf("keyPath plain = %q", got)
	}
	if got := keyPath("tools", "a.b"); got != `tools["a.b"]` {
		t.Errorf("keyPath quoted = %q", got)
	}
}

func TestDeclarationProblem(t *testing.T) {
	tests := []struct{ msg, path, rest string }{
		{"/rights/2: minLength: got 0, want 1", "t.x.rights[2]", "minLength: got 0, want 1"},
		{"/effect: validation failed", "t.x.effect", "validation failed"},
		{"/: missing property effect", "t.x", "missing property effect"},
		{"/a~1b: x", `t.x["a/b"]`, "x"},
		{"something else", "t.x", "something else"},
	}
	for _, tt := range tests {
		path, rest := declarationProblem("t.x", tt.msg)
		if path != tt.path || rest != tt.rest {
			t.Errorf("declarationProblem(%q) = %q, %q; want %q, %q", tt.msg, path, rest, tt.path, tt.rest)
		}
	}
}

func TestUpstreamLogValue(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	log.Info("x", "upstream", Upstream{Name: "a", URL: "https://user:s3cret@example.com/mcp", Route: "/mcp"})
	log.Info("x", "upstream", Upstream{Name: "b", URL: "http://u:s3cret@a b/"})
	if out := buf.String(); strings.Contains(out, "s3cret") || !strings.Contains(out, "upstream.name=a") {
		t.Errorf("log output leaks the password or lacks the name:\n%s", out)
	}
}

// TestDecoderCoversConfigTypes checks that every type reachable from
// Config is one the schema walker decodes.
func TestDecoderCoversConfigTypes(t *testing.T) {
	var check func(t *testing.T, typ reflect.Type, path string)
	check = func(t *testing.T, typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice:
			check(t, typ.Elem(), path)
		case reflect.Map:
			if typ.Key().Kind() != reflect.String {
				t.Errorf("%s: map key %s", path, typ.Key())
			}
			check(t, typ.Elem(), path)
		case reflect.Struct:
			for i := range typ.NumField() {
				f := typ.Field(i)
				if tag := f.Tag.Get("yaml"); strings.Contains(tag, ",inline") {
					t.Errorf("%s.%s: inline fields are not supported", path, f.Name)
				}
				check(t, f.Type, path+"."+f.Name)
			}
		case reflect.String, reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		default:
			t.Errorf("%s: type %s is not decoded by decode.go", path, typ)
		}
	}
	check(t, reflect.TypeFor[Config](), "Config")
}

// FuzzParse checks that Parse never panics and that a configuration it
// accepts is stable: it validates again, defaults change nothing, both
// decoders agree, and it survives a round trip through YAML.
func FuzzParse(f *testing.F) {
	for _, pattern := range []string{"testdata/valid/*.yaml", "testdata/invalid/*.yaml", "examples/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("upstreams: [{name: a, url: 'http://a'}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if cfg != nil {
				t.Fatal("config returned with an error")
			}
			for _, e := range unjoin(err) {
				var fe *FieldError
				if !errors.As(e, &fe) {
					t.Fatalf("problem %q is %T, want *FieldError", e, e)
				}
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("parsed config does not validate: %v", err)
		}
		again := clone(t, cfg)
		again.ApplyDefaults()
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("ApplyDefaults changed a parsed config")
		}
		if r := decodeConfig(data); !reflect.DeepEqual(r.checked, r.cfg) {
			t.Fatalf("decoders disagree:\nwalker: %#v\ngoccy:  %#v", r.checked, r.cfg)
		}
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		back, err := Parse(out, "roundtrip.yaml")
		if err != nil {
			t.Fatalf("round trip: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(normalize(cfg), normalize(back)) {
			t.Fatalf("round trip changed the config:\n%s\n%#v\n%#v", out, cfg, back)
		}
	})
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// clone deep-copies a Config through JSON.
func clone(t *testing.T, c *Config) *Config {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out := new(Config)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// normalize returns a deep copy of c with empty lists and mappings made
// nil: YAML writes both as [] or {}, so a round trip cannot keep them apart.
func normalize(c *Config) *Config {
	v := reflect.New(reflect.TypeFor[Config]())
	v.Elem().Set(normalizeValue(reflect.ValueOf(*c)))
	return v.Interface().(*Config)
}

func normalizeValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Type().Elem())
		p.Elem().Set(normalizeValue(v.Elem()))
		return p
	case reflect.Slice:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			s.Index(i).Set(normalizeValue(v.Index(i)))
		}
		return s
	case reflect.Map:
		if v.Len() == 0 {
			return reflect.Zero(v.Type())
		}
		m := reflect.MakeMapWithSize(v.Type(), v.Len())
		for iter := v.MapRange(); iter.Next(); {
			m.SetMapIndex(iter.Key(), normalizeValue(iter.Value()))
		}
		return m
	case reflect.Struct:
		s := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if s.Field(i).CanSet() {
				s.Field(i).Set(normalizeValue(v.Field(i)))
			}
		}
		return s
	}
	return v
}
