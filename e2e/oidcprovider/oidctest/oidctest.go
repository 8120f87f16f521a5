// Package oidctest starts the e2e OpenID provider (the e2e/oidcprovider
// binary) as its own process for tests, and offers small clients for its
// grants and admin API.
//
//	p := oidctest.Start(t)
//	tok := p.MustClientCredentials(t, provider.ClientGateway, provider.ClientGatewaySecret,
//		"https://mcp.example.com/mcp", "tools:read")
//
// The binary is built once per test process with the go command (or taken
// from $MCPGATE_OIDCPROVIDER_BIN), started on a free loopback port, and
// stopped when the test ends.
package oidctest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/e2e/oidcprovider/provider"
)

// EnvBinary names a prebuilt oidcprovider binary to use instead of building one.
const EnvBinary = "MCPGATE_OIDCPROVIDER_BIN"

const readyPrefix = "oidcprovider ready "

// Provider is a running provider process.
type Provider struct {
	// Issuer is the issuer URL, e.g. http://127.0.0.1:40123.
	Issuer string
	// HTTPClient talks to the provider.
	HTTPClient *http.Client

	cmd      *exec.Cmd
	stderr   *lockedBuffer
	stopOnce sync.Once
	waitErr  chan error
}

type options struct {
	cfg  *provider.Config
	args []string
}

// Option configures Start.
type Option func(*options)

// WithConfig runs the provider with cfg (written to a JSON file) instead of
// provider.DefaultConfig.
func WithConfig(cfg *provider.Config) Option { return func(o *options) { o.cfg = cfg } }

// WithArgs adds command-line flags, e.g. "-token-lifetime", "2s".
func WithArgs(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

var build struct {
	once sync.Once
	path string
	err  error
}

// Binary returns the path of the oidcprovider binary, building it on first use.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		return p, nil
	}
	build.once.Do(func() { build.path, build.err = buildBinary() })
	return build.path, build.err
}

func buildBinary() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("oidctest: cannot locate the oidcprovider sources")
	}
	srcDir := filepath.Dir(filepath.Dir(file))
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	dir = filepath.Join(dir, "mcpgate-e2e")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, "oidcprovider")
	tmp := fmt.Sprintf("%s.tmp-%d", final, os.Getpid())
	// go test puts its own GOROOT/bin first in PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("oidctest: %w", err)
	}
	cmd := exec.Command(goBin, "build", "-o", tmp, ".")
	cmd.Dir = srcDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("oidctest: go build oidcprovider: %w\n%s", err, out)
	}
	// Rename is atomic, so test processes building at once never run a
	// half-written binary.
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	return final, nil
}

// Start builds (once) and starts a provider, waits for its ready line and
// stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Provider {
	t.Helper()
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := Binary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"-addr", "127.0.0.1:0"}, o.args...)
	if o.cfg != nil {
		b, err := json.MarshalIndent(o.cfg, "", "  ")
		if err != nil {
			t.Fatalf("oidctest: marshal config: %v", err)
		}
		path := filepath.Join(t.TempDir(), "oidcprovider.json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-config", path)
	}

	p := &Provider{
		HTTPClient: &http.Client{Timeout: 10 * time.Second},
		stderr:     &lockedBuffer{},
		waitErr:    make(chan error, 1),
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("oidctest: start %s: %v", bin, err)
	}
	go func() { p.waitErr <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() && p.stderr.String() != "" {
			t.Logf("oidcprovider stderr:\n%s", p.stderr.String())
		}
	})

	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, readyPrefix) {
				ready <- line
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		for _, f := range strings.Fields(strings.TrimPrefix(line, readyPrefix)) {
			if v, ok := strings.CutPrefix(f, "issuer="); ok {
				p.Issuer = v
			}
		}
		if p.Issuer == "" {
			t.Fatalf("oidctest: ready line without issuer: %q", line)
		}
	case err := <-p.waitErr:
		p.waitErr <- err
		t.Fatalf("oidctest: oidcprovider exited before ready: %v\n%s", err, p.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("oidctest: oidcprovider not ready after 30s\n%s", p.stderr.String())
	}
	return p
}

// Stop stops the provider (SIGINT, then SIGKILL after 5s). It is safe to
// call more than once; Start registers it as a cleanup.
func (p *Provider) Stop() {
	p.stopOnce.Do(func() {
		_ = p.cmd.Process.Signal(os.Interrupt)
		select {
		case err := <-p.waitErr:
			p.waitErr <- err
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			p.waitErr <- <-p.waitErr
		}
	})
}

// TokenEndpoint, IntrospectionEndpoint, AuthorizationEndpoint and JWKSURI
// are the provider's endpoint URLs.
func (p *Provider) TokenEndpoint() string         { return p.Issuer + "/oauth/token" }
func (p *Provider) IntrospectionEndpoint() string { return p.Issuer + "/oauth/introspect" }
func (p *Provider) AuthorizationEndpoint() string { return p.Issuer + "/authorize" }
func (p *Provider) JWKSURI() string               { return p.Issuer + "/keys" }

// TokenResponse is a successful token endpoint answer.
type TokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	IDToken     string `json:"id_token"`
}

// OAuthError is an error answer of the token or authorization endpoint.
type OAuthError struct {
	Status      int    `json:"-"`
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *OAuthError) Error() string {
	return fmt.Sprintf("oauth error %d %s: %s", e.Status, e.Code, e.Description)
}

// ClientCredentials runs the client_credentials grant.
func (p *Provider) ClientCredentials(ctx context.Context, clientID, secret string, scopes []string, resources ...string) (*TokenResponse, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	for _, r := range resources {
		form.Add("resource", r)
	}
	return p.token(ctx, clientID, secret, form)
}

// MustClientCredentials returns an access token from the client_credentials
// grant for one resource, failing the test on error.
func (p *Provider) MustClientCredentials(t testing.TB, clientID, secret, resource string, scopes ...string) string {
	t.Helper()
	var resources []string
	if resource != "" {
		resources = []string{resource}
	}
	tr, err := p.ClientCredentials(context.Background(), clientID, secret, scopes, resources...)
	if err != nil {
		t.Fatalf("client_credentials for %s: %v", clientID, err)
	}
	return tr.AccessToken
}

// TokenExchangeRequest is an RFC 8693 token exchange request.
type TokenExchangeRequest struct {
	SubjectToken string
	// SubjectTokenType defaults to urn:ietf:params:oauth:token-type:access_token.
	SubjectTokenType string
	Audiences        []string
	Resources        []string
	Scopes           []string
}

// TokenExchangeResponse is a successful RFC 8693 answer.
type TokenExchangeResponse struct {
	AccessToken     string `json:"access_token"`
	IssuedTokenType string `json:"issued_token_type"`
	TokenType       string `json:"token_type"`
	ExpiresIn       int64  `json:"expires_in"`
	Scope           string `json:"scope"`
}

// TokenExchange runs the RFC 8693 token exchange grant as a confidential
// client (client_secret_basic).
func (p *Provider) TokenExchange(ctx context.Context, clientID, secret string, r TokenExchangeRequest) (*TokenExchangeResponse, error) {
	typ := r.SubjectTokenType
	if typ == "" {
		typ = "urn:ietf:params:oauth:token-type:access_token"
	}
	form := url.Values{
		"grant_type":           {provider.GrantTokenExchange},
		"subject_token":        {r.SubjectToken},
		"subject_token_type":   {typ},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:access_token"},
	}
	for _, a := range r.Audiences {
		form.Add("audience", a)
	}
	for _, res := range r.Resources {
		form.Add("resource", res)
	}
	if len(r.Scopes) > 0 {
		form.Set("scope", strings.Join(r.Scopes, " "))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	var tr TokenExchangeResponse
	if err := p.do(req, &tr); err != nil {
		return nil, err
	}
	return &tr, nil
}

func (p *Provider) token(ctx context.Context, clientID, secret string, form url.Values) (*TokenResponse, error) {
	if secret == "" {
		form.Set("client_id", clientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.TokenEndpoint(), strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if secret != "" {
		req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	}
	var tr TokenResponse
	if err := p.do(req, &tr); err != nil {
		return nil, err
	}
	return &tr, nil
}

func (p *Provider) do(req *http.Request, v any) error {
	resp, err := p.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		oe := &OAuthError{Status: resp.StatusCode}
		if json.Unmarshal(body, oe) != nil || oe.Code == "" {
			oe.Description = strings.TrimSpace(string(body))
		}
		return oe
	}
	if v == nil {
		return nil
	}
	return json.Unmarshal(body, v)
}

// CodeFlow describes an authorization code flow with PKCE.
type CodeFlow struct {
	ClientID     string
	ClientSecret string // empty for a public client
	RedirectURI  string
	Scopes       []string
	// Resources are RFC 8707 resource indicators sent to the authorization
	// endpoint; TokenResources, if set, are sent to the token endpoint.
	Resources      []string
	TokenResources []string
	// LoginHint picks the configured user to log in (default: the
	// auto-approved user).
	LoginHint string
	// CodeVerifier overrides the PKCE verifier sent to the token endpoint
	// (the challenge is always made from a fresh random verifier), to test
	// a wrong verifier.
	CodeVerifier string
}

// NewPKCE returns a random code verifier and its S256 challenge.
func NewPKCE() (verifier, challenge string) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	verifier = base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// Authorize runs the front-channel part of a code flow with an http.Client
// (authorize, auto-approving login, callback) and returns the code from the
// redirect to the client, with the verifier of the challenge it sent.
func (p *Provider) Authorize(ctx context.Context, f CodeFlow) (code, verifier string, err error) {
	verifier, challenge := NewPKCE()
	state := base64.RawURLEncoding.EncodeToString([]byte(time.Now().String()))
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {f.ClientID},
		"redirect_uri":          {f.RedirectURI},
		"scope":                 {strings.Join(f.Scopes, " ")},
		"state":                 {state},
		"code_challenge":        {challenge},
		"code_challenge_method": {"S256"},
	}
	for _, r := range f.Resources {
		q.Add("resource", r)
	}
	if f.LoginHint != "" {
		q.Set("login_hint", f.LoginHint)
	}
	browser := &http.Client{
		Timeout: p.HTTPClient.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), f.RedirectURI) || len(via) > 10 {
				return http.ErrUseLastResponse
			}
			return nil
		},
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.AuthorizationEndpoint()+"?"+q.Encode(), nil)
	if err != nil {
		return "", "", err
	}
	resp, err := browser.Do(req)
	if err != nil {
		return "", "", err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, f.RedirectURI) {
		return "", "", &OAuthError{Status: resp.StatusCode, Description: strings.TrimSpace(string(body))}
	}
	u, err := url.Parse(loc)
	if err != nil {
		return "", "", err
	}
	if e := u.Query().Get("error"); e != "" {
		return "", "", &OAuthError{Status: resp.StatusCode, Code: e, Description: u.Query().Get("error_description")}
	}
	if got := u.Query().Get("state"); got != state {
		return "", "", fmt.Errorf("state mismatch: sent %q, got %q", state, got)
	}
	return u.Query().Get("code"), verifier, nil
}

// Exchange redeems an authorization code at the token endpoint.
func (p *Provider) Exchange(ctx context.Context, f CodeFlow, code, verifier string) (*TokenResponse, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {f.RedirectURI},
		"code_verifier": {verifier},
	}
	for _, r := range f.TokenResources {
		form.Add("resource", r)
	}
	return p.token(ctx, f.ClientID, f.ClientSecret, form)
}

// RunCodeFlow runs a whole authorization code + PKCE flow.
func (p *Provider) RunCodeFlow(ctx context.Context, f CodeFlow) (*TokenResponse, error) {
	code, verifier, err := p.Authorize(ctx, f)
	if err != nil {
		return nil, err
	}
	if f.CodeVerifier != "" {
		verifier = f.CodeVerifier
	}
	return p.Exchange(ctx, f, code, verifier)
}

// Introspect calls the RFC 7662 endpoint and returns the decoded answer.
func (p *Provider) Introspect(ctx context.Context, clientID, secret, token string) (map[string]any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.IntrospectionEndpoint(),
		strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	var out map[string]any
	return out, p.do(req, &out)
}

// Revoke revokes a token (RFC 7009) as the client it was issued to.
func (p *Provider) Revoke(ctx context.Context, clientID, secret, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.Issuer+"/revoke",
		strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret))
	return p.do(req, nil)
}

// Rotate rotates the signing keys; with retire the previous keys leave the
// JWKS at once.
func (p *Provider) Rotate(t testing.TB, retire bool) provider.RotateResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s%s?retire=%t", p.Issuer, provider.PathRotate, retire), nil)
	if err != nil {
		t.Fatal(err)
	}
	var res provider.RotateResult
	if err := p.do(req, &res); err != nil {
		t.Fatalf("rotate keys: %v", err)
	}
	return res
}

// Stats returns the provider's request counters.
func (p *Provider) Stats(t testing.TB) provider.Stats {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, p.Issuer+provider.PathStats, nil)
	if err != nil {
		t.Fatal(err)
	}
	var s provider.Stats
	if err := p.do(req, &s); err != nil {
		t.Fatalf("stats: %v", err)
	}
	return s
}

// lockedBuffer collects the provider's stderr.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
