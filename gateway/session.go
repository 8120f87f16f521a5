package gateway

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// SessionHeader is the session id field of MCP revisions before
// 2026-07-28 (Streamable HTTP, "Session Management").
const SessionHeader = "mcp-session-id"

// DefaultSessionTTL is how long a session id stays bound to its principal
// when Options.SessionTTL is zero.
const DefaultSessionTTL = 24 * time.Hour

// checkSession enforces the binding of an older revision's session id to
// the principal that created it: a request that carries Mcp-Session-Id
// must come from the same connection, tenant and subject, otherwise it
// gets 404 (the MCP answer to an unknown session) and learns nothing. It
// is the stage after the kill switch.
func (p *Pipeline) checkSession(ctx context.Context, x *Exchange) *Verdict {
	s := p.opts.Sessions
	id := x.req.Header.Get(SessionHeader)
	if s == nil || id == "" || !x.input.Principal.Authenticated {
		return nil
	}
	b, err := s.Session(ctx, id)
	switch {
	case err == nil && b == bindingOf(&x.input.Principal):
		return nil
	case err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid):
		if x.msg != nil && x.msg.Kind == mcp.KindNotification {
			return x.answerAs(OutcomeInvalid, local(404, nil))
		}
		var id []byte
		if x.msg != nil {
			id = x.msg.ID
		}
		return x.answerAs(OutcomeInvalid, local(404, mcp.ErrorResponse(idOrNull(id), &mcp.Error{Code: mcp.CodeInvalidRequest,
			Message: "Session not found: start a new session with initialize"})))
	}
	p.log.LogAttrs(ctx, slog.LevelError, "session store unavailable; request refused", slog.Any("error", err))
	return x.answerAs(OutcomeError, unavailable(x.msg, "The gateway cannot check the session right now."))
}

// bindSession binds the session id an upstream assigned in its answer to
// initialize to the caller. A binding that cannot be stored fails the
// exchange (the client would hold a session nobody can check).
func (x *Exchange) bindSession(h mcp.Header) error {
	return x.bindSessionID(h.Get(SessionHeader))
}

// bindSessionID binds session id to the caller (bindSession; mcpgate's own
// session of a federated route).
func (x *Exchange) bindSessionID(id string) error {
	s := x.p.opts.Sessions
	if s == nil || id == "" || !x.input.Principal.Authenticated {
		return nil
	}
	ttl := x.p.opts.SessionTTL
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if err := s.BindSession(ctx, id, bindingOf(&x.input.Principal), ttl); err != nil {
		x.p.log.LogAttrs(ctx, slog.LevelError, "session binding failed; answer withheld", slog.Any("error", err))
		return ErrUpstreamResponse
	}
	return nil
}

// unbindSession forgets a session the client ended (DELETE answered 2xx or
// 404 by the upstream).
func (x *Exchange) unbindSession(status int) {
	s := x.p.opts.Sessions
	id := x.req.Header.Get(SessionHeader)
	if s == nil || id == "" || x.req.Method != "DELETE" || !(status/100 == 2 || status == 404) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.ctx), 5*time.Second)
	defer cancel()
	if err := s.UnbindSession(ctx, id); err != nil {
		x.p.log.LogAttrs(ctx, slog.LevelWarn, "session unbinding failed; the binding expires on its own", slog.Any("error", err))
	}
}

func bindingOf(pr *policy.Principal) store.SessionBinding {
	return store.SessionBinding{Connection: pr.Connection, Tenant: pr.Tenant, Subject: pr.Subject}
}
