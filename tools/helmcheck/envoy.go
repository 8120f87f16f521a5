package helmcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The files config/envoy's tests read from their working directory.
var envoyExampleFiles = []string{"sidecar.yaml", "ingress.yaml", "stdio.yaml", "envoy-gateway.yaml", "istio-envoyfilter.yaml",
	"federation.yaml", "envoy-gateway-federation.yaml", "istio-federation.yaml"}

// BuildEnvoyChecks compiles config/envoy's tests (package envoy_test of the
// main module at repoRoot) into a test binary at out. Those tests read the
// example files from their working directory, so running the binary in a
// directory holding the chart's renderings under the same names applies
// exactly the checks the examples pass, unchanged.
func BuildEnvoyChecks(ctx context.Context, repoRoot, out string) error {
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", out, "./config/envoy")
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go test -c ./config/envoy: %w\n%s", err, b)
	}
	return nil
}

// RunEnvoyChecks runs the compiled config/envoy checks in dir, which holds
// the example files, some of them replaced by the chart's
// renderings (EnvoyFiles). It returns the tests' output on failure.
func RunEnvoyChecks(ctx context.Context, bin, dir string) error {
	cmd := exec.CommandContext(ctx, bin, "-test.count=1")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("config/envoy checks on the chart's rendering: %w\n%s", err, b)
	}
	return nil
}

// StageEnvoyFiles fills dir with config/envoy's example files and overwrites
// them with the chart's renderings (EnvoyFiles).
func StageEnvoyFiles(exampleDir, dir string, rendered map[string][]byte) error {
	for _, f := range envoyExampleFiles {
		b, err := os.ReadFile(filepath.Join(exampleDir, f))
		if err != nil {
			return err
		}
		if r, ok := rendered[f]; ok {
			b = r
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// EnvoyFiles extracts from a rendering the Envoy configurations
// config/envoy's tests know how to check, under those tests' file names:
//
//   - sidecar.yaml: the bootstrap in the sidecar ConfigMap (key envoy.yaml);
//   - envoy-gateway.yaml: the chart's Envoy Gateway resources, the chart's
//     Service reduced to the fields those tests model (name, selector,
//     ports), and the HTTPRoute of the example (routes are the user's, not
//     the chart's; the ci values name that route);
//   - istio-envoyfilter.yaml: the chart's EnvoyFilter.
//
// A rendering without any of them gives an empty map.
func EnvoyFiles(docs []*Doc, exampleDir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range docs {
		cm, ok := d.Obj.(*corev1.ConfigMap)
		if ok && strings.HasSuffix(cm.Name, "-envoy") {
			b, ok := cm.Data["envoy.yaml"]
			if !ok {
				return nil, fmt.Errorf("ConfigMap %s: no envoy.yaml", cm.Name)
			}
			out["sidecar.yaml"] = []byte(b)
		}
	}
	if f := Find(docs, "EnvoyFilter"); len(f) > 0 {
		if len(f) != 1 {
			return nil, fmt.Errorf("want one EnvoyFilter, got %d", len(f))
		}
		out["istio-envoyfilter.yaml"] = f[0].Raw
	}
	if eeps := Find(docs, "EnvoyExtensionPolicy"); len(eeps) > 0 {
		var b bytes.Buffer
		route, err := exampleDoc(filepath.Join(exampleDir, "envoy-gateway.yaml"), "HTTPRoute")
		if err != nil {
			return nil, err
		}
		b.Write(route)
		for _, d := range docs {
			switch d.GVK.Kind {
			case "EnvoyExtensionPolicy", "ReferenceGrant", "BackendTrafficPolicy", "ClientTrafficPolicy", "EnvoyPatchPolicy":
				b.WriteString("\n---\n")
				b.Write(d.Raw)
			case "Service":
				s, err := modelledService(d.Obj.(*corev1.Service))
				if err != nil {
					return nil, err
				}
				b.WriteString("\n---\n")
				b.Write(s)
			}
		}
		out["envoy-gateway.yaml"] = b.Bytes()
	}
	return out, nil
}

// modelledService keeps the Service fields config/envoy's k8s_test.go
// models (its decoding rejects any other field).
func modelledService(s *corev1.Service) ([]byte, error) {
	type port struct {
		Name        string `json:"name"`
		Port        int32  `json:"port"`
		TargetPort  any    `json:"targetPort,omitempty"`
		AppProtocol string `json:"appProtocol,omitempty"`
	}
	var ports []port
	for _, p := range s.Spec.Ports {
		ap := ""
		if p.AppProtocol != nil {
			ap = *p.AppProtocol
		}
		ports = append(ports, port{Name: p.Name, Port: p.Port, TargetPort: p.TargetPort.String(), AppProtocol: ap})
	}
	v := map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": s.Name, "namespace": s.Namespace},
		"spec":       map[string]any{"selector": s.Spec.Selector, "ports": ports},
	}
	return yaml.Marshal(v)
}

// exampleDoc returns the document of the given kind in a multi-document
// example file.
func exampleDoc(file, kind string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	for _, part := range strings.Split(string(data), "\n---\n") {
		var tm struct {
			Kind string `json:"kind"`
		}
		if yaml.Unmarshal([]byte(part), &tm) == nil && tm.Kind == kind {
			return []byte(part), nil
		}
	}
	return nil, fmt.Errorf("%s: no %s", file, kind)
}

// ExampleDocs returns every document of an example file as generic values,
// keyed by kind (one per kind is enough for the examples compared).
func ExampleDocs(file string) (map[string]map[string]any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for _, part := range strings.Split(string(data), "\n---\n") {
		var v map[string]any
		if err := yaml.Unmarshal([]byte(part), &v); err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if k, ok := v["kind"].(string); ok {
			if _, dup := out[k]; dup {
				return nil, errors.New(file + ": two " + k)
			}
			out[k] = v
		}
	}
	return out, nil
}
