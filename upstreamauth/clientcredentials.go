package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
)

// ClientCredentialsOptions configure a ClientCredentials source.
type ClientCredentialsOptions struct {
	// Upstream names the upstream in errors and logs.
	Upstream string
	// TokenURL is the token endpoint; ClientID and ClientSecret mcpgate's
	// client there. The secret is read at each fetch, so a rotated secret
	// is picked up by the next fetch.
	TokenURL     string
	ClientID     string
	ClientSecret SecretRef
	Scopes       []string
	// Audience and Resource (RFC 8707) are sent as the token request's
	// audience and resource parameters when set.
	Audience, Resource string
	// Early is how long before its expiry a token is replaced (default
	// DefaultEarly). A token without expires_in is kept until refused.
	Early time.Duration
	// FetchTimeout bounds one token request (default
	// DefaultFetchTimeout).
	FetchTimeout time.Duration
	// HTTPClient sends token requests; nil: http.DefaultClient.
	HTTPClient *http.Client
	Observe    Observer
	Logger     *slog.Logger
	// Now is the clock (tests); nil: time.Now.
	Now func() time.Time
}

// Defaults of ClientCredentialsOptions.
const (
	DefaultEarly        = 30 * time.Second
	DefaultFetchTimeout = 10 * time.Second
)

// ClientCredentials is an OAuth 2.0 client-credentials token (RFC 6749
// section 4.4) of mcpgate's own identity, the same for every caller. The
// token is cached until Early before its expiry; concurrent callers that
// find no valid token share one token request.
type ClientCredentials struct {
	o      ClientCredentialsOptions
	params url.Values
	flight singleflight.Group

	mu  sync.Mutex
	tok *cachedToken
}

type cachedToken struct {
	header map[string][]string // shared, read only
	expiry time.Time           // zero: none given
}

var _ Source = (*ClientCredentials)(nil)

// NewClientCredentials returns the source; it fetches nothing yet.
func NewClientCredentials(o ClientCredentialsOptions) *ClientCredentials {
	if o.Early <= 0 {
		o.Early = DefaultEarly
	}
	if o.FetchTimeout <= 0 {
		o.FetchTimeout = DefaultFetchTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	params := url.Values{}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	if o.Resource != "" {
		params.Set("resource", o.Resource)
	}
	return &ClientCredentials{o: o, params: params}
}

// Kind implements Source.
func (c *ClientCredentials) Kind() string { return KindClientCredentials }

// Header implements Source: the cached token, or one fetched now. The
// fetch is not cancelled by ctx (other callers may wait on it); it is
// bounded by FetchTimeout.
func (c *ClientCredentials) Header(ctx context.Context, _ *Caller) (map[string][]string, error) {
	if h := c.cached(); h != nil {
		c.o.Observe.observe(ResultHit)
		return h, nil
	}
	ch := c.flight.DoChan("", func() (any, error) {
		if h := c.cached(); h != nil { // fetched while this caller waited
			return h, nil
		}
		return c.fetch(context.WithoutCancel(ctx))
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(map[string][]string), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// cached returns the header of a token that is still good, nil if none.
func (c *ClientCredentials) cached() map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tok
	if t == nil || (!t.expiry.IsZero() && !c.o.Now().Add(c.o.Early).Before(t.expiry)) {
		return nil
	}
	return t.header
}

func (c *ClientCredentials) fetch(ctx context.Context) (map[string][]string, error) {
	secret, err := c.o.ClientSecret.Read()
	if err != nil {
		c.o.Observe.observe(ResultError)
		return nil, &sourceError{upstream: c.o.Upstream, err: err}
	}
	cfg := clientcredentials.Config{
		ClientID: c.o.ClientID, ClientSecret: secret, TokenURL: c.o.TokenURL,
		Scopes: c.o.Scopes, EndpointParams: c.params,
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.FetchTimeout)
	defer cancel()
	if c.o.HTTPClient != nil {
		ctx = context.WithValue(ctx, oauth2.HTTPClient, c.o.HTTPClient)
	}
	tok, err := cfg.Token(ctx)
	if err != nil {
		err = tokenError(c.o.TokenURL, err)
		if errors.Is(err, ErrRefused) {
			c.o.Observe.observe(ResultRefused)
		} else {
			c.o.Observe.observe(ResultError)
		}
		c.o.Logger.Warn("upstream token request failed", "upstream", c.o.Upstream, "error", err)
		return nil, &sourceError{upstream: c.o.Upstream, err: err}
	}
	if tok.AccessToken == "" {
		c.o.Observe.observe(ResultError)
		return nil, &sourceError{upstream: c.o.Upstream, err: fmt.Errorf("token endpoint %s answered without an access token", c.o.TokenURL)}
	}
	c.o.Observe.observe(ResultFetched)
	t := &cachedToken{header: map[string][]string{"authorization": []string{"Bearer " + tok.AccessToken}[:1:1]}, expiry: tok.Expiry}
	c.mu.Lock()
	c.tok = t
	c.mu.Unlock()
	return t.header, nil
}

// tokenError describes a failed token request without its secrets: a
// refusal (the endpoint answered with an OAuth error or an error status)
// wraps ErrRefused and carries the endpoint's error code; anything else
// is the endpoint being unreachable.
func tokenError(endpoint string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("%w: token endpoint %s answered %d (%s)", ErrRefused, endpoint, status, code)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("token endpoint %s cannot be reached: %w", endpoint, err)
}

// Refused implements Source: the cached token is dropped, so the next
// Header fetches a new one. Concurrent refusals of the same token may
// drop a token fetched in between; that costs one extra fetch.
func (c *ClientCredentials) Refused(*Caller) bool {
	c.o.Observe.observe(ResultRefused)
	c.mu.Lock()
	defer c.mu.Unlock()
	dropped := c.tok != nil
	c.tok = nil
	return dropped
}

// LogValue names the upstream and endpoint, never the secret or token.
func (c *ClientCredentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", KindClientCredentials), slog.String("upstream", c.o.Upstream),
		slog.String("token_url", c.o.TokenURL), slog.String("client_id", c.o.ClientID))
}
