package shape

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/demo"
)

// checkShaped runs the checks every shaped demo result must pass.
func checkShaped(t *testing.T, out []byte) any {
	t.Helper()
	strictValid(t, out)
	for _, b := range baits {
		if bytes.Contains(out, []byte(b)) {
			t.Errorf("secret bait %q in output: %s", b, out)
		}
	}
	v := decode(t, out)
	if bad := secretNamesIn(v, demoSecrets, ""); len(bad) > 0 {
		t.Errorf("secret members in output: %v", bad)
	}
	if bad := violations(v, canary, ""); len(bad) > 0 {
		t.Errorf("injection canary outside a wrapper at %v: %s", bad, out)
	}
	return v
}

func TestDemoFindCustomers(t *testing.T) {
	s := mustCompile(t, quickstart(t)["find_customers"])
	in := demoResult(t, findCustomersOut())
	if !bytes.Contains(in, []byte(canary)) || !bytes.Contains(in, []byte("portal_password")) {
		t.Fatal("fixture lacks the canary or the secret")
	}
	out := shapeTool(t, s, in)
	v := checkShaped(t, out)
	mirrorEqual(t, out)

	sc := get(v, "structuredContent")
	if get(sc, "tenant") != nil {
		t.Error("tenant not dropped")
	}
	customers, _ := get(sc, "customers").([]any)
	if len(customers) != 3 {
		t.Fatalf("customers: %v", customers)
	}
	for i, c := range customers {
		n, ok := get(c, "notes").(map[string]any)
		if !ok || !isWrapper(n) {
			t.Errorf("customer %d notes not wrapped: %v", i, get(c, "notes"))
		}
	}
	if got := get(customers[1], "notes", UntrustedMember).(string); !strings.Contains(got, canary) || !strings.Contains(got, `<now> & "quietly"`) {
		t.Errorf("wrapped notes lost text: %q", got)
	}
	// Member order: as the upstream had it.
	want := `{"query":"","customers":[{"id":"C-101","name":"Ada Lovelace","email":"ada@acme-customers.example","phone":"+44 20 7946 0101","address":"12 St James's Square, London SW1Y 4JH","notes":{"untrusted_text":"Side gate is unlocked; the dog is friendly.","notice":"` + Notice + `"}},`
	if !bytes.Contains(out, []byte(want)) {
		t.Errorf("member order or shape changed:\n got %s\nwant prefix %s", out, want)
	}
	if !bytes.HasPrefix(out, []byte(`{"content":[{"type":"text","text":`)) || !bytes.HasSuffix(out, []byte(`}}]}}`)) {
		t.Errorf("top-level order changed: %.80s ... %s", out, out[len(out)-20:])
	}
}

func TestDemoGetBooking(t *testing.T) {
	s := mustCompile(t, quickstart(t)["get_booking"])
	out := shapeTool(t, s, demoResult(t, injected))
	v := checkShaped(t, out)
	mirrorEqual(t, out)
	sc := get(v, "structuredContent")
	for _, dropped := range [][]any{{"internal_cost"}, {"tenant"}, {"customer", "email"}, {"customer", "phone"},
		{"customer", "address"}, {"customer", "portal_password"}, {"technician", "home_address"}, {"technician", "phone"}, {"technician", "skills"}} {
		if get(sc, dropped...) != nil {
			t.Errorf("%v not dropped", dropped)
		}
	}
	for _, wrapped := range [][]any{{"notes"}, {"customer", "notes"}} {
		w, ok := get(sc, wrapped...).(map[string]any)
		if !ok || !isWrapper(w) {
			t.Errorf("%v not wrapped: %v", wrapped, get(sc, wrapped...))
		}
	}
	if m, _ := sc.(map[string]any); m != nil {
		if _, ok := m["alerts_muted_until"]; !ok {
			t.Error("alerts_muted_until (null, allowlisted) dropped")
		}
	}
	if get(sc, "technician", "name") != "Kwame Mensah" || get(sc, "customer", "id") != "C-102" {
		t.Errorf("allowlisted members missing: %v", sc)
	}
}

// TestDemoAllTools runs every quickstart declaration that has a demo result
// over it.
func TestDemoAllTools(t *testing.T) {
	decl := quickstart(t)
	outs := map[string]any{
		"find_customers":   findCustomersOut(),
		"get_booking":      injected,
		"list_technicians": demo.TechnicianList{Tenant: "acme", Technicians: []demo.Technician{maria, kwame}},
		"create_booking":   injected,
		"update_booking":   injected,
		"cancel_booking":   injected,
		"send_booking_confirmation": demo.Confirmation{BookingID: "B-1002", MessageID: "msg-1", To: grace.Email,
			Subject: "Booking B-1002 confirmed", Body: "Hello Grace, ... Your notes: " + injected.Notes, Status: "sent", SentAt: "2026-07-01T08:00:00Z"},
		"page_technician": demo.Page{PageID: "page-1", TechnicianID: "T-11", TechnicianName: "Maria Santos",
			DeliveredTo: maria.Phone, Message: "Boiler at C-101", Status: "delivered", SentAt: "2026-07-01T08:00:00Z"},
		"mute_booking_alerts": demo.AlertMute{BookingID: "B-1001", Minutes: 30, AlertsMutedUntil: "2026-07-01T08:30:00Z"},
	}
	for name, rules := range decl {
		t.Run(name, func(t *testing.T) {
			o, ok := outs[name]
			if !ok {
				t.Skip("no demo result for this tool")
			}
			rules.SecretNames = demoSecrets
			out := shapeTool(t, mustCompile(t, rules), demoResult(t, o))
			checkShaped(t, out)
			mirrorEqual(t, out)
			if name == "page_technician" && bytes.Contains(out, []byte(maria.Phone)) {
				t.Error("delivered_to (a phone number) not dropped")
			}
		})
	}
}

func TestWrappedTextSanitised(t *testing.T) {
	s := mustCompile(t, Rules{UntrustedText: []string{"notes"}})
	dirty := "a\u200bb\u200fc\u202ed\u2066e\U000E0041f\ufeffg\x00h\x1bi\u0085j\rk\nl\tm\u2060n"
	in := []byte(`{"content":[],"structuredContent":{"notes":` + quote(dirty) + `}}`)
	out := shapeTool(t, s, in)
	strictValid(t, out)
	got := get(decode(t, out), "structuredContent", "notes", UntrustedMember)
	if got != "abcdefghijk\nl\tmn" {
		t.Errorf("sanitised text = %q", got)
	}
}

func quote(s string) string {
	b, err := jsontext.AppendQuote(nil, s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestBoundedText(t *testing.T) {
	s := mustCompile(t, Rules{UntrustedText: []string{"notes"}, MaxTextBytes: 10})
	in := []byte(`{"structuredContent":{"notes":"ééééééé"}}`) // 14 bytes
	got := get(decode(t, shapeTool(t, s, in)), "structuredContent", "notes", UntrustedMember).(string)
	if want := "ééééé… [cut by mcpgate: longer than 10 bytes]"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestHugeResult(t *testing.T) {
	big := strings.Repeat("x", 5<<20)
	t.Run("allowed field", func(t *testing.T) {
		s := mustCompile(t, Rules{ResultFields: []string{"report"}})
		in := []byte(`{"content":[{"type":"text","text":"see structured"}],"structuredContent":{"report":"` + big + `"}}`)
		out := shapeTool(t, s, in)
		strictValid(t, out)
		if len(out) > 2000 {
			t.Fatalf("replacement is %d bytes", len(out))
		}
		v := decode(t, out)
		if get(v, "isError") != true || get(v, "structuredContent", "error", "code") != ResultTooLargeCode {
			t.Errorf("replacement: %s", out)
		}
		text := get(v, "content", 0, "text").(string)
		if !strings.HasPrefix(text, "Error: ") || !strings.Contains(text, "Ask for less") {
			t.Errorf("text: %q", text)
		}
		// The last line of the text is the structuredContent JSON.
		last := text[strings.LastIndexByte(text, '\n')+1:]
		if !reflect.DeepEqual(decode(t, []byte(last)), get(v, "structuredContent")) {
			t.Errorf("last line %q differs from structuredContent", last)
		}
	})
	t.Run("unchanged but too large", func(t *testing.T) {
		s := mustCompile(t, Rules{})
		out, err := s.ToolResult([]byte(`{"content":[{"type":"text","text":"` + big + `"}]}`))
		if err != nil || !bytes.Contains(out, []byte(ResultTooLargeCode)) {
			t.Fatalf("err %v, out %.200s", err, out)
		}
	})
	t.Run("wrapped text is cut", func(t *testing.T) {
		s := mustCompile(t, Rules{UntrustedText: []string{"notes"}})
		in := []byte(`{"structuredContent":{"notes":"` + big + `"}}`)
		out := shapeTool(t, s, in)
		strictValid(t, out)
		got := get(decode(t, out), "structuredContent", "notes", UntrustedMember).(string)
		if !strings.HasSuffix(got, "… [cut by mcpgate: longer than 2000 bytes]") || len(got) > 2100 {
			t.Errorf("cut text: %d bytes, ends %q", len(got), got[len(got)-60:])
		}
	})
	t.Run("limit", func(t *testing.T) {
		s := mustCompile(t, Rules{MaxResultBytes: 100})
		in := []byte(`{"content":[{"type":"text","text":"` + strings.Repeat("y", 100) + `"}]}`)
		if out, _ := s.ToolResult(in); !bytes.Contains(out, []byte(ResultTooLargeCode)) {
			t.Errorf("not replaced: %s", out)
		}
		s = mustCompile(t, Rules{MaxResultBytes: -1})
		if out, _ := s.ToolResult(in); out != nil {
			t.Errorf("negative bound should mean none: %s", out)
		}
	})
}

func TestTextOnlyResults(t *testing.T) {
	decl := quickstart(t)["find_customers"]
	decl.SecretNames = demoSecrets
	s := mustCompile(t, decl)
	t.Run("json text", func(t *testing.T) {
		sc, _ := json.Marshal(findCustomersOut())
		in := []byte(`{"content":[{"type":"text","text":` + quote(string(sc)) + `}]}`)
		out := shapeTool(t, s, in)
		v := checkShaped(t, out)
		var inner any
		if err := json.Unmarshal([]byte(get(v, "content", 0, "text").(string)), &inner); err != nil {
			t.Fatal(err)
		}
		if !isWrapper(get(inner, "customers", 1, "notes").(map[string]any)) {
			t.Errorf("notes in JSON text not wrapped: %v", inner)
		}
	})
	t.Run("free text", func(t *testing.T) {
		in := []byte(`{"content":[{"type":"text","text":"Grace wrote: ` + canary + `\u200b"}]}`)
		out := shapeTool(t, s, in)
		v := checkShaped(t, out)
		text := get(v, "content", 0, "text").(string)
		if text != TextPrefix+"Grace wrote: "+canary {
			t.Errorf("text = %q", text)
		}
	})
	t.Run("free text, nothing declared", func(t *testing.T) {
		s := mustCompile(t, Rules{ResultFields: []string{"a"}, SecretNames: demoSecrets})
		in := []byte(`{"content":[{"type":"text","text":"Booking cancelled."}]}`)
		if out, err := s.ToolResult(in); out != nil || err != nil {
			t.Errorf("got %s, %v", out, err)
		}
	})
	t.Run("invalid json text withheld", func(t *testing.T) {
		in := []byte(`{"content":[{"type":"text","text":"{\"portal_password\":\"ada-portal-7Hq2\",\"portal_password\":1}"}]}`)
		out := shapeTool(t, s, in)
		checkShaped(t, out)
		if get(decode(t, out), "content", 0, "text") != WithheldText {
			t.Errorf("out: %s", out)
		}
	})
	t.Run("json array text", func(t *testing.T) {
		s := mustCompile(t, Rules{SecretNames: demoSecrets})
		in := []byte(`{"content":[{"type":"text","text":"[{\"id\":1,\"portal_password\":\"ada-portal-7Hq2\"}]"}]}`)
		out := shapeTool(t, s, in)
		checkShaped(t, out)
		if got := get(decode(t, out), "content", 0, "text"); got != `[{"id":1}]` {
			t.Errorf("text = %v", got)
		}
		s = mustCompile(t, Rules{ResultFields: []string{"id"}})
		out = shapeTool(t, s, in)
		if got := get(decode(t, out), "content", 0, "text"); got != WithheldText {
			t.Errorf("with an allowlist: text = %v", got)
		}
	})
}

func TestIsError(t *testing.T) {
	s := mustCompile(t, quickstart(t)["get_booking"])
	in := []byte(`{"content":[{"type":"text","text":"booking \"B-9\" not found; note: ` + canary + `"}],"isError":true}`)
	out := shapeTool(t, s, in)
	v := checkShaped(t, out)
	if get(v, "isError") != true {
		t.Error("isError lost")
	}
	if !bytes.HasSuffix(out, []byte(`,"isError":true}`)) {
		t.Errorf("isError moved: %s", out)
	}
	// An error result with structuredContent is shaped like any other.
	in = demoResult(t, injected)
	in = append(in[:len(in)-1], `,"isError":true}`...)
	out = shapeTool(t, s, in)
	checkShaped(t, out)
	mirrorEqual(t, out)
}

func TestPaths(t *testing.T) {
	s := mustCompile(t, Rules{
		ResultFields:  []string{"a.b[*].c", "grid[*][*].x", "missing.deep", "keep", "opt.x"},
		UntrustedText: []string{"a.b[*].c", "keep.inner[*]", "grid[*][*].x"},
	})
	in := []byte(`{"structuredContent":{
		"a":{"b":[{"c":"one","d":2},"stray",null,{"c":{"deep":["t",1,true]}},{"d":3}],"z":1},
		"grid":[[{"x":"gx","y":1}],[]],
		"keep":{"inner":["i1",2],"other":"o"},
		"opt":null,
		"drop":{"c":"x"}}}`)
	out := shapeTool(t, s, in)
	strictValid(t, out)
	sc, _ := json.Marshal(get(decode(t, out), "structuredContent"))
	w := func(s string) string { return `{"notice":"` + Notice + `","untrusted_text":"` + s + `"}` }
	want := `{"a":{"b":[{"c":` + w("one") + `},null,{"c":{"deep":[` + w("t") + `,1,true]}},{}]},` +
		`"grid":[[{"x":` + w("gx") + `}],[]],` +
		`"keep":{"inner":[` + w("i1") + `,2],"other":"o"},"opt":null}`
	if string(sc) != want {
		t.Errorf("got  %s\nwant %s", sc, want)
	}
	if bytes.Contains(out, []byte("missing")) {
		t.Error("an absent allowlisted path appeared")
	}
	// A container position with a scalar is dropped.
	out = shapeTool(t, s, []byte(`{"structuredContent":{"a":"flat","keep":5}}`))
	if got := get(decode(t, out), "structuredContent"); !reflect.DeepEqual(got, map[string]any{"keep": 5.0}) {
		t.Errorf("got %v", got)
	}
}

func TestSecretNames(t *testing.T) {
	s := mustCompile(t, Rules{SecretNames: []string{"portal_password", "*token*", "Home Address"}})
	in := []byte(`{"_meta":{"trace":"t1","PortalPassword":"p1","deep":[{"api_token":"p2","ok":1}]},
		"content":[{"type":"text","text":"hi","_meta":{"portal-password":"p3"}},{"type":"image","data":"AA==","mimeType":"image/png","annotations":{"home_address":"p4"}}],
		"structuredContent":{"list":[{"x":{"y":{"PORTAL_PASSWORD":"p5","homeAddress":"p6","keep":true}}}]},
		"isError":false,"extra":{"refresh_token":"p7"}}`)
	out := shapeTool(t, s, in)
	strictValid(t, out)
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		if bytes.Contains(out, []byte(`"`+p+`"`)) {
			t.Errorf("secret %s survived: %s", p, out)
		}
	}
	for _, k := range []string{`"trace":"t1"`, `"ok":1`, `"keep":true`, `"isError":false`, `"text":"hi"`} {
		if !bytes.Contains(out, []byte(k)) {
			t.Errorf("%s lost: %s", k, out)
		}
	}
}

func TestInvalidUTF8(t *testing.T) {
	s := mustCompile(t, Rules{UntrustedText: []string{"notes"}})
	in := []byte("{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff text \\ud800 end\"}],\"structuredContent\":{\"notes\":\"n\xc3(\",\"id\":\"i\xffd\",\"k\\udc00\":1}}")
	out := shapeTool(t, s, in)
	strictValid(t, out)
	v := decode(t, out)
	if got := get(v, "structuredContent", "notes", UntrustedMember); got != "n\ufffd(" {
		t.Errorf("notes = %q", got)
	}
	if got := get(v, "structuredContent", "id"); got != "i\ufffdd" {
		t.Errorf("id = %q", got)
	}
	if got := get(v, "structuredContent", "k\ufffd"); got != 1.0 {
		t.Errorf("fixed name: %v in %s", got, out)
	}
	if got := get(v, "content", 0, "text"); got != TextPrefix+"bad \ufffd text \ufffd end" {
		t.Errorf("text = %q", got)
	}
	// Nothing declared: still fixed, so the output is strict JSON.
	out = shapeTool(t, mustCompile(t, Rules{}), []byte("{\"content\":[{\"type\":\"text\",\"text\":\"\xfe\"}]}"))
	strictValid(t, out)
}

func TestBadInput(t *testing.T) {
	s := mustCompile(t, quickstart(t)["find_customers"])
	for name, in := range map[string]string{
		"array":           `[{"content":[]}]`,
		"string":          `"x"`,
		"number":          `1`,
		"null":            `null`,
		"sc string":       `{"structuredContent":"x"}`,
		"sc array":        `{"structuredContent":[1]}`,
		"duplicate":       `{"content":[],"content":[]}`,
		"deep duplicate":  `{"structuredContent":{"query":"a","query":"b"}}`,
		"trailing data":   `{"content":[]} {}`,
		"truncated":       `{"content":[{"type":"text"`,
		"empty":           ``,
		"not json":        `{content: []}`,
		"content dup key": `{"content":[{"type":"text","text":"a","text":"b"}]}`,
	} {
		out, err := s.ToolResult([]byte(in))
		if err == nil {
			t.Errorf("%s: no error, out %s", name, out)
		}
		if name == "array" || name == "string" || name == "sc array" {
			if !errors.Is(err, ErrNotObject) {
				t.Errorf("%s: error %v is not ErrNotObject", name, err)
			}
		}
	}
	// Without an allowlist, structuredContent may be any JSON value
	// (SEP-2106).
	s = mustCompile(t, Rules{SecretNames: demoSecrets})
	in := []byte(`{"content":[{"type":"text","text":"[{\"portal_password\":\"x\"}]"}],"structuredContent":[{"portal_password":"x"}]}`)
	out := shapeTool(t, s, in)
	if want := `{"content":[{"type":"text","text":"[{}]"}],"structuredContent":[{}]}`; string(out) != want {
		t.Errorf("got %s", out)
	}
}

func TestUnchanged(t *testing.T) {
	s := mustCompile(t, quickstart(t)["mute_booking_alerts"])
	in := demoResult(t, demo.AlertMute{BookingID: "B-1001", Minutes: 30, AlertsMutedUntil: "2026-07-01T08:30:00Z"})
	out, err := s.ToolResult(in)
	if err != nil || out != nil {
		t.Fatalf("got %s, %v", out, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.ToolResult(in) }); n > 0 && !raceEnabled {
		t.Errorf("unchanged result: %v allocations", n)
	}
	// Whitespace, escapes and a pretty-printed mirror do not count as
	// changes.
	in = []byte("{ \"content\" : [ {\"type\":\"text\", \"text\":\"{\\n \\\"minutes\\\": 30, \\\"booking_id\\\":\\\"B-1\\\"}\"} ],\n \"structuredContent\": {\"booking_id\":\"B\\u002d1\", \"minutes\":30},\"isError\":false }")
	if out, err := s.ToolResult(in); err != nil || out != nil {
		t.Fatalf("got %s, %v", out, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.ToolResult(in) }); n > 2 && !raceEnabled {
		t.Errorf("unchanged result, mirror in another form: %v allocations", n)
	}
	// A nil Shaper passes everything valid through.
	var nilShaper *Shaper
	if out, err := nilShaper.ToolResult(in); err != nil || out != nil {
		t.Errorf("nil shaper: %s, %v", out, err)
	}
}

// TestMirrorSemantic: a text block with the same JSON in another member
// order and spacing is recognised and replaced by the shaped
// structuredContent.
func TestMirrorSemantic(t *testing.T) {
	s := mustCompile(t, quickstart(t)["find_customers"])
	in := []byte(`{"structuredContent":{"tenant":"acme","query":"","customers":[{"id":"C-1","notes":"x","portal_password":"s3"}]},` +
		`"content":[{"text":"{\"customers\": [ {\"portal_password\":\"s3\", \"notes\":\"x\",\"id\":\"C-1\"}], \"query\":\"\",\"tenant\":\"acme\" }","type":"text"},{"type":"text","text":"Found 1 customer."}]}`)
	out := shapeTool(t, s, in)
	strictValid(t, out)
	v := decode(t, out)
	sc, _ := json.Marshal(get(v, "structuredContent"))
	var text any
	json.Unmarshal([]byte(get(v, "content", 0, "text").(string)), &text)
	tj, _ := json.Marshal(text)
	if string(sc) != string(tj) {
		t.Errorf("text %s != sc %s", tj, sc)
	}
	if !strings.Contains(get(v, "content", 0, "text").(string), `"query":"","customers"`) {
		t.Errorf("mirror not the shaped structuredContent's bytes: %s", out)
	}
	if get(v, "content", 1, "text") != TextPrefix+"Found 1 customer." {
		t.Errorf("free text block: %q", get(v, "content", 1, "text"))
	}
	if bytes.Contains(out, []byte("s3")) {
		t.Error("secret in output")
	}
}

func TestEmbeddedResourceBlock(t *testing.T) {
	s := mustCompile(t, Rules{UntrustedText: []string{"notes"}, SecretNames: []string{"password"}})
	in := []byte(`{"content":[{"type":"resource","resource":{"uri":"file:///n.txt","mimeType":"text/plain","text":"` + canary + `","password":"pw"}},` +
		`{"type":"resource_link","uri":"file:///x","name":"x"}]}`)
	out := shapeTool(t, s, in)
	v := checkShaped(t, out)
	if got := get(v, "content", 0, "resource", "text"); got != TextPrefix+canary {
		t.Errorf("resource text = %q", got)
	}
	if bytes.Contains(out, []byte(`"pw"`)) {
		t.Error("secret kept")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, p := range []string{"", "a..b", "a[", "[*]", "[*].a", ".a", "a.", "a[0]", "a[*]b", "a[*", "a]", "a b", "a.[*]", "a\tb"} {
		if _, err := Compile(Rules{ResultFields: []string{"ok", p}}); err == nil || !strings.Contains(err.Error(), quote(p)) {
			t.Errorf("result_fields %q: error %v", p, err)
		}
		if _, err := Compile(Rules{UntrustedText: []string{p}}); err == nil {
			t.Errorf("untrusted_text %q: no error", p)
		}
	}
	for _, n := range []string{"", "_-", "*", "**"} {
		if _, err := Compile(Rules{SecretNames: []string{n}}); err == nil {
			t.Errorf("secret name %q: no error", n)
		}
	}
	for _, p := range []string{"a", "a.b", "a[*]", "a[*][*].b", "list[*].b", "ä.ö", "a-b.c_d"} {
		if _, err := Compile(Rules{ResultFields: []string{p}, UntrustedText: []string{p}}); err != nil {
			t.Errorf("%q: %v", p, err)
		}
	}
}

func TestGlob(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*password*", "portalpassword", true}, {"*password*", "password", true}, {"*password", "passwordhint", false},
		{"api*key", "apikey", true}, {"api*key", "apisecretkey", true}, {"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false},
	} {
		if got := glob(c.p, []byte(c.s)); got != c.want {
			t.Errorf("glob(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// TestDeepNesting: deep values with invalid UTF-8 at the bottom are shaped
// in one pass (no re-reading per level), and the input is not modified.
func TestDeepNesting(t *testing.T) {
	const depth = 5000
	inner := strings.Repeat(`[`, depth) + "\"\xff\"" + strings.Repeat(`]`, depth)
	for _, in := range []string{
		`{"content":[],"_meta":` + inner + `}`,
		`{"structuredContent":{"a":` + inner + `}}`,
		`{"content":[{"type":"text","text":"x","annotations":` + inner + `}]}`,
	} {
		orig := []byte(in)
		cp := bytes.Clone(orig)
		s := mustCompile(t, Rules{UntrustedText: []string{"notes"}, SecretNames: []string{"pw"}})
		out := shapeTool(t, s, orig)
		strictValid(t, out)
		if !bytes.Equal(orig, cp) {
			t.Fatal("input modified")
		}
		// (annotations that are not an object hold the tool's text:
		// prefixed, so the replacement ends the string.)
		if !bytes.Contains(out, []byte("\ufffd\"")) || bytes.Contains(out, []byte("\xff")) {
			t.Errorf("invalid byte not replaced")
		}
	}
}

// TestSecretSetLengths: the length filter in front of the exact names
// never hides one: every declared name, spelt any way, still matches,
// short and 64 bytes or longer, and other names of the same lengths do
// not.
func TestSecretSetLengths(t *testing.T) {
	long := strings.Repeat("k", 70)
	var ss secretSet
	for _, n := range []string{"password", "pin", long, "Ⱥb"} {
		if err := ss.add(n); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{
		"password": true, "Pass_Word": true, "PASS-WORD": true, "pass.word": true, "p a s s w o r d": true,
		"pin": true, "P_I_N": true, long: true, strings.ToUpper(long): true, "ⱥB": true, "Ⱥ_b": true,
		"passwort": false, "pine": false, "pi": false, "": false, long + "k": false, strings.Repeat("k", 69): false,
		"ⱥc": false, "checked_at": false,
	} {
		if got, _ := ss.match([]byte(name), nil); got != want {
			t.Errorf("match(%q) = %v, want %v", name, got, want)
		}
	}
	// A name shorter than every secret name that lower-cases longer.
	var grow secretSet
	if err := grow.add("ⱥⱥ"); err != nil {
		t.Fatal(err)
	}
	if got, _ := grow.match([]byte("ȺȺ"), nil); !got {
		t.Errorf("ȺȺ (%d bytes) does not match ⱥⱥ (%d bytes)", len("ȺȺ"), len("ⱥⱥ"))
	}
}
