package gateway

import (
	"context"

	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Audit outcomes of tools/call records.
const (
	AuditAllowed = "allowed" // forwarded to the upstream
	AuditDenied  = "denied"  // refused by the policy
)

// audit records a tools/call decision: every
// call of a tool that is not read-only, and every refusal. The record
// names the tool, the connection, the client and the decision id; never
// arguments.
func (p *Pipeline) audit(ctx context.Context, x *Exchange, d *policy.Decision) {
	if p.opts.Audit == nil || x.msg.Method != "tools/call" {
		return
	}
	outcome := AuditAllowed
	if !d.Allow {
		outcome = AuditDenied
	} else if d.Effect == policy.EffectRead {
		return
	}
	pr := &x.input.Principal
	r := store.AuditRecord{
		Channel: store.ChannelMCP, Tenant: pr.Tenant, Connection: pr.Connection, Subject: pr.Subject,
		Action: x.msg.Name, Outcome: outcome, DecisionID: d.ID,
		PublicIDs: map[string]string{"upstream": x.req.Upstream},
	}
	if x.cred != nil {
		r.PublicIDs["credential"] = x.cred.kind
	}
	if c := x.input.Message.Client; c != nil {
		r.Client = c.Name
	}
	if d.Effect != "" {
		r.PublicIDs["effect"] = d.Effect
	}
	if !d.Allow && len(d.Reasons) > 0 {
		r.PublicIDs["reason"] = d.Reasons[0].Code
	}
	p.opts.Audit(ctx, r)
}
