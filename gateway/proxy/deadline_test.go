package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
)

// hangingUpstream answers MCP calls only when their request's context
// ends (or after a long while), and reports each call's context when the
// call arrives.
type hangingUpstream struct{ calls chan context.Context }

func newHangingUpstream() *hangingUpstream {
	return &hangingUpstream{calls: make(chan context.Context, 4)}
}

func (u *hangingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	u.calls <- r.Context()
	select {
	case <-r.Context().Done():
	case <-time.After(10 * time.Second):
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
}

// ended waits up to d for ctx to end and reports whether it did.
func ended(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return true
	case <-time.After(d):
		return false
	}
}

// TestCallDeadline: a tools/call whose upstream does not answer within its
// deadline (deadline_ms) is answered with a deadline_exceeded tool error
// at the deadline, and the upstream request is cancelled.
func TestCallDeadline(t *testing.T) {
	up := newHangingUpstream()
	e := startWith(t, up, nil, func(c *config.Config) {
		d := c.Upstreams[0].Tools["list_technicians"]
		d.DeadlineMS = 300
		c.Upstreams[0].Tools["list_technicians"] = d
	})
	start := time.Now()
	resp, body := post(t, e.url, h2026("tools/call", "list_technicians"), callBody("1", "list_technicians", "{}"))
	took := time.Since(start)
	var got struct {
		Result struct {
			IsError           bool
			Content           []struct{ Text string }
			StructuredContent any
		}
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || !got.Result.IsError || len(got.Result.Content) == 0 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	checkToolErrorText(t, got.Result.Content[0].Text, got.Result.StructuredContent, "deadline_exceeded")
	if took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("answered after %v, want at the 300ms deadline", took)
	}
	if ctx := <-up.calls; !ended(ctx, 5*time.Second) {
		t.Error("the upstream request was not cancelled")
	}
}

// TestClientGoneCancelsUpstream: a client that goes away cancels its call
// upstream long before the call's deadline.
func TestClientGoneCancelsUpstream(t *testing.T) {
	up := newHangingUpstream()
	e := startWith(t, up, nil, nil) // the default deadline: 30 s
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url, bytes.NewReader(callBody("1", "list_technicians", "{}")))
		for k, v := range h2026("tools/call", "list_technicians") {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	var upCtx context.Context
	select {
	case upCtx = <-up.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("the call did not reach the upstream")
	}
	cancel()
	<-done
	if !ended(upCtx, 5*time.Second) {
		t.Error("the upstream request was not cancelled when the client went away")
	}
}

// TestDetachedWriteOutlivesClient: a write (Verdict.Detach) is not
// cancelled upstream when its client goes away; its deadline still ends
// it.
func TestDetachedWriteOutlivesClient(t *testing.T) {
	up := newHangingUpstream()
	dir := t.TempDir()
	e := startWith(t, up, nil, func(c *config.Config) {
		c.Store = &config.Store{Bolt: &config.BoltStore{Path: filepath.Join(dir, "state.db")}} // write safety on
		d := c.Upstreams[0].Tools["create_booking"]
		d.DeadlineMS = 1500
		c.Upstreams[0].Tools["create_booking"] = d
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, "POST", e.url, bytes.NewReader(callBody("1", "create_booking", `{"customer_id":"C-1","slot":"2026-01-02T10:00"}`)))
		for k, v := range h2026("tools/call", "create_booking") {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var upCtx context.Context
	select {
	case upCtx = <-up.calls:
	case <-time.After(5 * time.Second):
		t.Fatal("the write did not reach the upstream")
	}
	arrived := time.Now()
	cancel()
	<-done
	if ended(upCtx, 500*time.Millisecond) {
		t.Fatalf("the write was cancelled upstream %v after it arrived, when its client went away", time.Since(arrived))
	}
	if !ended(upCtx, 5*time.Second) {
		t.Error("the write's deadline did not end it")
	}
}

// TestDeadlineReleased: the context a call with a deadline goes upstream
// with reports the deadline, is cancelled when the exchange ends (its
// timer released), and not with the deadline's cause.
func TestDeadlineReleased(t *testing.T) {
	var got context.Context
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Context()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			ContentLength: -1, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)), Request: r}, nil
	})
	h := adapter(t, tr, time.Minute)
	start := time.Now()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, toolsCallRequest())
	if w.Code != 200 || got == nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if d, ok := got.Deadline(); !ok || d.Before(start.Add(time.Minute)) || d.After(time.Now().Add(time.Minute)) {
		t.Errorf("deadline %v, %v: want a minute from the call", d, ok)
	}
	if err := got.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("after the exchange: %v, want cancelled", err)
	}
	if err := context.Cause(got); errors.Is(err, gateway.ErrDeadline) {
		t.Errorf("cause %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// adapter is a proxy in front of tr with a pipeline that allows every
// call and gives tools/call the deadline d (0: none).
func adapter(t *testing.T, tr http.RoundTripper, d time.Duration) *proxy.Proxy {
	t.Helper()
	p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(benchAuth{}),
		gatewaytest.WithLimits(&gateway.Limits{DefaultDeadline: d}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Transport: tr,
		Routes: []proxy.Route{{Path: "/mcp", Upstream: "default", URL: &url.URL{Scheme: "http", Host: "upstream.internal", Path: "/mcp"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// toolsCallRequest is an allowed tools/call as the proxy's server hands
// it over.
func toolsCallRequest() *http.Request {
	r := httptest.NewRequest("POST", "/mcp", bytes.NewReader(callBody("1", "get_status", `{}`)))
	for k, v := range h2026("tools/call", "get_status") {
		r.Header.Set(k, v)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	r.Header.Set("Authorization", "Bearer t0k3n")
	return r
}
