package e2e

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/policy"
)

// answers is a hand-written upstream whose answers do not fit as they
// come: compressed although mcpgate asks for identity, another request's
// id, a stream cut inside its last event, an empty body. It chooses by the
// request id; every answer to tools/list lists one declared tool and one
// undeclared (which must never reach the client).
func answers(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	_ = json.NewDecoder(r.Body).Decode(&req)
	id := string(req.ID)
	list := []byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"lookup"},{"name":"shadow_tool"}]}}`)
	event := func(data []byte) []byte { return []byte("event: message\ndata: " + string(data) + "\n\n") }
	jsonAnswer := func(enc string, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if enc != "" {
			w.Header().Set("Content-Encoding", enc)
		}
		_, _ = w.Write(body)
	}
	switch id {
	case "1":
		jsonAnswer("gzip", gzipped(list))
	case "2":
		jsonAnswer("deflate", zlibbed(list))
	case "3": // gzip applied first, then deflate (RFC 9110 §8.4: in order)
		jsonAnswer("gzip, deflate", zlibbed(gzipped(list)))
	case "4": // the same, as two fields
		w.Header()["Content-Encoding"] = []string{"GZIP", "deflate"}
		jsonAnswer("", zlibbed(gzipped(list)))
	case "5":
		jsonAnswer("br", []byte{0x1b, 0x03, 0x00, 0xf8})
	case "6": // 2 MiB of JSON, a few KiB compressed: over the 1 MiB limit
		jsonAnswer("gzip", gzipped([]byte(`{"jsonrpc":"2.0","id":6,"result":{"tools":[],"x":"`+strings.Repeat("a", 2<<20)+`"}}`)))
	case "7":
		jsonAnswer("gzip", []byte("\x1f\x8b\x08\x00 not gzip"))
	case "8": // raw deflate, no zlib header: not RFC 9110 deflate
		jsonAnswer("deflate", rawDeflated(list))
	case "9":
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(gzipped(event(list)))
	case "10":
		jsonAnswer("", []byte(`{"jsonrpc":"2.0","id":"other","result":{"tools":[{"name":"lookup"},{"name":"shadow_tool"}]}}`))
	case "11": // a progress notification, another request's answer, then its own
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(event([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)))
		_, _ = w.Write(event([]byte(`{"jsonrpc":"2.0","id":99,"result":{"tools":[{"name":"shadow_tool"}]}}`)))
		_, _ = w.Write(event(list))
	case "12": // the last event lacks its terminating blank line
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(event([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)))
		_, _ = w.Write([]byte("event: message\ndata: " + string(list) + "\n"))
	case "13": // Content-Length: 0
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(200)
	case "14": // chunked, no bytes
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
	case "15": // the id rewritten as a number of the same value
		jsonAnswer("gzip", gzipped([]byte(`{"jsonrpc":"2.0","id":15.0,"result":{"tools":[{"name":"lookup"},{"name":"shadow_tool"}]}}`)))
	case "16": // a tool call, whose answer mcpgate would not otherwise read
		jsonAnswer("gzip", gzipped([]byte(`{"jsonrpc":"2.0","id":16,"result":{}}`)))
	case "": // a notification
		w.WriteHeader(202)
	default:
		jsonAnswer("", list)
	}
}

func zlibbed(b []byte) []byte {
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func rawDeflated(b []byte) []byte {
	var buf bytes.Buffer
	w, _ := flate.NewWriter(&buf, flate.DefaultCompression)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

// TestDifferentialAnswers: upstream answers that are compressed, answer
// another request, end inside an event or carry nothing reach the client
// the same way through the standalone proxy and through Envoy + ext_proc:
// decoded, filtered and uncompressed, or replaced by a JSON-RPC error for
// the request's id that says why. A declared body over the limit is
// refused before it is read, through both.
func TestDifferentialAnswers(t *testing.T) {
	e := startDifferential(t, differentialUpstream{name: "answers", handler: http.HandlerFunc(answers),
		tools: map[string]policy.ToolDeclaration{"lookup": {Effect: policy.EffectRead}}})
	list := func(id string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + id + `,"method":"tools/list","params":{` + meta26 + `}}`)
	}
	hdr := toHeader(v26("tools/list", ""))
	// The client takes no coding: a compressed relay would show in the body.
	hdr.Set("Accept-Encoding", "identity")
	filtered := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"lookup"}]}}`
	}
	failure := func(id, message string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":"` + message + `"}}`
	}
	const (
		ctJSON = "application/json"
		sseCT  = "text/event-stream"
	)
	tests := []struct {
		name   string
		id     string
		status int
		ct     string
		body   string // exact, or a part when contains
		part   bool
	}{
		{"gzip JSON decoded and filtered", "1", 200, ctJSON, filtered("1"), false},
		{"deflate (zlib) JSON decoded and filtered", "2", 200, ctJSON, filtered("2"), false},
		{"stacked gzip, deflate undone in reverse", "3", 200, ctJSON, filtered("3"), false},
		{"stacked codings in two fields", "4", 200, ctJSON, filtered("4"), false},
		{"br refused, named", "5", 502, ctJSON, failure("5", `The upstream MCP server compressed its answer with Content-Encoding \"br\", which mcpgate cannot decode (it decodes gzip and deflate); the answer was withheld.`), false},
		{"gzip bomb over the body limit", "6", 502, ctJSON, failure("6", `The upstream MCP server's answer decodes (Content-Encoding \"gzip\") to more than 1048576 bytes (limits.max_body_bytes); the answer was withheld.`), false},
		{"corrupt gzip", "7", 502, ctJSON, failure("7", `The upstream MCP server's answer is not valid \"gzip\" data; the answer was withheld.`), false},
		{"raw deflate without the zlib header", "8", 502, ctJSON, failure("8", `The upstream MCP server's answer is not valid \"deflate\" data; the answer was withheld.`), false},
		{"gzip event stream refused, named", "9", 502, ctJSON, failure("9", `The upstream MCP server compressed its event stream (Content-Encoding \"gzip\"); mcpgate relays event streams uncompressed only, and the answer was withheld.`), false},
		{"JSON answer with another id", "10", 502, ctJSON, failure("10", "The upstream MCP server answered with another request's id; the answer was withheld."), false},
		{"SSE answer with another id", "11", 200, sseCT, "data: " + failure("11", "The upstream MCP server answered with another request's id; the answer was withheld.") + "\n\n", true},
		{"last SSE event cut off", "12", 200, sseCT, "data: " + failure("12", "The upstream MCP server's stream ended in the middle of an event; the incomplete event was discarded and the call may or may not have taken effect.") + "\n\n", true},
		{"empty 200 (Content-Length: 0)", "13", 502, ctJSON, failure("13", "The upstream MCP server answered the request with an empty body; the call may or may not have taken effect."), false},
		{"empty 200 (chunked)", "14", 502, ctJSON, failure("14", "The upstream MCP server answered the request with an empty body; the call may or may not have taken effect."), false},
		{"id written differently still matches", "15", 200, ctJSON, `{"jsonrpc":"2.0","id":15.0,"result":{"tools":[{"name":"lookup"}]}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			direct, _ := e.both(t, "answers", hdr, list(tt.id))
			if direct.Status != tt.status || direct.ContentType != tt.ct {
				t.Errorf("status %d %q, want %d %q", direct.Status, direct.ContentType, tt.status, tt.ct)
			}
			if tt.part && !strings.Contains(direct.Body, tt.body) || !tt.part && direct.Body != tt.body {
				t.Errorf("body:\n%s\nwant (part: %v):\n%s", direct.Body, tt.part, tt.body)
			}
			if strings.Contains(direct.Body, "shadow_tool") {
				t.Error("an undeclared tool was relayed")
			}
		})
	}
	t.Run("decoded answers carry no coding and their own length", func(t *testing.T) {
		for _, id := range []string{"1", "2", "3", "4"} {
			for _, base := range []string{e.proxy, e.drivers["answers"].URL} {
				req, _ := http.NewRequest("POST", base+"/answers/mcp", bytes.NewReader(list(id)))
				req.Header = hdr.Clone()
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				resp, err := http.DefaultTransport.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if ce := resp.Header.Values("Content-Encoding"); len(ce) > 0 || resp.ContentLength != int64(len(b)) || string(b) != filtered(id) {
					t.Errorf("%s id %s: Content-Encoding %q, Content-Length %d, %d bytes: %q", base, id, ce, resp.ContentLength, len(b), b)
				}
			}
		}
	})
	t.Run("SSE stream cut: one answer, then nothing", func(t *testing.T) {
		direct, _ := e.both(t, "answers", hdr, list("11"))
		if n := strings.Count(direct.Body, "data: "); n != 2 {
			t.Errorf("%d events, want the progress notification and the error:\n%s", n, direct.Body)
		}
	})
	t.Run("gzip answer to an unshaped call decoded", func(t *testing.T) {
		h := toHeader(v26("tools/call", "lookup"))
		h.Set("Accept-Encoding", "identity")
		direct, _ := e.both(t, "answers", h, call("16", "lookup", "{}"))
		if direct.Status != 200 || direct.Body != `{"jsonrpc":"2.0","id":16,"result":{}}` {
			t.Errorf("got %d %s", direct.Status, direct.Body)
		}
	})
	t.Run("notification answered 202 without a body", func(t *testing.T) {
		direct, _ := e.both(t, "answers", toHeader(v26("notifications/cancelled", "")),
			[]byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,`+meta26+`}}`))
		if direct.Status != 202 || direct.Body != "" {
			t.Errorf("got %d %q", direct.Status, direct.Body)
		}
	})
	t.Run("declared length over the limit refused before the body", func(t *testing.T) {
		want := seen{413, ctJSON, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"request body exceeds 1048576 bytes"}}`}
		for _, base := range []string{e.proxy, e.drivers["answers"].URL} {
			if got := doDeclared(t, base+"/answers/mcp", hdr, 6<<20); got != want {
				t.Errorf("%s: got %d %q %.300s, want %+v", base, got.Status, got.ContentType, got.Body, want)
			}
		}
	})
	// Every driver of the environment carries at least one exchange.
	e.both(t, "demo", toHeader(v26("tools/list", "")), list("1"))
	e.both(t, "synthetic", toHeader(v26("tools/call", "lookup")), call("2", "lookup", "{}"))
	e.checkStreams(t)
}

// doDeclared posts a request that declares a body of length bytes and
// sends none of it: only a refusal at the headers answers it (in time).
func doDeclared(t *testing.T, url string, hdr http.Header, length int64) seen {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	defer pw.Close()
	context.AfterFunc(ctx, func() { pw.CloseWithError(ctx.Err()) }) // the transport waits for its body write
	req, err := http.NewRequestWithContext(ctx, "POST", url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header = hdr.Clone()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("no answer before the body: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return seen{resp.StatusCode, resp.Header.Get("Content-Type"), string(b)}
}
