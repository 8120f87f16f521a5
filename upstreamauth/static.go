package upstreamauth

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
)

// Results of credential requests, the values of the metrics label
// "result" of mcpgate_upstream_credential_requests_total.
const (
	ResultHit     = "hit"     // a cached or static credential was used
	ResultFetched = "fetched" // a token was fetched from the token endpoint
	ResultRefused = "refused" // the token endpoint or the upstream refused
	ResultError   = "error"   // the credential could not be read or fetched
)

// Observer counts credential requests by result (Result* constants); nil
// counts nothing.
type Observer func(result string)

func (o Observer) observe(result string) {
	if o != nil {
		o(result)
	}
}

// StaticOptions configure a Static source.
type StaticOptions struct {
	// Upstream names the upstream in errors and logs.
	Upstream string
	// Header is the field name (any case); "authorization" with BasicUser.
	Header string
	// Scheme is written before the secret with one space ("Bearer"); ""
	// for none.
	Scheme string
	// Value is where the secret is read (not with BasicUser).
	Value SecretRef
	// BasicUser and Password are HTTP basic authentication (RFC 7617).
	BasicUser string
	Password  SecretRef
	Observe   Observer
	Logger    *slog.Logger
}

// Static is a static secret in one header field: an API key, a fixed
// bearer token, basic auth. It is read once by NewStatic and again by
// Reload (SIGHUP) and, with Watch, whenever its file changes; a read that
// fails keeps the previous secret.
type Static struct {
	o    StaticOptions
	name string
	// cur holds the header Header returns: shared, read only.
	cur atomic.Pointer[map[string][]string]
}

var _ Source = (*Static)(nil)

// NewStatic reads the secret and returns the source.
func NewStatic(o StaticOptions) (*Static, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Static{o: o, name: strings.ToLower(o.Header)}
	if o.BasicUser != "" && s.name == "" {
		s.name = "authorization"
	}
	if s.name == "" {
		return nil, errors.New("upstreamauth: static credential of upstream " + quote(o.Upstream) + " has no header name")
	}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// HeaderName is the field the secret travels in (lower case).
func (s *Static) HeaderName() string { return s.name }

// Reload rereads the secret; on failure the previous one stays in use.
func (s *Static) Reload() error {
	v, err := s.value()
	if err != nil {
		return err
	}
	h := map[string][]string{s.name: []string{v}[:1:1]}
	if old := s.cur.Load(); old != nil && (*old)[s.name][0] == v {
		return nil
	}
	s.cur.Store(&h)
	return nil
}

func (s *Static) value() (string, error) {
	if s.o.BasicUser != "" {
		pw, err := s.o.Password.Read()
		if err != nil {
			return "", s.wrap(err)
		}
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(s.o.BasicUser+":"+pw)), nil
	}
	v, err := s.o.Value.Read()
	if err != nil {
		return "", s.wrap(err)
	}
	if s.o.Scheme != "" {
		v = s.o.Scheme + " " + v
	}
	return v, nil
}

func (s *Static) wrap(err error) error {
	return &sourceError{upstream: s.o.Upstream, err: err}
}

// Watch rereads the secret whenever its file changes, until ctx ends (no
// effect for a secret in an environment variable).
func (s *Static) Watch(ctx context.Context) error {
	var files []string
	for _, r := range []SecretRef{s.o.Value, s.o.Password} {
		if r.File != "" {
			files = append(files, r.File)
		}
	}
	return watchFiles(ctx, files, func() {
		if err := s.Reload(); err != nil {
			s.o.Logger.Warn("upstream credential cannot be reread; the previous one stays in use", "upstream", s.o.Upstream, "error", err)
		}
	}, s.o.Logger)
}

// Kind implements Source.
func (s *Static) Kind() string { return KindStatic }

// Header implements Source. The map is shared: callers must not change it.
func (s *Static) Header(context.Context, *Caller) (map[string][]string, error) {
	s.o.Observe.observe(ResultHit)
	return *s.cur.Load(), nil
}

// Refused implements Source: a static secret has nothing to refresh.
func (s *Static) Refused(*Caller) bool {
	s.o.Observe.observe(ResultRefused)
	return false
}

// LogValue names the upstream and the field, never the secret.
func (s *Static) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", KindStatic), slog.String("upstream", s.o.Upstream), slog.String("header", s.name))
}

// sourceError is an error of a Source naming its upstream.
type sourceError struct {
	upstream string
	err      error
}

func (e *sourceError) Error() string {
	return "credential of upstream " + quote(e.upstream) + ": " + e.err.Error()
}

func (e *sourceError) Unwrap() error { return e.err }

func quote(s string) string { return `"` + s + `"` }
