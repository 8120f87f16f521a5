package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/catalog"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// upstreamCredentials are the upstreams' own credentials
// (upstreams[].credential): one Source per upstream for calls, and the
// one the catalog lists with.
type upstreamCredentials struct {
	calls     map[string]upstreamauth.Source
	discovery map[string]upstreamauth.Source
	statics   []*upstreamauth.Static
	log       *slog.Logger
}

// newUpstreamCredentials builds the sources of cfg's upstreams and counts
// their requests in mcpgate_upstream_credential_requests_total. A static
// secret that cannot be read fails the start.
func newUpstreamCredentials(cfg *config.Config, log *slog.Logger, reg prometheus.Registerer) (*upstreamCredentials, error) {
	count := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcpgate_upstream_credential_requests_total",
		Help: "Requests for an upstream's own credential (upstreams[].credential), by upstream, credential kind and result: hit (a cached token or static secret was used), fetched (a token was fetched from the token endpoint), refused (the token endpoint or the upstream refused it) or error (the secret could not be read or the token endpoint not reached).",
	}, []string{"upstream", "credential", "result"})
	reg.MustRegister(count)
	uc := &upstreamCredentials{calls: map[string]upstreamauth.Source{}, discovery: map[string]upstreamauth.Source{}, log: log}
	for _, u := range cfg.Upstreams {
		cr := u.Credential
		kind := u.CredentialKind()
		if kind == config.CredentialNone {
			continue
		}
		observe := func(result string) { count.WithLabelValues(u.Name, kind, result).Inc() }
		switch kind {
		case config.CredentialStatic:
			s, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{
				Upstream: u.Name, Header: cr.Header, Scheme: cr.Scheme,
				Value:     upstreamauth.SecretRef{File: cr.ValueFile, Env: cr.ValueEnv},
				BasicUser: cr.BasicUser, Password: upstreamauth.SecretRef{File: cr.PasswordFile, Env: cr.PasswordEnv},
				Observe: observe, Logger: log,
			})
			if err != nil {
				return nil, err
			}
			uc.calls[u.Name], uc.discovery[u.Name] = s, s
			uc.statics = append(uc.statics, s)
		case config.CredentialClientCredentials:
			s := clientCredentials(u.Name, cr, observe, log)
			uc.calls[u.Name], uc.discovery[u.Name] = s, s
		case config.CredentialTokenExchange:
			s, err := newTokenExchange(u, observe, log)
			if err != nil {
				return nil, err
			}
			uc.calls[u.Name] = s
			if cr.Discovery == config.CredentialClientCredentials {
				uc.discovery[u.Name] = clientCredentials(u.Name, cr, func(result string) {
					count.WithLabelValues(u.Name, config.CredentialClientCredentials, result).Inc()
				}, log)
			}
		}
	}
	return uc, nil
}

// newTokenExchange builds the RFC 8693 exchange source of u. Its client
// secret is read once here (a SIGHUP rebuilds the gateway's sources).
func newTokenExchange(u config.Upstream, observe upstreamauth.Observer, _ *slog.Logger) (upstreamauth.Source, error) {
	cr := u.Credential
	secret, err := upstreamauth.SecretRef{File: cr.ClientSecretFile, Env: cr.ClientSecretEnv}.Read()
	if err != nil {
		return nil, fmt.Errorf("upstream %q: token exchange client secret: %w", u.Name, err)
	}
	subject := upstreamauth.SubjectAccessToken
	if cr.Subject == config.SubjectAssertion {
		subject = upstreamauth.SubjectAssertion
	}
	e, err := upstreamauth.NewExchange(upstreamauth.ExchangeConfig{
		TokenURL: cr.TokenURL, ClientID: cr.ClientID, ClientSecret: secret,
		Audience: cr.Audience, Resource: cr.Resource, Scopes: cr.Scopes,
		Subject: subject, Observe: observe,
	})
	if err != nil {
		return nil, fmt.Errorf("upstream %q: %w", u.Name, err)
	}
	return e, nil
}

func clientCredentials(upstream string, cr *config.Credential, observe upstreamauth.Observer, log *slog.Logger) *upstreamauth.ClientCredentials {
	return upstreamauth.NewClientCredentials(upstreamauth.ClientCredentialsOptions{
		Upstream: upstream, TokenURL: cr.TokenURL, ClientID: cr.ClientID,
		ClientSecret: upstreamauth.SecretRef{File: cr.ClientSecretFile, Env: cr.ClientSecretEnv},
		Scopes:       cr.Scopes, Audience: cr.Audience, Resource: cr.Resource,
		Observe: observe, Logger: log,
	})
}

// watch rereads the static secrets held in files when they change, until
// ctx ends.
func (uc *upstreamCredentials) watch(ctx context.Context) error {
	if uc == nil {
		return nil
	}
	for _, s := range uc.statics {
		if err := s.Watch(ctx); err != nil {
			return err
		}
	}
	return nil
}

// reload rereads every static secret (SIGHUP); one that cannot be read
// keeps its previous value.
func (uc *upstreamCredentials) reload(ctx context.Context) error {
	if uc == nil {
		return nil
	}
	var errs []error
	for _, s := range uc.statics {
		if err := s.Reload(); err != nil {
			uc.log.ErrorContext(ctx, "upstream credential reload failed; the previous secret stays in use", "error", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// catalogHeader returns the header fields of the catalog's listing of
// upstream, besides the assertion: the discovery credential asked for the
// catalog's own principal; nil when the upstream has none.
func (uc *upstreamCredentials) catalogHeader(upstream string) func(context.Context) (http.Header, error) {
	if uc == nil || uc.discovery[upstream] == nil {
		return nil
	}
	src := uc.discovery[upstream]
	caller := &upstreamauth.Caller{Tenant: catalog.Tenant, Subject: catalog.Subject}
	return func(ctx context.Context) (http.Header, error) {
		h, err := src.Header(ctx, caller)
		if err != nil {
			return nil, err
		}
		out := make(http.Header, len(h))
		for k, v := range h {
			out[http.CanonicalHeaderKey(k)] = v
		}
		return out, nil
	}
}
