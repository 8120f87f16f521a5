package policy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

func TestSchemasCompile(t *testing.T) {
	for _, loc := range []string{"input.schema.json", "decision.schema.json", "declarations.schema.json", declarationDef} {
		if _, err := compiledSchema(loc); err != nil {
			t.Errorf("%s: %v", loc, err)
		}
	}
}

// Sample Inputs, marshalled by both JSON packages, match input.schema.json;
// so does every decision the default policy makes for them, both as the
// policy's raw document and as the Decision mcpgate returns.
func TestSchemasAgainstDefaultPolicy(t *testing.T) {
	e := newDefaultEngine(t)
	raw := rawDecisions(t)
	inputs := sampleInputs()
	delete(inputs, "empty") // not a valid input on purpose
	for _, name := range allTools {
		inputs["call "+name] = callInput(name, alice)
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			b1, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			b2, err := jsonv2.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range [][]byte{b1, b2} {
				for _, err := range validateJSON("input.schema.json", b) {
					t.Errorf("input: %v\n%s", err, b)
				}
			}

			d, err := e.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, err := range validateJSON("decision.schema.json", b) {
				t.Errorf("Decision: %v\n%s", err, b)
			}
			b = raw(in)
			for _, err := range validateJSON("decision.schema.json", b) {
				t.Errorf("policy decision: %v\n%s", err, b)
			}
		})
	}
}

// rawDecisions evaluates the default policy the plain OPA way (JSON input,
// JSON result), independent of the Engine.
func rawDecisions(t *testing.T) func(*Input) []byte {
	t.Helper()
	modules, _, err := loadFiles(nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := []func(*rego.Rego){rego.Query(Query)}
	for name, m := range modules {
		opts = append(opts, rego.ParsedModule(m))
		_ = name
	}
	pq, err := rego.New(opts...).PrepareForEval(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return func(in *Input) []byte {
		var x any
		b, _ := json.Marshal(in)
		if err := json.Unmarshal(b, &x); err != nil {
			t.Fatal(err)
		}
		rs, err := pq.Eval(context.Background(), rego.EvalInput(x))
		if err != nil || len(rs) != 1 {
			t.Fatalf("eval: %v, %d results", err, len(rs))
		}
		out, err := json.Marshal(rs[0].Expressions[0].Value)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// The schemas catch drift: documents that break them are refused.
func TestSchemasRefuse(t *testing.T) {
	tests := []struct {
		schema string
		doc    string
		want   string
	}{
		{"input.schema.json", `{"version":"mcpgate.policy/v1","phase":"request","transport":{"kind":"proxy","http_method":"POST","path":"/mcp","upstream":"u","protocol_version":"2026-07-28"},"message":{"kind":"request","method":"ping"},"principal":{"authenticated":false},"extra":1}`, "extra"},
		{"input.schema.json", `{"version":"mcpgate.policy/v2","phase":"request","transport":{"kind":"proxy","http_method":"POST","path":"/mcp","upstream":"u","protocol_version":"2026-07-28"},"message":{"kind":"request","method":"ping"},"principal":{"authenticated":false}}`, "/version"},
		{"input.schema.json", `{"version":"mcpgate.policy/v1","phase":"request","transport":{"kind":"proxy","http_method":"POST","path":"/mcp","upstream":"u","protocol_version":"2026-07-28"},"message":{"kind":"request","method":"tools/call","name":"t"},"tool":{"name":"t","declared":true,"effect":"readonly"},"principal":{"authenticated":false}}`, "/tool/effect"},
		{"decision.schema.json", `{"reasons":[]}`, "allow"},
		{"decision.schema.json", `{"allow":false,"reasons":[{"code":"Bad Code","cause":"c"}]}`, "/reasons/0/code"},
		{"decision.schema.json", `{"allow":true,"effect":"readonly"}`, "/effect"},
		{"decision.schema.json", `{"allow":true,"visible":[1]}`, "/visible/0"},
	}
	for _, tt := range tests {
		errs := validateJSON(tt.schema, []byte(tt.doc))
		if len(errs) == 0 {
			t.Errorf("%s accepted %s", tt.schema, tt.doc)
			continue
		}
		var msgs []string
		for _, err := range errs {
			msgs = append(msgs, err.Error())
		}
		if all := strings.Join(msgs, "\n"); !strings.Contains(all, tt.want) {
			t.Errorf("%s: errors do not mention %q:\n%s", tt.schema, tt.want, all)
		}
	}
}

// The Go reader and decision.schema.json agree on reason codes.
func TestIsCode(t *testing.T) {
	for code, want := range map[string]bool{"a": true, "tool_hidden": true, "x9_y": true, "": false, "_a": false, "9a": false, "A": false, "a-b": false, "a b": false} {
		if isCode(code) != want {
			t.Errorf("isCode(%q) = %v", code, !want)
		}
		errs := validateJSON("decision.schema.json", []byte(`{"allow":false,"reasons":[{"code":`+string(ast.StringTerm(code).String())+`,"cause":"c"}]}`))
		if (len(errs) == 0) != want {
			t.Errorf("schema on code %q: %v", code, errs)
		}
	}
}
