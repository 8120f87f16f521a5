package policy_test

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/policy"
)

func Example() {
	ctx := context.Background()
	declarations := map[string]map[string]policy.ToolDeclaration{
		"crm": {
			"search_contacts": {Effect: policy.EffectRead, Rights: []string{"crm.read"}},
		},
	}
	// The embedded default policy (no Dirs), with the upstream's declarations.
	engine, err := policy.New(ctx, policy.Options{Declarations: declarations})
	if err != nil {
		panic(err)
	}

	call := func(tool string) *policy.Input {
		decl, declared := declarations["crm"][tool]
		return &policy.Input{
			Version:   policy.SchemaVersion,
			Phase:     "request",
			Transport: policy.Transport{Kind: "proxy", HTTPMethod: "POST", Path: "/mcp", Upstream: "crm", ProtocolVersion: "2026-07-28"},
			Message: policy.Message{
				Kind:      "request",
				Method:    "tools/call",
				Name:      tool,
				Arguments: jsontext.Value(`{"query":"acme","limit":10}`),
			},
			Tool:      &policy.Tool{Name: tool, Declared: declared, ToolDeclaration: decl},
			Principal: policy.Principal{Authenticated: false},
		}
	}

	d, err := engine.Decide(ctx, call("search_contacts"))
	if err != nil {
		panic(err)
	}
	fmt.Println(d.Allow, d.Effect)

	d, err = engine.Decide(ctx, call("drop_tables"))
	if err != nil {
		panic(err)
	}
	r := d.Reasons[0]
	fmt.Println(d.Allow, r.Code)
	fmt.Println(r.Cause)
	fmt.Println(r.Fix, "→", r.NextTool)
	// Output:
	// true read
	// false tool_not_declared
	// Tool "drop_tables" is not available on this server: the gateway's operator has not declared what it does, and undeclared tools are refused.
	// Call tools/list to see the tools you can use. If the user needs drop_tables, tell them to ask the gateway's operator to declare it in the gateway configuration, under the upstream "crm": `tools: {"drop_tables": {effect: <effect>}}`, where <effect> is what the tool really does: read, silent_write, notify, wake, alerting or delete; or to set `undeclared_tools: confirm` on that upstream so every call of an undeclared tool waits for a person's confirmation. → tools/list
}

func ExampleValidateDeclarations() {
	errs := policy.ValidateDeclarations("crm", map[string]policy.ToolDeclaration{
		"search_contacts": {Effect: "readonly", UntrustedText: []string{"items[*].notes"}},
	})
	for _, err := range errs {
		fmt.Println(err)
	}
	// Output:
	// upstream "crm": tool "search_contacts": /effect: value must be one of 'read', 'silent_write', 'notify', 'wake', 'alerting', 'delete'
}
