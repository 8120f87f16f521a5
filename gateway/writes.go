package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"log/slog"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/gateway/mcp"
	"github.com/mcpgate/mcpgate/gateway/refusal"
	"github.com/mcpgate/mcpgate/policy"
	"github.com/mcpgate/mcpgate/store"
)

// WriteSafety is the state behind replay protection and two-step
// confirmation: replay protection on every silent write, two steps for
// notify, wake, alerting and delete. The
// policy decides which applies to a call (Decision.Replay,
// Decision.Confirm); this is the mechanics.
type WriteSafety struct {
	// Replays is the replay window; Actions the pending actions. Both
	// are required.
	Replays store.ReplayStore
	Actions store.ActionStore
	// Audit, when set, answers list_recent_changes.
	Audit store.AuditStore
	// ReplayWindow is how long a silent write's result answers repeats
	// (DefaultReplayWindow when 0).
	ReplayWindow time.Duration
	// ConfirmTTL is how long a preview's confirm_token stays valid
	// (DefaultConfirmTTL when 0).
	ConfirmTTL time.Duration
	// WaitInFlight is how long a repeat waits for an identical call still
	// running before it is answered "in progress" (DefaultWaitInFlight
	// when 0; never longer than the request's own deadline).
	WaitInFlight time.Duration
	// Sealer, when set, seals the requestState of previews asked through
	// input_required (elicit.go): a client that declares form
	// elicitation under 2026-07-28 approves in the client without a
	// confirm_token. nil: every preview uses confirm_action.
	Sealer Sealer
	// ApprovalURL, when set, gives the approval page's link for an
	// out-of-band action id (internal/approval); the preview carries it as
	// approval_url.
	ApprovalURL func(actionID string) string
	// OnPending, when set, is told of every new out-of-band action after
	// it is stored (the approval webhook); it must not block.
	OnPending func(ctx context.Context, a store.Action)
}

// Write-safety defaults.
const (
	DefaultReplayWindow = 10 * time.Minute
	DefaultConfirmTTL   = 10 * time.Minute
	DefaultWaitInFlight = 2 * time.Second
)

// Gateway tools: mcpgate answers them itself (they never reach an
// upstream) on every route where write safety is on.
const (
	// ToolConfirmAction executes a previewed action once a person agreed.
	ToolConfirmAction = "confirm_action"
	// ToolRejectAction declines a previewed action.
	ToolRejectAction = "reject_action"
	// ToolListRecentChanges shows a connection what it changed lately.
	ToolListRecentChanges = "list_recent_changes"
)

// ReplayedMetaKey is the _meta member of a tools/call result answered
// from the replay window instead of running the call again.
const ReplayedMetaKey = "io.mcpgate/replayed"

// IdempotencyKeyArgument is the tools/call argument an upstream tool may
// declare to let clients name a write: the same key with other arguments
// is refused (an optional idempotency_key is bound to the argument
// digest).
const IdempotencyKeyArgument = "idempotency_key"

// confirmTokenPrefix starts every confirm_token (shown once, stored only
// as its SHA-256).
const confirmTokenPrefix = "mcpc_"

// Audit outcomes of write safety (store.AuditRecord.Outcome).
const (
	AuditPending   = "pending"   // a preview was stored
	AuditConfirmed = "confirmed" // a confirmed action was forwarded
	AuditRejected  = "rejected"  // the caller declined a preview
	AuditReplayed  = "replayed"  // a repeat was answered from the window
	AuditOK        = "ok"        // the upstream answered a result
	AuditToolError = "tool_error"
	AuditRPCError  = "rpc_error"
	AuditUnknown   = "unknown" // forwarded, no answer seen (client gone, upstream failed)
)

type writeKind int

const (
	writeReplay writeKind = iota + 1
	writeConfirm
	writeAudited // a forwarded non-read call whose outcome is audited
)

// writeState follows a forwarded write to its answer.
type writeState struct {
	kind     writeKind
	key      string // replay key
	claim    string // replay claim
	action   string // confirmed action id
	settled  bool
	decision *policy.Decision
}

func (w *WriteSafety) window() time.Duration {
	if w.ReplayWindow > 0 {
		return w.ReplayWindow
	}
	return DefaultReplayWindow
}

func (w *WriteSafety) confirmTTL() time.Duration {
	if w.ConfirmTTL > 0 {
		return w.ConfirmTTL
	}
	return DefaultConfirmTTL
}

func (w *WriteSafety) waitInFlight() time.Duration {
	if w.WaitInFlight > 0 {
		return w.WaitInFlight
	}
	return DefaultWaitInFlight
}

// connectionOf is the connection write state keys on; anonymous callers
// (no auth section) share one.
func connectionOf(pr *policy.Principal) string {
	if pr.Connection != "" {
		return pr.Connection
	}
	return "anonymous"
}

// writeDigest is the hex SHA-256 of the exact canonical form (canonical)
// of {"arguments": A}, where A are the normalised arguments without an
// idempotency_key (returned separately). It covers exactly what the
// upstream acts on: numbers as written, member order and whitespace not.
// Members a client can set to anything without the upstream having asked
// for them — requestState, inputResponses, _meta, progressToken, task — are
// not part of it: a repeat that carries a made-up requestState is the same
// write. A multi-round call still continues: an input_required answer
// never stays in the replay window (settle), so the retry with the
// upstream's requestState and the client's inputResponses runs.
func writeDigest(arguments []byte) (digest, idemKey string, err error) {
	if len(arguments) == 0 {
		arguments = []byte("{}")
	}
	args, err := mapMembers(arguments, func(name string, v jsontext.Value) (jsontext.Value, bool) {
		if name == IdempotencyKeyArgument {
			if tok, derr := jsontext.NewDecoder(bytes.NewReader(v)).ReadToken(); derr == nil && tok.Kind() == '"' {
				idemKey = tok.String()
			}
			return nil, false
		}
		return v, true
	})
	if err != nil {
		return "", "", err
	}
	doc, err := withMember([]byte("{}"), "arguments", args)
	if err != nil {
		return "", "", err
	}
	c := jsontext.Value(doc) // built here: formatted in place
	if err := c.Format(canonicalOptions...); err != nil {
		return "", "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), idemKey, nil
}

// normalisedArguments are the arguments the upstream receives.
func (x *Exchange) normalisedArguments() []byte {
	if x.coerced != nil {
		return x.coerced
	}
	if len(x.msg.Arguments) == 0 {
		return []byte("{}")
	}
	return x.msg.Arguments
}

// writeGate runs write safety for an allowed tools/call: a preview
// instead of the call when the decision asks for confirmation, the replay
// window for a silent write. It returns a local answer, or nil to forward
// (x.write then follows the call to its answer).
func (p *Pipeline) writeGate(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	w := p.opts.Writes
	if w == nil {
		// Without a store there is no replay window (the gateway warned
		// at start); a call that needs a person's confirmation is never
		// forwarded unconfirmed.
		if !d.Confirm {
			return nil
		}
		x.outcome = OutcomeError
		return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
			Code:  "write_safety_unavailable",
			Cause: "This tool needs a person's confirmation, and this gateway runs without the state store that confirmation needs; nothing was sent.",
			Fix:   "Do not retry; ask an administrator to configure the gateway's store.",
		}}, d.ID))
	}
	if d.Confirm {
		return p.preview(ctx, x, d)
	}
	if d.Replay {
		return p.claimReplay(ctx, x, d)
	}
	if d.Effect != "" && d.Effect != policy.EffectRead {
		x.write = &writeState{kind: writeAudited, decision: d}
	}
	return nil
}

// claimReplay claims the call's fingerprint: the first call runs, a repeat
// within the window gets the first result (replayed), a repeat while the
// first runs waits for it or is told it is in progress, and a repeat of a
// call whose outcome is unknown is told so — never a second execution.
func (p *Pipeline) claimReplay(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	w := p.opts.Writes
	digest, idem, err := writeDigest(x.normalisedArguments())
	if err != nil {
		return p.writeFailure(ctx, x, d, "the arguments cannot be fingerprinted", err)
	}
	conn := connectionOf(&x.input.Principal)
	key := "fp\x1f" + conn + "\x1f" + x.req.Upstream + "\x1f" + x.msg.Name + "\x1f" + digest
	if idem != "" {
		key = "ik\x1f" + conn + "\x1f" + x.req.Upstream + "\x1f" + x.msg.Name + "\x1f" + idem
	}
	claim := randomID()
	deadline := time.Now().Add(w.waitInFlight())
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	for {
		e, won, err := w.Replays.ClaimReplay(ctx, key, store.ReplayEntry{Claim: claim, State: store.ReplayRunning, Digest: digest, Started: time.Now()}, w.window())
		if err != nil {
			return p.writeFailure(ctx, x, d, "the replay window cannot be read", err)
		}
		if won {
			if l := p.takeBuckets(ctx, x, d); l != nil {
				if err := w.Replays.ReleaseReplay(ctx, key, claim); err != nil {
					p.log.LogAttrs(ctx, slog.LevelError, "replay claim not released", slog.Any("error", err))
				}
				return l
			}
			x.write = &writeState{kind: writeReplay, key: key, claim: claim, decision: d}
			return nil
		}
		if e.Digest != digest {
			x.outcome = OutcomeDeny
			return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
				Code:  "idempotency_key_reused",
				Cause: "The idempotency_key " + quote(idem) + " was already used for this tool with other arguments.",
				Fix:   "Use a new idempotency_key for a different write, or repeat the first call's arguments exactly.",
			}}, d.ID))
		}
		switch e.State {
		case store.ReplayDone:
			x.outcome = OutcomeAllow
			p.m.observeWrite("replayed")
			p.auditWrite(ctx, x, d, AuditReplayed)
			return local(200, replayedAnswer(x.msg.ID, e.Result, e.Started))
		case store.ReplayUnknown:
			x.outcome = OutcomeDeny
			p.m.observeWrite("outcome_unknown")
			return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
				Code: "outcome_unknown",
				Cause: "An identical call was sent at " + e.Started.UTC().Format(time.RFC3339) + " but its answer never arrived (the connection broke); " +
					"the gateway does not run it a second time.",
				Fix:      "Check whether it took effect before doing anything else: look for the object it would have changed, or list this connection's recent changes.",
				NextTool: ToolListRecentChanges,
			}}, d.ID))
		}
		if time.Now().After(deadline) {
			x.outcome = OutcomeDeny
			p.m.observeWrite("in_progress")
			return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
				Code:  "in_progress",
				Cause: "An identical call started at " + e.Started.UTC().Format(time.RFC3339) + " is still running; the gateway does not run it twice.",
				Fix:   "Retry the same call in 5 seconds to get its result; do not change the arguments to force a second run.",
			}}, d.ID))
		}
		select {
		case <-ctx.Done():
			return p.writeFailure(ctx, x, d, "the request ended while waiting for an identical call", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// writeFailure refuses a write whose state cannot be handled: fail closed,
// nothing forwarded.
func (p *Pipeline) writeFailure(ctx context.Context, x *Exchange, d *policy.Decision, what string, err error) *Local {
	x.outcome = OutcomeError
	p.log.LogAttrs(ctx, slog.LevelError, "write safety failed; call refused", slog.String("what", what), slog.String("tool", x.msg.Name), slog.Any("error", err))
	return local(200, refusal.ToolError(x.msg.ID, []policy.Reason{{
		Code:  "write_state_unavailable",
		Cause: "The gateway cannot guarantee this write runs at most once right now (" + what + "); nothing was sent.",
		Fix:   "Retry the same call in 10 seconds.",
	}}, d.ID))
}

// replayedAnswer is the stored result of the first call, marked replayed:
// _meta[ReplayedMetaKey] = true and a text block saying nothing ran again.
func replayedAnswer(id []byte, result []byte, first time.Time) []byte {
	out, err := setMeta(result, ReplayedMetaKey, []byte("true"))
	if err != nil {
		out = result
	}
	note := "replayed: true — this is the result of an identical call made at " + first.UTC().Format(time.RFC3339) + "; nothing ran again."
	if content, ok, _ := member(out, "content"); ok && content.Kind() == '[' {
		block, _ := jsontext.AppendQuote(nil, note)
		nc := append(bytes.TrimSuffix(bytes.TrimSpace(content), []byte("]")), []byte(`,{"type":"text","text":`)...)
		if bytes.Equal(bytes.TrimSpace(content), []byte("[]")) {
			nc = []byte(`[{"type":"text","text":`)
		}
		nc = append(append(nc, block...), []byte("}]")...)
		if o2, err := withMember(out, "content", nc); err == nil {
			out = o2
		}
	}
	return mcp.ResultResponse(id, out)
}

// settle records the answer of a forwarded write: the replay window keeps
// a complete result (the one the client got), a confirmed action is marked
// executed or failed, and the audit gets the JSON-RPC outcome. result is
// the relayed result, nil for a JSON-RPC error answer.
func (x *Exchange) settle(result []byte) { x.settleKnown(result, errUnknown) }

// errState is what is known of a tools/call result's isError before
// settle: errUnknown (settle reads the result), errNo or errYes (the
// shaper read the member while shaping; shape.ToolResultError).
type errState uint8

const (
	errUnknown errState = iota
	errNo
	errYes
)

// settleKnown is settle with what is known of the result's isError; the
// result is read at most once, and only when an outcome needs it.
func (x *Exchange) settleKnown(result []byte, isError errState) {
	failed := func() bool {
		if result == nil {
			return true
		}
		if isError == errUnknown {
			isError = errNo
			if isErrorResult(result) {
				isError = errYes
			}
		}
		return isError == errYes
	}
	x.loopOutcome(failed)
	ws := x.write
	if ws == nil || ws.settled {
		return
	}
	ws.settled = true
	p, w, ctx := x.p, x.p.opts.Writes, context.WithoutCancel(x.ctx)
	outcome := AuditOK
	switch {
	case result == nil:
		outcome = AuditRPCError
	case failed():
		outcome = AuditToolError
	}
	incomplete := result != nil && isIncomplete(result)
	switch ws.kind {
	case writeReplay:
		var err error
		if outcome == AuditOK && !incomplete {
			err = w.Replays.FinishReplay(ctx, ws.key, ws.claim, store.ReplayDone, result, w.window())
		} else {
			// An error or an input_required answer is never replayed:
			// the same call may run again.
			err = w.Replays.ReleaseReplay(ctx, ws.key, ws.claim)
		}
		if err != nil {
			p.log.LogAttrs(ctx, slog.LevelError, "replay window not updated", slog.Any("error", err))
		}
	case writeConfirm:
		st := store.ActionExecuted
		if outcome != AuditOK {
			st = store.ActionFailed
		}
		if _, err := w.Actions.TransitionAction(ctx, ws.action, store.ActionExecuting, store.ActionUpdate{State: st, DecidedAt: time.Now(), Reason: outcome}); err != nil {
			p.log.LogAttrs(ctx, slog.LevelError, "confirmed action not marked done", slog.Any("error", err))
		}
	}
	if incomplete {
		outcome = "input_required"
	}
	p.auditWrite(ctx, x, ws.decision, outcome)
}

// abandon ends a forwarded write whose answer never came: its outcome is
// unknown, and a repeat says so instead of running again.
func (x *Exchange) abandon() {
	ws := x.write
	if ws == nil || ws.settled {
		return
	}
	ws.settled = true
	p, w, ctx := x.p, x.p.opts.Writes, context.WithoutCancel(x.ctx)
	switch ws.kind {
	case writeReplay:
		if err := w.Replays.FinishReplay(ctx, ws.key, ws.claim, store.ReplayUnknown, nil, w.window()); err != nil {
			p.log.LogAttrs(ctx, slog.LevelError, "replay window not updated", slog.Any("error", err))
		}
	case writeConfirm:
		if _, err := w.Actions.TransitionAction(ctx, ws.action, store.ActionExecuting, store.ActionUpdate{State: store.ActionFailed, DecidedAt: time.Now(), Reason: AuditUnknown}); err != nil {
			p.log.LogAttrs(ctx, slog.LevelError, "confirmed action not marked done", slog.Any("error", err))
		}
	}
	p.m.observeWrite("outcome_unknown")
	p.auditWrite(ctx, x, ws.decision, AuditUnknown)
}

// isErrorResult reports whether a CallToolResult has isError: true.
func isErrorResult(result []byte) bool {
	v, ok, _ := member(result, "isError")
	return ok && bytes.Equal(v, []byte("true"))
}

// isIncomplete reports whether a result asks the client for input and a
// retry (revision 2026-07-28 multi-round requests: resultType
// "input_required", inputRequests / requestState).
func isIncomplete(result []byte) bool {
	incomplete := false
	_ = eachMember(result, func(name string, v jsontext.Value) bool {
		switch name {
		case "inputRequests", "requestState":
			incomplete = true
		case "resultType", "result_type":
			incomplete = bytes.Equal(v, []byte(`"input_required"`)) || bytes.Equal(v, []byte(`"incomplete"`))
		}
		return incomplete
	})
	return incomplete
}

// auditWrite records one write-safety event of a tools/call.
func (p *Pipeline) auditWrite(ctx context.Context, x *Exchange, d *policy.Decision, outcome string) {
	if p.opts.Audit == nil {
		return
	}
	pr := &x.input.Principal
	r := store.AuditRecord{
		Channel: store.ChannelMCP, Tenant: pr.Tenant, Connection: connectionOf(pr), Subject: pr.Subject,
		Action: x.msg.Name, Outcome: outcome, PublicIDs: map[string]string{"upstream": x.req.Upstream},
	}
	if x.cred != nil {
		r.PublicIDs["credential"] = x.cred.kind
	}
	if d != nil {
		r.DecisionID = d.ID
		if d.Effect != "" {
			r.PublicIDs["effect"] = d.Effect
		}
	}
	if c := x.input.Message.Client; c != nil {
		r.Client = c.Name
	}
	if x.write != nil && x.write.action != "" {
		r.PublicIDs["action"] = x.write.action[:16]
	}
	p.opts.Audit(ctx, r)
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newConfirmToken returns a fresh confirm_token and the id it is stored
// under (hex SHA-256 of the token).
func newConfirmToken() (token, id string) {
	var b [32]byte
	_, _ = rand.Read(b[:])
	token = confirmTokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return token, confirmTokenID(token)
}

func confirmTokenID(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// writeSafety runs the write gate of an allowed tools/call: the lock of a
// confirmed action, a preview, or the replay window. A call that is
// forwarded with x.write set has its answer read (settle).
func (p *Pipeline) writeSafety(ctx context.Context, x *Exchange, d *policy.Decision) *Local {
	var l *Local
	if x.confirming != nil {
		l = p.startConfirmed(ctx, x, d)
	} else if x.elicit != nil {
		l = p.startElicited(ctx, x, d) // approved through input_required (elicit.go)
	} else {
		l = p.writeGate(ctx, x, d)
	}
	if l == nil && x.write != nil {
		x.shapeResult = true
	}
	return l
}

// release undoes the write state of a call that was not forwarded after
// all (e.g. its identity assertion could not be signed).
func (x *Exchange) release() {
	ws := x.write
	if ws == nil || ws.settled {
		return
	}
	ws.settled = true
	w, ctx := x.p.opts.Writes, context.WithoutCancel(x.ctx)
	var err error
	switch ws.kind {
	case writeReplay:
		err = w.Replays.ReleaseReplay(ctx, ws.key, ws.claim)
	case writeConfirm:
		_, err = w.Actions.TransitionAction(ctx, ws.action, store.ActionExecuting, store.ActionUpdate{State: x.confirming.State})
	}
	if err != nil {
		x.p.log.LogAttrs(ctx, slog.LevelError, "write state not released", slog.Any("error", err))
	}
}

// paramHeaders are the Mcp-Param-<Name> fields of a rebuilt call (a
// confirmed action), derived from its arguments.
func (x *Exchange) paramHeaders() mcp.Header {
	var h mcp.Header
	args := x.normalisedArguments()
	for name, arg := range x.headerParams {
		if v, ok := argumentText(args, arg); ok {
			if h == nil {
				h = mcp.Header{}
			}
			h.Set(paramHeaderPrefix+strings.ToLower(name), mcp.EncodeHeaderValue(v))
		}
	}
	return h
}

// gatewayToolDefs are the tools/list entries of mcpgate's own tools.
// confirm_action is annotated destructive and asks clients that honour it
// for a person's interaction on every call
// (_meta["anthropic/requiresUserInteraction"]).
var gatewayToolDefs = map[string]string{
	ToolConfirmAction: `{"name":"confirm_action","title":"Confirm a previewed action",` +
		`"description":"Executes an action the gateway previewed (a message, a page, an alert change or a deletion), once, after the user agreed to its confirm_summary. Pass the confirm_token and the exact confirm_summary from the preview.",` +
		`"inputSchema":{"type":"object","properties":{"confirm_token":{"type":"string","description":"The confirm_token of the preview."},"confirm_summary":{"type":"string","description":"The confirm_summary of the preview, unchanged."}},"required":["confirm_token","confirm_summary"],"additionalProperties":false},` +
		`"annotations":{"title":"Confirm a previewed action","readOnlyHint":false,"destructiveHint":true,"idempotentHint":false,"openWorldHint":true},` +
		`"_meta":{"anthropic/requiresUserInteraction":true}}`,
	ToolRejectAction: `{"name":"reject_action","title":"Reject a previewed action",` +
		`"description":"Declines an action the gateway previewed; it will never run.",` +
		`"inputSchema":{"type":"object","properties":{"confirm_token":{"type":"string","description":"The confirm_token of the preview."},"reason":{"type":"string","description":"Why, in a few words (optional)."}},"required":["confirm_token"],"additionalProperties":false},` +
		`"annotations":{"title":"Reject a previewed action","readOnlyHint":false,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`,
	ToolListRecentChanges: `{"name":"list_recent_changes","title":"List recent changes",` +
		`"description":"Lists what this connection changed recently through the gateway (tool, time, outcome), newest first: look here before repeating a write whose result you lost.",` +
		`"inputSchema":{"type":"object","properties":{"limit":{"type":"integer","minimum":1,"maximum":50,"description":"How many changes (default 50)."}},"additionalProperties":false},` +
		`"annotations":{"title":"List recent changes","readOnlyHint":true,"destructiveHint":false,"idempotentHint":true,"openWorldHint":false}}`,
}

// writeGatewayTools appends mcpgate's own tools to a tools/list answer:
// confirm_action and reject_action when a listed tool may need a
// confirmation, list_recent_changes when a listed tool writes. Upstream
// tools of the same names are not listed (the gateway's answer them).
func (p *Pipeline) writeGatewayTools(enc *jsontext.Encoder, effects []string) {
	if p.opts.Writes == nil {
		return
	}
	confirm, write := false, false
	for _, e := range effects {
		switch e {
		case "", policy.EffectRead:
		case policy.EffectSilentWrite:
			write = true
		default:
			confirm, write = true, true
		}
	}
	if confirm {
		_ = enc.WriteValue(jsontext.Value(gatewayToolDefs[ToolConfirmAction]))
		_ = enc.WriteValue(jsontext.Value(gatewayToolDefs[ToolRejectAction]))
	}
	if write {
		_ = enc.WriteValue(jsontext.Value(gatewayToolDefs[ToolListRecentChanges]))
	}
}

// MetricWriteSafety counts write-safety events by event: preview,
// confirmed, rejected, replayed, in_progress, outcome_unknown.
const MetricWriteSafety = "mcpgate_write_safety_events_total"

var writeEvents = []string{"preview", "confirmed", "rejected", "replayed", "in_progress", "outcome_unknown", "input_required", "request_state_refused"}

func newWriteMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricWriteSafety,
		Help: "Write-safety events: previews stored, actions confirmed or rejected, repeats answered from the replay window, repeats refused while the first runs, and writes whose outcome is unknown.",
	}, []string{"event"})
	for _, e := range writeEvents {
		c.WithLabelValues(e)
	}
	reg.MustRegister(c)
	return c
}

func (m *Metrics) observeWrite(event string) {
	if m == nil || m.writes == nil {
		return
	}
	m.writes.WithLabelValues(event).Inc()
}

// withResultType adds resultType "complete" to the result of a JSON-RPC
// response mcpgate wrote itself, when it has none: revision 2026-07-28
// requires the member on every result (schema.ts, Result.resultType).
// Other bodies are returned as they are.
func withResultType(body []byte) []byte {
	if len(body) == 0 || body[0] != '{' {
		return body
	}
	// The result member is spliced in place: the id and every other
	// member keep their bytes (an id is echoed byte for byte).
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return body
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return body
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return body
		}
		if name != "result" {
			continue
		}
		if v.Kind() != '{' {
			return body
		}
		if _, has, _ := member(v, "resultType"); has {
			return body
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		nr, err := withMember(v, "resultType", []byte(`"complete"`))
		if err != nil || start < 0 || !bytes.Equal(body[start:end], v) {
			return body
		}
		out := make([]byte, 0, len(body)+len(`,"resultType":"complete"`))
		out = append(append(append(out, body[:start]...), nr...), body[end:]...)
		return out
	}
	return body
}

// writeSafetyGate is the stage that runs write safety on an allowed
// tools/call (writeSafety).
func (p *Pipeline) writeSafetyGate(ctx context.Context, x *Exchange) *Verdict {
	if x.msg.Method != "tools/call" {
		return nil
	}
	x.mark(SpanWriteSafety)
	if l := p.writeSafety(ctx, x, x.decision); l != nil {
		return x.answer(l)
	}
	return nil
}
