package auth

import (
	"errors"
	"net/http"
	"strings"
)

// Sentinels wrapped by every *Error; test with errors.Is.
var (
	// ErrMissingToken: the request carries no bearer token (401, challenge
	// without an error code, RFC 6750 section 3.1).
	ErrMissingToken = errors.New("auth: no bearer token")
	// ErrInvalidToken: the token is malformed, expired, not yet valid, for
	// another audience or issuer, badly signed, inactive... (401,
	// error="invalid_token").
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrInsufficientScope: the token is valid but its scopes do not cover
	// the call (403, error="insufficient_scope"); the client can re-authorise.
	ErrInsufficientScope = errors.New("auth: insufficient scope")
	// ErrUnavailable: the token could not be checked because the provider
	// (JWKS or introspection endpoint) did not answer (503).
	ErrUnavailable = errors.New("auth: token cannot be verified now")
)

// Reason says why a token was refused. The values are a closed set, safe to
// show a client and to use as a metric label.
type Reason string

// Reasons.
const (
	ReasonMissing           Reason = "missing"
	ReasonMalformed         Reason = "malformed"
	ReasonExpired           Reason = "expired"
	ReasonNotYetValid       Reason = "not_yet_valid"
	ReasonWrongAudience     Reason = "wrong_audience"
	ReasonWrongIssuer       Reason = "wrong_issuer"
	ReasonBadSignature      Reason = "bad_signature"
	ReasonUnknownKey        Reason = "unknown_key"
	ReasonAlgNotAllowed     Reason = "alg_not_allowed"
	ReasonTypNotAllowed     Reason = "typ_not_allowed"
	ReasonInactive          Reason = "inactive"
	ReasonInsufficientScope Reason = "insufficient_scope"
	ReasonUnavailable       Reason = "unavailable"
)

// Reasons lists every Reason, for metric label pre-registration.
var Reasons = []Reason{
	ReasonMissing, ReasonMalformed, ReasonExpired, ReasonNotYetValid,
	ReasonWrongAudience, ReasonWrongIssuer, ReasonBadSignature, ReasonUnknownKey,
	ReasonAlgNotAllowed, ReasonTypNotAllowed, ReasonInactive,
	ReasonInsufficientScope, ReasonUnavailable,
}

var descriptions = map[Reason]string{
	ReasonMissing:           "no bearer token",
	ReasonMalformed:         "token is malformed",
	ReasonExpired:           "token expired",
	ReasonNotYetValid:       "token is not yet valid",
	ReasonWrongAudience:     "token audience does not match this resource",
	ReasonWrongIssuer:       "token issuer is not trusted",
	ReasonBadSignature:      "token signature is invalid",
	ReasonUnknownKey:        "token signing key is unknown",
	ReasonAlgNotAllowed:     "token signing algorithm is not allowed",
	ReasonTypNotAllowed:     "token type is not an access token",
	ReasonInactive:          "token is not active",
	ReasonInsufficientScope: "token scope does not cover this request",
	ReasonUnavailable:       "token cannot be verified now",
}

// Error is a refused credential. Description, Reason and Scopes are safe to
// show a client; the wrapped cause (in Error()) is internal detail for logs.
type Error struct {
	// Reason is why the credential was refused.
	Reason Reason
	// Scopes, for ReasonInsufficientScope, are the scopes the request needs;
	// the challenge carries them in its scope attribute. They may also be
	// set on a 401 to tell the client which scopes to ask for.
	Scopes []string
	cause  error
}

func newError(r Reason, cause error) *Error { return &Error{Reason: r, cause: cause} }

// Error returns the reason and the internal cause; for logs, not clients.
func (e *Error) Error() string {
	s := "auth: " + e.Description()
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the sentinel of the reason and the internal cause.
func (e *Error) Unwrap() []error {
	errs := []error{e.sentinel()}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return errs
}

func (e *Error) sentinel() error {
	switch e.Reason {
	case ReasonMissing:
		return ErrMissingToken
	case ReasonInsufficientScope:
		return ErrInsufficientScope
	case ReasonUnavailable:
		return ErrUnavailable
	default:
		return ErrInvalidToken
	}
}

// Description is a short English sentence, safe to show a client.
func (e *Error) Description() string {
	if d, ok := descriptions[e.Reason]; ok {
		return d
	}
	return "token is invalid"
}

// Code is the RFC 6750 error code: "invalid_token", "insufficient_scope",
// or "" when the request had no token or the token could not be checked.
func (e *Error) Code() string {
	switch e.Reason {
	case ReasonMissing, ReasonUnavailable:
		return ""
	case ReasonInsufficientScope:
		return "insufficient_scope"
	default:
		return "invalid_token"
	}
}

// StatusCode is the HTTP status to answer with: 401 (no or invalid token),
// 403 (insufficient scope) or 503 (provider unavailable).
func (e *Error) StatusCode() int {
	switch e.Reason {
	case ReasonInsufficientScope:
		return http.StatusForbidden
	case ReasonUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusUnauthorized
	}
}

// WWWAuthenticate returns the value of the WWW-Authenticate header (RFC 6750
// section 3, RFC 9728 section 5.1), for example
//
//	Bearer resource_metadata="https://gw.example.com/.well-known/oauth-protected-resource/mcp", error="invalid_token", error_description="token expired"
//	Bearer resource_metadata="…", error="insufficient_scope", scope="tools:write", error_description="…"
//
// resourceMetadataURL is the route's protected resource metadata URL (see
// [ResourceMetadataURL]); it is left out when empty.
func (e *Error) WWWAuthenticate(resourceMetadataURL string) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(name, value string) {
		b.WriteString(sep)
		b.WriteString(name)
		b.WriteString(`="`)
		b.WriteString(quote(value))
		b.WriteByte('"')
		sep = ", "
	}
	if resourceMetadataURL != "" {
		param("resource_metadata", resourceMetadataURL)
	}
	if code := e.Code(); code != "" {
		param("error", code)
	}
	if len(e.Scopes) > 0 {
		param("scope", strings.Join(e.Scopes, " "))
	}
	if e.Code() != "" {
		param("error_description", e.Description())
	}
	return b.String()
}

// quote escapes a quoted-string value (RFC 9110 section 5.6.4) and drops
// control characters.
func quote(s string) string {
	if !strings.ContainsAny(s, "\"\\") && isPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isPrintable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return false
		}
	}
	return true
}
