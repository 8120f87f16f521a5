package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpstreamCredentials(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "key"), []byte("secret-value\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "upstreams:\n  - name: a\n    url: http://127.0.0.1:3000/mcp\n    credential:\n"
	parse := func(t *testing.T, cred string) (*Config, error) {
		t.Helper()
		path := filepath.Join(dir, "mcpgate.yaml")
		if err := os.WriteFile(path, []byte(head+cred), 0o600); err != nil {
			t.Fatal(err)
		}
		return Load(path)
	}
	for name, cred := range map[string]string{
		"api key file":      "      kind: static\n      header: X-Api-Key\n      value_file: key\n",
		"bearer env":        "      kind: static\n      header: authorization\n      scheme: Bearer\n      value_env: TOKEN\n",
		"basic":             "      kind: static\n      basic_user: svc\n      password_env: PW\n",
		"client creds":      "      kind: client_credentials\n      token_url: https://login.example.com/token\n      client_id: gw\n      client_secret_file: key\n      scopes: [a, b]\n      resource: https://crm.example/mcp\n",
		"exchange":          "      kind: token_exchange\n      token_url: https://login.example.com/token\n      client_id: gw\n      client_secret_env: CS\n      audience: crm\n      discovery: none\n",
		"none":              "      kind: none\n",
		"loopback endpoint": "      kind: client_credentials\n      token_url: http://127.0.0.1:9000/token\n      client_id: gw\n      client_secret_env: CS\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := parse(t, cred)
			if err != nil {
				t.Fatal(err)
			}
			cr := c.Upstreams[0].Credential
			if cr.ValueFile != "" && !filepath.IsAbs(cr.ValueFile) || cr.ClientSecretFile != "" && !filepath.IsAbs(cr.ClientSecretFile) {
				t.Errorf("secret file not resolved: %+v", cr)
			}
			if cr.Kind == CredentialStatic && cr.BasicUser != "" && cr.Header != "authorization" {
				t.Errorf("basic header = %q", cr.Header)
			}
			if cr.Kind == CredentialTokenExchange && cr.Subject != SubjectAccessToken {
				t.Errorf("subject default = %q", cr.Subject)
			}
		})
	}
	for name, tc := range map[string]struct{ cred, want string }{
		"no kind":          {"      header: x\n", "credential.kind: required"},
		"bad kind":         {"      kind: magic\n", `"magic" is not a credential kind`},
		"no secret":        {"      kind: static\n      header: x-api-key\n", "value_file: required"},
		"both places":      {"      kind: static\n      header: x-api-key\n      value_file: key\n      value_env: K\n", "value_env: not with value_file"},
		"missing file":     {"      kind: static\n      header: x-api-key\n      value_file: nope\n", "does not exist"},
		"cookie header":    {"      kind: static\n      header: Cookie\n      value_env: K\n", "a field the gateway or HTTP owns"},
		"foreign key":      {"      kind: static\n      header: x-api-key\n      value_env: K\n      token_url: https://x/t\n", `token_url: not a key of kind "static"`},
		"http endpoint":    {"      kind: client_credentials\n      token_url: http://login.example.com/t\n      client_id: gw\n      client_secret_env: CS\n", "must be an https:// URL"},
		"no client":        {"      kind: client_credentials\n      token_url: https://x/t\n      client_secret_env: CS\n", "client_id: required"},
		"bad resource":     {"      kind: client_credentials\n      token_url: https://x/t\n      client_id: gw\n      client_secret_env: CS\n      resource: crm\n", "absolute URI"},
		"no discovery":     {"      kind: token_exchange\n      token_url: https://x/t\n      client_id: gw\n      client_secret_env: CS\n", "discovery: required"},
		"bad subject":      {"      kind: token_exchange\n      token_url: https://x/t\n      client_id: gw\n      client_secret_env: CS\n      subject: id_token\n      discovery: none\n", `"id_token" is not a subject token`},
		"basic with colon": {"      kind: static\n      basic_user: a:b\n      password_env: PW\n", "must not contain ':'"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parse(t, tc.cred)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-value") {
				t.Fatalf("an error shows the secret: %v", err)
			}
		})
	}
}
