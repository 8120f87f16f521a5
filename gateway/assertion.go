package gateway

import (
	"log/slog"

	"github.com/mcpgate/mcpgate/policy"
)

// AssertionHeader is the request header field (lower case) that carries
// mcpgate's signed identity assertion to the upstream; it equals
// assertion.Header. A client-sent field of that name is always removed
// before forwarding, whether or not an Asserter is configured.
const AssertionHeader = "mcpgate-assertion"

// Asserter signs the identity assertion an upstream receives instead of
// the client's credential (forward stage); the internal/app
// wiring implements it with the assertion package.
type Asserter interface {
	// Assert returns the assertion (a compact JWS) for principal p calling
	// upstream with the self-reported client name client ("" if unknown).
	Assert(p *policy.Principal, upstream, client string) (string, error)
}

// assert adds the signed identity assertion to a forwarded request.
func (p *Pipeline) assert(x *Exchange, v *Verdict) error {
	a := p.opts.Asserter
	if a == nil || !x.input.Principal.Authenticated {
		return nil
	}
	client := ""
	if x.msg != nil {
		if ci := clientInfo(x.msg); ci != nil {
			client = ci.Name
		}
	}
	tok, err := a.Assert(&x.input.Principal, x.req.Upstream, client)
	if err != nil {
		return err
	}
	v.SetHeader.Set(AssertionHeader, tok)
	x.asserted = true
	return nil
}

// refusedAssertion reports an upstream that answered 401 to a request
// carrying mcpgate's assertion: the upstream does not accept the
// gateway's identity (keys, issuer or audience differ), which the client
// cannot fix. The exchange fails as an upstream failure (502), logged for
// the operator.
func (x *Exchange) refusedAssertion(status int) error {
	if status != 401 || !x.asserted {
		return nil
	}
	x.p.log.LogAttrs(x.ctx, slog.LevelError, "upstream refused mcpgate's identity assertion; check assertion.keys_file, assertion.issuer and upstreams[].audience against the upstream's verifier",
		slog.String("upstream", x.req.Upstream))
	return ErrUpstreamResponse
}
