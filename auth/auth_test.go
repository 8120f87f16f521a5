package auth_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/auth"
)

func TestBearerToken(t *testing.T) {
	long := strings.Repeat("a", auth.MaxTokenLength+1)
	tests := []struct {
		name   string
		header string
		want   string
		reason auth.Reason
	}{
		{"bearer", "Bearer abc.def-ghi_jkl~+/==", "abc.def-ghi_jkl~+/==", ""},
		{"scheme case-insensitive", "bEARER tok", "tok", ""},
		{"several spaces", "Bearer    tok", "tok", ""},
		{"empty", "", "", auth.ReasonMissing},
		{"blank", "   ", "", auth.ReasonMissing},
		{"basic", "Basic dXNlcjpwYXNz", "", auth.ReasonMissing},
		{"scheme only", "Bearer", "", auth.ReasonMalformed},
		{"scheme and space", "Bearer ", "", auth.ReasonMalformed},
		{"two tokens", "Bearer a b", "", auth.ReasonMalformed},
		{"comma list", "Bearer a, Basic b", "", auth.ReasonMalformed},
		{"trailing space", "Bearer tok ", "", auth.ReasonMalformed},
		{"tab separator", "Bearer\ttok", "", auth.ReasonMissing},
		{"padding inside", "Bearer a=b", "", auth.ReasonMalformed},
		{"only padding", "Bearer ==", "", auth.ReasonMalformed},
		{"quotes", `Bearer "tok"`, "", auth.ReasonMalformed},
		{"non-ASCII", "Bearer tök", "", auth.ReasonMalformed},
		{"too long", "Bearer " + long, "", auth.ReasonMalformed},
		{"prefix of Bearer", "Bear tok", "", auth.ReasonMissing},
		{"token scheme of another kind", "Token abc", "", auth.ReasonMissing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.BearerToken(tc.header)
			if tc.reason == "" {
				if err != nil || got != tc.want {
					t.Fatalf("BearerToken(%q) = %q, %v; want %q", tc.header, got, err, tc.want)
				}
				return
			}
			sentinel := auth.ErrInvalidToken
			if tc.reason == auth.ReasonMissing {
				sentinel = auth.ErrMissingToken
			}
			wantReason(t, err, tc.reason, sentinel)
			if got != "" {
				t.Errorf("token %q returned with an error", got)
			}
		})
	}
	t.Run("values", func(t *testing.T) {
		if _, err := auth.BearerTokenFromValues(nil); !errors.Is(err, auth.ErrMissingToken) {
			t.Errorf("no header: %v", err)
		}
		_, err := auth.BearerTokenFromValues([]string{"Bearer a", "Bearer b"})
		wantReason(t, err, auth.ReasonMalformed, auth.ErrInvalidToken)
		if got, err := auth.BearerTokenFromValues([]string{"Bearer a"}); err != nil || got != "a" {
			t.Errorf("one header: %q, %v", got, err)
		}
	})
}

func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer a.b.c", "Basic x", "Bearer a b", "Bearer ===", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, err := auth.BearerToken(h)
		if err != nil {
			var ae *auth.Error
			if !errors.As(err, &ae) || tok != "" {
				t.Fatalf("BearerToken(%q) = %q, %v", h, tok, err)
			}
			return
		}
		if tok == "" || strings.ContainsAny(tok, " \t,\"") || len(tok) > auth.MaxTokenLength {
			t.Fatalf("BearerToken(%q) accepted %q", h, tok)
		}
		if !strings.HasSuffix(h, tok) {
			t.Fatalf("token %q is not the end of %q", tok, h)
		}
	})
}

func TestWWWAuthenticate(t *testing.T) {
	const md = "https://gw.example.com/.well-known/oauth-protected-resource/mcp"
	tests := []struct {
		name string
		err  *auth.Error
		url  string
		want string
	}{
		{"missing", &auth.Error{Reason: auth.ReasonMissing}, md,
			`Bearer resource_metadata="` + md + `"`},
		{"missing, with scopes to ask for", &auth.Error{Reason: auth.ReasonMissing, Scopes: []string{"tools:read"}}, md,
			`Bearer resource_metadata="` + md + `", scope="tools:read"`},
		{"expired", &auth.Error{Reason: auth.ReasonExpired}, md,
			`Bearer resource_metadata="` + md + `", error="invalid_token", error_description="token expired"`},
		{"wrong audience, no metadata URL", &auth.Error{Reason: auth.ReasonWrongAudience}, "",
			`Bearer error="invalid_token", error_description="token audience does not match this resource"`},
		{"unavailable", &auth.Error{Reason: auth.ReasonUnavailable}, md,
			`Bearer resource_metadata="` + md + `"`},
		{"quotes escaped", &auth.Error{Reason: auth.ReasonMissing}, `https://x/"a\b`,
			`Bearer resource_metadata="https://x/\"a\\b"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.WWWAuthenticate(tc.url); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, r := range auth.Reasons {
		e := &auth.Error{Reason: r}
		if e.Description() == "" || strings.ContainsAny(e.Description(), "\"\\") {
			t.Errorf("%s: description %q", r, e.Description())
		}
		if e.StatusCode() < 400 {
			t.Errorf("%s: status %d", r, e.StatusCode())
		}
	}
}

func TestCanonicalResourceURI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://mcp.example.com/mcp", "https://mcp.example.com/mcp"},
		{"HTTPS://MCP.Example.COM/mcp", "https://mcp.example.com/mcp"},
		{"https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"},
		{"http://127.0.0.1:80/mcp", "http://127.0.0.1/mcp"},
		{"https://mcp.example.com:8443/mcp", "https://mcp.example.com:8443/mcp"},
		{"https://mcp.example.com/", "https://mcp.example.com"},
		{"https://mcp.example.com", "https://mcp.example.com"},
		{"https://mcp.example.com/Tenant/MCP", "https://mcp.example.com/Tenant/MCP"},
		{"https://[::1]:9000/mcp", "https://[::1]:9000/mcp"},
		{"https://mcp.example.com/mcp?x=1", "https://mcp.example.com/mcp?x=1"},
		{"https://mcp.example.com/mcp#frag", ""},
		{"https://user@mcp.example.com/mcp", ""},
		{"/mcp", ""},
		{"urn:example:mcp", ""},
		{"ftp://mcp.example.com/mcp", ""},
	}
	for _, tc := range tests {
		got, err := auth.CanonicalResourceURI(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("CanonicalResourceURI(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CanonicalResourceURI(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestResourceMetadata(t *testing.T) {
	for in, want := range map[string]string{
		"https://gw.example.com/mcp":          "https://gw.example.com/.well-known/oauth-protected-resource/mcp",
		"https://gw.example.com/t/acme/mcp":   "https://gw.example.com/.well-known/oauth-protected-resource/t/acme/mcp",
		"https://gw.example.com":              "https://gw.example.com/.well-known/oauth-protected-resource",
		"https://GW.example.com:443/":         "https://gw.example.com/.well-known/oauth-protected-resource",
		"http://127.0.0.1:8080/mcp":           "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp",
		"https://gw.example.com/mcp?tenant=a": "https://gw.example.com/.well-known/oauth-protected-resource/mcp?tenant=a",
	} {
		got, err := auth.ResourceMetadataURL(in)
		if err != nil || got != want {
			t.Errorf("ResourceMetadataURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got := auth.ResourceMetadataPath("/mcp"); got != "/.well-known/oauth-protected-resource/mcp" {
		t.Errorf("ResourceMetadataPath = %q", got)
	}

	issuers := []auth.IssuerConfig{
		{Issuer: "https://idp-a.example.com"},
		{Issuer: "https://idp-b.example.com", Audiences: []string{"https://gw.example.com/mcp"}},
		{Issuer: "https://idp-c.example.com", Audiences: []string{"https://gw.example.com/other"}},
	}
	md, err := auth.NewResourceMetadata("https://GW.example.com/mcp", issuers, []string{"tools:read", "tools:write"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"resource":"https://gw.example.com/mcp","authorization_servers":["https://idp-a.example.com","https://idp-b.example.com"],"scopes_supported":["tools:read","tools:write"],"bearer_methods_supported":["header"]}`
	if string(b) != want {
		t.Errorf("metadata:\n got %s\nwant %s", b, want)
	}
	if _, err := auth.NewResourceMetadata("not a uri", issuers, nil); err == nil {
		t.Error("bad resource accepted")
	}
}
