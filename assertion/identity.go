package assertion

import (
	"context"
	"time"
)

// Header is the HTTP request header that carries the assertion from the
// gateway to the upstream. The gateway removes any Mcpgate-Assertion header a
// client sent before it adds its own, together with the client's
// Authorization header and cookies, so the value an upstream sees was
// always set by the gateway.
const Header = "Mcpgate-Assertion"

// TokenType is the JOSE "typ" header value of every assertion (RFC 7515
// section 4.1.9). Verification requires it, so no other JWT signed by a key
// the upstream trusts (an OAuth access token "at+jwt", an ID token "JWT")
// can pass for an assertion: explicit typing, RFC 8725 section 3.11.
const TokenType = "mcpgate-assertion+jwt"

// JWKSPath is where the gateway serves the public keys of its assertions, a
// JWK Set (RFC 7517 section 5), on its proxy listener.
const JWKSPath = "/.well-known/jwks.json"

// Identity is who a call forwarded by the gateway is for, as asserted by the
// gateway. Signer.Sign reads Tenant, Subject, Rights, Connection, Client and
// CredentialKind; Verifier.Verify fills every field.
type Identity struct {
	// Issuer is the gateway ("iss").
	Issuer string
	// Audience is the upstream the assertion is for; after Verify, the
	// verifier's configured audience, which "aud" contains.
	Audience string
	// Tenant is the tenant the call acts in ("tenant"), taken by the gateway
	// from the verified credential, never from arguments.
	Tenant string
	// Subject is the person or service the credential belongs to ("sub").
	Subject string
	// Rights are the effective rights at the time of the call ("rights"):
	// the credential's rights intersected with the subject's current
	// rights. Sorted, without duplicates, possibly empty, never nil after
	// Verify.
	Rights []string
	// Connection is the connection id ("connection"): a gateway token's id,
	// or "oauth_" followed by a hash for an OAuth client.
	Connection string
	// Client is the MCP client's self-reported name ("client"); may be
	// empty. Informational only: the client chooses it.
	Client string
	// CredentialKind is how the caller authenticated to the gateway
	// ("credential_kind"): "oauth" or "gateway_token".
	CredentialKind string
	// ID is the assertion's "jti". Reused assertions share it (see Signer);
	// it does not identify a single call.
	ID string
	// IssuedAt ("iat") and Expiry ("exp"), whole seconds.
	IssuedAt, Expiry time.Time
}

// HasRight reports whether r is one of the identity's rights.
func (id *Identity) HasRight(r string) bool {
	for _, have := range id.Rights {
		if have == r {
			return true
		}
	}
	return false
}

type ctxKey struct{}

// NewContext returns a copy of ctx carrying id (Middleware does this after a
// successful verification).
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// FromContext returns the identity stored by NewContext; ok is false when
// there is none.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(ctxKey{}).(*Identity)
	return id, ok && id != nil
}
