package tokens

import (
	"errors"
	"slices"
)

// Sentinel errors: every error of the Service is an *Error wrapping one of
// them (test with errors.Is).
var (
	// ErrForbidden: the actor may not do this (outside their tenant or
	// their own tokens, the person is not active, or lacks the rights).
	ErrForbidden = errors.New("tokens: forbidden")
	// ErrNotFound: no such token, or none the actor may see.
	ErrNotFound = errors.New("tokens: not found")
	// ErrInvalid: the request is malformed (ids, name, rights, lifetime).
	ErrInvalid = errors.New("tokens: invalid request")
	// ErrUnavailable: the store or the rights source failed; retry later.
	ErrUnavailable = errors.New("tokens: unavailable")
	// ErrInvalidToken: a presented secret is malformed or unknown. Errors
	// wrapping ErrRevoked or ErrExpired match it too.
	ErrInvalidToken = errors.New("tokens: invalid token")
	// ErrRevoked: a presented token was revoked.
	ErrRevoked = errors.New("tokens: token revoked")
	// ErrExpired: a presented token expired.
	ErrExpired = errors.New("tokens: token expired")
)

// Error is a refusal of the Service. Code, Message, Fix and Missing are
// safe to show the caller; the wrapped cause (in Error()) is internal
// detail for logs.
type Error struct {
	// Err is the sentinel (ErrForbidden, ErrNotFound, ...).
	Err error
	// Code is a stable snake_case code, e.g. "rights_not_held".
	Code string
	// Message says what is wrong, in one sentence.
	Message string
	// Fix says what to do instead.
	Fix string
	// Missing, for Code "rights_not_held", are the requested rights the
	// person does not hold, in request order.
	Missing []string
	cause   error
}

// Error returns the message and the internal cause; for logs.
func (e *Error) Error() string {
	s := "tokens: " + e.Message
	if e.cause != nil {
		s += ": " + e.cause.Error()
	}
	return s
}

// Unwrap returns the sentinel (with ErrInvalidToken for ErrRevoked and
// ErrExpired) and the internal cause.
func (e *Error) Unwrap() []error {
	errs := []error{e.Err}
	if errors.Is(e.Err, ErrRevoked) || errors.Is(e.Err, ErrExpired) {
		errs = append(errs, ErrInvalidToken)
	}
	if e.cause != nil {
		errs = append(errs, e.cause)
	}
	return slices.Clip(errs)
}

func forbidden(code, msg, fix string) *Error {
	return &Error{Err: ErrForbidden, Code: code, Message: msg, Fix: fix}
}

func invalid(code, msg, fix string) *Error {
	return &Error{Err: ErrInvalid, Code: code, Message: msg, Fix: fix}
}

func unavailable(cause error) *Error {
	return &Error{Err: ErrUnavailable, Code: "unavailable", Message: "the token store cannot be reached now",
		Fix: "retry shortly", cause: cause}
}
