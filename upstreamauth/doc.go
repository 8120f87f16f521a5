// Package upstreamauth gives each upstream request the credential of its
// upstream: nothing, a static secret (an API key header, basic auth), an
// OAuth 2.0 client-credentials token (RFC 6749 section 4.4, the gateway's
// own identity) or an RFC 8693 token exchanged on behalf of the caller.
// mcpgate's signed identity assertion (package assertion) travels beside
// any of them. The client's own Authorization never reaches an upstream.
//
// A Source is built once per upstream from its configuration and is safe
// for concurrent use. The pipeline asks it for the header fields of each
// forwarded request (both adapters: the proxy sets them, the ext_proc
// service sends them to Envoy as header mutations) and tells it when the
// upstream refused what it sent, so that a cached token is dropped and
// fetched again once.
package upstreamauth

import (
	"context"
	"errors"
)

// Credential kinds, the values of the metrics label "credential" and of
// the audit record's credential kind.
const (
	KindNone              = "none"
	KindStatic            = "static"
	KindClientCredentials = "client_credentials"
	KindTokenExchange     = "token_exchange"
)

// Caller is who a forwarded request speaks for, as the gateway verified
// it. An exchange Source uses it; the others ignore it.
type Caller struct {
	// Tenant, Subject and Rights are the verified principal's tenant,
	// subject and effective rights (sorted); an exchanged token is cached
	// per (Tenant, Subject, Rights), never shared beyond them.
	Tenant, Subject string
	Rights          []string
	// AccessToken is the caller's verified OAuth access token, "" when the
	// caller used a gateway-issued token (an exchange then uses the signed
	// assertion of the principal as its subject token, when configured).
	AccessToken string
	// Assertion is mcpgate's signed identity assertion for this request
	// ("" when assertions are off).
	Assertion string
}

// Source gives the credential of one upstream.
type Source interface {
	// Kind is one of the Kind constants.
	Kind() string
	// Header returns the header fields (lower-case names) the upstream
	// request carries, e.g. {"authorization": {"Bearer …"}}; nil for
	// KindNone. The values are secrets: never logged, never in an error.
	Header(ctx context.Context, c *Caller) (map[string][]string, error)
	// Refused tells the source the upstream answered 401 or 403 to what
	// Header gave for c: a cached token is dropped so that the next
	// Header fetches a new one. It reports whether a retry can help (a
	// token was dropped), at most once per cached token.
	Refused(c *Caller) bool
}

// ErrRefused is returned by Header when the token endpoint refused to
// issue a token (an exchange the provider denies, bad client
// credentials): the request is not forwarded, and never with a broader
// credential.
var ErrRefused = errors.New("upstreamauth: the token endpoint refused")

// None is the Source of an upstream that needs no credential of its own.
type None struct{}

func (None) Kind() string { return KindNone }

func (None) Header(context.Context, *Caller) (map[string][]string, error) { return nil, nil }

func (None) Refused(*Caller) bool { return false }

var _ Source = None{}
