package provider

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRunFlagErrors(t *testing.T) {
	var stderr bytes.Buffer
	err := Run(context.Background(), []string{"-log-level", "loud", "-token-lifetime", "-1s", "-config", "/nonexistent.json", "extra"}, io.Discard, &stderr)
	if err == nil {
		t.Fatal("Run accepted bad flags")
	}
	for _, want := range []string{"unexpected arguments", "-log-level", "-token-lifetime", "read config"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q: %v", want, err)
		}
	}
}

// TestRun starts the command in-process, waits for the ready line, fetches
// the discovery document and stops it.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(`{"clients":[{"id":"c","secret":"s"}],"token_lifetime":"1m"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, []string{"-config", path, "-signing-alg", "ES256"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if !strings.HasPrefix(line, ReadyPrefix+"issuer=http://127.0.0.1:") {
		t.Fatalf("ready line = %q", line)
	}
	issuer := strings.TrimPrefix(strings.Fields(line)[2], "issuer=")
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(issuer + PathDiscovery)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("discovery: %s", resp.Status)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop")
	}
}
