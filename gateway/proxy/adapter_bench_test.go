package proxy_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
	"github.com/mcpgate/mcpgate/internal/rig"
	"github.com/mcpgate/mcpgate/policy"
)

// BenchmarkAdapterToolsCall isolates the standalone adapter's own work
// per allowed tools/call: the handler is called in process as net/http
// calls it (a cancelable context of its own per request, a RemoteAddr,
// the headers an MCP client sends), behind it a pipeline that does little
// (every call allowed, no authentication work, a tool deadline as in
// production: Verdict.Deadline is set). "loopback" forwards to the static
// upstream over a real http.Transport; "memory" answers from a transport
// that derives its context from the request's as http.Transport does,
// without a network, for steadier timings. cpu-ns/op is the process's
// CPU time per call.
func BenchmarkAdapterToolsCall(b *testing.B) {
	b.Run("loopback", func(b *testing.B) {
		up := httptest.NewServer(staticStatus)
		b.Cleanup(up.Close)
		benchAdapter(b, up.URL+"/mcp", nil)
	})
	b.Run("memory", func(b *testing.B) {
		benchAdapter(b, "http://upstream.internal/mcp", cannedTransport{})
	})
}

func benchAdapter(b *testing.B, upstream string, tr http.RoundTripper) {
	u, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	p := gatewaytest.New(b, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(benchAuth{}),
		gatewaytest.WithLimits(&gateway.Limits{DefaultDeadline: time.Minute}))
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Transport: tr,
		Routes: []proxy.Route{{Path: "/mcp", Upstream: "default", URL: u}}})
	if err != nil {
		b.Fatal(err)
	}
	body := callBody("1", rig.ToolGetStatus, `{"service":"db"}`)
	tmpl, err := http.NewRequest("POST", "http://127.0.0.1:8080/mcp", nil)
	if err != nil {
		b.Fatal(err)
	}
	tmpl.RemoteAddr, tmpl.RequestURI = "127.0.0.1:51234", "/mcp"
	tmpl.ContentLength = int64(len(body))
	tmpl.Header = http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {"2026-07-28"},
		"Mcp-Method":           {"tools/call"},
		"Mcp-Name":             {rig.ToolGetStatus},
		"Authorization":        {"Bearer t0k3n"},
		"User-Agent":           {"Go-http-client/1.1"},
		"Content-Length":       {strconv.Itoa(len(body))},
		"Accept-Encoding":      {"gzip"},
	}
	w := &discardWriter{h: http.Header{}}
	var rd bytes.Reader
	base := context.Background()
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		ctx, cancel := context.WithCancel(base) // net/http's per request
		r := tmpl.WithContext(ctx)
		rd.Reset(body)
		r.Body = io.NopCloser(&rd)
		clear(w.h)
		w.status, w.n = 0, 0
		h.ServeHTTP(w, r)
		cancel()
		if w.status != 200 || w.n != len(staticStatusAnswer) {
			b.Fatalf("status %d, %d bytes", w.status, w.n)
		}
	}
	// CPU time of the whole process per call (utime+stime: less disturbed
	// than ns/op by other processes on a shared machine; the in-process
	// upstream included).
	b.ReportMetric(float64((processCPU()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchAuth admits every request as one authenticated caller.
type benchAuth struct{}

func (benchAuth) Authenticate(context.Context, *gateway.Request) (*policy.Principal, *gateway.AuthFailure) {
	return &policy.Principal{Authenticated: true, Subject: "alice", Tenant: "acme"}, nil
}

func (benchAuth) InsufficientScope(*gateway.Request, []string) *gateway.AuthFailure { return nil }

// discardWriter is a ResponseWriter that keeps the status and counts the
// body.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }

func (w *discardWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = 200
	}
	w.n += len(p)
	return len(p), nil
}

// cannedTransport answers every request with staticStatusAnswer. Like
// http.Transport it reads the request body and derives a cancelable
// context from the request's for the exchange.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	return &http.Response{
		StatusCode: 200, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{
			"Content-Type":   {"application/json"},
			"Cache-Control":  {"no-cache, no-transform"},
			"Content-Length": {strconv.Itoa(len(staticStatusAnswer))},
			"Date":           {"Wed, 02 Dec 2026 07:00:00 GMT"},
		},
		ContentLength: int64(len(staticStatusAnswer)),
		Body:          io.NopCloser(bytes.NewReader(staticStatusAnswer)),
		Request:       r,
	}, nil
}
