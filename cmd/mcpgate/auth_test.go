package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// serve refuses to start when an issuer cannot be reached (no half-blind
// gateway); validate checks the auth section offline.
func TestServeAuthIssuerUnreachable(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "auth.yaml")
	body := "listeners:\n  proxy: {address: 127.0.0.1:0}\n  admin: {address: 127.0.0.1:0}\n" +
		"upstreams:\n  - name: crm\n    url: http://127.0.0.1:3000/mcp\n" +
		"auth:\n  resource_base_url: https://mcp.example.com\n  issuers:\n    - issuer: http://127.0.0.1:1\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, err := runCmd("validate", "--config", cfg); err != nil || !strings.Contains(out, "ok") {
		t.Fatalf("validate: %v %q", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var errb strings.Builder
	err := run(ctx, []string{"serve", "--config", cfg}, &strings.Builder{}, &errb)
	if err == nil || !strings.Contains(err.Error(), "auth:") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("serve: %v", err)
	}
	if strings.Contains(errb.String(), "authentication is OFF") {
		t.Errorf("auth configured, yet the no-auth warning was logged:\n%s", errb.String())
	}
}

// Without an auth section the start-up log says loudly that authentication
// is off.
func TestServeWarnsWithoutAuth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errb, out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--upstream", "http://127.0.0.1:3000/mcp", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"}, &out, &errb)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "mcpgate ready") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "authentication is OFF") {
		t.Errorf("no warning:\n%s", errb.String())
	}
}

// syncBuffer is a strings.Builder safe for the concurrent writes of a
// running command and the test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
