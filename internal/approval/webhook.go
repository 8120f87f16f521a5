package approval

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Webhook header names.
const (
	// SignatureHeader carries "sha256=" + hex HMAC-SHA256 (RFC 2104,
	// FIPS 180-4) of the exact request body under the shared secret.
	SignatureHeader = "X-Mcpgate-Signature"
	// DeliveryHeader is the announcement's id, the same on every retry,
	// so a receiver can drop repeats.
	DeliveryHeader = "X-Mcpgate-Delivery"
	// EventPending is the event of an announcement.
	EventPending = "approval.pending"
	// webhookQueue bounds announcements waiting to be sent.
	webhookQueue = 1024
)

// WebhookOptions configure the announcements of new out-of-band actions.
type WebhookOptions struct {
	// URL receives a JSON POST per new action. Required.
	URL string
	// Secret is the HMAC-SHA256 key (at least 32 bytes). Required.
	Secret []byte
	// MaxAttempts per announcement, first try included (default 5).
	MaxAttempts int
	// Timeout of one attempt (default 5s).
	Timeout time.Duration
	// Backoff is the wait before the second attempt, doubled after each
	// further one and capped at 30s (default 1s).
	Backoff time.Duration
	// Client sends the requests; nil: http.Client without redirects.
	Client *http.Client
}

// announcement is the JSON body of a webhook request.
type announcement struct {
	Event     string `json:"event"`
	ActionID  string `json:"action_id"`
	Tenant    string `json:"tenant"`
	Tool      string `json:"tool"`
	Summary   string `json:"summary"`
	Link      string `json:"link"`
	ExpiresAt string `json:"expires_at"`
}

// Sign returns the SignatureHeader value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// VerifySignature reports whether header is the signature of body under
// secret (constant time), for receivers and tests.
func VerifySignature(secret, body []byte, header string) bool {
	return hmac.Equal([]byte(header), []byte(Sign(secret, body)))
}

// notifier sends announcements one by one off the request path.
type notifier struct {
	o      WebhookOptions
	m      *metrics
	log    *slog.Logger
	queue  chan announcement
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
}

func newNotifier(o WebhookOptions, m *metrics, log *slog.Logger) (*notifier, error) {
	if o.URL == "" || len(o.Secret) < 32 {
		return nil, errors.New("a URL and a secret of at least 32 bytes are required")
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	n := &notifier{o: o, m: m, log: log, queue: make(chan announcement, webhookQueue)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(1)
	go n.run()
	return n, nil
}

func (n *notifier) enqueue(a announcement) {
	a.Event = EventPending
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		n.m.webhook.WithLabelValues("dropped").Inc()
		return
	}
	select {
	case n.queue <- a:
	default:
		n.m.webhook.WithLabelValues("dropped").Inc()
		n.log.Warn("approval webhook: queue full; announcement dropped", "action_id", a.ActionID)
	}
}

func (n *notifier) close() {
	n.mu.Lock()
	if !n.closed {
		n.closed = true
		close(n.queue)
	}
	n.mu.Unlock()
	// Announcements in flight get a short grace; then whatever is left
	// (waits between retries included) is dropped.
	finished := make(chan struct{})
	go func() { n.wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(closeGrace):
	}
	n.cancel()
	<-finished
}

// closeGrace is how long close waits for announcements in flight.
const closeGrace = 2 * time.Second

func (n *notifier) run() {
	defer n.wg.Done()
	for a := range n.queue {
		if n.ctx.Err() != nil {
			n.m.webhook.WithLabelValues("dropped").Inc()
			continue
		}
		n.deliver(a)
	}
}

// deliver sends one announcement, retrying 5xx, 408, 429 and network
// errors with exponential backoff, at most MaxAttempts times.
func (n *notifier) deliver(a announcement) {
	body, _ := json.Marshal(a)
	sig := Sign(n.o.Secret, body)
	wait := n.o.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := n.send(body, sig, a.ActionID)
		if err == nil {
			n.m.webhook.WithLabelValues("delivered").Inc()
			return
		}
		if !retry || attempt >= n.o.MaxAttempts {
			n.m.webhook.WithLabelValues("failed").Inc()
			n.log.Warn("approval webhook: announcement not delivered", "action_id", a.ActionID, "attempts", attempt, "error", err)
			return
		}
		n.m.webhook.WithLabelValues("retry").Inc()
		select {
		case <-time.After(wait):
		case <-n.ctx.Done():
			n.m.webhook.WithLabelValues("dropped").Inc()
			return
		}
		wait = min(wait*2, 30*time.Second)
	}
}

func (n *notifier) send(body []byte, sig, id string) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.o.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "mcpgate-approval-webhook")
	req.Header.Set(SignatureHeader, sig)
	req.Header.Set(DeliveryHeader, id)
	resp, err := n.o.Client.Do(req)
	if err != nil {
		return true, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode >= 500, resp.StatusCode == http.StatusRequestTimeout, resp.StatusCode == http.StatusTooManyRequests:
		return true, fmt.Errorf("status %d", resp.StatusCode)
	}
	return false, fmt.Errorf("status %d (not retried)", resp.StatusCode)
}
