// Package rig sets up what the load figures (e2e/bench) and the
// soak and fault tests (e2e/faults_test.go) run against: a real MCP
// upstream on the official Go SDK, the mcpgate binary as a separate
// process with the full default policy (gateway tokens, catalog with a
// pinned manifest, a live rights file, signed assertions, rate limits,
// audit), a load generator speaking MCP 2026-07-28 over plain HTTP, and
// readings of a process's CPU time and memory from /proc (Linux).
//
// Everything listens on 127.0.0.1 or a Unix socket; nothing reaches
// beyond this machine.
package rig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools of the bench upstream. GetStatus is the trivial read measured
// under load; the others serve the streaming and fault scenarios.
const (
	// ToolGetStatus answers a ~150-byte structured result at once.
	ToolGetStatus = "get_status"
	// ToolStreamReport answers on text/event-stream: `events` progress
	// notifications of `event_bytes` each, then the result, whose text
	// holds `final_bytes` bytes (one event that must be shaped).
	ToolStreamReport = "stream_report"
	// ToolSlowStatus sleeps `sleep_ms` before answering like get_status
	// (ended early when the request's context ends).
	ToolSlowStatus = "slow_status"
	// ToolResetStream sends a few progress events on text/event-stream
	// and then resets the TCP connection (no result ever comes).
	ToolResetStream = "reset_stream"
	// ToolRecordNote is a silent write: it counts the notes it stored.
	ToolRecordNote = "record_note"
)

// Upstream is the bench's MCP server: the Go SDK's stateless
// streamable-HTTP handler (2026-07-28, JSON answers) for tools/list and
// the SDK tools, plus hand-written text/event-stream answers for
// stream_report and reset_stream. It does not verify mcpgate's identity
// assertion (the direct measurement sends none), and it is not part of
// any figure attributed to the gateway.
type Upstream struct {
	sdk     http.Handler
	notes   atomic.Int64 // record_note calls that ran
	streams atomic.Int64 // stream_report answers completed by the upstream
	// StreamBytes counts bytes written by stream_report answers.
	StreamBytes atomic.Int64
}

type statusIn struct {
	Service string `json:"service" jsonschema:"the service to check"`
}

type statusOut struct {
	Service   string `json:"service"`
	State     string `json:"state"`
	CheckedAt string `json:"checked_at"`
	Region    string `json:"region"`
}

type slowIn struct {
	SleepMS int `json:"sleep_ms" jsonschema:"milliseconds to wait before answering"`
}

type streamIn struct {
	Events     int `json:"events" jsonschema:"progress notifications to send"`
	EventBytes int `json:"event_bytes" jsonschema:"size of each progress message"`
	FinalBytes int `json:"final_bytes" jsonschema:"size of the result text"`
}

type noteIn struct {
	Note string `json:"note" jsonschema:"the note to record"`
}

type noteOut struct {
	ID string `json:"id"`
}

// NewUpstream returns the bench upstream.
func NewUpstream() *Upstream {
	u := &Upstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpgate-bench-upstream", Version: "1"}, nil)
	status := func(in statusIn) statusOut {
		return statusOut{Service: in.Service, State: "ok", CheckedAt: "2026-01-02T03:04:05Z", Region: "eu-west"}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: ToolGetStatus, Description: "Reports whether a service is up."},
		func(_ context.Context, _ *mcp.CallToolRequest, in statusIn) (*mcp.CallToolResult, statusOut, error) {
			return nil, status(in), nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolSlowStatus, Description: "Reports whether a service is up, slowly."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, statusOut, error) {
			select {
			case <-time.After(time.Duration(in.SleepMS) * time.Millisecond):
			case <-ctx.Done():
				return nil, statusOut{}, ctx.Err()
			}
			return nil, status(statusIn{Service: "slow"}), nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: ToolRecordNote, Description: "Records a note."},
		func(_ context.Context, _ *mcp.CallToolRequest, in noteIn) (*mcp.CallToolResult, noteOut, error) {
			n := u.notes.Add(1)
			return nil, noteOut{ID: "N-" + strconv.FormatInt(n, 10)}, nil
		})
	// Listed by the SDK; their calls are answered by ServeHTTP below.
	unreachable := func(context.Context, *mcp.CallToolRequest, streamIn) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("answered outside the SDK")
	}
	mcp.AddTool(srv, &mcp.Tool{Name: ToolStreamReport, Description: "Streams a long report."}, unreachable)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolResetStream, Description: "Starts a report and drops the connection."}, unreachable)
	u.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	return u
}

// Notes is how many record_note calls ran.
func (u *Upstream) Notes() int64 { return u.notes.Load() }

// Streams is how many stream_report answers the upstream finished writing.
func (u *Upstream) Streams() int64 { return u.streams.Load() }

// ServeHTTP serves the MCP endpoint.
func (u *Upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Header.Get("Mcp-Name") {
	case ToolStreamReport:
		u.streamReport(w, r)
	case ToolResetStream:
		u.resetStream(w, r)
	default:
		u.sdk.ServeHTTP(w, r)
	}
}

type rawCall struct {
	ID     json.RawMessage `json:"id"`
	Params struct {
		Arguments streamIn `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	} `json:"params"`
}

func readCall(w http.ResponseWriter, r *http.Request) (*rawCall, bool) {
	var c rawCall
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&c); err != nil || len(c.ID) == 0 {
		http.Error(w, "bad request", http.StatusBadRequest)
		return nil, false
	}
	if len(c.Params.Meta.ProgressToken) == 0 {
		c.Params.Meta.ProgressToken = json.RawMessage(`"bench"`)
	}
	return &c, true
}

// progressEvent appends one SSE event carrying a progress notification
// whose message is n bytes of text.
func progressEvent(b []byte, token json.RawMessage, i, total, n int) []byte {
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":"...)
	b = append(b, token...)
	b = append(b, ",\"progress\":"...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, ",\"total\":"...)
	b = strconv.AppendInt(b, int64(total), 10)
	b = append(b, ",\"message\":\""...)
	b = appendFiller(b, n)
	return append(b, "\"}}\n\n"...)
}

// appendFiller appends n bytes of plain report text.
func appendFiller(b []byte, n int) []byte {
	const line = "row 0042: service ok, latency nominal; "
	for n > 0 {
		k := min(n, len(line))
		b = append(b, line[:k]...)
		n -= k
	}
	return b
}

func (u *Upstream) streamReport(w http.ResponseWriter, r *http.Request) {
	c, ok := readCall(w, r)
	if !ok {
		return
	}
	a := c.Params.Arguments
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	var buf []byte
	for i := range a.Events {
		buf = progressEvent(buf[:0], c.Params.Meta.ProgressToken, i+1, a.Events, a.EventBytes)
		if _, err := w.Write(buf); err != nil {
			return
		}
		u.StreamBytes.Add(int64(len(buf)))
		if i%16 == 15 {
			if rc.Flush() != nil {
				return
			}
		}
	}
	// The result: a text block and structuredContent that mirror each
	// other, so the gateway has to parse (and shape) the whole event.
	text := appendFiller(nil, a.FinalBytes)
	sc, _ := json.Marshal(map[string]any{"events": a.Events, "report": string(text)})
	scText, _ := json.Marshal(string(sc))
	var b bytes.Buffer
	b.WriteString("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":")
	b.Write(c.ID)
	b.WriteString(`,"result":{"content":[{"type":"text","text":`)
	b.Write(scText)
	b.WriteString(`}],"structuredContent":`)
	b.Write(sc)
	b.WriteString("}}\n\n")
	if _, err := w.Write(b.Bytes()); err != nil {
		return
	}
	u.StreamBytes.Add(int64(b.Len()))
	_ = rc.Flush()
	u.streams.Add(1)
}

func (u *Upstream) resetStream(w http.ResponseWriter, r *http.Request) {
	c, ok := readCall(w, r)
	if !ok {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	var buf []byte
	for i := range 3 {
		buf = progressEvent(buf[:0], c.Params.Meta.ProgressToken, i+1, 10, 64)
		_, _ = w.Write(buf)
	}
	_ = http.NewResponseController(w).Flush()
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close sends RST
	}
	_ = conn.Close()
}

// IsResult reports whether a tools/call answer body (JSON or SSE) holds a
// successful result: a "result" member and no isError true.
func IsResult(body []byte) bool {
	return bytes.Contains(body, []byte(`"result"`)) && !bytes.Contains(body, []byte(`"isError":true`))
}
