package provider

import "time"

// Client IDs, secrets, users and URIs of DefaultConfig.
const (
	// ClientGateway is a confidential client for the client_credentials
	// grant; the gateway also uses it to call introspection.
	ClientGateway       = "gateway"
	ClientGatewaySecret = "gateway-secret"
	// ClientAgent is a confidential client for both grants.
	ClientAgent       = "agent"
	ClientAgentSecret = "agent-secret"
	// ClientExchanger is a confidential client for client_credentials and
	// RFC 8693 token exchange (any audience or resource).
	ClientExchanger       = "exchanger"
	ClientExchangerSecret = "exchanger-secret"
	// ClientPublic is a public client (code + PKCE only).
	ClientPublic = "public-agent"
	// ClientOpaque gets opaque access tokens, readable only by introspection.
	ClientOpaque       = "opaque"
	ClientOpaqueSecret = "opaque-secret"
	// ClientExpired gets tokens that expired two minutes before they were issued.
	ClientExpired = "expired"
	// ClientSlightlyExpired gets tokens that expired ten seconds ago.
	ClientSlightlyExpired = "slightly-expired"
	// ClientFuture gets tokens valid only ten minutes after issue (nbf).
	ClientFuture = "future"
	// ClientSlightlyFuture gets tokens valid ten seconds after issue (nbf).
	ClientSlightlyFuture = "slightly-future"
	// ClientPlainJWT gets JWTs with typ "JWT" instead of "at+jwt".
	ClientPlainJWT = "plain-jwt"
	// ClientES256, ClientPS256 and ClientEdDSA get tokens signed with those
	// algorithms (everyone else RS256).
	ClientES256 = "es256"
	ClientPS256 = "ps256"
	ClientEdDSA = "eddsa"
	// TestSecret is the secret of every negative-test client above.
	TestSecret = "test-secret"

	// RedirectURI is registered for ClientAgent and ClientPublic.
	RedirectURI = "http://127.0.0.1/callback"

	// UserAlice (tenant acme, roles admin) is the auto-approved user;
	// UserBob (tenant globex, role viewer) is picked with login_hint=bob.
	UserAlice   = "alice"
	TenantAlice = "acme"
	UserBob     = "bob"
	TenantBob   = "globex"
	// TenantService is the tenant of client_credentials tokens.
	TenantService = "acme"
)

// DefaultConfig is the built-in configuration: the clients and users named by
// the constants above, with defaults applied.
func DefaultConfig() *Config {
	test := func(id string, mod func(*Client)) Client {
		c := Client{ID: id, Secret: TestSecret, Tenant: TenantService}
		mod(&c)
		return c
	}
	cfg := &Config{
		TokenLifetime: Duration(DefaultTokenLifetime),
		Clients: []Client{
			{ID: ClientGateway, Secret: ClientGatewaySecret, Tenant: TenantService},
			{
				ID: ClientAgent, Secret: ClientAgentSecret, Tenant: TenantService,
				RedirectURIs: []string{RedirectURI},
				GrantTypes:   []string{GrantClientCredentials, GrantAuthorizationCode},
			},
			{
				ID: ClientExchanger, Secret: ClientExchangerSecret, Tenant: TenantService,
				GrantTypes: []string{GrantClientCredentials, GrantTokenExchange},
			},
			{ID: ClientPublic, RedirectURIs: []string{RedirectURI}},
			{ID: ClientOpaque, Secret: ClientOpaqueSecret, Tenant: TenantService, AccessTokenFormat: FormatOpaque},
			test(ClientExpired, func(c *Client) { c.TokenLifetime = DurationPtr(-2 * time.Minute) }),
			test(ClientSlightlyExpired, func(c *Client) { c.TokenLifetime = DurationPtr(-10 * time.Second) }),
			test(ClientFuture, func(c *Client) { c.NotBefore = Duration(10 * time.Minute) }),
			test(ClientSlightlyFuture, func(c *Client) { c.NotBefore = Duration(10 * time.Second) }),
			test(ClientPlainJWT, func(c *Client) { c.AccessTokenType = "JWT" }),
			test(ClientES256, func(c *Client) { c.SigningAlg = "ES256" }),
			test(ClientPS256, func(c *Client) { c.SigningAlg = "PS256" }),
			test(ClientEdDSA, func(c *Client) { c.SigningAlg = "EdDSA" }),
		},
		Users: []User{
			{Subject: UserAlice, Tenant: TenantAlice, Roles: []string{"admin"}, Email: "alice@acme.example"},
			{Subject: UserBob, Tenant: TenantBob, Roles: []string{"viewer"}, Email: "bob@globex.example"},
		},
	}
	cfg.ApplyDefaults()
	return cfg
}
