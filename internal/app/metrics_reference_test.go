package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/golden"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

const metricsReferencePath = "../../docs/reference/metrics.md"

// TestMetricsReference checks that docs/reference/metrics.md lists every
// metric an App registers with every section of the configuration on:
// name, type, labels and help, as the collectors describe them.
func TestMetricsReference(t *testing.T) {
	a := startEverything(t)
	metrics := describe(t, a.Collectors())
	if len(metrics) < 30 {
		t.Fatalf("only %d metrics described", len(metrics))
	}
	golden.Check(t, metricsReferencePath, renderMetrics(metrics), "go generate ./internal/app")
}

// startEverything starts an App whose configuration turns on every
// section that registers metrics, with nothing reachable over the
// network: sign-in and catalog listings are tried later, or fail.
func startEverything(t *testing.T) *App {
	t.Helper()
	dir := t.TempDir()
	rightsFile := filepath.Join(dir, "rights.yaml")
	if err := os.WriteFile(rightsFile, []byte("tenants: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	shadow, err := filepath.Abs("../../rego/examples/transparent")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(fmt.Appendf(nil, `
listeners:
  proxy: {address: 127.0.0.1:0}
  admin: {address: 127.0.0.1:0}
  extproc: {address: 127.0.0.1:0}
upstreams:
  - {name: demo, url: "http://127.0.0.1:1/mcp", tools: {find: {effect: read}}}
  - {name: files, url: "http://127.0.0.1:1/files"}
servers:
  - {name: work, route: /work, members: [{upstream: files, prefix: files}]}
policy:
  decision_logs: {console: true}
  shadow: {dirs: [%q]}
auth:
  resource_base_url: http://127.0.0.1:8080
  gateway_tokens: {}
store:
  bolt: {path: %q}
rights:
  file: {path: %q}
admin_api:
  static_tokens:
    - {name: ops, sha256: 9d1dd2d8447ddbb30db89e05b5b672d914c0af332541d3c09db593bdee719f9c, role: platform_admin}
approvals:
  base_url: http://127.0.0.1:9090
  oidc: {issuer: "http://127.0.0.1:1", client_id: page, tenant_claim: tenant}
  webhook: {url: "http://127.0.0.1:1/hook", secret: "0123456789abcdef0123456789abcdef"}
tasks:
  enabled: true
`, shadow, filepath.Join(dir, "state.db"), rightsFile), "everything.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := Start(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		defer c()
		_ = a.Shutdown(sctx)
		cancel()
	})
	return a
}

type metricDoc struct {
	name, kind, help string
	labels           []string
}

// descString reads a Desc's String form, the one public view of its
// variable labels.
var descString = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}\}$`)

// describe lists the mcpgate_ metrics of the collectors, sorted by name.
func describe(t *testing.T, cs []prometheus.Collector) []metricDoc {
	t.Helper()
	seen := map[string]bool{}
	var out []metricDoc
	for _, c := range cs {
		descs := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(descs); close(descs) }()
		for d := range descs {
			m := descString.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read %s", d)
			}
			name, _ := strconv.Unquote(m[1])
			help, _ := strconv.Unquote(m[2])
			if !strings.HasPrefix(name, "mcpgate_") || seen[name] {
				continue
			}
			seen[name] = true
			md := metricDoc{name: name, help: help, kind: kindOf(c, name)}
			for _, l := range strings.Split(m[4], ",") {
				if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
					md.labels = append(md.labels, l)
				}
			}
			if m[3] != "" {
				md.labels = append(md.labels, m[3])
			}
			out = append(out, md)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// kindOf is the type of a collector's metric: from the collector's own
// type, else from a sample it collects, else from the _total suffix.
func kindOf(c prometheus.Collector, name string) string {
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	ms := make(chan prometheus.Metric, 64)
	go func() { c.Collect(ms); close(ms) }()
	kind := ""
	for m := range ms {
		var pb dto.Metric
		if kind != "" || !strings.Contains(m.Desc().String(), strconv.Quote(name)) || m.Write(&pb) != nil {
			continue
		}
		switch {
		case pb.Counter != nil:
			kind = "counter"
		case pb.Gauge != nil:
			kind = "gauge"
		case pb.Histogram != nil:
			kind = "histogram"
		case pb.Summary != nil:
			kind = "summary"
		}
	}
	if kind == "" && strings.HasSuffix(name, "_total") {
		kind = "counter"
	}
	if kind == "" {
		kind = "gauge"
	}
	return kind
}

func renderMetrics(ms []metricDoc) []byte {
	var b bytes.Buffer
	b.WriteString(`# Metrics reference

<!-- Generated by go generate ./internal/app from the collectors a gateway
     registers (internal/app TestMetricsReference). Edit the metrics' help
     text in the code, not this file. -->

mcpgate serves Prometheus metrics at ` + "`/metrics`" + ` on the admin listener
(` + "`listeners.admin`" + `). Besides the metrics below it exports the Go runtime
(` + "`go_*`" + `) and process (` + "`process_*`" + `) collectors. Label values come from
closed lists: an MCP method outside the known set is ` + "`other`" + `, and a tool is
named only when the configuration declares it.

A vector appears in the exposition once it has a series; the table lists
every metric whether or not it has been observed.

| metric | type | labels | help |
|---|---|---|---|
`)
	for _, m := range ms {
		labels := ""
		if len(m.labels) > 0 {
			labels = "`" + strings.Join(m.labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.name, m.kind, labels, strings.ReplaceAll(m.help, "|", `\|`))
	}
	return b.Bytes()
}
