package envoydriver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mcpgate/mcpgate/internal/poll"
)

func TestNewValidates(t *testing.T) {
	up, _ := startUpstream(t, echo)
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no target", Config{Upstream: up}, "Target is required"},
		{"relative upstream", Config{Target: "127.0.0.1:1", Upstream: &url.URL{Path: "/x"}}, "absolute URL"},
		{"full duplex", Config{Target: "127.0.0.1:1", Upstream: up, Mode: &extprocfilterv3.ProcessingMode{
			RequestBodyMode: extprocfilterv3.ProcessingMode_FULL_DUPLEX_STREAMED}}, "not modelled"},
		{"bad metadata", Config{Target: "127.0.0.1:1", Upstream: up,
			RouteMetadata: map[string]map[string]any{"ns": {"ch": make(chan int)}}}, "route metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestPassThrough(t *testing.T) {
	var rec recorder
	target := startProcessor(t, rec.wrap(passThrough))
	up, seen := startUpstream(t, echo)
	d, front := startDriver(t, Config{Target: target, Upstream: up})

	resp, body := do(t, "POST", front+"/mcp?x=1", `{"jsonrpc":"2.0"}`, "Content-Type", "application/json", "X-Multi", "a", "X-Multi", "b")
	if resp.StatusCode != 200 || body != `{"jsonrpc":"2.0"}` {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("Server") != "envoy" || resp.Header.Get("X-Envoy-Upstream-Service-Time") == "" {
		t.Errorf("response headers %v lack Envoy's server / upstream-service-time", resp.Header)
	}
	_, ureq, ubody := seen.get()
	if string(ubody) != `{"jsonrpc":"2.0"}` || ureq.ContentLength != int64(len(ubody)) || ureq.URL.RequestURI() != "/mcp?x=1" {
		t.Errorf("upstream got %s %q (content-length %d)", ureq.URL, ubody, ureq.ContentLength)
	}
	if ureq.Header.Get("X-Request-Id") == "" || ureq.Header.Get("X-Forwarded-Proto") != "http" {
		t.Errorf("upstream headers %v lack x-request-id / x-forwarded-proto", ureq.Header)
	}

	if got, want := rec.phases(), []string{"request_headers", "request_body", "response_headers", "response_body"}; !slices.Equal(got, want) {
		t.Fatalf("phases %v, want %v", got, want)
	}
	reqs := rec.all()
	rh := reqs[0].GetRequestHeaders()
	for k, want := range map[string]string{":method": "POST", ":path": "/mcp?x=1", ":scheme": "http",
		":authority": strings.TrimPrefix(front, "http://"), "content-type": "application/json", "content-length": "17"} {
		if got := protoHeader(rh.GetHeaders(), k); len(got) != 1 || got[0] != want {
			t.Errorf("request_headers %s = %q, want %q", k, got, want)
		}
	}
	if got := protoHeader(rh.GetHeaders(), "x-multi"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("x-multi = %q", got)
	}
	for i, h := range rh.GetHeaders().GetHeaders() {
		if h.GetValue() != "" {
			t.Errorf("header %s uses value, want raw_value", h.GetKey())
		}
		if i < 4 && !strings.HasPrefix(h.GetKey(), ":") {
			t.Errorf("pseudo-headers must come first, got %s at %d", h.GetKey(), i)
		}
	}
	if rh.GetEndOfStream() {
		t.Error("request_headers end_of_stream with a body")
	}
	if reqs[0].GetProtocolConfig().GetRequestBodyMode() != extprocfilterv3.ProcessingMode_BUFFERED || reqs[1].GetProtocolConfig() != nil {
		t.Error("protocol_config must be in the first message only")
	}
	if rb := reqs[1].GetRequestBody(); string(rb.GetBody()) != `{"jsonrpc":"2.0"}` || !rb.GetEndOfStream() {
		t.Errorf("request_body %q eos=%v", rb.GetBody(), rb.GetEndOfStream())
	}
	if got := protoHeader(reqs[2].GetResponseHeaders().GetHeaders(), ":status"); !slices.Equal(got, []string{"200"}) {
		t.Errorf("response :status %q", got)
	}
	if rb := reqs[3].GetResponseBody(); !rb.GetEndOfStream() {
		t.Error("response_body without end_of_stream")
	}
	for _, r := range reqs {
		if r.GetMetadataContext() == nil {
			t.Error("metadata_context must be set (empty) on every message")
		}
	}
	st := d.Stats()
	want := PhaseCounts{RequestHeaders: 1, RequestBody: 1, ResponseHeaders: 1, ResponseBody: 1}
	if st.StreamsStarted != 1 || st.Sent != want || st.Received != want {
		t.Errorf("stats %+v", st)
	}

	t.Run("no body", func(t *testing.T) {
		rec.reset()
		resp, _ := do(t, "GET", front+"/healthz", "")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		reqs := rec.all()
		if !reqs[0].GetRequestHeaders().GetEndOfStream() || slices.Contains(rec.phases(), "request_body") {
			t.Errorf("GET: phases %v, eos %v", rec.phases(), reqs[0].GetRequestHeaders().GetEndOfStream())
		}
	})
}

func TestHeaderMutations(t *testing.T) {
	tests := []struct {
		name        string
		mut         *extprocv3.HeaderMutation
		wantStatus  int
		check       func(t *testing.T, h http.Header, r *http.Request)
		wantIgnored int64
	}{
		{name: "set overwrites", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-existing", "new")}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-Existing", "new") }},
		{name: "append adds a value", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "x-existing", RawValue: []byte("second")}, Append: wrapperspb.Bool(true)}}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-Existing", "old", "second") }},
		{name: "append_action is ignored by Envoy: ADD_IF_ABSENT overwrites", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "x-existing", RawValue: []byte("new")},
			AppendAction: corev3.HeaderValueOption_ADD_IF_ABSENT}}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-Existing", "new") }},
		{name: "append_action APPEND_IF_EXISTS_OR_ADD still overwrites", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header:       &corev3.HeaderValue{Key: "x-existing", RawValue: []byte("new")},
			AppendAction: corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD}}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-Existing", "new") }},
		{name: "remove", mut: &extprocv3.HeaderMutation{RemoveHeaders: []string{"X-Existing"}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-Existing") }},
		{name: ":path may change", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw(":path", "/rewritten?q=1")}},
			check: func(t *testing.T, _ http.Header, r *http.Request) {
				if r.URL.RequestURI() != "/rewritten?q=1" {
					t.Errorf("upstream path %s", r.URL.RequestURI())
				}
			}},
		{name: "routing and x-envoy headers are ignored", mut: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setRaw("host", "evil.example"), setRaw(":authority", "evil.example"),
				setRaw(":method", "DELETE"), setRaw(":scheme", "https"), setRaw("x-envoy-original-path", "/x"),
				setRaw("X-Envoy-Foo", "1"), setRaw("x-allowed", "yes")},
			RemoveHeaders: []string{"host", ":path", "x-envoy-keep"}},
			wantIgnored: 9,
			check: func(t *testing.T, h http.Header, r *http.Request) {
				if r.Method != "POST" || r.Host == "evil.example" || r.URL.Path != "/mcp" {
					t.Errorf("upstream got %s %s host %s", r.Method, r.URL, r.Host)
				}
				wantValues(t, h, "X-Envoy-Foo")
				wantValues(t, h, "X-Envoy-Original-Path")
				wantValues(t, h, "X-Envoy-Keep", "k")
				wantValues(t, h, "X-Allowed", "yes")
			}},
		{name: "value without raw_value sets an empty header", mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "x-new", Value: "ignored"}}}},
			check: func(t *testing.T, h http.Header, _ *http.Request) { wantValues(t, h, "X-New", "") }},
		{name: "value and raw_value both set is an error", wantStatus: 500, mut: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{{
			Header: &corev3.HeaderValue{Key: "x-new", Value: "a", RawValue: []byte("a")}}}}, wantIgnored: 1},
		{name: "invalid value is an error", wantStatus: 500, mut: &extprocv3.HeaderMutation{
			SetHeaders: []*corev3.HeaderValueOption{setRaw("x-new", "a\r\nb")}}, wantIgnored: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				if req.GetRequestHeaders() != nil {
					return one(reply(req, &extprocv3.CommonResponse{HeaderMutation: tt.mut, ClearRouteCache: true}))
				}
				return passThrough(req)
			}))
			up, seen := startUpstream(t, echo)
			d, front := startDriver(t, Config{Target: target, Upstream: up})
			resp, _ := do(t, "POST", front+"/mcp", "{}", "X-Existing", "old", "X-Envoy-Keep", "k")
			want := tt.wantStatus
			if want == 0 {
				want = 200
			}
			if resp.StatusCode != want {
				t.Fatalf("status %d, want %d", resp.StatusCode, want)
			}
			st := d.Stats()
			if st.RejectedHeaderMutations != tt.wantIgnored {
				t.Errorf("RejectedHeaderMutations = %d, want %d", st.RejectedHeaderMutations, tt.wantIgnored)
			}
			n, r, _ := seen.get()
			if want != 200 {
				if n != 0 || st.ProcessingErrors != 1 {
					t.Errorf("upstream called %d times, ProcessingErrors %d", n, st.ProcessingErrors)
				}
				return
			}
			tt.check(t, r.Header, r)
			if st.ClearRouteCache != 1 {
				t.Errorf("ClearRouteCache = %d", st.ClearRouteCache)
			}
		})
	}
}

func wantValues(t *testing.T, h http.Header, key string, want ...string) {
	t.Helper()
	if got := h.Values(key); !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", key, got, want)
	}
}

func TestBufferedBodyMutation(t *testing.T) {
	clHeader := func(n string) *extprocv3.HeaderMutation {
		return &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("content-length", n)}}
	}
	tests := []struct {
		name       string
		onHeaders  *extprocv3.CommonResponse
		onBody     *extprocv3.CommonResponse
		wantStatus int
		wantBody   string // what the upstream receives
		wantLength int64
		wantHeader string // x-from-body at the upstream
	}{
		{name: "same length, headers mutated with the body", onBody: &extprocv3.CommonResponse{BodyMutation: bodyMut(`{"b":2}`),
			HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-from-body", "1")}}},
			wantStatus: 200, wantBody: `{"b":2}`, wantLength: 7, wantHeader: "1"},
		{name: "other length with content-length left in place", onBody: &extprocv3.CommonResponse{BodyMutation: bodyMut(`{"bb":22}`)},
			wantStatus: 500},
		{name: "clear_body with content-length left in place", onBody: &extprocv3.CommonResponse{
			BodyMutation: &extprocv3.BodyMutation{Mutation: &extprocv3.BodyMutation_ClearBody{ClearBody: true}}},
			wantStatus: 500},
		{name: "other length with content-length set in the same response", onBody: &extprocv3.CommonResponse{
			HeaderMutation: clHeader("9"), BodyMutation: bodyMut(`{"bb":22}`)},
			wantStatus: 200, wantBody: `{"bb":22}`, wantLength: 9},
		{name: "other length after content-length removed with the headers", onHeaders: &extprocv3.CommonResponse{
			HeaderMutation: &extprocv3.HeaderMutation{RemoveHeaders: []string{"content-length"}}},
			onBody: &extprocv3.CommonResponse{BodyMutation: bodyMut(`{"bb":22}`)}, wantStatus: 200, wantBody: `{"bb":22}`, wantLength: -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				switch {
				case req.GetRequestHeaders() != nil:
					return one(reply(req, tt.onHeaders))
				case req.GetRequestBody() != nil:
					return one(reply(req, tt.onBody))
				}
				return passThrough(req)
			}))
			up, seen := startUpstream(t, echo)
			d, front := startDriver(t, Config{Target: target, Upstream: up})
			resp, body := do(t, "POST", front+"/mcp", `{"a":1}`)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			n, r, ubody := seen.get()
			st := d.Stats()
			if tt.wantStatus == 500 {
				if n != 0 || st.RejectedBodyMutations != 1 || body != "" || resp.Header.Get("Content-Type") != "" {
					t.Errorf("upstream calls %d, RejectedBodyMutations %d, body %q", n, st.RejectedBodyMutations, body)
				}
				return
			}
			if string(ubody) != tt.wantBody || r.ContentLength != tt.wantLength || body != tt.wantBody {
				t.Errorf("upstream got %q (length %d), client %q", ubody, r.ContentLength, body)
			}
			if got := r.Header.Get("X-From-Body"); got != tt.wantHeader {
				t.Errorf("x-from-body = %q, want %q", got, tt.wantHeader)
			}
		})
	}

	t.Run("response body", func(t *testing.T) {
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetResponseBody() != nil {
				return one(reply(req, &extprocv3.CommonResponse{BodyMutation: bodyMut("longer than before")}))
			}
			return passThrough(req)
		}))
		up, _ := startUpstream(t, echo)
		d, front := startDriver(t, Config{Target: target, Upstream: up})
		resp, _ := do(t, "POST", front+"/mcp", "short")
		if resp.StatusCode != 500 || d.Stats().RejectedBodyMutations != 1 {
			t.Fatalf("status %d, stats %+v", resp.StatusCode, d.Stats())
		}
	})
}

func TestContinueAndReplace(t *testing.T) {
	t.Run("request", func(t *testing.T) {
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetRequestHeaders() != nil {
				return one(reply(req, &extprocv3.CommonResponse{
					Status:         extprocv3.CommonResponse_CONTINUE_AND_REPLACE,
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw(":method", "PUT")}},
					BodyMutation:   bodyMut("replaced body"),
				}))
			}
			return passThrough(req)
		}))
		up, seen := startUpstream(t, echo)
		d, front := startDriver(t, Config{Target: target, Upstream: up})
		resp, body := do(t, "POST", front+"/mcp", "original")
		_, r, ubody := seen.get()
		if resp.StatusCode != 200 || string(ubody) != "replaced body" || body != "replaced body" {
			t.Fatalf("status %d, upstream %q, client %q", resp.StatusCode, ubody, body)
		}
		if r.Method != "PUT" || r.ContentLength != -1 {
			t.Errorf("upstream %s, content-length %d (Envoy removes it)", r.Method, r.ContentLength)
		}
		if st := d.Stats(); st.Sent.RequestBody != 0 {
			t.Errorf("the body phase must be skipped, stats %+v", st.Sent)
		}
	})
	t.Run("response", func(t *testing.T) {
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetResponseHeaders() != nil {
				return one(reply(req, &extprocv3.CommonResponse{
					Status: extprocv3.CommonResponse_CONTINUE_AND_REPLACE, BodyMutation: bodyMut("new"),
				}))
			}
			return passThrough(req)
		}))
		up, _ := startUpstream(t, echo)
		d, front := startDriver(t, Config{Target: target, Upstream: up})
		resp, body := do(t, "POST", front+"/mcp", "old body")
		if resp.StatusCode != 200 || body != "new" || d.Stats().Sent.ResponseBody != 0 {
			t.Fatalf("status %d body %q stats %+v", resp.StatusCode, body, d.Stats().Sent)
		}
	})
}

func TestImmediateResponse(t *testing.T) {
	tests := []struct {
		name            string
		resp            *extprocv3.ProcessingResponse
		wantStatus      int
		wantBody        string
		wantContentType string
		wantHeader      string
	}{
		{"text body gets text/plain", immediate(403, "denied", setRaw("x-reason", "policy"), setRaw("x-envoy-nope", "1")),
			403, "denied", "text/plain", "policy"},
		{"processor content-type kept", immediate(400, `{"e":1}`, setRaw("content-type", "application/json")),
			400, `{"e":1}`, "application/json", ""},
		{"empty body drops content-type", immediate(401, "", setRaw("content-type", "application/json"), setRaw("x-reason", "auth")),
			401, "", "", "auth"},
		{"no status means 200", immediate(0, "ok"), 200, "ok", "text/plain", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
				return one(tt.resp)
			}))
			up, seen := startUpstream(t, echo)
			d, front := startDriver(t, Config{Target: target, Upstream: up})
			resp, body := do(t, "POST", front+"/mcp", "{}")
			if resp.StatusCode != tt.wantStatus || body != tt.wantBody || resp.Header.Get("Content-Type") != tt.wantContentType ||
				resp.Header.Get("X-Reason") != tt.wantHeader || resp.Header.Get("X-Envoy-Nope") != "" {
				t.Fatalf("got %d %q headers %v", resp.StatusCode, body, resp.Header)
			}
			if n, _, _ := seen.get(); n != 0 {
				t.Error("upstream was called")
			}
			if st := d.Stats(); st.ImmediateResponses != 1 || st.LocalReplies != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}

	t.Run("on response headers", func(t *testing.T) {
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetResponseHeaders() != nil {
				return one(immediate(502, "upstream said no"))
			}
			return passThrough(req)
		}))
		up, _ := startUpstream(t, echo)
		_, front := startDriver(t, Config{Target: target, Upstream: up})
		resp, body := do(t, "POST", front+"/mcp", "{}")
		if resp.StatusCode != 502 || body != "upstream said no" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	})

	t.Run("after the response started resets the stream", func(t *testing.T) {
		chunks := 0
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetResponseBody() != nil {
				chunks++
				if chunks == 2 {
					return one(immediate(500, "too late"))
				}
			}
			return passThrough(req)
		}))
		proceed := make(chan struct{})
		up, _ := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: one\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-proceed:
			case <-time.After(testTimeout):
			}
			_, _ = io.WriteString(w, "data: two\n\n")
		})
		d, front := startDriver(t, Config{Target: target, Upstream: up, Mode: &extprocfilterv3.ProcessingMode{
			RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}})
		resp, err := testClient.Post(front+"/mcp", "application/json", stringsReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if ev := readEvent(t, br); ev != "data: one\n\n" {
			t.Fatalf("first event %q", ev)
		}
		close(proceed)
		rest, err := io.ReadAll(br)
		if err == nil {
			t.Fatalf("read %q without error, want a broken stream", rest)
		}
		poll.Until(t, testTimeout, "the condition", func() bool { return d.Stats().StreamResets == 1 })
	})
}

func readEvent(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for {
		line, err := br.ReadString('\n')
		b.WriteString(line)
		if err != nil {
			t.Fatalf("reading event: %v (got %q)", err, b.String())
		}
		if line == "\n" {
			return b.String()
		}
	}
}

func TestSpuriousResponses(t *testing.T) {
	wrongPhase := func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		if req.GetRequestHeaders() != nil {
			return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseBody{
				ResponseBody: &extprocv3.BodyResponse{}}})
		}
		return passThrough(req)
	}
	tests := []struct {
		name string
		fn   func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse
	}{
		{"response for another phase", wrongPhase},
		{"response headers answer for request headers", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetRequestHeaders() != nil {
				return one(&extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ResponseHeaders{
					ResponseHeaders: &extprocv3.HeadersResponse{}}})
			}
			return passThrough(req)
		}},
		{"second response for one message", func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetRequestHeaders() != nil {
				return []*extprocv3.ProcessingResponse{reply(req, nil), reply(req, nil)}
			}
			return nil // never answer anything else
		}},
		{"empty response", func(*extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			return one(&extprocv3.ProcessingResponse{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := startProcessor(t, eachMessage(tt.fn))
			up, _ := startUpstream(t, echo)
			mode := &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
			d, front := startDriver(t, Config{Target: target, Upstream: up, Mode: mode})
			resp, _ := do(t, "POST", front+"/mcp", "{}")
			if st := d.Stats(); resp.StatusCode != 500 || st.SpuriousMessages != 1 {
				t.Fatalf("status %d, stats %+v", resp.StatusCode, st)
			}
		})
	}
	t.Run("streamed_response outside full duplex", func(t *testing.T) {
		// The upstream ends its body only after the processor saw the first
		// chunk, so the chunk is streamed, not buffered as a complete body.
		bodySeen := make(chan struct{})
		var once sync.Once
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetResponseBody() != nil {
				once.Do(func() { close(bodySeen) })
				return one(reply(req, &extprocv3.CommonResponse{BodyMutation: &extprocv3.BodyMutation{
					Mutation: &extprocv3.BodyMutation_StreamedResponse{StreamedResponse: &extprocv3.StreamedBodyResponse{Body: []byte("x")}}}}))
			}
			return passThrough(req)
		}))
		up, _ := startUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			_, _ = io.WriteString(w, "data")
			w.(http.Flusher).Flush()
			select {
			case <-bodySeen:
			case <-time.After(testTimeout):
			}
		})
		mode := &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
		d, front := startDriver(t, Config{Target: target, Upstream: up, Mode: mode})
		resp, err := testClient.Get(front + "/mcp")
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		// Headers were already sent downstream: the 500 becomes a reset.
		if st := d.Stats(); err == nil || st.SpuriousMessages != 1 || st.StreamResets != 1 {
			t.Fatalf("read error %v, stats %+v", err, st)
		}
	})
	t.Run("failure mode allow continues unprocessed", func(t *testing.T) {
		target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
			if req.GetRequestHeaders() != nil {
				// Spurious, then a mutation that must not be applied.
				return []*extprocv3.ProcessingResponse{wrongPhase(req)[0], reply(req, &extprocv3.CommonResponse{
					HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-late", "1")}}})}
			}
			return passThrough(req)
		}))
		up, seen := startUpstream(t, echo)
		d, front := startDriver(t, Config{Target: target, Upstream: up, FailureModeAllow: true})
		resp, body := do(t, "POST", front+"/mcp", "{}")
		_, r, _ := seen.get()
		if st := d.Stats(); resp.StatusCode != 200 || body != "{}" || st.SpuriousMessages != 1 || st.FailureModeAllowed != 1 || r.Header.Get("X-Late") != "" {
			t.Fatalf("status %d body %q stats %+v", resp.StatusCode, body, st)
		}
		if st := d.Stats(); st.Sent.ResponseHeaders != 0 {
			t.Errorf("nothing more may go to the processor, sent %+v", st.Sent)
		}
	})
}

func TestMessageTimeouts(t *testing.T) {
	override := func(d time.Duration) *extprocv3.ProcessingResponse {
		return &extprocv3.ProcessingResponse{OverrideMessageTimeout: durationpb.New(d)}
	}
	// slowHeaders answers request headers with pre, then after delay with the
	// real answer; everything else immediately.
	slowHeaders := func(delay time.Duration, pre ...*extprocv3.ProcessingResponse) processFunc {
		return func(srv extprocv3.ExternalProcessor_ProcessServer) error {
			for {
				req, err := srv.Recv()
				if err != nil {
					return nil
				}
				if req.GetRequestHeaders() != nil {
					for _, p := range pre {
						if err := srv.Send(p); err != nil {
							return nil
						}
					}
					select {
					case <-time.After(delay):
					case <-srv.Context().Done():
						return nil
					}
				}
				if err := srv.Send(passThrough(req)[0]); err != nil {
					return nil
				}
			}
		}
	}
	tests := []struct {
		name         string
		cfg          Config
		process      processFunc
		wantStatus   int
		wantTimeouts int64
		wantOverride [2]int64 // received, ignored
	}{
		{name: "no answer", cfg: Config{MessageTimeout: 100 * time.Millisecond},
			process: slowHeaders(testTimeout), wantStatus: 504, wantTimeouts: 1},
		{name: "no answer with failure_mode_allow", cfg: Config{MessageTimeout: 100 * time.Millisecond, FailureModeAllow: true},
			process: slowHeaders(testTimeout), wantStatus: 200, wantTimeouts: 1},
		{name: "override within max", cfg: Config{MessageTimeout: 100 * time.Millisecond, MaxMessageTimeout: 5 * time.Second},
			process: slowHeaders(400*time.Millisecond, override(3*time.Second)), wantStatus: 200, wantOverride: [2]int64{1, 0}},
		{name: "override without max_message_timeout", cfg: Config{MessageTimeout: 100 * time.Millisecond},
			process: slowHeaders(testTimeout, override(3*time.Second)), wantStatus: 504, wantTimeouts: 1, wantOverride: [2]int64{0, 1}},
		{name: "override above max", cfg: Config{MessageTimeout: 100 * time.Millisecond, MaxMessageTimeout: time.Second},
			process: slowHeaders(testTimeout, override(3*time.Second)), wantStatus: 504, wantTimeouts: 1, wantOverride: [2]int64{0, 1}},
		{name: "only one override per message", cfg: Config{MessageTimeout: 100 * time.Millisecond, MaxMessageTimeout: 5 * time.Second},
			process: slowHeaders(testTimeout, override(300*time.Millisecond), override(3*time.Second)), wantStatus: 504,
			wantTimeouts: 1, wantOverride: [2]int64{1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, seen := startUpstream(t, echo)
			cfg := tt.cfg
			cfg.Target, cfg.Upstream = startProcessor(t, tt.process), up
			d, front := startDriver(t, cfg)
			resp, body := do(t, "POST", front+"/mcp", "{}")
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			st := d.Stats()
			if st.MessageTimeouts != tt.wantTimeouts || st.OverrideTimeoutsReceived != tt.wantOverride[0] || st.OverrideTimeoutsIgnored != tt.wantOverride[1] {
				t.Errorf("stats %+v", st)
			}
			if n, _, _ := seen.get(); (n == 1) != (tt.wantStatus == 200) {
				t.Errorf("upstream called %d times", n)
			}
		})
	}
}

func TestStreamFailures(t *testing.T) {
	closedPort := func(t *testing.T) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		lis.Close()
		return addr
	}
	tests := []struct {
		name       string
		target     func(t *testing.T) string
		fma        bool
		wantStatus int
		check      func(t *testing.T, st Stats)
	}{
		{name: "gRPC error", target: func(t *testing.T) string {
			return startProcessor(t, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
				_, _ = srv.Recv()
				return status.Error(codes.Internal, "boom")
			})
		}, wantStatus: 500, check: func(t *testing.T, st Stats) {
			if st.StreamsFailed != 1 {
				t.Errorf("stats %+v", st)
			}
		}},
		{name: "gRPC error with failure_mode_allow", fma: true, target: func(t *testing.T) string {
			return startProcessor(t, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
				_, _ = srv.Recv()
				return status.Error(codes.Internal, "boom")
			})
		}, wantStatus: 200},
		{name: "OK close before answering continues unprocessed", target: func(t *testing.T) string {
			return startProcessor(t, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
				_, _ = srv.Recv()
				return nil
			})
		}, wantStatus: 200, check: func(t *testing.T, st Stats) {
			if st.StreamsClosedByServer != 1 || st.FailureModeAllowed != 0 {
				t.Errorf("stats %+v", st)
			}
		}},
		{name: "unreachable processor", target: closedPort, wantStatus: 500, check: func(t *testing.T, st Stats) {
			if st.StreamsFailed != 1 || st.StreamsStarted != 0 {
				t.Errorf("stats %+v", st)
			}
		}},
		{name: "unreachable processor with failure_mode_allow", target: closedPort, fma: true, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up, _ := startUpstream(t, echo)
			d, front := startDriver(t, Config{Target: tt.target(t), Upstream: up, FailureModeAllow: tt.fma})
			resp, body := do(t, "POST", front+"/mcp", "{}")
			if resp.StatusCode != tt.wantStatus || (tt.wantStatus == 200 && body != "{}") {
				t.Fatalf("got %d %q, want %d", resp.StatusCode, body, tt.wantStatus)
			}
			if tt.check != nil {
				tt.check(t, d.Stats())
			}
		})
	}
}

func TestUpstreamUnreachable(t *testing.T) {
	var rec recorder
	target := startProcessor(t, rec.wrap(passThrough))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &url.URL{Scheme: "http", Host: lis.Addr().String()}
	lis.Close()
	d, front := startDriver(t, Config{Target: target, Upstream: up})
	resp, body := do(t, "POST", front+"/mcp", "{}")
	if resp.StatusCode != 503 || !strings.HasPrefix(body, "upstream connect error") || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("got %d %q %v", resp.StatusCode, body, resp.Header)
	}
	// The router's local reply goes through the ext_proc filter's encoder.
	if got := rec.phases(); !slices.Equal(got, []string{"request_headers", "request_body", "response_headers", "response_body"}) {
		t.Errorf("phases %v", got)
	}
	if st := d.Stats(); st.UpstreamFailures != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestBufferLimit(t *testing.T) {
	t.Run("request body 413", func(t *testing.T) {
		var rec recorder
		target := startProcessor(t, rec.wrap(passThrough))
		up, seen := startUpstream(t, echo)
		_, front := startDriver(t, Config{Target: target, Upstream: up, BufferLimit: 1024})
		resp, body := do(t, "POST", front+"/mcp", strings.Repeat("a", 1025))
		if resp.StatusCode != 413 || body != "Payload Too Large" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		if n, _, _ := seen.get(); n != 0 {
			t.Error("upstream was called")
		}
		// The filter manager's 413 goes through the ext_proc encoder.
		if got := rec.phases(); !slices.Contains(got, "response_headers") {
			t.Errorf("phases %v", got)
		}
	})
	t.Run("request body at the limit", func(t *testing.T) {
		target := startProcessor(t, eachMessage(passThrough))
		up, _ := startUpstream(t, echo)
		_, front := startDriver(t, Config{Target: target, Upstream: up, BufferLimit: 1024})
		if resp, _ := do(t, "POST", front+"/mcp", strings.Repeat("a", 1024)); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("response body 500", func(t *testing.T) {
		target := startProcessor(t, eachMessage(passThrough))
		up, _ := startUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			_, _ = io.WriteString(w, strings.Repeat("b", 5000))
		})
		_, front := startDriver(t, Config{Target: target, Upstream: up, BufferLimit: 1024})
		resp, body := do(t, "POST", front+"/mcp", "{}")
		if resp.StatusCode != 500 || body != "Internal Server Error" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	})
}

// sseProcessor switches text/event-stream responses to STREAMED and records
// every response chunk it returns.
func sseProcessor(out *recorder) processFunc {
	return out.wrap(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		if rh := req.GetResponseHeaders(); rh != nil {
			if ct := protoHeader(rh.GetHeaders(), "content-type"); len(ct) == 1 && strings.HasPrefix(ct[0], "text/event-stream") {
				r := reply(req, nil)
				r.ModeOverride = &extprocfilterv3.ProcessingMode{
					RequestBodyMode:  extprocfilterv3.ProcessingMode_BUFFERED,
					ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED,
				}
				return one(r)
			}
		}
		return passThrough(req)
	})
}

func TestModeOverrideStreamsSSE(t *testing.T) {
	var rec recorder
	target := startProcessor(t, sseProcessor(&rec))
	proceed := make(chan struct{})
	up, _ := startUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select { // event 2 is only written once the client has event 1
		case <-proceed:
		case <-time.After(testTimeout):
			return
		}
		_, _ = io.WriteString(w, "event: message\ndata: {\"n\":2}\n\n")
	})
	d, front := startDriver(t, Config{Target: target, Upstream: up, AllowModeOverride: true})
	resp, err := testClient.Post(front+"/mcp", "application/json", stringsReader(`{"jsonrpc":"2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if ev := readEvent(t, br); ev != "event: message\ndata: {\"n\":1}\n\n" {
		t.Fatalf("event 1: %q", ev)
	}
	close(proceed)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "event: message\ndata: {\"n\":2}\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	st := d.Stats()
	if st.ModeOverrides != 1 || st.Sent.ResponseBody < 2 || st.Sent.RequestBody != 1 {
		t.Errorf("stats %+v", st)
	}
	var last *extprocv3.HttpBody
	for _, r := range rec.all() {
		if rb := r.GetResponseBody(); rb != nil {
			last = rb
		}
	}
	if !last.GetEndOfStream() {
		t.Error("the last response_body must carry end_of_stream")
	}

	t.Run("ignored without allow_mode_override", func(t *testing.T) {
		var rec recorder
		target := startProcessor(t, sseProcessor(&rec))
		up, _ := startUpstream(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "data: 2\n\n")
		})
		d, front := startDriver(t, Config{Target: target, Upstream: up})
		_, body := do(t, "POST", front+"/mcp", "{}")
		if st := d.Stats(); body != "data: 1\n\ndata: 2\n\n" || st.ModeOverridesIgnored != 1 || st.Sent.ResponseBody != 1 {
			t.Fatalf("body %q stats %+v", body, st)
		}
	})
}

func TestStreamedRequestBody(t *testing.T) {
	var rec recorder
	target := startProcessor(t, rec.wrap(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		if rb := req.GetRequestBody(); rb != nil {
			// Header mutations in a STREAMED body response are ignored.
			return one(reply(req, &extprocv3.CommonResponse{BodyMutation: bodyMut(strings.ToUpper(string(rb.GetBody()))),
				HeaderMutation: &extprocv3.HeaderMutation{SetHeaders: []*corev3.HeaderValueOption{setRaw("x-from-body", "1")}}}))
		}
		return passThrough(req)
	}))
	up, seen := startUpstream(t, echo)
	_, front := startDriver(t, Config{Target: target, Upstream: up, Mode: &extprocfilterv3.ProcessingMode{
		RequestBodyMode: extprocfilterv3.ProcessingMode_STREAMED}})
	pr, pw := io.Pipe()
	go func() {
		for _, part := range []string{"abc", "def", "ghi"} {
			_, _ = io.WriteString(pw, part)
			time.Sleep(20 * time.Millisecond)
		}
		pw.Close()
	}()
	resp, err := testClient.Post(front+"/mcp", "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	_, r, ubody := seen.get()
	if string(ubody) != "ABCDEFGHI" || string(b) != "ABCDEFGHI" || r.ContentLength != -1 || r.Header.Get("X-From-Body") != "" {
		t.Fatalf("upstream %q (length %d, headers %v), client %q", ubody, r.ContentLength, r.Header, b)
	}
	var bodies int
	for _, req := range rec.all() {
		if req.GetRequestBody() != nil {
			bodies++
		}
	}
	if bodies < 2 {
		t.Errorf("want the body streamed in several messages, got %d", bodies)
	}
}

func TestAttributesAndMetadata(t *testing.T) {
	var rec recorder
	var gotMD metadata.MD
	target := startProcessor(t, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
		gotMD, _ = metadata.FromIncomingContext(srv.Context())
		return rec.wrap(passThrough)(srv)
	})
	up, _ := startUpstream(t, echo)
	routeMD := map[string]map[string]any{"mcpgate": {"route": "tenant-a", "limits": map[string]any{"rps": 5.0}}}
	_, front := startDriver(t, Config{Target: target, Upstream: up, RouteMetadata: routeMD, RouteName: "mcp",
		RequestAttributes:   []string{"xds.route_metadata", "xds.route_name", "request.path", "request.method", "source.port", "no.such.attribute"},
		ResponseAttributes:  []string{"response.code"},
		GRPCInitialMetadata: map[string]string{"x-mcpgate-route": "tenant-a"}})
	do(t, "POST", front+"/mcp?a=b", "{}")

	if got := gotMD.Get("x-mcpgate-route"); !slices.Equal(got, []string{"tenant-a"}) {
		t.Errorf("initial metadata %v", gotMD)
	}
	reqs := rec.all()
	attrs := reqs[0].GetAttributes()[filterName].GetFields()
	if attrs["request.path"].GetStringValue() != "/mcp?a=b" || attrs["request.method"].GetStringValue() != "POST" ||
		attrs["xds.route_name"].GetStringValue() != "mcp" || attrs["source.port"].GetNumberValue() == 0 {
		t.Errorf("attributes %v", attrs)
	}
	if _, ok := attrs["no.such.attribute"]; ok {
		t.Error("unknown attributes must be left out")
	}
	var md corev3.Metadata
	if err := prototext.Unmarshal([]byte(attrs["xds.route_metadata"].GetStringValue()), &md); err != nil {
		t.Fatalf("xds.route_metadata %q: %v", attrs["xds.route_metadata"].GetStringValue(), err)
	}
	want, _ := routeMetadata(routeMD)
	if !proto.Equal(&md, want) {
		t.Errorf("route metadata %v, want %v", &md, want)
	}
	if reqs[1].GetAttributes() != nil {
		t.Error("request attributes must be sent once")
	}
	if reqs[2].GetAttributes()[filterName].GetFields()["response.code"].GetNumberValue() != 200 {
		t.Errorf("response attributes %v", reqs[2].GetAttributes())
	}
}

func TestMetadataDebugString(t *testing.T) {
	md, err := routeMetadata(map[string]map[string]any{
		"b": {"s": "q\"é\n", "n": 1.5, "big": 1e21, "t": true, "nil": nil, "l": []any{"x", 2.0}, "e": map[string]any{}},
		"a": {},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `filter_metadata { key: "a" value { } } filter_metadata { key: "b" value { ` +
		`fields { key: "big" value { number_value: 1e+21 } } fields { key: "e" value { struct_value { } } } ` +
		`fields { key: "l" value { list_value { values { string_value: "x" } values { number_value: 2 } } } } ` +
		`fields { key: "n" value { number_value: 1.5 } } fields { key: "nil" value { null_value: NULL_VALUE } } ` +
		`fields { key: "s" value { string_value: "q\"\303\251\n" } } fields { key: "t" value { bool_value: true } } } }`
	if got := metadataDebugString(md); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestClientDisconnect(t *testing.T) {
	target := startProcessor(t, eachMessage(passThrough))
	up, _ := startUpstream(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	_, front := startDriver(t, Config{Target: target, Upstream: up, Mode: &extprocfilterv3.ProcessingMode{
		ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", front+"/sse", nil)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, bufio.NewReader(resp.Body)); ev != "data: 1\n\n" {
		t.Fatalf("event %q", ev)
	}
	cancel()
	resp.Body.Close()
	// Cleanup closes the front server, which waits for the handler: it must
	// notice the client went away and return.
}

// TestKeptAliveConnections sends requests with bodies one after another
// on kept-alive connections, eight at a time, as agents do: every answer
// must carry the upstream's body (ending one request must not touch the
// connection the next request arrives on).
func TestKeptAliveConnections(t *testing.T) {
	target := startProcessor(t, eachMessage(passThrough))
	up, _ := startUpstream(t, echo)
	_, front := startDriver(t, Config{Target: target, Upstream: up, Mode: &extprocfilterv3.ProcessingMode{
		RequestBodyMode: extprocfilterv3.ProcessingMode_BUFFERED, ResponseBodyMode: extprocfilterv3.ProcessingMode_BUFFERED}})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Go(func() {
			client := &http.Client{Timeout: testTimeout, Transport: &http.Transport{MaxConnsPerHost: 1}}
			defer client.CloseIdleConnections()
			for i := range 100 {
				want := fmt.Sprintf(`{"client":%d,"call":%d}`, c, i)
				resp, err := client.Post(front+"/mcp", "application/json", strings.NewReader(want))
				if err != nil {
					errs <- fmt.Errorf("client %d call %d: %w", c, i, err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 || string(got) != want {
					errs <- fmt.Errorf("client %d call %d: HTTP %d, body %q (%v), want %q", c, i, resp.StatusCode, got, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAnsweredBeforeTheBody: a request the processor answers at its
// headers, while the client has sent only part of its body, gets that
// answer, and then the connection is closed rather than read for another
// request (as Envoy closes a connection whose request it answered before
// the body ended); the handler does not wait for the rest of the body.
func TestAnsweredBeforeTheBody(t *testing.T) {
	target := startProcessor(t, eachMessage(func(req *extprocv3.ProcessingRequest) []*extprocv3.ProcessingResponse {
		return one(immediate(403, "denied"))
	}))
	up, seen := startUpstream(t, echo)
	_, front := startDriver(t, Config{Target: target, Upstream: up})
	u, _ := url.Parse(front)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(testTimeout))
	if _, err := io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"partial\":"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || string(body) != "denied" || !resp.Close {
		t.Fatalf("got %d %q, Connection: close %v", resp.StatusCode, body, resp.Close)
	}
	// The rest of the body, then a second request: neither is read.
	_, _ = io.WriteString(conn, strings.Repeat(" ", 89)+"}POST /mcp HTTP/1.1\r\nHost: "+u.Host+"\r\nContent-Length: 2\r\n\r\n{}")
	if n, err := br.Read(make([]byte, 1)); err == nil {
		t.Fatalf("the connection was read for another request: %d bytes of an answer", n)
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the connection stayed open")
	}
	if n, _, _ := seen.get(); n != 0 {
		t.Error("upstream was called")
	}
}

// TestGracefulCloseAfterClose: an exchange can end after the driver's
// Close has begun (an HTTP server's Close does not wait for its handlers);
// its side stream is then reset at once rather than closed gracefully in
// the background, which Close would not wait for (and whose start would
// race Close's wait).
func TestGracefulCloseAfterClose(t *testing.T) {
	opened := make(chan struct{})
	target := startProcessor(t, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
		close(opened)
		<-srv.Context().Done()
		return nil
	})
	up, _ := startUpstream(t, echo)
	d, err := New(Config{Target: target, Upstream: up, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	loop := make(chan struct{})
	defer close(loop)
	s := d.openSidestream(context.Background(), make(chan recvResult, 4), loop)
	s.send(&extprocv3.ProcessingRequest{})
	select {
	case <-opened:
	case <-time.After(testTimeout):
		t.Fatal("the side stream did not open")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	s.closeGracefully()
	if s.ctx.Err() == nil {
		t.Error("a side stream closed after the driver's Close is not reset at once")
	}
}
