package envoydriver

// The ext_proc servers in these tests are small test doubles written against
// the ExternalProcessor gRPC API only. They stand in for mcpgate's own ext_proc
// server (gateway/extproc), which is being written concurrently; once it
// exists, e2e tests drive it through this same Driver.

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
)

// testTimeout bounds every wait in these tests so a bug fails instead of hangs.
const testTimeout = 15 * time.Second

type processFunc func(srv extprocv3.ExternalProcessor_ProcessServer) error

type testProcessor struct {
	extprocv3.UnimplementedExternalProcessorServer
	process processFunc
}

func (p *testProcessor) Process(srv extprocv3.ExternalProcessor_ProcessServer) error {
	return p.process(srv)
}

// startProcessor serves fn as an ext_proc server on a loopback port and
// returns its gRPC target.
func startProcessor(t testing.TB, fn processFunc) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(s, &testProcessor{process: fn})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// eachMessage answers every request with what fn returns (possibly nothing,
// possibly several responses) until the driver half-closes the stream.
func eachMessage(fn func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse) processFunc {
	return func(srv extprocv3.ExternalProcessor_ProcessServer) error {
		for {
			req, err := srv.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, resp := range fn(req) {
				if err := srv.Send(resp); err != nil {
					return err
				}
			}
		}
	}
}

func one(r *extprocv3.ProcessingResponse) []*extprocv3.ProcessingResponse {
	return []*extprocv3.ProcessingResponse{r}
}

// reply builds the response matching req's phase carrying cr.
func reply(req *extprocv3.ProcessingRequest, cr *extprocv3.CommonResponse) *extprocv3.ProcessingResponse {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestHeaders{
			RequestHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
			ResponseHeaders: &extprocv3.HeadersResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_RequestBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{
			RequestBody: &extprocv3.BodyResponse{Response: cr}}}
	case *extprocv3.ProcessingRequest_ResponseBody:
		return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
			ResponseBody: &extprocv3.BodyResponse{Response: cr}}}
	}
	panic("unexpected request")
}

func passThrough(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
	return one(reply(req, nil))
}

func immediate(code int, body string, set ...*corev3.HeaderValueOption) *extprocv3.ProcessingResponse {
	ir := &extprocv3.ImmediateResponse{Body: []byte(body)}
	if code != 0 {
		ir.Status = httpStatus(code)
	}
	if len(set) > 0 {
		ir.Headers = &extprocv3.HeaderMutation{SetHeaders: set}
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{ImmediateResponse: ir}}
}

func setRaw(k, v string) *corev3.HeaderValueOption {
	return &corev3.HeaderValueOption{Header: &corev3.HeaderValue{Key: k, RawValue: []byte(v)}}
}

func bodyMut(b string) *extprocv3.BodyMutation {
	return &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_Body{Body: []byte(b)}}
}

// recorder keeps every ProcessingRequest a processor saw.
type recorder struct {
	mu   sync.Mutex
	reqs []*extprocv3.ProcessingRequest
}

func (r *recorder) wrap(fn func(*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse) processFunc {
	return eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		r.mu.Lock()
		r.reqs = append(r.reqs, req)
		r.mu.Unlock()
		return fn(req)
	})
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.reqs = nil
	r.mu.Unlock()
}

func (r *recorder) all() []*extprocv3.ProcessingRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*extprocv3.ProcessingRequest(nil), r.reqs...)
}

// phases lists the phase of every recorded message, e.g. "request_headers".
func (r *recorder) phases() []string {
	var out []string
	for _, req := range r.all() {
		out = append(out, phaseOf(req).String())
	}
	return out
}

func phaseOf(req *extprocv3.ProcessingRequest) phase {
	switch req.GetRequest().(type) {
	case *extprocv3.ProcessingRequest_RequestHeaders:
		return phaseRequestHeaders
	case *extprocv3.ProcessingRequest_RequestBody:
		return phaseRequestBody
	case *extprocv3.ProcessingRequest_ResponseHeaders:
		return phaseResponseHeaders
	case *extprocv3.ProcessingRequest_ResponseBody:
		return phaseResponseBody
	}
	return phaseRequestTrailers
}

// protoHeader returns the raw values of key in a proto header map.
func protoHeader(hm *corev3.HeaderMap, key string) []string {
	var out []string
	for _, h := range hm.GetHeaders() {
		if h.GetKey() == key {
			out = append(out, string(h.GetRawValue()))
		}
	}
	return out
}

// upstreamSeen is what the test upstream received.
type upstreamSeen struct {
	mu    sync.Mutex
	count int
	last  *http.Request
	body  []byte
}

func (u *upstreamSeen) record(r *http.Request, body []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.count++
	u.last = r
	u.body = body
}

func (u *upstreamSeen) get() (int, *http.Request, []byte) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.count, u.last, u.body
}

// startUpstream runs handler as the upstream and records each request after
// reading its body.
func startUpstream(t testing.TB, handler func(w http.ResponseWriter, r *http.Request, body []byte)) (*url.URL, *upstreamSeen) {
	t.Helper()
	seen := &upstreamSeen{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		seen.record(r, body)
		handler(w, r, body)
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, seen
}

// echo answers with the request body, as JSON if it came as JSON.
func echo(w http.ResponseWriter, r *http.Request, body []byte) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	_, _ = w.Write(body)
}

// startDriver builds a Driver for cfg in front of an HTTP test server.
func startDriver(t testing.TB, cfg Config) (*Driver, string) {
	t.Helper()
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	if cfg.MessageTimeout == 0 {
		cfg.MessageTimeout = testTimeout
	}
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(d)
	t.Cleanup(func() {
		front.Close()
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return d, front.URL
}

var testClient = &http.Client{Timeout: testTimeout}

func do(t testing.TB, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = stringsReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(b)
}

func httpStatus(code int) *typev3.HttpStatus {
	return &typev3.HttpStatus{Code: typev3.StatusCode(code)}
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
