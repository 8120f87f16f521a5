package stdio

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// DefaultMaxSessions bounds the streamable-HTTP sessions a bridge holds
// when Options.MaxSessions is zero.
const DefaultMaxSessions = 4096

// sessionHeader is the session id field of revisions before 2026-07-28.
const sessionHeader = "Mcp-Session-Id"

// session is a streamable-HTTP session of a client of the bridge (revisions
// before 2026-07-28, "Session Management"): opened by the answer to
// initialize, ended by DELETE or by eviction. It scopes the client's
// exchanges and streams only: every session is served by the one child,
// whose state stays shared.
type session struct {
	id string
	// Guarded by b.mu: used is when an exchange of the session last began
	// or ended, active how many are in progress.
	used   time.Time
	active int
	// ended is closed when the session ends; its exchanges and streams
	// then end too.
	ended chan struct{}
}

// newSessionID returns a session id: 128 random bits, URL-safe base64
// (visible ASCII only).
func newSessionID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// handshake reports whether m is a request that needs no session: the
// initialize whose answer opens one, or 2026-07-28's server/discover.
func handshake(m *mcp.Message) bool {
	return m.Kind == mcp.KindRequest && (m.Method == "initialize" || m.Method == "server/discover")
}

// done is closed when s ends; nil (never) for no session.
func (s *session) done() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.ended
}

// sessionless reports whether a message is of a 2026-07-28 request, which
// has no session: its revision is in its _meta or the MCP-Protocol-Version
// header. m is nil for a request without a message (GET, DELETE).
func sessionless(r *http.Request, m *mcp.Message) bool {
	return mcp.EffectiveVersion(mcp.Header(r.Header), m) >= mcp.Version20260728
}

// openSession opens a session for a client's initialize; beyond the
// limit the session idle the longest is ended (or, when every one is in
// use, the one used least recently).
func (b *Bridge) openSession() *session {
	s := &session{id: newSessionID(), used: time.Now(), ended: make(chan struct{})}
	limit := b.o.MaxSessions
	if limit <= 0 {
		limit = DefaultMaxSessions
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.sessions) >= limit {
		var oldest *session
		for _, o := range b.sessions {
			if oldest == nil || staler(o, oldest) {
				oldest = o
			}
		}
		b.endSession(oldest)
		b.m.evicted.Inc()
		b.log.Debug("stdio bridge session evicted: the session limit is reached", slog.Int("limit", limit))
	}
	b.sessions[s.id] = s
	return s
}

// staler reports whether a goes before o when a session must be evicted:
// an idle one before one in use, then the one used least recently.
func staler(a, o *session) bool {
	if (a.active == 0) != (o.active == 0) {
		return a.active == 0
	}
	return a.used.Before(o.used)
}

// endSession ends s: its id is unknown from now on. The caller holds b.mu.
func (b *Bridge) endSession(s *session) {
	if _, ok := b.sessions[s.id]; ok {
		delete(b.sessions, s.id)
		close(s.ended)
	}
}

// enterSession checks the Mcp-Session-Id of a request of an older
// revision and returns its session, counted in use until leaveSession; a
// request without one gets 400, with an unknown or ended one 404 (a
// JSON-RPC error naming id when the message is a request). ok is false
// when the request was answered.
func (b *Bridge) enterSession(w http.ResponseWriter, r *http.Request, id []byte) (*session, bool) {
	sid := r.Header.Get(sessionHeader)
	if sid == "" {
		refuseSession(w, http.StatusBadRequest, id, "Bad Request: Mcp-Session-Id is required after initialize (revisions before 2026-07-28)")
		return nil, false
	}
	b.mu.Lock()
	s := b.sessions[sid]
	if s != nil {
		s.active++
		s.used = time.Now()
	}
	b.mu.Unlock()
	if s == nil {
		refuseSession(w, http.StatusNotFound, id, sessionGone)
		return nil, false
	}
	return s, true
}

// leaveSession ends one exchange of s (nil for none).
func (b *Bridge) leaveSession(s *session) {
	if s == nil {
		return
	}
	b.mu.Lock()
	s.active--
	s.used = time.Now()
	b.mu.Unlock()
}

// deleteSession ends the session a client names in DELETE: 204, or 400
// and 404 as for any request.
func (b *Bridge) deleteSession(w http.ResponseWriter, r *http.Request) {
	s, ok := b.enterSession(w, r, nil)
	if !ok {
		return
	}
	b.mu.Lock()
	s.active--
	b.endSession(s)
	b.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// sessionGone is the answer to a request on an unknown or ended session.
const sessionGone = "Session not found: start a new session with initialize"

func refuseSession(w http.ResponseWriter, status int, id []byte, msg string) {
	if id == nil {
		http.Error(w, msg, status)
		return
	}
	writeJSON(w, status, mcp.ErrorResponse(id, &mcp.Error{Code: mcp.CodeInvalidRequest, Message: msg}))
}

// Sessions is the number of open streamable-HTTP sessions.
func (b *Bridge) Sessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sessions)
}
