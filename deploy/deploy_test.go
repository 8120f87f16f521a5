// Package deploy holds the files that watch a running mcpgate: the Grafana
// dashboard (grafana/) and the Prometheus alerting rules with their unit
// tests (prometheus/). Its tests check them against promtool and against
// the metrics a started gateway registers.
package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/app"
	"github.com/mcpgate/mcpgate/internal/demo"
	"github.com/mcpgate/mcpgate/rights"
)

// promtool returns the promtool binary: MCPGATE_PROMTOOL when set (CI sets
// it; set but empty fails), else promtool on PATH, else the test skips
// (outside CI only).
func promtool(t *testing.T) string {
	t.Helper()
	p, set := os.LookupEnv("MCPGATE_PROMTOOL")
	if set {
		if p == "" {
			t.Fatal("MCPGATE_PROMTOOL is set but empty: promtool is required")
		}
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not installed and CI is set (apt-get install prometheus)")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	return p
}

func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestAlertRulesPromtool: `promtool check rules` accepts alerts.yaml and
// `promtool test rules` passes every case of alerts_test.yaml.
func TestAlertRulesPromtool(t *testing.T) {
	out := runPromtool(t, "prometheus", "check", "rules", "alerts.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
	out = runPromtool(t, "prometheus", "test", "rules", "alerts_test.yaml")
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// TestAlertRulesShape: every alert uses only metrics mcpgate registers,
// has a severity and the summary, description, runbook and runbook_url
// annotations, the runbook_url pointing at its section of deploy/README.md,
// and several alerts have promtool test cases.
func TestAlertRulesShape(t *testing.T) {
	data, err := os.ReadFile("prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("prometheus/alerts_test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	known := registeredMetrics(t)
	tested := 0
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule without alert", g.Name)
				continue
			}
			checkMetrics(t, "alert "+r.Alert, r.Expr, known)
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("alert %s: severity %q", r.Alert, r.Labels["severity"])
			}
			for _, a := range []string{"summary", "description", "runbook", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s lacks the %s annotation", r.Alert, a)
				}
			}
			anchor := strings.ToLower(r.Alert)
			if !strings.HasSuffix(r.Annotations["runbook_url"], "deploy/README.md#"+anchor) || !strings.Contains(string(readme), "### "+r.Alert+"\n") {
				t.Errorf("alert %s: runbook_url %q must point at a \"### %s\" section of deploy/README.md", r.Alert, r.Annotations["runbook_url"], r.Alert)
			}
			if strings.Contains(string(tests), "alertname: "+r.Alert+"\n") {
				tested++
			}
		}
	}
	if tested < 8 {
		t.Errorf("only %d alerts have promtool test cases", tested)
	}
}

// dashboard is the part of a Grafana dashboard model the tests read.
type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title      string `json:"title"`
	Type       string `json:"type"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// TestDashboard: the dashboard is valid JSON with templated datasource,
// job and instance variables; every panel queries the templated data
// source; every expression names only metrics mcpgate registers, filters
// them by $job and $instance, and is PromQL promtool accepts.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile("grafana/mcpgate-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	for name, typ := range map[string]string{"datasource": "datasource", "job": "query", "instance": "query"} {
		if vars[name] != typ {
			t.Errorf("template variable %q: type %q, want %q", name, vars[name], typ)
		}
	}
	known := registeredMetrics(t)
	var exprs []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q does not use the templated data source", p.Title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				checkMetrics(t, "panel "+p.Title, tg.Expr, known)
				for _, sel := range regexp.MustCompile(`mcpgate_[a-z0-9_]+(\{[^}]*\})?`).FindAllStringSubmatch(tg.Expr, -1) {
					if !strings.Contains(sel[1], `job=~"$job"`) || !strings.Contains(sel[1], `instance=~"$instance"`) {
						t.Errorf("panel %q: %s is not filtered by $job and $instance", p.Title, sel[0])
					}
				}
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(d.Panels)
	if len(exprs) < 30 {
		t.Errorf("only %d queries", len(exprs))
	}
	// PromQL syntax: each query, with Grafana's variables replaced, as a
	// recording rule promtool checks.
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	r := strings.NewReplacer("$__rate_interval", "5m", "$job", ".*", "$instance", ".*", "$method", ".*")
	for i, e := range exprs {
		q, _ := json.Marshal(r.Replace(e))
		fmt.Fprintf(&b, "      - record: dashboard:query%d\n        expr: %s\n", i, q)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard_rules.yaml"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, dir, "check", "rules", "dashboard_rules.yaml")
}

var metricName = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*\b`)

// checkMetrics fails for an mcpgate_ name in expr that mcpgate does not
// register (a histogram's _bucket, _sum and _count are its own).
func checkMetrics(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	n := 0
	for _, name := range metricName.FindAllString(expr, -1) {
		if !strings.HasPrefix(name, "mcpgate_") {
			continue
		}
		n++
		base := name
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suf); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			t.Errorf("%s: %s is not a metric mcpgate registers", where, name)
		}
	}
	if n == 0 {
		t.Errorf("%s: the expression names no mcpgate metric: %s", where, expr)
	}
}

// describing records the names of the collectors registered with it.
type describing struct{ names map[string]bool }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d *describing) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d.names[m[1]] = true
		}
	}
	return nil
}

func (d *describing) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d *describing) Unregister(prometheus.Collector) bool { return false }

// registeredMetrics returns the metric names mcpgate registers: the
// families a started gateway (demo upstream, catalog, store, kill switch)
// exposes, plus the collectors of the pipeline and the rights source
// described directly, so that vectors without a series yet count too.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	rec := &describing{names: map[string]bool{}}
	gateway.NewMetrics(rec)
	rights.NewMetrics(rec)

	up := demo.New(demo.Options{})
	us := httptest.NewServer(up.Handler())
	defer us.Close()
	cfg, err := config.Parse(config.Quickstart, "quickstart.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Upstreams[0].URL = us.URL + "/mcp"
	cfg.Listeners.Proxy.Address = "127.0.0.1:0"
	cfg.Listeners.Admin.Address = "127.0.0.1:0"
	cfg.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(t.TempDir(), "state.db")}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a, err := app.Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = a.Shutdown(sctx)
	}()
	mfs, err := a.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		rec.names[mf.GetName()] = true
	}
	for _, want := range []string{"mcpgate_catalog_drift_total", "mcpgate_killswitch_active", "mcpgate_assertion_key_reloads_total"} {
		if !rec.names[want] {
			names := make([]string, 0, len(rec.names))
			for n := range rec.names {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Fatalf("the started gateway does not register %s; it has %v", want, names)
		}
	}
	return rec.names
}
