package demo

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions the router tells apart.
const (
	// statelessRevision is the first revision without sessions (SEP-2575):
	// per-request _meta, Mcp-Method / Mcp-Name headers, server/discover.
	statelessRevision = "2026-07-28"

	headerProtocolVersion  = "Mcp-Protocol-Version"
	headerSessionID        = "Mcp-Session-Id"
	metaKeyProtocolVersion = "io.modelcontextprotocol/protocolVersion"

	// peekLimit bounds how much of a POST body the router reads to look for
	// _meta; it equals the SDK's default body limit, which then answers 413
	// for anything larger.
	peekLimit = mcp.DefaultMaxRequestBodyBytes

	// sessionTimeout closes idle 2025-11-25 (and older) sessions.
	sessionTimeout = 30 * time.Minute
)

// versionRouter serves every revision on one endpoint with two SDK handlers
// around the same mcp.Server.
//
// The SDK cannot do both with one StreamableHTTPHandler: with Stateless set it
// serves 2026-07-28 but never issues Mcp-Session-Id (older clients get a
// throwaway session per request); without it, it keeps sessions but answers
// every 2026-07-28 request with a -32022 UnsupportedProtocolVersion error
// (the SDK client then falls back to initialize with 2025-11-25).
type versionRouter struct {
	stateless http.Handler // 2026-07-28 and later
	stateful  http.Handler // initialize + Mcp-Session-Id (2025-11-25 and older)
}

func newVersionRouter(srv *mcp.Server, logger *slog.Logger) *versionRouter {
	get := func(*http.Request) *mcp.Server { return srv }
	return &versionRouter{
		stateless: mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
			Stateless: true,
			Logger:    logger,
		}),
		stateful: mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
			Logger:         logger,
			SessionTimeout: sessionTimeout,
		}),
	}
}

func (v *versionRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if wantsStateless(r) {
		v.stateless.ServeHTTP(w, r)
		return
	}
	v.stateful.ServeHTTP(w, r)
}

// wantsStateless reports whether r speaks revision 2026-07-28 or later: its
// MCP-Protocol-Version header says so, or (no header) it is a POST whose
// params._meta names a protocol version. The stateless SDK handler then
// checks the details (header required and equal to _meta: 400 / -32020).
// Revision dates compare as strings, as in the SDK.
func wantsStateless(r *http.Request) bool {
	if v := r.Header.Get(headerProtocolVersion); v != "" {
		return v >= statelessRevision
	}
	if r.Method != http.MethodPost || r.Body == nil || r.Header.Get(headerSessionID) != "" {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, peekLimit+1))
	// Put back what was read, followed by whatever was not.
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	if err != nil || int64(len(body)) > peekLimit {
		return false
	}
	var msg struct {
		Params struct {
			Meta map[string]json.RawMessage `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil { // batches and bad JSON: let the SDK answer
		return false
	}
	_, ok := msg.Params.Meta[metaKeyProtocolVersion]
	return ok
}
