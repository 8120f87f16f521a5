package policy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// readsPolicies are the policies the analysis and the differential tests
// share: each reads input in its own way. The decision's cause shows what
// the policy read, so a decision served for another input would show it.
var readsPolicies = []struct {
	name  string
	rego  string
	reads string // readsOf, one path per line ("" for the whole input)
	memo  bool
}{
	{
		name: "argument",
		rego: `decision := {"allow": input.message.arguments.x == 1, "reasons": [{"code": "x", "cause": sprintf("%v", [input.message.arguments.x])}]}
default decision := {"allow": false, "reasons": [{"code": "no_x", "cause": "no x"}]}`,
		reads: "message.arguments.x", memo: true,
	},
	{
		name:  "whole",
		rego:  `decision := {"allow": true, "reasons": [{"code": "echo", "cause": json.marshal(input)}]}`,
		reads: "", memo: true,
	},
	{
		name:  "clock",
		rego:  `decision := {"allow": time.now_ns() > 0, "reasons": [{"code": "t", "cause": sprintf("%d", [time.now_ns()])}]}`,
		reads: "", memo: false,
	},
	{
		name:  "variable key",
		rego:  `decision := {"allow": true, "reasons": [{"code": "k", "cause": sprintf("%v", [[k | some k; input.message.arguments[k] == 1]])}]}`,
		reads: "message.arguments", memo: true,
	},
	{
		name:  "variable key at the root",
		rego:  `decision := {"allow": true, "reasons": [{"code": "k", "cause": sprintf("%v", [[k | some k; input[k].name]])}]}`,
		reads: "", memo: true,
	},
	{
		name: "with input",
		rego: `decision := {"allow": true, "reasons": [{"code": "w", "cause": sprintf("%v", [_inner])}]} if {
	_inner := _echo with input as {"m": input.message.name}
}
_echo := input
default decision := {"allow": false}`,
		reads: "", memo: true,
	},
	{
		name: "function",
		rego: `_show(a) := sprintf("%v %v", [a.x, a.y])
decision := {"allow": true, "reasons": [{"code": "f", "cause": _show(input.message.arguments)}]}`,
		reads: "message.arguments", memo: true,
	},
	{
		name:  "kinds and object.get",
		rego:  `decision := {"allow": is_number(input.message.arguments.z), "reasons": [{"code": "g", "cause": sprintf("%v %v", [object.get(input.message.arguments, "y", "none"), object.get(input.principal, ["rights"], [])])}]}`,
		reads: "message.arguments (kind)\nmessage.arguments.y\nmessage.arguments.z (kind)\nprincipal (kind)\nprincipal.rights", memo: true,
	},
	{
		name: "rules under a variable key",
		rego: `decision := {"allow": true, "reasons": [{"code": "r", "cause": concat(",", [v | some k; v := data.mcpgate.helpers[k]])}]}
helpers.a := input.message.name
helpers.b := input.transport.upstream`,
		reads: "message.name\ntransport.upstream", memo: true,
	},
	{
		name: "unified twice",
		rego: `decision := {"allow": true, "reasons": [{"code": "u", "cause": "x and y are equal"}]} if {
	v = input.message.arguments.x
	v = input.message.arguments.y
}
default decision := {"allow": false, "reasons": [{"code": "u", "cause": "they differ"}]}`,
		reads: "message.arguments.x\nmessage.arguments.y", memo: true,
	},
	{
		name: "import alias",
		rego: `import input.message as msg
decision := {"allow": msg.name == "search_contacts", "reasons": [{"code": "a", "cause": msg.name}]}`,
		reads: "message.name", memo: true,
	},
	{
		name: "builtin named in with",
		rego: `_n(_, _) := 1
decision := {"allow": x >= 0, "reasons": [{"code": "w", "cause": "w"}]} if {
	x := _n("a", 10) with _n as rand.intn
}`,
		reads: "", memo: false,
	},
	{
		name: "presence",
		rego: `decision := {"allow": true, "reasons": [{"code": "p", "cause": "w is there"}]} if {
	_ := input.message.arguments.w
}
default decision := {"allow": false, "reasons": [{"code": "p", "cause": "no w"}]}`,
		reads: "message.arguments.w (kind)", memo: true,
	},
	{
		name: "iteration and rules",
		rego: `decision := {"allow": count(_names) > 0, "reasons": [{"code": "i", "cause": concat(",", _names)}]}
_names contains r if some r in input.principal.rights
_names contains n if {
	some item in input.items
	n := item.name
}
_unused := time.now_ns()`,
		reads: "items\nprincipal.rights", memo: true,
	},
}

// readsOf finds, for each policy, the parts of input it can read.
func TestReadsOf(t *testing.T) {
	for _, tt := range readsPolicies {
		t.Run(tt.name, func(t *testing.T) {
			p, err := load(context.Background(), []string{policyDir(t, "package mcpgate\n\n"+tt.rego+"\n")}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.memo != nil; got != tt.memo {
				t.Fatalf("memo %v, want %v", got, tt.memo)
			}
			if tt.memo && p.reads.String() != tt.reads {
				t.Errorf("reads:\n%s\nwant:\n%s", p.reads, tt.reads)
			}
		})
	}
}

// The default policy reads no argument values: only whether the
// arguments are an object, and the facts the gateway derives from them.
func TestDefaultPolicyReadsNoArguments(t *testing.T) {
	p, err := load(context.Background(), nil, testDeclarations)
	if err != nil {
		t.Fatal(err)
	}
	if p.memo == nil {
		t.Fatal("no memo")
	}
	reads := p.reads.String()
	for _, line := range strings.Split(reads, "\n") {
		if strings.HasPrefix(line, "message.arguments") && line != "message.arguments (kind)" {
			t.Errorf("the default policy reads %s", line)
		}
	}
	for _, want := range []string{"message.arguments (kind)", "message.tenant_arguments", "message.argument_problems", "principal.rights", "tool"} {
		if !strings.Contains("\n"+reads+"\n", "\n"+want+"\n") {
			t.Errorf("the default policy does not read %s:\n%s", want, reads)
		}
	}
	for _, never := range []string{"principal.subject", "principal.connection", "principal.credential_id", "message.client", "transport.origin"} {
		if strings.Contains(reads, never) {
			t.Errorf("the default policy reads %s", never)
		}
	}
}

// inputSchema names the members of the document inputValue builds, level
// by level: with every field of Input set, the document's members are
// exactly the schema's (a member the schema lacked would be left out of
// every key but the whole one).
func TestInputSchemaNames(t *testing.T) {
	base, _, _ := fullInput(t)
	v, err := inputValue(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	var check func(path string, f *inputField, v ast.Value)
	check = func(path string, f *inputField, v ast.Value) {
		obj, ok := v.(ast.Object)
		if !ok {
			t.Fatalf("%s: %T, want an object", path, v)
		}
		var doc, schema []string
		for _, k := range obj.Keys() {
			doc = append(doc, string(k.Value.(ast.String)))
		}
		for i := range f.children {
			c := &f.children[i]
			schema = append(schema, c.name)
			if c.children != nil {
				if m := obj.Get(ast.StringTerm(c.name)); m != nil {
					check(path+"."+c.name, c, m.Value)
				}
			}
		}
		slices.Sort(doc)
		slices.Sort(schema)
		if !slices.Equal(doc, schema) {
			t.Errorf("%s: document members %q, schema %q", path, doc, schema)
		}
	}
	check("input", &inputSchema, v)
}
