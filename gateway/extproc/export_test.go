package extproc

import (
	"context"

	"github.com/mcpgate/mcpgate/gateway"
)

// RouteTo makes s send every request the pipeline forwards to member, as
// the pipeline's verdict on a federated route names it (a test seam: the
// adapter's routing is tested apart from the federation resolver).
func RouteTo(s *Server, member func(*gateway.Request) string) {
	handle := s.handle
	s.handle = func(ctx context.Context, r *gateway.Request) (*gateway.Exchange, gateway.Verdict) {
		x, v := handle(ctx, r)
		if v.Local == nil {
			v.Upstream = member(r)
		}
		return x, v
	}
}

// Observe calls seen with each request s hands the pipeline and the
// exchange the pipeline starts for it.
func Observe(s *Server, seen func(*gateway.Request, *gateway.Exchange)) {
	handle := s.handle
	s.handle = func(ctx context.Context, r *gateway.Request) (*gateway.Exchange, gateway.Verdict) {
		x, v := handle(ctx, r)
		seen(r, x)
		return x, v
	}
}
