package upstreamauth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// SecretRef says where a secret is read: a file (surrounding white space
// trimmed) or an environment variable. Its text and log value name the
// place, never the secret.
type SecretRef struct {
	File string
	Env  string
}

// String names where the secret is read.
func (r SecretRef) String() string {
	if r.File != "" {
		return "file " + r.File
	}
	return "environment variable " + r.Env
}

// LogValue implements slog.LogValuer.
func (r SecretRef) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Read returns the secret. Its errors name the place and why it cannot be
// read, never any part of the content.
func (r SecretRef) Read() (string, error) {
	var v string
	switch {
	case r.File != "":
		b, err := os.ReadFile(r.File)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is named below
			}
			return "", fmt.Errorf("upstreamauth: %s cannot be read: %w", r, err)
		}
		v = strings.TrimSpace(string(b))
	case r.Env != "":
		v = strings.TrimSpace(os.Getenv(r.Env))
	default:
		return "", errors.New("upstreamauth: no secret configured")
	}
	if v == "" {
		return "", fmt.Errorf("upstreamauth: %s is empty", r)
	}
	if strings.ContainsFunc(v, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
		return "", fmt.Errorf("upstreamauth: %s holds a control character (a line break inside the secret?)", r)
	}
	return v, nil
}

// Secret is a secret value: it prints and logs as "[redacted]".
type Secret string

// Redacted is what a Secret prints as.
const Redacted = "[redacted]"

func (Secret) String() string               { return Redacted }
func (Secret) GoString() string             { return Redacted }
func (Secret) LogValue() slog.Value         { return slog.StringValue(Redacted) }
func (Secret) MarshalText() ([]byte, error) { return []byte(Redacted), nil }

// Reveal returns the secret itself, for the request that carries it.
func (s Secret) Reveal() string { return string(s) }

// watchFiles calls reload whenever one of files changes (written,
// replaced, renamed: Kubernetes swaps a symlinked directory), until ctx
// ends. It watches the directories, so a file replaced by rename is
// still followed.
func watchFiles(ctx context.Context, files []string, reload func(), log *slog.Logger) error {
	if len(files) == 0 {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("upstreamauth: watch secret files: %w", err)
	}
	dirs := map[string]bool{}
	for _, f := range files {
		d := filepath.Dir(f)
		if dirs[d] {
			continue
		}
		if err := w.Add(d); err != nil {
			w.Close()
			return fmt.Errorf("upstreamauth: watch %s: %w", d, err)
		}
		dirs[d] = true
	}
	var once sync.Once
	stop := func() { once.Do(func() { w.Close() }) }
	go func() {
		<-ctx.Done()
		stop()
	}()
	go func() {
		defer stop()
		for {
			select {
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op == fsnotify.Chmod {
					continue
				}
				reload()
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				log.Warn("upstream credential file watch", "error", err)
			}
		}
	}()
	return nil
}
