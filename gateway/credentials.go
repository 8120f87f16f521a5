package gateway

import (
	"errors"
	"log/slog"
	"slices"
	"strings"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// upstreamCred is the compiled credential of one upstream.
type upstreamCred struct {
	src  upstreamauth.Source
	kind string
	// remove is the snapshot's removeFields (with every static
	// credential's field) plus the client's Authorization and Cookie.
	// Capacity = length.
	remove []string
}

// headerNamer is a Source that sends its secret in a field other than
// Authorization (upstreamauth.Static).
type headerNamer interface{ HeaderName() string }

// responseCredentialFields are removed from the answers of an upstream
// with a credential: its challenge and cookies belong to the gateway's
// credential, not to the client.
var responseCredentialFields = []string{"www-authenticate", "set-cookie", "set-cookie2", "proxy-authenticate"}

// compileCredentials builds the per-upstream credentials of o. The field
// of a static secret is removed from every forwarded request, whatever
// the upstream: no upstream sees a client-sent copy of another's
// credential.
func (p *Pipeline) compileCredentials(o Options) {
	var names []string
	for _, src := range o.UpstreamCredentials {
		if n, ok := src.(headerNamer); ok {
			if h := strings.ToLower(n.HeaderName()); !slices.Contains(names, h) && !slices.Contains(p.removeFields, h) {
				names = append(names, h)
			}
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		p.removeFields = slices.Clip(append(slices.Clone(p.removeFields), names...))
	}
	for name, src := range o.UpstreamCredentials {
		if src == nil || src.Kind() == upstreamauth.KindNone {
			continue
		}
		remove := slices.Clone(p.removeFields)
		for _, f := range credentialHeaders {
			if !slices.Contains(remove, f) {
				remove = append(remove, f)
			}
		}
		if p.creds == nil {
			p.creds = map[string]*upstreamCred{}
		}
		p.creds[name] = &upstreamCred{src: src, kind: src.Kind(), remove: slices.Clip(remove)}
	}
}

// caller is who the request speaks for, for the upstream's credential.
// The caller's access token is passed on only when it is a verified OAuth
// token (an exchange uses it as its subject token); it is never sent
// upstream as it is.
func (x *Exchange) caller(v *Verdict) *upstreamauth.Caller {
	pr := &x.input.Principal
	c := new(upstreamauth.Caller)
	*c = upstreamauth.Caller{Tenant: pr.Tenant, Subject: pr.Subject, Rights: pr.Rights}
	if pr.Authenticated && pr.CredentialKind == policy.CredentialOAuth {
		if a := x.req.Header.Get("authorization"); len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
			c.AccessToken = strings.TrimSpace(a[7:])
		}
	}
	if vals := v.SetHeader[AssertionHeader]; len(vals) == 1 {
		c.Assertion = vals[0]
	}
	return c
}

// credential adds the upstream's own credential to v; nil when it did,
// else the answer that replaces forwarding: the request never goes
// upstream without its credential, nor with a broader one.
func (p *Pipeline) credential(x *Exchange, cr *upstreamCred, v *Verdict) *Local {
	x.cred = cr
	x.credCaller = x.caller(v)
	h, err := cr.src.Header(x.ctx, x.credCaller)
	if err != nil {
		p.log.LogAttrs(x.ctx, slog.LevelError, "upstream credential unavailable; request refused",
			slog.String("upstream", x.req.Upstream), slog.String("credential", cr.kind), slog.Any("error", err))
		x.outcome = OutcomeError
		fix := "Operator: check upstreams[].credential of this upstream (the secret's file or variable, the token endpoint, client id and secret) and mcpgate's log."
		if errors.Is(err, upstreamauth.ErrRefused) {
			return credentialAnswer(x, "credential_refused", "The token endpoint refused the credential of upstream "+quote(x.req.Upstream)+".", fix)
		}
		return credentialAnswer(x, "credential_unavailable", "The gateway cannot obtain the credential of upstream "+quote(x.req.Upstream)+" right now.", fix)
	}
	for k, vals := range h {
		v.SetHeader[k] = vals
	}
	v.ResponseRemove = responseCredentialFields
	return nil
}

// credentialAnswer is the answer to a request that cannot carry its
// upstream's credential, or that the upstream refused: a tool error for
// tools/call, else 502 with a JSON-RPC error (no body for a
// notification).
func credentialAnswer(x *Exchange, code, cause, fix string) *Local {
	reasons := []policy.Reason{{Code: code, Cause: cause, Fix: fix}}
	switch {
	case x.msg != nil && x.msg.Method == "tools/call" && x.msg.Kind == mcp.KindRequest:
		return local(200, refusal.ToolError(x.msg.ID, reasons, ""))
	case x.answersRequest():
		return local(502, refusal.RPCError(x.msg.ID, reasons, ""))
	}
	return &Local{Status: 502}
}

// errCredentialRefused: the upstream answered 401 or 403 to the
// credential the gateway sent.
var errCredentialRefused = errors.New("the upstream refused the gateway's credential")

// refusedCredential handles an upstream that answered 401 or 403 to a
// request carrying its credential: the source drops a cached token (the
// next request fetches a new one) and the client gets an error naming the
// upstream, never the upstream's challenge.
func (x *Exchange) refusedCredential(status int) error {
	if x.cred == nil || (status != 401 && status != 403) {
		return nil
	}
	dropped := x.cred.src.Refused(x.credCaller)
	x.p.log.LogAttrs(x.ctx, slog.LevelError, "upstream refused the credential mcpgate sent; check upstreams[].credential against what the upstream accepts",
		slog.String("upstream", x.req.Upstream), slog.String("credential", x.cred.kind), slog.Int("status", status), slog.Bool("token_dropped", dropped))
	return errCredentialRefused
}

// credentialRefusedAnswer is End's answer to errCredentialRefused.
func (x *Exchange) credentialRefusedAnswer() *Local {
	return credentialAnswer(x, "upstream_refused_credential",
		"Upstream "+quote(x.req.Upstream)+" refused the credential the gateway sent for it.",
		"Retry once: a cached token was renewed. Operator: if it persists, check upstreams[].credential of this upstream against what the upstream accepts (audience, scopes, secret).")
}
