package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/mcpgate/mcpgate/internal/poll"
)

// Policies served as bundles in these tests.
const (
	allowAll = `package mcpgate

decision := {"allow": true, "reasons": []}
`
	maintenance = `package mcpgate

decision := {"allow": false, "reasons": [{"code": "maintenance", "cause": "Paused.", "fix": "Try again later."}]}
`
)

// testKey is an RSA key pair in PEM, for signing bundles.
func testKey(t testing.TB) (private, public string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))
}

// buildBundle makes a bundle .tar.gz with OPA's bundle package, signed
// with privateKey under key id "mcpgate" unless privateKey is "".
func buildBundle(t testing.TB, revision, rego, privateKey string) []byte {
	t.Helper()
	m, err := ast.ParseModuleWithOpts("/policy.rego", rego, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	b := bundle.Bundle{
		Manifest: bundle.Manifest{Revision: revision, Roots: &[]string{""}},
		Data:     map[string]any{},
		Modules:  []bundle.ModuleFile{{URL: "/policy.rego", Path: "/policy.rego", Raw: []byte(rego), Parsed: m}},
	}
	if privateKey != "" {
		if err := b.GenerateSignature(bundle.NewSigningConfig(privateKey, "RS256", ""), "mcpgate", false); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := bundle.NewWriter(&buf).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// bundleServer is a real HTTP bundle server with ETags.
type bundleServer struct {
	*httptest.Server
	mu          sync.Mutex
	body        []byte
	served      atomic.Int64 // 200 responses
	notModified atomic.Int64 // 304 responses
}

func newBundleServer(t testing.TB, body []byte) *bundleServer {
	s := &bundleServer{body: body}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		if r.Header.Get("If-None-Match") == etag {
			s.notModified.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(body)
		s.served.Add(1)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *bundleServer) set(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

type reloads struct{ ok, failed atomic.Int64 }

func (r *reloads) record(ok bool, _ error) {
	if ok {
		r.ok.Add(1)
	} else {
		r.failed.Add(1)
	}
}

// TestBundle: a signed bundle from a real HTTP server becomes the policy;
// an unchanged bundle is answered 304 and not reactivated; a bundle with a
// bad signature or one that does not parse is refused and counted while
// the previous policy stays; a new signed bundle is swapped in.
func TestBundle(t *testing.T) {
	priv, pub := testKey(t)
	otherPriv, _ := testKey(t)
	srv := newBundleServer(t, buildBundle(t, "r1", allowAll, priv))
	var rl reloads
	logs := &logBuffer{}
	e, err := New(t.Context(), Options{
		Declarations: testDeclarations,
		Logger:       logs.logger(),
		OnReload:     rl.record,
		Bundle:       &BundleOptions{URL: srv.URL + "/bundles/mcpgate.tar.gz", MinDelay: time.Second, MaxDelay: time.Second, PublicKey: pub},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := e.WaitBundle(ctx); err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	decide := func() *Decision {
		d, err := e.Decide(t.Context(), callInput("search_contacts", alice))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := decide(); !d.Allow || e.BundleRevision() != "r1" {
		t.Fatalf("bundle r1 not in force: %+v, revision %q", d, e.BundleRevision())
	}
	poll.Until(t, 20*time.Second, "a 304 for the unchanged bundle", func() bool { return srv.notModified.Load() >= 1 })
	if rl.ok.Load() != 1 || rl.failed.Load() != 0 {
		t.Fatalf("reloads ok=%d failed=%d after a 304, want 1 and 0", rl.ok.Load(), rl.failed.Load())
	}

	// A bundle signed with another key is refused; r1 stays.
	srv.set(buildBundle(t, "r2", maintenance, otherPriv))
	poll.Until(t, 20*time.Second, "bad signature counted as a failed reload", func() bool { return rl.failed.Load() >= 1 })
	if d := decide(); !d.Allow || e.BundleRevision() != "r1" {
		t.Fatalf("a bundle with a bad signature replaced the policy: %+v, revision %q", d, e.BundleRevision())
	}
	// So is an unsigned one.
	srv.set(buildBundle(t, "r2u", maintenance, ""))
	poll.Until(t, 20*time.Second, "unsigned bundle counted as a failed reload", func() bool { return rl.failed.Load() >= 2 })
	if !decide().Allow {
		t.Fatal("an unsigned bundle replaced the policy")
	}

	// A good bundle is swapped in and visible to the next decision.
	srv.set(buildBundle(t, "r3", maintenance, priv))
	poll.Until(t, 20*time.Second, "bundle r3 activated", func() bool { return e.BundleRevision() == "r3" })
	if d := decide(); d.Allow || reasonCodes(d)[0] != "maintenance" {
		t.Fatalf("bundle r3 not in force: %+v", d)
	}
	if rl.ok.Load() != 2 {
		t.Fatalf("successful reloads %d, want 2", rl.ok.Load())
	}
	if strings.Contains(logs.String(), "BEGIN") {
		t.Fatal("a key reached the log")
	}
}

// TestBundleNotLoadedFailsClosed: before the first bundle is active every
// message is denied with policy_not_loaded.
func TestBundleNotLoadedFailsClosed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	var rl reloads
	e, err := New(t.Context(), Options{
		Declarations: testDeclarations, OnReload: rl.record,
		Bundle: &BundleOptions{URL: srv.URL + "/b.tar.gz", MinDelay: time.Second, MaxDelay: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	poll.Until(t, 20*time.Second, "404 counted as a failed reload", func() bool { return rl.failed.Load() >= 1 })
	d, err := e.Decide(t.Context(), callInput("search_contacts", alice))
	if err != nil || d.Allow || reasonCodes(d)[0] != "policy_not_loaded" || e.Ready() {
		t.Fatalf("before a bundle: %+v, %v, ready %t", d, err, e.Ready())
	}
}

// TestCheckBundle: a built bundle is checked as mcpgate would activate it,
// its signature verified when a key is given.
func TestCheckBundle(t *testing.T) {
	priv, pub := testKey(t)
	_, otherPub := testKey(t)
	dir := t.TempDir()
	good := dir + "/good.tar.gz"
	writeFile(t, dir, "good.tar.gz", string(buildBundle(t, "r1", allowAll, priv)))
	if err := CheckBundle(t.Context(), good, pub, ""); err != nil {
		t.Fatalf("good bundle: %v", err)
	}
	if err := CheckBundle(t.Context(), good, otherPub, ""); err == nil {
		t.Fatal("a bundle signed with another key passed")
	}
	writeFile(t, dir, "nodecision.tar.gz", string(buildBundle(t, "r2", "package other\n\nx := 1\n", "")))
	if err := CheckBundle(t.Context(), dir+"/nodecision.tar.gz", "", ""); err == nil || !strings.Contains(err.Error(), Query) {
		t.Fatalf("bundle without a decision: %v", err)
	}
}
