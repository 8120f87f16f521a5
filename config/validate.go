package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/gateway/args"
	"github.com/mcpgate/mcpgate/gateway/routes"
	"github.com/mcpgate/mcpgate/policy"
)

// httpTokenPattern is an HTTP header field name (RFC 9110 token).
var httpTokenPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// upstreamNamePattern is what an upstream name may look like: it appears in
// policy data, metric labels and logs.
var upstreamNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Validate checks the configuration as it is (call ApplyDefaults first, as
// Load and Parse do) and returns an errors.Join of a *FieldError for every
// problem, each naming its key path, or nil. It reads the file system to
// check that policy directories, the rights file, the assertion keys file
// and the directory of the bolt store exist.
func (c *Config) Validate() error {
	return c.validate().join()
}

func (c *Config) validate() problems {
	var p problems
	c.validateListeners(&p)
	c.validateUpstreams(&p)
	c.validatePolicy(&p)
	c.validatePolicyOps(&p)
	c.validateLimits(&p)
	c.validateTransport(&p)
	c.validateLog(&p)
	c.validateAuth(&p)
	c.validateStore(&p)
	c.validateAudit(&p)
	c.validateRights(&p)
	c.validateAssertion(&p)
	c.validateAdminAPI(&p)
	c.validateCatalog(&p)
	c.validateToolsets(&p)
	c.validateWrites(&p)
	c.validateSealing(&p)
	c.validateTasks(&p)
	c.validateTracing(&p)
	c.validateApprovals(&p)
	return p
}

func (c *Config) validateListeners(p *problems) {
	l := c.Listeners
	if l.Proxy.Disabled && l.Admin.Disabled && !l.ExtProc.Enabled() {
		p.add("listeners", "proxy and admin are both disabled and extproc has no address; enable at least one")
	}
	if e := l.ExtProc; e.Enabled() {
		if path, ok := strings.CutPrefix(e.Address, "unix:"); ok {
			if path == "" || !strings.HasPrefix(path, "/") {
				p.add("listeners.extproc.address", "%q: a Unix socket address is unix:/absolute/path", e.Address)
			}
		} else {
			checkAddress(p, "listeners.extproc.address", e.Address)
		}
		budget := e.MessageBudget.D()
		if !e.MessageBudget.IsSet() || budget <= 0 {
			p.add("listeners.extproc.message_budget", "%q is not a positive duration (e.g. %q)", e.MessageBudget, DurationOf(DefaultMessageBudget))
			budget = 0
		}
		if d := e.MaxMessageBudget.D(); !e.MaxMessageBudget.IsSet() || d < 0 {
			p.add("listeners.extproc.max_message_budget", "%q is not a duration of 0s or more (e.g. %q; \"0s\" never extends)", e.MaxMessageBudget, DurationOf(DefaultMaxMessageBudget))
		} else if d > 0 && d < budget {
			p.add("listeners.extproc.max_message_budget", "%q is below listeners.extproc.message_budget %q; it must be at least that, or \"0s\" never to extend", e.MaxMessageBudget, e.MessageBudget)
		} else if d > MaxMaxMessageBudget {
			p.add("listeners.extproc.max_message_budget", "%q is above %s: a request would hold Envoy's stream that long", e.MaxMessageBudget, MaxMaxMessageBudget)
		}
		if !httpTokenPattern.MatchString(e.UpstreamHeader) {
			p.add("listeners.extproc.upstream_header", "%q is not an HTTP header name", e.UpstreamHeader)
		}
		if (e.TLS.CertFile == "") != (e.TLS.KeyFile == "") {
			p.add("listeners.extproc.tls", "cert_file and key_file go together")
		}
		if e.TLS.ClientCAFile != "" && e.TLS.CertFile == "" {
			p.add("listeners.extproc.tls.client_ca_file", "mTLS needs cert_file and key_file too")
		}
		for key, f := range map[string]string{"cert_file": e.TLS.CertFile, "key_file": e.TLS.KeyFile, "client_ca_file": e.TLS.ClientCAFile} {
			if f == "" {
				continue
			}
			if _, err := os.Stat(f); err != nil {
				p.addErr("listeners.extproc.tls."+key, err, "%q cannot be read", f)
			}
		}
	}
	if !l.Proxy.Disabled {
		checkAddress(p, "listeners.proxy.address", l.Proxy.Address)
	}
	if !l.Admin.Disabled {
		checkAddress(p, "listeners.admin.address", l.Admin.Address)
	}
	if !l.Proxy.Disabled && !l.Admin.Disabled && l.Proxy.Address == l.Admin.Address && l.Proxy.Address != "" {
		if _, port, err := net.SplitHostPort(l.Proxy.Address); err == nil && port != "0" {
			p.add("listeners.admin.address", "%q is also the proxy address; the two listeners need different ports", l.Admin.Address)
		}
	}
}

// checkAddress checks a listen address: host:port with a numeric port
// (0 picks a free port). An empty host listens on every interface.
func checkAddress(p *problems, path, addr string) {
	if addr == "" {
		p.add(path, "required (host:port, e.g. %q)", DefaultProxyAddress)
		return
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addErr(path, err, "%q is not host:port (e.g. %q, or \":8080\" for every interface)", addr, DefaultProxyAddress)
		return
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (port != "0" && port[0] == '0') || n > 65535 {
		p.add(path, "port %q is not a number from 0 to 65535", port)
	}
}

func (c *Config) validateUpstreams(p *problems) {
	if len(c.Upstreams) == 0 {
		p.add("upstreams", "at least one upstream is required")
		return
	}
	names := map[string]int{}
	var rs routeOwners
	for i, u := range c.Upstreams {
		at := indexPath("upstreams", i)
		checkUniqueName(p, at+".name", "upstreams", u.Name, i, upstreamNamePattern, "1 to 63 characters of a-z, 0-9, _ and -, starting with a letter or digit", names)
		c.checkUpstreamTarget(p, at, u) // command.go
		var pattern routes.Pattern
		routeOK := false
		if _, member := c.MemberOf(u.Name); member && u.Route == "" {
			// A member of a server is reached through its server.
		} else {
			pattern, routeOK = rs.check(p, at+".route", at, u.Route)
		}
		checkURLTenant(p, at, u, routeOK, pattern.HasTenant())
		checkDuration(p, at+".timeout", u.Timeout)
		checkAudience(p, at+".audience", u)
		switch u.UndeclaredTools {
		case policy.UndeclaredRefuse:
		case policy.UndeclaredConfirm:
			if c.Store == nil {
				p.add(at+".undeclared_tools", "%q needs the store section: a person's confirmation waits there (e.g. store: {bolt: {path: /var/lib/mcpgate/state.db}})", u.UndeclaredTools)
			}
		default:
			p.add(at+".undeclared_tools", "%q must be %q or %q", u.UndeclaredTools, policy.UndeclaredRefuse, policy.UndeclaredConfirm)
		}
		c.validateCredential(p, at, u)
		for _, tool := range slices.Sorted(maps.Keys(u.Tools)) {
			// One tool at a time, so that each problem carries the
			// tool's own key path (and so its line).
			errs := policy.ValidateDeclarations(u.Name, map[string]policy.ToolDeclaration{tool: u.Tools[tool]})
			prefix := fmt.Sprintf("upstream %q: tool %q: ", u.Name, tool)
			for _, err := range errs {
				path, msg := declarationProblem(keyPath(at+".tools", tool), strings.TrimPrefix(err.Error(), prefix))
				p.addErr(path, err, "%s", msg)
			}
		}
		c.checkExposure(p, at, u)
	}
	c.validateServers(p, names, &rs)
}

// exposedNamePattern is an MCP tool name: 1–128 of A-Z, a-z, 0-9, _, -, ..
var exposedNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// gatewayToolNames are the tools mcpgate lists itself (with write safety
// on); no upstream tool may be exposed under one.
var gatewayToolNames = []string{"confirm_action", "reject_action", "list_recent_changes"}

// checkExposure checks the tools' expose sections of upstream u: each
// exposed name is a tool name, and the names clients call the upstream's
// tools by are unique: a rename takes neither a declared tool's own name
// nor another rename's name. Exposed text must not hide characters from a
// reader.
func (c *Config) checkExposure(p *problems, at string, u Upstream) {
	taken := map[string]string{} // exposed name → the tool exposing it
	for _, tool := range slices.Sorted(maps.Keys(u.Tools)) {
		e := u.Tools[tool].Expose
		if e == nil {
			continue
		}
		path := keyPath(keyPath(at+".tools", tool), "expose")
		if c.Catalog.Disabled {
			p.add(path, "needs the catalog (catalog.disabled is true): tools/list shows exposed names from it")
		}
		if e.Name != "" && e.Name != tool {
			switch other, dup := taken[e.Name]; {
			case !exposedNamePattern.MatchString(e.Name):
				p.add(path+".name", "%q is not a tool name: 1 to 128 characters of A-Z, a-z, 0-9, _, - and .", e.Name)
			case slices.Contains(gatewayToolNames, e.Name):
				p.add(path+".name", "%q is one of mcpgate's own tools (%s)", e.Name, strings.Join(gatewayToolNames, ", "))
			case hasTool(u.Tools, e.Name):
				p.add(path+".name", "%q is the name of another declared tool of upstream %q; exposed names must be unique", e.Name, u.Name)
			case dup:
				p.add(path+".name", "%q is also the exposed name of tool %q; exposed names must be unique", e.Name, other)
			default:
				taken[e.Name] = tool
			}
		}
		checkExposedText(p, path+".title", e.Title, false)
		checkExposedText(p, path+".description", e.Description, true)
		if e.InputSchema != "" {
			checkNarrowedSchema(p, path+".input_schema", e.InputSchema)
		}
	}
}

// checkNarrowedSchema checks the structure of an expose.input_schema: a
// JSON object schema that compiles, whose required properties it
// declares. Whether it narrows the upstream's schema is checked when the
// upstream's tools are listed.
func checkNarrowedSchema(p *problems, path, text string) {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal([]byte(text), &s); err != nil {
		p.add(path, "is not a JSON object schema: %v", err)
		return
	}
	if s.Type != "object" {
		p.add(path, `must be an object schema ("type": "object")`)
		return
	}
	for _, r := range s.Required {
		if _, ok := s.Properties[r]; !ok {
			p.add(path, "requires %q, which it does not declare in properties", r)
		}
	}
	if _, err := args.Compile([]byte(text)); err != nil {
		p.add(path, "does not compile as a JSON Schema: %v", err)
	}
}

func hasTool(tools map[string]policy.ToolDeclaration, name string) bool {
	_, ok := tools[name]
	return ok
}

// checkExposedText refuses text that would hide characters from a reader
// of tools/list: control characters (line breaks and tabs allowed in a
// description) and format characters (zero-width, bidi and tag
// characters, Unicode category Cf).
func checkExposedText(p *problems, path, s string, multiline bool) {
	for i, r := range s {
		if (multiline && (r == '\n' || r == '\t')) || !(unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == utf8.RuneError) {
			continue
		}
		p.add(path, "holds the invisible or control character %U at byte %d; write plain text", r, i)
		return
	}
}

// declarationProblem splits a problem policy.ValidateDeclarations reports
// for the tool at toolPath. When the message starts with a JSON pointer
// into the declaration ("/rights/2: ..."), the pointer becomes part of the
// key path (upstreams[0].tools.t.rights[2]); otherwise the message is kept
// whole under toolPath.
func declarationProblem(toolPath, msg string) (path, rest string) {
	ptr, rest, ok := strings.Cut(msg, ": ")
	if !ok || !strings.HasPrefix(ptr, "/") || strings.ContainsAny(ptr, " \t") {
		return toolPath, msg
	}
	path = toolPath
	if ptr == "/" {
		return path, rest
	}
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = strings.NewReplacer("~1", "/", "~0", "~").Replace(seg)
		if n, err := strconv.Atoi(seg); err == nil && n >= 0 && strconv.Itoa(n) == seg {
			path = indexPath(path, n)
		} else {
			path = keyPath(path, seg)
		}
	}
	return path, rest
}

func checkUpstreamURL(p *problems, path, raw string) {
	if raw == "" {
		p.add(path, "required (the upstream MCP endpoint, e.g. \"http://127.0.0.1:3000/mcp\"), unless the upstream is a stdio server (command)")
		return
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error repeats the (possibly secret-bearing) URL
		}
		p.addErr(path, err, "not a URL: %v", err)
		return
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		hint := ""
		if !strings.Contains(raw, "://") {
			hint = " (write it in full, e.g. \"http://" + raw + "\")"
		}
		if u.Scheme == "" {
			p.add(path, "%q has no scheme; it must be http or https%s", raw, hint)
		} else {
			p.add(path, "scheme must be http or https, got %q%s", u.Scheme, hint)
		}
	case u.Host == "":
		p.add(path, "has no host")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		p.add(path, "must not have a #fragment")
	}
}

// checkRoute checks an MCP route (an exact path, or a pattern with one
// {tenant} segment; see package routes) and returns it parsed, and
// whether it is usable.
func checkRoute(p *problems, path, route string) (routes.Pattern, bool) {
	switch {
	case route == "":
		p.add(path, "required (a path such as %q)", DefaultRoutePath)
	case !strings.HasPrefix(route, "/"):
		p.add(path, "%q must start with \"/\"", route)
	case strings.ContainsAny(route, "?#"):
		p.add(path, "%q must be a path only, without ? or #", route)
	case strings.ContainsFunc(route, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		p.add(path, "%q must not contain spaces or control characters", route)
	default:
		pattern, err := routes.Parse(route)
		if err != nil {
			p.addErr(path, err, "%q: %v", route, err)
			return routes.Pattern{}, false
		}
		return pattern, true
	}
	return routes.Pattern{}, false
}

// checkURLTenant checks a {tenant} in upstream u's URL (at is the
// upstream's key path): only in the URL's path, and only when the route
// has a {tenant} to fill it with.
func checkURLTenant(p *problems, at string, u Upstream, routeOK, routeHasTenant bool) {
	parsed, err := url.Parse(u.URL)
	switch {
	case err != nil:
		if strings.Contains(u.URL, routes.Param) && strings.Contains(err.Error(), "host") {
			p.add(at+".url", "%s may appear only in the URL's path, not in its host", routes.Param)
		}
		// Otherwise reported by checkUpstreamURL.
	case !strings.Contains(u.URL, routes.Param) && !strings.Contains(parsed.Path, routes.Param):
	case strings.Count(u.URL, routes.Param) != strings.Count(parsed.Path, routes.Param):
		p.add(at+".url", "%s may appear only in the URL's path (e.g. \"http://crm.internal/tenants/%s/mcp\")", routes.Param, routes.Param)
	case routeOK && !routeHasTenant:
		p.add(at+".url", "has %s but the route (%q) has none to fill it with; give the route a %s segment (e.g. \"/t/%s/mcp\") or remove it from the URL", routes.Param, u.Route, routes.Param, routes.Param)
	}
}

// checkUniqueName checks the name at path of element i of list: required,
// matching pattern (described by shape), and unique among the names seen
// so far (name → index), which it records.
func checkUniqueName(p *problems, path, list, name string, i int, pattern *regexp.Regexp, shape string, seen map[string]int) {
	switch {
	case name == "":
		p.add(path, "required")
	case !pattern.MatchString(name):
		p.add(path, "%q must be %s", name, shape)
	default:
		if j, dup := seen[name]; dup {
			p.add(path, "%q is also the name of %s[%d]; names must be unique", name, list, j)
		} else {
			seen[name] = i
		}
	}
}

// checkDuration checks a duration that must be set and not negative ("0s"
// means none).
func checkDuration(p *problems, path string, d Duration) {
	switch {
	case !d.IsSet():
		p.add(path, "required (a duration such as \"30s\"; \"0s\" for none)")
	case d.D() < 0:
		p.add(path, "%q must not be negative (\"0s\" means no timeout)", d)
	}
}

// durationRange bounds a duration key for checkDurationIn.
type durationRange struct {
	positive bool          // must be greater than 0
	min, max time.Duration // inclusive bounds; 0: none
}

// checkDurationIn checks a duration that must be set, not negative and in
// r. It returns the duration and whether it is usable.
func checkDurationIn(p *problems, path string, d Duration, r durationRange) (time.Duration, bool) {
	if !d.IsSet() {
		p.add(path, "required (a duration such as \"30s\")")
		return 0, false
	}
	switch v := d.D(); {
	case v < 0:
		p.add(path, "%q must not be negative", d)
	case r.positive && v == 0:
		p.add(path, "%q must be greater than 0", d)
	case r.min != 0 && v < r.min:
		p.add(path, "%q is below the minimum of %s", d, DurationOf(r.min))
	case r.max != 0 && v > r.max:
		p.add(path, "%q is above the maximum of %s", d, DurationOf(r.max))
	default:
		return v, true
	}
	return d.D(), false
}

func (c *Config) validatePolicy(p *problems) {
	seen := map[string]int{}
	for i, dir := range c.Policy.Dirs {
		at := indexPath("policy.dirs", i)
		if dir == "" {
			p.add(at, "empty path")
			continue
		}
		if j, dup := seen[dir]; dup {
			p.add(at, "%q is listed twice (also policy.dirs[%d])", dir, j)
			continue
		}
		seen[dir] = i
		fi, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			p.addErr(at, err, "directory %q does not exist", dir)
		case err != nil:
			p.addErr(at, err, "directory %q: %v", dir, err)
		case !fi.IsDir():
			p.add(at, "%q is not a directory", dir)
		}
	}
}

func (c *Config) validateLimits(p *problems) {
	l := c.Limits
	if l.MaxBodyBytes <= 0 {
		p.add("limits.max_body_bytes", "must be greater than 0, got %d", l.MaxBodyBytes)
	}
	if l.MaxJSONDepth <= 0 {
		p.add("limits.max_json_depth", "must be greater than 0, got %d", l.MaxJSONDepth)
	}
	if l.MaxSSEEventBytes <= 0 {
		p.add("limits.max_sse_event_bytes", "must be greater than 0, got %d", l.MaxSSEEventBytes)
	}
	checkDuration(p, "limits.read_header_timeout", l.ReadHeaderTimeout)
	checkDuration(p, "limits.read_timeout", l.ReadTimeout)
}

func (c *Config) validateTransport(p *problems) {
	seen := map[string]int{}
	for i, o := range c.Transport.AllowedOrigins {
		at := indexPath("transport.allowed_origins", i)
		if !checkOrigin(p, at, o) {
			continue
		}
		norm := strings.ToLower(strings.TrimSuffix(o, "/"))
		if j, dup := seen[norm]; dup {
			p.add(at, "%q is listed twice (also transport.allowed_origins[%d])", o, j)
			continue
		}
		seen[norm] = i
	}
}

// defaultPorts are ports a browser leaves out of an Origin header.
var defaultPorts = map[string]string{"http": "80", "https": "443"}

// checkOrigin checks one allowed origin: it must be written the way a
// browser sends the Origin header (scheme://host[:port], no default port)
// for the gateway's comparison (exact but for case and a trailing "/") to
// ever match. It reports whether o is usable.
func checkOrigin(p *problems, path, o string) bool {
	const form = "scheme://host[:port], e.g. \"https://app.example.com\""
	if o == "" {
		p.add(path, "empty origin (%s)", form)
		return false
	}
	if o == "*" || o == "null" {
		p.add(path, "%q is not allowed; list each origin (%s)", o, form)
		return false
	}
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Opaque != "" {
		p.add(path, "%q is not an origin (%s)", o, form)
		return false
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || strings.ContainsAny(o, "?#") {
		p.add(path, "%q must be only %s: no path, query or user", o, form)
		return false
	}
	if port := u.Port(); port != "" {
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil || n == 0 || port[0] == '0' {
			p.add(path, "%q has a bad port", o)
			return false
		}
		if defaultPorts[strings.ToLower(u.Scheme)] == port {
			p.add(path, "%q names the default port, which browsers leave out; write %q", o, u.Scheme+"://"+u.Hostname())
			return false
		}
	} else if strings.HasSuffix(u.Host, ":") {
		p.add(path, "%q has an empty port", o)
		return false
	}
	return true
}

var (
	logFormats = []string{"text", "json"}
	logLevels  = []string{"debug", "info", "warn", "error"}
)

func (c *Config) validateLog(p *problems) {
	if !slices.Contains(logFormats, c.Log.Format) {
		p.add("log.format", "%q must be one of %s", c.Log.Format, strings.Join(logFormats, ", "))
	}
	if !slices.Contains(logLevels, c.Log.Level) {
		p.add("log.level", "%q must be one of %s", c.Log.Level, strings.Join(logLevels, ", "))
	}
}
