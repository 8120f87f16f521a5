package upstreamauth

// These tests run Exchange against an httptest token endpoint that speaks
// RFC 8693 (request parameters, section 2.1; answers, sections 2.2.1 and
// 2.2.2). The e2e module runs it against the e2e OpenID provider too.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	testClientID     = "gateway"
	testClientSecret = "s3cret"
	testAudience     = "upstream-a"
	testResource     = "https://upstream.example.com/mcp"
)

// jwtOf builds an unsigned JWT-shaped token with claims (the exchange never
// verifies subject tokens: the gateway did).
func jwtOf(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	return "eyJhbGciOiJub25lIn0." + base64.RawURLEncoding.EncodeToString(b) + ".c2ln"
}

// userToken is an access token of sub issued at iat.
func userToken(sub string, iat int64, extra ...string) string {
	c := map[string]any{"iss": "https://idp.example", "sub": sub, "scope": "tools:read", "iat": iat, "exp": iat + 300, "jti": fmt.Sprint(iat)}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = extra[i+1]
	}
	return jwtOf(c)
}

// fakeIdP is a token endpoint: it checks the request and answers with
// "x-<sub>-<n>" (the principal of the subject token and a serial number),
// or with what answer returns when it is set.
type fakeIdP struct {
	t        testing.TB
	srv      *httptest.Server
	requests atomic.Int64
	serial   atomic.Int64
	// answer, when set, writes the whole answer.
	answer func(w http.ResponseWriter, r *http.Request)
	// gate, when set, is waited on before answering.
	gate      chan struct{}
	expiresIn int
	mu        sync.Mutex
	lastForm  map[string][]string
}

func newFakeIdP(t testing.TB) *fakeIdP {
	f := &fakeIdP{t: t, expiresIn: 300}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeIdP) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.lastForm = r.PostForm
	f.mu.Unlock()
	if f.answer != nil {
		f.answer(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	id, secret, ok := r.BasicAuth()
	if !ok || id != testClientID || secret != testClientSecret {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	}
	if r.PostForm.Get("grant_type") != GrantTypeTokenExchange || r.PostForm.Get("requested_token_type") != TokenTypeAccessToken {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_request"}`))
		return
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	parts := strings.Split(r.PostForm.Get("subject_token"), ".")
	if len(parts) == 2 && parts[0] == "opaque" {
		claims.Sub = parts[1]
	}
	if len(parts) == 3 {
		b, _ := base64.RawURLEncoding.DecodeString(parts[1])
		_ = json.Unmarshal(b, &claims)
	}
	if claims.Sub == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant","error_description":"subject token unknown"}`))
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token":      fmt.Sprintf("x-%s-%d", claims.Sub, f.serial.Add(1)),
		"issued_token_type": TokenTypeAccessToken,
		"token_type":        "Bearer",
		"expires_in":        f.expiresIn,
	})
}

func (f *fakeIdP) form(name string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastForm[name]
}

// clock is a settable time source.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newTestExchange(t testing.TB, f *fakeIdP, mod ...func(*ExchangeConfig)) (*Exchange, *clock) {
	t.Helper()
	clk := &clock{now: time.Unix(1_800_000_000, 0)}
	cfg := ExchangeConfig{
		TokenURL: f.srv.URL + "/token", ClientID: testClientID, ClientSecret: testClientSecret,
		Audience: testAudience, Resource: testResource, Scopes: []string{"tools:read", "tools:call"},
		Now: clk.Now,
	}
	for _, m := range mod {
		m(&cfg)
	}
	e, err := NewExchange(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e, clk
}

func caller(sub, token string, rights ...string) *Caller {
	return &Caller{Tenant: "acme", Subject: sub, Rights: rights, AccessToken: token}
}

func bearer(t *testing.T, e *Exchange, c *Caller) string {
	t.Helper()
	h, err := e.Header(context.Background(), c)
	if err != nil {
		t.Fatalf("Header: %v", err)
	}
	v := h["authorization"]
	if len(v) != 1 || !strings.HasPrefix(v[0], "Bearer ") {
		t.Fatalf("header = %v", h)
	}
	return strings.TrimPrefix(v[0], "Bearer ")
}

func TestExchangeRequest(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f)
	if e.Kind() != KindTokenExchange {
		t.Errorf("Kind = %q", e.Kind())
	}
	tok := userToken("alice", 1)
	if got := bearer(t, e, caller("alice", tok)); got != "x-alice-1" {
		t.Errorf("token = %q", got)
	}
	for name, want := range map[string]string{
		"grant_type": GrantTypeTokenExchange, "subject_token": tok, "subject_token_type": TokenTypeAccessToken,
		"requested_token_type": TokenTypeAccessToken, "audience": testAudience, "resource": testResource,
		"scope": "tools:read tools:call",
	} {
		if got := f.form(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if got := f.form("client_secret"); got != nil {
		t.Errorf("client_secret sent in the form: client_secret_basic only")
	}
}

func TestExchangeTwoUsersNeverShare(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f)
	a := bearer(t, e, caller("alice", userToken("alice", 1), "read"))
	b := bearer(t, e, caller("bob", userToken("bob", 1), "read"))
	if !strings.HasPrefix(a, "x-alice-") || !strings.HasPrefix(b, "x-bob-") {
		t.Fatalf("alice got %q, bob got %q", a, b)
	}
	// Same gateway principal, but a subject token of another principal (a
	// second issuer with the same subject name): never the cached token.
	other := jwtOf(map[string]any{"iss": "https://other-idp.example", "sub": "alice", "scope": "tools:read"})
	if c := bearer(t, e, caller("alice", other, "read")); c == a {
		t.Errorf("a subject token of another issuer reused alice's exchanged token")
	}
	// Other tenant, other rights: their own tokens.
	ct := caller("alice", userToken("alice", 1), "read")
	ct.Tenant = "globex"
	if got := bearer(t, e, ct); got == a {
		t.Errorf("another tenant reused alice's token")
	}
	if got := bearer(t, e, caller("alice", userToken("alice", 1), "read", "write")); got == a {
		t.Errorf("other rights reused alice's token")
	}
	// A subject token with more scope is another identity.
	if got := bearer(t, e, caller("alice", userToken("alice", 1, "scope", "tools:read tools:admin"), "read")); got == a {
		t.Errorf("a subject token with other scopes reused alice's token")
	}
	if n := f.requests.Load(); n != 6 {
		t.Errorf("requests = %d, want 6", n)
	}
}

func TestExchangeSameUserReuses(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f)
	first := bearer(t, e, caller("alice", userToken("alice", 1), "read", "write"))
	// Rights in another order, and a refreshed subject token of the same
	// principal (new iat, exp, jti): the same exchanged token.
	if got := bearer(t, e, caller("alice", userToken("alice", 1), "write", "read")); got != first {
		t.Errorf("unsorted rights: %q, want %q", got, first)
	}
	if got := bearer(t, e, caller("alice", userToken("alice", 99), "read", "write")); got != first {
		t.Errorf("refreshed subject token: %q, want %q", got, first)
	}
	// An opaque subject token matches only itself.
	o1 := bearer(t, e, caller("alice", "opaque.alice", "read", "write"))
	if o1 == first {
		t.Errorf("opaque token reused the JWT's exchanged token")
	}
	if got := bearer(t, e, caller("alice", "opaque.alice", "read", "write")); got != o1 {
		t.Errorf("same opaque token: %q, want %q", got, o1)
	}
	if got := bearer(t, e, caller("alice", "opaque.alice2", "read", "write")); got == o1 {
		t.Errorf("another opaque token reused %q", o1)
	}
	if n := f.requests.Load(); n != 3 {
		t.Errorf("requests = %d, want 3", n)
	}
}

func TestExchangeExpiry(t *testing.T) {
	f := newFakeIdP(t)
	e, clk := newTestExchange(t, f)
	c := caller("alice", userToken("alice", 1))
	first := bearer(t, e, c)
	// expires_in 300: reused until 30 s before expiry.
	clk.advance(269 * time.Second)
	if got := bearer(t, e, c); got != first {
		t.Errorf("at 269 s: %q, want the cached %q", got, first)
	}
	clk.advance(2 * time.Second)
	second := bearer(t, e, c)
	if second == first {
		t.Errorf("at 271 s: still the old token")
	}
	if n := f.requests.Load(); n != 2 {
		t.Errorf("requests = %d, want 2", n)
	}
	// A token that is already expired, or lives 0 s, serves its request
	// and is not cached.
	f.expiresIn = 0
	clk.advance(time.Hour)
	a := bearer(t, e, c)
	b := bearer(t, e, c)
	if a == b || f.requests.Load() != 4 {
		t.Errorf("expires_in 0 was cached: %q %q after %d requests", a, b, f.requests.Load())
	}
	// Short lifetimes lose a tenth: 10 s is reused for 9 s.
	f.expiresIn = 10
	c2 := caller("bob", userToken("bob", 1))
	x := bearer(t, e, c2)
	clk.advance(8900 * time.Millisecond)
	if bearer(t, e, c2) != x {
		t.Errorf("10 s token not reused at 8.9 s")
	}
	clk.advance(200 * time.Millisecond)
	if bearer(t, e, c2) == x {
		t.Errorf("10 s token reused at 9.1 s")
	}
}

func TestExchangeNoExpiresIn(t *testing.T) {
	f := newFakeIdP(t)
	f.answer = func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"access_token":"t%d","issued_token_type":%q,"token_type":"bearer"}`, f.serial.Add(1), TokenTypeJWT)
	}
	e, clk := newTestExchange(t, f)
	c := caller("alice", userToken("alice", 1))
	first := bearer(t, e, c)
	clk.advance(59 * time.Second)
	if bearer(t, e, c) != first {
		t.Errorf("no expires_in: not reused within a minute")
	}
	clk.advance(2 * time.Second)
	if bearer(t, e, c) == first {
		t.Errorf("no expires_in: reused after a minute")
	}
}

func TestExchangeRefused(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f)
	c := caller("alice", userToken("alice", 1))
	if e.Refused(c) {
		t.Errorf("Refused with nothing cached = true")
	}
	first := bearer(t, e, c)
	if !e.Refused(c) {
		t.Fatalf("Refused = false, want the cached token dropped")
	}
	if e.Refused(c) {
		t.Errorf("second Refused = true: the token was already dropped")
	}
	second := bearer(t, e, c)
	if second == first || f.requests.Load() != 2 {
		t.Errorf("after Refused: %q (first %q), %d requests", second, first, f.requests.Load())
	}
	// Refused for bob leaves alice's token.
	e.Refused(caller("bob", userToken("bob", 1)))
	if bearer(t, e, c) != second {
		t.Errorf("bob's refusal dropped alice's token")
	}
	if e.Refused(nil) || e.Refused(caller("alice", "")) {
		t.Errorf("Refused without a subject token = true")
	}
}

func TestExchangeProviderRefusal(t *testing.T) {
	secretToken := userToken("mallory", 1)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"invalid_grant", 400, `{"error":"invalid_grant","error_description":"subject token revoked"}`, "HTTP 400 invalid_grant: subject token revoked"},
		{"unauthorized_client", 400, `{"error":"unauthorized_client"}`, "HTTP 400 unauthorized_client"},
		{"invalid_target", 400, `{"error":"invalid_target","error_description":"audience not allowed"}`, "HTTP 400 invalid_target"},
		{"invalid_client", 401, `{"error":"invalid_client"}`, "HTTP 401 invalid_client"},
		{"forbidden without body", 403, ``, "HTTP 403 no error code"},
		{"description echoing the subject token", 400, `{"error":"invalid_grant","error_description":"bad token ` + secretToken + `"}`, "HTTP 400 invalid_grant"},
		{"hostile code and description", 400, `{"error":"bad\r\ncode` + strings.Repeat("x", 200) + `","error_description":"` + strings.Repeat(`\u0007d`, 500) + `"}`, "HTTP 400 badcode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeIdP(t)
			f.answer = func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}
			e, _ := newTestExchange(t, f)
			c := caller("mallory", secretToken)
			for range 2 {
				h, err := e.Header(context.Background(), c)
				if !errors.Is(err, ErrRefused) || h != nil {
					t.Fatalf("Header = %v, %v; want ErrRefused and no header", h, err)
				}
				msg := err.Error()
				if !strings.Contains(msg, tc.want) {
					t.Errorf("error %q does not contain %q", msg, tc.want)
				}
				if strings.Contains(msg, secretToken) || strings.Contains(msg, testClientSecret) || len(msg) > 300 || strings.ContainsAny(msg, "\r\n\a") {
					t.Errorf("error leaks or is unbounded: %q", msg)
				}
			}
			// Refusals are not cached: each Header asks again.
			if n := f.requests.Load(); n != 2 {
				t.Errorf("requests = %d, want 2", n)
			}
		})
	}
}

func TestExchangeMissingSubjectToken(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f)
	gatewayCaller := &Caller{Tenant: "acme", Subject: "alice", Assertion: "a.b.c"}
	_, err := e.Header(context.Background(), gatewayCaller)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "gateway-issued token") {
		t.Errorf("err = %v", err)
	}
	if _, err := e.Header(context.Background(), nil); !errors.Is(err, ErrRefused) {
		t.Errorf("nil caller: err = %v", err)
	}
	ea, _ := newTestExchange(t, f, func(c *ExchangeConfig) { c.Subject = SubjectAssertion })
	_, err = ea.Header(context.Background(), caller("alice", userToken("alice", 1)))
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "assertion") {
		t.Errorf("assertion subject without an assertion: err = %v", err)
	}
	if n := f.requests.Load(); n != 0 {
		t.Errorf("requests = %d, want 0", n)
	}
}

func TestExchangeAssertionSubject(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f, func(c *ExchangeConfig) { c.Subject = SubjectAssertion })
	assertion := func(conn string, iat int64) string {
		return jwtOf(map[string]any{"iss": "mcpgate", "sub": "alice", "tenant": "acme", "rights": []string{"read"},
			"connection": conn, "iat": iat, "exp": iat + 60, "jti": conn + fmt.Sprint(iat)})
	}
	c := &Caller{Tenant: "acme", Subject: "alice", Rights: []string{"read"}, AccessToken: "ignored", Assertion: assertion("c1", 1)}
	first := bearer(t, e, c)
	if got := f.form("subject_token_type"); len(got) != 1 || got[0] != TokenTypeJWT {
		t.Errorf("subject_token_type = %v", got)
	}
	if got := f.form("subject_token"); len(got) != 1 || got[0] != c.Assertion {
		t.Errorf("subject_token is not the assertion")
	}
	// Another connection and a newer assertion of the same principal reuse.
	c2 := *c
	c2.Assertion = assertion("c2", 5)
	if bearer(t, e, &c2) != first {
		t.Errorf("assertion of another connection did not reuse the exchanged token")
	}
}

func TestExchangeSingleFlight(t *testing.T) {
	f := newFakeIdP(t)
	f.gate = make(chan struct{})
	e, _ := newTestExchange(t, f)
	const n = 32
	var wg sync.WaitGroup
	got := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := e.Header(context.Background(), caller("alice", userToken("alice", int64(i%3)), "read"))
			errs[i] = err
			if err == nil {
				got[i] = h["authorization"][0]
			}
		}()
	}
	// Let the callers pile up on the one request, then answer it.
	deadline := time.Now().Add(5 * time.Second)
	for f.requests.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("caller %d: %q, %v (caller 0: %q)", i, got[i], errs[i], got[0])
		}
	}
	if r := f.requests.Load(); r != 1 {
		t.Errorf("requests = %d, want 1 for one key", r)
	}
}

func TestExchangeCanceledCaller(t *testing.T) {
	f := newFakeIdP(t)
	f.gate = make(chan struct{})
	e, _ := newTestExchange(t, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	c := caller("alice", userToken("alice", 1))
	go func() {
		_, err := e.Header(ctx, c)
		done <- err
	}()
	for f.requests.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled caller: %v", err)
	}
	close(f.gate)
	// The shared request finished for the others and was cached.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		e.mu.Lock()
		n := len(e.cache)
		e.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	bearer(t, e, c)
	if r := f.requests.Load(); r != 1 {
		t.Errorf("requests = %d, want 1", r)
	}
}

func TestExchangeBadResponses(t *testing.T) {
	big := `{"access_token":"` + strings.Repeat("a", 70<<10) + `","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer"}`
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"missing access_token", `{"issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer","expires_in":60}`, 200, "no access_token"},
		{"wrong token_type", `{"access_token":"t","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"DPoP"}`, 200, `token_type "DPoP"`},
		{"N_A token_type", `{"access_token":"t","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"N_A"}`, 200, "not usable as an access token"},
		{"missing issued_token_type", `{"access_token":"t","token_type":"Bearer"}`, 200, "no issued_token_type"},
		{"id token issued", `{"access_token":"t","issued_token_type":"urn:ietf:params:oauth:token-type:id_token","token_type":"Bearer"}`, 200, "not an access token"},
		{"header injection", `{"access_token":"t\r\nX-Evil: 1","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer"}`, 200, "not a valid bearer token"},
		{"bad expires_in", `{"access_token":"t","issued_token_type":"` + TokenTypeAccessToken + `","token_type":"Bearer","expires_in":"soon"}`, 200, "JSON token response"},
		{"huge body", big, 200, "larger than"},
		{"not JSON", `<html>hello</html>`, 200, "not a JSON token response"},
		{"server error", `{"error":"server_error"}`, 500, "HTTP 500"},
		{"redirect", ``, 307, "HTTP 307"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeIdP(t)
			var elsewhere atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { elsewhere.Add(1) }))
			defer other.Close()
			f.answer = func(w http.ResponseWriter, _ *http.Request) {
				if tc.status == 307 {
					w.Header().Set("Location", other.URL+"/token")
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}
			e, _ := newTestExchange(t, f)
			h, err := e.Header(context.Background(), caller("alice", userToken("alice", 1)))
			if err == nil || h != nil || errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Header = %v, %v; want an error with %q (not ErrRefused)", h, err, tc.want)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error unbounded: %d bytes", len(err.Error()))
			}
			if elsewhere.Load() != 0 {
				t.Errorf("the token request followed a redirect")
			}
			_, _ = e.Header(context.Background(), caller("alice", userToken("alice", 1)))
			if n := f.requests.Load(); n != 2 {
				t.Errorf("a bad answer was cached: %d requests", n)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		e, err := NewExchange(ExchangeConfig{TokenURL: "http://127.0.0.1:1/token", ClientID: "c", ClientSecret: "s"})
		if err != nil {
			t.Fatal(err)
		}
		tok := userToken("alice", 1)
		_, err = e.Header(context.Background(), caller("alice", tok))
		if err == nil || errors.Is(err, ErrRefused) || strings.Contains(err.Error(), tok) {
			t.Errorf("err = %v", err)
		}
	})
}

func TestExchangeCacheBound(t *testing.T) {
	f := newFakeIdP(t)
	e, _ := newTestExchange(t, f, func(c *ExchangeConfig) { c.CacheSize = 2 })
	for _, u := range []string{"a", "b", "c", "d"} {
		bearer(t, e, caller(u, userToken(u, 1)))
	}
	e.mu.Lock()
	n, m := len(e.cache), len(e.identity)
	e.mu.Unlock()
	if n > 2 || m > 2 {
		t.Errorf("cache holds %d tokens and %d identities, bound 2", n, m)
	}
	// Without a cache every Header exchanges.
	f2 := newFakeIdP(t)
	e2, _ := newTestExchange(t, f2, func(c *ExchangeConfig) { c.CacheSize = -1 })
	c := caller("a", userToken("a", 1))
	bearer(t, e2, c)
	bearer(t, e2, c)
	if f2.requests.Load() != 2 {
		t.Errorf("CacheSize -1: %d requests, want 2", f2.requests.Load())
	}
}

func TestNewExchangeErrors(t *testing.T) {
	ok := ExchangeConfig{TokenURL: "https://idp.example/token", ClientID: "c", ClientSecret: "topsecret"}
	for _, tc := range []struct {
		name string
		mod  func(*ExchangeConfig)
		want string
	}{
		{"relative URL", func(c *ExchangeConfig) { c.TokenURL = "/token" }, "token_url"},
		{"ftp URL", func(c *ExchangeConfig) { c.TokenURL = "ftp://idp.example/token" }, "token_url"},
		{"no client", func(c *ExchangeConfig) { c.ClientID = "" }, "client_id"},
		{"no secret", func(c *ExchangeConfig) { c.ClientSecret = "" }, "secret is empty"},
		{"bad subject", func(c *ExchangeConfig) { c.Subject = "id_token" }, "subject"},
	} {
		cfg := ok
		tc.mod(&cfg)
		_, err := NewExchange(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("%s: err = %v", tc.name, err)
		}
	}
	if _, err := NewExchange(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// BenchmarkExchangeCachedHeader is the added cost per forwarded request
// with a cached exchanged token.
func BenchmarkExchangeCachedHeader(b *testing.B) {
	f := newFakeIdP(b)
	e, _ := newTestExchange(b, f)
	// Caller.Rights come sorted.
	c := caller("alice", userToken("alice", 1), "resources:read", "tools:call", "tools:list")
	if _, err := e.Header(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := e.Header(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	if f.requests.Load() != 1 {
		b.Fatalf("requests = %d, want 1", f.requests.Load())
	}
}

// BenchmarkExchangeHeaderHit is Header answered from the cache: the cost
// a cached exchanged token adds to a forwarded call.
func BenchmarkExchangeHeaderHit(b *testing.B) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("content-type", "application/json")
		fmt.Fprint(w, `{"access_token":"xchg-1","issued_token_type":"`+TokenTypeAccessToken+`","token_type":"Bearer","expires_in":3600}`)
	}))
	b.Cleanup(idp.Close)
	e, err := NewExchange(ExchangeConfig{TokenURL: idp.URL, ClientID: testClientID, ClientSecret: testClientSecret, Audience: testAudience})
	if err != nil {
		b.Fatal(err)
	}
	c := &Caller{Tenant: "acme", Subject: "alice", Rights: []string{"status:read", "tickets:write"}, AccessToken: "opaque-access-token-of-alice"}
	ctx := context.Background()
	if _, err := e.Header(ctx, c); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if h, err := e.Header(ctx, c); err != nil || h["authorization"][0] != "Bearer xchg-1" {
			b.Fatal(h, err)
		}
	}
}
