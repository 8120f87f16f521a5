package provider

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// ReadyPrefix starts the line printed once the provider serves.
const ReadyPrefix = "oidcprovider ready "

// Run is the oidcprovider command: it parses the flags (problems are
// reported together), listens, prints the ready line to stdout and serves
// until ctx ends.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("oidcprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:0", "listen address (port 0 picks a free port)")
	issuer := fs.String("issuer", "", "issuer URL (default http://<listen address>)")
	configPath := fs.String("config", "", "JSON config file with clients and users (default: built-in config)")
	lifetime := fs.Duration("token-lifetime", 0, "default access token lifetime (overrides the config's token_lifetime)")
	signingAlg := fs.String("signing-alg", "", "default access token signing algorithm: RS256, PS256, ES256 or EdDSA (overrides the config)")
	logLevel := fs.String("log-level", "warn", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		errs = append(errs, fmt.Errorf("-log-level: %w", err))
	}
	if *lifetime < 0 {
		errs = append(errs, errors.New("-token-lifetime: must be positive"))
	}
	var cfg *Config
	if *configPath != "" {
		var err error
		if cfg, err = LoadConfig(*configPath); err != nil {
			errs = append(errs, err)
		}
	} else {
		cfg = DefaultConfig()
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if *lifetime > 0 {
		cfg.TokenLifetime = Duration(*lifetime)
	}
	if *signingAlg != "" {
		// Clients that had the default follow the new default.
		for i := range cfg.Clients {
			if cfg.Clients[i].SigningAlg == cfg.SigningAlg {
				cfg.Clients[i].SigningAlg = *signingAlg
			}
		}
		cfg.SigningAlg = *signingAlg
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	cfg.Issuer = *issuer
	if cfg.Issuer == "" {
		cfg.Issuer = "http://" + ln.Addr().String()
	}
	p, err := New(cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "%sissuer=%s addr=%s\n", ReadyPrefix, p.Issuer(), ln.Addr())

	select {
	case err := <-serveErr:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
