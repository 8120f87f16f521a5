package helmcheck

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// renderText renders a ci values file to manifest text.
func renderText(t *testing.T, valuesFile string) string {
	t.Helper()
	v, err := ReadValues(filepath.Join(chartDir, "ci", valuesFile))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(chartDir, v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mutate replaces the first old with new inside the document rendered from
// template (e.g. "deployment.yaml"), failing the test if it is not there.
func mutate(t *testing.T, manifest, template, old, new string) string {
	t.Helper()
	parts := strings.Split(manifest, "\n---\n")
	for i, p := range parts {
		if strings.Contains(p, "# Source: mcpgate/templates/"+template+"\n") && strings.Contains(p, old) {
			parts[i] = strings.Replace(p, old, new, 1)
			return strings.Join(parts, "\n---\n")
		}
	}
	t.Fatalf("%q not found in %s", old, template)
	return ""
}

// TestChecksCatchMistakes: each mutation of a good rendering must be
// reported by Parse or Check, so neither passes vacuously.
func TestChecksCatchMistakes(t *testing.T) {
	good := renderText(t, "standalone-values.yaml")
	if docs, err := Parse(good); err != nil {
		t.Fatal(err)
	} else if err := Check(docs, nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, template, old, new string }{
		{"unknown field", "deployment.yaml", "  revisionHistoryLimit: 5\n", "  revisionHistoryLimit: 5\n  replica: 2\n"},
		{"duplicate field", "deployment.yaml", "  revisionHistoryLimit: 5\n", "  revisionHistoryLimit: 5\n  revisionHistoryLimit: 6\n"},
		{"wrong type", "deployment.yaml", "revisionHistoryLimit: 5", "revisionHistoryLimit: five"},
		{"misspelt probe port", "deployment.yaml", "port: admin", "port: admn"},
		{"service targets no port", "service.yaml", "targetPort: proxy", "targetPort: prox"},
		{"service selects nothing", "service.yaml", "  selector:\n    app.kubernetes.io/name: mcpgate", "  selector:\n    app.kubernetes.io/name: mcpgat"},
		{"writable root filesystem", "deployment.yaml", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false"},
		{"privilege escalation", "deployment.yaml", "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true"},
		{"missing ConfigMap", "deployment.yaml", "configMap:\n            name: mcpgate\n", "configMap:\n            name: mcpgate-config\n"},
		{"mount without volume", "deployment.yaml", "- name: tmp\n              mountPath: /tmp", "- name: scratch\n              mountPath: /tmp"},
		{"ServiceMonitor port", "servicemonitor.yaml", "port: http-admin", "port: admin"},
		{"ServiceMonitor unknown field", "servicemonitor.yaml", "scrapeTimeout:", "scrapeTimout:"},
		{"ServiceMonitor bad interval", "servicemonitor.yaml", "interval: 30s", "interval: half a minute"},
		{"bad name", "service.yaml", "  name: mcpgate\n", "  name: MCPGate\n"},
		{"probe path", "deployment.yaml", "path: /readyz", "path: /healthz"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := mutate(t, good, tc.template, tc.old, tc.new)
			docs, err := Parse(bad)
			if err == nil {
				err = Check(docs, nil)
			}
			if err == nil {
				t.Fatal("the mistake went unnoticed")
			}
			t.Logf("caught: %v", err)
		})
	}
}

// TestEnvoyChecksCatchMistakes: config/envoy's checks, run on a chart
// rendering, fail when that rendering fails open; so they do read the
// chart's files, not the examples beside them.
func TestEnvoyChecksCatchMistakes(t *testing.T) {
	bin, err := envoyBin()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ values, template, old, new string }{
		{"sidecar-dns-values.yaml", "configmap.yaml", "failure_mode_allow: false", "failure_mode_allow: true"},
		{"extproc-envoy-gateway-values.yaml", "envoy-gateway.yaml", "failOpen: false", "failOpen: true"},
		{"extproc-istio-values.yaml", "istio-envoyfilter.yaml", "failure_mode_allow: false", "failure_mode_allow: true"},
	}
	for _, tc := range cases {
		t.Run(tc.values, func(t *testing.T) {
			bad := mutate(t, renderText(t, tc.values), tc.template, tc.old, tc.new)
			docs, err := Parse(bad)
			if err != nil {
				t.Fatal(err)
			}
			files, err := EnvoyFiles(docs, exampleDir)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := StageEnvoyFiles(exampleDir, dir, files); err != nil {
				t.Fatal(err)
			}
			err = RunEnvoyChecks(context.Background(), bin, dir)
			if err == nil {
				t.Fatal("config/envoy's checks passed a fail-open rendering")
			}
			if !strings.Contains(err.Error(), "fail") {
				t.Errorf("unexpected failure: %v", err)
			}
		})
	}
}
