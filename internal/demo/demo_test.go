package demo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	rev20260728 = "2026-07-28"
	rev20251125 = "2025-11-25"
	rev20250618 = "2025-06-18"
)

// recorder is an http.RoundTripper that records what the client sent and
// what came back (headers only).
type recorder struct {
	mu        sync.Mutex
	exchanges []exchange
}

type exchange struct {
	method      string // HTTP method
	header      http.Header
	status      int
	contentType string
	sessionID   string // Mcp-Session-Id of the response
}

func (rec *recorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rec.mu.Lock()
	rec.exchanges = append(rec.exchanges, exchange{
		method:      r.Method,
		header:      r.Header.Clone(),
		status:      resp.StatusCode,
		contentType: resp.Header.Get("Content-Type"),
		sessionID:   resp.Header.Get("Mcp-Session-Id"),
	})
	rec.mu.Unlock()
	return resp, nil
}

// all returns the recorded exchanges.
func (rec *recorder) all() []exchange {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return slices.Clone(rec.exchanges)
}

// start serves s.Handler() at /mcp on an httptest server.
func start(t *testing.T, s *Server) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts.URL + "/mcp"
}

// connect connects an SDK client speaking revision rev.
func connect(t *testing.T, endpoint, rev string) (*mcp.ClientSession, *recorder) {
	t.Helper()
	rec := &recorder{}
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             endpoint,
		HTTPClient:           &http.Client{Transport: rec},
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
	if err != nil {
		t.Fatalf("connect %s: %v", rev, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, rec
}

// call calls a tool and returns its structuredContent as a generic map. It
// fails the test if the result's isError differs from wantErr, and checks
// that the text block holds the same JSON as structuredContent.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, wantErr bool) (map[string]any, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s(%v): %v", tool, args, err)
	}
	var text string
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if res.IsError != wantErr {
		t.Fatalf("%s(%v): isError = %v, want %v; text: %s", tool, args, res.IsError, wantErr, text)
	}
	if wantErr {
		return nil, text
	}
	if len(res.Content) != 1 || text == "" {
		t.Fatalf("%s: want one text block, got %#v", tool, res.Content)
	}
	sc, ok := res.StructuredContent.(map[string]any)
	if !ok {
		t.Fatalf("%s: structuredContent is %T, want an object", tool, res.StructuredContent)
	}
	var fromText map[string]any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		t.Fatalf("%s: text block is not JSON: %v", tool, err)
	}
	a, _ := json.Marshal(sc)
	b, _ := json.Marshal(fromText)
	if string(a) != string(b) {
		t.Fatalf("%s: text block and structuredContent differ:\n%s\n%s", tool, a, b)
	}
	return sc, text
}

// get follows a dotted path of object keys and array indexes ("customers.0.id").
func get(t *testing.T, v any, path string) any {
	t.Helper()
	cur := v
	for part := range strings.SplitSeq(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			var ok bool
			if cur, ok = c[part]; !ok {
				t.Fatalf("path %q: no key %q in %v", path, part, c)
			}
		case []any:
			i := 0
			for _, r := range part {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				t.Fatalf("path %q: index %d out of range (%d)", path, i, len(c))
			}
			cur = c[i]
		default:
			t.Fatalf("path %q: cannot descend into %T at %q", path, cur, part)
		}
	}
	return cur
}

func wantEq(t *testing.T, v any, path string, want any) {
	t.Helper()
	if got := get(t, v, path); got != want {
		t.Errorf("%s = %#v, want %#v", path, got, want)
	}
}

func TestRevisions(t *testing.T) {
	for _, rev := range []string{rev20260728, rev20251125, rev20250618} {
		t.Run(rev, func(t *testing.T) {
			s := New(Options{})
			cs, rec := connect(t, start(t, s), rev)

			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Fatalf("negotiated %q, want %q", got, rev)
			}
			if got := cs.InitializeResult().ServerInfo; got == nil || got.Name != Implementation.Name {
				t.Errorf("server info = %+v", got)
			}
			if rev == rev20260728 && cs.ID() != "" {
				t.Errorf("2026-07-28 session has id %q, want none", cs.ID())
			}
			if rev != rev20260728 && cs.ID() == "" {
				t.Errorf("%s session has no Mcp-Session-Id", rev)
			}

			checkToolList(t, cs)
			runScenario(t, s, cs)
			checkWire(t, rev, cs.ID(), rec.all())
		})
	}
}

func checkToolList(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schema, err := json.Marshal(tool.InputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(schema, &m); err != nil {
			t.Fatal(err)
		}
		if m["type"] != "object" {
			t.Errorf("%s: schema type %v", tool.Name, m["type"])
		}
		if _, ok := m["additionalProperties"]; ok {
			t.Errorf("%s: schema sets additionalProperties (the demo must accept unknown arguments): %s", tool.Name, schema)
		}
		if _, ok := m["properties"].(map[string]any)["tenant"]; !ok {
			t.Errorf("%s: schema has no tenant property", tool.Name)
		}
		if tool.Description == "" {
			t.Errorf("%s: no description", tool.Name)
		}
	}
	if want := slices.Sorted(slices.Values(ToolNames)); !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

// runScenario calls every tool against fresh seed data and checks results
// and call counts.
func runScenario(t *testing.T, s *Server, cs *mcp.ClientSession) {
	t.Helper()

	// read: find_customers. Default tenant, whole records with secrets.
	r, _ := call(t, cs, ToolFindCustomers, map[string]any{"query": "grace"}, false)
	wantEq(t, r, "tenant", TenantAcme)
	if n := len(get(t, r, "customers").([]any)); n != 1 {
		t.Fatalf("find_customers grace: %d customers", n)
	}
	wantEq(t, r, "customers.0.id", "C-102")
	wantEq(t, r, "customers.0.portal_password", "grace-portal-K9s1")

	// Unknown arguments are ignored ("limit" does not limit) and the tenant
	// argument chooses the tenant.
	r, _ = call(t, cs, ToolFindCustomers, map[string]any{"tenant": TenantGlobex, "limit": 1, "include_deleted": true}, false)
	wantEq(t, r, "tenant", TenantGlobex)
	if n := len(get(t, r, "customers").([]any)); n != 2 {
		t.Fatalf("find_customers globex with limit 1: %d customers, want 2 (limit ignored)", n)
	}
	wantEq(t, r, "customers.0.id", "C-201")

	// read: get_booking. Injected note verbatim, secrets embedded.
	r, text := call(t, cs, ToolGetBooking, map[string]any{"booking_id": InjectedBookingID}, false)
	if !strings.Contains(get(t, r, "notes").(string), InjectedInstruction) || !strings.Contains(text, InjectedInstruction) {
		t.Errorf("get_booking %s: injected note not echoed: %v", InjectedBookingID, r["notes"])
	}
	wantEq(t, r, "internal_cost", 95.5)
	wantEq(t, r, "customer.portal_password", "grace-portal-K9s1")
	wantEq(t, r, "technician.home_address", "19 Mill Lane, York YO1 7HH")

	// A globex booking is not found in the default tenant, but the tenant
	// argument reaches it.
	_, text = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-2001"}, true)
	if !strings.Contains(text, "not found") {
		t.Errorf("get_booking B-2001 in acme: %s", text)
	}
	r, _ = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-2001", "tenant": TenantGlobex}, false)
	wantEq(t, r, "tenant", TenantGlobex)
	wantEq(t, r, "customer.name", "Hank Scorpio")

	// Unknown tenant: tool error.
	_, text = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-1001", "tenant": "initech"}, true)
	if !strings.Contains(text, "unknown tenant") {
		t.Errorf("unknown tenant: %s", text)
	}

	// read: list_technicians.
	r, _ = call(t, cs, ToolListTechnicians, map[string]any{"tenant": TenantGlobex}, false)
	wantEq(t, r, "technicians.0.id", "T-21")
	wantEq(t, r, "technicians.0.home_address", "88 Lakeview Drive, Cypress Creek")
	r, _ = call(t, cs, ToolListTechnicians, nil, false)
	if n := len(get(t, r, "technicians").([]any)); n != 2 {
		t.Errorf("acme technicians: %d", n)
	}

	// silent write: create_booking, twice with the same arguments (no
	// duplicate guard; the unknown idempotency_key is ignored).
	args := map[string]any{"customer_id": "C-101", "technician_id": "T-12", "start": "2026-08-10T09:00:00+01:00",
		"notes": "Fuse box", "idempotency_key": "k1"}
	r, _ = call(t, cs, ToolCreateBooking, args, false)
	wantEq(t, r, "id", "B-1004")
	wantEq(t, r, "status", StatusScheduled)
	wantEq(t, r, "customer.id", "C-101")
	r, _ = call(t, cs, ToolCreateBooking, args, false)
	wantEq(t, r, "id", "B-1005")
	_, text = call(t, cs, ToolCreateBooking, map[string]any{"customer_id": "C-101", "technician_id": "T-12", "start": "tomorrow 9am"}, true)
	if !strings.Contains(text, "RFC 3339") {
		t.Errorf("bad start: %s", text)
	}

	// silent write: update_booking (the unknown "version" is ignored).
	r, _ = call(t, cs, ToolUpdateBooking, map[string]any{"booking_id": "B-1004", "status": StatusCompleted, "notes": "Done", "version": 7}, false)
	wantEq(t, r, "status", StatusCompleted)
	wantEq(t, r, "notes", "Done")
	wantEq(t, r, "start", "2026-08-10T09:00:00+01:00")
	r, _ = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-1004"}, false)
	wantEq(t, r, "status", StatusCompleted)

	// notify: send_booking_confirmation quotes the customer's notes.
	r, _ = call(t, cs, ToolSendBookingConfirmation, map[string]any{"booking_id": "B-1001"}, false)
	wantEq(t, r, "to", "ada@acme-customers.example")
	wantEq(t, r, "status", "sent")
	if !strings.Contains(get(t, r, "body").(string), "knocking noise") {
		t.Errorf("confirmation body: %v", r["body"])
	}

	// wake: page_technician in the other tenant.
	r, _ = call(t, cs, ToolPageTechnician, map[string]any{"technician_id": "T-21", "message": "Lair AC down", "tenant": TenantGlobex}, false)
	wantEq(t, r, "delivered_to", "+1 555 0199 021")
	wantEq(t, r, "message", "Lair AC down")

	// alerting: mute_booking_alerts.
	before := time.Now().UTC().Truncate(time.Second)
	r, _ = call(t, cs, ToolMuteBookingAlerts, map[string]any{"booking_id": "B-1003", "minutes": 30}, false)
	until, err := time.Parse(time.RFC3339, get(t, r, "alerts_muted_until").(string))
	if err != nil || until.Before(before.Add(30*time.Minute)) || until.After(time.Now().Add(31*time.Minute)) {
		t.Errorf("alerts_muted_until = %v (%v)", r["alerts_muted_until"], err)
	}
	// A schema violation is refused by the SDK before the handler runs.
	call(t, cs, ToolMuteBookingAlerts, map[string]any{"booking_id": "B-1003", "minutes": "ten"}, true)

	// delete: cancel_booking in the other tenant.
	r, _ = call(t, cs, ToolCancelBooking, map[string]any{"booking_id": "B-2002", "tenant": TenantGlobex}, false)
	wantEq(t, r, "status", StatusCancelled)
	r, _ = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-2002", "tenant": TenantGlobex}, false)
	wantEq(t, r, "status", StatusCancelled)

	want := map[string]int{
		ToolFindCustomers:           2,
		ToolGetBooking:              6,
		ToolListTechnicians:         2,
		ToolCreateBooking:           3,
		ToolUpdateBooking:           1,
		ToolSendBookingConfirmation: 1,
		ToolPageTechnician:          1,
		ToolMuteBookingAlerts:       1, // the schema violation did not run
		ToolCancelBooking:           1,
	}
	for _, tool := range ToolNames {
		if got := s.Calls(tool); got != want[tool] {
			t.Errorf("Calls(%s) = %d, want %d", tool, got, want[tool])
		}
	}
	if got := s.Calls("no_such_tool"); got != 0 {
		t.Errorf("Calls(no_such_tool) = %d", got)
	}

	// Reset: seed data and zero counters.
	s.Reset()
	for _, tool := range ToolNames {
		if got := s.Calls(tool); got != 0 {
			t.Errorf("after Reset, Calls(%s) = %d", tool, got)
		}
	}
	call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-1004"}, true)
	r, _ = call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-2002", "tenant": TenantGlobex}, false)
	wantEq(t, r, "status", StatusScheduled)
	r, _ = call(t, cs, ToolCreateBooking, args, false)
	wantEq(t, r, "id", "B-1004")
}

// checkWire checks the HTTP exchanges of a session.
func checkWire(t *testing.T, rev, sessionID string, exs []exchange) {
	t.Helper()
	var sawCall bool
	for i, ex := range exs {
		method := ex.header.Get("Mcp-Method")
		switch rev {
		case rev20260728:
			// Every POST carries the version and method headers, never a session.
			if ex.method != http.MethodPost {
				t.Errorf("#%d: %s request in a stateless session", i, ex.method)
			}
			if v := ex.header.Get("Mcp-Protocol-Version"); v != rev {
				t.Errorf("#%d %s: Mcp-Protocol-Version %q", i, method, v)
			}
			if method == "" {
				t.Errorf("#%d: no Mcp-Method header", i)
			}
			if ex.header.Get("Mcp-Session-Id") != "" || ex.sessionID != "" {
				t.Errorf("#%d %s: Mcp-Session-Id in a stateless session", i, method)
			}
			if method == "tools/call" {
				sawCall = true
				if ex.header.Get("Mcp-Name") == "" {
					t.Errorf("#%d: tools/call without Mcp-Name", i)
				}
				if ex.status != http.StatusOK || !strings.HasPrefix(ex.contentType, "text/event-stream") {
					t.Errorf("#%d tools/call: %d %q, want 200 text/event-stream", i, ex.status, ex.contentType)
				}
			}
		default: // initialize and sessions
			if i == 0 {
				// initialize: no session yet; the response issues one.
				if ex.header.Get("Mcp-Session-Id") != "" || ex.sessionID != sessionID {
					t.Errorf("initialize: request session %q, response session %q, want %q",
						ex.header.Get("Mcp-Session-Id"), ex.sessionID, sessionID)
				}
				continue
			}
			if got := ex.header.Get("Mcp-Session-Id"); got != sessionID {
				t.Errorf("#%d: Mcp-Session-Id %q, want %q", i, got, sessionID)
			}
			if v := ex.header.Get("Mcp-Protocol-Version"); v != rev {
				t.Errorf("#%d: Mcp-Protocol-Version %q", i, v)
			}
			if method != "" {
				t.Errorf("#%d: Mcp-Method %q sent on %s", i, method, rev)
			}
			if ex.status == http.StatusOK && strings.HasPrefix(ex.contentType, "text/event-stream") {
				sawCall = true
			}
		}
	}
	if !sawCall {
		t.Errorf("no tool call seen on the wire")
	}
}

// TestBothRevisionsAtOnce runs a 2026-07-28 and a 2025-11-25 client against
// the same server concurrently.
func TestBothRevisionsAtOnce(t *testing.T) {
	s := New(Options{})
	endpoint := start(t, s)
	var wg sync.WaitGroup
	const perClient = 20
	for _, rev := range []string{rev20260728, rev20251125, rev20260728, rev20251125} {
		cs, _ := connect(t, endpoint, rev)
		wg.Go(func() {
			for range perClient {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{
					Name:      ToolCreateBooking,
					Arguments: map[string]any{"customer_id": "C-201", "technician_id": "T-21", "start": "2026-09-01T10:00:00-05:00", "tenant": TenantGlobex},
				})
				if err != nil || res.IsError {
					t.Errorf("%s: %v %+v", rev, err, res)
					return
				}
			}
		})
	}
	wg.Wait()
	if got := s.Calls(ToolCreateBooking); got != 4*perClient {
		t.Errorf("Calls = %d, want %d", got, 4*perClient)
	}
	cs, _ := connect(t, endpoint, rev20260728)
	r, _ := call(t, cs, ToolGetBooking, map[string]any{"booking_id": "B-2082", "tenant": TenantGlobex}, false)
	wantEq(t, r, "customer.id", "C-201")
}

// TestDefaultClientPicks20260728 checks that a client without a version
// preference gets 2026-07-28 (server/discover), not the session fallback.
func TestDefaultClientPicks20260728(t *testing.T) {
	s := New(Options{})
	endpoint := start(t, s)
	client := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := cs.InitializeResult().ProtocolVersion; got != rev20260728 {
		t.Errorf("negotiated %q", got)
	}
}

// TestRawHTTP pins the SDK behaviours of the endpoint that mcpgate's
// transport gate must agree with.
func TestRawHTTP(t *testing.T) {
	s := New(Options{})
	endpoint := start(t, s)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}`
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_technicians","arguments":{}, ` + meta + `}}`

	type want struct {
		status      int
		contentType string
		body        string // substring
	}
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		body    string
		want    want
	}{
		{
			name:    "2026 call with all headers",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728, "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"},
			body:    call,
			want:    want{200, "text/event-stream", `"structuredContent"`},
		},
		{
			name:    "2026 call without Mcp-Name",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728, "Mcp-Method": "tools/call"},
			body:    call,
			want:    want{400, "application/json", `-32020`},
		},
		{
			name:    "2026 call with a wrong Mcp-Name",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728, "Mcp-Method": "tools/call", "Mcp-Name": "get_booking"},
			body:    call,
			want:    want{400, "application/json", `-32020`},
		},
		{
			name:    "_meta without MCP-Protocol-Version header goes to the stateless handler",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"},
			body:    call,
			want:    want{400, "application/json", `-32020`},
		},
		{
			name:    "2026 call whose _meta lacks clientCapabilities",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728, "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"},
			body:    `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_technicians","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			want:    want{400, "application/json", `-32602`},
		},
		{
			name:    "2026 unknown method",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728, "Mcp-Method": "bogus/method"},
			body:    `{"jsonrpc":"2.0","id":2,"method":"bogus/method","params":{` + meta + `}}`,
			want:    want{404, "application/json", `-32601`},
		},
		{
			name:    "2026 GET",
			method:  http.MethodGet,
			headers: map[string]string{"Mcp-Protocol-Version": rev20260728},
			want:    want{405, "", ""},
		},
		{
			name:    "non-loopback Host on a loopback listener (SDK DNS-rebinding protection)",
			method:  http.MethodPost,
			headers: map[string]string{"Host": "mcpgate.example.com", "Mcp-Protocol-Version": rev20260728, "Mcp-Method": "tools/call", "Mcp-Name": "list_technicians"},
			body:    call,
			want:    want{403, "text/plain", "invalid Host header"},
		},
		{
			name:    "2025-11-25 request with an unknown session",
			method:  http.MethodPost,
			headers: map[string]string{"Mcp-Protocol-Version": rev20251125, "Mcp-Session-Id": "nope"},
			body:    `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
			want:    want{404, "", "session not found"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, endpoint, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			if h := req.Header.Get("Host"); h != "" {
				req.Host = h
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var sb strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := resp.Body.Read(buf)
				sb.Write(buf[:n])
				if err != nil || strings.Contains(sb.String(), "\n\n") && tc.want.contentType == "text/event-stream" {
					break
				}
			}
			body := sb.String()
			if resp.StatusCode != tc.want.status {
				t.Errorf("status %d, want %d; body %s", resp.StatusCode, tc.want.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.want.contentType) {
				t.Errorf("Content-Type %q, want %q", ct, tc.want.contentType)
			}
			if !strings.Contains(body, tc.want.body) {
				t.Errorf("body %q does not contain %q", body, tc.want.body)
			}
		})
	}
	if got := s.Calls(ToolListTechnicians); got != 1 {
		t.Errorf("Calls(list_technicians) = %d, want 1 (only the well-formed request runs)", got)
	}
}
