package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
)

// decidesInto is a Decider that can write a decision into storage the
// caller has (policy.Engine).
type decidesInto interface {
	DecideInto(ctx context.Context, in *policy.Input, d *policy.Decision) error
}

// decide builds the policy input and evaluates it, recording the
// evaluation's duration. A failed evaluation is a deny (fail closed).
func (p *Pipeline) decide(ctx context.Context, x *Exchange, phase string, items []policy.Item) *policy.Decision {
	in := &x.input
	in.Version = policy.SchemaVersion
	in.Phase = phase
	in.Items = items
	if phase == policy.PhaseRequest {
		r, msg := x.req, x.msg
		in.Transport = policy.Transport{Kind: r.Transport, HTTPMethod: r.Method, Path: r.Path, Upstream: r.Upstream, Tenant: r.Tenant, ProtocolVersion: x.version, Origin: r.Header.Get("origin")}
		in.Message = policy.Message{Kind: msg.Kind.String(), Method: msg.Method, Name: msg.Name, URI: msg.URI, Arguments: msg.Arguments, ArgumentsStrict: true}
		p.messageTenants(x)
		if ci := clientInfo(msg); ci != nil {
			x.client = policy.Client{Name: ci.Name, Version: ci.Version}
			in.Message.Client = &x.client
		}
		if msg.Method == "tools/call" {
			x.toolView = p.toolValue(r.Upstream, msg.Name)
			if x.unexposed {
				// A renamed tool called by its own name: undeclared.
				x.toolView = policy.Tool{Name: msg.Name}
			}
			if called := x.calledAs(); called != msg.Name {
				x.toolView.CalledAs = called
			}
			in.Tool = &x.toolView
			in.Message.TenantArguments = tenantArguments(msg.Arguments, p.tenantArgs)
			p.catalogTool(x)
			if notFound(in.Tool) {
				in.Finders = p.finders(r.Upstream, x.calledAs(), x.memberPrefix())
			}
		}
	}
	start := time.Now()
	var d *policy.Decision
	var err error
	dec := p.decider.Load().Decider
	if di, ok := dec.(decidesInto); ok && phase == policy.PhaseRequest {
		// The request's one decision, in the exchange (decisions of
		// lists, which a notification stream's recheck makes from
		// another goroutine, get their own).
		d = &x.requestDecision
		err = di.DecideInto(ctx, in, d)
	} else {
		d, err = dec.Decide(ctx, in)
	}
	p.m.observePolicy(time.Since(start))
	if err != nil {
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "policy evaluation failed", slog.String("decision_id", d.ID), slog.String("mcp_method", x.label), slog.Any("error", err))
	}
	return d
}

func clientInfo(m *mcp.Message) *mcp.Implementation {
	if m.Meta.ClientInfo != nil {
		return m.Meta.ClientInfo
	}
	return m.InitializeClientInfo
}

// tool returns the policy view of a tool's declaration; an undeclared tool
// has Declared false and no effect (the policy's fail-closed default), and
// Undeclared set when its upstream lists and confirms such tools.
func (p *Pipeline) tool(upstream, name string) *policy.Tool {
	t := p.toolValue(upstream, name)
	return &t
}

// toolValue is tool's value.
func (p *Pipeline) toolValue(upstream, name string) policy.Tool {
	d, ok := p.opts.Declarations[upstream][name]
	t := policy.Tool{Name: name, Declared: ok, ToolDeclaration: d, Toolsets: p.opts.Toolsets.Holding(upstream, name)}
	if !ok && p.opts.UndeclaredTools[upstream] == policy.UndeclaredConfirm {
		t.Undeclared = policy.UndeclaredConfirm
	}
	return t
}

// logRefusal writes one line per policy refusal with the decision id, so a
// refusal a client reports can be found (never arguments or tokens).
func (p *Pipeline) logRefusal(ctx context.Context, x *Exchange, d *policy.Decision) {
	code := ""
	if len(d.Reasons) > 0 {
		code = d.Reasons[0].Code
	}
	p.log.LogAttrs(ctx, slog.LevelInfo, "request refused by policy",
		slog.String("decision_id", d.ID), slog.String("reason", code),
		slog.String("mcp_method", x.label), slog.String("upstream", x.req.Upstream),
		slog.String("transport", x.req.Transport))
}

// policyDecision is the stage that asks the policy (phase "request"). A
// refused request is audited and logged, and answered with the 403
// insufficient_scope challenge when only the token's scopes are missing,
// else with a tool error (tools/call), a JSON-RPC error, or 403 without
// a body for a notification.
func (p *Pipeline) policyDecision(ctx context.Context, x *Exchange) *Verdict {
	msg := x.msg
	d := p.decide(ctx, x, policy.PhaseRequest, nil)
	if d.Allow && x.unexposed {
		// A policy that lets undeclared tools through still never sends a
		// renamed tool's call under its own name.
		refused := *d
		refused.Allow, refused.Reasons = false, []policy.Reason{unexposedReason(msg.Name)}
		d = &refused
	}
	x.decision = d
	if d.Allow {
		x.outcome = OutcomeAllow
		return nil
	}
	p.audit(ctx, x, d)
	if x.outcome == "" {
		x.outcome = OutcomeDeny
	}
	p.logRefusal(ctx, x, d)
	if l := p.scopeChallenge(x, d); l != nil {
		return x.answer(l)
	}
	switch {
	case msg.Kind == mcp.KindNotification:
		return x.answer(local(403, nil))
	case msg.Method == "tools/call":
		return x.answer(local(200, refusal.ToolError(msg.ID, p.loopRefused(x, d.Reasons), d.ID)))
	}
	return x.answer(local(200, refusal.RPCError(msg.ID, d.Reasons, d.ID)))
}
