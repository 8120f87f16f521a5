package policy

import (
	"context"
	"io/fs"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/rego"

	mcpgaterego "github.com/mcpgate/mcpgate/rego"
)

// The default policy's _tool_visible writes the effect classes out inline
// (a reference to the _effects table costs about 19 allocations per tool
// checked); the two lists must stay equal: a tools/list offering one
// declared tool of each class in _effects, and of two unknown classes,
// shows exactly the classes of _effects.
func TestInlineEffectsMatchTable(t *testing.T) {
	ctx := context.Background()
	src, err := fs.ReadFile(mcpgaterego.Default, "mcpgate.rego")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rego.New(rego.Query("data.mcpgate._effects"), rego.Module("mcpgate.rego", string(src))).Eval(ctx)
	if err != nil || len(rs) != 1 {
		t.Fatal(rs, err)
	}
	var effects []string
	for _, e := range rs[0].Expressions[0].Value.([]any) {
		effects = append(effects, e.(string))
	}
	if len(effects) == 0 {
		t.Fatal("no effect classes in _effects")
	}
	e, err := New(ctx, Options{Declarations: testDeclarations, NoDecisionMemo: true})
	if err != nil {
		t.Fatal(err)
	}
	in := listInput("tools/list", alice)
	in.Items = nil
	for _, eff := range append(slices.Clone(effects), "explode", "") {
		in.Items = append(in.Items, Item{Name: "t_" + eff, Tool: &Tool{Name: "t_" + eff, Declared: true, ToolDeclaration: ToolDeclaration{Effect: eff}}})
	}
	d, err := e.Decide(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	var visible []string
	for _, name := range d.Visible {
		visible = append(visible, name[len("t_"):])
	}
	slices.Sort(visible)
	slices.Sort(effects)
	if !slices.Equal(visible, effects) {
		t.Errorf("visible effect classes %v, want _effects %v", visible, effects)
	}
}
