package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// introspector calls an RFC 7662 endpoint.
type introspector struct {
	endpoint     string
	clientID     string
	clientSecret string
	ttl          time.Duration
	client       *http.Client
	sem          chan struct{}
}

// introspect asks about token. A transport failure or an unexpected answer
// is ReasonUnavailable; a well-formed answer is returned as claims, with
// "active" still in it.
func (in *introspector) introspect(ctx context.Context, token string) (rawClaims, *Error) {
	select {
	case in.sem <- struct{}{}:
		defer func() { <-in.sem }()
	case <-ctx.Done():
		return nil, newError(ReasonUnavailable, ctx.Err())
	}
	ctx, cancel := context.WithTimeout(ctx, DefaultHTTPTimeout)
	defer cancel()
	form := url.Values{"token": {token}, "token_type_hint": {defaultIntrospectionTokenHint}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, newError(ReasonUnavailable, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	// RFC 6749 section 2.3.1: form-encode the credentials before Basic.
	req.SetBasicAuth(url.QueryEscape(in.clientID), url.QueryEscape(in.clientSecret))
	resp, err := in.client.Do(req)
	if err != nil {
		return nil, newError(ReasonUnavailable, fmt.Errorf("introspection: %w", err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderResponseBytes))
	if err != nil {
		return nil, newError(ReasonUnavailable, fmt.Errorf("introspection: %w", err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, newError(ReasonUnavailable, fmt.Errorf("introspection answered %s", resp.Status))
	}
	var m rawClaims
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, newError(ReasonUnavailable, fmt.Errorf("introspection answer: %w", err))
	}
	var active bool
	if raw, ok := m["active"]; !ok || json.Unmarshal(raw, &active) != nil {
		return nil, newError(ReasonUnavailable, errors.New("introspection answer has no boolean \"active\""))
	}
	if !active {
		return nil, newError(ReasonInactive, nil)
	}
	return m, nil
}
