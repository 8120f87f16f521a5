package gateway_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// gateReq is a tools/call of get_booking (id 7) with the 2026-07-28
// headers, then kv added (repeats kept).
func gateReq(kv ...string) *gateway.Request {
	h := mcp.Header{"content-type": {"application/json"}, "authorization": {"Bearer good-bookings:read"}}
	for i, k := range callHeaders("get_booking") {
		if i%2 == 0 {
			h.Set(k, callHeaders("get_booking")[i+1])
		}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Header: h, Body: []byte(callBody("7", "get_booking"))}
}

// TestSingleValuedHeaders: a header field the gateway binds or compares on
// arrives once, with one value; a repeated field, a value joined with ","
// (as Envoy joins its inline headers and Node.js most), or an underscore
// spelling of it is refused with 400 for the body's id, and nothing is
// forwarded.
func TestSingleValuedHeaders(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{TenantHeader: "x-tenant", StripHeaders: []string{"x-tenant"}})...)
	type want struct {
		code int    // JSON-RPC error code; 0: not refused by the gate
		part string // substring of the message
	}
	for name, tt := range map[string]struct {
		r    *gateway.Request
		want want
	}{
		"two Mcp-Session-Id":                  {gateReq("mcp-session-id", "mine", "mcp-session-id", "theirs"), want{-32600, "Mcp-Session-Id header may appear only once"}},
		"Mcp-Session-Id joined":               {gateReq("mcp-session-id", "mine, theirs"), want{-32600, "Mcp-Session-Id header holds more than one value"}},
		"Mcp-Session-Id joined without space": {gateReq("mcp-session-id", "mine,theirs"), want{-32600, "more than one value"}},
		"two MCP-Protocol-Version":            {gateReq("mcp-protocol-version", "2026-07-28"), want{-32020, "MCP-Protocol-Version header may appear only once"}},
		"MCP-Protocol-Version joined":         {gateReq(), want{-32020, "MCP-Protocol-Version header holds more than one value"}},
		"two Mcp-Method":                      {gateReq("mcp-method", "tools/call"), want{-32020, "Mcp-Method header may appear only once"}},
		"two Mcp-Name, equal":                 {gateReq("mcp-name", "get_booking"), want{-32020, "Mcp-Name header may appear only once"}},
		"two Mcp-Param fields":                {gateReq("mcp-param-booking", "B-1", "mcp-param-booking", "B-2"), want{-32020, "may appear only once"}},
		"two Authorization":                   {gateReq("authorization", "Bearer other"), want{-32600, "Authorization header may appear only once"}},
		"Authorization joined":                {gateReq(), want{-32600, "Authorization header holds more than one value"}},
		"two tenant headers":                  {gateReq("x-tenant", "acme", "x-tenant", "globex"), want{-32600, "x-tenant header must be sent once"}},
		"tenant header joined":                {gateReq("x-tenant", "acme,globex"), want{-32600, "x-tenant header must be sent once"}},
		"two Origin":                          {gateReq("origin", "http://localhost", "origin", "https://evil.example"), want{-32600, "Origin header may appear only once"}},
		"Origin joined":                       {gateReq("origin", "http://localhost,https://evil.example"), want{-32600, "Origin header holds more than one value"}},
		"underscore session id":               {gateReq("mcp_session_id", "theirs"), want{-32600, `"mcp_session_id" is read as "mcp-session-id"`}},
		"underscore Mcp-Name":                 {gateReq("mcp_name", "other"), want{-32600, "is read as"}},
		"underscore Mcp-Param":                {gateReq("mcp_param_booking", "B-2"), want{-32600, "is read as"}},
		"underscore tenant header":            {gateReq("x_tenant", "globex"), want{-32600, "is read as"}},
		"underscore Authorization":            {gateReq("Authorization_", "x", "authorization_", "y"), want{0, ""}},
	} {
		t.Run(name, func(t *testing.T) {
			r := tt.r
			if name == "Authorization joined" {
				r.Header.Set("authorization", "Bearer good-bookings:read,Bearer other")
			}
			if name == "MCP-Protocol-Version joined" {
				r.Header.Set("mcp-protocol-version", "2026-07-28,2025-06-18")
			}
			_, v := p.HandleRequest(context.Background(), r)
			if tt.want.code == 0 {
				if v.Local != nil && v.Local.Status == 400 {
					t.Fatalf("refused: %s", v.Local.Body)
				}
				return
			}
			if v.Local == nil || v.Local.Status != 400 {
				t.Fatalf("not refused with 400: %+v", v)
			}
			var e struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(v.Local.Body, &e); err != nil {
				t.Fatal(err)
			}
			if string(e.ID) != "7" || e.Error.Code != tt.want.code || !strings.Contains(e.Error.Message, tt.want.part) {
				t.Errorf("answer %s, want id 7, code %d, message with %q", v.Local.Body, tt.want.code, tt.want.part)
			}
		})
	}
}

// TestSingleValuedHeadersAllowed: values that may hold a comma — an
// Mcp-Name naming a resource URI, an Mcp-Param value, an Authorization
// scheme with parameters (forwarded as is without authentication) — pass
// the gate when sent once.
func TestSingleValuedHeadersAllowed(t *testing.T) {
	eng := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	read := `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:///a,b.txt",` + meta2026 + `}}`
	r := &gateway.Request{Transport: gateway.TransportProxy, Method: "POST", Path: "/mcp", Upstream: "demo", Body: []byte(read),
		Header: mcp.Header{"content-type": {"application/json"}, "authorization": {"Bearer good-bookings:read"},
			"mcp-protocol-version": {"2026-07-28"}, "mcp-method": {"resources/read"}, "mcp-name": {"file:///a,b.txt"}}}
	if _, v := eng.HandleRequest(context.Background(), r); v.Local != nil && v.Local.Status == 400 {
		t.Errorf("resource URI with a comma refused: %s", v.Local.Body)
	}
	// A joined Mcp-Name is a value the body does not hold: the header
	// comparison refuses it.
	r2 := gateReq()
	r2.Header.Set("mcp-name", "get_booking, get_booking")
	if _, v := eng.HandleRequest(context.Background(), r2); v.Local == nil || v.Local.Status != 400 || !strings.Contains(string(v.Local.Body), "does not match") {
		t.Errorf("joined Mcp-Name: %+v", v.Local)
	}

	open := gatewaytest.New(t, gatewaytest.WithDecider(&recordingDecider{}))
	r3 := gateReq()
	r3.Header.Set("authorization", `Digest username="a", realm="b", nonce="c"`)
	if _, v := open.HandleRequest(context.Background(), r3); v.Local != nil {
		t.Errorf("Digest credential refused without authentication: %d %s", v.Local.Status, v.Local.Body)
	}
}

// TestGateRefusalIDs: the gate's refusal carries the id of a request body
// (also gzip-encoded), null without one, and no body for a notification.
func TestGateRefusalIDs(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	gz := gateReq("mcp-session-id", "a", "mcp-session-id", "b")
	gz.Header.Set("content-encoding", "gzip")
	gz.Body = gzipBytes(t, gz.Body)
	note := gateReq("mcp-session-id", "a", "mcp-session-id", "b")
	note.Header.Set("mcp-method", "notifications/cancelled")
	note.Header.Del("mcp-name")
	note.Body = []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,` + meta2026 + `}}`)
	get := &gateway.Request{Transport: gateway.TransportProxy, Method: "GET", Path: "/mcp", Upstream: "demo",
		Header: mcp.Header{"authorization": {"Bearer good-bookings:read"}, "mcp-session-id": {"a", "b"}}}
	broken := gateReq("mcp-session-id", "a,b")
	broken.Body = []byte(`{"jsonrpc":`)
	for name, tt := range map[string]struct {
		r    *gateway.Request
		body string // "" for none; else the id member
	}{
		"gzip body":    {gz, `"id":7`},
		"notification": {note, ""},
		"GET":          {get, `"id":null`},
		"broken body":  {broken, `"id":null`},
	} {
		_, v := p.HandleRequest(context.Background(), tt.r)
		if v.Local == nil || v.Local.Status != 400 {
			t.Fatalf("%s: not refused: %+v", name, v)
		}
		if tt.body == "" && v.Local.Body != nil || tt.body != "" && !strings.Contains(string(v.Local.Body), tt.body) {
			t.Errorf("%s: body %s, want %q", name, v.Local.Body, tt.body)
		}
	}
}

// TestClientCopiesOfGatewayHeaders: the fields mcpgate sets on a forwarded
// request replace the client's copies: the assertion is removed (also in
// its underscore spelling), Accept-Encoding overwritten.
func TestClientCopiesOfGatewayHeaders(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{Asserter: &recordingAsserter{}})...)
	_, v := p.HandleRequest(context.Background(), gateReq("mcpgate-assertion", "forged", "mcpgate_assertion", "forged", "accept-encoding", "gzip"))
	if v.Local != nil {
		t.Fatalf("refused: %d %s", v.Local.Status, v.Local.Body)
	}
	for _, k := range []string{gateway.AssertionHeader, "mcpgate_assertion"} {
		if !slices.Contains(v.RemoveHeader, k) {
			t.Errorf("%s not removed: %v", k, v.RemoveHeader)
		}
	}
	if got := v.SetHeader.Values(gateway.AssertionHeader); len(got) != 1 || got[0] == "forged" {
		t.Errorf("assertion %q", got)
	}
	if got := v.SetHeader.Values("accept-encoding"); !slices.Equal(got, []string{"identity"}) {
		t.Errorf("accept-encoding %q", got)
	}
}

// TestOriginEchoCutOnRunes: a refused Origin is repeated cut before a
// multi-byte character, never inside it (the message is valid UTF-8 and
// holds no U+FFFD).
func TestOriginEchoCutOnRunes(t *testing.T) {
	p := gatewaytest.New(t, identityOpts(gateway.Options{})...)
	for _, n := range []int{54, 55, 56, 72} { // "https://" + n letters: é across the cut
		origin := "https://" + strings.Repeat("a", n) + "é" + strings.Repeat("b", 30) + ".example"
		_, v := p.HandleRequest(context.Background(), gateReq("origin", origin))
		if v.Local == nil || v.Local.Status != 403 {
			t.Fatalf("not refused: %+v", v.Local)
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal(v.Local.Body, &e); err != nil {
			t.Fatal(err)
		}
		if !utf8.ValidString(e.Error.Message) || strings.ContainsRune(e.Error.Message, utf8.RuneError) || !strings.Contains(e.Error.Message, "…") {
			t.Errorf("message %q", e.Error.Message)
		}
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzHeaderGate: whatever two header fields a request adds, the gate
// never lets through a request whose bound fields (those the gateway binds
// or compares on, the tenant header, Mcp-Param-*) hold more than one
// field, a comma where one value never holds one, or an underscore
// spelling; and its refusals are JSON-RPC errors for the body's id.
func FuzzHeaderGate(f *testing.F) {
	for _, s := range [][4]string{
		{"mcp-session-id", "a", "mcp-session-id", "b"},
		{"mcp-session-id", "a,b", "x", "y"},
		{"Mcp_Session_Id", "a", "x", "y"},
		{"authorization", "Bearer a,Bearer b", "x", "y"},
		{"authorization", `Digest a="1", b="2"`, "x", "y"},
		{"x-tenant", "acme", "X-Tenant", "globex"},
		{"mcp-param-q", "a,b", "mcp-param-Q", "c"},
		{"mcp-name", "get_booking", "origin", "http://localhost"},
		{"origin", "http://localhost, http://x", "connection", "close"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	eng := gatewaytest.New(f, gatewaytest.WithDecider(&recordingDecider{}), gatewaytest.With(gateway.Options{TenantHeader: "x-tenant"}))
	bound := []string{"origin", "authorization", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "x-tenant"}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		r := gateReq(strings.ToLower(k1), v1, strings.ToLower(k2), v2)
		_, v := eng.HandleRequest(context.Background(), r)
		if v.Local != nil {
			if v.Local.Status == 400 {
				var e struct {
					ID json.RawMessage `json:"id"`
				}
				// null only when the body cannot be read (a repeated or
				// unknown Content-Encoding).
				if err := json.Unmarshal(v.Local.Body, &e); err != nil || string(e.ID) != "7" && (string(e.ID) != "null" || !r.Header.Has("content-encoding")) {
					t.Fatalf("refusal %s", v.Local.Body)
				}
			}
			return
		}
		for k, vs := range r.Header {
			if slices.Contains(bound, k) || strings.HasPrefix(k, "mcp-param-") {
				if len(vs) > 1 {
					t.Fatalf("%s forwarded with %d fields", k, len(vs))
				}
				if k != "mcp-name" && k != "authorization" && !strings.HasPrefix(k, "mcp-param-") && strings.Contains(vs[0], ",") {
					t.Fatalf("%s forwarded with the value %q", k, vs[0])
				}
			}
			if a := strings.ReplaceAll(k, "_", "-"); a != k && (slices.Contains(bound, a) || strings.HasPrefix(a, "mcp-param-")) {
				t.Fatalf("%s forwarded (read as %s)", k, a)
			}
		}
	})
}
