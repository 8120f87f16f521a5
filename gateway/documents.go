package gateway

import (
	"context"

	"github.com/mcpgate/mcpgate/gateway/mcp"
)

// JWKSPath is where the pipeline serves the public keys of its identity
// assertions (RFC 7517 JWK Set), unauthenticated, when Options.JWKS is set.
const JWKSPath = "/.well-known/jwks.json"

// AnswersPath reports whether the pipeline answers requests to path
// itself (the protected resource metadata documents), so that an adapter
// hands them over although no upstream is routed there.
func (p *Pipeline) AnswersPath(path string) bool {
	if path == JWKSPath && p.opts.JWKS != nil {
		return true
	}
	_, ok := p.metadata(path)
	return ok
}

// StaticMetadata serves fixed protected resource metadata documents,
// request path → document (an Options.ResourceMetadata for routes without
// {tenant}).
func StaticMetadata(docs map[string][]byte) func(path string) ([]byte, bool) {
	return func(path string) ([]byte, bool) {
		doc, ok := docs[path]
		return doc, ok
	}
}

// metadata returns the protected resource metadata document at path.
func (p *Pipeline) metadata(path string) ([]byte, bool) {
	if p.opts.ResourceMetadata == nil {
		return nil, false
	}
	return p.opts.ResourceMetadata(path)
}

// serveDocuments answers the public documents: the protected resource
// metadata at its paths, the assertion keys at JWKSPath.
func (p *Pipeline) serveDocuments(_ context.Context, x *Exchange) *Verdict {
	if doc, ok := p.metadata(x.req.Path); ok {
		return serveDocument(x, doc, "application/json", "300")
	}
	if x.req.Path == JWKSPath && p.opts.JWKS != nil {
		return serveDocument(x, p.opts.JWKS(), "application/jwk-set+json", "60")
	}
	return nil
}

// serveDocument answers a request for a public document the pipeline
// serves itself, without a credential: the protected resource metadata
// (RFC 9728) and the assertion keys (RFC 7517). GET gets doc with
// contentType and a Cache-Control max-age of maxAge seconds, OPTIONS is a
// CORS preflight, anything else 405.
func serveDocument(x *Exchange, doc []byte, contentType, maxAge string) *Verdict {
	switch x.req.Method {
	case "GET":
		l := local(200, doc)
		l.Header.Set("content-type", contentType)
		l.Header.Set("cache-control", "max-age="+maxAge)
		return x.answerAs(OutcomeLocal, l)
	case "OPTIONS":
		return x.answerAs(OutcomeLocal, preflight(x.req.Header))
	}
	return x.answerAs(OutcomeInvalid, &Local{Status: 405, Header: mcp.Header{"allow": {"GET, OPTIONS"}}})
}
