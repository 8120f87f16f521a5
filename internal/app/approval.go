package app

import (
	"log/slog"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/gateway"
	"github.com/mcpgate/mcpgate/internal/approval"
	"github.com/mcpgate/mcpgate/policy"
)

// newApprovalPage builds the approval page (config approvals; served on
// the admin listener under /approvals/) and hooks it into write safety:
// previews of out-of-band actions carry its link, and new ones are
// announced on its webhook. nil when approvals is off.
func (a *App) newApprovalPage(cfg *config.Config, writes *gateway.WriteSafety, decls map[string]map[string]policy.ToolDeclaration, log *slog.Logger) (*approval.Page, error) {
	c := cfg.Approvals
	if c == nil || writes == nil {
		return nil, nil
	}
	o := approval.Options{
		BaseURL: c.BaseURL, DemoSignIn: c.DemoSignIn, Actions: writes.Actions, Rights: a.id.rights,
		// The running declarations: a configuration reload (SIGHUP) that
		// changes a tool's rights applies to the approvers checked next.
		ToolRights: func(upstream, tool string) ([]string, bool) {
			cur := decls
			if a.Pipeline != nil {
				cur = a.Pipeline.Options().Declarations
			}
			d, ok := cur[upstream][tool]
			return d.Rights, ok
		},
		Sealer: a.sealing.sealer, Audit: a.id.audit, SessionTTL: c.SessionTTL.D(),
		RequireSecondPerson: c.RequireSecondPerson, SecondPersonEffects: c.SecondPersonEffects,
		Registerer: a.reg, Logger: log.With("component", "approval-page"),
	}
	if oc := c.OIDC; oc != nil {
		o.OIDC = &approval.OIDC{Issuer: oc.Issuer, ClientID: oc.ClientID, ClientSecret: oc.ClientSecret, Scopes: oc.Scopes,
			TenantClaim: cfg.ApprovalTenantClaim(), SubjectClaim: oc.SubjectClaimOrDefault()}
	}
	if w := c.Webhook; w != nil {
		o.Webhook = &approval.WebhookOptions{URL: w.URL, Secret: []byte(w.Secret), MaxAttempts: w.MaxAttemptsOrDefault(), Timeout: w.Timeout.D()}
	}
	p, err := approval.New(o)
	if err != nil {
		return nil, err
	}
	writes.ApprovalURL = p.Link
	writes.OnPending = p.Announce
	return p, nil
}
