package upstreamauth

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// RFC 8693 identifiers (sections 2.1 and 3).
const (
	GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccessToken   = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT           = "urn:ietf:params:oauth:token-type:jwt"
)

// Subject token choices of ExchangeConfig.Subject.
const (
	// SubjectAccessToken exchanges the caller's verified OAuth access token.
	SubjectAccessToken = "access_token"
	// SubjectAssertion exchanges mcpgate's signed identity assertion of the
	// caller (for callers with gateway-issued tokens; the provider must
	// trust the gateway's assertion keys).
	SubjectAssertion = "assertion"
)

// Exchange defaults.
const (
	// DefaultExchangeCacheSize bounds the cached exchanged tokens.
	DefaultExchangeCacheSize = 10000
	// DefaultExchangeTimeout bounds one token endpoint request when
	// ExchangeConfig.HTTPClient is nil.
	DefaultExchangeTimeout = 10 * time.Second
	// exchangeNoExpiryTTL is how long a token without expires_in is reused.
	exchangeNoExpiryTTL = time.Minute
	// exchangeMaxSkew is the most a token is dropped before its expiry.
	exchangeMaxSkew = 30 * time.Second
	// exchangeMaxBody bounds the token endpoint's answer (bytes).
	exchangeMaxBody = 64 << 10
	// exchangeMaxDetail bounds the provider's error text kept in an error.
	exchangeMaxDetail = 120
)

// ExchangeConfig configures an RFC 8693 token exchange Source.
type ExchangeConfig struct {
	// TokenURL is the provider's token endpoint (absolute http or https URL).
	TokenURL string
	// ClientID and ClientSecret authenticate the gateway to the token
	// endpoint (client_secret_basic, RFC 6749 section 2.3.1). The secret is
	// the value itself, already read from its file or variable.
	ClientID, ClientSecret string
	// Audience and Resource are the RFC 8693 audience and resource
	// parameters (the upstream's identifier and URI); either may be "".
	Audience, Resource string
	// Scopes are requested in the scope parameter; empty sends none.
	Scopes []string
	// Subject is SubjectAccessToken (default when "") or SubjectAssertion.
	Subject string
	// HTTPClient sends the token requests (default: a client with
	// DefaultExchangeTimeout). Redirects are never followed.
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CacheSize bounds the cached tokens (default DefaultExchangeCacheSize;
	// negative disables the cache).
	CacheSize int
	// Observe, when set, is told the result of each Header call
	// (ResultHit, ResultFetched, ResultRefused, ResultError).
	Observe Observer
}

// Exchange is the Source of an upstream that needs a token exchanged on
// behalf of the caller (RFC 8693). Each exchanged token is cached per
// (tenant, subject, effective rights, identity of the subject token) until
// shortly before it expires; it is never shared beyond that key. The
// identity of a JWT subject token is its claims without the per-issue ones
// (exp, iat, nbf, jti, auth_time), so a refreshed token of the same
// principal, client, scopes and audience reuses the exchanged token; an
// opaque subject token is its own identity.
type Exchange struct {
	cfg       ExchangeConfig
	client    *http.Client
	form      url.Values // the constant part of every request
	tokenType string     // subject_token_type
	ignore    map[string]bool
	cacheSize int

	group singleflight.Group

	mu       sync.Mutex
	cache    map[string]*exchanged
	identity map[string]string // subject token -> identity digest
}

// exchanged is a cached token.
type exchanged struct {
	// header is {"authorization": {"Bearer " + token}}: shared, read only.
	header     map[string][]string
	reuseUntil time.Time
}

var _ Source = (*Exchange)(nil)

// NewExchange returns an Exchange for cfg, or an error naming the
// configuration problem (never the secret).
func NewExchange(cfg ExchangeConfig) (*Exchange, error) {
	u, err := url.Parse(cfg.TokenURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return nil, errors.New("upstreamauth: token exchange: token_url must be an absolute http or https URL without fragment")
	}
	if cfg.ClientID == "" {
		return nil, errors.New("upstreamauth: token exchange: client_id is required")
	}
	if cfg.ClientSecret == "" {
		return nil, errors.New("upstreamauth: token exchange: the client secret is empty")
	}
	e := &Exchange{cfg: cfg, cache: map[string]*exchanged{}, identity: map[string]string{}}
	e.ignore = map[string]bool{"exp": true, "iat": true, "nbf": true, "jti": true, "auth_time": true}
	switch cfg.Subject {
	case "", SubjectAccessToken:
		e.cfg.Subject = SubjectAccessToken
		e.tokenType = TokenTypeAccessToken
	case SubjectAssertion:
		e.tokenType = TokenTypeJWT
		// An assertion names the connection it was signed for; the
		// principal is the same on every connection.
		e.ignore["connection"] = true
	default:
		return nil, fmt.Errorf("upstreamauth: token exchange: subject %q: must be %q or %q", cfg.Subject, SubjectAccessToken, SubjectAssertion)
	}
	switch {
	case cfg.CacheSize == 0:
		e.cacheSize = DefaultExchangeCacheSize
	case cfg.CacheSize > 0:
		e.cacheSize = cfg.CacheSize
	}
	if e.cfg.Now == nil {
		e.cfg.Now = time.Now
	}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		e.client = &c
	} else {
		e.client = &http.Client{Timeout: DefaultExchangeTimeout}
	}
	// A token request carries the client secret and the subject token:
	// never to another location.
	e.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

	e.form = url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token_type":   {e.tokenType},
		"requested_token_type": {TokenTypeAccessToken},
	}
	if cfg.Audience != "" {
		e.form.Set("audience", cfg.Audience)
	}
	if cfg.Resource != "" {
		e.form.Set("resource", cfg.Resource)
	}
	if len(cfg.Scopes) > 0 {
		e.form.Set("scope", strings.Join(cfg.Scopes, " "))
	}
	return e, nil
}

// Kind is KindTokenExchange.
func (e *Exchange) Kind() string { return KindTokenExchange }

// Header returns {"authorization": {"Bearer <exchanged token>"}} for c
// (shared: callers must not change it), from the cache or from one token
// request per key at a time. A refusal
// of the provider, or a caller without the configured subject token, is
// an error wrapping ErrRefused; an unreachable provider or a malformed
// answer is another error. There is no fallback in either case.
func (e *Exchange) Header(ctx context.Context, c *Caller) (map[string][]string, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: token exchange: no caller", ErrRefused)
	}
	subject := c.AccessToken
	if e.cfg.Subject == SubjectAssertion {
		subject = c.Assertion
	}
	if subject == "" {
		if e.cfg.Subject == SubjectAssertion {
			return nil, fmt.Errorf("%w: token exchange needs mcpgate's identity assertion of the caller, and assertions are off", ErrRefused)
		}
		return nil, fmt.Errorf("%w: token exchange needs the caller's OAuth access token; this caller used a gateway-issued token (exchange the assertion instead: subject assertion)", ErrRefused)
	}
	var buf [256]byte
	kb := e.appendKey(buf[:0], c, subject)
	now := e.cfg.Now()
	e.mu.Lock()
	if t, ok := e.cache[string(kb)]; ok && now.Before(t.reuseUntil) {
		e.mu.Unlock()
		e.cfg.Observe.observe(ResultHit)
		return t.header, nil
	}
	e.mu.Unlock()
	key := string(kb)

	ch := e.group.DoChan(key, func() (any, error) {
		// Another caller may have stored the token meanwhile.
		e.mu.Lock()
		if t, ok := e.cache[key]; ok && e.cfg.Now().Before(t.reuseUntil) {
			e.mu.Unlock()
			return t, nil
		}
		e.mu.Unlock()
		// The request is shared: it outlives a canceled first caller.
		t, err := e.fetch(context.WithoutCancel(ctx), subject)
		if err != nil {
			return nil, err
		}
		e.store(key, t)
		return t, nil
	})
	select {
	case r := <-ch:
		switch {
		case errors.Is(r.Err, ErrRefused):
			e.cfg.Observe.observe(ResultRefused)
			return nil, r.Err
		case r.Err != nil:
			e.cfg.Observe.observe(ResultError)
			return nil, r.Err
		}
		e.cfg.Observe.observe(ResultFetched)
		return r.Val.(*exchanged).header, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Refused drops the cached token of c, so that the next Header exchanges
// again. It reports whether a token was dropped.
func (e *Exchange) Refused(c *Caller) bool {
	if c == nil {
		return false
	}
	subject := c.AccessToken
	if e.cfg.Subject == SubjectAssertion {
		subject = c.Assertion
	}
	if subject == "" {
		return false
	}
	key := string(e.appendKey(nil, c, subject))
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.cache[key]; !ok {
		return false
	}
	delete(e.cache, key)
	return true
}

func (e *Exchange) store(key string, t *exchanged) {
	if e.cacheSize == 0 || !e.cfg.Now().Before(t.reuseUntil) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.cache) >= e.cacheSize {
		now := e.cfg.Now()
		for k, v := range e.cache {
			if !now.Before(v.reuseUntil) {
				delete(e.cache, k)
			}
		}
		// Still full: drop arbitrary entries (map order is random).
		for k := range e.cache {
			if len(e.cache) < e.cacheSize {
				break
			}
			delete(e.cache, k)
		}
	}
	e.cache[key] = t
}

// appendKey appends to b the cache key of c with subject token subject:
// length-prefixed tenant, subject, sorted rights and the subject token's
// identity.
func (e *Exchange) appendKey(b []byte, c *Caller, subject string) []byte {
	rights := c.Rights
	if !slices.IsSorted(rights) {
		rights = slices.Clone(rights)
		slices.Sort(rights)
	}
	id := e.identityOf(subject)
	b = appendField(b, c.Tenant)
	b = appendField(b, c.Subject)
	b = strconv.AppendInt(b, int64(len(rights)), 10)
	b = append(b, '[')
	for _, r := range rights {
		b = appendField(b, r)
	}
	return appendField(b, id)
}

func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// identityOf returns the identity digest of a subject token, memoised per
// token value (bounded like the cache).
func (e *Exchange) identityOf(token string) string {
	e.mu.Lock()
	id, ok := e.identity[token]
	e.mu.Unlock()
	if ok {
		return id
	}
	id = e.digest(token)
	if e.cacheSize > 0 {
		e.mu.Lock()
		if len(e.identity) >= e.cacheSize {
			clear(e.identity)
		}
		e.identity[token] = id
		e.mu.Unlock()
	}
	return id
}

// digest hashes the claims of a JWT without the ignored ones, in name
// order; anything else (an opaque token, a JWT that does not decode) is
// hashed whole, so it matches only itself.
func (e *Exchange) digest(token string) string {
	h := sha256.New()
	parts := strings.Split(token, ".")
	var claims map[string]json.RawMessage
	if len(parts) == 3 {
		if payload, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			if json.Unmarshal(payload, &claims) != nil {
				claims = nil
			}
		}
	}
	if claims == nil {
		h.Write([]byte("token\x00"))
		h.Write([]byte(token))
		return string(h.Sum(nil))
	}
	names := make([]string, 0, len(claims))
	for k := range claims {
		if !e.ignore[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	h.Write([]byte("claims\x00"))
	for _, k := range names {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(claims[k]), claims[k])
	}
	return string(h.Sum(nil))
}

// tokenResponse is the RFC 8693 section 2.2.1 answer; errorResponse is the
// RFC 6749 section 5.2 one.
type tokenResponse struct {
	AccessToken     string      `json:"access_token"`
	IssuedTokenType string      `json:"issued_token_type"`
	TokenType       string      `json:"token_type"`
	ExpiresIn       json.Number `json:"expires_in"`
}

type errorResponse struct {
	Error       string `json:"error"`
	Description string `json:"error_description"`
}

// fetch runs one token exchange for subject.
func (e *Exchange) fetch(ctx context.Context, subject string) (*exchanged, error) {
	form := make(url.Values, len(e.form)+1)
	for k, v := range e.form {
		form[k] = v
	}
	form.Set("subject_token", subject)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, errors.New("upstreamauth: token exchange: cannot build the request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(e.cfg.ClientID), url.QueryEscape(e.cfg.ClientSecret))
	sent := e.cfg.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		// The error names the URL and the cause, never the form.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("upstreamauth: token exchange: token endpoint unreachable: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, exchangeMaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("upstreamauth: token exchange: reading the answer: %w", err)
	}
	if len(body) > exchangeMaxBody {
		return nil, fmt.Errorf("upstreamauth: token exchange: answer larger than %d bytes", exchangeMaxBody)
	}
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		var er errorResponse
		_ = json.Unmarshal(body, &er)
		code := sanitize(er.Error, 64)
		if code == "" {
			code = "no error code"
		}
		detail := ""
		if d := er.Description; d != "" && !strings.Contains(d, subject) {
			if d = sanitize(d, exchangeMaxDetail); d != "" {
				detail = ": " + d
			}
		}
		return nil, fmt.Errorf("%w: token exchange: HTTP %d %s%s", ErrRefused, resp.StatusCode, code, detail)
	default:
		return nil, fmt.Errorf("upstreamauth: token exchange: token endpoint answered HTTP %d", resp.StatusCode)
	}

	var tr tokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		return nil, errors.New("upstreamauth: token exchange: the answer is not a JSON token response")
	}
	if tr.AccessToken == "" {
		return nil, errors.New("upstreamauth: token exchange: the answer has no access_token")
	}
	if !validBearer(tr.AccessToken) {
		return nil, errors.New("upstreamauth: token exchange: the access_token is not a valid bearer token")
	}
	switch tr.IssuedTokenType {
	case TokenTypeAccessToken, TokenTypeJWT:
	case "":
		return nil, errors.New("upstreamauth: token exchange: the answer has no issued_token_type")
	default:
		return nil, fmt.Errorf("upstreamauth: token exchange: issued_token_type %q is not an access token", sanitize(tr.IssuedTokenType, 80))
	}
	switch {
	case strings.EqualFold(tr.TokenType, "Bearer"):
	case tr.TokenType == "N_A":
		// RFC 8693 section 2.2.1: the issued token is not usable as an
		// access token.
		return nil, errors.New("upstreamauth: token exchange: token_type N_A: the issued token is not usable as an access token")
	default:
		return nil, fmt.Errorf("upstreamauth: token exchange: token_type %q: only Bearer is supported", sanitize(tr.TokenType, 32))
	}
	t := &exchanged{header: map[string][]string{"authorization": []string{"Bearer " + tr.AccessToken}[:1:1]}}
	if tr.ExpiresIn == "" {
		t.reuseUntil = sent.Add(exchangeNoExpiryTTL)
		return t, nil
	}
	secs, err := tr.ExpiresIn.Float64()
	if err != nil || secs > 1e9 {
		return nil, errors.New("upstreamauth: token exchange: expires_in is not a number of seconds")
	}
	// Drop the token a tenth of its lifetime (at most exchangeMaxSkew)
	// before it expires, counted from when the request was sent; an
	// already expired token is used for this request only.
	life := time.Duration(secs * float64(time.Second))
	t.reuseUntil = sent.Add(life - min(life/10, exchangeMaxSkew))
	return t, nil
}

// validBearer reports whether s is an RFC 6750 b64token (section 2.1), so
// it can go into a header field as it is.
func validBearer(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}

// sanitize keeps printable ASCII of s, at most n bytes.
func sanitize(s string, n int) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < n; i++ {
		if c := s[i]; c >= 0x20 && c < 0x7f {
			b.WriteByte(c)
		}
	}
	return strings.TrimSpace(b.String())
}
