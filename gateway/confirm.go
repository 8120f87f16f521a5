package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Approval modes of a pending action (Decision.Approval).
const (
	ApprovalClient     = "client"      // the person confirms in the client
	ApprovalOutOfBand  = "out_of_band" // a person approves on the approval page first
	previewStatus      = "confirmation_required"
	maxRecentChanges   = 50
	recentChangesQuery = 500
)

// effectPhrases say, in the summary a person reads, what a class of tool
// does beyond the gateway.
var effectPhrases = map[string]string{
	policy.EffectNotify:      "sends a message to people",
	policy.EffectWake:        "wakes a person (pages someone)",
	policy.EffectAlerting:    "changes alerting",
	policy.EffectDelete:      "deletes data",
	policy.EffectSilentWrite: "changes data",
}

// confirmSummary is the server-written summary of a pending action: what
// the tool does and exactly the arguments that go out, in their exact
// canonical form (canonical: members sorted, numbers as written), so the
// same call always reads the same.
func confirmSummary(title, tool, effect string, declared bool, canonicalArgs []byte) string {
	phrase := effectPhrases[effect]
	if !declared {
		phrase = "not declared: what it does is unknown"
	}
	if phrase == "" {
		phrase = "acts outside the conversation"
	}
	return title + " (" + tool + ", " + phrase + ") with " + string(canonicalArgs)
}

// preview stores the call as a pending action and answers with a preview:
// nothing goes upstream until confirm_action.
func (p *Pipeline) preview(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	w := p.opts.Writes
	arguments := x.normalisedArguments()
	canon, err := canonical(arguments)
	if err != nil {
		return p.writeFailure(ctx, x, d, "the arguments cannot be put in canonical form", err)
	}
	digest, _, err := writeDigest(arguments)
	if err != nil {
		return p.writeFailure(ctx, x, d, "the arguments cannot be fingerprinted", err)
	}
	// The person confirming sees the tool as the client does (its
	// exposed name and title) and, for a renamed tool, its own name.
	tool := x.calledAs()
	if tool != x.msg.Name {
		tool += ", upstream tool " + x.msg.Name
	}
	title, hash := titleFromName(x.calledAs()), ""
	if p.opts.Catalog != nil {
		// The entry the policy judged (looked up once per request).
		if x.lookupTool(x.msg.Name); x.cat.listed {
			t := &x.cat.tool
			hash = t.Hash
			if _, listed, _ := p.listedText(x.req.Upstream, t); listed != "" {
				title = listed
			}
		}
	}
	approval := d.Approval
	if approval != ApprovalOutOfBand {
		approval = ApprovalClient
	}
	pr := &x.input.Principal
	token, id := newConfirmToken()
	now := time.Now().UTC()
	resume, err := resumeMembers(x.msg.Params)
	if err != nil {
		return p.writeFailure(ctx, x, d, "the call's requestState and inputResponses cannot be kept", err)
	}
	answers, err := answersSummary(resume)
	if err != nil {
		return p.writeFailure(ctx, x, d, "the call's inputResponses cannot be put in canonical form", err)
	}
	a := store.Action{
		ID: id, Tenant: pr.Tenant, Subject: pr.Subject, Connection: connectionOf(pr), Upstream: x.req.Upstream,
		Tool: x.msg.Name, Effect: d.Effect, Arguments: bytes.Clone(arguments), Resume: resume, ArgsDigest: digest, ToolHash: hash,
		Summary: confirmSummary(title, tool, d.Effect, x.toolView.Declared, canon) + answers, Approval: approval,
		CreatedAt: now, ExpiresAt: now.Add(w.confirmTTL()), State: store.ActionPending,
	}
	if c := x.input.Message.Client; c != nil {
		a.Client = c.Name
	}
	if err := w.Actions.PutAction(ctx, a); err != nil {
		return p.writeFailure(ctx, x, d, "the pending action cannot be stored", err)
	}
	x.outcome = OutcomeAllow
	x.write = &writeState{kind: writeConfirm, action: id, decision: d, settled: true}
	p.m.observeWrite("preview")
	p.auditWrite(ctx, x, d, AuditPending)
	link := ""
	if a.Approval == ApprovalOutOfBand {
		if w.ApprovalURL != nil {
			link = w.ApprovalURL(a.ID)
		}
		if w.OnPending != nil {
			w.OnPending(ctx, a)
		}
	}
	result := previewResult(a, token, link)
	if p.elicitsConfirmation(x, a.Approval) {
		// Asked through input_required with a sealed requestState
		// (elicit.go); on failure the confirm_token preview stands.
		if ir, err := p.inputRequired(x, a); err == nil {
			result = ir
			p.m.observeWrite("input_required")
		} else {
			p.log.LogAttrs(ctx, slog.LevelError, "approval through input_required failed; confirm_action preview instead", slog.Any("error", err))
		}
	}
	if len(x.warnings) > 0 {
		// The coercions were applied to what will go out: say so now.
		if withWarnings, err := warningsMeta(result, x.warnings); err == nil {
			result = withWarnings
		}
	}
	return local(200, mcp.ResultResponse(x.msg.ID, result))
}

// previewDetails is the structuredContent of a preview.
type previewDetails struct {
	Status         string `json:"status"`
	Tool           string `json:"tool"`
	Effect         string `json:"effect"`
	ConfirmToken   string `json:"confirm_token"`
	ConfirmSummary string `json:"confirm_summary"`
	Approval       string `json:"approval"`
	ExpiresAt      string `json:"expires_at"`
	NextTool       string `json:"next_tool"`
	// ApprovalURL is the approval page's link of an out-of-band action
	// (approval page); the confirm_token never appears in it.
	ApprovalURL string `json:"approval_url,omitempty"`
}

// previewResult is the CallToolResult of a preview: a text for the model
// and the person, ending with the details as one JSON line, and the same
// details in structuredContent.
func previewResult(a store.Action, token, link string) []byte {
	det := previewDetails{Status: previewStatus, Tool: a.Tool, Effect: a.Effect, ConfirmToken: token, ConfirmSummary: a.Summary,
		Approval: a.Approval, ExpiresAt: a.ExpiresAt.Format(time.RFC3339), NextTool: ToolConfirmAction, ApprovalURL: link}
	line, _ := json.Marshal(det)
	var text string
	if a.Approval == ApprovalOutOfBand {
		page := "the approval page"
		if link != "" {
			page = "the approval page, " + link + " (give the user this link)"
		}
		text = "Preview — nothing was sent. " + a.Summary + ".\nA person who holds the right for this action must approve it on " + page + " first; " +
			"until then confirm_action answers approval_pending. After approval, call confirm_action with the confirm_token and the exact confirm_summary below. " +
			"To drop it, call reject_action. The token expires at " + det.ExpiresAt + ".\n"
	} else {
		text = "Preview — nothing was sent. " + a.Summary + ".\nShow this summary to the user. Only if they agree, call confirm_action with the confirm_token and the exact confirm_summary below; " +
			"if they do not, call reject_action. The token expires at " + det.ExpiresAt + ".\n"
	}
	text += string(line)
	var b bytes.Buffer
	enc := jsontext.NewEncoder(&b)
	_ = enc.WriteToken(jsontext.BeginObject)
	_ = enc.WriteToken(jsontext.String("content"))
	_ = enc.WriteToken(jsontext.BeginArray)
	_ = enc.WriteToken(jsontext.BeginObject)
	_ = enc.WriteToken(jsontext.String("type"))
	_ = enc.WriteToken(jsontext.String("text"))
	_ = enc.WriteToken(jsontext.String("text"))
	_ = enc.WriteToken(jsontext.String(text))
	_ = enc.WriteToken(jsontext.EndObject)
	_ = enc.WriteToken(jsontext.EndArray)
	_ = enc.WriteToken(jsontext.String("structuredContent"))
	_ = enc.WriteValue(line)
	_ = enc.WriteToken(jsontext.EndObject)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// isGatewayTool reports whether name is one of mcpgate's own tools.
func isGatewayTool(name string) bool {
	return name == ToolConfirmAction || name == ToolRejectAction || name == ToolListRecentChanges
}

// actionArgs are the arguments of confirm_action and reject_action.
type actionArgs struct {
	ConfirmToken   string `json:"confirm_token"`
	ConfirmSummary string `json:"confirm_summary"`
	Reason         string `json:"reason"`
	Limit          int    `json:"limit"`
}

// gatewayToolSchemas are the inputSchemas of the gateway tools.
var gatewayToolSchemas = map[string]struct {
	allowed, required []string
}{
	ToolConfirmAction:     {[]string{"confirm_token", "confirm_summary"}, []string{"confirm_token", "confirm_summary"}},
	ToolRejectAction:      {[]string{"confirm_token", "reason"}, []string{"confirm_token"}},
	ToolListRecentChanges: {[]string{"limit"}, nil},
}

// gatewayTool answers a call of one of mcpgate's own tools. For a
// confirm_action that may run, it rewrites the exchange into the original
// call (x.msg, *body) and returns nil: the caller then runs the policy on
// the original call with the current principal, and forwards it once.
func (p *Pipeline) gatewayTool(ctx context.Context, x *Exchange, body *[]byte) *Local {
	x.outcome = OutcomeDeny
	var a actionArgs
	if l := x.gatewayArgs(&a); l != nil {
		return l
	}
	switch x.msg.Name {
	case ToolListRecentChanges:
		return p.listRecentChanges(ctx, x, a.Limit)
	case ToolRejectAction:
		return p.rejectAction(ctx, x, a)
	}
	return p.confirmAction(ctx, x, a, body)
}

// gatewayArgs decodes a gateway tool's arguments strictly: unknown or
// missing arguments and wrong types are refused naming the allowed ones.
func (x *Exchange) gatewayArgs(a *actionArgs) *Local {
	spec := gatewayToolSchemas[x.msg.Name]
	args := x.msg.Arguments
	if len(args) == 0 {
		args = jsontext.Value("{}")
	}
	var problem string
	seen := map[string]bool{}
	err := eachMember(args, func(name string, v jsontext.Value) bool {
		seen[name] = true
		switch {
		case !slices.Contains(spec.allowed, name):
			problem = "unknown argument " + quote(name)
		case name == "limit" && v.Kind() != '0':
			problem = "limit must be a number"
		case name != "limit" && v.Kind() != '"':
			problem = name + " must be a string"
		}
		return problem != ""
	})
	if err != nil {
		problem = "arguments must be an object"
	}
	for _, r := range spec.required {
		if problem == "" && !seen[r] {
			problem = "missing argument " + quote(r)
		}
	}
	if problem == "" {
		if err := json.Unmarshal(args, a); err != nil {
			problem = "arguments cannot be read"
		}
	}
	if problem == "" {
		return nil
	}
	return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
		Code:  "invalid_arguments",
		Cause: "The arguments of " + x.msg.Name + " are wrong: " + problem + ".",
		Fix:   "Call " + x.msg.Name + " with only these arguments: " + joinNames(spec.allowed) + ".",
	}}, ""))
}

func joinNames(names []string) string {
	var b bytes.Buffer
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(n)
	}
	return b.String()
}

// toolRefusal is a tool-error answer of a gateway tool.
func toolRefusal(x *Exchange, code, cause, fix, next string) *Local {
	return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{Code: code, Cause: cause, Fix: fix, NextTool: next}}, ""))
}

// ownAction loads the action a confirm_token names, if it belongs to the
// caller's connection; any other token reads as unknown (nothing learnt).
func (p *Pipeline) ownAction(ctx context.Context, x *Exchange, token string) (store.Action, *Local) {
	a, err := p.opts.Writes.Actions.Action(ctx, confirmTokenID(token))
	// The same connection and the same upstream route: an action
	// previewed on one upstream is never sent to another.
	if err == nil && a.Connection == connectionOf(&x.input.Principal) && a.Upstream == x.req.Upstream {
		return a, nil
	}
	if err == nil && a.Connection == connectionOf(&x.input.Principal) && x.fed != nil && x.member == "" && x.fed.has(a.Upstream) {
		// A federated route: the action was previewed on one of its
		// members, where the confirmed call goes.
		x.toMember(a.Upstream)
		return a, nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "pending action cannot be read", slog.Any("error", err))
		return a, toolRefusal(x, "write_state_unavailable", "The gateway cannot read pending actions right now; nothing was sent.", "Retry the same call in 10 seconds.", "")
	}
	return a, toolRefusal(x, "confirm_token_unknown", "This confirm_token is not one this connection received from a preview.",
		"Call the original tool again to get a fresh preview and its confirm_token; do not make tokens up.", "")
}

// actionStateRefusal explains why an action in state a.State cannot be
// confirmed; nil when it can (pending in the client, or approved).
func actionStateRefusal(x *Exchange, a store.Action, now time.Time) *Local {
	again := "Call " + a.Tool + " again for a fresh preview if the user still wants it."
	switch a.State {
	case store.ActionExecuted, store.ActionFailed:
		return toolRefusal(x, "confirm_token_used", "This action was already confirmed at "+fmtTime(a.DecidedAt)+" (outcome: "+a.Reason+"); it never runs twice.",
			"Do not confirm it again; check its effect instead.", ToolListRecentChanges)
	case store.ActionExecuting:
		return toolRefusal(x, "in_progress", "This action is being executed now.", "Wait 5 seconds, then check its effect.", ToolListRecentChanges)
	case store.ActionRejected:
		return toolRefusal(x, "action_rejected", "This action was rejected at "+fmtTime(a.DecidedAt)+"; it will not run.",
			"Do not call it again unless the user asks for it anew.", "")
	case store.ActionSuperseded:
		return toolRefusal(x, "confirm_token_superseded", "A newer preview replaced this one (the tool or its arguments changed).", again, a.Tool)
	}
	if now.After(a.ExpiresAt) {
		return toolRefusal(x, "confirm_token_expired", "This confirm_token expired at "+fmtTime(a.ExpiresAt)+"; nothing was sent.", again, a.Tool)
	}
	if a.State == store.ActionPending && a.Approval == ApprovalOutOfBand {
		return toolRefusal(x, "approval_pending", "A person who holds the right for this action has not approved it yet on the approval page.",
			"Tell the user it waits for approval; retry confirm_action in 60 seconds, or after they say it is approved.", "")
	}
	if a.State != store.ActionPending && a.State != store.ActionApproved {
		return toolRefusal(x, "confirm_token_unknown", "This action cannot be confirmed (state "+a.State+").", again, a.Tool)
	}
	return nil
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "an earlier time"
	}
	return t.UTC().Format(time.RFC3339)
}

// confirmAction checks a confirm_action call and, when it may run,
// rewrites the exchange into the original call.
func (p *Pipeline) confirmAction(ctx context.Context, x *Exchange, args actionArgs, body *[]byte) *Local {
	a, l := p.ownAction(ctx, x, args.ConfirmToken)
	if l != nil {
		return l
	}
	if l := actionStateRefusal(x, a, time.Now()); l != nil {
		return l
	}
	if args.ConfirmSummary != a.Summary {
		return toolRefusal(x, "confirm_summary_mismatch", "The confirm_summary does not match the preview's summary exactly; nothing was sent.",
			"Pass the confirm_summary of the preview unchanged, after the user agreed to exactly that summary.", "")
	}
	orig, err := originalCall(x.msg, a)
	if err != nil {
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "the confirmed call cannot be rebuilt", slog.Any("error", err))
		return toolRefusal(x, "write_state_unavailable", "The gateway cannot rebuild the confirmed call; nothing was sent.", "Call "+a.Tool+" again for a fresh preview.", a.Tool)
	}
	msg, perr := mcp.Parse(orig, p.opts.MaxJSONDepth)
	if perr != nil {
		x.outcome = OutcomeError
		return toolRefusal(x, "write_state_unavailable", "The stored call is not a valid request; nothing was sent.", "Call "+a.Tool+" again for a fresh preview.", a.Tool)
	}
	if p.opts.Catalog != nil {
		if t, listed, _ := p.opts.Catalog.Tool(x.req.Upstream, a.Tool); !listed || t.Hash != a.ToolHash {
			// The tool changed between preview and confirmation: the old
			// token dies and the call is judged afresh (a new preview,
			// or the refusal of a changed tool).
			if _, err := p.opts.Writes.Actions.TransitionAction(ctx, a.ID, a.State, store.ActionUpdate{State: store.ActionSuperseded, DecidedAt: time.Now(), Reason: "tool definition changed"}); err != nil {
				p.log.LogAttrs(ctx, slog.LevelWarn, "superseding a pending action failed", slog.Any("error", err))
			}
			x.msg, *body = msg, orig
			return nil
		}
	}
	x.msg, *body = msg, orig
	x.confirming = &a
	return nil
}

// resumeKeys are the tools/call params members that carry an upstream's
// own multi-round state (MCP 2026-07-28: the requestState of its
// InputRequiredResult and the client's inputResponses to it).
var resumeKeys = [...]string{"requestState", "inputResponses"}

// resumeMembers is an object with the resumeKeys members of params (nil
// when it has none): a confirmed call goes upstream with the round state
// the previewed call carried, not without it.
func resumeMembers(params []byte) ([]byte, error) {
	var out []byte
	for _, k := range resumeKeys {
		v, ok, err := member(params, k)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if out == nil {
			out = []byte(`{}`)
		}
		if out, err = withMember(out, k, v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// answersSummary is the part of a confirm_summary naming the client's
// inputResponses a multi-round call carries (resumeMembers): they go
// upstream with the confirmed call and can change what it does, so the
// person approves them too. "" when there are none.
func answersSummary(resume []byte) (string, error) {
	if len(resume) == 0 {
		return "", nil
	}
	v, ok, err := member(resume, "inputResponses")
	if err != nil || !ok {
		return "", err
	}
	c, err := canonical(v)
	if err != nil {
		return "", err
	}
	return ", answering the server's questions with " + string(c), nil
}

// originalCall rebuilds the tools/call request a pending action stands
// for, with the id and _meta of the confirm_action request and the
// upstream's own round state the previewed call carried (resumeMembers).
func originalCall(confirm *mcp.Message, a store.Action) ([]byte, error) {
	params := []byte(`{}`)
	var err error
	if params, err = withMember(params, "name", jsontext.Value(strconv.Quote(a.Tool))); err != nil {
		return nil, err
	}
	if params, err = withMember(params, "arguments", a.Arguments); err != nil {
		return nil, err
	}
	for _, k := range resumeKeys {
		if len(a.Resume) == 0 {
			break
		}
		v, ok, err := member(a.Resume, k)
		if err != nil {
			return nil, fmt.Errorf("stored round state: %w", err)
		}
		if ok {
			if params, err = withMember(params, k, v); err != nil {
				return nil, err
			}
		}
	}
	if meta, ok, _ := member(confirm.Params, "_meta"); ok {
		if params, err = withMember(params, "_meta", meta); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.Write(confirm.ID)
	b.WriteString(`,"method":"tools/call","params":`)
	b.Write(params)
	b.WriteByte('}')
	v := jsontext.Value(b.Bytes())
	if !v.IsValid() {
		return nil, errors.New("rebuilt call is not valid JSON")
	}
	return v, nil
}

// startConfirmed takes the confirmed action's lock (pending or approved →
// executing, exactly once) before the original call is forwarded.
//
// The arguments about to go out must be those the person approved (the
// same exact canonical digest): a stored call the argument check would
// rewrite now is refused, never sent with other values than its summary's.
func (p *Pipeline) startConfirmed(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	a := x.confirming
	if digest, _, err := writeDigest(x.normalisedArguments()); err != nil || digest != a.ArgsDigest {
		x.outcome = OutcomeDeny
		return toolRefusal(x, "arguments_changed", "The arguments that would go out differ from those the user approved; nothing was sent.",
			"Call "+a.Tool+" again for a fresh preview, and show its summary to the user.", a.Tool)
	}
	if _, err := p.opts.Writes.Actions.TransitionAction(ctx, a.ID, a.State, store.ActionUpdate{State: store.ActionExecuting, DecidedAt: time.Now()}); err != nil {
		x.outcome = OutcomeDeny
		if errors.Is(err, store.ErrConflict) {
			return toolRefusal(x, "confirm_token_used", "This action was confirmed by another call a moment ago; it never runs twice.",
				"Do not confirm it again; check its effect instead.", ToolListRecentChanges)
		}
		return p.writeFailure(ctx, x, d, "the pending action cannot be locked", err)
	}
	x.write = &writeState{kind: writeConfirm, action: a.ID, decision: d}
	p.m.observeWrite("confirmed")
	p.auditWrite(ctx, x, d, AuditConfirmed)
	return nil
}

// rejectAction declines a pending action of the caller's connection.
func (p *Pipeline) rejectAction(ctx context.Context, x *Exchange, args actionArgs) *Local {
	a, l := p.ownAction(ctx, x, args.ConfirmToken)
	if l != nil {
		return l
	}
	if a.State == store.ActionRejected {
		// Rejecting twice is the same as once (reject_action is
		// annotated idempotent).
		x.outcome = OutcomeAllow
		return local(200, mcp.ResultResponse(x.msg.ID, textResult("Already rejected: "+a.Summary+". Nothing was sent.", map[string]any{"status": "rejected", "tool": a.Tool})))
	}
	if a.State != store.ActionPending && a.State != store.ActionApproved {
		if l := actionStateRefusal(x, a, time.Now()); l != nil {
			return l
		}
	}
	if _, err := p.opts.Writes.Actions.TransitionAction(ctx, a.ID, a.State, store.ActionUpdate{State: store.ActionRejected, DecidedBy: x.input.Principal.Subject, DecidedAt: time.Now(), Reason: args.Reason}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return toolRefusal(x, "action_changed", "The action changed state while rejecting it.", "Call reject_action again to see its state.", "")
		}
		return p.writeFailure(ctx, x, &policy.Decision{}, "the pending action cannot be updated", err)
	}
	x.outcome = OutcomeAllow
	x.write = &writeState{kind: writeConfirm, action: a.ID, settled: true}
	saved := x.msg.Name
	x.msg.Name = a.Tool
	p.auditWrite(ctx, x, &policy.Decision{Effect: a.Effect}, AuditRejected)
	x.msg.Name = saved
	p.m.observeWrite("rejected")
	return local(200, mcp.ResultResponse(x.msg.ID, textResult("Rejected: "+a.Summary+". Nothing was sent.", map[string]any{"status": "rejected", "tool": a.Tool})))
}

// listRecentChanges shows the caller's connection what it changed lately,
// from the audit trail (never arguments), newest first.
func (p *Pipeline) listRecentChanges(ctx context.Context, x *Exchange, limit int) *Local {
	as := p.opts.Writes.Audit
	if as == nil {
		return toolRefusal(x, "audit_unavailable", "This gateway keeps no audit trail it could show.", "Ask the user what was changed.", "")
	}
	if limit <= 0 || limit > maxRecentChanges {
		limit = maxRecentChanges
	}
	pr := &x.input.Principal
	recs, err := as.QueryAudit(ctx, store.AuditQuery{Tenant: pr.Tenant, Limit: recentChangesQuery})
	if err != nil {
		x.outcome = OutcomeError
		return toolRefusal(x, "audit_unavailable", "The audit trail cannot be read right now.", "Retry in 10 seconds.", "")
	}
	type change struct {
		Time      string            `json:"time"`
		Tool      string            `json:"tool"`
		Outcome   string            `json:"outcome"`
		PublicIDs map[string]string `json:"ids,omitempty"`
	}
	changes := []change{}
	conn := connectionOf(pr)
	for _, r := range recs {
		if len(changes) == limit {
			break
		}
		// What may have changed something: answered writes, and writes
		// whose answer never came.
		if r.Channel != store.ChannelMCP || r.Connection != conn || (r.Outcome != AuditOK && r.Outcome != AuditUnknown) {
			continue
		}
		changes = append(changes, change{Time: r.Time.UTC().Format(time.RFC3339), Tool: r.Action, Outcome: r.Outcome, PublicIDs: r.PublicIDs})
	}
	x.outcome = OutcomeAllow
	text := strconv.Itoa(len(changes)) + " recent change(s) made through this connection, newest first."
	return local(200, mcp.ResultResponse(x.msg.ID, textResult(text, map[string]any{"changes": changes})))
}

// textResult is a CallToolResult with one text block (text, then the
// structured content as one JSON line) and structuredContent.
func textResult(text string, structured map[string]any) []byte {
	line, _ := json.Marshal(structured)
	out, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]string{"type": "text", "text": text + "\n" + string(line)}},
		"structuredContent": jsontext.Value(line),
	}, json.Deterministic(true))
	return out
}

// gatewayTools is the stage that runs mcpgate's own tools with write
// safety on: a confirm_action that may run becomes the original call,
// judged by the next stages with the current principal. A retry carrying
// a requestState mcpgate sealed (an approval asked through
// input_required) is checked before anything else; the approved call
// goes on with the upstream's own state (elicit.go).
func (p *Pipeline) gatewayTools(ctx context.Context, x *Exchange) *Verdict {
	x.mark(SpanPolicy)
	if p.opts.Writes == nil || x.msg.Method != "tools/call" {
		return nil
	}
	if isGatewayTool(x.msg.Name) && x.member == "" { // a member's tool of that name is the member's
		if l := p.gatewayTool(ctx, x, &x.body); l != nil {
			return x.answer(l)
		}
		x.bodyChanged = true
		return nil
	}
	if l := p.elicitRetry(ctx, x, &x.body); l != nil {
		return x.answer(l)
	}
	if x.elicit != nil {
		x.bodyChanged = true
	}
	return nil
}
