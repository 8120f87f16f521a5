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

	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
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

// TestUpstreamURL: the upstream is called at its configured URL (scheme,
// host, escaped path, query), whatever the client's query, with the Host
// of that URL: what ProxyRequest.SetURL followed by replacing the path
// and query with the configured ones gives.
func TestUpstreamURL(t *testing.T) {
	for _, target := range []string{"http://up.internal:8081/mcp", "https://up.internal/a%2Fb/mcp?x=1&y=%20", "http://up.internal/mcp?"} {
		var got *http.Request
		tr := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			got = r
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
				ContentLength: -1, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`)), Request: r}, nil
		})
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		p := gatewaytest.New(t, gatewaytest.WithDecider(gatewaytest.AllowAll{}), gatewaytest.WithAuth(benchAuth{}))
		h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Transport: tr,
			Routes: []proxy.Route{{Path: "/mcp", Upstream: "default", URL: u}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, query := range []string{"", "?q=2", "?"} {
			r := toolsCallRequest()
			r.URL.RawQuery, r.URL.ForceQuery = strings.TrimPrefix(query, "?"), query == "?"
			r.RequestURI = "/mcp" + query
			want := r.Clone(r.Context())
			pr := &httputil.ProxyRequest{In: r, Out: want}
			pr.SetURL(u)
			want.URL.Path, want.URL.RawPath, want.URL.RawQuery, want.URL.ForceQuery = u.Path, u.RawPath, u.RawQuery, u.ForceQuery
			got = nil
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if got == nil {
				t.Fatalf("%s%s: not forwarded: %d %s", target, query, w.Code, w.Body)
			}
			if *got.URL != *want.URL || got.URL.String() != want.URL.String() || got.Host != want.Host {
				t.Errorf("%s, client's query %q: upstream called at %#v (Host %q), want %#v (Host %q)", target, query, got.URL, got.Host, want.URL, want.Host)
			}
		}
	}
}
