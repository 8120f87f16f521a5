package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgate/mcpgate/gateway/clip"
)

// Defaults of ListOptions (and Options).
const (
	DefaultMaxPages         = 50
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 16 << 20 // 16 MiB, the MCP SDK's default SSE event bound
)

// Errors of List, wrapped with details; test with errors.Is.
var (
	// ErrRepeatedCursor: a tools/list result's nextCursor was a cursor
	// already sent (or answered) in this listing, so the pagination
	// would never end.
	ErrRepeatedCursor = errors.New("catalog: the upstream's tools/list pagination does not advance (a cursor came back)")
	// ErrTooManyPages: the listing needs more than ListOptions.MaxPages
	// pages.
	ErrTooManyPages = errors.New("catalog: the upstream's tools/list needs more pages than allowed")
	// ErrDuplicateTool: two listed tools have the same name.
	ErrDuplicateTool = errors.New("catalog: the upstream lists two tools with the same name")
	// ErrBadListing: the tools/list result is not what the MCP
	// specification describes (not I-JSON, tools not an array of tool
	// objects, a bad member type), or its raw JSON could not be read.
	ErrBadListing = errors.New("catalog: invalid tools/list result")
)

// Upstream is an MCP server the catalog lists.
type Upstream struct {
	// Name identifies the upstream (configuration upstreams[].name); it is
	// the metrics label and Snapshot.Upstream.
	Name string
	// URL is the upstream's MCP endpoint (streamable HTTP).
	URL string
	// Header returns header fields to set on every HTTP request of a
	// listing (replacing any the SDK set): mcpgate's identity assertion
	// for the catalog's own identity (see SignedHeader). It is called per
	// request with the request's context, so short-lived assertions stay
	// fresh. Nil: no extra fields (an upstream that verifies nothing).
	Header func(ctx context.Context) (http.Header, error)
}

// ListOptions configure List.
type ListOptions struct {
	// MaxPages bounds the tools/list pages of one listing; the listing
	// fails with ErrTooManyPages when page MaxPages still has a
	// nextCursor. Zero means DefaultMaxPages (50).
	MaxPages int
	// Timeout bounds the whole listing: connecting (server/discover or
	// initialize), every page and closing the session. Zero means
	// DefaultTimeout (30 s); negative means none (ctx only).
	Timeout time.Duration
	// MaxResponseBytes bounds one tools/list HTTP response body (JSON or
	// the whole SSE stream); a larger page fails the listing. Zero means
	// DefaultMaxResponseBytes (16 MiB).
	MaxResponseBytes int64
	// HTTPClient sends the requests; nil means http.DefaultClient. Its
	// Transport is wrapped (Upstream.Header is added, tools/list
	// responses are read as raw JSON); the client itself is not modified.
	HTTPClient *http.Client
	// Logger receives the MCP SDK client's logs; nil discards them.
	Logger *slog.Logger
}

// ClientInfo is the MCP implementation the catalog's client announces.
var ClientInfo = mcp.Implementation{Name: ClientName, Title: "mcpgate tool catalog", Version: "1"}

// List lists every tool of upstream u once and returns the snapshot.
//
// It connects with the MCP SDK client (mcp.NewClient and
// mcp.StreamableClientTransport, standalone SSE stream off), speaking the
// newest revision the SDK supports and falling back as the SDK does, then
// calls tools/list with an explicit cursor per page (MCP specification,
// "Utilities: Pagination": nextCursor is opaque; its absence ends the
// list), and closes the session. The raw JSON of each result is read off
// the HTTP response (application/json or text/event-stream) so tools are
// kept exactly as listed.
//
// Errors: the connection or a page fails (the SDK's error, e.g. an HTTP
// 401 from an upstream that refuses the assertion, or a JSON-RPC error);
// ErrRepeatedCursor when a nextCursor repeats an earlier cursor;
// ErrTooManyPages after MaxPages pages that all had a nextCursor;
// ErrDuplicateTool when two tools share a name; ErrBadListing for a result
// that is not valid I-JSON or whose tools are not tool objects; ctx's
// error or context.DeadlineExceeded after Timeout.
//
// Tools whose name is outside [A-Za-z0-9_.-]{1,128} (ValidToolName) do
// not fail the listing: they are dropped from Snapshot.Tools and reported
// in Snapshot.Refused, as are tools the SDK client excludes (invalid
// x-mcp-header annotations). A tool whose description carries invisible
// or bidi characters is kept as listed (manifest lint reports it).
func List(ctx context.Context, u Upstream, o ListOptions) (*Snapshot, error) {
	if o.MaxPages <= 0 {
		o.MaxPages = DefaultMaxPages
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.Timeout)
		defer cancel()
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	base := o.HTTPClient
	if base == nil {
		base = http.DefaultClient
	}
	rt := &captureTransport{base: base.Transport, header: u.Header, limit: o.MaxResponseBytes}
	if rt.base == nil {
		rt.base = http.DefaultTransport
	}
	hc := *base
	hc.Transport = rt

	info := ClientInfo
	client := mcp.NewClient(&info, &mcp.ClientOptions{
		Logger:       logger,
		Capabilities: &mcp.ClientCapabilities{}, // no roots, no sampling: the catalog only lists
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             u.URL,
		HTTPClient:           &hc,
		DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", u.URL, err)
	}
	defer cs.Close()

	snap := &Snapshot{Upstream: u.Name}
	if r := cs.InitializeResult(); r != nil {
		snap.ProtocolVersion = r.ProtocolVersion
	}
	seen := map[string]bool{}
	names := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		rt.reset()
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("tools/list page %d: %w", page, err)
		}
		raw, err := rt.result()
		if err != nil {
			return nil, fmt.Errorf("tools/list page %d: %w", page, err)
		}
		pg, err := parseListResult(raw)
		if err != nil {
			return nil, fmt.Errorf("%w: page %d: %v", ErrBadListing, page, err)
		}
		sdkNames := make(map[string]bool, len(res.Tools))
		for _, t := range res.Tools {
			sdkNames[t.Name] = true
		}
		for _, t := range pg.tools {
			if names[t.Name] {
				return nil, fmt.Errorf("%w: %q", ErrDuplicateTool, t.Name)
			}
			names[t.Name] = true
			switch {
			case !ValidToolName(t.Name):
				snap.Refused = append(snap.Refused, RefusedTool{Name: t.Name, Reason: "name outside [A-Za-z0-9_.-]{1,128}"})
			case !sdkNames[t.Name]:
				snap.Refused = append(snap.Refused, RefusedTool{Name: t.Name, Reason: "the MCP SDK client excludes it (invalid x-mcp-header annotations in its inputSchema)"})
			default:
				snap.Tools = append(snap.Tools, t)
			}
		}
		if pg.nextCursor == "" {
			break
		}
		if pg.nextCursor == cursor || seen[pg.nextCursor] {
			return nil, fmt.Errorf("%w: page %d returned nextCursor %q again", ErrRepeatedCursor, page, clip.Value(pg.nextCursor))
		}
		if page >= o.MaxPages {
			return nil, fmt.Errorf("%w: page %d of at most %d has a nextCursor", ErrTooManyPages, page, o.MaxPages)
		}
		seen[cursor] = true
		seen[pg.nextCursor] = true
		cursor = pg.nextCursor
	}
	snap.FetchedAt = time.Now()
	snap.buildIndex()
	return snap, nil
}

// listPage is one tools/list result as listed.
type listPage struct {
	tools      []Tool
	nextCursor string
}

// parseListResult reads a ListToolsResult as raw JSON (I-JSON: duplicate
// member names and invalid UTF-8 are refused at any depth).
func parseListResult(raw jsontext.Value) (*listPage, error) {
	var r struct {
		Tools      []jsontext.Value `json:"tools"`
		NextCursor *string          `json:"nextCursor"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	pg := &listPage{}
	if r.NextCursor != nil {
		pg.nextCursor = *r.NextCursor
	}
	for i, v := range r.Tools {
		t, err := ParseTool(v)
		if err != nil {
			return nil, fmt.Errorf("tools[%d]: %v", i, err)
		}
		pg.tools = append(pg.tools, t)
	}
	return pg, nil
}

// captureTransport adds Upstream.Header to every request and keeps the
// bodies of tools/list responses, so List can read the raw result the SDK
// decoded. A listing sends one tools/list request at a time.
type captureTransport struct {
	base   http.RoundTripper
	header func(context.Context) (http.Header, error)
	limit  int64

	mu       sync.Mutex
	captures []*capture // tools/list exchanges since the last reset
}

// capture is one tools/list HTTP exchange.
type capture struct {
	id          jsontext.Value // the JSON-RPC request id, canonical
	contentType string
	mu          sync.Mutex
	body        bytes.Buffer
	overflow    bool
}

func (t *captureTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("User-Agent", UserAgent)
	if t.header != nil {
		h, err := t.header(req.Context())
		if err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, fmt.Errorf("catalog identity: %w", err)
		}
		for k, vs := range h {
			r.Header.Del(k)
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	}
	var c *capture
	if req.Method == http.MethodPost && req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		r.ContentLength = int64(len(body))
		if id, ok := toolsListID(body); ok {
			c = &capture{id: id}
		}
	}
	resp, err := t.base.RoundTrip(r)
	if err != nil || c == nil {
		return resp, err
	}
	c.contentType = resp.Header.Get("Content-Type")
	resp.Body = &teeBody{ReadCloser: resp.Body, c: c, limit: t.limit}
	t.mu.Lock()
	t.captures = append(t.captures, c)
	t.mu.Unlock()
	return resp, nil
}

// reset forgets the captures of earlier pages.
func (t *captureTransport) reset() {
	t.mu.Lock()
	t.captures = nil
	t.mu.Unlock()
}

// result returns the raw result of the latest tools/list exchange that
// holds the response to its request.
func (t *captureTransport) result() (jsontext.Value, error) {
	t.mu.Lock()
	cs := append([]*capture(nil), t.captures...)
	t.mu.Unlock()
	overflow := false
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		c.mu.Lock()
		body := bytes.Clone(c.body.Bytes())
		over := c.overflow
		c.mu.Unlock()
		if res, ok := findResult(c.contentType, body, c.id); ok {
			return res, nil
		}
		overflow = overflow || over
	}
	if overflow {
		return nil, fmt.Errorf("%w: the response is larger than %d bytes", ErrBadListing, t.limit)
	}
	return nil, fmt.Errorf("%w: the raw tools/list response was not found in the HTTP exchange", ErrBadListing)
}

// teeBody copies what the SDK reads of a response body into a capture, up
// to limit bytes.
type teeBody struct {
	io.ReadCloser
	c     *capture
	limit int64
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.c.mu.Lock()
		if int64(b.c.body.Len()+n) > b.limit {
			b.c.overflow = true
		} else if !b.c.overflow {
			b.c.body.Write(p[:n])
		}
		b.c.mu.Unlock()
	}
	return n, err
}

// toolsListID returns the canonical id of a JSON-RPC tools/list request.
func toolsListID(body []byte) (jsontext.Value, bool) {
	var m struct {
		ID     jsontext.Value `json:"id"`
		Method string         `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != "tools/list" || len(m.ID) == 0 {
		return nil, false
	}
	id := m.ID.Clone()
	if id.Canonicalize() != nil {
		return nil, false
	}
	return id, true
}

// findResult returns the "result" of the JSON-RPC response with the given
// id in a response body: one JSON message (application/json) or the data
// of server-sent events (text/event-stream).
func findResult(contentType string, body []byte, id jsontext.Value) (jsontext.Value, bool) {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "text/event-stream" {
		for _, data := range sseData(body) {
			if res, ok := responseResult(data, id); ok {
				return res, true
			}
		}
		return nil, false
	}
	return responseResult(body, id)
}

// responseResult returns msg's "result" when msg is a JSON-RPC response
// with the given (canonical) id.
func responseResult(msg []byte, id jsontext.Value) (jsontext.Value, bool) {
	var m struct {
		ID     jsontext.Value `json:"id"`
		Result jsontext.Value `json:"result"`
	}
	if json.Unmarshal(msg, &m) != nil || len(m.Result) == 0 || len(m.ID) == 0 {
		return nil, false
	}
	got := m.ID.Clone()
	if got.Canonicalize() != nil || !bytes.Equal(got, id) {
		return nil, false
	}
	return m.Result, true
}

// sseData returns the data of each event of a text/event-stream body
// (HTML Living Standard, "Server-sent events", event stream
// interpretation: lines end in CRLF, LF or CR; a blank line dispatches;
// data lines are joined with LF; one space after the colon is dropped).
// A last event without its blank line is returned too.
func sseData(body []byte) [][]byte {
	var (
		events [][]byte
		data   []byte
		has    bool
	)
	for len(body) > 0 {
		var line []byte
		i := bytes.IndexAny(body, "\r\n")
		if i < 0 {
			line, body = body, nil
		} else {
			line = body[:i]
			if body[i] == '\r' && i+1 < len(body) && body[i+1] == '\n' {
				body = body[i+2:]
			} else {
				body = body[i+1:]
			}
		}
		if len(line) == 0 {
			if has {
				events = append(events, data)
			}
			data, has = nil, false
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if j := bytes.IndexByte(line, ':'); j >= 0 {
			field, value = line[:j], line[j+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		if string(field) != "data" {
			continue
		}
		if has {
			data = append(data, '\n')
		}
		data = append(data, value...)
		has = true
	}
	if has {
		events = append(events, data)
	}
	return events
}
