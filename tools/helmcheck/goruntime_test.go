package helmcheck

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// parseGOMEMLIMIT reads a GOMEMLIMIT value the way the Go runtime does
// (runtime.parseByteCount and readGOMEMLIMIT): "off", or a whole number of
// bytes with an optional B, KiB, MiB, GiB or TiB suffix. ok is false for
// anything the runtime would refuse (it then exits at start-up).
func parseGOMEMLIMIT(s string) (n int64, off, ok bool) {
	if s == "off" {
		return 0, true, true
	}
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if rest, found := strings.CutSuffix(s, u.suffix); found {
			s, mult = rest, u.mult
			break
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || s == "" || s[0] == '+' {
		return 0, false, false
	}
	return v * mult, false, true
}

// goEnv returns a container's GOMEMLIMIT and GOGC ("" when unset) and
// fails on a duplicate.
func goEnv(t *testing.T, c corev1.Container) (gomem, gogc string) {
	t.Helper()
	seen := map[string]bool{}
	for _, e := range c.Env {
		if seen[e.Name] {
			t.Errorf("container %s: env %s twice", c.Name, e.Name)
		}
		seen[e.Name] = true
		switch e.Name {
		case "GOMEMLIMIT":
			gomem = e.Value
		case "GOGC":
			gogc = e.Value
		}
	}
	return gomem, gogc
}

// mcpgateContainers are the containers running the mcpgate binary: serve
// and the validate init container.
func mcpgateContainers(d *appsv1.Deployment) []corev1.Container {
	var out []corev1.Container
	for _, c := range append(append([]corev1.Container{}, d.Spec.Template.Spec.InitContainers...), d.Spec.Template.Spec.Containers...) {
		if c.Name == "mcpgate" || c.Name == "validate" {
			out = append(out, c)
		}
	}
	return out
}

// TestGoRuntimeEnvInEveryCase: in every rendered case, each container
// running mcpgate gets a GOMEMLIMIT the Go runtime accepts and that is
// below the container's memory limit, and a GOGC that is "off" or a whole
// number.
func TestGoRuntimeEnvInEveryCase(t *testing.T) {
	for _, c := range cases(t) {
		if c.WantFail {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			deps := objs[*appsv1.Deployment](render(t, c.ValuesFile))
			if len(deps) != 1 {
				t.Fatalf("%d Deployments, want 1", len(deps))
			}
			for _, ct := range mcpgateContainers(deps[0]) {
				gomem, gogc := goEnv(t, ct)
				if gomem != "" {
					n, off, ok := parseGOMEMLIMIT(gomem)
					if !ok {
						t.Errorf("container %s: GOMEMLIMIT %q is not in Go's syntax", ct.Name, gomem)
					}
					if lim, has := ct.Resources.Limits[corev1.ResourceMemory]; has && !off && n >= lim.Value() {
						t.Errorf("container %s: GOMEMLIMIT %s (%d bytes) is not below limits.memory %s", ct.Name, gomem, n, lim.String())
					}
				}
				if gogc != "" && gogc != "off" {
					if _, err := strconv.ParseUint(gogc, 10, 31); err != nil {
						t.Errorf("container %s: GOGC %q is not off or a whole number", ct.Name, gogc)
					}
				}
			}
		})
	}
}

// TestGOMEMLIMITFromMemoryLimit: the template's quantity arithmetic agrees
// with Kubernetes' own quantity parser (resource.Quantity) for each suffix,
// decimal quantities and plain numbers.
func TestGOMEMLIMITFromMemoryLimit(t *testing.T) {
	tests := []struct {
		name  string
		limit any // as a values file would hold it
		pct   any
	}{
		{"default 256Mi", "256Mi", 80.0},
		{"binary giga", "1Gi", 75.0},
		{"decimal giga with fraction", "1.5G", 90.0},
		{"binary with fraction", "0.5Gi", 80.0},
		{"decimal mega", "500M", 80.0},
		{"kibi", "262144Ki", 50.0},
		{"plain bytes string", "268435456", 80.0},
		{"plain bytes number", 268435456.0, 80.0},
		{"whole limit", "384Mi", 100.0},
		{"fractional percent", "1Gi", 62.5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := map[string]any{
				"resources": map[string]any{"limits": map[string]any{"memory": tc.limit}},
				"goRuntime": map[string]any{"memoryLimitPercent": tc.pct},
			}
			out, err := Render(chartDir, v)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			q := resource.MustParse(fmt.Sprint(tc.limit))
			if f, ok := tc.limit.(float64); ok {
				q = *resource.NewQuantity(int64(f), resource.BinarySI)
			}
			want := int64(float64(q.Value()) * tc.pct.(float64) / 100)
			for _, ct := range mcpgateContainers(objs[*appsv1.Deployment](docs)[0]) {
				gomem, _ := goEnv(t, ct)
				n, _, ok := parseGOMEMLIMIT(gomem)
				if !ok || n != want {
					t.Errorf("container %s: GOMEMLIMIT %q, want %d (%v %% of %s)", ct.Name, gomem, want, tc.pct, q.String())
				}
			}
		})
	}
}

// TestNoGOMEMLIMITWithoutALimit: no memory limit and no explicit value, or
// a percentage of 0, set no GOMEMLIMIT (Go's default: none).
func TestNoGOMEMLIMITWithoutALimit(t *testing.T) {
	for name, v := range map[string]map[string]any{
		"no limit":     {"resources": map[string]any{"limits": map[string]any{"memory": nil}}},
		"percent 0":    {"goRuntime": map[string]any{"memoryLimitPercent": 0}},
		"explicit off": {"goRuntime": map[string]any{"memoryLimit": "off"}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Render(chartDir, v)
			if err != nil {
				t.Fatal(err)
			}
			docs, err := Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, ct := range mcpgateContainers(objs[*appsv1.Deployment](docs)[0]) {
				if gomem, _ := goEnv(t, ct); gomem != "" {
					t.Errorf("container %s: GOMEMLIMIT %q, want none", ct.Name, gomem)
				}
			}
		})
	}
}

// TestParseGOMEMLIMIT pins the test's own reading of Go's syntax.
func TestParseGOMEMLIMIT(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "123": 123, "10B": 10, "2KiB": 2048, "300MiB": 300 << 20, "1GiB": 1 << 30, "1TiB": 1 << 40} {
		if n, off, ok := parseGOMEMLIMIT(in); !ok || off || n != want {
			t.Errorf("%q: %d %v %v, want %d", in, n, off, ok, want)
		}
	}
	for _, in := range []string{"", "1.5GiB", "1Gi", "1G", "-1", "+1", "MiB", "1 MiB"} {
		if _, _, ok := parseGOMEMLIMIT(in); ok {
			t.Errorf("%q accepted; Go refuses it", in)
		}
	}
	if _, off, ok := parseGOMEMLIMIT("off"); !ok || !off {
		t.Error(`"off" refused`)
	}
}
