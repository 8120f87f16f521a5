package auth

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// WellKnownProtectedResource is the RFC 9728 well-known path prefix.
const WellKnownProtectedResource = "/.well-known/oauth-protected-resource"

// ResourceMetadata is the OAuth 2.0 Protected Resource Metadata document
// (RFC 9728 section 2) of one MCP route.
type ResourceMetadata struct {
	// Resource is the route's canonical URI.
	Resource string `json:"resource"`
	// AuthorizationServers are the issuers whose tokens the route accepts.
	AuthorizationServers []string `json:"authorization_servers,omitempty"`
	// ScopesSupported are the scopes the route's tools need.
	ScopesSupported []string `json:"scopes_supported,omitempty"`
	// BearerMethodsSupported is always ["header"]: tokens are accepted in
	// the Authorization header only.
	BearerMethodsSupported []string `json:"bearer_methods_supported"`
	// ResourceName is a human-readable name, optional.
	ResourceName string `json:"resource_name,omitempty"`
	// ResourceDocumentation is a URL of documentation, optional.
	ResourceDocumentation string `json:"resource_documentation,omitempty"`
}

// NewResourceMetadata builds the metadata of the route with the given URI
// (made canonical): the authorization servers are the issuers whose
// Audiences hold the route or are empty.
func NewResourceMetadata(resource string, issuers []IssuerConfig, scopes []string) (ResourceMetadata, error) {
	canon, err := CanonicalResourceURI(resource)
	if err != nil {
		return ResourceMetadata{}, err
	}
	md := ResourceMetadata{
		Resource:               canon,
		ScopesSupported:        slices.Clone(scopes),
		BearerMethodsSupported: []string{"header"},
	}
	for _, ic := range issuers {
		if len(ic.Audiences) == 0 || slices.Contains(ic.Audiences, canon) {
			md.AuthorizationServers = append(md.AuthorizationServers, strings.TrimSpace(ic.Issuer))
		}
	}
	return md, nil
}

// ResourceMetadata builds the metadata of a route from the verifier's issuers.
func (v *Verifier) ResourceMetadata(resource string, scopes []string) (ResourceMetadata, error) {
	cfgs := make([]IssuerConfig, len(v.issuers))
	for i, iss := range v.issuers {
		cfgs[i] = iss.cfg
	}
	return NewResourceMetadata(resource, cfgs, scopes)
}

// ResourceMetadataURL returns where the metadata of a resource is served
// (RFC 9728 section 3.1): the well-known prefix inserted between the host
// and the path, e.g. https://gw.example.com/mcp ->
// https://gw.example.com/.well-known/oauth-protected-resource/mcp.
func ResourceMetadataURL(resource string) (string, error) {
	canon, err := CanonicalResourceURI(resource)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(canon)
	if err != nil {
		return "", fmt.Errorf("resource URI %q: %w", resource, err)
	}
	path := ResourceMetadataPath(u.EscapedPath())
	out := u.Scheme + "://" + u.Host + path
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, nil
}

// ResourceMetadataPath returns the metadata path of a route path:
// "/mcp" -> "/.well-known/oauth-protected-resource/mcp", "" or "/" -> the
// bare well-known path.
func ResourceMetadataPath(routePath string) string {
	if routePath == "" || routePath == "/" {
		return WellKnownProtectedResource
	}
	if !strings.HasPrefix(routePath, "/") {
		routePath = "/" + routePath
	}
	return WellKnownProtectedResource + routePath
}
