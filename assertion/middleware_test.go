package assertion

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMiddleware(t *testing.T) {
	clk := newClock()
	s := mustSigner(t, mustKeySet(t, ""), clk.Now)
	v := staticVerifier(t, s.JWKS(), clk.Now)

	var seen *Identity
	var seenHeader string
	upstream := v.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := FromContext(r.Context())
		if !ok {
			t.Error("no identity in the context")
		}
		seen, seenHeader = id, r.Header.Get(Header)
		_, _ = io.WriteString(w, "ok")
	}))
	good, _ := s.Sign(testIdentity(), testAudience)
	expired, _ := s.Sign(testIdentity(), testAudience)
	other, _ := s.Sign(testIdentity(), "billing")

	call := func(headers ...string) *http.Response {
		t.Helper()
		req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		for _, h := range headers {
			req.Header.Add(Header, h)
		}
		rec := httptest.NewRecorder()
		upstream.ServeHTTP(rec, req)
		return rec.Result()
	}

	resp := call(" " + good + " ")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("valid assertion: status %d", resp.StatusCode)
	}
	if seen == nil || seen.Tenant != "acme" || seen.Subject != "user-42" || !slices.Equal(seen.Rights, []string{"crm.read", "crm.write"}) || !seen.HasRight("crm.write") || seen.HasRight("crm.admin") {
		t.Fatalf("identity in context: %+v", seen)
	}
	if seenHeader != "" {
		t.Fatal("the assertion header reached the handler")
	}

	clk.Add(time.Hour)
	for _, c := range []struct {
		name    string
		headers []string
		want    Reason
		token   string
	}{
		{"no header", nil, ReasonMissing, ""},
		{"empty header", []string{""}, ReasonMissing, ""},
		{"garbage", []string{"Bearer abc.def"}, ReasonMalformed, "abc.def"},
		{"two headers", []string{good, good}, ReasonMalformed, good},
		{"expired", []string{expired}, ReasonExpired, expired},
		{"other upstream, expired", []string{other}, ReasonWrongAudience, other},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen = nil
			resp := call(c.headers...)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
			if seen != nil {
				t.Fatal("handler ran")
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			raw, _ := io.ReadAll(resp.Body)
			var body struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
					Data    struct {
						Reason Reason `json:"reason"`
					} `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("body %s: %v", raw, err)
			}
			if body.JSONRPC != "2.0" || string(body.ID) != "null" || body.Error.Code != -32001 {
				t.Fatalf("body %s", raw)
			}
			if body.Error.Data.Reason != c.want || !strings.Contains(body.Error.Message, string(c.want)) {
				t.Fatalf("body %s: want reason %s", raw, c.want)
			}
			if c.token != "" && strings.Contains(string(raw), c.token) {
				t.Fatalf("body echoes the token: %s", raw)
			}
		})
	}

	// Wrong audience (checked at a time the token is valid).
	clk.Add(-time.Hour)
	resp = call(other)
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(raw), `"wrong_audience"`) {
		t.Fatalf("other upstream's assertion: %d %s", resp.StatusCode, raw)
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("identity in an empty context")
	}
	if _, ok := FromContext(NewContext(context.Background(), nil)); ok {
		t.Fatal("nil identity reported as present")
	}
	id := &Identity{Tenant: "t"}
	got, ok := FromContext(NewContext(context.Background(), id))
	if !ok || got != id {
		t.Fatal("identity lost")
	}
}

func TestJWKSHandler(t *testing.T) {
	ks := mustKeySet(t, AlgES256)
	s := mustSigner(t, ks, nil)
	h := s.JWKSHandler()

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, JWKSPath, nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/jwk-set+json" {
		t.Fatalf("GET: %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if rec.Body.String() != string(ks.PublicJWKS()) {
		t.Fatalf("body %s", rec.Body)
	}
	if strings.Contains(rec.Body.String(), `"d"`) {
		t.Fatal("private key served")
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, JWKSPath, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST: %d", rec.Code)
	}

	// What it serves is what a verifier reads.
	srv := httptest.NewServer(h)
	defer srv.Close()
	v, _ := NewVerifier(VerifierOptions{Issuer: testIssuer, Audience: testAudience, JWKSURL: srv.URL + JWKSPath})
	tok, _ := s.Sign(testIdentity(), testAudience)
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
}
