package demo

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

const quickstartPath = "../../config/examples/quickstart.yaml"

// secretFields are the fields of demo results no agent may see.
var secretFields = []string{"portal_password", "home_address", "internal_cost"}

// quickstartFile mirrors the parts of config.Config (yaml tags of
// config/config.go and policy.ToolDeclaration) that quickstart.yaml uses. It
// is a copy, not an import, so this package's tests do not depend on the
// config and policy packages, which other work changes; loading the file
// with the real loader belongs to config's own tests and `mcpgate validate`.
type quickstartFile struct {
	Listeners struct {
		Proxy struct {
			Address string `yaml:"address"`
		} `yaml:"proxy"`
		Admin struct {
			Address string `yaml:"address"`
		} `yaml:"admin"`
	} `yaml:"listeners"`
	Upstreams []struct {
		Name    string                     `yaml:"name"`
		URL     string                     `yaml:"url"`
		Route   string                     `yaml:"route"`
		Timeout string                     `yaml:"timeout"`
		Tools   map[string]toolDeclaration `yaml:"tools"`
	} `yaml:"upstreams"`
	Policy struct {
		Dirs        []string `yaml:"dirs"`
		SecretNames []string `yaml:"secret_names"`
	} `yaml:"policy"`
	Log struct {
		Format string `yaml:"format"`
		Level  string `yaml:"level"`
	} `yaml:"log"`
}

type toolDeclaration struct {
	Effect        string   `yaml:"effect"`
	Rights        []string `yaml:"rights"`
	UntrustedText []string `yaml:"untrusted_text"`
	ResultFields  []string `yaml:"result_fields"`
}

// TestQuickstartConfig keeps config/examples/quickstart.yaml in step with the
// demo: it decodes strictly, declares every demo tool with its effect class,
// allows no secret field, and every declared path exists in a real result of
// that tool.
func TestQuickstartConfig(t *testing.T) {
	data, err := os.ReadFile(quickstartPath)
	if err != nil {
		t.Fatal(err)
	}
	var cfg quickstartFile
	if err := yaml.UnmarshalWithOptions(data, &cfg, yaml.Strict(), yaml.DisallowUnknownField()); err != nil {
		t.Fatalf("%s: %v", quickstartPath, err)
	}
	if cfg.Listeners.Proxy.Address != "127.0.0.1:8080" || cfg.Listeners.Admin.Address != "127.0.0.1:9090" {
		t.Errorf("listeners = %+v", cfg.Listeners)
	}
	if len(cfg.Upstreams) != 1 {
		t.Fatalf("want one upstream, got %d", len(cfg.Upstreams))
	}
	up := cfg.Upstreams[0]
	if up.Name != "demo" || up.URL != "http://127.0.0.1:8081/mcp" || up.Route != "/mcp" {
		t.Errorf("upstream = %s %s %s", up.Name, up.URL, up.Route)
	}

	// Effect classes as in policy.Effects.
	wantEffect := map[string]string{
		ToolFindCustomers:           "read",
		ToolGetBooking:              "read",
		ToolListTechnicians:         "read",
		ToolCreateBooking:           "silent_write",
		ToolUpdateBooking:           "silent_write",
		ToolSendBookingConfirmation: "notify",
		ToolPageTechnician:          "wake",
		ToolMuteBookingAlerts:       "alerting",
		ToolCancelBooking:           "delete",
	}
	for name := range up.Tools {
		if !slices.Contains(ToolNames, name) {
			t.Errorf("declared tool %q is not a demo tool", name)
		}
	}

	// One real result per tool, to resolve the declared paths against.
	s := New(Options{})
	cs, _ := connect(t, start(t, s), rev20260728)
	results := map[string]map[string]any{}
	results[ToolFindCustomers], _ = call(t, cs, ToolFindCustomers, nil, false)
	results[ToolGetBooking], _ = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-1001"}, false)
	results[ToolListTechnicians], _ = call(t, cs, ToolListTechnicians, nil, false)
	results[ToolCreateBooking], _ = call(t, cs, ToolCreateBooking, map[string]any{"customer_id": "C-102", "technician_id": "T-11", "start": "2026-08-10T09:00:00+01:00", "notes": "n"}, false)
	results[ToolMuteBookingAlerts], _ = call(t, cs, ToolMuteBookingAlerts, map[string]any{"booking_id": "B-1004", "minutes": 5}, false)
	results[ToolUpdateBooking], _ = call(t, cs, ToolUpdateBooking, map[string]any{"booking_id": "B-1004", "notes": "m"}, false)
	results[ToolSendBookingConfirmation], _ = call(t, cs, ToolSendBookingConfirmation, map[string]any{"booking_id": "B-1004"}, false)
	results[ToolPageTechnician], _ = call(t, cs, ToolPageTechnician, map[string]any{"technician_id": "T-11", "message": "m"}, false)
	results[ToolCancelBooking], _ = call(t, cs, ToolCancelBooking, map[string]any{"booking_id": "B-1004"}, false)

	for _, name := range ToolNames {
		d, ok := up.Tools[name]
		if !ok {
			t.Errorf("%s: not declared", name)
			continue
		}
		if d.Effect != wantEffect[name] {
			t.Errorf("%s: effect %q, want %q", name, d.Effect, wantEffect[name])
		}
		if len(d.Rights) == 0 {
			t.Errorf("%s: no rights", name)
		}
		if len(d.ResultFields) == 0 {
			t.Errorf("%s: no result_fields", name)
		}
		for _, p := range d.ResultFields {
			for _, secret := range secretFields {
				if strings.Contains(p, secret) {
					t.Errorf("%s: result_fields allows the secret %q", name, p)
				}
			}
		}
		for _, p := range slices.Concat(d.ResultFields, d.UntrustedText) {
			if len(resolve(results[name], p)) == 0 {
				t.Errorf("%s: path %q matches nothing in %v", name, p, results[name])
			}
		}
		for _, p := range d.UntrustedText {
			if !slices.Contains(d.ResultFields, p) {
				t.Errorf("%s: untrusted_text %q is not in result_fields", name, p)
			}
		}
	}
	// Tools whose results carry customer text declare it.
	for _, name := range []string{ToolFindCustomers, ToolGetBooking, ToolCreateBooking, ToolUpdateBooking, ToolSendBookingConfirmation, ToolCancelBooking} {
		if len(up.Tools[name].UntrustedText) == 0 {
			t.Errorf("%s: no untrusted_text", name)
		}
	}
}

// resolve returns the values at a declaration path ("a.b", "list[*].b").
func resolve(v any, path string) []any {
	cur := []any{v}
	for seg := range strings.SplitSeq(path, ".") {
		name, wild := strings.CutSuffix(seg, "[*]")
		var next []any
		for _, c := range cur {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			x, ok := m[name]
			if !ok {
				continue
			}
			if !wild {
				next = append(next, x)
				continue
			}
			if arr, ok := x.([]any); ok {
				next = append(next, arr...)
			}
		}
		cur = next
	}
	return cur
}
