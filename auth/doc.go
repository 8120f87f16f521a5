// Package auth is mcpgate's OAuth 2.1 resource server: it verifies the bearer
// access tokens presented at an MCP route, and describes each route as an
// RFC 9728 protected resource. It has no HTTP handler; the transport
// adapters and the pipeline call it.
//
// Tokens are verified against configured issuers:
//
//   - JWT access tokens (RFC 9068): discovery with go-oidc, the signature and
//     issuer through go-oidc's IDTokenVerifier over a JWKS cache of our own,
//     plus what go-oidc lacks for access tokens: a typ header allowlist
//     ("at+jwt"), an alg allowlist that can never hold "none" or an HMAC
//     algorithm, a configurable clock skew for exp, nbf and iat, the audience
//     checked against the canonical URI of the route (RFC 8707), and a floor
//     on the interval between JWKS fetches so unknown kids cannot hammer the
//     provider.
//   - Opaque tokens through RFC 7662 introspection, for one issuer that is
//     configured for it.
//
// A verified token is cached until it expires, keyed by the SHA-256 of the
// token, so its signature is not verified again on every call; it leaves the
// cache as soon as a JWKS refresh shows its key is gone.
//
// Every refusal is an [*Error] that wraps [ErrMissingToken],
// [ErrInvalidToken], [ErrInsufficientScope] or [ErrUnavailable], carries a
// [Reason] that is safe to show a client and to use as a metric label, and
// formats the RFC 6750 / RFC 9728 WWW-Authenticate challenge.
package auth
