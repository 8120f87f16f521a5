package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/tokens"
	"github.com/mcpgate/mcpgate/store"
)

// Kill switch endpoints:
//
//	GET /v1/killswitch  → {switches: [{tenant, on, reason?, set_by?, at?}]}
//	PUT /v1/killswitch  {tenant?, on, reason?} → the switch as set
//
// tenant "" (or absent) is the global switch. Who may do what:
//
//   - a platform admin sets and sees every switch;
//   - a tenant admin sets only their tenant's switch, and sees the global
//     switch and their tenant's;
//   - a person sets none, and sees the global switch and their tenant's
//     (what their agents run into).
//
// A switch nobody ever set is listed in its default state (off, no
// set_by) where the caller is entitled to see it: the global switch
// always, and a tenant admin's or person's own tenant. Turning a switch on
// needs a reason (shown to every client whose request it refuses);
// turning it off takes an optional one. Every PUT, refused ones included,
// is audited: channel admin, action "killswitch.on" or "killswitch.off",
// the switch's tenant, outcome "ok", "denied", "invalid" or "error",
// public ids scope (global or tenant) and role.

// Audit actions of the kill switch.
const (
	ActionKillSwitchOn  = "killswitch.on"
	ActionKillSwitchOff = "killswitch.off"
)

// KillSwitch is what the admin API needs of the kill switches;
// internal/killswitch.Watcher implements it (SetSwitch applies the change
// on this replica at once).
type KillSwitch interface {
	SetSwitch(ctx context.Context, s store.Switch) error
	Switches(ctx context.Context) ([]store.Switch, error)
}

// SetKillSwitch turns the kill switch endpoints on; without it they answer
// 404 killswitch_disabled (the gateway has no state store). Call it before
// the API serves.
func (a *API) SetKillSwitch(k KillSwitch) { a.killSwitch = k }

// SetSwitchRequest is the body of PUT /v1/killswitch.
type SetSwitchRequest struct {
	// Tenant is the switch's scope: "" (or absent) for the global switch.
	Tenant string `json:"tenant"`
	// On is required.
	On *bool `json:"on"`
	// Reason is required when On is true, at most store.MaxSwitchReasonLen
	// bytes without control characters.
	Reason string `json:"reason"`
}

// Switch is a kill switch as the admin API shows it.
type Switch struct {
	// Tenant is "" for the global switch.
	Tenant string `json:"tenant"`
	On     bool   `json:"on"`
	Reason string `json:"reason,omitempty"`
	// SetBy and At are absent for a switch nobody ever set.
	SetBy string     `json:"set_by,omitempty"`
	At    *time.Time `json:"at,omitempty"`
}

// SwitchList is the answer of GET /v1/killswitch: the global switch
// first, then tenants in byte order.
type SwitchList struct {
	Switches []Switch `json:"switches"`
}

func (a *API) serveKillSwitch(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	if a.killSwitch == nil {
		writeError(w, http.StatusNotFound, apiError{Code: "killswitch_disabled",
			Message: "this gateway has no state store, so it has no kill switch",
			Fix:     "configure store (bolt or redis) to get the kill switch"})
		return
	}
	switch r.Method {
	case http.MethodGet:
		a.listSwitches(w, r, actor)
	case http.MethodPut:
		a.setSwitch(w, r, actor)
	default:
		allow(w, r, http.MethodGet, http.MethodPut)
	}
}

func switchJSON(s store.Switch) Switch {
	out := Switch{Tenant: s.Tenant, On: s.On, Reason: s.Reason, SetBy: s.SetBy}
	if !s.At.IsZero() {
		at := s.At
		out.At = &at
	}
	return out
}

func (a *API) listSwitches(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	if _, ok := queryParams(w, r); !ok {
		return
	}
	all, err := a.killSwitch.Switches(r.Context())
	if err != nil {
		a.switchStoreDown(w, r, err)
		return
	}
	global := store.DefaultSwitch("")
	own := store.DefaultSwitch(actor.Tenant)
	var tenants []store.Switch
	for _, s := range all {
		switch {
		case s.Global():
			global = s
		case actor.Role == tokens.RolePlatformAdmin:
			tenants = append(tenants, s)
		case s.Tenant == actor.Tenant:
			own = s
		}
	}
	out := SwitchList{Switches: []Switch{switchJSON(global)}}
	if actor.Role != tokens.RolePlatformAdmin && actor.Tenant != "" {
		tenants = []store.Switch{own}
	}
	for _, s := range tenants {
		out.Switches = append(out.Switches, switchJSON(s))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) setSwitch(w http.ResponseWriter, r *http.Request, actor tokens.Actor) {
	var req SetSwitchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	action, scope := ActionKillSwitchOff, "tenant"
	if req.On != nil && *req.On {
		action = ActionKillSwitchOn
	}
	if req.Tenant == "" {
		scope = "global"
	}
	rec := store.AuditRecord{
		Channel: store.ChannelAdmin, Tenant: req.Tenant, Subject: actor.Subject, Client: actor.Name,
		Action: action, PublicIDs: map[string]string{"scope": scope, "role": actor.Role},
	}
	if actor.Subject == "" {
		rec.Subject, rec.Client = actor.Name, ""
	}
	if len(rec.Tenant) > store.MaxIDLen || strings.IndexByte(rec.Tenant, 0) >= 0 {
		rec.Tenant = "" // invalid: refused below, recorded without it
	}
	refuse := func(status int, outcome string, e apiError) {
		rec.Outcome = outcome
		rec.PublicIDs["reason"] = e.Code
		a.auditSwitch(r, rec)
		writeError(w, status, e)
	}

	switch actor.Role {
	case tokens.RolePlatformAdmin:
	case tokens.RoleTenantAdmin:
		if req.Tenant == "" {
			refuse(http.StatusForbidden, "denied", apiError{Code: "global_switch_forbidden",
				Message: "only a platform admin may set the global kill switch",
				Fix:     fmt.Sprintf("set \"tenant\": %q to stop your own tenant, or ask a platform admin", actor.Tenant)})
			return
		}
		if req.Tenant != actor.Tenant {
			refuse(http.StatusForbidden, "denied", apiError{Code: "other_tenant",
				Message: "a tenant admin may set only their own tenant's kill switch",
				Fix:     fmt.Sprintf("set \"tenant\": %q, or ask a platform admin", actor.Tenant)})
			return
		}
	default:
		refuse(http.StatusForbidden, "denied", apiError{Code: "forbidden",
			Message: "only platform and tenant admins may set a kill switch",
			Fix:     "ask an admin of your tenant"})
		return
	}
	if req.On == nil {
		refuse(http.StatusBadRequest, "invalid", apiError{Code: "on_required",
			Message: "the member \"on\" is required",
			Fix:     "send \"on\": true to stop traffic, \"on\": false to let it through again"})
		return
	}
	if req.Tenant != "" {
		if err := store.CheckID("tenant", req.Tenant); err != nil {
			refuse(http.StatusBadRequest, "invalid", apiError{Code: "invalid_tenant",
				Message: "the tenant must be non-empty, at most 1024 bytes, without NUL",
				Fix:     "give the tenant as its credentials name it, or leave it out for the global switch"})
			return
		}
	}
	if *req.On && strings.TrimSpace(req.Reason) == "" {
		refuse(http.StatusBadRequest, "invalid", apiError{Code: "reason_required",
			Message: "turning a kill switch on needs a reason; every refused client is shown it",
			Fix:     "give \"reason\", e.g. \"incident 42: agents page everyone\""})
		return
	}
	if err := store.CheckSwitchReason(req.Reason); err != nil {
		refuse(http.StatusBadRequest, "invalid", apiError{Code: "invalid_reason",
			Message: fmt.Sprintf("the reason must be at most %d bytes of UTF-8 on one line, without control characters", store.MaxSwitchReasonLen),
			Fix:     "shorten the reason to one line"})
		return
	}
	setBy := actor.Subject
	if setBy == "" {
		setBy = actor.Name
	}
	if setBy == "" {
		setBy = actor.Role
	}
	s := store.Switch{Tenant: req.Tenant, On: *req.On, Reason: strings.TrimSpace(req.Reason), SetBy: setBy,
		At: time.Now().Truncate(time.Microsecond).UTC()}
	if err := a.killSwitch.SetSwitch(r.Context(), s); err != nil {
		rec.Outcome = "error"
		a.auditSwitch(r, rec)
		a.switchStoreDown(w, r, err)
		return
	}
	rec.Outcome = "ok"
	a.auditSwitch(r, rec)
	a.log.WarnContext(r.Context(), "kill switch set through the admin API", "scope", scope, "tenant", s.Tenant, "on", s.On, "set_by", s.SetBy)
	writeJSON(w, http.StatusOK, switchJSON(s))
}

// auditSwitch records a PUT /v1/killswitch.
func (a *API) auditSwitch(r *http.Request, rec store.AuditRecord) {
	if a.auditor == nil {
		return
	}
	if _, err := a.auditor.Record(r.Context(), rec); err != nil {
		a.log.ErrorContext(r.Context(), "admin API: kill switch change not audited", "error", err)
	}
}

func (a *API) switchStoreDown(w http.ResponseWriter, r *http.Request, err error) {
	a.log.WarnContext(r.Context(), "admin API: kill switch store unavailable", "error", err)
	w.Header().Set("Retry-After", a.retryAfterSec)
	writeError(w, http.StatusServiceUnavailable, apiError{Code: "unavailable",
		Message: "the kill switches cannot be read or written now: the state store does not answer",
		Fix:     "retry shortly; while the store is down nobody can change a switch"})
}
