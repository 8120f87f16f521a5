// Package helmcheck lints and renders the mcpgate Helm chart with Helm's own
// Go packages (helm.sh/helm/v3, the code behind `helm lint` and
// `helm template`), and checks what it renders: every object decoded
// strictly into its Kubernetes type (unknown or duplicate fields are errors),
// the custom resources into structs mirroring their CRDs, cross-references
// inside the release resolved, and the Envoy configurations handed to
// config/envoy's own checks.
//
// It is a separate Go module so that Helm's dependency tree never enters
// mcpgate's. Run it with scripts/chart-test.sh, or `go test ./...` here
// (`-update` rewrites the golden files in testdata/golden).
package helmcheck

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Release is the release name and namespace the chart is rendered for: the
// names config/envoy's examples use (Service mcpgate in namespace mcpgate).
const (
	ReleaseName      = "mcpgate"
	ReleaseNamespace = "mcpgate"
)

// ReadValues reads a values file; "" gives no values (the chart's defaults).
func ReadValues(file string) (map[string]any, error) {
	if file == "" {
		return map[string]any{}, nil
	}
	v, err := chartutil.ReadValuesFile(file)
	if err != nil {
		return nil, err
	}
	return v.AsMap(), nil
}

// Lint runs Helm's lint rules (those of `helm lint --strict`: Chart.yaml,
// values, templates rendered in lint mode, YAML of every manifest, API
// deprecations) on the chart directory with the given values. It returns
// the messages of at least warning severity, formatted like `helm lint`.
func Lint(chartDir string, values map[string]any) []string {
	// Lint mode logs each `fail` of the chart through the standard logger;
	// the refusals are tested by rendering instead.
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	l := lint.All(chartDir, values, ReleaseNamespace, false)
	var out []string
	for _, m := range l.Messages {
		if m.Severity >= support.WarningSev {
			out = append(out, m.Error())
		}
	}
	return out
}

// Render renders the chart as `helm template mcpgate CHART -n mcpgate -f
// VALUES` does: templates executed with the release options, empty
// documents dropped, manifests in Helm's install order, each preceded by
// its `# Source:` line. An error is what `helm template` would print,
// including the chart's own `fail` messages.
func Render(chartDir string, values map[string]any) (string, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return "", fmt.Errorf("load chart: %w", err)
	}
	opts := chartutil.ReleaseOptions{Name: ReleaseName, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true}
	caps := chartutil.DefaultCapabilities.Copy()
	rv, err := chartutil.ToRenderValues(ch, values, opts, caps)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(ch, rv)
	if err != nil {
		return "", err
	}
	// Partials and NOTES are not manifests.
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	if len(hooks) > 0 {
		return "", fmt.Errorf("the chart has %d hooks; the chart test does not expect any", len(hooks))
	}
	var b strings.Builder
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, strings.TrimSpace(m.Content))
	}
	return b.String(), nil
}

// Case is one values file of charts/mcpgate/ci: NAME-values.yaml must
// render, NAME.fail.yaml must be refused.
type Case struct {
	Name       string
	ValuesFile string
	WantFail   bool
}

// Cases lists the chart's CI values files, sorted by name, plus the chart's
// defaults (name "defaults").
func Cases(chartDir string) ([]Case, error) {
	entries, err := os.ReadDir(filepath.Join(chartDir, "ci"))
	if err != nil {
		return nil, err
	}
	out := []Case{{Name: "defaults"}}
	for _, e := range entries {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, "-values.yaml"):
			out = append(out, Case{Name: strings.TrimSuffix(n, "-values.yaml"), ValuesFile: filepath.Join(chartDir, "ci", n)})
		case strings.HasSuffix(n, ".fail.yaml"):
			out = append(out, Case{Name: strings.TrimSuffix(n, ".fail.yaml"), ValuesFile: filepath.Join(chartDir, "ci", n), WantFail: true})
		default:
			return nil, fmt.Errorf("ci/%s: name values files NAME-values.yaml (must render) or NAME.fail.yaml (must be refused)", n)
		}
	}
	sort.Slice(out[1:], func(i, j int) bool { return out[1+i].Name < out[1+j].Name })
	return out, nil
}
