package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/oidctest"
	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
	"github.com/mcpgate/mcpgate/internal/poll"
	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store/redistest"
)

// Answers the identity tests look for.
const (
	toolError    = `"isError":true`
	authRPCError = `"code":-32030`
)

func randomGatewayToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return tokens.Prefix + base64.RawURLEncoding.EncodeToString(b)
}

// TestIdentityGatewayTokens: gateway-issued MCP tokens at the MCP route,
// through the proxy and through Envoy + ext_proc, with the real OpenID
// provider trusted beside them. A valid token reaches the demo upstream,
// which acts in the token's tenant (from mcpgate's assertion); every other
// credential is 401 with the challenge and reaches nothing.
func TestIdentityGatewayTokens(t *testing.T) {
	e := startIdentityEnv(t, idOptions{provider: true})
	alice, _ := e.mint(t, "acme", "alice", nil, "")
	gina, _ := e.mint(t, "globex", "gina", nil, "")

	t.Run("valid token: the upstream acts in the token's tenant", func(t *testing.T) {
		for _, c := range []struct{ token, tenant, subject, own, other string }{
			{alice, "acme", "alice", "C-101", "C-201"},
			{gina, "globex", "gina", "C-201", "C-101"},
		} {
			mark, calls := e.rec.count(), e.demo.Calls("find_customers")
			e.both(t, "POST", "", bearer(c.token, "tools/call", "find_customers"), call("1", "find_customers", `{"query":""}`),
				want{status: 200, www: "-", contains: []string{c.own}, absent: []string{c.other, toolError}})
			seen := e.rec.since(mark)
			if len(seen) != 2 || e.demo.Calls("find_customers") != calls+2 {
				t.Fatalf("%s: %d requests reached the upstream, %d tool runs; want 2", c.subject, len(seen), e.demo.Calls("find_customers")-calls)
			}
			for _, h := range seen {
				id := e.identity(t, h)
				if id.Tenant != c.tenant || id.Subject != c.subject || id.CredentialKind != "gateway_token" || !strings.HasPrefix(id.Connection, tokens.IDPrefix) {
					t.Errorf("%s: the upstream was told %+v", c.subject, id)
				}
				if h.Get("Authorization") != "" || h.Get("Cookie") != "" {
					t.Errorf("%s: the client's credential reached the upstream", c.subject)
				}
			}
		}
	})

	for _, v := range e.vias() {
		for _, version := range []string{"2026-07-28", "2025-11-25"} {
			t.Run("SDK client "+v.name+" "+version, func(t *testing.T) {
				cs := connectSDK(t, v.base+"/mcp", alice, version)
				if names := toolNames(t, cs); len(names) != 12 {
					t.Errorf("alice lists %q, want every tool and the gateway's three", names)
				}
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_booking", Arguments: map[string]any{"booking_id": "B-1001"}})
				if err != nil || res.IsError {
					t.Fatalf("alice get_booking: %v %+v", err, res)
				}
				gs := connectSDK(t, v.base+"/mcp", gina, version)
				// gina writes but may not notify, page, mute or cancel:
				// list_recent_changes, no confirm_action.
				want := []string{"create_booking", "find_customers", "get_booking", "list_recent_changes", "list_technicians", "update_booking"}
				if names := toolNames(t, gs); !slices.Equal(names, want) {
					t.Errorf("gina lists %q, want %q", names, want)
				}
				calls := e.demo.Calls("cancel_booking")
				res, err = gs.CallTool(context.Background(), &sdk.CallToolParams{Name: "cancel_booking", Arguments: map[string]any{"booking_id": "B-2001"}})
				if err != nil || !res.IsError {
					t.Fatalf("gina cancel_booking must be a tool error: %v %+v", err, res)
				}
				if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), `"missing_rights"`) {
					t.Errorf("gina cancel_booking: %s", b)
				}
				if e.demo.Calls("cancel_booking") != calls {
					t.Error("a refused cancel_booking reached the upstream")
				}
			})
		}
	}

	cookieOnly := bearer("", "tools/call", "find_customers")
	cookieOnly.Set("Cookie", "mcpgate_token="+alice+"; access_token="+alice)
	foreignOrigin := bearer(alice, "tools/call", "find_customers")
	foreignOrigin.Set("Origin", "https://evil.example")
	refused := []struct {
		name  string
		query string
		hdr   http.Header
		w     want
	}{
		{name: "missing token", hdr: bearer("", "tools/call", "find_customers"),
			w: want{status: 401, www: missingChallenge, contains: []string{authRPCError, `"code":"missing_token"`}}},
		{name: "garbled gateway token", hdr: bearer(tokens.Prefix+"not-a-token", "tools/call", "find_customers"),
			w: want{status: 401, www: invalidChallenge("the MCP token is not valid"), contains: []string{authRPCError, `"code":"invalid_token"`}}},
		{name: "unknown gateway token (right prefix and length, random)", hdr: bearer(randomGatewayToken(), "tools/call", "find_customers"),
			w: want{status: 401, www: invalidChallenge("the MCP token is not valid"), contains: []string{authRPCError, `"code":"invalid_token"`}}},
		{name: "API token (sk_live_)", hdr: bearer("sk_live_"+strings.ToLower(rand.Text()), "tools/call", "find_customers"),
			w: want{status: 401, www: invalidChallenge("token is malformed"), contains: []string{authRPCError, `"code":"invalid_token"`}}},
		{name: "API token (ghp_)", hdr: bearer("ghp_"+rand.Text()+"abcd", "tools/call", "find_customers"),
			w: want{status: 401, www: invalidChallenge("token is malformed"), contains: []string{authRPCError, `"code":"invalid_token"`}}},
		{name: "the admin token", hdr: bearer(e.adminToken, "tools/call", "find_customers"),
			w: want{status: 401, www: invalidChallenge("token is malformed"), contains: []string{authRPCError, `"code":"invalid_token"`}}},
		{name: "cookie only", hdr: cookieOnly,
			w: want{status: 401, www: missingChallenge, contains: []string{authRPCError, `"code":"missing_token"`}}},
		{name: "token in the query string", query: "?access_token=" + alice, hdr: bearer("", "tools/call", "find_customers"),
			w: want{status: 401, www: missingChallenge + `, error="invalid_request", error_description="access tokens are accepted in the Authorization header only"`,
				contains: []string{authRPCError, `"code":"invalid_request"`}}},
		{name: "token in the query string beside a valid header", query: "?access_token=" + alice, hdr: bearer(alice, "tools/call", "find_customers"),
			w: want{status: 401, www: missingChallenge + `, error="invalid_request", error_description="access tokens are accepted in the Authorization header only"`,
				contains: []string{`"code":"invalid_request"`}}},
		{name: "foreign Origin with a valid token", hdr: foreignOrigin,
			w: want{status: 403, www: "-", contains: []string{`"code":-32600`}}},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			mark := e.rec.count()
			if c.w.status == 401 {
				c.w.contains = append(c.w.contains, `"id":7`) // the Origin gate answers before the body is read
			}
			e.both(t, "POST", c.query, c.hdr, call("7", "find_customers", `{"query":"a"}`), c.w)
			e.nothingReached(t, mark, c.name)
		})
	}

	t.Run("revoked through the admin API: 401 on the next call", func(t *testing.T) {
		tok, id := e.mint(t, "acme", "alice", []string{"customers:read"}, "")
		e.both(t, "POST", "", bearer(tok, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
		status, _, body := e.adminCall(t, "DELETE", "/v1/tokens/"+id, e.adminToken, nil)
		if status != 200 || !strings.Contains(string(body), `"revoked_at"`) || !strings.Contains(string(body), `"active":false`) {
			t.Fatalf("revoke: %d %s", status, body)
		}
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(tok, "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`),
			want{status: 401, www: invalidChallenge("the MCP token was revoked"), contains: []string{authRPCError, `"code":"invalid_token"`, `"id":2`}})
		e.both(t, "POST", "", bearer(tok, "tools/list", ""), listBody,
			want{status: 401, www: invalidChallenge("the MCP token was revoked"), contains: []string{`"code":"invalid_token"`}})
		e.nothingReached(t, mark, "revoked token")
	})

	// Expired: minted through the admin API with expires_in 1s (the API
	// takes any positive Go duration), used once, then after it expired.
	t.Run("expired", func(t *testing.T) {
		tok, _ := e.mint(t, "acme", "alice", []string{"customers:read"}, "1s")
		minted := time.Now()
		e.both(t, "POST", "", bearer(tok, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
		time.Sleep(time.Until(minted.Add(1100 * time.Millisecond)))
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(tok, "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`),
			want{status: 401, www: invalidChallenge("the MCP token expired"), contains: []string{authRPCError, `"code":"invalid_token"`}})
		e.nothingReached(t, mark, "expired token")
	})
}

// TestIdentityTenantBinding: the tenant comes from the credential. Another
// tenant's handle is not found inside the caller's tenant (the upstream
// resolves it in the asserted tenant); a tenant argument is refused before
// the upstream; a tenant header must name the credential's tenant.
func TestIdentityTenantBinding(t *testing.T) {
	e := startIdentityEnv(t, idOptions{})
	alice, _ := e.mint(t, "acme", "alice", nil, "")
	gina, _ := e.mint(t, "globex", "gina", nil, "")

	t.Run("another tenant's handle is not found", func(t *testing.T) {
		gets, updates := e.demo.Calls("get_booking"), e.demo.Calls("update_booking")
		e.both(t, "POST", "", bearer(gina, "tools/call", "get_booking"), call("1", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{toolError, `not found in tenant \"globex\"`}, absent: []string{"C-101", "Boiler"}})
		e.both(t, "POST", "", bearer(gina, "tools/call", "update_booking"),
			call("2", "update_booking", `{"booking_id":"B-1001","status":"cancelled","notes":"taken over by globex"}`),
			want{status: 200, www: "-", contains: []string{toolError, `not found in tenant \"globex\"`}, absent: []string{"C-101"}})
		// The calls reached the upstream (the handles are the upstream's to
		// resolve) and it refused them in gina's tenant.
		if g, u := e.demo.Calls("get_booking")-gets, e.demo.Calls("update_booking")-updates; g != 2 || u != 2 {
			t.Errorf("upstream tool runs: get_booking %d, update_booking %d; want 2 each", g, u)
		}
		// acme's booking is unchanged.
		e.both(t, "POST", "", bearer(alice, "tools/call", "get_booking"), call("3", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{`B-1001`, `scheduled`, `Boiler makes a knocking noise at night.`}, absent: []string{toolError, "taken over", "cancelled"}})
	})

	t.Run("tenant argument", func(t *testing.T) {
		for i, args := range []string{`{"query":"a","tenant":"acme"}`, `{"query":"a","tenant":"globex"}`, `{"query":"a","Workspace_ID":"globex"}`} {
			mark, calls := e.rec.count(), e.demo.Calls("find_customers")
			id := string(rune('1' + i))
			e.both(t, "POST", "", bearer(alice, "tools/call", "find_customers"), call(id, "find_customers", args),
				want{status: 200, www: "-", contains: []string{toolError, `"code":"tenant_argument"`, `"id":` + id}})
			e.nothingReached(t, mark, args)
			if e.demo.Calls("find_customers") != calls {
				t.Errorf("%s: the tool ran upstream", args)
			}
		}
	})

	t.Run("tenant header", func(t *testing.T) {
		for _, c := range []struct{ token, tenant string }{{alice, "globex"}, {gina, "acme"}, {alice, "ACME"}} {
			h := bearer(c.token, "tools/call", "find_customers")
			h.Set(tenantHeaderName, c.tenant)
			mark := e.rec.count()
			e.both(t, "POST", "", h, call("4", "find_customers", `{"query":"a"}`),
				want{status: 403, www: "-", contains: []string{authRPCError, `"code":"tenant_mismatch"`, `"id":4`}})
			e.nothingReached(t, mark, "tenant header "+c.tenant)
		}
		h := bearer(alice, "tools/call", "find_customers")
		h.Set(tenantHeaderName, "acme")
		mark := e.rec.count()
		e.both(t, "POST", "", h, call("5", "find_customers", `{"query":""}`),
			want{status: 200, www: "-", contains: []string{"C-101"}, absent: []string{"C-201", toolError}})
		for _, seen := range e.rec.since(mark) {
			if id := e.identity(t, seen); id.Tenant != "acme" {
				t.Errorf("asserted tenant %q", id.Tenant)
			}
			if seen.Get(tenantHeaderName) != "" {
				t.Errorf("the tenant header reached the upstream")
			}
		}
	})
}

// TestIdentityLiveRights: effective rights are the token's ∩ the person's
// live rights, read from the rights file on every call: a right removed
// between two calls refuses the second (tool error, tool no longer
// listed), a right added live does not widen the token, a deactivated
// person's token is 401.
func TestIdentityLiveRights(t *testing.T) {
	e := startIdentityEnv(t, idOptions{})
	dave, _ := e.mint(t, "acme", "dave", nil, "") // customers:read, technicians:read
	carol, _ := e.mint(t, "acme", "carol", nil, "")
	narrow, _ := e.mint(t, "acme", "alice", []string{"customers:read"}, "")
	live := defaultLiveRights()

	t.Run("a right removed between two calls", func(t *testing.T) {
		e.both(t, "POST", "", bearer(dave, "tools/list", ""), listBody,
			want{status: 200, www: "-", contains: []string{`"list_technicians"`, `"find_customers"`}})
		e.both(t, "POST", "", bearer(dave, "tools/call", "list_technicians"), call("1", "list_technicians", `{}`),
			want{status: 200, www: "-", contains: []string{"T-11"}, absent: []string{toolError}})

		live["acme"]["dave"] = livePerson{true, []string{"customers:read"}}
		e.writeRights(t, live)

		mark := e.rec.count()
		e.both(t, "POST", "", bearer(dave, "tools/call", "list_technicians"), call("2", "list_technicians", `{}`),
			want{status: 200, www: "-", contains: []string{toolError, `"code":"missing_rights"`, `"rights":["technicians:read"]`, `"id":2`}})
		e.nothingReached(t, mark, "refused call")
		// tools/list goes upstream; its answer is filtered.
		e.both(t, "POST", "", bearer(dave, "tools/list", ""), listBody,
			want{status: 200, www: "-", contains: []string{`"find_customers"`}, absent: []string{`"list_technicians"`}})
		e.both(t, "POST", "", bearer(dave, "tools/call", "find_customers"), call("3", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
	})

	t.Run("a right added live does not widen the token", func(t *testing.T) {
		live["acme"]["dave"] = livePerson{true, []string{"customers:read", "technicians:read", "bookings:read"}}
		e.writeRights(t, live)
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(dave, "tools/call", "get_booking"), call("4", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{toolError, `"code":"missing_rights"`, `"rights":["bookings:read"]`}})
		e.both(t, "POST", "", bearer(narrow, "tools/call", "get_booking"), call("5", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{toolError, `"code":"missing_rights"`}})
		e.nothingReached(t, mark, "rights the token lacks")
		// The technicians:read right is back: the token had it all along.
		e.both(t, "POST", "", bearer(dave, "tools/call", "list_technicians"), call("6", "list_technicians", `{}`),
			want{status: 200, www: "-", absent: []string{toolError}})
	})

	t.Run("a broken rights file fails closed", func(t *testing.T) {
		if err := os.WriteFile(e.rightsFile+".tmp", []byte("tenants:\n  acme:\n    alice:\n      rihgts: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(e.rightsFile+".tmp", e.rightsFile); err != nil {
			t.Fatal(err)
		}
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(dave, "tools/call", "find_customers"), call("9", "find_customers", `{"query":"a"}`),
			want{status: 503, www: "-", retry: "5", contains: []string{authRPCError, `"code":"rights_unavailable"`, `"id":9`}})
		e.nothingReached(t, mark, "broken rights file")
		e.writeRights(t, live)
		e.both(t, "POST", "", bearer(dave, "tools/call", "find_customers"), call("10", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
	})

	t.Run("a deactivated person", func(t *testing.T) {
		e.both(t, "POST", "", bearer(carol, "tools/call", "find_customers"), call("7", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
		live["acme"]["carol"] = livePerson{false, []string{"customers:read"}}
		e.writeRights(t, live)
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(carol, "tools/call", "find_customers"), call("8", "find_customers", `{"query":"a"}`),
			want{status: 401, www: invalidChallenge("the person this credential speaks for is not active"),
				contains: []string{authRPCError, `"code":"inactive_subject"`, `"id":8`}})
		e.both(t, "POST", "", bearer(carol, "tools/list", ""), listBody,
			want{status: 401, www: invalidChallenge("the person this credential speaks for is not active"), contains: []string{`"code":"inactive_subject"`}})
		e.nothingReached(t, mark, "deactivated person")
		// Nobody can mint a token for them any more.
		status, _, body := e.adminCall(t, "POST", "/v1/tokens", e.adminToken, map[string]any{"tenant": "acme", "subject": "carol"})
		if status != http.StatusForbidden || !strings.Contains(string(body), `"inactive"`) {
			t.Errorf("minting for a deactivated person: %d %s", status, body)
		}
	})
}

// TestIdentityRightsSourceDown: with an HTTP rights source that stops
// answering, every call fails closed: 503 with Retry-After, nothing
// forwarded.
func TestIdentityRightsSourceDown(t *testing.T) {
	rightsSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("tenant") != "acme" || r.URL.Query().Get("subject") != "alice" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"active": true, "rights": allDemoRights})
	}))
	e := startIdentityEnv(t, idOptions{rightsURL: rightsSrv.URL + "/rights"})
	alice, _ := e.mint(t, "acme", "alice", nil, "")
	e.both(t, "POST", "", bearer(alice, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`),
		want{status: 200, www: "-", contains: []string{"C-101"}, absent: []string{toolError}})
	rightsSrv.Close()

	mark := e.rec.count()
	e.both(t, "POST", "", bearer(alice, "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`),
		want{status: 503, www: "-", retry: "5", contains: []string{authRPCError, `"code":"rights_unavailable"`, `"id":2`}})
	e.both(t, "POST", "", bearer(alice, "tools/list", ""), listBody,
		want{status: 503, www: "-", retry: "5", contains: []string{`"code":"rights_unavailable"`}})
	e.nothingReached(t, mark, "rights source down")
	// A bad token is still 401: the credential is checked before the rights.
	e.both(t, "POST", "", bearer(randomGatewayToken(), "tools/list", ""), listBody,
		want{status: 401, www: invalidChallenge("the MCP token is not valid"), contains: []string{`"code":"invalid_token"`}})
	if status, hdr, body := e.adminCall(t, "POST", "/v1/tokens", e.adminToken, map[string]any{"tenant": "acme", "subject": "alice"}); status != 503 || hdr.Get("Retry-After") == "" {
		t.Errorf("minting with the rights source down: %d %v %s", status, hdr, body)
	}
}

// forgedAccessToken is an RFC 9068 access token with the provider's
// issuer, the demo route's audience and good claims, signed by key under a
// kid the provider never published.
func forgedAccessToken(t *testing.T, p *oidctest.Provider, key *ecdsa.PrivateKey, kid string) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	claims := attackClaims(p)
	claims["sub"] = "gateway"
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestIdentityOAuthRights: OAuth access tokens from the real provider
// against live rights. A scope shortfall is 403 insufficient_scope (the
// client can ask for more); a scope the person no longer holds live is a
// tool error; a flood of tokens with unknown key ids is refused without
// flooding the provider.
func TestIdentityOAuthRights(t *testing.T) {
	e := startIdentityEnv(t, idOptions{provider: true, minJWKSRefresh: time.Second})
	p := e.p
	// The gateway client's tokens: subject "gateway", tenant acme, whose
	// live rights are customers:read and technicians:read.
	scoped := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read", "technicians:read")
	withBookings := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read", "bookings:read")

	t.Run("valid token reaches the upstream as the token's person", func(t *testing.T) {
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(withBookings, "tools/call", "find_customers"), call("1", "find_customers", `{"query":""}`),
			want{status: 200, www: "-", contains: []string{"C-101"}, absent: []string{"C-201", toolError}})
		for _, h := range e.rec.since(mark) {
			id := e.identity(t, h)
			if id.Tenant != "acme" || id.Subject != "gateway" || id.CredentialKind != "oauth" || !slices.Equal(id.Rights, []string{"customers:read"}) {
				t.Errorf("the upstream was told %+v", id)
			}
		}
	})
	t.Run("scope lacks the tool's right: 403 insufficient_scope", func(t *testing.T) {
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(scoped, "tools/call", "get_booking"), call("2", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 403, www: missingChallenge + `, error="insufficient_scope", scope="bookings:read", error_description="token scope does not cover this request"`,
				contains: []string{authRPCError, `"code":"insufficient_scope"`, `"rights":["bookings:read"]`, `"id":2`}})
		e.nothingReached(t, mark, "insufficient scope")
	})
	t.Run("scope holds the right, live rights do not: tool error missing_rights", func(t *testing.T) {
		mark := e.rec.count()
		e.both(t, "POST", "", bearer(withBookings, "tools/call", "get_booking"), call("3", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{toolError, `"code":"missing_rights"`, `"rights":["bookings:read"]`, `"id":3`}})
		e.nothingReached(t, mark, "missing live right")
		e.both(t, "POST", "", bearer(withBookings, "tools/list", ""), listBody,
			want{status: 200, www: "-", contains: []string{`"find_customers"`}, absent: []string{`"get_booking"`}})
		// Granted live: the same token now gets the booking.
		live := defaultLiveRights()
		live["acme"]["gateway"] = livePerson{true, []string{"customers:read", "technicians:read", "bookings:read"}}
		e.writeRights(t, live)
		e.both(t, "POST", "", bearer(withBookings, "tools/call", "get_booking"), call("4", "get_booking", `{"booking_id":"B-1001"}`),
			want{status: 200, www: "-", contains: []string{"B-1001"}, absent: []string{toolError}})
	})

	t.Run("unknown key id flood", func(t *testing.T) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		// min_jwks_refresh is 1s here; the gateway fetched the JWKS at
		// start. Past that interval, the first unknown kid may fetch it
		// once more; the rest of the flood must not.
		time.Sleep(time.Until(e.started.Add(1100 * time.Millisecond)))
		before := p.Stats(t).JWKSRequests
		begun := time.Now()
		mark := e.rec.count()
		const n = 25
		for i := range n {
			tok := forgedAccessToken(t, p, key, "kid-"+rand.Text())
			e.both(t, "POST", "", bearer(tok, "tools/call", "find_customers"), call("5", "find_customers", `{"query":"a"}`),
				want{status: 401, www: invalidChallenge("token signing key is unknown"), contains: []string{authRPCError, `"code":"invalid_token"`}})
			if t.Failed() {
				t.Fatalf("forged token %d was not refused as expected", i)
			}
		}
		elapsed := time.Since(begun)
		e.nothingReached(t, mark, "forged tokens")
		fetches := p.Stats(t).JWKSRequests - before
		allowed := 1 + int64(elapsed/time.Second)
		if fetches < 1 || fetches > allowed {
			t.Errorf("%d unknown kids in %s made the gateway fetch the JWKS %d times, want 1 to %d (one per min_jwks_refresh)", 2*n, elapsed, fetches, allowed)
		}
		// Genuine tokens still work.
		e.both(t, "POST", "", bearer(scoped, "tools/call", "find_customers"), call("6", "find_customers", `{"query":"a"}`),
			want{status: 200, www: "-", absent: []string{toolError}})
	})
}

// TestIdentityAdminAPI: the admin API authenticates every call (static
// admin tokens, OIDC tokens for its own audience) and gives roles; MCP
// credentials never pass; the operational endpoints need no token.
func TestIdentityAdminAPI(t *testing.T) {
	pcfg := provider.DefaultConfig()
	pcfg.Clients = append(pcfg.Clients,
		provider.Client{ID: "robot", Secret: "robot-secret"}, // no tenant, no role
		provider.Client{ID: "ops", Secret: "ops-secret", Roles: []string{"mcpgate.platform_admin"}},
	)
	e := startIdentityEnv(t, idOptions{provider: true, providerOpts: []oidctest.Option{oidctest.WithConfig(pcfg)}})
	p := e.p
	mcpToken, _ := e.mint(t, "acme", "alice", nil, "")
	oauthMCP := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, demoResource, "customers:read")
	noRole := p.MustClientCredentials(t, "robot", "robot-secret", adminAudience)
	person := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret, adminAudience)
	ops := p.MustClientCredentials(t, "ops", "ops-secret", adminAudience)

	const realm = `Bearer realm="mcpgate-admin"`
	for _, c := range []struct {
		name, method, path, token string
		status                    int
		www, code                 string
	}{
		{"no token", "GET", "/v1/whoami", "", 401, realm, "missing_token"},
		{"no token: create", "POST", "/v1/tokens", "", 401, realm, "missing_token"},
		{"a gateway MCP token", "GET", "/v1/tokens", mcpToken, 401, realm + `, error="invalid_token"`, "mcp_token_not_accepted"},
		{"an OAuth MCP access token (the route's audience)", "GET", "/v1/whoami", oauthMCP, 401, realm + `, error="invalid_token"`, "invalid_token"},
		{"garbled", "GET", "/v1/whoami", "abc.def.ghi", 401, realm + `, error="invalid_token"`, "invalid_token"},
		{"OIDC token without role or tenant", "GET", "/v1/whoami", noRole, 403, "", "no_role"},
		{"OIDC token without role or tenant: create", "POST", "/v1/tokens", noRole, 403, "", "no_role"},
		{"a person may not read the audit log", "GET", "/v1/audit", person, 403, "", "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body any
			if c.method == "POST" {
				body = map[string]any{"tenant": "acme", "subject": "alice"}
			}
			status, hdr, b := e.adminCall(t, c.method, c.path, c.token, body)
			if status != c.status || hdr.Get("WWW-Authenticate") != c.www || !strings.Contains(string(b), `"code":"`+c.code+`"`) {
				t.Errorf("%s %s: %d %q %s; want %d %q %s", c.method, c.path, status, hdr.Get("WWW-Authenticate"), b, c.status, c.www, c.code)
			}
		})
	}
	t.Run("roles", func(t *testing.T) {
		for _, c := range []struct{ token, want string }{
			{e.adminToken, `"role":"platform_admin"`},
			{ops, `"role":"platform_admin"`},
			{person, `"role":"person","tenant":"acme","subject":"gateway"`},
		} {
			if status, _, b := e.adminCall(t, "GET", "/v1/whoami", c.token, nil); status != 200 || !strings.Contains(string(b), c.want) {
				t.Errorf("whoami: %d %s, want %s", status, b, c.want)
			}
		}
	})
	t.Run("nothing was created by refused calls", func(t *testing.T) {
		status, _, b := e.adminCall(t, "GET", "/v1/tokens", e.adminToken, nil)
		if status != 200 || strings.Count(string(b), `"id":"tok_`) != 1 {
			t.Errorf("tokens: %d %s", status, b)
		}
	})
	t.Run("operational endpoints need no token", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz", "/metrics", assertion.JWKSPath} {
			if status, _, b := e.adminCall(t, "GET", path, "", nil); status != 200 {
				t.Errorf("%s: %d %.200s", path, status, b)
			}
		}
	})
}

// TestIdentityAssertion: the demo upstream cannot be reached around the
// gateway (no assertion, a foreign-signed one, one for another audience:
// 401), and an assertion a client sends through the gateway never reaches
// it: the gateway replaces it with its own.
func TestIdentityAssertion(t *testing.T) {
	e := startIdentityEnv(t, idOptions{})
	alice, _ := e.mint(t, "acme", "alice", nil, "")

	foreignKeys, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(ks *assertion.KeySet, id assertion.Identity, aud string) string {
		s, err := assertion.NewSigner(ks, assertion.SignerOptions{Issuer: e.cfg.Assertion.Issuer})
		if err != nil {
			t.Fatal(err)
		}
		tok, err := s.Sign(id, aud)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	gina := assertion.Identity{Tenant: "globex", Subject: "gina", Rights: allDemoRights, Connection: "tok_00000000000000000000000000000000", CredentialKind: "gateway_token"}
	foreign := sign(foreignKeys, gina, upstreamAudience)
	otherAudience := sign(e.keys, gina, "another-upstream")
	stolen := sign(e.keys, gina, upstreamAudience) // the gateway's own key, as if leaked

	t.Run("directly at the upstream", func(t *testing.T) {
		for _, c := range []struct{ name, assertion, reason string }{
			{"no assertion", "", "missing"},
			{"foreign-signed assertion", foreign, "unknown_key"},
			{"assertion for another upstream", otherAudience, "wrong_audience"},
			{"garbled assertion", "not.a.jws", "malformed"},
		} {
			h := bearer(alice, "tools/call", "find_customers") // a client's token means nothing to the upstream
			if c.assertion != "" {
				h.Set(assertion.Header, c.assertion)
			}
			calls := e.demo.Calls("find_customers")
			a, _ := exchange(t, "POST", e.upstream, h, call("1", "find_customers", `{"query":""}`))
			want{status: 401, www: "", contains: []string{`"code":-32001`, `"reason":"` + c.reason + `"`}, absent: []string{"C-101", "C-201"}}.check(t, c.name, a)
			if e.demo.Calls("find_customers") != calls {
				t.Errorf("%s: the tool ran", c.name)
			}
		}
		// The stolen key works directly: that is what key rotation is for.
		h := bearer("", "tools/call", "find_customers")
		h.Set(assertion.Header, stolen)
		a, _ := exchange(t, "POST", e.upstream, h, call("1", "find_customers", `{"query":""}`))
		want{status: 200, contains: []string{"C-201"}, absent: []string{"C-101"}}.check(t, "stolen key", a)
	})

	t.Run("a client-sent assertion is replaced", func(t *testing.T) {
		h := bearer(alice, "tools/call", "find_customers")
		h.Set(assertion.Header, stolen)
		mark := e.rec.count()
		e.both(t, "POST", "", h, call("2", "find_customers", `{"query":""}`),
			want{status: 200, www: "-", contains: []string{"C-101"}, absent: []string{"C-201", toolError}})
		seen := e.rec.since(mark)
		if len(seen) != 2 {
			t.Fatalf("%d requests reached the upstream, want 2", len(seen))
		}
		for _, s := range seen {
			if s.Get(assertion.Header) == stolen {
				t.Error("the client's assertion reached the upstream")
			}
			if id := e.identity(t, s); id.Tenant != "acme" || id.Subject != "alice" {
				t.Errorf("the upstream was told %+v", id)
			}
		}
		// Sent twice, in another case: still replaced by exactly one.
		h = bearer(alice, "tools/call", "find_customers")
		h["Mcpgate-Assertion"] = []string{stolen, foreign}
		h["MCPGATE-ASSERTION"] = []string{stolen}
		mark = e.rec.count()
		e.both(t, "POST", "", h, call("4", "find_customers", `{"query":""}`),
			want{status: 200, www: "-", contains: []string{"C-101"}, absent: []string{"C-201", toolError}})
		for _, s := range e.rec.since(mark) {
			if id := e.identity(t, s); id.Tenant != "acme" || id.Subject != "alice" {
				t.Errorf("the upstream was told %+v", id)
			}
		}
		// Without a credential the client's assertion gets it nowhere.
		h = bearer("", "tools/call", "find_customers")
		h.Set(assertion.Header, stolen)
		mark = e.rec.count()
		// (This environment takes gateway tokens only: the plain Bearer
		// challenge, no protected resource metadata.)
		e.both(t, "POST", "", h, call("3", "find_customers", `{"query":""}`),
			want{status: 401, www: "Bearer", contains: []string{`"code":"missing_token"`}})
		e.nothingReached(t, mark, "assertion without a credential")
	})
}

// old25 returns request headers of revision 2025-11-25 with a token and a
// session id (either may be empty).
func old25(token, session string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		h.Set("Mcp-Session-Id", session)
		h.Set("MCP-Protocol-Version", "2025-11-25")
	}
	return h
}

// TestIdentitySessionBinding: an older revision's session id is bound to
// the principal that opened it: another principal presenting it gets 404
// (as for an unknown session) and the upstream gets nothing; its owner
// goes on.
func TestIdentitySessionBinding(t *testing.T) {
	e := startIdentityEnv(t, idOptions{})
	alice, _ := e.mint(t, "acme", "alice", nil, "")
	gina, _ := e.mint(t, "globex", "gina", nil, "")
	aliceNarrow, _ := e.mint(t, "acme", "alice", []string{"customers:read"}, "") // same person, another connection

	initialize := []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
	initialized := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	list := []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	getBooking := []byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_booking","arguments":{"booking_id":"B-1001"}}}`)
	findCustomers := []byte(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"find_customers","arguments":{"query":""}}}`)

	got := map[string][]idAnswer{}
	for _, v := range e.vias() {
		t.Run(v.name, func(t *testing.T) {
			a, hdr := exchange(t, "POST", v.base+"/mcp", old25(alice, ""), initialize)
			sid := hdr.Get("Mcp-Session-Id")
			if a.Status != 200 || sid == "" || !strings.Contains(a.Body, `"protocolVersion":"2025-11-25"`) {
				t.Fatalf("initialize: %+v, session %q", a, sid)
			}
			if a, _ := exchange(t, "POST", v.base+"/mcp", old25(alice, sid), initialized); a.Status != 202 {
				t.Fatalf("notifications/initialized: %+v", a)
			}
			a, _ = exchange(t, "POST", v.base+"/mcp", old25(alice, sid), list)
			want{status: 200, www: "-", contains: []string{`"get_booking"`}}.check(t, "alice tools/list", a)

			mark := e.rec.count()
			for _, c := range []struct {
				name, method, token string
				body                []byte
			}{
				{"gina tools/list", "POST", gina, list},
				{"gina tools/call", "POST", gina, getBooking},
				{"gina GET stream", "GET", gina, nil},
				{"gina DELETE", "DELETE", gina, nil},
				{"alice's other token tools/call", "POST", aliceNarrow, findCustomers},
			} {
				h := old25(c.token, sid)
				if c.method == "GET" {
					h.Set("Accept", "text/event-stream")
				}
				a, _ := exchange(t, c.method, v.base+"/mcp", h, c.body)
				w := want{status: 404, www: "-", contains: []string{`"code":-32600`, "Session not found"}}
				w.check(t, c.name, a)
				got[c.name] = append(got[c.name], a)
			}
			e.nothingReached(t, mark, "another principal's session")

			// The owner goes on in the same session.
			a, _ = exchange(t, "POST", v.base+"/mcp", old25(alice, sid), getBooking)
			want{status: 200, www: "-", contains: []string{"B-1001", "Boiler"}, absent: []string{toolError}}.check(t, "alice tools/call", a)
			// Without a credential: 401 before the session is looked at.
			a, _ = exchange(t, "POST", v.base+"/mcp", old25("", sid), list)
			// (Gateway tokens only: the plain Bearer challenge.)
			want{status: 401, www: "Bearer", contains: []string{`"missing_token"`}}.check(t, "no token", a)
			// Alice ends the session; then it is unknown to her too.
			if a, _ := exchange(t, "DELETE", v.base+"/mcp", old25(alice, sid), nil); a.Status/100 != 2 {
				t.Errorf("alice DELETE: %+v", a)
			}
			a, _ = exchange(t, "POST", v.base+"/mcp", old25(alice, sid), list)
			want{status: 404, www: "-"}.check(t, "after DELETE", a)
		})
	}
	for name, as := range got {
		if len(as) == 2 && as[0] != as[1] {
			t.Errorf("%s: proxy and ext_proc differ:\nproxy:    %+v\next_proc: %+v", name, as[0], as[1])
		}
	}
}

// TestIdentityStoreDown: with the Redis store (a real redis-server) gone,
// /readyz reports not ready and gateway tokens cannot be checked: 503
// with Retry-After, nothing forwarded.
func TestIdentityStoreDown(t *testing.T) {
	rs := redistest.Start(t)
	e := startIdentityEnv(t, idOptions{redisURL: rs.URL})
	alice, _ := e.mint(t, "acme", "alice", nil, "")
	if status, _, b := e.adminCall(t, "GET", "/readyz", "", nil); status != 200 {
		t.Fatalf("/readyz with the store up: %d %s", status, b)
	}
	e.both(t, "POST", "", bearer(alice, "tools/call", "find_customers"), call("1", "find_customers", `{"query":"a"}`),
		want{status: 200, www: "-", absent: []string{toolError}})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = rs.Client(t).ShutdownNoSave(ctx).Err() // the connection ends with the server
	cancel()
	poll.Until(t, 10*time.Second, "/readyz reports the store down", func() bool {
		status, _, b := e.adminCall(t, "GET", "/readyz", "", nil)
		return status == 503 && strings.Contains(string(b), "state store")
	})

	mark := e.rec.count()
	e.both(t, "POST", "", bearer(alice, "tools/call", "find_customers"), call("2", "find_customers", `{"query":"a"}`),
		want{status: 503, www: "-", retry: "5", contains: []string{authRPCError, `"code":"auth_unavailable"`, `"id":2`}})
	e.nothingReached(t, mark, "store down")
	if status, _, _ := e.adminCall(t, "GET", "/healthz", "", nil); status != 200 {
		t.Errorf("/healthz with the store down: %d", status)
	}
}
