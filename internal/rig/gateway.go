package rig

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"text/template"
	"time"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/internal/catalog"
)

// Tenant is the tenant of every bench person.
const Tenant = "acme"

// Rights the bench persons hold.
var Rights = []string{"status:read", "notes:write"}

// GatewayOptions configure StartGateway.
type GatewayOptions struct {
	// Binary is the mcpgate executable.
	Binary string
	// Dir holds the configuration, keys, rights file, manifest and (with
	// bbolt) the state database.
	Dir string
	// UpstreamURL is the upstream's MCP endpoint.
	UpstreamURL string
	// People is how many persons (and tokens) to create: u01, u02, ….
	People int
	// RedisURL selects the Redis store (unix://…); empty: bbolt in Dir.
	RedisURL string
	// UpstreamTimeout is upstreams[].timeout ("0s": none).
	UpstreamTimeout string
	// MaxSSEEventBytes is limits.max_sse_event_bytes (0: the default).
	MaxSSEEventBytes int
	// RightsStaleness is rights.max_staleness ("0s" as in the quickstart:
	// the file is consulted on every call).
	RightsStaleness string
	// PolicyDir, when set, is policy.dirs (watch off; SIGHUP reloads).
	PolicyDir string
	// Stderr receives the gateway's log (nil: kept for Logs).
	Stderr io.Writer
}

// Gateway is a running `mcpgate serve` process.
type Gateway struct {
	Cmd      *exec.Cmd
	Proxy    string // http://host:port (the MCP route is Proxy+"/mcp")
	Admin    string // http://host:port
	ExtProc  string // host:port of the ext_proc gRPC listener
	Tokens   []string
	Config   string // the configuration file
	admin    string // the static admin token
	mu       sync.Mutex
	audit    int            // audit records seen on stdout
	outcomes map[string]int // audit outcome → count
	logs     bytes.Buffer   // stderr when no Stderr was given
	done     chan struct{}
	lines    chan string
}

var configTmpl = template.Must(template.New("cfg").Parse(`listeners:
  proxy: {address: "{{.ProxyAddr}}"}
  admin: {address: 127.0.0.1:0}
  extproc: {address: 127.0.0.1:0}
upstreams:
  - name: bench
    url: "{{.UpstreamURL}}"
    route: /mcp
    timeout: {{.Timeout}}
    tools:
      get_status:
        effect: read
        rights: ["status:read"]
        result_fields: [service, state, checked_at]
      slow_status:
        effect: read
        rights: ["status:read"]
        result_fields: [service, state, checked_at]
      stream_report:
        effect: read
        rights: ["status:read"]
        untrusted_text: [report]
      reset_stream:
        effect: read
        rights: ["status:read"]
      record_note:
        effect: silent_write
        rights: ["notes:write"]
policy:
{{- if .PolicyDir}}
  dirs: ["{{.PolicyDir}}"]
  watch: false
{{- else}}
  dirs: []
{{- end}}
  secret_names: [password]
{{- if .MaxSSE}}
limits:
  max_sse_event_bytes: {{.MaxSSE}}
{{- end}}
auth:
  resource_base_url: "{{.Base}}"
  gateway_tokens: {}
store:
{{- if .RedisURL}}
  redis: {url: "{{.RedisURL}}"}
{{- else}}
  bolt: {path: "{{.Dir}}/state.db"}
{{- end}}
audit:
  log: stdout
rights:
  file: {path: "{{.Dir}}/rights.yaml"}
  max_staleness: {{.Staleness}}
assertion:
  keys_file: "{{.Dir}}/assertion-keys.json"
catalog:
  manifest: "{{.Dir}}/manifest.json"
rate_limits:
  # Load comes from many clients at once: the buckets are kept (every call
  # still takes from them) but sized so that the load is never refused.
  buckets:
    reads: {rate: 1000000, per: 1s, burst: 1000000}
    writes: {rate: 1000000, per: 1s, burst: 1000000}
admin_api:
  static_tokens:
    - {name: bench, sha256: "{{.AdminSum}}", role: platform_admin}
log:
  level: warn
`))

// readyLine is what `mcpgate serve` prints once every listener is up.
var readyLine = regexp.MustCompile(`^mcpgate ready proxy=(\S+) admin=(\S+) extproc=(\S+)$`)

// StartGateway writes the configuration, pins the upstream's tools, starts
// `mcpgate serve` and creates one gateway token per person through the
// admin API. The process is stopped by Stop.
func StartGateway(ctx context.Context, o GatewayOptions) (*Gateway, error) {
	if o.People <= 0 {
		o.People = 1
	}
	if o.UpstreamTimeout == "" {
		o.UpstreamTimeout = "0s"
	}
	if o.RightsStaleness == "" {
		o.RightsStaleness = "0s"
	}
	// The proxy's port is fixed before start: auth.resource_base_url names it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	proxyAddr := ln.Addr().String()
	_ = ln.Close()

	var rights strings.Builder
	rights.WriteString("tenants:\n  " + Tenant + ":\n")
	for i := range o.People {
		fmt.Fprintf(&rights, "    %s:\n      active: true\n      rights: [%s]\n", Person(i), strings.Join(Rights, ", "))
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "rights.yaml"), []byte(rights.String()), 0o600); err != nil {
		return nil, err
	}
	ks, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		return nil, err
	}
	priv, err := ks.MarshalPrivate()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "assertion-keys.json"), priv, 0o600); err != nil {
		return nil, err
	}
	// Approve the upstream's tools as they are now (mcpgate manifest pin).
	snap, err := catalog.List(ctx, catalog.Upstream{Name: "bench", URL: o.UpstreamURL}, catalog.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the upstream's tools to pin them: %w", err)
	}
	if err := catalog.PinSnapshots([]*catalog.Snapshot{snap}, time.Now()).Write(filepath.Join(o.Dir, "manifest.json")); err != nil {
		return nil, err
	}
	adminToken := "mcpgadm_" + rand.Text()
	sum := sha256.Sum256([]byte(adminToken))
	var cfg bytes.Buffer
	if err := configTmpl.Execute(&cfg, map[string]any{
		"ProxyAddr": proxyAddr, "Base": "http://" + proxyAddr, "UpstreamURL": o.UpstreamURL,
		"Timeout": o.UpstreamTimeout, "Dir": o.Dir, "RedisURL": o.RedisURL, "MaxSSE": o.MaxSSEEventBytes,
		"Staleness": o.RightsStaleness, "PolicyDir": o.PolicyDir, "AdminSum": hex.EncodeToString(sum[:]),
	}); err != nil {
		return nil, err
	}
	g := &Gateway{Config: filepath.Join(o.Dir, "mcpgate.yaml"), admin: adminToken, outcomes: map[string]int{},
		done: make(chan struct{}), lines: make(chan string, 1)}
	if err := os.WriteFile(g.Config, cfg.Bytes(), 0o600); err != nil {
		return nil, err
	}
	g.Cmd = exec.Command(o.Binary, "serve", "--config", g.Config)
	if o.Stderr != nil {
		g.Cmd.Stderr = o.Stderr
	} else {
		g.Cmd.Stderr = &lockedWriter{mu: &g.mu, w: &g.logs}
	}
	stdout, err := g.Cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := g.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = g.Cmd.Wait(); close(g.done) }()
	go g.readStdout(stdout)
	select {
	case line := <-g.lines:
		m := readyLine.FindStringSubmatch(line)
		if m == nil {
			g.Stop()
			return nil, fmt.Errorf("mcpgate: unexpected first line %q\n%s", line, g.Logs())
		}
		g.Proxy, g.Admin, g.ExtProc = m[1], m[2], m[3]
	case <-g.done:
		return nil, fmt.Errorf("mcpgate exited before its ready line: %v\n%s", g.Cmd.ProcessState, g.Logs())
	case <-time.After(60 * time.Second):
		g.Stop()
		return nil, fmt.Errorf("mcpgate: no ready line within 60s\n%s", g.Logs())
	}
	for i := range o.People {
		tok, err := g.CreateToken(ctx, Person(i))
		if err != nil {
			g.Stop()
			return nil, err
		}
		g.Tokens = append(g.Tokens, tok)
	}
	return g, nil
}

// Person is the subject of the i-th bench person.
func Person(i int) string { return fmt.Sprintf("u%02d", i+1) }

// readStdout hands the first line (the ready line) to StartGateway and
// counts the audit records (JSON lines with an "outcome") after it.
func (g *Gateway) readStdout(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			g.lines <- line
			continue
		}
		var rec struct {
			Outcome  string `json:"outcome"`
			Action   string `json:"action"`
			Channel  string `json:"channel"`
			StoreErr string `json:"store_error"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Outcome != "" && rec.Channel == "mcp" {
			g.mu.Lock()
			g.audit++
			g.outcomes[rec.Action+" "+rec.Outcome]++
			if rec.StoreErr != "" {
				g.outcomes["store_error"]++
			}
			g.mu.Unlock()
		}
	}
}

// AuditRecords returns how many audit records (channel mcp) the gateway
// logged so far, by "action outcome".
func (g *Gateway) AuditRecords() (int, map[string]int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := make(map[string]int, len(g.outcomes))
	for k, v := range g.outcomes {
		m[k] = v
	}
	return g.audit, m
}

// Logs is the gateway's stderr so far (when GatewayOptions.Stderr was nil).
func (g *Gateway) Logs() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.logs.String()
}

// CreateToken creates a gateway token for subject in Tenant through the
// admin API (POST /v1/tokens) and returns its secret.
func (g *Gateway) CreateToken(ctx context.Context, subject string) (string, error) {
	body, _ := json.Marshal(map[string]any{"tenant": Tenant, "subject": subject, "name": "bench"})
	req, err := http.NewRequestWithContext(ctx, "POST", g.Admin+"/v1/tokens", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+g.admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Token string `json:"token"`
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("create token for %s: %s: %s", subject, resp.Status, b)
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Token == "" {
		return "", fmt.Errorf("create token for %s: answer %s", subject, b)
	}
	return out.Token, nil
}

// Metric returns the value of the first exposition line starting with
// series (name and labels as printed) on /metrics.
func (g *Gateway) Metric(series string) (float64, error) {
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			_, err := fmt.Sscan(rest, &v)
			return v, err
		}
	}
	return 0, fmt.Errorf("/metrics has no %s", series)
}

// Reload sends SIGHUP (policy, manifest and keys are reread).
func (g *Gateway) Reload() error { return g.Cmd.Process.Signal(syscall.SIGHUP) }

// Pid is the gateway's process id.
func (g *Gateway) Pid() int { return g.Cmd.Process.Pid }

// Stop ends the gateway (SIGINT, then SIGKILL after 15s) and reports
// whether it stopped by itself.
func (g *Gateway) Stop() error {
	select {
	case <-g.done:
		return nil
	default:
	}
	_ = g.Cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
		return nil
	case <-time.After(15 * time.Second):
		_ = g.Cmd.Process.Kill()
		<-g.done
		return errors.New("mcpgate did not stop within 15s of SIGINT")
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
