package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/gateway/gatewaytest"
	"github.com/mcpgate/mcpgate/gateway/proxy"
)

// proxySender serves p as a proxy at /mcp in front of up (the upstream
// "default"), and returns a Sender that posts each call to it over
// reused connections. A call that leaves waits 50ms for its answer.
func proxySender(t *testing.T, p *gateway.Pipeline, up gatewaytest.Upstream) gatewaytest.Sender {
	t.Helper()
	us := httptest.NewServer(gatewaytest.Handler(up))
	t.Cleanup(us.Close)
	u, err := url.Parse(us.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	gw, hc := serveReuse(t, p, proxy.Route{Path: "/mcp", Upstream: "default", URL: u})
	return func(c gatewaytest.Call) (gatewaytest.Reply, error) {
		wait := time.Minute
		if c.Leave {
			wait = 50 * time.Millisecond
		}
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "POST", gw+"/mcp", strings.NewReader(c.Body))
		if err != nil {
			return gatewaytest.Reply{}, err
		}
		req.Header = c.Header()
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		r, err := hc.Do(req)
		var b []byte
		if err == nil {
			b, err = io.ReadAll(r.Body)
			r.Body.Close()
		}
		switch {
		case c.Leave && err == nil:
			return gatewaytest.Reply{}, fmt.Errorf("the client left, yet got %d %s", r.StatusCode, b)
		case c.Leave:
			return gatewaytest.Reply{}, nil
		case err != nil:
			return gatewaytest.Reply{}, err
		}
		return gatewaytest.Reply{Status: r.StatusCode, Body: b}, nil
	}
}

// serveReuse serves p as a proxy with routes and returns its base URL and
// a client that reuses its connections, as the reuse tests' callers do.
func serveReuse(t *testing.T, p *gateway.Pipeline, routes ...proxy.Route) (string, *http.Client) {
	t.Helper()
	h, err := proxy.New(proxy.Options{Pipeline: p, MaxBodyBytes: 1 << 16, MaxResponseBytes: 1 << 20, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(h)
	t.Cleanup(gw.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(tr.CloseIdleConnections)
	return gw.URL, &http.Client{Transport: tr}
}
