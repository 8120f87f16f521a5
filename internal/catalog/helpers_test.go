package catalog

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/assertion"
	"github.com/mcpgate/mcpgate/internal/demo"
)

const (
	testIssuer   = "https://gw.test"
	testAudience = "demo-upstream"
)

// demoUpstream is the demo upstream with assertions on, behind an
// httptest server, and the header function that signs the catalog's
// assertions for it.
type demoUpstream struct {
	srv    *demo.Server
	url    string
	header func(context.Context) (http.Header, error)

	mu  sync.Mutex
	ids []assertion.Identity // identities of the requests that reached the demo
}

func startDemo(t *testing.T) *demoUpstream {
	t.Helper()
	ks, err := assertion.GenerateKeySet(assertion.DefaultAlgorithm)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := assertion.NewSigner(ks, assertion.SignerOptions{Issuer: testIssuer})
	if err != nil {
		t.Fatal(err)
	}
	v, err := assertion.NewVerifier(assertion.VerifierOptions{Issuer: testIssuer, Audience: testAudience, Keys: ks.PublicJWKS()})
	if err != nil {
		t.Fatal(err)
	}
	d := &demoUpstream{srv: demo.New(demo.Options{Assertions: v})}
	h := d.srv.Handler()
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, err := v.Verify(r.Context(), r.Header.Get(assertion.Header)); err == nil {
			d.mu.Lock()
			d.ids = append(d.ids, *id)
			d.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	d.url = ts.URL + "/mcp"
	d.header = SignedHeader(signer, testAudience)
	return d
}

func (d *demoUpstream) upstream() Upstream {
	return Upstream{Name: "demo", URL: d.url, Header: d.header}
}

func (d *demoUpstream) identities() []assertion.Identity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]assertion.Identity(nil), d.ids...)
}

// sdkUpstream serves an MCP SDK server (streamable HTTP, sessions) with
// the given tools.
func sdkUpstream(t *testing.T, opts *mcp.ServerOptions, tools ...*mcp.Tool) (*mcp.Server, string) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "test-upstream", Version: "1"}, opts)
	for _, tool := range tools {
		s.AddTool(tool, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	t.Cleanup(ts.Close)
	return s, ts.URL
}

func objectSchema() map[string]any { return map[string]any{"type": "object"} }

// rawUpstream is an MCP server written by hand (JSON-RPC over HTTP POST,
// revision 2025-11-25 only, no sessions), for behaviour an SDK server
// cannot show: tools/list answers come from page(cursor) verbatim.
type rawUpstream struct {
	url string
	// page returns the raw tools/list result for a cursor ("" for the
	// first page).
	page func(cursor string) string
	// sse answers tools/list as a text/event-stream.
	sse bool

	mu      sync.Mutex
	cursors []string // cursors of the tools/list requests, in order
}

func startRaw(t *testing.T, page func(cursor string) string) *rawUpstream {
	t.Helper()
	u := &rawUpstream{page: page}
	ts := httptest.NewServer(u)
	t.Cleanup(ts.Close)
	u.url = ts.URL + "/mcp"
	return u
}

func (u *rawUpstream) listed() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.cursors...)
}

func (u *rawUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var req struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Cursor string `json:"cursor"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	if req.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result, rpcErr string
	switch req.Method {
	case "initialize":
		result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"raw","version":"1"}}`
	case "tools/list":
		u.mu.Lock()
		u.cursors = append(u.cursors, req.Params.Cursor)
		u.mu.Unlock()
		result = u.page(req.Params.Cursor)
	default: // server/discover and the rest: this server predates them
		rpcErr = `{"code":-32601,"message":"Method not found"}`
	}
	var msg string
	if rpcErr != "" {
		msg = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"error":` + rpcErr + `}`
	} else {
		msg = `{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + `}`
	}
	if u.sse && req.Method == "tools/list" {
		w.Header().Set("Content-Type", "text/event-stream")
		// A comment, an event without data, then the message split over
		// two data lines, CRLF line ends.
		half := strings.Index(msg, `,"result"`)
		io.WriteString(w, ": keep-alive\r\n\r\nevent: ping\r\n\r\nevent: message\r\ndata: "+msg[:half]+"\r\ndata:"+msg[half:]+"\r\n\r\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, msg)
}

func (u *rawUpstream) upstream() Upstream { return Upstream{Name: "raw", URL: u.url} }

// logBuffer is a concurrency-safe slog text sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func toolNames(s *Snapshot) []string {
	var out []string
	for _, t := range s.Tools {
		out = append(out, t.Name)
	}
	return out
}
