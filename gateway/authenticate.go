package gateway

import (
	"context"
	"slices"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
)

// authenticatesInto is an Authenticator that can write the principal
// into storage the caller has (internal/authn): it overwrites it whole,
// and on a failure leaves nothing to use.
type authenticatesInto interface {
	AuthenticateInto(ctx context.Context, r *Request, pr *policy.Principal) *AuthFailure
}

// Authenticator verifies the credential of a request (the authenticate
// stage). The pipeline calls it after the transport gate and
// the header checks, before the policy; internal/authn implements it with
// the auth package. A nil Authenticator in Options means the gateway runs
// without authentication: every caller is anonymous.
type Authenticator interface {
	// Authenticate returns the verified principal of r, or why r is
	// refused (401 no or invalid credential, 503 the credential cannot be
	// checked now).
	Authenticate(ctx context.Context, r *Request) (*policy.Principal, *AuthFailure)
	// InsufficientScope returns the 403 challenge for a request of r's
	// route whose token lacks scopes: the challenge names scopes, the
	// scopes the request needs (RFC 6750 section 3.1).
	InsufficientScope(r *Request, scopes []string) *AuthFailure
}

// AuthFailure is an authentication refusal: the HTTP status, the
// WWW-Authenticate challenge and a text safe to show the client.
type AuthFailure struct {
	// Status is 401 (no or invalid credential), 403 (insufficient scope)
	// or 503 (the credential cannot be checked now; fail closed).
	Status int
	// WWWAuthenticate is the value of the WWW-Authenticate header; ""
	// sends none.
	WWWAuthenticate string
	// Code is a stable snake_case code: one of the Auth* constants.
	Code string
	// Message says what is wrong; Fix what to do. Both are safe to show a
	// client and carry no token material.
	Message string
	Fix     string
}

// AuthFailure codes (details error.code of the JSON-RPC error body).
const (
	AuthMissingToken      = "missing_token"      // 401: no bearer token
	AuthInvalidToken      = "invalid_token"      // 401: the token was refused
	AuthInvalidRequest    = "invalid_request"    // 401: a token outside the Authorization header
	AuthInsufficientScope = "insufficient_scope" // 403: the token's scopes do not cover the call
	AuthUnavailable       = "auth_unavailable"   // 503: the token cannot be verified now
)

// authenticate is the stage that runs the Authenticator, if any, and
// keeps the principal for the policy input; a credential bound to another
// toolset is refused here too (checkToolset).
func (p *Pipeline) authenticate(ctx context.Context, x *Exchange) *Verdict {
	x.mark(SpanAuth)
	a := p.opts.Authenticator
	if a == nil {
		return nil
	}
	var f *AuthFailure
	if ai, ok := a.(authenticatesInto); ok {
		// Into the exchange's own storage; nothing of a failure stays.
		if f = ai.AuthenticateInto(ctx, x.routeRequest(), &x.input.Principal); f != nil {
			x.input.Principal = policy.Principal{}
		}
	} else {
		var pr *policy.Principal
		pr, f = a.Authenticate(ctx, x.routeRequest())
		if f == nil && pr == nil {
			f = &AuthFailure{Status: 401, Code: AuthInvalidToken, Message: "The credential could not be verified."}
		}
		if f == nil {
			x.input.Principal = *pr
		}
	}
	if f != nil {
		return x.answerAs(OutcomeUnauthenticated, authLocal(f, x.msg, []policy.Reason{{Code: f.Code, Cause: f.Message, Fix: f.Fix}}, ""))
	}
	if l := p.checkToolset(x); l != nil {
		return x.answer(l)
	}
	return nil
}

// scopeChallenge returns the 403 insufficient_scope answer when the policy
// refused a request only because the OAuth token's scopes lack rights
// (every reason is insufficient_scope): the client can fix that by asking
// for a token with more scopes, which a tool error would not tell it. The
// challenge names every right the request needs (for tools/call, the
// tool's declared rights), the body's details the missing ones.
func (p *Pipeline) scopeChallenge(x *Exchange, d *policy.Decision) *Local {
	a := p.opts.Authenticator
	if a == nil || x.input.Principal.CredentialKind != policy.CredentialOAuth || len(d.Reasons) == 0 {
		return nil
	}
	var needed []string
	if x.input.Tool != nil {
		needed = append(needed, x.input.Tool.Rights...)
	}
	for _, r := range d.Reasons {
		if r.Code != policy.CodeInsufficientScope {
			return nil
		}
		for _, right := range r.Rights {
			if !slices.Contains(needed, right) {
				needed = append(needed, right)
			}
		}
	}
	f := a.InsufficientScope(x.routeRequest(), needed)
	if f == nil {
		return nil
	}
	return authLocal(f, x.msg, d.Reasons, d.ID)
}

// authLocal is the answer to a request refused by authentication: the
// status and challenge of f, and a JSON-RPC error (refusal.AuthError) for
// the request's id; a notification gets no body.
func authLocal(f *AuthFailure, msg *mcp.Message, reasons []policy.Reason, decisionID string) *Local {
	var l *Local
	switch {
	case msg != nil && msg.Kind == mcp.KindNotification:
		l = local(f.Status, nil)
	case msg != nil && msg.Kind == mcp.KindRequest:
		l = local(f.Status, refusal.AuthError(msg.ID, reasons, decisionID))
	default: // no message (GET, DELETE) or a client's response
		l = local(f.Status, refusal.AuthError(jsonNull, reasons, decisionID))
	}
	if f.WWWAuthenticate != "" || f.Status == 503 {
		if l.Header == nil {
			l.Header = mcp.Header{}
		}
	}
	if f.WWWAuthenticate != "" {
		l.Header.Set("www-authenticate", f.WWWAuthenticate)
	}
	if f.Status == 503 {
		l.Header.Set("retry-after", RetryAfterSeconds)
	}
	return l
}
