package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgate/mcpgate/config"
	"github.com/mcpgate/mcpgate/internal/stdio"
	"github.com/mcpgate/mcpgate/upstreamauth"
)

// Bridges are the running stdio upstreams (upstreams[].command) of a
// configuration, by upstream name: each child served on loopback by its
// bridge, whose URL stands for the upstream's url everywhere else.
type Bridges struct {
	by map[string]*stdio.Bridge
}

// StartBridges starts a bridge for every upstream of cfg with a command;
// none when it has none. metrics may be nil (then nothing is counted).
func StartBridges(cfg *config.Config, log *slog.Logger, metrics *stdio.Metrics) (*Bridges, error) {
	bs := &Bridges{by: map[string]*stdio.Bridge{}}
	for _, u := range cfg.Upstreams {
		cmd := u.Command
		if cmd == nil {
			continue
		}
		b, err := stdio.Start(stdio.Options{
			Upstream: u.Name, Argv: cmd.Argv, Dir: cmd.Dir,
			Environ:         func() ([]string, error) { return cmd.Environ(os.Getenv) },
			Listen:          cmd.Listen,
			StartTimeout:    cmd.StartTimeout.D(),
			StopGrace:       cmd.StopGrace.D(),
			MaxMessageBytes: max(int(cfg.Limits.MaxBodyBytes), int(cfg.Limits.MaxSSEEventBytes)),
			Version:         buildVersion(),
			Logger:          log,
			Metrics:         metrics,
		})
		if err != nil {
			bs.Close(context.Background())
			return nil, err
		}
		log.Info("stdio upstream", slog.Any("upstream", u), slog.String("bridge", b.URL()))
		bs.by[u.Name] = b
	}
	return bs, nil
}

// Resolve returns cfg with the url of every stdio upstream set to its
// bridge's (a copy when there is one; cfg itself otherwise).
func (bs *Bridges) Resolve(cfg *config.Config) *config.Config {
	if bs == nil || len(bs.by) == 0 {
		return cfg
	}
	c := *cfg
	c.Upstreams = append([]config.Upstream(nil), cfg.Upstreams...)
	for i, u := range c.Upstreams {
		if b := bs.by[u.Name]; b != nil && u.Command != nil {
			c.Upstreams[i].URL = b.URL()
		}
	}
	return &c
}

// Header returns the header fields a request to upstream's bridge needs
// (its secret), nil when upstream is not a stdio upstream.
func (bs *Bridges) Header(upstream string) http.Header {
	if bs == nil || bs.by[upstream] == nil {
		return nil
	}
	return http.Header{http.CanonicalHeaderKey(stdio.SecretHeader): {bs.by[upstream].Secret()}}
}

// WithHeader returns next (the header fields of a listing of upstream,
// nil for none) with the bridge's secret added when upstream is a stdio
// upstream.
func (bs *Bridges) WithHeader(upstream string, next func(context.Context) (http.Header, error)) func(context.Context) (http.Header, error) {
	secret := bs.Header(upstream)
	if secret == nil {
		return next
	}
	return func(ctx context.Context) (http.Header, error) {
		h := http.Header{}
		if next != nil {
			var err error
			if h, err = next(ctx); err != nil {
				return nil, err
			}
			h = h.Clone()
		}
		for k, v := range secret {
			h[k] = v
		}
		return h, nil
	}
}

// WaitReady waits until the first run of every child answered
// initialize or failed to (within its start_timeout); the upstreams not
// ready then are named in the error (they keep being restarted).
func (bs *Bridges) WaitReady(ctx context.Context, cfg *config.Config) error {
	if bs == nil {
		return nil
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, u := range cfg.Upstreams {
		b := bs.by[u.Name]
		if b == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-b.Tried():
			case <-ctx.Done():
			}
			if ok, why := b.Ready(); !ok {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stdio upstream %q: %s", u.Name, why))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// notReady names the first stdio upstream that is not ready and why; ""
// when all are.
func (bs *Bridges) notReady() string {
	if bs == nil {
		return ""
	}
	for name, b := range bs.by {
		if ok, why := b.Ready(); !ok {
			return fmt.Sprintf("stdio upstream %q: %s", name, why)
		}
	}
	return ""
}

// Close stops every child and waits for them until ctx ends.
func (bs *Bridges) Close(ctx context.Context) error {
	if bs == nil {
		return nil
	}
	var errs []error
	for _, b := range bs.by {
		errs = append(errs, b.Close(ctx))
	}
	return errors.Join(errs...)
}

// addCredentials gives every stdio upstream's requests, forwarded and
// listed, its bridge's secret as the upstream's own credential.
func (bs *Bridges) addCredentials(uc *upstreamCredentials) {
	if bs == nil {
		return
	}
	for name, b := range bs.by {
		s := bridgeSecret{value: b.Secret()}
		uc.calls[name], uc.discovery[name] = s, s
	}
}

// bridgeSecret is the credential of a stdio upstream: its bridge's
// per-process secret in stdio.SecretHeader. The pipeline sends it like a
// static secret (and removes a client-sent copy of the field).
type bridgeSecret struct{ value string }

var _ upstreamauth.Source = bridgeSecret{}

func (bridgeSecret) Kind() string       { return upstreamauth.KindStatic }
func (bridgeSecret) HeaderName() string { return stdio.SecretHeader }
func (s bridgeSecret) Header(context.Context, *upstreamauth.Caller) (map[string][]string, error) {
	return map[string][]string{stdio.SecretHeader: {s.value}}, nil
}
func (bridgeSecret) Refused(*upstreamauth.Caller) bool { return false }

// newStdioMetrics registers the bridges' metrics.
func newStdioMetrics(reg prometheus.Registerer) *stdio.Metrics { return stdio.NewMetrics(reg) }
