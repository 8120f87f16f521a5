// Package assertion is the identity assertion mcpgate sends to the MCP
// servers behind it, and the small library those servers use to check it.
//
// The gateway never passes a client's token on to an upstream. It removes the
// client's Authorization header, cookies and any client-sent assertion, and
// adds its own: a short-lived JWT (RFC 7519) signed by the gateway, in the
// request header [Header] ("Mcpgate-Assertion"), that says who the call is
// for — tenant, subject, effective rights, connection id, client name and
// credential kind — and which upstream it is meant for (the audience). An
// upstream that refuses every request without a valid assertion for its own
// audience cannot be reached around the gateway, and a request routed to the
// wrong upstream fails closed.
//
// # Gateway side
//
// The signing keys live in a key file, a private JWK Set (RFC 7517) shared by
// all replicas (a Kubernetes Secret, say) and made with `mcpgate keys
// generate`. [LoadKeySet] reads it, [NewSigner] signs with its first key,
// [Signer.SetKeys] swaps in a reloaded file without stopping, and
// [Signer.JWKS] / [Signer.JWKSHandler] publish the public halves of every key
// at [JWKSPath] ("/.well-known/jwks.json"). Only Ed25519 ("EdDSA", RFC 8037)
// and P-256 ("ES256", RFC 7518) keys exist here.
//
// Rotation keeps old keys published so assertions they signed keep verifying:
// `mcpgate keys rotate` puts a new key first (it signs at once); with several
// replicas, `keys rotate --stage` publishes a new key without using it and
// `keys promote` makes it sign once every replica and verifier has it.
// Remove an old key after the assertion TTL plus the verifiers' JWKS MaxAge
// and leeway have passed (30 minutes with the defaults).
//
// [Signer.Sign] is on the hot path of every forwarded request, so it reuses a
// signed assertion for the same identity and audience while more than half
// its lifetime remains; reuses share the "jti". An assertion is a bearer
// proof of identity for a short window (60 seconds by default), not a
// one-time token.
//
// # Upstream side
//
//	v, err := assertion.NewVerifier(assertion.VerifierOptions{
//		Issuer:   "https://mcpgate.example.com",
//		Audience: "crm",
//		JWKSURL:  "https://mcpgate.example.com/.well-known/jwks.json",
//	})
//	...
//	http.Handle("/mcp", v.Middleware(mcpHandler))
//
// and in the handler, assertion.FromContext(r.Context()) gives the
// [Identity]. [Verifier.Verify] checks the compact JWS, the JOSE "typ"
// ([TokenType], RFC 8725 section 3.11, so an access token signed by a
// trusted key is never taken for an assertion), the alg allowlist (EdDSA and
// ES256 only, RFC 8725 section 3.1), the kid against the gateway's JWKS
// (fetched again on an unknown kid at most once per MinRefreshInterval), the
// signature, iss, aud, exp/nbf/iat with leeway, and the identity claims.
// Failures are [*Error] values with a stable [Reason]; their messages never
// contain the token.
//
// # Wire format
//
// Protected header: {"alg":"EdDSA"|"ES256","kid":"...","typ":"mcpgate-assertion+jwt"}.
// Claims: iss, sub, aud (one string), iat, nbf, exp (seconds since the
// epoch), jti, tenant, rights (array of strings, sorted), connection, client
// (omitted when empty), credential_kind ("oauth" or "gateway_token").
package assertion
