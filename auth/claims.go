package auth

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Claims is what a verified token says, read through the issuer's claim
// mapping.
type Claims struct {
	// Issuer is the issuer identifier of the token's issuer.
	Issuer string
	// Subject is the subject (SubjectClaim).
	Subject string
	// Tenant is the tenant (TenantClaim) when the token names exactly one;
	// "" when the issuer maps no tenant claim, the token has none, or it
	// names several (see Tenants).
	Tenant string
	// Tenants are every tenant the tenant claim names, in token order
	// without duplicates or empty strings: the claim may be a string or an
	// array of strings. nil when there is none.
	Tenants []string
	// Roles are the principal's roles (RolesClaim, a string or an array of
	// strings), in token order; nil when the token has no roles claim.
	Roles []string
	// ClientID is the OAuth client the token was issued to.
	ClientID string
	// Scopes are the token's scopes, in token order.
	Scopes []string
	// Audience holds the token's audiences (canonical where they are URIs).
	Audience []string
	// Expiry is the token's exp.
	Expiry time.Time
	// TokenID is the jti, "" if absent.
	TokenID string
	// Introspected is true for an opaque token verified by introspection.
	Introspected bool
}

// HasScopes reports whether the token holds every one of the scopes.
func (c *Claims) HasScopes(required ...string) bool {
	for _, s := range required {
		if !slices.Contains(c.Scopes, s) {
			return false
		}
	}
	return true
}

// RequireScopes returns nil if the token holds every required scope, else an
// *Error with ReasonInsufficientScope (403) whose Scopes are the required
// ones, for the challenge's scope attribute.
func (c *Claims) RequireScopes(required ...string) error {
	if c.HasScopes(required...) {
		return nil
	}
	var missing []string
	for _, s := range required {
		if !slices.Contains(c.Scopes, s) {
			missing = append(missing, s)
		}
	}
	return &Error{
		Reason: ReasonInsufficientScope,
		Scopes: slices.Clone(required),
		cause:  fmt.Errorf("missing scopes %v", missing),
	}
}

func (c *Claims) clone() *Claims {
	out := *c
	out.Scopes = slices.Clone(c.Scopes)
	out.Audience = slices.Clone(c.Audience)
	out.Tenants = slices.Clone(c.Tenants)
	out.Roles = slices.Clone(c.Roles)
	return &out
}

// rawClaims is a token's claim set, each value still JSON.
type rawClaims map[string]json.RawMessage

// str reads a string claim; absent or null is ("", false, nil).
func (m rawClaims) str(name string) (string, bool, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, fmt.Errorf("claim %q: not a string", name)
	}
	return s, true, nil
}

// firstStr reads the first present claim among names.
func (m rawClaims) firstStr(names ...string) (string, error) {
	for _, n := range names {
		s, ok, err := m.str(n)
		if err != nil || ok {
			return s, err
		}
	}
	return "", nil
}

// strList reads a claim that is a space-separated string or an array of
// strings.
func (m rawClaims) strList(name string) ([]string, bool, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return nil, false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.Fields(s), true, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false, fmt.Errorf("claim %q: not a string or an array of strings", name)
	}
	return list, true, nil
}

// strOrStrs reads a claim that is one string (a one-element list) or an
// array of strings; absent or null is (nil, nil).
func (m rawClaims) strOrStrs(name string) ([]string, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("claim %q: not a string or an array of strings", name)
	}
	return list, nil
}

// time reads a NumericDate claim; absent is (zero, false, nil).
func (m rawClaims) time(name string) (time.Time, bool, error) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return time.Time{}, false, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > 1e11 {
		return time.Time{}, false, fmt.Errorf("claim %q: not a NumericDate", name)
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// audiences reads aud: a string or an array of strings.
func (m rawClaims) audiences() ([]string, error) {
	raw, ok := m["aud"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("claim \"aud\": not a string or an array of strings")
	}
	return list, nil
}

// mapClaims reads subject, tenants, roles, client and scopes through the
// issuer's claim names.
func (iss *issuer) mapClaims(m rawClaims) (*Claims, error) {
	c := &Claims{Issuer: iss.cfg.Issuer}
	var err error
	var ok bool
	if c.Subject, ok, err = m.str(iss.cfg.SubjectClaim); err != nil {
		return nil, err
	} else if !ok || c.Subject == "" {
		return nil, fmt.Errorf("claim %q: missing", iss.cfg.SubjectClaim)
	}
	if iss.cfg.TenantClaim != "" {
		tenants, err := m.strOrStrs(iss.cfg.TenantClaim)
		if err != nil {
			return nil, err
		}
		for _, t := range tenants {
			if t != "" && !slices.Contains(c.Tenants, t) {
				c.Tenants = append(c.Tenants, t)
			}
		}
		if len(c.Tenants) == 1 {
			c.Tenant = c.Tenants[0]
		}
	}
	if iss.cfg.RolesClaim != "" {
		if c.Roles, err = m.strOrStrs(iss.cfg.RolesClaim); err != nil {
			return nil, err
		}
	}
	if iss.cfg.ClientIDClaim != "" {
		c.ClientID, _, err = m.str(iss.cfg.ClientIDClaim)
	} else {
		c.ClientID, err = m.firstStr("client_id", "azp")
	}
	if err != nil {
		return nil, err
	}
	names := []string{"scope", "scp"}
	if iss.cfg.ScopeClaim != "" {
		names = []string{iss.cfg.ScopeClaim}
	}
	for _, n := range names {
		if c.Scopes, ok, err = m.strList(n); err != nil {
			return nil, err
		} else if ok {
			break
		}
	}
	if c.TokenID, _, err = m.str("jti"); err != nil {
		return nil, err
	}
	return c, nil
}
