package provider

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(`{
		"token_lifetime": "2m",
		"clients": [
			{"id": "svc", "secret": "s", "token_lifetime": "-1m", "not_before": "30s"},
			{"id": "spa", "redirect_uris": ["http://127.0.0.1/cb"], "access_token_format": "opaque"}
		],
		"users": [{"subject": "alice", "tenant": "acme", "roles": ["admin"]}]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TokenLifetime.D() != 2*time.Minute || cfg.SigningAlg != "RS256" || cfg.TenantClaim != "tenant" || cfg.AutoApproveUser != "alice" {
		t.Errorf("defaults: %+v", cfg)
	}
	svc, spa := cfg.client("svc"), cfg.client("spa")
	if cfg.lifetime(svc) != -time.Minute || svc.NotBefore.D() != 30*time.Second || svc.GrantTypes[0] != GrantClientCredentials ||
		svc.AccessTokenType != "at+jwt" || svc.Subject != "svc" || svc.Audience[0] != "svc" {
		t.Errorf("svc: %+v", svc)
	}
	if spa.GrantTypes[0] != GrantAuthorizationCode || spa.AccessTokenFormat != FormatOpaque || cfg.lifetime(spa) != 2*time.Minute {
		t.Errorf("spa: %+v", spa)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, json string
		want       []string
	}{
		{"unknown key", `{"clients":[{"id":"a","secret":"s","colour":"red"}]}`, []string{`unknown field "colour"`}},
		{"trailing data", `{"clients":[{"id":"a","secret":"s"}]} {}`, []string{"trailing data"}},
		{"bad duration", `{"token_lifetime":"soon","clients":[{"id":"a","secret":"s"}]}`, []string{"soon"}},
		{"everything at once", `{
			"signing_alg": "HS256",
			"auto_approve_user": "nobody",
			"clients": [
				{"id": "a", "secret": "s"}, {"id": "a", "secret": "s"},
				{"id": "pub", "grant_types": ["client_credentials"]},
				{"id": "x", "secret": "s", "resources": ["urn:no"], "access_token_format": "paseto", "claims": {"sub": "root"}}
			],
			"users": [{"subject": "u"}, {"subject": "u"}]
		}`, []string{
			`signing_alg "HS256"`, `auto_approve_user "nobody"`, `clients[1].id "a": duplicate`,
			"client_credentials needs a secret", `resource "urn:no"`, `access_token_format "paseto"`,
			`"sub" is set by the provider`, `users[1].subject "u": duplicate`,
		}},
		{"no clients", `{}`, []string{"at least one client"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.json))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestDefaultConfigIsValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Issuer = "http://127.0.0.1:1"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
