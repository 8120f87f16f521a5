package envoydriver

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// sseCase is one fuzz input: the SSE body and where the upstream cuts it.
type sseCase struct {
	pieces [][]byte
}

// splitBody cuts body into pieces whose sizes cycle through sizes (each 1..8
// bytes, so cuts land inside multi-byte UTF-8 sequences).
func splitBody(body, sizes []byte) [][]byte {
	if len(sizes) == 0 {
		sizes = []byte{0}
	}
	var out [][]byte
	for i := 0; len(body) > 0; i++ {
		n := min(int(sizes[i%len(sizes)]%8)+1, len(body))
		out = append(out, body[:n])
		body = body[n:]
	}
	return out
}

// FuzzStreamedChunks splits an SSE response into arbitrary chunk boundaries
// and checks that, with the body switched to STREAMED by mode_override, the
// client receives exactly what the processor returned: the processor passes
// even chunks through untouched and returns odd chunks as an explicit
// (identical) body mutation.
func FuzzStreamedChunks(f *testing.F) {
	f.Add([]byte("event: message\ndata: {\"text\":\"héllo 世界 🎉\"}\n\n"), []byte{1, 2, 3, 5, 8})
	f.Add([]byte("data: ü\n\ndata: 😀😀\n\n: comment\n\n"), []byte{6, 0, 2})
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\r\n\r\n"), []byte{7})
	f.Add([]byte("\xe4\xb8\x96\xe7"), []byte{1})
	f.Add([]byte{}, []byte{3})

	var (
		cases     sync.Map // id → *sseCase
		outputs   sync.Map // id → *bytes.Buffer the processor returned
		nextID    atomic.Int64
		outputsMu sync.Mutex
	)
	target := startProcessor(f, func(srv extprocv3.ExternalProcessor_ProcessServer) error {
		var id string
		chunk := 0
		for {
			req, err := srv.Recv()
			if err != nil {
				return nil
			}
			resp := reply(req, nil)
			switch {
			case req.GetRequestHeaders() != nil:
				p := protoHeader(req.GetRequestHeaders().GetHeaders(), ":path")
				id = strings.TrimPrefix(p[0], "/sse/")
			case req.GetResponseHeaders() != nil:
				resp.ModeOverride = &extprocfilterv3.ProcessingMode{ResponseBodyMode: extprocfilterv3.ProcessingMode_STREAMED}
			case req.GetResponseBody() != nil:
				b := req.GetResponseBody().GetBody()
				if chunk%2 == 1 {
					resp = reply(req, &extprocv3.CommonResponse{BodyMutation: bodyMut(string(b))})
				}
				chunk++
				v, _ := outputs.LoadOrStore(id, &bytes.Buffer{})
				outputsMu.Lock()
				v.(*bytes.Buffer).Write(b)
				outputsMu.Unlock()
			}
			if err := srv.Send(resp); err != nil {
				return nil
			}
		}
	})
	up, _ := startUpstream(f, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		v, ok := cases.Load(strings.TrimPrefix(r.URL.Path, "/sse/"))
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range v.(*sseCase).pieces {
			_, _ = w.Write(p)
			w.(http.Flusher).Flush()
		}
	})
	_, front := startDriver(f, Config{Target: target, Upstream: up, AllowModeOverride: true,
		MessageTimeout: testTimeout, Logf: func(string, ...any) {}})

	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		if len(body) > 64<<10 {
			t.Skip("body too large")
		}
		id := strconv.FormatInt(nextID.Add(1), 10)
		cases.Store(id, &sseCase{pieces: splitBody(body, sizes)})
		defer cases.Delete(id)
		defer outputs.Delete(id)

		client := &http.Client{Timeout: 10 * time.Second}
		resp, err := client.Get(front + "/sse/" + id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("reading response: %v", err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %q", resp.StatusCode, got)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("client got %q, upstream sent %q", got, body)
		}
		var processed []byte
		if v, ok := outputs.Load(id); ok {
			outputsMu.Lock()
			processed = bytes.Clone(v.(*bytes.Buffer).Bytes())
			outputsMu.Unlock()
		}
		if !bytes.Equal(got, processed) {
			t.Fatalf("client got %q, processor returned %q", got, processed)
		}
	})
}
