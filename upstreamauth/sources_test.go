package upstreamauth_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/upstreamauth"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func header(t *testing.T, s upstreamauth.Source) map[string][]string {
	t.Helper()
	h, err := s.Header(context.Background(), &upstreamauth.Caller{Subject: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestStaticFileReloadAndWatch(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "key")
	writeFile(t, f, "k1\n")
	s, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{Upstream: "crm", Header: "X-Api-Key", Value: upstreamauth.SecretRef{File: f}})
	if err != nil {
		t.Fatal(err)
	}
	if got := header(t, s)["x-api-key"]; len(got) != 1 || got[0] != "k1" {
		t.Fatalf("header = %q", got)
	}
	writeFile(t, f, "k2")
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := header(t, s)["x-api-key"][0]; got != "k2" {
		t.Fatalf("after Reload: %q", got)
	}
	// A file that cannot be read keeps the secret in use.
	writeFile(t, f, "")
	if err := s.Reload(); err == nil || strings.Contains(err.Error(), "k2") {
		t.Fatalf("Reload of an empty file: %v", err)
	}
	if got := header(t, s)["x-api-key"][0]; got != "k2" {
		t.Fatalf("after a failed Reload: %q", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Watch(ctx); err != nil {
		t.Fatal(err)
	}
	writeFile(t, f, "k3")
	deadline := time.Now().Add(5 * time.Second)
	for header(t, s)["x-api-key"][0] != "k3" {
		if time.Now().After(deadline) {
			t.Fatal("the watched file change was not picked up")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestStaticSchemeBasicAndEnv(t *testing.T) {
	t.Setenv("UPSTREAM_TOKEN", "tok")
	s, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{Header: "authorization", Scheme: "Bearer", Value: upstreamauth.SecretRef{Env: "UPSTREAM_TOKEN"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := header(t, s)["authorization"][0]; got != "Bearer tok" {
		t.Fatalf("bearer: %q", got)
	}
	t.Setenv("PW", "pw")
	b, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{BasicUser: "svc", Password: upstreamauth.SecretRef{Env: "PW"}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := http.NewRequest("GET", "http://x", nil)
	r.Header.Set("Authorization", header(t, b)["authorization"][0])
	if u, p, ok := r.BasicAuth(); !ok || u != "svc" || p != "pw" {
		t.Fatalf("basic: %q %q %v", u, p, ok)
	}
	if _, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{Upstream: "crm", Header: "x-api-key", Value: upstreamauth.SecretRef{Env: "UNSET_FOR_TEST"}}); err == nil || !strings.Contains(err.Error(), `"crm"`) || !strings.Contains(err.Error(), "UNSET_FOR_TEST") {
		t.Fatalf("unset variable: %v", err)
	}
}

func TestRedaction(t *testing.T) {
	t.Setenv("K", "supersecret")
	s, err := upstreamauth.NewStatic(upstreamauth.StaticOptions{Upstream: "crm", Header: "x-api-key", Value: upstreamauth.SecretRef{Env: "K"}})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "source", s, "secret", upstreamauth.Secret("supersecret"))
	cc := upstreamauth.NewClientCredentials(upstreamauth.ClientCredentialsOptions{Upstream: "crm", TokenURL: "http://127.0.0.1:1/token", ClientID: "c", ClientSecret: upstreamauth.SecretRef{Env: "K"}})
	log.Info("y", "source", cc)
	out := buf.String() + fmt.Sprintf("%v %+v %#v %s", upstreamauth.Secret("supersecret"), upstreamauth.Secret("supersecret"), upstreamauth.Secret("supersecret"), upstreamauth.Secret("supersecret"))
	if strings.Contains(out, "supersecret") {
		t.Fatalf("secret logged: %s", out)
	}
	if !strings.Contains(out, "x-api-key") || !strings.Contains(out, "token_url") {
		t.Fatalf("log lacks the source's description: %s", out)
	}
	_, err = cc.Header(context.Background(), &upstreamauth.Caller{})
	if err == nil || strings.Contains(err.Error(), "supersecret") || !strings.Contains(err.Error(), `"crm"`) {
		t.Fatalf("unreachable endpoint error: %v", err)
	}
}

// tokenServer is a token endpoint of the client-credentials grant.
type tokenServer struct {
	*httptest.Server
	issued  atomic.Int32
	refuse  atomic.Bool
	delay   time.Duration
	expires int
	mu      sync.Mutex
	forms   []map[string][]string
}

func newTokenServer(t *testing.T, expires int, delay time.Duration) *tokenServer {
	ts := &tokenServer{expires: expires, delay: delay}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		ts.mu.Lock()
		ts.forms = append(ts.forms, r.PostForm)
		ts.mu.Unlock()
		time.Sleep(ts.delay)
		w.Header().Set("Content-Type", "application/json")
		if ts.refuse.Load() || id != "gw" || secret != "s3cret" || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(401)
			w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		n := ts.issued.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("at-%d", n), "token_type": "Bearer", "expires_in": ts.expires})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestClientCredentialsCacheFlightExpiryRefused(t *testing.T) {
	t.Setenv("CS", "s3cret")
	ts := newTokenServer(t, 120, 50*time.Millisecond)
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	var mu sync.Mutex
	counts := map[string]int{}
	cc := upstreamauth.NewClientCredentials(upstreamauth.ClientCredentialsOptions{
		Upstream: "crm", TokenURL: ts.URL, ClientID: "gw", ClientSecret: upstreamauth.SecretRef{Env: "CS"},
		Scopes: []string{"a", "b"}, Audience: "crm-api", Resource: "https://crm.example/mcp",
		Now:     func() time.Time { return time.Unix(0, now.Load()) },
		Observe: func(r string) { mu.Lock(); counts[r]++; mu.Unlock() },
	})
	// Concurrent callers share one fetch.
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got := header(t, cc)["authorization"][0]; got != "Bearer at-1" {
				t.Errorf("token = %q", got)
			}
		}()
	}
	wg.Wait()
	if n := ts.issued.Load(); n != 1 {
		t.Fatalf("%d fetches for concurrent callers, want 1", n)
	}
	f := ts.forms[0]
	if f["audience"][0] != "crm-api" || f["resource"][0] != "https://crm.example/mcp" || f["scope"][0] != "a b" {
		t.Fatalf("token request form: %v", f)
	}
	// Cached until Early (30s) before expiry.
	now.Add(int64(80 * time.Second))
	if got := header(t, cc)["authorization"][0]; got != "Bearer at-1" {
		t.Fatalf("before expiry: %q", got)
	}
	now.Add(int64(15 * time.Second)) // 95s: within 30s of the 120s expiry
	if got := header(t, cc)["authorization"][0]; got != "Bearer at-2" {
		t.Fatalf("near expiry: %q", got)
	}
	// Refused drops the token once.
	if !cc.Refused(nil) {
		t.Fatal("Refused dropped no token")
	}
	if cc.Refused(nil) {
		t.Fatal("Refused dropped a token twice")
	}
	if got := header(t, cc)["authorization"][0]; got != "Bearer at-3" {
		t.Fatalf("after Refused: %q", got)
	}
	// The endpoint refusing is ErrRefused, without secrets.
	cc.Refused(nil)
	ts.refuse.Store(true)
	_, err := cc.Header(context.Background(), nil)
	if !errors.Is(err, upstreamauth.ErrRefused) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("refusal: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if counts["fetched"] != 3 || counts["refused"] != 4 || counts["hit"] < 1 {
		t.Fatalf("counts: %v", counts)
	}
}

func TestClientCredentialsWaiterCancel(t *testing.T) {
	t.Setenv("CS", "s3cret")
	ts := newTokenServer(t, 3600, 300*time.Millisecond)
	cc := upstreamauth.NewClientCredentials(upstreamauth.ClientCredentialsOptions{TokenURL: ts.URL, ClientID: "gw", ClientSecret: upstreamauth.SecretRef{Env: "CS"}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := cc.Header(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled waiter: %v", err)
	}
	// The fetch went on for the others.
	if got := header(t, cc)["authorization"][0]; got != "Bearer at-1" {
		t.Fatalf("token = %q", got)
	}
	if n := ts.issued.Load(); n != 1 {
		t.Fatalf("%d fetches", n)
	}
}
