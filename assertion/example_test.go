package assertion_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/mcpgate/mcpgate/assertion"
)

// An MCP server behind mcpgate refuses every request that does not carry a
// valid assertion for it, and reads who the call is for from the context.
func Example_upstream() {
	// The gateway side, as mcpgate runs it: a key file and a signer that
	// publishes its public keys at /.well-known/jwks.json.
	keys, err := assertion.GenerateKeySet(assertion.AlgEdDSA) // normally assertion.LoadKeySet("/etc/mcpgate/keys.json")
	if err != nil {
		log.Fatal(err)
	}
	signer, err := assertion.NewSigner(keys, assertion.SignerOptions{Issuer: "https://mcpgate.example.com"})
	if err != nil {
		log.Fatal(err)
	}
	gateway := http.NewServeMux()
	gateway.Handle(assertion.JWKSPath, signer.JWKSHandler())
	gw := httptest.NewServer(gateway)
	defer gw.Close()

	// The upstream: verify against the gateway's JWKS, wrap the MCP handler.
	verifier, err := assertion.NewVerifier(assertion.VerifierOptions{
		Issuer:   "https://mcpgate.example.com",
		Audience: "crm",
		JWKSURL:  gw.URL + assertion.JWKSPath,
	})
	if err != nil {
		log.Fatal(err)
	}
	mcp := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := assertion.FromContext(r.Context())
		if !id.HasRight("crm.read") {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		fmt.Fprintf(w, "tenant=%s subject=%s rights=%v via=%s", id.Tenant, id.Subject, id.Rights, id.Client)
	})
	upstream := httptest.NewServer(verifier.Middleware(mcp))
	defer upstream.Close()

	call := func(assertionValue string) {
		req, _ := http.NewRequest(http.MethodPost, upstream.URL+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if assertionValue != "" {
			req.Header.Set(assertion.Header, assertionValue)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	}

	// What the gateway adds to a forwarded call.
	tok, err := signer.Sign(assertion.Identity{
		Tenant:         "acme",
		Subject:        "user-42",
		Rights:         []string{"crm.read"},
		Connection:     "gt_7f3a",
		Client:         "claude-desktop",
		CredentialKind: "gateway_token",
	}, "crm")
	if err != nil {
		log.Fatal(err)
	}
	call(tok)
	// A request that did not come through the gateway.
	call("")
	// Output:
	// 200 tenant=acme subject=user-42 rights=[crm.read] via=claude-desktop
	// 401 {"jsonrpc":"2.0","id":null,"error":{"code":-32001,"message":"mcpgate assertion rejected: missing","data":{"reason":"missing"}}}
}
