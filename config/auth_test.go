package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/auth"
)

func TestAuthIssuerConfigs(t *testing.T) {
	cfg, err := Load("testdata/valid/auth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ics := cfg.Auth.IssuerConfigs()
	if len(ics) != 2 {
		t.Fatalf("%d issuers", len(ics))
	}
	want0 := auth.IssuerConfig{
		Issuer: "https://login.example.com", Audiences: []string{"https://mcp.example.com/mcp"},
		Algorithms: auth.DefaultAlgorithms, Types: auth.DefaultTypes,
		ClockSkew: 30 * time.Second, MinJWKSRefresh: 30 * time.Second,
		TenantClaim: "tenant", SubjectClaim: "sub",
	}
	if !reflect.DeepEqual(ics[0], want0) {
		t.Errorf("issuer 0:\n got %+v\nwant %+v", ics[0], want0)
	}
	if ic := ics[1]; ic.ClockSkew != 5*time.Second || ic.MinJWKSRefresh != time.Minute || ic.ScopeClaim != "scp" ||
		ic.ClientIDClaim != "azp" || ic.SubjectClaim != "oid" || ic.Introspection == nil || ic.Introspection.ClientSecret != "s3cret" ||
		!reflect.DeepEqual(ic.Types, []string{"at+jwt", ""}) {
		t.Errorf("issuer 1: %+v", ic)
	}
	if err := auth.ValidateIssuers(ics); err != nil {
		t.Errorf("auth rejects what config accepted: %v", err)
	}
	for route, want := range map[string]string{"/mcp": "https://mcp.example.com/mcp", "/tickets/mcp": "https://mcp.example.com/tickets/mcp"} {
		if got, err := cfg.Auth.ResourceURI(route); err != nil || got != want {
			t.Errorf("ResourceURI(%s) = %q, %v; want %q", route, got, err, want)
		}
	}
	// A long JWKS refresh floor lifts the JWKS max age with it.
	long := Issuer{Issuer: "https://a.example", MinJWKSRefresh: dur("15m"), ClockSkew: dur("30s")}.issuerConfig()
	if err := auth.ValidateIssuers([]auth.IssuerConfig{long}); err != nil {
		t.Errorf("min_jwks_refresh 15m: %v", err)
	}
}

func TestIntrospectionSecretNeverPrinted(t *testing.T) {
	in := Introspection{Endpoint: "https://idp/introspect", ClientID: "gw", ClientSecret: "s3cret"}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", "introspection", in, "ptr", &in)
	out := buf.String() + fmt.Sprintf("%v %+v %s", in, in, &in)
	cfg := &Config{Auth: &Auth{Issuers: []Issuer{{Issuer: "https://a", Introspection: &in}}}}
	out += fmt.Sprintf("%v %+v", cfg.Auth.Issuers[0], *cfg.Auth)
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "REDACTED") {
		t.Errorf("secret printed or not redacted:\n%s", out)
	}
}

func TestNoAuthSectionMeansNil(t *testing.T) {
	for _, doc := range []string{"upstreams: [{name: a, url: 'http://a'}]", "upstreams: [{name: a, url: 'http://a'}]\nauth:\n"} {
		cfg, err := Parse([]byte(doc), "x.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Auth != nil {
			t.Errorf("%q: Auth = %+v, want nil", doc, cfg.Auth)
		}
	}
	_, err := Parse([]byte("upstreams: [{name: a, url: 'http://a'}]\nauth: {resource_base_url: 'https://gw.example'}\n"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "auth.issuers: at least one issuer is required") {
		t.Errorf("auth without issuers: %v", err)
	}
}
