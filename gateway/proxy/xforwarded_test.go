package proxy_test

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
)

// TestXForwarded: the upstream gets the X-Forwarded-For, -Host and -Proto
// that httputil.ProxyRequest.SetXForwarded sets, and none of the
// client's own forwarding fields.
func TestXForwarded(t *testing.T) {
	var got http.Header
	tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
			ContentLength: -1, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)), Request: r}, nil
	})
	h := adapter(t, tr, 0)
	var want http.Header
	ref := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: "upstream.internal"})
			pr.SetXForwarded()
		},
		Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			want = r.Header.Clone()
			return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
		}),
	}
	for _, c := range []struct {
		remote, host string
		tls          bool
	}{
		{"10.1.2.3:40000", "gw.example", false},
		{"[2001:db8::7]:443", "gw.example:8443", true},
		{"@", "gw.example", false}, // no port: no X-Forwarded-For
	} {
		for _, client := range []http.Header{nil, {
			"X-Forwarded-For": {"192.0.2.1", "192.0.2.2"}, "X-Forwarded-Host": {"evil.example"},
			"X-Forwarded-Proto": {"https"}, "Forwarded": {"for=192.0.2.1"},
		}} {
			r := toolsCallRequest()
			r.RemoteAddr, r.Host = c.remote, c.host
			if c.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range client {
				r.Header[k] = v
			}
			rr := r.Clone(r.Context())
			got, want = nil, nil
			h.ServeHTTP(httptest.NewRecorder(), r)
			ref.ServeHTTP(httptest.NewRecorder(), rr)
			if got == nil || want == nil {
				t.Fatalf("%+v: not forwarded", c)
			}
			for _, k := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
				if g, w := got[k], want[k]; strings.Join(g, "|") != strings.Join(w, "|") || (g == nil) != (w == nil) {
					t.Errorf("%+v, client's %v: %s %q, want %q", c, client[k], k, g, w)
				}
			}
			if got["Authorization"] != nil || strings.Join(got["Accept-Encoding"], ",") != "identity" {
				t.Errorf("the verdict's fields not applied: %v", got)
			}
		}
	}
}
