package draft

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/internal/lint"
	"github.com/mcpgate/mcpgate/policy"
)

func TestGuessEffect(t *testing.T) {
	const (
		ro      = `{"readOnlyHint":true}`
		notRO   = `{"readOnlyHint":false}`
		destr   = `{"destructiveHint":true}`
		noDestr = `{"destructiveHint":false}`
	)
	mail := `{"type":"object","properties":{"to":{"type":"string"},"subject":{"type":"string"},"body":{"type":"string"}}}`
	rangeArgs := `{"type":"object","properties":{"from":{"type":"string"},"to":{"type":"string"}}}`
	tests := []struct {
		name, tool, ann, input string
		want                   string
		unsure                 bool
		reason                 string // a substring of the joined reasons
	}{
		{"read verb", "find_customers", "", "", policy.EffectRead, false, `verb "find" suggests read; no readOnlyHint`},
		{"read verb and hint agree", "get_booking", ro, "", policy.EffectRead, false, "readOnlyHint: true agrees"},
		{"camelCase read", "listTechnicians", ro, "", policy.EffectRead, false, `verb "list"`},
		{"kebab read", "get-sum", ro, "", policy.EffectRead, false, `verb "get"`},
		{"search", "search_issues", "", "", policy.EffectRead, false, `"search"`},
		{"read verb with a range 'to'", "list_events", "", rangeArgs, policy.EffectRead, false, "read"},
		{"read verb, readOnlyHint false", "get_report", notRO, "", MostGuarded, true, "readOnlyHint: false contradicts"},
		{"read verb, destructive", "fetch_and_purge", destr, "", MostGuarded, true, "destructiveHint: true contradicts"},
		{"create", "create_booking", "", "", policy.EffectSilentWrite, false, `"create" suggests silent_write`},
		{"update, not destructive", "update_booking", noDestr, "", policy.EffectSilentWrite, false, "destructiveHint: false"},
		{"set", "setStatus", "", "", policy.EffectSilentWrite, false, `"set"`},
		{"write with destructive hint", "update_record", destr, "", MostGuarded, true, "may destroy data"},
		{"write verb, readOnly hint", "toggle_flag", ro, "", MostGuarded, true, "readOnlyHint: true contradicts"},
		{"write with recipient", "create_message", "", mail, policy.EffectNotify, false, `recipient argument "to"`},
		{"send", "send_booking_confirmation", "", "", policy.EffectNotify, false, `"send" suggests notify`},
		{"email", "email_customer", "", "", policy.EffectNotify, false, "notify"},
		{"post", "post_message", "", "", policy.EffectNotify, false, "notify"},
		{"page", "page_technician", "", "", policy.EffectWake, false, `"page" suggests wake`},
		{"list pages is a read", "list_pages", "", "", policy.EffectRead, false, "read"},
		{"mute", "mute_booking_alerts", "", "", policy.EffectAlerting, false, `"mute" suggests alerting`},
		{"write on alerts", "update_alert_rule", "", "", policy.EffectAlerting, false, `naming "alert" changes alerting`},
		{"delete", "delete_file", destr, "", policy.EffectDelete, false, "destructiveHint: true"},
		{"remove", "remove_member", "", "", policy.EffectDelete, false, `"remove"`},
		{"cancel", "cancel_booking", destr, "", policy.EffectDelete, false, `"cancel" suggests delete`},
		{"verb last", "booking_cancel", "", "", policy.EffectDelete, false, `"cancel"`},
		{"delete verb, readOnly hint", "delete_cache", ro, "", MostGuarded, true, "contradicts"},
		{"unknown verb", "gzip_file_as_resource", "", "", MostGuarded, true, "no verb this guess knows"},
		{"unknown verb, readOnly hint is not enough", "simulate_query", ro, "", MostGuarded, true, "annotation alone is not trusted"},
		{"unknown verb, destructive", "frobnicate", destr, "", MostGuarded, true, "destructiveHint: true"},
		{"empty name", "", "", "", MostGuarded, true, "no verb"},
		{"malformed annotations", "get_x", `{"readOnlyHint":"yes"}`, "", policy.EffectRead, false, "read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := ToolFacts{Name: tt.tool}
			if tt.ann != "" {
				f.Annotations = jsontext.Value(tt.ann)
			}
			if tt.input != "" {
				f.InputSchema = jsontext.Value(tt.input)
			}
			g := GuessEffect(f)
			reasons := strings.Join(g.Reasons, "; ")
			if g.Effect != tt.want || g.Unsure != tt.unsure {
				t.Fatalf("GuessEffect(%s, %s) = %s unsure=%t (%s), want %s unsure=%t", tt.tool, tt.ann, g.Effect, g.Unsure, reasons, tt.want, tt.unsure)
			}
			if !strings.Contains(reasons, tt.reason) {
				t.Errorf("reasons %q lack %q", reasons, tt.reason)
			}
			if g.Unsure && !strings.Contains(reasons, "most guarded") {
				t.Errorf("an unsure guess does not say it is the most guarded class: %q", reasons)
			}
			if !slices.Contains(policy.Effects, g.Effect) {
				t.Errorf("%q is not an effect class", g.Effect)
			}
		})
	}
}

func TestProposeRight(t *testing.T) {
	tests := []struct{ tool, effect, want string }{
		{"find_customers", policy.EffectRead, "customer:read"},
		{"get_booking", policy.EffectRead, "booking:read"},
		{"cancel_booking", policy.EffectDelete, "booking:delete"},
		{"page_technician", policy.EffectWake, "technician:wake"},
		{"mute_booking_alerts", policy.EffectAlerting, "booking_alert:manage"},
		{"listCategories", policy.EffectRead, "category:read"},
		{"get-status", policy.EffectRead, "status:read"},
		{"echo", policy.EffectRead, "crm:read"},
		{"gzip_file", MostGuarded, "crm:delete"},
	}
	for _, tt := range tests {
		if got := ProposeRight("crm", tt.tool, tt.effect); got != tt.want {
			t.Errorf("ProposeRight(%s, %s) = %q, want %q", tt.tool, tt.effect, got, tt.want)
		}
	}
}

func TestOutputTextPaths(t *testing.T) {
	schema := `{
	  "type": "object",
	  "$defs": {"customer": {"type": "object", "properties": {
	    "name": {"type": "string"}, "notes": {"type": "string"}, "id": {"type": "string"}}}},
	  "properties": {
	    "id": {"type": "string"},
	    "customer_id": {"type": "string"},
	    "status": {"type": "string", "enum": ["open", "closed"]},
	    "start": {"type": "string", "format": "date-time"},
	    "notes": {"type": ["string", "null"]},
	    "summary": {"type": "string", "pattern": "^[a-z]+$"},
	    "city": {"type": "string"},
	    "count": {"type": "integer"},
	    "customer": {"$ref": "#/$defs/customer"},
	    "comments": {"type": "array", "items": {"type": "object", "properties": {
	      "body": {"type": "string"}, "author": {"type": "string"}, "created_at": {"type": "string"}}}},
	    "tags": {"type": "array", "items": {"type": "string"}},
	    "odd key": {"type": "string"},
	    "choice": {"anyOf": [{"type": "object", "properties": {"description": {"type": "string"}}}, {"type": "null"}]}
	  }
	}`
	got := OutputTextPaths(jsontext.Value(schema))
	wantProposed := []string{"choice.description", "comments[*].body", "customer.notes", "notes"}
	wantOther := []string{"city", "comments[*].author", "customer.name", "tags[*]"}
	if !slices.Equal(got.Proposed, wantProposed) {
		t.Errorf("Proposed = %q, want %q", got.Proposed, wantProposed)
	}
	if !slices.Equal(got.Other, wantOther) {
		t.Errorf("Other = %q, want %q", got.Other, wantOther)
	}
	for _, p := range append(got.Proposed, got.Other...) {
		if !policy.IsPath(p) {
			t.Errorf("%q is not an untrusted_text path", p)
		}
	}
	if got := OutputTextPaths(nil); len(got.Proposed)+len(got.Other) != 0 {
		t.Errorf("no schema: %+v", got)
	}
	// A $ref cycle ends at the depth bound.
	cyc := `{"type":"object","properties":{"node":{"$ref":"#"}, "text":{"type":"string"}}}`
	if got := OutputTextPaths(jsontext.Value(cyc)); !slices.Contains(got.Proposed, "text") {
		t.Errorf("cycle: %+v", got)
	}
}

// mustTool parses a tool definition as the catalog lists it.
func mustTool(t *testing.T, def string) catalog.Tool {
	t.Helper()
	tool, err := catalog.ParseTool(jsontext.Value(def))
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

// TestRenderLoads: the draft loads as a configuration unchanged, with the
// proposed declarations, and upstream text in comments cannot add keys.
func TestRenderLoads(t *testing.T) {
	snap := &catalog.Snapshot{
		Upstream:        "crm",
		ProtocolVersion: "2025-11-25",
		Tools: []catalog.Tool{
			mustTool(t, `{"name":"find_customers","description":"Search.\nupstreams: []\n# evil","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true},
			  "outputSchema":{"type":"object","properties":{"customers":{"type":"array","items":{"type":"object","properties":{"notes":{"type":"string"},"name":{"type":"string"}}}}}}}`),
			mustTool(t, `{"name":"cancel_booking","title":"Cancel\u202e a booking","inputSchema":{"type":"object"},"annotations":{"destructiveHint":true}}`),
			mustTool(t, `{"name":"frobnicate","inputSchema":{"type":"object"}}`),
			mustTool(t, `{"name":"yes","inputSchema":{"type":"object"}}`),
		},
		Refused: []catalog.RefusedTool{{Name: "bad name", Reason: "name outside [A-Za-z0-9_.-]{1,128}"}},
	}
	var defs []jsontext.Value
	for _, tool := range snap.Tools {
		defs = append(defs, tool.Definition)
	}
	text := Render(Options{
		Upstream: "crm", URL: "http://127.0.0.1:3000/mcp", Route: "/mcp", Snapshot: snap,
		Lint: lint.Lint(defs, lint.Options{}), Manifest: "crm.manifest.json", Store: "crm.state.db", Now: time.Unix(0, 0),
	})
	cfg, err := config.Parse(text, "draft")
	if err != nil {
		t.Fatalf("the draft does not load: %v\n%s", err, text)
	}
	if len(cfg.Upstreams) != 1 {
		t.Fatalf("%d upstreams", len(cfg.Upstreams))
	}
	u := cfg.Upstreams[0]
	want := map[string]string{"find_customers": "read", "cancel_booking": "delete", "frobnicate": MostGuarded, "yes": MostGuarded}
	if len(u.Tools) != len(want) {
		t.Errorf("declared %d tools, want %d", len(u.Tools), len(want))
	}
	for name, effect := range want {
		if got := u.Tools[name].Effect; got != effect {
			t.Errorf("%s: effect %q, want %q", name, got, effect)
		}
	}
	if got := u.Tools["find_customers"].UntrustedText; !slices.Equal(got, []string{"customers[*].notes"}) {
		t.Errorf("untrusted_text = %q", got)
	}
	if got := u.Tools["find_customers"].Rights; !slices.Equal(got, []string{"customer:read"}) {
		t.Errorf("rights = %q", got)
	}
	if cfg.Catalog.Manifest == "" || cfg.Store == nil || cfg.Store.Bolt == nil {
		t.Errorf("catalog.manifest %q, store %+v", cfg.Catalog.Manifest, cfg.Store)
	}
	s := string(text)
	for _, w := range []string{`Search.\u000Aupstreams: []\u000A# evil`, `Cancel\u202E a booking`, "UNSURE", "lint (", `"bad name": name outside`} {
		if !strings.Contains(s, w) {
			t.Errorf("the draft lacks %q", w)
		}
	}
	for i, line := range strings.Split(s, "\n") {
		if len(line) > 0 && strings.HasPrefix(strings.TrimSpace(line), "#") && strings.ContainsAny(line, "\r\u202e") {
			t.Errorf("line %d carries a raw control or bidi character: %q", i+1, line)
		}
	}
}
