package auth

import (
	"errors"
	"strings"
)

// MaxTokenLength bounds the bearer tokens accepted (bytes); longer ones are
// malformed before any parsing or hashing.
const MaxTokenLength = 16 << 10

// BearerToken extracts the token from the value of an Authorization header
// (RFC 6750 section 2.1): the "Bearer" scheme in any case, one or more
// spaces, and exactly one b64token. Tokens are never taken from the query
// string or a form body.
//
// An empty header or another scheme (Basic, a cookie-style token...) is
// ErrMissingToken: the request carries no bearer credentials. A Bearer
// header whose token is empty, too long, holds more than one token or
// characters outside b64token is ErrInvalidToken with ReasonMalformed.
func BearerToken(authorizationHeader string) (string, error) {
	h := authorizationHeader
	if strings.TrimSpace(h) == "" {
		return "", newError(ReasonMissing, nil)
	}
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", newError(ReasonMissing, errors.New("authorization scheme is not Bearer"))
	}
	token := strings.TrimLeft(rest, " ")
	switch {
	case token == "":
		return "", newError(ReasonMalformed, errors.New("empty bearer token"))
	case len(token) > MaxTokenLength:
		return "", newError(ReasonMalformed, errors.New("bearer token too long"))
	case !isB64Token(token):
		return "", newError(ReasonMalformed, errors.New("bearer token is not one b64token"))
	}
	return token, nil
}

// BearerTokenFromValues is BearerToken for all the values of the
// Authorization header of a request: none is ErrMissingToken, more than one
// is malformed.
func BearerTokenFromValues(values []string) (string, error) {
	switch len(values) {
	case 0:
		return "", newError(ReasonMissing, nil)
	case 1:
		return BearerToken(values[0])
	default:
		return "", newError(ReasonMalformed, errors.New("more than one Authorization header"))
	}
}

// isB64Token reports whether s matches
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' {
			continue
		}
		break
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
