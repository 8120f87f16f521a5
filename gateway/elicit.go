package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// Confirmation through input_required (MCP 2026-07-28,
// schema "Multi Round-Trip": InputRequiredResult, InputResponseRequestParams;
// "elicitation/create" form mode).
//
// A client that declares elicitation (form mode) in the per-request
// clientCapabilities of revision 2026-07-28 is not given a confirm_token
// for an action the person approves in the client. The preview is an
// InputRequiredResult instead: one form elicitation asking the person to
// approve the server-written summary, and a requestState that mcpgate
// seals (Sealer, AEAD with keys shared by the replicas). The sealed state
// binds the pending action to the connection, tenant, subject, upstream,
// tool and argument digest and expires with the action; it wraps the
// upstream's own requestState and inputResponses of the call, if it
// carried any, and never replaces them.
//
// The client's retry carries the answer in inputResponses[ElicitInputKey]
// and the sealed requestState. mcpgate opens and checks the seal before
// anything else; an accepted answer takes the action's lock exactly once
// (pending → executing, as confirm_action does) and forwards the call
// with the upstream's own requestState and inputResponses restored and
// mcpgate's removed; a declined or cancelled one rejects the action. A
// forged, altered, foreign, expired or replayed requestState is refused
// and nothing is forwarded.

// Sealer seals and opens small values with authenticated encryption under
// keys the replicas share (internal/sealing implements it). Open fails for
// any value Seal did not make for the same purpose with a key still held.
type Sealer interface {
	Seal(purpose string, plaintext []byte) (string, error)
	Open(purpose, sealed string) ([]byte, error)
}

// ElicitInputKey is the key of mcpgate's confirmation in the inputRequests
// of its InputRequiredResult and in the inputResponses of the retry.
const ElicitInputKey = "io.mcpgate/confirm"

// ElicitConfirmField is the boolean field of the confirmation form: the
// action runs only on action "accept" with this field true.
const ElicitConfirmField = "approve"

// sealedStatePrefix starts every requestState mcpgate seals
// (internal/sealing.Prefix); a requestState without it is the upstream's.
const sealedStatePrefix = "mcpgs1."

// requestStatePurpose is the purpose sealed requestStates are bound to.
const requestStatePurpose = "io.mcpgate/requestState/v1"

// sealedState is the content of a sealed requestState.
type sealedState struct {
	V          int    `json:"v"`
	Connection string `json:"conn"`
	Tenant     string `json:"ten"`
	Subject    string `json:"sub"`
	Upstream   string `json:"up"`
	Tool       string `json:"tool"`
	Digest     string `json:"dig"` // writeDigest of the normalised arguments
	Action     string `json:"act"` // store.Action.ID
	Expires    int64  `json:"exp"` // Unix seconds
	Nonce      string `json:"n"`
	// UpstreamState and UpstreamResponses are the upstream's own
	// requestState and the inputResponses the call carried for it.
	UpstreamState     *string        `json:"rs,omitempty"`
	UpstreamResponses jsontext.Value `json:"ir,omitempty"`
}

// elicitState is a retry whose sealed requestState opened and checked.
type elicitState struct {
	state  sealedState
	action store.Action
}

// elicitsConfirmation reports whether the preview of an action asks the
// person through input_required: a sealer is configured, the person
// approves in the client, and the request declares form elicitation under
// revision 2026-07-28 or later.
//
// An out-of-band action (approved on the approval page) is asked through
// URL-mode elicitation instead, when the client declares it and the
// approval page is on: the request carries the page's link, and the retry
// runs the action once a person approved it there.
func (p *Pipeline) elicitsConfirmation(x *Exchange, approval string) bool {
	w := p.opts.Writes
	if w == nil || w.Sealer == nil || x.version < mcp.Version20260728 {
		return false
	}
	form, url := elicitationModes(x.msg.Meta.ClientCapabilities)
	switch approval {
	case ApprovalClient:
		return form
	case ApprovalOutOfBand:
		return w.ApprovalURL != nil && url
	}
	return false
}

// elicitationModes reports the elicitation modes client capabilities
// declare: an "elicitation" object with a "form" and/or a "url" member;
// with neither, form mode is implied.
func elicitationModes(caps []byte) (form, url bool) {
	el, ok, err := member(caps, "elicitation")
	if err != nil || !ok || el.Kind() != '{' {
		return false, false
	}
	_, form, _ = member(el, "form")
	_, url, _ = member(el, "url")
	return form || !url, url
}

// inputRequired builds the InputRequiredResult of a preview: a form
// elicitation asking the person to approve a.Summary, and the sealed
// requestState that binds the answer to this call.
func (p *Pipeline) inputRequired(x *Exchange, a store.Action) ([]byte, error) {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	st := sealedState{
		V: 1, Connection: a.Connection, Tenant: a.Tenant, Subject: a.Subject, Upstream: a.Upstream, Tool: a.Tool,
		Digest: a.ArgsDigest, Action: a.ID, Expires: a.ExpiresAt.Unix(), Nonce: hex.EncodeToString(nonce[:]),
	}
	if rs, ok, _ := member(x.msg.Params, "requestState"); ok {
		var s string
		if err := json.Unmarshal(rs, &s); err != nil {
			return nil, errors.New("the upstream's requestState is not a string")
		}
		st.UpstreamState = &s
	}
	if ir, ok, _ := member(x.msg.Params, "inputResponses"); ok {
		st.UpstreamResponses = bytes.Clone(ir)
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	sealed, err := p.opts.Writes.Sealer.Seal(requestStatePurpose, plain)
	if err != nil {
		return nil, err
	}
	if a.Approval == ApprovalOutOfBand {
		link := p.opts.Writes.ApprovalURL(a.ID)
		return json.Marshal(map[string]any{
			"resultType": "input_required",
			"inputRequests": map[string]any{ElicitInputKey: map[string]any{
				"method": "elicitation/create",
				"params": map[string]any{
					"mode":          "url",
					"elicitationId": a.ID[:32],
					"url":           link,
					"message": "A person who holds the right for this action must approve it on the approval page: " + a.Summary +
						". Nothing is sent until then. It expires at " + a.ExpiresAt.UTC().Format(time.RFC3339) + ".",
				},
			}},
			"requestState": sealed,
		}, json.Deterministic(true))
	}
	message := "Approve this action? " + a.Summary + ". Nothing is sent unless you approve. This request expires at " + a.ExpiresAt.UTC().Format(time.RFC3339) + "."
	return json.Marshal(map[string]any{
		"resultType": "input_required",
		"inputRequests": map[string]any{ElicitInputKey: map[string]any{
			"method": "elicitation/create",
			"params": map[string]any{
				"mode":    "form",
				"message": message,
				"requestedSchema": map[string]any{
					"type": "object",
					"properties": map[string]any{ElicitConfirmField: map[string]any{
						"type": "boolean", "title": "Approve", "default": false,
						"description": "Run " + a.Tool + " exactly as summarised: " + a.Summary,
					}},
					"required": []string{ElicitConfirmField},
				},
			},
		}},
		"requestState": sealed,
	}, json.Deterministic(true))
}

// elicitRetry handles a tools/call that carries a requestState mcpgate
// sealed: it opens and checks the seal and the person's answer. It returns
// nil with x.elicit unset when the call carries no such requestState (an
// upstream's own requestState goes its normal way); nil with x.elicit set
// and *body, x.msg rewritten (the upstream's state restored, mcpgate's
// removed) when the approved call may go on to the policy; otherwise the
// answer (a refusal, or the rejection the person chose).
func (p *Pipeline) elicitRetry(ctx context.Context, x *Exchange, body *[]byte) *Local {
	raw, ok := paramMember(x.msg, mcp.ParamRequestState)
	if !ok || raw.Kind() != '"' {
		return nil
	}
	var sealed string
	if err := json.Unmarshal(raw, &sealed); err != nil || !bytes.HasPrefix([]byte(sealed), []byte(sealedStatePrefix)) {
		return nil
	}
	x.outcome = OutcomeDeny
	again := "Call " + x.calledAs() + " again without requestState and inputResponses to get a fresh approval request."
	w := p.opts.Writes
	if w.Sealer == nil {
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "request_state_invalid", "This requestState was sealed by a gateway, but this gateway holds no sealing keys to open it; nothing was sent.", again, x.calledAs())
	}
	plain, err := w.Sealer.Open(requestStatePurpose, sealed)
	if err != nil {
		p.m.observeWrite("request_state_refused")
		p.log.LogAttrs(ctx, slog.LevelWarn, "sealed requestState refused", slog.String("tool", x.msg.Name), slog.Any("error", err))
		return toolRefusal(x, "request_state_invalid", "The requestState was altered, was not issued by this gateway, or was sealed with a key it no longer holds; nothing was sent.", again, x.calledAs())
	}
	var st sealedState
	if err := json.Unmarshal(plain, &st); err != nil || st.V != 1 {
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "request_state_invalid", "The requestState cannot be read by this gateway version; nothing was sent.", again, x.calledAs())
	}
	pr := &x.input.Principal
	if st.Connection != connectionOf(pr) || st.Tenant != pr.Tenant || st.Subject != pr.Subject || st.Upstream != x.req.Upstream || st.Tool != x.msg.Name {
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "request_state_mismatch", "This requestState was issued for another call or another caller; nothing was sent.",
			"Retry only the exact call that received it, with the same credential. "+again, x.calledAs())
	}
	now := time.Now()
	if now.Unix() >= st.Expires {
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "request_state_expired", "This approval request expired at "+time.Unix(st.Expires, 0).UTC().Format(time.RFC3339)+"; nothing was sent.", again, x.calledAs())
	}
	a, err := w.Actions.Action(ctx, st.Action)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			p.m.observeWrite("request_state_refused")
			return toolRefusal(x, "request_state_expired", "The action this requestState stood for is gone (expired); nothing was sent.", again, x.calledAs())
		}
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "pending action cannot be read", slog.Any("error", err))
		return toolRefusal(x, "write_state_unavailable", "The gateway cannot read pending actions right now; nothing was sent.", "Retry the same call in 10 seconds.", "")
	}
	if a.Connection != st.Connection || a.Tool != st.Tool || a.ArgsDigest != st.Digest {
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "request_state_mismatch", "This requestState does not match the action it names; nothing was sent.", again, x.calledAs())
	}
	if l := elicitStateRefusal(x, a, now); l != nil {
		p.m.observeWrite("request_state_refused")
		return l
	}
	answer, problem := elicitAnswer(x.msg.Params)
	if a.Approval == ApprovalOutOfBand && problem == "" && answer != "cancel" && (answer != "decline" || elicitAction(x.msg.Params) == "accept") {
		// URL mode: "accept" says the person went to the page; whether
		// the action runs is what they decided there (its state).
		answer = "approve"
	}
	if problem != "" {
		return toolRefusal(x, "input_response_invalid", "The retry does not carry the person's answer to the approval request: "+problem+"; nothing was sent.",
			"Show the approval request to the user and retry with their answer in inputResponses[\""+ElicitInputKey+"\"] and the same requestState.", "")
	}
	if answer != "approve" {
		return p.elicitReject(ctx, x, a, answer)
	}
	nb, err := restoreUpstreamState(*body, st)
	if err == nil {
		var msg *mcp.Message
		var perr *mcp.Error
		if msg, perr = mcp.Parse(nb, p.opts.MaxJSONDepth); perr == nil {
			x.msg, *body = msg, nb
			x.elicit = &elicitState{state: st, action: a}
			return nil
		}
		err = perr
	}
	x.outcome = OutcomeError
	p.log.LogAttrs(ctx, slog.LevelError, "the approved call cannot be rebuilt", slog.Any("error", err))
	return toolRefusal(x, "write_state_unavailable", "The gateway cannot rebuild the approved call; nothing was sent.", again, x.calledAs())
}

// elicitStateRefusal explains why the action of a sealed requestState
// cannot run; nil when it is pending (approved in the client) and live.
func elicitStateRefusal(x *Exchange, a store.Action, now time.Time) *Local {
	again := "Call " + a.Tool + " again without requestState for a fresh approval request if the user still wants it."
	switch a.State {
	case store.ActionExecuted, store.ActionFailed, store.ActionExecuting:
		return toolRefusal(x, "request_state_used", "This approval was already used at "+fmtTime(a.DecidedAt)+"; an approved action never runs twice.",
			"Do not retry it; check its effect instead.", ToolListRecentChanges)
	case store.ActionRejected:
		return toolRefusal(x, "action_rejected", "This action was rejected at "+fmtTime(a.DecidedAt)+"; it will not run.", "Do not call it again unless the user asks for it anew.", "")
	case store.ActionSuperseded:
		return toolRefusal(x, "request_state_superseded", "A newer approval request replaced this one (the tool changed).", again, a.Tool)
	case store.ActionPending, store.ActionApproved:
		if now.After(a.ExpiresAt) {
			return toolRefusal(x, "request_state_expired", "This approval request expired at "+fmtTime(a.ExpiresAt)+"; nothing was sent.", again, a.Tool)
		}
		switch {
		case a.State == store.ActionPending && a.Approval == ApprovalClient:
			return nil
		case a.State == store.ActionApproved && a.Approval == ApprovalOutOfBand:
			return nil
		case a.State == store.ActionPending && a.Approval == ApprovalOutOfBand:
			return toolRefusal(x, "approval_pending", "A person who holds the right for this action has not approved it on the approval page yet; nothing was sent.",
				"Ask the user to approve it at the link they were given, then retry this same call with the same requestState in 60 seconds.", "")
		}
	}
	return toolRefusal(x, "request_state_invalid", "This action cannot be approved in the client (state "+a.State+", approval "+a.Approval+").", again, a.Tool)
}

// elicitAnswer reads the person's answer in the retry's
// inputResponses[ElicitInputKey] (an ElicitResult): "approve" for action
// "accept" with the approve field true, "decline" for "decline" or an
// accepted form without approval, "cancel" for "cancel". problem says
// what is wrong when the answer is missing or malformed.
func elicitAnswer(params []byte) (answer, problem string) {
	ir, ok, _ := member(params, "inputResponses")
	if !ok || ir.Kind() != '{' {
		return "", "inputResponses is missing"
	}
	res, ok, _ := member(ir, ElicitInputKey)
	if !ok || res.Kind() != '{' {
		return "", "inputResponses has no \"" + ElicitInputKey + "\" object"
	}
	var r struct {
		Action  string         `json:"action"`
		Content map[string]any `json:"content"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return "", "the answer is not an elicitation result"
	}
	switch r.Action {
	case "accept":
		if v, _ := r.Content[ElicitConfirmField].(bool); v {
			return "approve", ""
		}
		return "decline", ""
	case "decline", "cancel":
		return r.Action, ""
	}
	return "", "its action must be accept, decline or cancel"
}

// elicitReject records the person's "no" (decline or cancel): the action
// is rejected and never runs.
func (p *Pipeline) elicitReject(ctx context.Context, x *Exchange, a store.Action, answer string) *Local {
	reason := "declined in the client"
	if answer == "cancel" {
		reason = "dismissed in the client"
	}
	if _, err := p.opts.Writes.Actions.TransitionAction(ctx, a.ID, a.State, store.ActionUpdate{State: store.ActionRejected, DecidedBy: x.input.Principal.Subject, DecidedAt: time.Now(), Reason: reason}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return toolRefusal(x, "request_state_used", "This approval request was answered by another call a moment ago.", "Do not retry it; check its effect instead.", ToolListRecentChanges)
		}
		x.outcome = OutcomeError
		p.log.LogAttrs(ctx, slog.LevelError, "pending action cannot be rejected", slog.Any("error", err))
		return toolRefusal(x, "write_state_unavailable", "The gateway cannot update pending actions right now; nothing was sent.", "Retry the same call in 10 seconds.", "")
	}
	x.outcome = OutcomeAllow
	x.write = &writeState{kind: writeConfirm, action: a.ID, settled: true}
	p.auditWrite(ctx, x, nil, AuditRejected)
	p.m.observeWrite("rejected")
	text := "The user did not approve: " + a.Summary + ". Nothing was sent (" + reason + ")."
	return local(200, mcp.ResultResponse(x.msg.ID, textResult(text, map[string]any{"status": "rejected", "tool": a.Tool, "answer": answer})))
}

// restoreUpstreamState returns the request body with mcpgate's
// requestState and inputResponses replaced by the upstream's own from the
// seal (removed when the call carried none).
func restoreUpstreamState(body []byte, st sealedState) ([]byte, error) {
	params, ok, err := member(body, "params")
	if err != nil || !ok {
		return nil, errors.Join(errors.New("params not found"), err)
	}
	var tail []appended
	if st.UpstreamState != nil {
		tail = append(tail, appended{"requestState", jsontext.Value(strconv.Quote(*st.UpstreamState))})
	}
	if len(st.UpstreamResponses) > 0 {
		tail = append(tail, appended{"inputResponses", st.UpstreamResponses})
	}
	params, err = mapMembers(params, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		return v, name != "requestState" && name != "inputResponses"
	}, tail...)
	if err != nil {
		return nil, err
	}
	return withMember(body, "params", params)
}

// startElicited takes the lock of an action the person approved through
// input_required, after the policy allowed the call: the arguments must
// be those approved, the tool unchanged (else the old request dies and
// the call is judged afresh: a new preview), then pending → executing
// exactly once, as startConfirmed.
func (p *Pipeline) startElicited(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	e := x.elicit
	a := e.action
	digest, _, err := writeDigest(x.normalisedArguments())
	if err != nil {
		return p.writeFailure(ctx, x, d, "the arguments cannot be fingerprinted", err)
	}
	if digest != e.state.Digest || digest != a.ArgsDigest {
		x.outcome = OutcomeDeny
		p.m.observeWrite("request_state_refused")
		return toolRefusal(x, "arguments_changed", "The arguments differ from those the user approved; nothing was sent.",
			"Retry with exactly the approved arguments, or call "+a.Tool+" again without requestState for a fresh approval request.", a.Tool)
	}
	if p.opts.Catalog != nil {
		if t, listed, _ := p.opts.Catalog.Tool(x.req.Upstream, a.Tool); !listed || t.Hash != a.ToolHash {
			if _, err := p.opts.Writes.Actions.TransitionAction(ctx, a.ID, a.State, store.ActionUpdate{State: store.ActionSuperseded, DecidedAt: time.Now(), Reason: "tool definition changed"}); err != nil {
				p.log.LogAttrs(ctx, slog.LevelWarn, "superseding a pending action failed", slog.Any("error", err))
			}
			x.elicit = nil
			return p.writeGate(ctx, x, d)
		}
	}
	x.confirming = &a
	return p.startConfirmed(ctx, x, d)
}

// elicitAction is the action ("accept", "decline", "cancel") of the
// person's answer in the retry's inputResponses[ElicitInputKey].
func elicitAction(params []byte) string {
	ir, _, _ := member(params, "inputResponses")
	res, _, _ := member(ir, ElicitInputKey)
	var r struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(res, &r)
	return r.Action
}
