package shape

import (
	"bytes"
	"strings"
	"testing"
)

func TestErrorObject(t *testing.T) {
	long := strings.Repeat("x", 3000)
	in := []byte(`{"code":-32000,"message":"Upstream failed\u001b[31m\u202e: ` + canary + ` ` + long + `",` +
		`"data":{"detail":"` + canary + `","nested":[{"portal_password":"pw-1","n":1.50}],"Portal-Password":"pw-2"},"portalPassword":"pw-3"}`)
	for _, untrusted := range []bool{false, true} {
		r := Rules{SecretNames: []string{"portal_password"}}
		if untrusted {
			r.UntrustedText = []string{"notes"}
		}
		out, err := mustCompile(t, r).ErrorObject(in)
		if err != nil {
			t.Fatal(err)
		}
		strictValid(t, out)
		if bytes.Contains(out, []byte("pw-")) {
			t.Errorf("untrusted=%v: secret value in %s", untrusted, out)
		}
		v := decode(t, out)
		if get(v, "code") != -32000.0 || !bytes.Contains(out, []byte(`"n":1.50`)) {
			t.Errorf("untrusted=%v: code or number changed: %s", untrusted, out)
		}
		msg, _ := get(v, "message").(string)
		body := strings.TrimPrefix(msg, TextPrefix)
		if strings.ContainsAny(body, "\x1b\u202e") || len(body) > DefaultMaxTextBytes+60 || !strings.Contains(body, "[cut by mcpgate") {
			t.Errorf("untrusted=%v: message not sanitised and bounded: %.200q (%d bytes)", untrusted, msg, len(msg))
		}
		detail, _ := get(v, "data", "detail").(string)
		if untrusted {
			if !strings.HasPrefix(msg, TextPrefix) || !strings.HasPrefix(detail, TextPrefix) {
				t.Errorf("third-party text not marked: %s", out)
			}
			if bad := violations(v, canary, ""); len(bad) > 0 {
				t.Errorf("canary outside a wrapper: %v", bad)
			}
		} else if detail != canary || strings.HasPrefix(msg, TextPrefix) {
			t.Errorf("undeclared: data text changed or message marked: %s", out)
		}
	}

	// code and message are never dropped, whatever the secret names.
	s := mustCompile(t, Rules{SecretNames: []string{"*code*", "*message*"}})
	out, err := s.ErrorObject([]byte(`{"code":-32602,"message":"bad","data":{"errorCode":7,"message":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"code":-32602,"message":"bad","data":{}}` {
		t.Errorf("got %s", out)
	}
	if out, err := mustCompile(t, Rules{SecretNames: []string{"pw"}}).ErrorObject([]byte(`{"code":1,"message":"fine","data":["a"]}`)); out != nil || err != nil {
		t.Errorf("clean error: %s, %v", out, err)
	}
	if _, err := s.ErrorObject([]byte(`"boom"`)); !errorsIs(err, ErrNotObject) {
		t.Errorf("string error: %v", err)
	}
}

func TestNotificationSecretNames(t *testing.T) {
	s := mustCompile(t, Rules{SecretNames: []string{"portal_password"}})
	for _, c := range []struct{ method, in string }{
		{"notifications/message", `{"level":"info","data":{"user":"ada","portal_password":"pw-1","deep":[{"PortalPassword":"pw-2"}]}}`},
		{"notifications/progress", `{"progressToken":"p","progress":1,"message":"m","_meta":{"portal-password":"pw-3"}}`},
		{"notifications/resources/updated", `{"uri":"file:///a","portal_password":"pw-4"}`},
	} {
		out, err := s.Notification(c.method, []byte(c.in))
		if err != nil || out == nil {
			t.Fatalf("%s: %s, %v", c.method, out, err)
		}
		strictValid(t, out)
		if bytes.Contains(out, []byte("pw-")) || bytes.Contains(bytes.ToLower(out), []byte("password")) {
			t.Errorf("%s: secret member kept: %s", c.method, out)
		}
	}
	// The data text is still marked.
	out, _ := s.Notification("notifications/message", []byte(`{"level":"info","data":{"note":"`+canary+`"}}`))
	if bad := violations(decode(t, out), canary, ""); len(bad) > 0 {
		t.Errorf("canary outside a wrapper: %s", out)
	}
	// Without secret names other notifications are left alone.
	if out, err := mustCompile(t, Rules{}).Notification("notifications/resources/updated", []byte(`{"uri":"u"}`)); out != nil || err != nil {
		t.Errorf("no secrets: %s, %v", out, err)
	}
}

func TestServerRequestParams(t *testing.T) {
	s := mustCompile(t, Rules{SecretNames: []string{"portal_password"}})
	sampling := []byte(`{"messages":[` +
		`{"role":"user","content":{"type":"text","text":"Summarise: ` + canary + `\u200b"}},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"tu1","name":"find_customers","input":{"q":"` + canary + `"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","toolUseId":"tu1","content":[{"type":"text","text":"` + canary + `"}],"portal_password":"pw-1"}]}],` +
		`"systemPrompt":"` + canary + `","maxTokens":100,"modelPreferences":{"hints":[{"name":"claude"}]}}`)
	out, err := s.ServerRequestParams("sampling/createMessage", sampling)
	if err != nil {
		t.Fatal(err)
	}
	strictValid(t, out)
	v := decode(t, out)
	if bad := violations(v, canary, ""); len(bad) > 0 {
		t.Errorf("sampling: canary outside a wrapper at %v: %s", bad, out)
	}
	if bytes.Contains(out, []byte("pw-1")) || bytes.Contains(out, []byte("\u200b")) {
		t.Errorf("sampling: secret or invisible character kept: %s", out)
	}
	if get(v, "messages", 1, "content", 0, "name") != "find_customers" || get(v, "messages", 1, "content", 0, "id") != "tu1" ||
		get(v, "messages", 2, "content", 0, "toolUseId") != "tu1" || get(v, "maxTokens") != 100.0 ||
		get(v, "messages", 2, "content", 0, "content", 0, "type") != "text" {
		t.Errorf("sampling: protocol values changed: %s", out)
	}

	elicit := []byte(`{"message":"` + canary + `","requestedSchema":{"type":"object","title":"` + canary + `","properties":{` +
		`"choice":{"type":"string","description":"` + canary + `","enum":["a","b"],"enumNames":["A","B"]},` +
		`"portal_password":{"type":"string"}},"required":["choice"]}}`)
	out, err = s.ServerRequestParams("elicitation/create", elicit)
	if err != nil {
		t.Fatal(err)
	}
	strictValid(t, out)
	v = decode(t, out)
	if bad := violations(v, canary, ""); len(bad) > 0 {
		t.Errorf("elicitation: canary outside a wrapper at %v: %s", bad, out)
	}
	if get(v, "requestedSchema", "properties", "portal_password") != nil || get(v, "requestedSchema", "properties", "choice", "enum", 1) != "b" ||
		get(v, "requestedSchema", "type") != "object" {
		t.Errorf("elicitation: %s", out)
	}

	if out, err := s.ServerRequestParams("roots/list", []byte(`{"_meta":{"progressToken":1}}`)); out != nil || err != nil {
		t.Errorf("roots/list: %s, %v", out, err)
	}
	if out, err := s.ServerRequestParams("roots/list", []byte(`{"_meta":{"portal_password":"x"}}`)); err != nil || string(out) != `{"_meta":{}}` {
		t.Errorf("roots/list with a secret: %s, %v", out, err)
	}
}

// TestUntrustedShapeMismatch: a value whose shape differs from the declared
// untrusted_text path still has every string under the path wrapped.
func TestUntrustedShapeMismatch(t *testing.T) {
	for _, c := range []struct {
		paths []string
		sc    string
	}{
		{[]string{"booking.notes"}, `{"booking":"` + canary + `"}`},                        // string where an object was declared
		{[]string{"items[*].notes"}, `{"items":{"a":{"notes":"` + canary + `"}}}`},         // object where an array was
		{[]string{"items[*].notes"}, `{"items":"` + canary + `"}`},                         // string where an array was
		{[]string{"notes.text"}, `{"notes":["` + canary + `",{"text":"` + canary + `"}]}`}, // array where an object was
		{[]string{"items[*].notes"}, `{"items":[["` + canary + `"]]}`},                     // array where objects were
		{[]string{"notes"}, `"` + canary + `"`},                                            // structuredContent a string
		{[]string{"notes"}, `["` + canary + `",{"notes":"` + canary + `"}]`},               // structuredContent an array
		{[]string{"a[*][*].b"}, `{"a":[{"b":"` + canary + `"}]}`},                          // object where an array was (nested)
	} {
		s := mustCompile(t, Rules{UntrustedText: c.paths})
		for _, in := range []string{
			`{"structuredContent":` + c.sc + `}`,
			`{"content":[{"type":"text","text":` + quoteJSON(c.sc) + `}]}`,
		} {
			out := shapeTool(t, s, []byte(in))
			strictValid(t, out)
			if bad := violations(decode(t, out), canary, ""); len(bad) > 0 {
				t.Errorf("%v %s: canary outside a wrapper at %v: %s", c.paths, in, bad, out)
			}
		}
	}
	// A value that fits the declaration keeps its other members raw.
	s := mustCompile(t, Rules{UntrustedText: []string{"items[*].notes"}})
	out := shapeTool(t, s, []byte(`{"structuredContent":{"items":[{"id":"B-1","notes":"n"}],"tenant":"acme"}}`))
	v := decode(t, out)
	if get(v, "structuredContent", "items", 0, "id") != "B-1" || get(v, "structuredContent", "tenant") != "acme" {
		t.Errorf("fitting value: %s", out)
	}
}

// TestThirdPartyBlocks: with untrusted text declared, text the model may
// read anywhere in the result is marked; protocol values are kept.
func TestThirdPartyBlocks(t *testing.T) {
	in := []byte(`{"content":[` +
		`{"type":"resource_link","uri":"file:///r","name":"` + canary + `","title":"` + canary + `","description":"` + canary + `","mimeType":"text/plain"},` +
		`{"type":"Text","text":"` + canary + `"},{"type":"TEXT","text":"` + canary + `"},` +
		`{"type":"image","data":"AA==","mimeType":"image/png","annotations":{"audience":["user"],"priority":0.5,"note":"` + canary + `"}},` +
		`{"type":"widget","body":{"x":["` + canary + `"]}},"` + canary + `"],` +
		`"summary":"` + canary + `","extra":{"deep":["` + canary + `"]},"_meta":{"trace":"t-1","portal_password":"pw"},"resultType":"complete"}`)
	s := mustCompile(t, Rules{UntrustedText: []string{"notes"}, SecretNames: []string{"portal_password"}})
	out := shapeTool(t, s, in)
	strictValid(t, out)
	v := decode(t, out)
	if bad := violations(v, canary, ""); len(bad) > 0 {
		t.Errorf("canary outside a wrapper at %v: %s", bad, out)
	}
	for _, want := range [][]any{
		{"file:///r", "content", 0, "uri"}, {"text/plain", "content", 0, "mimeType"}, {"Text", "content", 1, "type"},
		{"AA==", "content", 3, "data"}, {"user", "content", 3, "annotations", "audience", 0}, {0.5, "content", 3, "annotations", "priority"},
		{"t-1", "_meta", "trace"}, {"complete", "resultType"},
	} {
		if got := get(v, want[1:]...); got != want[0] {
			t.Errorf("%v = %v, want %v", want[1:], got, want[0])
		}
	}
	if get(v, "_meta", "portal_password") != nil {
		t.Errorf("secret in _meta: %s", out)
	}
	// content that is not an array of blocks.
	out = shapeTool(t, s, []byte(`{"content":"`+canary+`"}`))
	if bad := violations(decode(t, out), canary, ""); len(bad) > 0 {
		t.Errorf("content string: %s", out)
	}
	// Without untrusted text declared, nothing is marked.
	if out, err := mustCompile(t, Rules{SecretNames: []string{"pw"}}).ToolResult(in); err != nil || bytes.Contains(out, []byte(Notice)) {
		t.Errorf("undeclared: %s, %v", out, err)
	}
}

func quoteJSON(s string) string {
	return string(appendQuoted(nil, s))
}

// TestInputRequests: the server-to-client requests of an input_required
// result are shaped like ServerRequestParams; requestState stays exact.
func TestInputRequests(t *testing.T) {
	in := []byte(`{"resultType":"input_required","requestState":"st-\u00e9-1","inputRequests":{` +
		`"ask":{"params":{"message":"` + canary + `","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","description":"` + canary + `"}}}},"method":"elicitation/create"},` +
		`"llm":{"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"` + canary + `"}}],"maxTokens":5,"portal_password":"pw"}}}}`)
	for _, r := range []Rules{{SecretNames: []string{"portal_password"}}, {UntrustedText: []string{"notes"}, SecretNames: []string{"portal_password"}}} {
		out := shapeTool(t, mustCompile(t, r), in)
		strictValid(t, out)
		v := decode(t, out)
		if bad := violations(v, canary, ""); len(bad) > 0 {
			t.Errorf("%+v: canary outside a wrapper at %v: %s", r, bad, out)
		}
		if get(v, "requestState") != "st-é-1" || get(v, "resultType") != "input_required" || get(v, "inputRequests", "ask", "method") != "elicitation/create" ||
			bytes.Contains(out, []byte(`"pw"`)) {
			t.Errorf("%+v: %s", r, out)
		}
	}
}
