package gateway

import "github.com/mcpgate/mcpgate/gateway/mcp"

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

// serveDocument answers a request for a public document the pipeline
// serves itself, without a credential: the protected resource metadata
// (RFC 9728) and the assertion keys (RFC 7517). GET gets doc with
// contentType and a Cache-Control max-age of maxAge seconds, OPTIONS is a
// CORS preflight, anything else 405.
func serveDocument(x *Exchange, doc []byte, contentType, maxAge string) Verdict {
	switch x.req.Method {
	case "GET":
		x.outcome = OutcomeLocal
		l := local(200, doc)
		l.Header.Set("content-type", contentType)
		l.Header.Set("cache-control", "max-age="+maxAge)
		return Verdict{Local: l}
	case "OPTIONS":
		x.outcome = OutcomeLocal
		return Verdict{Local: preflight(x.req.Header)}
	}
	x.outcome = OutcomeInvalid
	return Verdict{Local: &Local{Status: 405, Header: mcp.Header{"allow": {"GET, OPTIONS"}}}}
}
