package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxSwitchReasonLen is the maximum length, in bytes, of Switch.Reason.
const MaxSwitchReasonLen = 500

// SwitchStore keeps the kill switches, checked on every request before the
// policy: one global switch and one per tenant. A scope nothing was ever set for is
// in its default state, DefaultSwitch: off.
type SwitchStore interface {
	// SetSwitch stores s as the current state of its scope (s.Tenant, ""
	// for the global switch), replacing the previous one: the last write
	// wins, whatever the At of either. ErrInvalid if s.Validate fails.
	SetSwitch(ctx context.Context, s Switch) error
	// Switches returns the current state of every scope that was ever set,
	// on or off: the global switch first (if it was set), then tenants in
	// byte order. A scope not listed is in its default state.
	Switches(ctx context.Context) ([]Switch, error)
}

// Switch is the state of one kill switch.
type Switch struct {
	// Tenant is the scope: "" for the global switch, else a tenant (a
	// valid identifier, see CheckID).
	Tenant string
	// On: requests in the scope are refused (503) and their streams ended.
	On bool
	// Reason is what the admin gave, shown to clients whose requests are
	// refused: required when On, at most MaxSwitchReasonLen bytes of
	// UTF-8 without control characters.
	Reason string
	// SetBy names who set it (an OIDC subject or a static admin token's
	// name); required, a valid identifier.
	SetBy string
	// At is when it was set; required.
	At time.Time
}

// DefaultSwitch is the state of a scope nothing was ever set for: off. It
// is the one definition of the default; both backends and the gateway use
// it.
func DefaultSwitch(tenant string) Switch { return Switch{Tenant: tenant} }

// Global reports whether s is the global switch.
func (s Switch) Global() bool { return s.Tenant == "" }

// Validate checks the rules SetSwitch enforces; the error wraps ErrInvalid.
func (s Switch) Validate() error {
	var errs []error
	if s.Tenant != "" {
		if err := CheckID("switch tenant", s.Tenant); err != nil {
			errs = append(errs, err)
		}
	}
	if err := CheckID("switch set_by", s.SetBy); err != nil {
		errs = append(errs, err)
	}
	if s.At.IsZero() {
		errs = append(errs, fmt.Errorf("%w: switch time is zero", ErrInvalid))
	}
	if err := CheckSwitchReason(s.Reason); err != nil {
		errs = append(errs, err)
	}
	if s.On && strings.TrimSpace(s.Reason) == "" {
		errs = append(errs, fmt.Errorf("%w: a switch turned on needs a reason", ErrInvalid))
	}
	return errors.Join(errs...)
}

// CheckSwitchReason returns an ErrInvalid error unless reason is at most
// MaxSwitchReasonLen bytes of valid UTF-8 without control characters (it is
// shown to clients inside JSON-RPC error messages).
func CheckSwitchReason(reason string) error {
	switch {
	case len(reason) > MaxSwitchReasonLen:
		return fmt.Errorf("%w: switch reason is longer than %d bytes", ErrInvalid, MaxSwitchReasonLen)
	case !utf8.ValidString(reason):
		return fmt.Errorf("%w: switch reason is not valid UTF-8", ErrInvalid)
	case strings.IndexFunc(reason, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: switch reason contains a control character", ErrInvalid)
	}
	return nil
}
