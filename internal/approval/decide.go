package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"github.com/mcpgate/mcpgate/rights"
	"github.com/mcpgate/mcpgate/store"
)

// errorPage is the data of error.html.
type errorPage struct {
	Code, Cause, Fix string
	// SignIn, when set, is a sign-in link to offer.
	SignIn string
	// Back, when set, links back to the action.
	Back string
}

// refusal is one reason a person may not decide on an action.
type refusal struct {
	Status      int
	Code, Cause string
	Fix         string
}

func (p *Page) render(w http.ResponseWriter, status int, page string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, page)
}

// fail answers an error page; a refusal about an action is audited by the
// caller.
func (p *Page) fail(w http.ResponseWriter, _ *http.Request, status int, code, cause, fix string, _ *store.Action) {
	p.render(w, status, errorHTML(errorPage{Code: code, Cause: cause, Fix: fix}))
}

// audit records one event of the page (channel approval).
func (p *Page) audit(ctx context.Context, r store.AuditRecord) {
	r.Channel = AuditChannel
	r.Client = AuditClient
	p.o.Audit(ctx, r)
}

// auditAction records an event about one action.
func (p *Page) auditAction(ctx context.Context, s *session, a *store.Action, id, action, outcome, reason string) {
	r := store.AuditRecord{Action: action, Outcome: outcome, PublicIDs: map[string]string{"action_id": id}}
	if s != nil {
		r.Tenant, r.Subject = s.Tenant, s.Subject
	}
	if a != nil {
		r.Tenant = a.Tenant
		r.PublicIDs["tool"] = a.Tool
	}
	if reason != "" {
		r.PublicIDs["reason"] = reason
	}
	p.audit(ctx, r)
}

// refuseBearer answers a request carrying an Authorization header: the
// page takes no bearer credentials, so an agent's own credential can never
// approve.
func (p *Page) refuseBearer(w http.ResponseWriter, r *http.Request) {
	p.m.refusal("bearer_not_accepted")
	rec := store.AuditRecord{Action: "approval.request", Outcome: "denied", PublicIDs: map[string]string{"reason": "bearer_not_accepted"}}
	if id := actionIDFromPath(r.URL.Path); id != "" {
		rec.PublicIDs["action_id"] = id
		if a, err := p.o.Actions.Action(r.Context(), id); err == nil {
			rec.Tenant = a.Tenant
		}
	}
	p.audit(r.Context(), rec)
	p.render(w, http.StatusUnauthorized, errorHTML(errorPage{Code: "bearer_not_accepted",
		Cause: "The approval page takes no bearer tokens: an agent's credential (an MCP token or an OAuth access token) can never approve an action.",
		Fix:   "A person opens this page in a browser and signs in with the organisation's identity provider.", SignIn: loginURL(Prefix)}))
}

func actionIDFromPath(path string) string {
	rest, ok := strings.CutPrefix(path, Prefix+"a/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	if len(id) > store.MaxIDLen {
		return ""
	}
	return id
}

// requireSession returns the session, or sends the browser to sign in.
func (p *Page) requireSession(w http.ResponseWriter, r *http.Request) *session {
	if s := p.session(r); s != nil {
		return s
	}
	next := r.URL.RequestURI()
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		// A navigation that came from another site (the provider's
		// redirect chain) carries no SameSite=Strict cookie: one same-site
		// step more, instead of a sign-in loop.
		p.render(w, http.StatusOK, continueHTML(safeNext(next)))
		return nil
	}
	http.Redirect(w, r, loginURL(next), http.StatusSeeOther)
	return nil
}

// loadAction loads an action the session's tenant may see; nil after
// answering 404 (absent, gone, another tenant's, or approved in the
// client: the same answer, nothing learnt).
func (p *Page) loadAction(w http.ResponseWriter, r *http.Request, s *session, verb string) *store.Action {
	id := r.PathValue("id")
	a, err := p.o.Actions.Action(r.Context(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid) {
		p.log.ErrorContext(r.Context(), "approval page: pending action cannot be read", "error", err)
		p.m.refusal("store_unavailable")
		p.auditAction(r.Context(), s, nil, id, verb, "error", "store_unavailable")
		p.fail(w, r, http.StatusServiceUnavailable, "store_unavailable", "Pending actions cannot be read right now.", "Reload this page in a minute.", nil)
		return nil
	}
	if err != nil || a.Tenant != s.Tenant || a.Approval != store.ApprovalOutOfBand {
		p.m.refusal("not_found")
		p.auditAction(r.Context(), s, nil, id, verb, "denied", "not_found")
		p.fail(w, r, http.StatusNotFound, "not_found", "There is no pending action with this link in your tenant.",
			"Check the link, or open the list of pending actions.", nil)
		return nil
	}
	return &a
}

// mayDecide says why s may not approve (approve true) or reject a: the
// action's state and expiry, the two-person rule, and the person's live
// rights now. nil: they may.
func (p *Page) mayDecide(ctx context.Context, s *session, a *store.Action, approve bool) *refusal {
	now := p.now()
	switch a.State {
	case store.ActionPending:
	case store.ActionApproved:
		return &refusal{http.StatusConflict, "already_approved", "This action was already approved by " + a.DecidedBy + " at " + fmtTime(a.DecidedAt) + "; it runs once, when the agent confirms it.", "Nothing more to do."}
	case store.ActionRejected:
		return &refusal{http.StatusConflict, "already_rejected", "This action was rejected by " + orSomeone(a.DecidedBy) + " at " + fmtTime(a.DecidedAt) + "; it will never run.", "Nothing more to do."}
	default:
		return &refusal{http.StatusConflict, "already_decided", "This action is " + a.State + "; it can no longer be approved or rejected.", "Nothing more to do."}
	}
	if !now.Before(a.ExpiresAt) {
		return &refusal{http.StatusGone, "expired", "This action expired at " + fmtTime(a.ExpiresAt) + " without a decision; it will never run.", "If it is still wanted, the agent must ask again."}
	}
	if approve && p.secondPerson(a) && a.Subject != "" && a.Subject == s.Subject {
		return &refusal{http.StatusForbidden, "own_action", "You asked for this action yourself, and the two-person rule says another person must approve it.", "Ask a colleague who holds the right to approve it."}
	}
	need, declared := p.o.ToolRights(a.Upstream, a.Tool)
	if !declared {
		return &refusal{http.StatusForbidden, "tool_undeclared", "The tool " + a.Tool + " has no declaration, so nobody can be shown to hold the right for it.", "A platform admin declares the tool (upstreams[].tools) first."}
	}
	live, err := p.o.Rights.Lookup(ctx, a.Tenant, s.Subject)
	if err != nil {
		p.log.WarnContext(ctx, "approval page: rights source unavailable", "error", err)
		status := http.StatusServiceUnavailable
		if !errors.Is(err, rights.ErrUnavailable) {
			status = http.StatusInternalServerError
		}
		return &refusal{status, "rights_unavailable", "Your current rights cannot be checked right now, so nothing was decided.", "Try again in a minute."}
	}
	if !live.Active {
		return &refusal{http.StatusForbidden, "approver_inactive", "Your account is not active in tenant " + a.Tenant + " now.", "Ask your tenant admin."}
	}
	var missing []string
	for _, r := range need {
		if !slices.Contains(live.Rights, r) {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return &refusal{http.StatusForbidden, "missing_right", "You do not hold the right " + strings.Join(missing, ", ") + " that " + a.Tool + " needs, so you cannot approve or reject it.",
			"Ask a person who holds " + strings.Join(missing, ", ") + " in tenant " + a.Tenant + "."}
	}
	return nil
}

func orSomeone(s string) string {
	if s == "" {
		return "the agent's connection"
	}
	return s
}

// secondPerson reports whether the two-person rule applies to a.
func (p *Page) secondPerson(a *store.Action) bool {
	return p.o.RequireSecondPerson || slices.Contains(p.o.SecondPersonEffects, a.Effect)
}

// listItem is one row of the list.
type listItem struct {
	ID, Tool, Summary, Subject, Client string
	ExpiresAt                          time.Time
	Link                               string
}

// list shows the pending out-of-band actions of the approver's tenant
// that they may approve now: GET /approvals/.
func (p *Page) list(w http.ResponseWriter, r *http.Request) {
	s := p.requireSession(w, r)
	if s == nil {
		return
	}
	as, err := p.o.Actions.ListActions(r.Context(), store.ActionFilter{Tenant: s.Tenant, State: store.ActionPending, Limit: store.MaxActionLimit})
	if err != nil {
		p.log.ErrorContext(r.Context(), "approval page: pending actions cannot be listed", "error", err)
		p.fail(w, r, http.StatusServiceUnavailable, "store_unavailable", "Pending actions cannot be read right now.", "Reload this page in a minute.", nil)
		return
	}
	items := []listItem{}
	hidden := 0
	for i := range as {
		a := &as[i]
		if a.Approval != store.ApprovalOutOfBand || !p.now().Before(a.ExpiresAt) {
			continue
		}
		if p.mayDecide(r.Context(), s, a, true) != nil {
			hidden++
			continue
		}
		items = append(items, listItem{ID: a.ID, Tool: a.Tool, Summary: a.Summary, Subject: a.Subject, Client: a.Client,
			ExpiresAt: a.ExpiresAt, Link: Prefix + "a/" + url.PathEscape(a.ID)})
	}
	p.audit(r.Context(), store.AuditRecord{Tenant: s.Tenant, Subject: s.Subject, Action: "approval.list", Outcome: "ok"})
	p.render(w, http.StatusOK, listHTML(s, items, hidden))
}

// argument is one member of the call's arguments as the page shows it.
type argument struct {
	Name string
	// Text is a string argument (third-party text: shown escaped and
	// marked untrusted); JSON is any other value, as JSON.
	Text    string
	JSON    string
	IsText  bool
	Missing bool
}

// arguments splits the stored arguments into their members, sorted by
// name.
func arguments(raw []byte) []argument {
	var m map[string]json.RawMessage
	if len(raw) == 0 || json.Unmarshal(raw, &m) != nil {
		return nil
	}
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]argument, 0, len(names))
	for _, n := range names {
		v := m[n]
		var s string
		if json.Unmarshal(v, &s) == nil {
			out = append(out, argument{Name: n, Text: s, IsText: true})
			continue
		}
		var b bytes.Buffer
		if json.Indent(&b, v, "", "  ") != nil {
			b.Reset()
			b.Write(v)
		}
		out = append(out, argument{Name: n, JSON: b.String()})
	}
	return out
}

// viewPage is the data of action.html.
type viewPage struct {
	Session   *session
	Action    *store.Action
	Arguments []argument
	CSRF      string
	Approve   string // form actions
	Reject    string
	Refusal   *refusal // why the forms would be refused now (shown, forms disabled)
	Effect    string
}

// view shows one action: GET /approvals/a/{id}.
func (p *Page) view(w http.ResponseWriter, r *http.Request) {
	s := p.requireSession(w, r)
	if s == nil {
		return
	}
	a := p.loadAction(w, r, s, "approval.view")
	if a == nil {
		return
	}
	ref := p.mayDecide(r.Context(), s, a, true)
	reason := ""
	if ref != nil {
		reason = ref.Code
	}
	p.auditAction(r.Context(), s, a, a.ID, "approval.view", "ok", reason)
	base := Prefix + "a/" + url.PathEscape(a.ID)
	p.render(w, http.StatusOK, actionHTML(viewPage{Session: s, Action: a, Arguments: arguments(a.Arguments), CSRF: csrfToken(s, a.ID),
		Approve: base + "/approve", Reject: base + "/reject", Refusal: ref, Effect: a.Effect}))
}

// approve decides for an action: POST /approvals/a/{id}/approve.
func (p *Page) approve(w http.ResponseWriter, r *http.Request) { p.decide(w, r, true) }

// reject decides against an action: POST /approvals/a/{id}/reject.
func (p *Page) reject(w http.ResponseWriter, r *http.Request) { p.decide(w, r, false) }

func (p *Page) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	verb, state := "approval.reject", store.ActionRejected
	if approve {
		verb, state = "approval.approve", store.ActionApproved
	}
	id := r.PathValue("id")
	s := p.session(r)
	if s == nil {
		p.m.refusal("not_signed_in")
		var a *store.Action
		if got, err := p.o.Actions.Action(r.Context(), id); err == nil {
			a = &got
		}
		p.auditAction(r.Context(), nil, a, id, verb, "denied", "not_signed_in")
		p.render(w, http.StatusUnauthorized, errorHTML(errorPage{Code: "not_signed_in",
			Cause: "You are not signed in (or your sign-in expired), so nothing was decided.",
			Fix:   "Sign in, open the action again and decide there.", SignIn: loginURL(Prefix + "a/" + url.PathEscape(id))}))
		return
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" && o != p.base.String() {
		p.m.refusal("csrf")
		p.auditAction(r.Context(), s, nil, id, verb, "denied", "csrf")
		p.fail(w, r, http.StatusForbidden, "csrf", "This form was sent from another site ("+o+"), so nothing was decided.", "Open the action on the approval page and decide there.", nil)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil || !validCSRF(s, id, r.PostForm.Get("csrf")) {
		p.m.refusal("csrf")
		p.auditAction(r.Context(), s, nil, id, verb, "denied", "csrf")
		p.render(w, http.StatusForbidden, errorHTML(errorPage{Code: "csrf",
			Cause: "This form does not carry a valid token of your current sign-in for this action (forged, or from another session); nothing was decided.",
			Fix:   "Open the action again and use its buttons.", Back: Prefix + "a/" + url.PathEscape(id)}))
		return
	}
	a := p.loadAction(w, r, s, verb)
	if a == nil {
		return
	}
	if ref := p.mayDecide(r.Context(), s, a, approve); ref != nil {
		p.m.refusal(ref.Code)
		p.auditAction(r.Context(), s, a, a.ID, verb, "denied", ref.Code)
		p.render(w, ref.Status, errorHTML(errorPage{Code: ref.Code, Cause: ref.Cause, Fix: ref.Fix, Back: Prefix + "a/" + url.PathEscape(a.ID)}))
		return
	}
	reason := "approved on the approval page"
	if !approve {
		reason = cleanReason(r.PostForm.Get("reason"))
		if reason == "" {
			reason = "rejected on the approval page"
		}
	}
	now := p.now()
	got, err := p.o.Actions.TransitionAction(r.Context(), a.ID, store.ActionPending, store.ActionUpdate{State: state, DecidedBy: s.Subject, DecidedAt: now, Reason: reason})
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			cur, _ := p.o.Actions.Action(r.Context(), a.ID)
			ref := p.mayDecide(r.Context(), s, &cur, approve)
			if ref == nil {
				ref = &refusal{http.StatusConflict, "already_decided", "The action changed while you decided.", "Open it again."}
			}
			p.m.refusal(ref.Code)
			p.auditAction(r.Context(), s, a, a.ID, verb, "denied", ref.Code)
			p.render(w, ref.Status, errorHTML(errorPage{Code: ref.Code, Cause: ref.Cause, Fix: ref.Fix, Back: Prefix + "a/" + url.PathEscape(a.ID)}))
			return
		}
		p.log.ErrorContext(r.Context(), "approval page: decision not stored", "error", err)
		p.auditAction(r.Context(), s, a, a.ID, verb, "error", "store_unavailable")
		p.fail(w, r, http.StatusServiceUnavailable, "store_unavailable", "Your decision could not be stored; nothing changed.", "Try again in a minute.", nil)
		return
	}
	p.auditAction(r.Context(), s, &got, got.ID, verb, "ok", "")
	p.m.decided(approve, now.Sub(got.CreatedAt))
	p.log.LogAttrs(r.Context(), slog.LevelInfo, "approval page: decision", slog.String("action_id", got.ID), slog.String("tool", got.Tool),
		slog.String("tenant", got.Tenant), slog.String("by", s.Subject), slog.String("state", got.State))
	p.render(w, http.StatusOK, resultHTML(s, &got, approve))
}

// cleanReason keeps a rejection reason short and free of control
// characters.
func cleanReason(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	for len(s) > MaxReasonBytes {
		_, size := lastRune(s)
		s = s[:len(s)-size]
	}
	return s
}

func lastRune(s string) (rune, int) {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i]&0xC0 != 0x80 {
			return rune(s[i]), len(s) - i
		}
	}
	return 0, 1
}
