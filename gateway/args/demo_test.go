package args

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/demo"
)

// demoTools lists the demo upstream's tools as a client sees them (the
// SDK's own serialisation of registerTools' schemas), in-process.
func demoTools(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"args-test","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{`+meta+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	rec := httptest.NewRecorder()
	demo.New(demo.Options{}).Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("tools/list: %d %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(strings.NewReader(body))
		body = ""
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				body = data
			}
		}
	}
	var resp struct {
		Result struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil {
		t.Fatalf("tools/list body: %v: %s", err, body)
	}
	out := map[string]json.RawMessage{}
	for _, tool := range resp.Result.Tools {
		out[tool.Name] = tool.InputSchema
	}
	if len(out) != len(demo.ToolNames) {
		t.Fatalf("got %d tools, want %d", len(out), len(demo.ToolNames))
	}
	return out
}

// The demo's schemas are naive: no additionalProperties anywhere.
func TestDemoSchemas(t *testing.T) {
	tools := demoTools(t)
	valid := map[string]string{
		demo.ToolFindCustomers:           `{"query":"smith"}`,
		demo.ToolGetBooking:              `{"booking_id":"B-1001"}`,
		demo.ToolListTechnicians:         `{}`,
		demo.ToolCreateBooking:           `{"customer_id":"C-101","technician_id":"T-11","start":"2026-08-10T09:00:00+01:00","notes":"Gate code 4411"}`,
		demo.ToolUpdateBooking:           `{"booking_id":"B-1001","status":"confirmed"}`,
		demo.ToolSendBookingConfirmation: `{"booking_id":"B-1001"}`,
		demo.ToolPageTechnician:          `{"technician_id":"T-11","message":"Call the office"}`,
		demo.ToolMuteBookingAlerts:       `{"booking_id":"B-1001","minutes":30}`,
		demo.ToolCancelBooking:           `{"booking_id":"B-1001"}`,
	}
	for _, name := range demo.ToolNames {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(string(tools[name]), "additionalProperties") {
				t.Fatalf("fixture changed: %s now has additionalProperties", name)
			}
			s, err := Compile(tools[name])
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(s.Properties(), "tenant") {
				t.Errorf("Properties = %v", s.Properties())
			}
			r := s.Check([]byte(valid[name]), Options{Write: true})
			if len(r.Problems) != 0 || r.Arguments != nil {
				t.Errorf("valid call: %+v", r)
			}
			// An argument the upstream would silently ignore is refused,
			// naming the accepted ones.
			extra := strings.TrimSuffix(valid[name], "}")
			if extra != "{" {
				extra += ","
			}
			extra += `"dry_run":true}`
			r = s.Check([]byte(extra), Options{Write: true})
			if len(r.Problems) != 1 || r.Problems[0].Code != CodeUnknownArgument || r.Problems[0].Argument != "dry_run" ||
				!slices.Equal(r.Problems[0].Allowed, s.Properties()) {
				t.Errorf("extra argument: %+v", r.Problems)
			}
		})
	}

	mute, _ := Compile(tools[demo.ToolMuteBookingAlerts])
	r := mute.Check([]byte(`{"booking_id":"B-1001","minutes":"15"}`), Options{Write: true})
	if len(r.Problems) != 0 || string(r.Arguments) != `{"booking_id":"B-1001","minutes":15}` {
		t.Errorf("mute with \"15\": %+v %s", r, r.Arguments)
	}
	r = mute.Check([]byte(`{"booking_id":"B-1001","minutes":0}`), Options{Write: true})
	if len(r.Problems) != 1 || r.Problems[0].Message != `Argument "minutes" must be at least 1; got 0.` {
		t.Errorf("mute 0: %+v", r.Problems)
	}
	r = mute.Check([]byte(`{"booking_id":"B-1001"}`), Options{Write: true})
	if len(r.Problems) != 1 || r.Problems[0].Code != CodeMissingArgument || r.Problems[0].Argument != "minutes" {
		t.Errorf("mute without minutes: %+v", r.Problems)
	}

	// update_booking is a write: "Confirmed" is refused with a hint, not
	// mapped to "confirmed".
	update, _ := Compile(tools[demo.ToolUpdateBooking])
	r = update.Check([]byte(`{"booking_id":"B-1001","status":"Confirmed"}`), Options{Write: true})
	if len(r.Problems) != 1 || r.Problems[0].Code != CodeInvalidValue || r.Arguments != nil ||
		!strings.Contains(r.Problems[0].Message, `Did you mean "confirmed"?`) {
		t.Errorf("update with a synonym: %+v", r)
	}
}
