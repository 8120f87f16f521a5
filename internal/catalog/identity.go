package catalog

import (
	"context"
	"net/http"

	"github.com/mcpgate/mcpgate/assertion"
)

// The catalog's own identity in the assertions it sends upstream: it lists
// tools for nobody in particular, so it acts in a tenant of its own
// ("_catalog", reserved for it) and holds no rights. An upstream that
// verifies assertions sees that mcpgate itself is listing, and can list
// its tools without tenant data.
const (
	// Tenant is the "tenant" claim of the catalog's assertions.
	Tenant = "_catalog"
	// Subject is the "sub" claim.
	Subject = "mcpgate-catalog"
	// Connection is the "connection" claim.
	Connection = "catalog"
	// CredentialKind is the "credential_kind" claim: mcpgate itself.
	CredentialKind = "gateway"
	// ClientName is the "client" claim and the MCP clientInfo name.
	ClientName = "mcpgate-catalog"
)

// Identity returns the catalog's identity (Tenant, Subject, Connection,
// CredentialKind, ClientName; no rights) for assertion.Signer.Sign.
func Identity() assertion.Identity {
	return assertion.Identity{
		Tenant:         Tenant,
		Subject:        Subject,
		Rights:         []string{},
		Connection:     Connection,
		Client:         ClientName,
		CredentialKind: CredentialKind,
	}
}

// SignedHeader returns an Upstream.Header that sets assertion.Header
// (Mcpgate-Assertion) to an assertion of the catalog's Identity for
// audience (the upstream's configured audience, upstreams[].audience),
// signed by s. The signer reuses an assertion while more than half its
// lifetime remains, so most requests cost no signature. Errors are the
// signer's (e.g. assertion.ErrIncompleteIdentity for an empty audience).
func SignedHeader(s *assertion.Signer, audience string) func(context.Context) (http.Header, error) {
	return func(context.Context) (http.Header, error) {
		tok, err := s.Sign(Identity(), audience)
		if err != nil {
			return nil, err
		}
		h := http.Header{}
		h.Set(assertion.Header, tok)
		return h, nil
	}
}

// UserAgent is the User-Agent of the catalog's requests, so an upstream's
// logs (and tests) can tell mcpgate's own listings from clients' calls.
const UserAgent = "mcpgate-catalog"
