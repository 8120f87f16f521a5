package policy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads one counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestShadow: the candidate policy is evaluated beside the live one; the
// live one decides, differences are counted by kind and logged with the
// decision id and codes, never the arguments.
func TestShadow(t *testing.T) {
	reg := prometheus.NewRegistry()
	logs := &logBuffer{}
	e, err := New(t.Context(), Options{
		Declarations: testDeclarations,
		Logger:       logs.logger(),
		Registerer:   reg,
		Shadow:       &ShadowOptions{Dirs: []string{policyDir(t, maintenance)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	allowed, err := e.Decide(t.Context(), callInput("search_contacts", alice))
	if err != nil || !allowed.Allow {
		t.Fatalf("the live (default) policy must decide: %+v %v", allowed, err)
	}
	denied, _ := e.Decide(t.Context(), callInput("undeclared_tool", alice))
	if denied.Allow {
		t.Fatal("undeclared tool allowed")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := e.WaitShadow(ctx); err != nil {
		t.Fatal(err)
	}
	if got := counterValue(t, e.shadow.differences.WithLabelValues(ShadowAllowToDeny)); got != 1 {
		t.Errorf("allow_to_deny = %v, want 1", got)
	}
	if got := counterValue(t, e.shadow.differences.WithLabelValues(ShadowReasons)); got != 1 {
		t.Errorf("reasons = %v, want 1", got)
	}
	out := logs.String()
	if !strings.Contains(out, allowed.ID) || !strings.Contains(out, `"shadow_codes":["maintenance"]`) {
		t.Errorf("difference not logged with id and codes:\n%s", out)
	}
	if strings.Contains(out, "acme\",\"limit") || strings.Contains(out, "min_score") {
		t.Errorf("arguments reached the log:\n%s", out)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "mcpgate_policy_shadow_differences_total" {
			found = len(mf.GetMetric()) == 4
		}
	}
	if !found {
		t.Error("mcpgate_policy_shadow_differences_total not registered with its 4 series")
	}
}

// TestShadowKeepsOutOfBand: the engine's out-of-band rule applies to the
// shadow's decisions too, so a candidate that forgets it shows no
// confirmation difference it could never cause.
func TestShadowKeepsOutOfBand(t *testing.T) {
	decl := map[string]map[string]ToolDeclaration{"crm": {"pay": {Effect: EffectSilentWrite, MovesMoney: true}}}
	e, err := New(t.Context(), Options{
		Declarations: decl,
		Dirs:         []string{policyDir(t, allowAll)},
		Shadow:       &ShadowOptions{Dirs: []string{policyDir(t, allowAll)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	in := callInput("pay", alice)
	in.Tool = &Tool{Name: "pay", Declared: true, ToolDeclaration: decl["crm"]["pay"]}
	d, _ := e.Decide(t.Context(), in)
	if !d.Confirm || d.Approval != ApprovalOutOfBand {
		t.Fatalf("live decision %+v", d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_ = e.WaitShadow(ctx)
	if got := counterValue(t, e.shadow.differences.WithLabelValues(ShadowConfirmation)); got != 0 {
		t.Errorf("confirmation differences = %v, want 0", got)
	}
}
