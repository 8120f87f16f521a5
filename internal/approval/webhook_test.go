package approval

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestWebhookRetriesAndSigns: a real HTTP receiver answers 503 twice, then
// 200; the announcement arrives three times with the same delivery id and
// a valid HMAC-SHA256 signature, and is counted delivered once.
func TestWebhookRetriesAndSigns(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	var mu sync.Mutex
	var bodies []string
	var ids []string
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if !VerifySignature(secret, b, r.Header.Get(SignatureHeader)) {
			t.Errorf("bad signature %q", r.Header.Get(SignatureHeader))
		}
		mu.Lock()
		defer mu.Unlock()
		bodies = append(bodies, string(b))
		ids = append(ids, r.Header.Get(DeliveryHeader))
		if len(bodies) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		close(done)
	}))
	defer srv.Close()
	m := newMetrics(nil, nil, time.Now)
	n, err := newNotifier(WebhookOptions{URL: srv.URL, Secret: secret, Backoff: time.Millisecond}, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n.enqueue(announcement{ActionID: "a1", Tenant: "acme", Tool: "pay", Summary: "Pay 10 EUR", Link: "https://gw/approvals/a/a1", ExpiresAt: "2030-01-01T00:00:00Z"})
	<-done
	n.close()
	mu.Lock()
	defer mu.Unlock()
	var got map[string]string
	if err := json.Unmarshal([]byte(bodies[2]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"event": EventPending, "action_id": "a1", "tenant": "acme", "tool": "pay", "summary": "Pay 10 EUR", "link": "https://gw/approvals/a/a1", "expires_at": "2030-01-01T00:00:00Z"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if ids[0] != "a1" || ids[2] != "a1" || bodies[0] != bodies[2] {
		t.Errorf("retries differ: %v %v", ids, bodies)
	}
	if d, r := value(m.webhook.WithLabelValues("delivered")), value(m.webhook.WithLabelValues("retry")); d != 1 || r != 2 {
		t.Errorf("delivered %v retry %v", d, r)
	}
}

// TestWebhookGivesUpOnClientError: a 400 is not retried.
func TestWebhookGivesUpOnClientError(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	hits := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- struct{}{}
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer srv.Close()
	m := newMetrics(nil, nil, time.Now)
	n, err := newNotifier(WebhookOptions{URL: srv.URL, Secret: secret, Backoff: time.Millisecond}, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	n.enqueue(announcement{ActionID: "a2"})
	<-hits
	for value(m.webhook.WithLabelValues("failed")) != 1 {
		time.Sleep(time.Millisecond) // the worker counts after the answer
	}
	n.close()
	if len(hits) != 0 || value(m.webhook.WithLabelValues("retry")) != 0 {
		t.Errorf("hits %d, failed %v", len(hits), value(m.webhook.WithLabelValues("failed")))
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/approvals/a/x":        "/approvals/a/x",
		"//evil.example/":       Prefix,
		"https://evil.example/": Prefix,
		"/approvals/\\evil":     Prefix,
		"/other":                Prefix,
		"":                      Prefix,
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// value reads a counter's current value.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}
