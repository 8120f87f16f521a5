package helmcheck

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current chart")

const (
	chartDir   = "../../charts/mcpgate"
	repoRoot   = "../.."
	exampleDir = "../../config/envoy"
	goldenDir  = "testdata/golden"
)

func cases(t *testing.T) []Case {
	t.Helper()
	cs, err := Cases(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func values(t *testing.T, c Case) map[string]any {
	t.Helper()
	v, err := ReadValues(c.ValuesFile)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// golden compares got with testdata/golden/name, or writes it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	file := filepath.Join(goldenDir, name)
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the rendering; inspect with `git diff` after go test -update:\n%s", file, firstDiff(string(want), got))
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n  golden: " + x + "\n  render: " + y
		}
	}
	return ""
}

// TestLint: `helm lint --strict` for every values file that must render.
// (Helm's lint mode turns the chart's `fail` into an INFO message, so the
// refused cases are checked by TestTemplate only.)
func TestLint(t *testing.T) {
	for _, c := range cases(t) {
		if c.WantFail {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			msgs := Lint(chartDir, values(t, c))
			for _, m := range msgs {
				t.Error(m)
			}
		})
	}
}

// external names the ConfigMaps and Secrets a case's values point at.
func external(v map[string]any) []string {
	var out []string
	var walk func(any)
	walk = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if s, ok := v.(string); ok && s != "" && (strings.HasPrefix(k, "existing")) {
					out = append(out, s)
				}
				walk(v)
			}
		case []any:
			for _, v := range x {
				walk(v)
			}
		}
	}
	walk(v)
	return out
}

var envoyBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "helmcheck-envoy")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "envoy.test")
	return bin, BuildEnvoyChecks(context.Background(), repoRoot, bin)
})

// TestTemplate renders every case like `helm template`, compares it with its
// golden file, decodes every object strictly into its Kubernetes type or CRD
// mirror, resolves the references inside the release, and runs
// config/envoy's checks on the Envoy configurations it holds. Refused
// cases must fail with the chart's message (golden too).
func TestTemplate(t *testing.T) {
	for _, c := range cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			v := values(t, c)
			out, err := Render(chartDir, v)
			if c.WantFail {
				if err == nil {
					t.Fatal("the chart rendered values it must refuse")
				}
				golden(t, c.Name+".err", err.Error()+"\n")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.Name+".yaml", out)
			docs, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(docs, external(v)); err != nil {
				t.Fatal(err)
			}
			files, err := EnvoyFiles(docs, exampleDir)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) == 0 {
				return
			}
			bin, err := envoyBin()
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := StageEnvoyFiles(exampleDir, dir, files); err != nil {
				t.Fatal(err)
			}
			if err := RunEnvoyChecks(context.Background(), bin, dir); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func render(t *testing.T, valuesFile string) []*Doc {
	t.Helper()
	v, err := ReadValues(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(chartDir, v)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}

func generic(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := yaml.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestSidecarBootstrapIsTheExample: with the examples' values the chart's
// Envoy bootstrap is config/envoy/sidecar.yaml (an MCP server container in
// the pod) or config/envoy/stdio.yaml (a stdio server mcpgate starts),
// field for field.
func TestSidecarBootstrapIsTheExample(t *testing.T) {
	for _, tc := range []struct{ values, example string }{
		{"sidecar-values.yaml", "sidecar.yaml"},
		{"sidecar-stdio-values.yaml", "stdio.yaml"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			files, err := EnvoyFiles(render(t, filepath.Join(chartDir, "ci", tc.values)), exampleDir)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(exampleDir, tc.example))
			if err != nil {
				t.Fatal(err)
			}
			if g, w := generic(t, files["sidecar.yaml"]), generic(t, want); !reflect.DeepEqual(g, w) {
				t.Errorf("the chart's sidecar bootstrap drifted from config/envoy/%s:\nchart:   %v\nexample: %v", tc.example, g, w)
			}
		})
	}
}

// TestExtProcResourcesAreTheExamples: the Envoy Gateway and Istio
// resources, rendered with the ci values that reproduce the examples, have
// the examples' specs.
func TestExtProcResourcesAreTheExamples(t *testing.T) {
	for _, tc := range []struct{ values, example string }{
		{"extproc-envoy-gateway-values.yaml", "envoy-gateway.yaml"},
		{"extproc-istio-values.yaml", "istio-envoyfilter.yaml"},
	} {
		t.Run(tc.values, func(t *testing.T) {
			ex, err := ExampleDocs(filepath.Join(exampleDir, tc.example))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, d := range render(t, filepath.Join(chartDir, "ci", tc.values)) {
				want, ok := ex[d.GVK.Kind]
				if !ok || d.GVK.Kind == "Service" {
					continue // the Service is the chart's own (checked by the Envoy checks)
				}
				n++
				got := generic(t, d.Raw)
				if !reflect.DeepEqual(got["spec"], want["spec"]) {
					t.Errorf("%s: spec differs from %s:\nchart:   %v\nexample: %v", d, tc.example, got["spec"], want["spec"])
				}
				if gm, wm := got["metadata"].(map[string]any), want["metadata"].(map[string]any); gm["namespace"] != wm["namespace"] {
					t.Errorf("%s: namespace %v, example %v", d, gm["namespace"], wm["namespace"])
				}
			}
			if n == 0 {
				t.Fatal("nothing compared")
			}
		})
	}
}
