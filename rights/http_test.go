package rights

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// product is a test implementation of the HTTP wire contract: it answers
// from a table and records what it was asked.
type product struct {
	mu      sync.Mutex
	answers map[string]string // "tenant/subject" → JSON body; absent → 404
	asked   []string          // raw queries
	headers []http.Header
}

func (p *product) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.asked = append(p.asked, r.URL.RawQuery)
	p.headers = append(p.headers, r.Header.Clone())
	body, ok := p.answers[r.URL.Query().Get("tenant")+"/"+r.URL.Query().Get("subject")]
	p.mu.Unlock()
	if r.Method != http.MethodGet {
		http.Error(w, "method", http.StatusMethodNotAllowed)
		return
	}
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write([]byte(body))
}

func newProduct(t *testing.T, answers map[string]string) (*product, *httptest.Server) {
	t.Helper()
	p := &product{answers: answers}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

func mustHTTP(t *testing.T, o HTTPOptions) *HTTPSource {
	t.Helper()
	s, err := NewHTTP(o)
	if err != nil {
		t.Fatalf("NewHTTP: %v", err)
	}
	return s
}

func TestHTTPAnswers(t *testing.T) {
	p, srv := newProduct(t, map[string]string{
		"acme/alice": `{"active": true, "rights": ["bookings.read", "bookings.write", "bookings.read"]}`,
		"acme/bob":   `{"active": false, "rights": ["bookings.read"]}`,
		"acme/carol": `{"active": true}`,
		"acme/dave":  `{"active": true, "rights": null}`,
	})
	s := mustHTTP(t, HTTPOptions{
		URL: srv.URL + "/rights",
		// Names as a configuration file may spell them.
		Header: http.Header{"authorization": {"Bearer product-secret"}, "accept": {"text/html"}, "X-Tenant-Hint": {"a", "b"}},
	})
	ctx := context.Background()
	cases := []struct {
		tenant, subject string
		want            Live
	}{
		{"acme", "alice", Live{Active: true, Rights: []string{"bookings.read", "bookings.write"}}},
		{"acme", "bob", Live{Active: false, Rights: []string{"bookings.read"}}},
		{"acme", "carol", Live{Active: true}},
		{"acme", "dave", Live{Active: true}},
		{"acme", "zed", Live{}},     // 404: removed
		{"globex", "alice", Live{}}, // 404: tenant unknown
	}
	for _, c := range cases {
		got, err := s.Lookup(ctx, c.tenant, c.subject)
		if err != nil {
			t.Fatalf("%s/%s: %v", c.tenant, c.subject, err)
		}
		if !equalLive(got, c.want) {
			t.Errorf("%s/%s = %+v, want %+v", c.tenant, c.subject, got, c.want)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.headers[0]
	if h.Get("Authorization") != "Bearer product-secret" || len(h.Values("Accept")) != 1 || h.Get("Accept") != "application/json" || len(h.Values("X-Tenant-Hint")) != 2 {
		t.Errorf("headers sent: %v", h)
	}
}

func TestHTTPEmptyNamesAskNothing(t *testing.T) {
	p, srv := newProduct(t, nil)
	s := mustHTTP(t, HTTPOptions{URL: srv.URL})
	for _, ts := range [][2]string{{"", "alice"}, {"acme", ""}} {
		l, err := s.Lookup(context.Background(), ts[0], ts[1])
		if err != nil || l.Active {
			t.Errorf("Lookup(%q, %q) = %+v, %v; want inactive", ts[0], ts[1], l, err)
		}
	}
	if len(p.asked) != 0 {
		t.Errorf("asked %v", p.asked)
	}
}

func TestHTTPQueryEscaping(t *testing.T) {
	p, srv := newProduct(t, map[string]string{
		"a&b c/x=y/z?#1 é": `{"active": true, "rights": ["r"]}`,
	})
	s := mustHTTP(t, HTTPOptions{URL: srv.URL + "/v1/rights?version=2"})
	l, err := s.Lookup(context.Background(), "a&b c", "x=y/z?#1 é")
	if err != nil || !l.Active {
		t.Fatalf("Lookup = %+v, %v", l, err)
	}
	raw := p.asked[0]
	want := "subject=x%3Dy%2Fz%3F%231+%C3%A9&tenant=a%26b+c&version=2"
	if raw != want {
		t.Errorf("query %q, want %q", raw, want)
	}
}

func TestHTTPInvalidAnswers(t *testing.T) {
	big := `{"active": true, "rights": ["` + strings.Repeat("a", MaxHTTPAnswer) + `"]}`
	manyRights := `{"active": true, "rights": [` + strings.Repeat(`"r",`, MaxRights) + `"r"]}`
	cases := []struct {
		name, contentType, body, want string
	}{
		{"invalid JSON", "application/json", `{"active": tru`, "malformed JSON at byte 14"},
		{"not an object", "application/json", `["active"]`, "the answer is an array, want an object"},
		{"null", "application/json", `null`, `"active" (boolean) is required`},
		{"active missing", "application/json", `{"rights": ["a"]}`, `"active" (boolean) is required`},
		{"active null", "application/json", `{"active": null}`, `"active" (boolean) is required`},
		{"active a string", "application/json", `{"active": "true"}`, "active is a string, want true or false"},
		{"unknown member", "application/json", `{"active": true, "admin": true}`, `unknown member "admin"`},
		{"member in other case", "application/json", `{"Active": true}`, `unknown member "Active"`},
		{"duplicate member", "application/json", `{"active": false, "active": true}`, `member "active" given twice`},
		{"rights not strings", "application/json", `{"active": true, "rights": [1, 2]}`, "rights[0] is a number, want a string"},
		{"rights not a list", "application/json", `{"active": true, "rights": "a"}`, "rights is a string, want an array of strings"},
		{"right null", "application/json", `{"active": true, "rights": ["a", null]}`, "rights[1] is empty"},
		{"right with space", "application/json", `{"active": true, "rights": ["bookings read"]}`, "rights[0] contains"},
		{"too many rights", "application/json", manyRights, "more than"},
		{"trailing data", "application/json", `{"active": true} {}`, "after top-level value"},
		{"invalid UTF-8", "application/json", "{\"active\": true, \"rights\": [\"\xff\"]}", "invalid UTF-8"},
		{"oversize", "application/json", big, "larger than"},
		{"text content type", "text/plain", `{"active": true}`, "Content-Type"},
		{"no content type", "", `{"active": true}`, "no Content-Type"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if c.contentType != "" {
					w.Header().Set("Content-Type", c.contentType)
				} else {
					w.Header()["Content-Type"] = nil // no sniffing
				}
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			s := mustHTTP(t, HTTPOptions{URL: srv.URL})
			l, err := s.Lookup(context.Background(), "acme", "alice")
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Lookup = %+v, %v; want ErrUnavailable", l, err)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), srv.URL) {
				t.Errorf("error %q: want it to name the source and contain %q", err, c.want)
			}
		})
	}
}

func TestHTTPOversizeDeclared(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "2000000")
		_, _ = w.Write([]byte(`{"active": true}`)) // the server never sends the rest
	}))
	defer srv.Close()
	s := mustHTTP(t, HTTPOptions{URL: srv.URL})
	_, err := s.Lookup(context.Background(), "acme", "alice")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "2000000 bytes") {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPUnexpectedStatus(t *testing.T) {
	for _, status := range []int{http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusFound, http.StatusNoContent} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if status == http.StatusFound {
				http.Redirect(w, r, "/elsewhere", status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"active": true}`))
		}))
		s := mustHTTP(t, HTTPOptions{URL: srv.URL, Header: http.Header{"Authorization": {"Bearer product-secret"}}})
		_, err := s.Lookup(context.Background(), "acme", "alice")
		srv.Close()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("status %d: err = %v, want ErrUnavailable", status, err)
		}
		if want := fmt.Sprintf("unexpected status %d", status); !strings.Contains(err.Error(), want) {
			t.Errorf("status %d: error %q, want %q", status, err, want)
		}
		if strings.Contains(err.Error(), "product-secret") {
			t.Errorf("error reveals the header: %q", err)
		}
	}
}

func TestHTTPTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	s := mustHTTP(t, HTTPOptions{URL: srv.URL, Timeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := s.Lookup(context.Background(), "acme", "alice")
	elapsed := time.Since(start)
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "no answer within 100ms") {
		t.Errorf("error %q", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("took %s", elapsed)
	}
}

func TestHTTPCallerCancelled(t *testing.T) {
	_, srv := newProduct(t, map[string]string{"acme/alice": `{"active": true}`})
	s := mustHTTP(t, HTTPOptions{URL: srv.URL})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Lookup(ctx, "acme", "alice")
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestHTTPServerDown(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	s := mustHTTP(t, HTTPOptions{URL: url + "/rights?key=query-secret"})
	start := time.Now()
	_, err := s.Lookup(context.Background(), "acme", "alice")
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if !strings.Contains(err.Error(), "request failed") || !strings.Contains(err.Error(), url+"/rights") {
		t.Errorf("error %q", err)
	}
	if strings.Contains(err.Error(), "query-secret") || strings.Contains(err.Error(), "alice") {
		t.Errorf("error reveals the query: %q", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("took %s", time.Since(start))
	}
}

func TestNewHTTPRefusesBadOptions(t *testing.T) {
	cases := map[string]HTTPOptions{
		"no URL":          {},
		"relative":        {URL: "/rights"},
		"ftp":             {URL: "ftp://example.com/rights"},
		"no host":         {URL: "http:///rights"},
		"fragment":        {URL: "http://example.com/rights#x"},
		"tenant in query": {URL: "http://example.com/rights?tenant=acme"},
		"subject":         {URL: "http://example.com/rights?subject="},
		"bad query":       {URL: "http://example.com/rights?a=%zz"},
		"negative":        {URL: "http://example.com/rights", Timeout: -time.Second},
	}
	for name, o := range cases {
		if _, err := NewHTTP(o); err == nil {
			t.Errorf("%s: NewHTTP(%+v) succeeded", name, o)
		}
	}
	s := mustHTTP(t, HTTPOptions{URL: "https://user:pw@example.com/rights?key=k"})
	if s.String() != "http https://example.com/rights" {
		t.Errorf("String() = %q", s.String())
	}
}

func equalLive(a, b Live) bool {
	if a.Active != b.Active || len(a.Rights) != len(b.Rights) {
		return false
	}
	for i := range a.Rights {
		if a.Rights[i] != b.Rights[i] {
			return false
		}
	}
	return true
}
